//! `random_resized_crop`: keep a random box of the image, of random area and aspect ratio,
//! and resize it to `size` — torchvision's `RandomResizedCrop` and MindSpore's
//! `RandomResizedCrop` / `RandomCropDecodeResize`, the ResNet-50 training crop.
//!
//! The box is drawn as torchvision draws it (`RandomResizedCrop.get_params`): up to
//! `attempts` (10) times, an area `uniform(scale) × H × W` and an aspect ratio
//! `exp(uniform(log ratio))`, giving `w = round(sqrt(area × ratio))` and
//! `h = round(sqrt(area / ratio))` (Python's round: half to even); the first box that fits
//! is placed uniformly. When none fits, the fallback is the central crop clamped to the
//! ratio range. Every draw comes from the sample's own random stream, so the box does not
//! depend on the worker count.
//!
//! The box is then resized as `resize` would resize an image of the box's size (so with
//! `filter = "bilinear"` it is torchvision's `resized_crop`: crop, then Pillow's
//! antialiased bilinear, the filter reaching no pixel outside the box).
//!
//! Right after `decode`, a decoder that can (libjpeg-turbo) decodes only the rows and
//! columns of the box: the crop is drawn from the header's size before any pixel is
//! decoded (MindSpore's `RandomCropDecodeResize`).

use crate::imgproc::geometry::Rect;
use super::image::{bug, Elem, Sample};
use super::kernel::{Kernel, Lowered, OpDef};
use super::resize::pillow_arithmetic;
use super::Size;
use crate::imgproc::Filter;
use crate::error::Fault;
use crate::rng::SplitMix64;
use crate::spec::{Layout, Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Pixels decoded around a box beyond what it needs: libjpeg-turbo upsamples chroma at
/// a region's edges from the edge itself, not from the neighbours outside it, so the
/// outer pixel of a region can differ from the same pixel of a whole decode (fancy 2:1
/// upsampling reaches one pixel). Measured: with a margin of 1 the training pipeline's
/// output on 4 000 4:2:0 photos and on 4:4:4, 4:2:2 and greyscale files is bit for bit
/// the margin-16 output, and with 0 it is not; 2 keeps one pixel of slack. (It was one
/// iMCU, 16 pixels: the extra rows and columns cost jpeg shards 4% of their time.)
const REGION_MARGIN: usize = 2;

fn default_scale() -> [f64; 2] {
    [0.08, 1.0]
}

fn default_ratio() -> [f64; 2] {
    [3.0 / 4.0, 4.0 / 3.0]
}

fn ten() -> u32 {
    10
}

/// The `random_resized_crop` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RandomResizedCrop {
    /// Output size: one number (square) or `[h, w]`.
    pub size: Size,
    /// Range of the box's area as a share of the image's (default `[0.08, 1.0]`).
    #[serde(default = "default_scale")]
    pub scale: [f64; 2],
    /// Range of the box's aspect ratio, width / height (default `[3/4, 4/3]`).
    #[serde(default = "default_ratio")]
    pub ratio: [f64; 2],
    /// Resampling filter (default `bilinear`, Pillow's antialiased; `linear` is
    /// MindSpore's `Inter.LINEAR`).
    #[serde(default)]
    pub filter: Filter,
    /// `bilinear` only: Pillow's exact fixed-point arithmetic, the default (see `resize`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact: Option<bool>,
    /// Boxes drawn before falling back to the central crop (default 10).
    #[serde(default = "ten")]
    pub attempts: u32,
}

impl RandomResizedCrop {
    /// A random crop resized to `size`, torchvision's default scale, ratio and attempts.
    pub fn new(size: impl Into<Size>) -> RandomResizedCrop {
        RandomResizedCrop {
            size: size.into(),
            scale: default_scale(),
            ratio: default_ratio(),
            filter: Filter::default(),
            exact: None,
            attempts: ten(),
        }
    }
}

setters!(RandomResizedCrop {
    scale: [f64; 2],
    ratio: [f64; 2],
    filter: Filter,
    attempts: u32,
} optional {
    exact: bool,
});

impl OpDef for RandomResizedCrop {
    /// Checks the parameters and that the input is decoded pixels.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        self.size.check()?;
        let [s0, s1] = self.scale;
        if !(s0 > 0.0 && s0 <= s1 && s1.is_finite()) {
            return Err(SpecError::param(
                "scale",
                format!("must be 0 < min <= max, got [{s0}, {s1}]"),
            ));
        }
        let [r0, r1] = self.ratio;
        if !(r0 > 0.0 && r0 <= r1 && r1.is_finite()) {
            return Err(SpecError::param(
                "ratio",
                format!("must be 0 < min <= max, got [{r0}, {r1}]"),
            ));
        }
        if self.attempts > 1000 {
            return Err(SpecError::param("attempts", "must be at most 1000"));
        }
        if self.exact == Some(true) && self.filter != Filter::Bilinear {
            return Err(SpecError::param(
                "exact",
                "is Pillow's bilinear arithmetic; it needs filter = \"bilinear\"",
            ));
        }
        if input.layout != Layout::Hwc {
            return Err(SpecError::input(
                "random_resized_crop needs HWC images: put hwc_to_chw after it",
            ));
        }
        let (h, w) = self.size.square();
        Ok(Spec {
            height: Some(h),
            width: Some(w),
            ..input.clone()
        })
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Kernel(Arc::new(self.clone()))
    }
}

