//! `mixup`: torchvision v2's `MixUp(alpha)`: with probability `prob` (default 1), the batch
//! is blended with itself rolled by one — `x[i] = lam · x[i] + (1 - lam) · x[i - 1]`, the
//! first sample with the last — images and soft labels alike, `lam ~ Beta(alpha, alpha)`.
//!
//! Draws, from the batch's stream ([`MixUp::draw`]): `unit()` for the probability, then
//! `lam`.

use super::mixup_cutmix::{Choice, Mixed, Mixer};
use super::{
    check_alpha, mix_rolled, mixable, one, BatchContext, BatchLowered, BatchOpDef, BatchView,
};
use crate::rng::SplitMix64;
use crate::spec::{check_prob, Spec, SpecError};
use std::sync::Arc;
use serde::{Deserialize, Serialize};

/// The `mixup` batch op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct MixUp {
    /// The Beta distribution's parameter (default 1).
    #[serde(default = "one")]
    pub alpha: f64,
    /// Probability of mixing a batch (default 1).
    #[serde(default = "one")]
    pub prob: f64,
}

impl MixUp {
    /// MixUp with `alpha`, every batch.
    pub fn new(alpha: f64) -> MixUp {
        MixUp { alpha, prob: 1.0 }
    }

    /// `lam` for one batch (`None`: this batch is not mixed).
    pub fn draw(&self, rng: &mut SplitMix64) -> Option<f64> {
        match self.mixer().draw(rng, 0, 0) {
            Some(Mixed::MixUp(lam)) => Some(lam),
            _ => None,
        }
    }

    /// The kernel: `mixup_cutmix`'s, always MixUp.
    fn mixer(&self) -> Mixer {
        Mixer {
            mixup_alpha: self.alpha,
            cutmix_alpha: self.alpha,
            choice: Choice::MixUp,
            prob: self.prob,
        }
    }
}

impl BatchOpDef for MixUp {
    fn output_spec(&self, input: &Spec, at: &BatchContext) -> Result<Spec, SpecError> {
        check_alpha("alpha", self.alpha)?;
        check_prob("prob", self.prob)?;
        mixable(input, at)
    }

    fn lower(&self) -> BatchLowered {
        BatchLowered::Batch(Arc::new(self.mixer()))
    }
}

setters!(MixUp { prob: f64 });

/// Blend the batch with itself rolled by one, by `lam`.
pub(crate) fn mix(b: &mut BatchView<'_>, lam: f64, scratch: &mut Vec<f32>) {
    let len = b.sample_len();
    mix_rolled(b.images, len, b.n, lam, scratch);
    mix_rolled(b.labels, b.classes, b.n, lam, scratch);
}
