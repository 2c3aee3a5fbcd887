//! `random_horizontal_flip`: mirror the image left-right with probability `prob`, drawn
//! from the sample's own random stream.

use super::image::Sample;
use super::kernel::{Kernel, Lowered, OpDef};
use crate::error::Fault;
use crate::spec::{Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The `random_horizontal_flip` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RandomHorizontalFlip {
    /// Probability of a flip (default 0.5).
    #[serde(default = "super::half")]
    pub prob: f64,
}

impl RandomHorizontalFlip {
    /// Flip with probability `prob`.
    pub fn new(prob: f64) -> RandomHorizontalFlip {
        RandomHorizontalFlip { prob }
    }
}

impl Default for RandomHorizontalFlip {
    /// Probability 0.5, as MindSpore and torchvision default.
    fn default() -> RandomHorizontalFlip {
        RandomHorizontalFlip::new(super::half())
    }
}

impl OpDef for RandomHorizontalFlip {
    /// Same spec out.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        super::check_prob(self.prob)?;
        Ok(input.clone())
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Kernel(Arc::new(self.clone()))
    }
}

/// The kernel draws; the flip itself is deferred ([`super::image::Held::mirror`]): the
/// next kernel applies it first, or the final write mirrors the rows as it writes them.
impl Kernel for RandomHorizontalFlip {
    fn name(&self) -> &'static str {
        "flip"
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        if s.rng.unit() < self.prob {
            s.img.mirror = !s.img.mirror;
        }
        Ok(())
    }

    fn reads_rgbx(&self) -> bool {
        true
    }
}
