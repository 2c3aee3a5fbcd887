//! `random_vertical_flip`: mirror the image top-bottom with probability `prob` (default
//! 0.5), MindSpore's `RandomVerticalFlip(prob)` and torchvision's `RandomVerticalFlip(p)`,
//! drawn from the sample's own random stream (one `unit()` draw, as the horizontal flip).
//!
//! The rows are copied in reverse order into the spare buffer, straight from the source's
//! own pixels when no kernel copied them: one pass, whatever the layout or element type.

use super::image::{Elem, Sample};
use super::kernel::{Kernel, Lowered, OpDef};
use crate::error::Fault;
use crate::spec::{Layout, Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The `random_vertical_flip` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RandomVerticalFlip {
    /// Probability of a flip (default 0.5).
    #[serde(default = "super::half")]
    pub prob: f64,
}

impl RandomVerticalFlip {
    /// Flip with probability `prob`.
    pub fn new(prob: f64) -> RandomVerticalFlip {
        RandomVerticalFlip { prob }
    }
}

impl Default for RandomVerticalFlip {
    /// Probability 0.5, as MindSpore and torchvision default.
    fn default() -> RandomVerticalFlip {
        RandomVerticalFlip::new(super::half())
    }
}

impl OpDef for RandomVerticalFlip {
    /// Same spec out.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        super::check_prob(self.prob)?;
        Ok(input.clone())
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Kernel(Arc::new(self.clone()))
    }
}

impl Kernel for RandomVerticalFlip {
    fn name(&self) -> &'static str {
        "random_vertical_flip"
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        if s.rng.unit() >= self.prob {
            return Ok(());
        }
        let img = &mut *s.img;
        let (h, w) = (img.h, img.w);
        let (planes, row) = match img.layout {
            Layout::Hwc => (1, w * img.stride),
            Layout::Chw => (3, w),
        };
        match img.elem {
            Elem::U8 => {
                let src = s.input.take().unwrap_or(&img.a8);
                flip_rows(src, planes, h, row, &mut img.b8);
            }
            Elem::F32 => flip_rows(&img.af, planes, h, row, &mut img.bf),
        }
        img.swap();
        Ok(())
    }

    /// Whole rows move: 4-byte pixels stay as they are.
    fn reads_rgbx(&self) -> bool {
        true
    }
}

/// `planes` planes of `h` rows of `row` elements each, every plane's rows in reverse
/// order, into `dst`.
fn flip_rows<T: Copy + Default>(src: &[T], planes: usize, h: usize, row: usize, dst: &mut Vec<T>) {
    let plane = h * row;
    dst.resize(planes * plane, T::default()); // every element is overwritten below
    if plane == 0 {
        return;
    }
    for (s, d) in src[..planes * plane]
        .chunks_exact(plane)
        .zip(dst.chunks_exact_mut(plane))
    {
        for (sr, dr) in s.chunks_exact(row).rev().zip(d.chunks_exact_mut(row)) {
            dr.copy_from_slice(sr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_reverse_within_each_plane() {
        // 2 planes of 3 rows of 2 elements
        let src: Vec<u8> = (0..12).collect();
        let mut dst = Vec::new();
        flip_rows(&src, 2, 3, 2, &mut dst);
        assert_eq!(dst, [4, 5, 2, 3, 0, 1, 10, 11, 8, 9, 6, 7]);
        // twice is the identity
        let mut back = Vec::new();
        flip_rows(&dst, 2, 3, 2, &mut back);
        assert_eq!(back, src);
    }
}
