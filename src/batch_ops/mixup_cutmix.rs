//! `mixup_cutmix`: MixUp or CutMix, one of them per batch — torchvision v2's
//! `RandomChoice([MixUp(mixup_alpha), CutMix(cutmix_alpha)])`, timm's `Mixup` with
//! `switch_prob`: with probability `prob` (default 1) a batch is mixed, by CutMix with
//! probability `switch_prob` (default 0.5), else by MixUp.
//!
//! Draws, from the batch's stream: `unit()` for `prob`, `unit()` for the switch, then the
//! chosen op's `lam` (and CutMix's centre).
//!
//! Its kernel, `Mixer`, is also `mixup`'s and `cutmix`'s: the same draws with the choice
//! fixed (and no `unit()` for a switch).

use super::cutmix::{cut, paste};
use super::mixup::mix;
use super::{
    check_alpha, mixable, one, BatchContext, BatchKernel, BatchLowered, BatchOpDef,
    BatchView,
};
use crate::rng::SplitMix64;
use crate::spec::{check_prob, Spec, SpecError};
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
    #[serde(default = "crate::spec::half")]
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
        self.mixer().draw(rng, h, w)
    }

    fn mixer(&self) -> Mixer {
        Mixer {
            mixup_alpha: self.mixup_alpha,
            cutmix_alpha: self.cutmix_alpha,
            choice: Choice::Switch(self.switch_prob),
            prob: self.prob,
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
        BatchLowered::Batch(Arc::new(self.mixer()))
    }
}

/// Which mix a mixed batch gets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Choice {
    /// Always MixUp (`mixup`).
    MixUp,
    /// Always CutMix (`cutmix`).
    CutMix,
    /// CutMix with this probability, drawn per batch, else MixUp (`mixup_cutmix`).
    Switch(f64),
}

/// The kernel of the three mixing ops: with probability `prob` a batch is mixed, by the mix
/// `choice` picks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Mixer {
    /// MixUp's Beta parameter.
    pub(crate) mixup_alpha: f64,
    /// CutMix's Beta parameter.
    pub(crate) cutmix_alpha: f64,
    /// Which mix.
    pub(crate) choice: Choice,
    /// Probability of mixing a batch.
    pub(crate) prob: f64,
}

impl Mixer {
    /// What one batch of `h × w` images draws (`None`: not mixed): `unit()` for `prob`,
    /// `unit()` for a [`Choice::Switch`], then the mix's `lam` (and CutMix's centre).
    pub(crate) fn draw(&self, rng: &mut SplitMix64, h: usize, w: usize) -> Option<Mixed> {
        if rng.unit() >= self.prob {
            return None;
        }
        let cutmix = match self.choice {
            Choice::MixUp => false,
            Choice::CutMix => true,
            Choice::Switch(p) => rng.unit() < p,
        };
        Some(if cutmix {
            let lam = rng.beta(self.cutmix_alpha, self.cutmix_alpha);
            Mixed::CutMix(cut(lam, rng, h, w))
        } else {
            Mixed::MixUp(rng.beta(self.mixup_alpha, self.mixup_alpha))
        })
    }
}

impl BatchKernel for Mixer {
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
