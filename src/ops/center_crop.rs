//! `center_crop`: keep the central `h × w` window, as torchvision's `CenterCrop` places it:
//! offset `round((H - h) / 2)` with Python's round-half-to-even. An image smaller than the
//! crop is padded with zeros first, torchvision's way: `(h - H) // 2` before, the rest
//! after. (MindSpore's CenterCrop floors the offset and puts the larger half of the padding
//! first; the two differ by one pixel on odd margins. imgfeed follows torchvision, whose
//! numbers the canonical pipeline is checked against.)

use super::image::Sample;
use super::kernel::{Kernel, Lowered, OpDef};
use super::Size;
use crate::error::Fault;
use crate::spec::{Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The `center_crop` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CenterCrop {
    /// One number (square) or `[h, w]`.
    pub size: Size,
}

impl CenterCrop {
    /// Crop the centre `size` (one number: a square).
    pub fn new(size: impl Into<Size>) -> CenterCrop {
        CenterCrop { size: size.into() }
    }
}

impl OpDef for CenterCrop {
    /// Fixed output size.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        self.size.check()?;
        let (h, w) = self.size.square();
        Ok(Spec {
            height: Some(h),
            width: Some(w),
            ..input.clone()
        })
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Kernel(Arc::new(Crop(self.size.square())))
    }
}

/// The kernel: crop (or pad) the centre `(height, width)`.
#[derive(Debug)]
struct Crop((usize, usize));

impl Kernel for Crop {
    fn name(&self) -> &'static str {
        "center_crop"
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        let (ch, cw) = self.0;
        let at = (offset(s.img.h, ch), offset(s.img.w, cw));
        s.img.crop(&mut s.input, at, self.0, 0);
        Ok(())
    }

    fn center_crop(&self) -> Option<(usize, usize)> {
        Some(self.0)
    }
}

/// Python's `round(d / 2)` for an integer `d >= 0` (half to even).
fn half_round_even(d: usize) -> usize {
    let k = d / 2;
    if d % 2 == 1 && k % 2 == 1 {
        k + 1
    } else {
        k
    }
}

/// Where the crop starts in the source, per axis: negative means padding before.
pub(crate) fn offset(n: usize, crop: usize) -> isize {
    if crop <= n {
        half_round_even(n - crop) as isize
    } else {
        -(((crop - n) / 2) as isize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_follow_python_round_half_even() {
        // torchvision: int(round((h - 224) / 2.0))
        assert_eq!(offset(256, 224), 16);
        assert_eq!(offset(257, 224), 16); // 16.5 -> 16
        assert_eq!(offset(259, 224), 18); // 17.5 -> 18
        assert_eq!(offset(341, 224), 58); // 58.5 -> 58
        assert_eq!(offset(343, 224), 60); // 59.5 -> 60
        assert_eq!(offset(224, 224), 0);
        // padding: (224 - 221) // 2 = 1 before
        assert_eq!(offset(221, 224), -1);
    }
}
