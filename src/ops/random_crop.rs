//! `random_crop`: pad every side by `padding` (with `fill`, or as `padding_mode` says:
//! `edge`, `reflect`, `symmetric`), then keep an `h × w` window at a random place, as
//! MindSpore's `RandomCrop(size, padding, padding_mode=Border...)` and torchvision's do.
//! The offset comes from the sample's own random stream, so it does not depend on workers.

use crate::imgproc::geometry::PadMode;
use super::image::Sample;
use super::kernel::{Kernel, Lowered, OpDef};
use super::Size;
use crate::error::{Fault, SampleErrorKind};
use crate::spec::{Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The `random_crop` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RandomCrop {
    /// One number (square) or `[h, w]`.
    pub size: Size,
    /// Pixels of padding on every side before cropping.
    #[serde(default)]
    pub padding: usize,
    /// Value of the padding pixels (0–255 units), for `padding_mode = "constant"`.
    #[serde(default)]
    pub fill: u8,
    /// `constant` (default), `edge`, `reflect` or `symmetric`.
    #[serde(default)]
    pub padding_mode: PadMode,
}

impl RandomCrop {
    /// A random `size` window, no padding.
    pub fn new(size: impl Into<Size>) -> RandomCrop {
        RandomCrop {
            size: size.into(),
            padding: 0,
            fill: 0,
            padding_mode: PadMode::Constant,
        }
    }
}

setters!(RandomCrop {
    padding: usize,
    fill: u8,
    padding_mode: PadMode,
});

impl OpDef for RandomCrop {
    /// Fixed output size; the padded input must be at least that big (checked per sample
    /// when sizes vary).
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        self.size.check()?;
        if self.padding > 1 << 15 {
            return Err(SpecError::param(
                "padding",
                format!("{} is larger than 32768", self.padding),
            ));
        }
        let (h, w) = self.size.square();
        if let Some((ih, iw)) = input.fixed_size() {
            if ih + 2 * self.padding < h || iw + 2 * self.padding < w {
                return Err(SpecError::input(format!(
                    "random_crop {h}x{w} is larger than the padded {}x{} input",
                    ih + 2 * self.padding,
                    iw + 2 * self.padding
                )));
            }
        }
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

impl Kernel for RandomCrop {
    fn name(&self) -> &'static str {
        "random_crop"
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        let rng = &mut *s.rng;
        let at = self.place(s.img.h, s.img.w, |b| rng.below(b))?;
        let size = self.size.square();
        s.img
            .crop_mode(&mut s.input, at, size, self.padding_mode, self.fill);
        Ok(())
    }
}

impl RandomCrop {
    /// Top-left corner of the window in source coordinates (may be negative: padding),
    /// for an `ih × iw` input, drawing from `next(bound) -> [0, bound)`.
    pub fn place(
        &self,
        ih: usize,
        iw: usize,
        mut next: impl FnMut(u64) -> u64,
    ) -> Result<(isize, isize), Fault> {
        let (h, w) = self.size.square();
        let (ph, pw) = (ih + 2 * self.padding, iw + 2 * self.padding);
        if ph < h || pw < w {
            return Err(Fault::new(
                SampleErrorKind::Other,
                format!("random_crop {h}x{w} is larger than the padded {ph}x{pw} image"),
            ));
        }
        let top = next((ph - h + 1) as u64) as isize - self.padding as isize;
        let left = next((pw - w + 1) as u64) as isize - self.padding as isize;
        Ok((top, left))
    }
}