impl Kernel for RandomResizedCrop {
    fn name(&self) -> &'static str {
        "random_resized_crop"
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        let img = &mut *s.img;
        // The box: drawn while decoding (from the header) or now, from the same stream
        // either way.
        let b = match img.drawn.take() {
            Some(b) => b,
            None => self.sample_box(img.full.0, img.full.1, s.rng),
        };
        let (top, left) = (
            b.top as isize - img.origin.0 as isize,
            b.left as isize - img.origin.1 as isize,
        );
        let (bh, bw) = (b.height, b.width);
        if top < 0 || left < 0 || top as usize + bh > img.h || left as usize + bw > img.w {
            return Err(bug(format!(
                "random_resized_crop: box {bh}x{bw} at ({top}, {left}) is outside the \
                 decoded {}x{} pixels",
                img.h, img.w
            )));
        }
        let exact = pillow_arithmetic(self.filter, self.exact);
        let out = self.size.square();
        if exact && img.elem == Elem::U8 && img.layout == Layout::Hwc {
            // Pillow's arithmetic reads the box where it lies: in the decoded rectangle,
            // or in the source's own pixels (raw shards).
            let (src, stride) = match s.input.take() {
                Some(b) => (b, 3),
                None => (&img.a8[..], img.stride),
            };
            let at = Rect {
                top: top as usize,
                left: left as usize,
                ..b
            };
            let size = (img.h, img.w);
            s.tools
                .resizer
                .pillow_box(src, stride, size, at, out, &mut img.b8)?;
            img.swap();
            (img.h, img.w) = out;
        } else {
            // From the source's own pixels (raw shards) when no kernel copied them.
            img.crop(&mut s.input, (top, left), (bh, bw), 0);
            img.settle();
            let arithmetic = (self.filter, exact);
            img.resize(&mut s.tools.resizer, s.input.take(), arithmetic, out, None)?;
        }
        Ok(())
    }

    fn reads_rgbx(&self) -> bool {
        true
    }

    fn needs_hwc(&self) -> bool {
        true
    }

    fn region_note(&self) -> Option<&'static str> {
        Some("decode + random_resized_crop: JPEGs decode only the box (libjpeg-turbo region decode)")
    }

    fn region(&self, h: usize, w: usize, rng: &mut SplitMix64) -> (Option<Rect>, Option<Rect>) {
        let b = self.sample_box(h, w, rng);
        (Some(b.grow(REGION_MARGIN, h, w)), Some(b))
    }
}

impl RandomResizedCrop {
    /// The box `(top, left, height, width)` for an `h × w` image (both positive).
    pub fn sample_box(&self, h: usize, w: usize, rng: &mut SplitMix64) -> Rect {
        let area = (h * w) as f64;
        let (lr0, lr1) = (self.ratio[0].ln(), self.ratio[1].ln());
        let uniform = |rng: &mut SplitMix64, a: f64, b: f64| a + (b - a) * rng.unit();
        for _ in 0..self.attempts {
            let target = area * uniform(rng, self.scale[0], self.scale[1]);
            let aspect = uniform(rng, lr0, lr1).exp();
            let bw = (target * aspect).sqrt().round_ties_even();
            let bh = (target / aspect).sqrt().round_ties_even();
            if bw > 0.0 && bh > 0.0 && bw <= w as f64 && bh <= h as f64 {
                let (bh, bw) = (bh as usize, bw as usize);
                let top = rng.below((h - bh + 1) as u64) as usize;
                let left = rng.below((w - bw + 1) as u64) as usize;
                return Rect {
                    top,
                    left,
                    height: bh,
                    width: bw,
                };
            }
        }
        // Central crop, clamped to the ratio range.
        let in_ratio = w as f64 / h as f64;
        let (bh, bw) = if in_ratio < self.ratio[0] {
            let bh = (w as f64 / self.ratio[0]).round_ties_even() as usize;
            (bh.clamp(1, h), w)
        } else if in_ratio > self.ratio[1] {
            let bw = (h as f64 * self.ratio[1]).round_ties_even() as usize;
            (h, bw.clamp(1, w))
        } else {
            (h, w)
        };
        Rect {
            top: (h - bh) / 2,
            left: (w - bw) / 2,
            height: bh,
            width: bw,
        }
    }
}
