//! Per-sample stages. Each op is a plain struct in its own file with the parameters a
//! pipeline file gives it and an `output_spec` that checks it against the spec of its input
//! before any pixel is read; the kernels it runs live beside it.
//!
//! In a pipeline file an op is a `[[ops]]` table tagged by `op`:
//!
//! ```toml
//! [[ops]]
//! op = "resize"
//! size = 256
//! filter = "bilinear"
//! ```

use crate::spec::Spec;
use serde::{Deserialize, Serialize};

#[macro_use]
mod simd;

pub mod center_crop;
pub mod decode;
pub mod geometry;
pub mod hwc_to_chw;
#[cfg(imgfeed_libjpeg)]
pub mod libjpeg;
pub mod normalize;
pub mod pillow_bilinear;
pub mod pointwise;
pub mod random_crop;
pub mod random_horizontal_flip;
pub mod random_resized_crop;
pub mod rescale;
pub mod resize;
#[cfg(feature = "turbojpeg")]
pub mod turbo;
pub mod type_cast;

pub use center_crop::CenterCrop;
pub use decode::{jpeg_decoder, Decode, JpegBackend};
pub use hwc_to_chw::HwcToChw;
pub use normalize::Normalize;
pub use random_crop::RandomCrop;
pub use random_horizontal_flip::RandomHorizontalFlip;
pub use random_resized_crop::RandomResizedCrop;
pub use rescale::Rescale;
pub use resize::{Filter, Resize};
pub use type_cast::TypeCast;

/// A size given as one number (square, or the shorter side for `resize`) or as `[h, w]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Size {
    /// One number.
    One(usize),
    /// `[height, width]`.
    Two([usize; 2]),
}

impl Size {
    /// `(height, width)`, a single number meaning a square.
    pub fn square(self) -> (usize, usize) {
        match self {
            Size::One(s) => (s, s),
            Size::Two([h, w]) => (h, w),
        }
    }
    fn check(self, what: &str) -> Result<(), String> {
        let (h, w) = self.square();
        if h == 0 || w == 0 {
            return Err(format!("{what}: size must be positive"));
        }
        if h > 1 << 15 || w > 1 << 15 {
            return Err(format!("{what}: size {h}x{w} is larger than 32768"));
        }
        Ok(())
    }
}

/// One per-sample stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// Encoded bytes → RGB u8 HWC.
    Decode(Decode),
    /// Resize (shorter side keeping aspect, or exact).
    Resize(Resize),
    /// Crop the centre (zero padding when the image is smaller).
    CenterCrop(CenterCrop),
    /// Crop at a random place, after optional padding.
    RandomCrop(RandomCrop),
    /// Crop a box of random area and aspect ratio and resize it (the training crop).
    RandomResizedCrop(RandomResizedCrop),
    /// Mirror left-right with some probability.
    RandomHorizontalFlip(RandomHorizontalFlip),
    /// `x * rescale + shift`.
    Rescale(Rescale),
    /// `(x - mean) / std` per channel.
    Normalize(Normalize),
    /// Interleaved → planar.
    HwcToChw(HwcToChw),
    /// Change the label type.
    TypeCast(TypeCast),
}

impl Op {
    /// The name used in pipeline files.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Decode(_) => "decode",
            Op::Resize(_) => "resize",
            Op::CenterCrop(_) => "center_crop",
            Op::RandomCrop(_) => "random_crop",
            Op::RandomResizedCrop(_) => "random_resized_crop",
            Op::RandomHorizontalFlip(_) => "random_horizontal_flip",
            Op::Rescale(_) => "rescale",
            Op::Normalize(_) => "normalize",
            Op::HwcToChw(_) => "hwc_to_chw",
            Op::TypeCast(_) => "type_cast",
        }
    }

    /// The spec after this op, or why the op cannot take `input`.
    pub fn output_spec(&self, input: &Spec) -> Result<Spec, String> {
        if !input.encoded || matches!(self, Op::Decode(_) | Op::TypeCast(_)) {
            let out = match self {
                Op::Decode(o) => o.output_spec(input),
                Op::Resize(o) => o.output_spec(input),
                Op::CenterCrop(o) => o.output_spec(input),
                Op::RandomCrop(o) => o.output_spec(input),
                Op::RandomResizedCrop(o) => o.output_spec(input),
                Op::RandomHorizontalFlip(o) => o.output_spec(input),
                Op::Rescale(o) => o.output_spec(input),
                Op::Normalize(o) => o.output_spec(input),
                Op::HwcToChw(o) => o.output_spec(input),
                Op::TypeCast(o) => o.output_spec(input),
            };
            // Only the source's own pixels are passed through by `decode`.
            out.map(|s| Spec {
                source_pixels: false,
                ..s
            })
        } else {
            Err("the samples are still encoded bytes: put `decode` first".into())
        }
    }
}
