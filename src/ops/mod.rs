//! Per-sample stages. An op is one file under `src/ops/`: the parameters a pipeline file
//! gives it (a serde struct), its spec rule (checked against the spec of its input before
//! any pixel is read), its fusion hints and its kernel(s) — see `kernel.rs`. The list below
//! registers it: one line, its module and type, and its name in pipeline files is its
//! module's name.
//!
//! In a pipeline file an op is a `[[ops]]` table tagged by `op`:
//!
//! ```toml
//! [[ops]]
//! op = "resize"
//! size = 256
//! filter = "bilinear"
//! ```

use crate::spec::{Spec, SpecError};
use kernel::{Lowered, OpDef};
use serde::{Deserialize, Serialize};

pub mod augment;
pub(crate) mod image;
pub(crate) mod kernel;
pub use kernel::Undo;

/// Declares the ops: for each, its module (`pub mod`), its type (re-exported here) and
/// its variant of [`Op`], named in pipeline files as the module is.
macro_rules! ops {
    ($($(#[$doc:meta])* $module:ident :: $ty:ident,)*) => {
        $(pub mod $module;)*
        $(pub use $module::$ty;)*

        /// One per-sample stage.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "op", rename_all = "snake_case")]
        #[non_exhaustive]
        pub enum Op {
            $($(#[$doc])* $ty($ty),)*
        }

        impl Op {
            /// Every op's name in pipeline files.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($module)),*];

            /// The name used in pipeline files.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Op::$ty(_) => stringify!($module),)*
                }
            }

            fn def(&self) -> &dyn OpDef {
                match self {
                    $(Op::$ty(o) => o,)*
                }
            }
        }
    };
}

ops! {
    /// Encoded bytes → RGB u8 HWC.
    decode::Decode,
    /// Resize (shorter side keeping aspect, or exact).
    resize::Resize,
    /// Crop the centre (zero padding when the image is smaller).
    center_crop::CenterCrop,
    /// Crop at a random place, after optional padding.
    random_crop::RandomCrop,
    /// Add pixels around the image (constant, edge, reflect or symmetric).
    pad::Pad,
    /// Crop a box of random area and aspect ratio and resize it (the training crop).
    random_resized_crop::RandomResizedCrop,
    /// Mirror left-right with some probability.
    random_horizontal_flip::RandomHorizontalFlip,
    /// Mirror top-bottom with some probability.
    random_vertical_flip::RandomVerticalFlip,
    /// Jitter brightness, contrast, saturation and hue in a random order.
    random_color_adjust::RandomColorAdjust,
    /// One of torchvision's learned AutoAugment policies.
    auto_augment::AutoAugment,
    /// RandAugment: `num_ops` random operations at one magnitude.
    rand_augment::RandAugment,
    /// TrivialAugmentWide: one random operation at a random magnitude.
    trivial_augment_wide::TrivialAugmentWide,
    /// Erase a random box (after normalize, as torchvision).
    random_erasing::RandomErasing,
    /// `x * rescale + shift`.
    rescale::Rescale,
    /// `(x - mean) / std` per channel.
    normalize::Normalize,
    /// Interleaved → planar.
    hwc_to_chw::HwcToChw,
    /// Change the label type.
    type_cast::TypeCast,
}

/// A size given as one number (square, or the shorter side for `resize`) or as `[h, w]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Size {
    /// One number.
    One(usize),
    /// `[height, width]`.
    Two([usize; 2]),
}

impl From<usize> for Size {
    fn from(s: usize) -> Size {
        Size::One(s)
    }
}

impl From<[usize; 2]> for Size {
    fn from(hw: [usize; 2]) -> Size {
        Size::Two(hw)
    }
}

impl Size {
    /// `(height, width)`, a single number meaning a square.
    pub fn square(self) -> (usize, usize) {
        match self {
            Size::One(s) => (s, s),
            Size::Two([h, w]) => (h, w),
        }
    }
    fn check(self) -> Result<(), SpecError> {
        let (h, w) = self.square();
        if h == 0 || w == 0 {
            return Err(SpecError::param("size", "must be positive"));
        }
        if h > 1 << 15 || w > 1 << 15 {
            return Err(SpecError::param(
                "size",
                format!("{h}x{w} is larger than 32768"),
            ));
        }
        Ok(())
    }
}

impl Op {
    /// The spec after this op, or why the op cannot take `input`.
    pub fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        if input.encoded && !self.def().takes_encoded() {
            return Err(SpecError::input(
                "the samples are still encoded bytes: put `decode` first",
            ));
        }
        if input.dtype.is_half()
            && matches!(self.lower(input), Lowered::Kernel(_) | Lowered::Affine(_))
        {
            return Err(SpecError::input(format!(
                "the image is already {} (type_cast): cast it last, after every op that \
                 changes pixels",
                input.dtype.name()
            )));
        }
        // Only the source's own pixels are passed through by `decode`.
        self.def().output_spec(input).map(|s| Spec {
            source_pixels: false,
            ..s
        })
    }

    /// What the op compiles to for the (checked) `input`.
    pub(crate) fn lower(&self, input: &Spec) -> Lowered {
        self.def().lower(input)
    }

    /// How its output, for the (checked) `input`, is turned back into a picture (see
    /// [`Undo`]).
    pub fn undo(&self, input: &Spec) -> Undo {
        self.def().undo(input)
    }
}
