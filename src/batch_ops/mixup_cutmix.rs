//! `mixup_cutmix`: MixUp or CutMix, one of them per batch — torchvision v2's
//! `RandomChoice([MixUp(mixup_alpha), CutMix(cutmix_alpha)])`, timm's `Mixup` with
//! `switch_prob`: with probability `prob` (default 1) a batch is mixed, by CutMix with
//! probability `switch_prob` (default 0.5), else by MixUp.
//!
//! Draws, from the batch's stream: `unit()` for `prob`, `unit()` for the switch, then the
//! chosen op's `lam` (and CutMix's centre).

use super::cutmix::{cut, paste};
use super::mixup::mix;
use super::{
    check_alpha, check_prob, mixable, one, BatchContext, BatchKernel, BatchLowered, BatchOpDef,
    BatchView,
};
use crate::rng::SplitMix64;
use crate::spec::{Spec, SpecError};
use std::sync::Arc;
use serde::{Deserialize, Serialize};


/// The `mixup_cutmix` batch op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct MixUpCutMix {
    /// MixUp's Beta parameter (default 1).
    #[serde(default = "one")]
    pub mixup_alpha: f64,
    /// CutMix's Beta parameter (default 1).
    #[serde(default = "one")]
    pub cutmix_alpha: f64,
    /// Probability of CutMix rather than MixUp (default 0.5).
    #[serde(default = "crate::ops::half")]
    pub switch_prob: f64,
    /// Probability of mixing a batch (default 1).
    #[serde(default = "one")]
    pub prob: f64,
}

/// Which mix a batch drew.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mixed {
    /// MixUp by `lam`.
    MixUp(f64),
    /// CutMix with this cut.
    CutMix(super::cutmix::Cut),
}

impl MixUpCutMix {
    /// MixUp(`mixup_alpha`) or CutMix(`cutmix_alpha`), half and half, every batch.
    pub fn new(mixup_alpha: f64, cutmix_alpha: f64) -> MixUpCutMix {
        MixUpCutMix {
            mixup_alpha,
            cutmix_alpha,
            switch_prob: 0.5,
            prob: 1.0,
        }
    }

    /// What one batch of `h × w` images draws (`None`: not mixed).
    pub fn draw(&self, rng: &mut SplitMix64, h: usize, w: usize) -> Option<Mixed> {
        if rng.unit() >= self.prob {
            return None;
        }
        if rng.unit() < self.switch_prob {
            let lam = rng.beta(self.cutmix_alpha, self.cutmix_alpha);
            Some(Mixed::CutMix(cut(lam, rng, h, w)))
        } else {
            Some(Mixed::MixUp(rng.beta(self.mixup_alpha, self.mixup_alpha)))
        }
    }

}

impl BatchOpDef for MixUpCutMix {
    fn output_spec(&self, input: &Spec, at: &BatchContext) -> Result<Spec, SpecError> {
        check_alpha("mixup_alpha", self.mixup_alpha)?;
        check_alpha("cutmix_alpha", self.cutmix_alpha)?;
        check_prob("switch_prob", self.switch_prob)?;
        check_prob("prob", self.prob)?;
        mixable(input, at)
    }

    fn lower(&self) -> BatchLowered {
        BatchLowered::Batch(Arc::new(self.clone()))
    }
}

impl BatchKernel for MixUpCutMix {
    fn apply(&self, b: &mut BatchView<'_>, rng: &mut SplitMix64, scratch: &mut Vec<f32>) {
        match self.draw(rng, b.height(), b.width()) {
            Some(Mixed::MixUp(lam)) => mix(b, lam, scratch),
            Some(Mixed::CutMix(c)) => paste(b, c, scratch),
            None => {}
        }
    }
}

setters!(MixUpCutMix {
    switch_prob: f64,
    prob: f64,
});
