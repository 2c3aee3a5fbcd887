//! `rand_augment`: torchvision's `RandAugment(num_ops=2, magnitude=9,
//! num_magnitude_bins=31, interpolation=NEAREST, fill)` (MindSpore's `RandAugment`): each
//! sample applies `num_ops` operations drawn uniformly from the 14 (Identity, ShearX/Y,
//! TranslateX/Y, Rotate, Brightness, Color, Contrast, Sharpness, Posterize, Solarize,
//! AutoContrast, Equalize), all at magnitude bin `magnitude`, the sign drawn for signed
//! operations ([`super::augment`]).
//!
//! Draws, from the sample's stream, per operation: its index (`below(14)`), then, for a
//! signed operation, the sign (`below(2)`, 1 meaning negative) — [`RandAugment::draw`].

use super::augment::{check_input, classic_space, Draws, Fill, PolicyKernel};
use crate::imgproc::augment::AugOp;
use super::kernel::{Lowered, OpDef};
use crate::rng::SplitMix64;
use crate::spec::{Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

fn two() -> usize {
    2
}

fn nine() -> usize {
    9
}

fn thirty_one() -> usize {
    31
}

/// The `rand_augment` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RandAugment {
    /// Operations a sample applies (default 2).
    #[serde(default = "two")]
    pub num_ops: usize,
    /// The magnitude bin, below `num_magnitude_bins` (default 9).
    #[serde(default = "nine")]
    pub magnitude: usize,
    /// Bins of the magnitude ranges (default 31).
    #[serde(default = "thirty_one")]
    pub num_magnitude_bins: usize,
    /// Colour of the area a geometric operation uncovers (default 0).
    #[serde(default)]
    pub fill: Fill,
}

impl Default for RandAugment {
    fn default() -> RandAugment {
        RandAugment {
            num_ops: two(),
            magnitude: nine(),
            num_magnitude_bins: thirty_one(),
            fill: Fill::default(),
        }
    }
}

impl RandAugment {
    /// `num_ops` operations at magnitude bin `magnitude` of 31.
    pub fn new(num_ops: usize, magnitude: usize) -> RandAugment {
        RandAugment {
            num_ops,
            magnitude,
            ..RandAugment::default()
        }
    }

    /// The operations one sample of `size` (height, width) applies, with their
    /// magnitudes, from the draws of `rng`.
    pub fn draw(&self, rng: &mut SplitMix64, size: (usize, usize)) -> Vec<(AugOp, f64)> {
        let space = classic_space(size, true);
        (0..self.num_ops)
            .map(|_| {
                let s = &space[rng.below(space.len() as u64) as usize];
                let mut magnitude = s
                    .magnitude(self.num_magnitude_bins, self.magnitude)
                    .map_or(0.0, f64::from);
                if s.signed && rng.below(2) == 1 {
                    magnitude = -magnitude;
                }
                (s.op, magnitude)
            })
            .collect()
    }
}

setters!(RandAugment {
    num_magnitude_bins: usize,
    fill: Fill,
});

impl OpDef for RandAugment {
    /// RGB u8 HWC in, the same out.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        if !(2..=1000).contains(&self.num_magnitude_bins) {
            return Err(SpecError::param("num_magnitude_bins", "must be between 2 and 1000"));
        }
        if self.magnitude >= self.num_magnitude_bins {
            return Err(SpecError::param(
                "magnitude",
                format!("{} must be below num_magnitude_bins {}", self.magnitude, self.num_magnitude_bins),
            ));
        }
        if self.num_ops > 100 {
            return Err(SpecError::param("num_ops", "must be at most 100"));
        }
        check_input("rand_augment", input)?;
        Ok(input.clone())
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Kernel(Arc::new(PolicyKernel(self.clone())))
    }
}

impl Draws for RandAugment {
    const NAME: &'static str = "rand_augment";

    fn steps(&self, rng: &mut SplitMix64, size: (usize, usize)) -> Vec<(AugOp, f64)> {
        self.draw(rng, size)
    }

    fn fill(&self) -> Fill {
        self.fill
    }
}
