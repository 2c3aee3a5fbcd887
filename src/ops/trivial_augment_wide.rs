//! `trivial_augment_wide`: torchvision's `TrivialAugmentWide(num_magnitude_bins=31,
//! interpolation=NEAREST, fill)` (MindSpore's `TrivialAugmentWide`): each sample applies
//! one operation drawn uniformly from the 14, at a magnitude drawn uniformly from its
//! (wide) range, the sign drawn for signed operations ([`super::augment`]).
//!
//! Draws, from the sample's stream: the operation (`below(14)`), for an operation with
//! magnitudes the bin (`below(num_magnitude_bins)`), for a signed one the sign (`below(2)`,
//! 1 meaning negative) — [`TrivialAugmentWide::draw`].

use super::augment::{check_input, wide_space, Draws, Fill, PolicyKernel};
use crate::imgproc::augment::AugOp;
use super::kernel::{Lowered, OpDef};
use crate::rng::SplitMix64;
use crate::spec::{Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

fn thirty_one() -> usize {
    31
}

/// The `trivial_augment_wide` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TrivialAugmentWide {
    /// Bins of the magnitude ranges (default 31).
    #[serde(default = "thirty_one")]
    pub num_magnitude_bins: usize,
    /// Colour of the area a geometric operation uncovers (default 0).
    #[serde(default)]
    pub fill: Fill,
}

impl Default for TrivialAugmentWide {
    fn default() -> TrivialAugmentWide {
        TrivialAugmentWide {
            num_magnitude_bins: thirty_one(),
            fill: Fill::default(),
        }
    }
}

setters!(TrivialAugmentWide {
    num_magnitude_bins: usize,
    fill: Fill,
});

impl TrivialAugmentWide {
    /// The operation one sample applies, with its magnitude, from the draws of `rng`.
    pub fn draw(&self, rng: &mut SplitMix64) -> Vec<(AugOp, f64)> {
        let bins = self.num_magnitude_bins;
        let space = wide_space();
        let s = &space[rng.below(space.len() as u64) as usize];
        let mut magnitude = if s.has_magnitudes() {
            let bin = rng.below(bins as u64) as usize;
            s.magnitude(bins, bin).map_or(0.0, f64::from)
        } else {
            0.0
        };
        if s.signed && rng.below(2) == 1 {
            magnitude = -magnitude;
        }
        vec![(s.op, magnitude)]
    }
}

impl OpDef for TrivialAugmentWide {
    /// RGB u8 HWC in, the same out.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        if !(2..=1000).contains(&self.num_magnitude_bins) {
            return Err(SpecError::param("num_magnitude_bins", "must be between 2 and 1000"));
        }
        check_input("trivial_augment_wide", input)?;
        Ok(input.clone())
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Kernel(Arc::new(PolicyKernel(self.clone())))
    }
}

impl Draws for TrivialAugmentWide {
    const NAME: &'static str = "trivial_augment_wide";

    fn steps(&self, rng: &mut SplitMix64, _size: (usize, usize)) -> Vec<(AugOp, f64)> {
        self.draw(rng)
    }

    fn fill(&self) -> Fill {
        self.fill
    }
}
