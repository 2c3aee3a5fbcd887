//! `random_vertical_flip`: mirror the image top-bottom with probability `prob` (default
//! 0.5), MindSpore's `RandomVerticalFlip(prob)` and torchvision's `RandomVerticalFlip(p)`,
//! drawn from the sample's own random stream (one `unit()` draw, as the horizontal flip).
//!
//! The rows are copied in reverse order into the spare buffer, straight from the source's
//! own pixels when no kernel copied them: one pass, whatever the layout or element type.

use super::image::{Elem, Sample};
use super::kernel::{Kernel, Lowered, OpDef};
use crate::error::Fault;
use crate::imgproc::geometry::flip_vertical;
use crate::spec::{Layout, Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The `random_vertical_flip` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RandomVerticalFlip {
    /// Probability of a flip (default 0.5).
    #[serde(default = "crate::spec::half")]
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
        RandomVerticalFlip::new(crate::spec::half())
    }
}

impl OpDef for RandomVerticalFlip {
    /// Same spec out.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        crate::spec::check_prob("prob", self.prob)?;
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
                flip_vertical(src, planes, h, row, &mut img.b8);
            }
            Elem::F32 => flip_vertical(&img.af, planes, h, row, &mut img.bf),
        }
        img.swap();
        Ok(())
    }

    /// Whole rows move: 4-byte pixels stay as they are.
    fn reads_rgbx(&self) -> bool {
        true
    }
}
