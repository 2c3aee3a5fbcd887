//! `auto_augment`: torchvision's `AutoAugment(policy, interpolation=NEAREST, fill)`
//! (MindSpore's `AutoAugment`): each sample picks one of the policy's 25 sub-policies and
//! applies each of its two operations with that operation's probability, at its magnitude
//! bin (of 10), the sign drawn for signed operations — the operations as torchvision
//! computes them on a PIL image ([`super::augment`]).
//!
//! Draws, from the sample's stream, as torchvision's `get_params`: the sub-policy
//! (`below(25)`), two probabilities (`unit()`), two signs (`below(2)`, 0 meaning negative)
//! — [`AutoAugment::draw`].

use super::augment::{check_input, classic_space, Draws, Fill, PolicyKernel};
use crate::imgproc::augment::AugOp;
use super::kernel::{Lowered, OpDef};
use crate::rng::SplitMix64;
use crate::spec::{Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Which learned policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Learned on ImageNet (the default).
    #[default]
    Imagenet,
    /// Learned on CIFAR-10.
    Cifar10,
    /// Learned on SVHN.
    Svhn,
}

/// The `auto_augment` op.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AutoAugment {
    /// `imagenet` (default), `cifar10` or `svhn`.
    #[serde(default)]
    pub policy: Policy,
    /// Colour of the area a geometric operation uncovers (default 0).
    #[serde(default)]
    pub fill: Fill,
}

impl AutoAugment {
    /// The `policy`, black fill.
    pub fn new(policy: Policy) -> AutoAugment {
        AutoAugment {
            policy,
            fill: Fill::default(),
        }
    }
}

setters!(AutoAugment { fill: Fill });

/// `(operation, probability, magnitude bin)`, two to a sub-policy.
type SubPolicy = [(AugOp, f64, Option<usize>); 2];

fn policies(policy: Policy) -> &'static [SubPolicy; 25] {
    use AugOp::*;
    const IMAGENET: [SubPolicy; 25] = [
        [(Posterize, 0.4, Some(8)), (Rotate, 0.6, Some(9))],
        [(Solarize, 0.6, Some(5)), (AutoContrast, 0.6, None)],
        [(Equalize, 0.8, None), (Equalize, 0.6, None)],
        [(Posterize, 0.6, Some(7)), (Posterize, 0.6, Some(6))],
        [(Equalize, 0.4, None), (Solarize, 0.2, Some(4))],
        [(Equalize, 0.4, None), (Rotate, 0.8, Some(8))],
        [(Solarize, 0.6, Some(3)), (Equalize, 0.6, None)],
        [(Posterize, 0.8, Some(5)), (Equalize, 1.0, None)],
        [(Rotate, 0.2, Some(3)), (Solarize, 0.6, Some(8))],
        [(Equalize, 0.6, None), (Posterize, 0.4, Some(6))],
        [(Rotate, 0.8, Some(8)), (Color, 0.4, Some(0))],
        [(Rotate, 0.4, Some(9)), (Equalize, 0.6, None)],
        [(Equalize, 0.0, None), (Equalize, 0.8, None)],
        [(Invert, 0.6, None), (Equalize, 1.0, None)],
        [(Color, 0.6, Some(4)), (Contrast, 1.0, Some(8))],
        [(Rotate, 0.8, Some(8)), (Color, 1.0, Some(2))],
        [(Color, 0.8, Some(8)), (Solarize, 0.8, Some(7))],
        [(Sharpness, 0.4, Some(7)), (Invert, 0.6, None)],
        [(ShearX, 0.6, Some(5)), (Equalize, 1.0, None)],
        [(Color, 0.4, Some(0)), (Equalize, 0.6, None)],
        [(Equalize, 0.4, None), (Solarize, 0.2, Some(4))],
        [(Solarize, 0.6, Some(5)), (AutoContrast, 0.6, None)],
        [(Invert, 0.6, None), (Equalize, 1.0, None)],
        [(Color, 0.6, Some(4)), (Contrast, 1.0, Some(8))],
        [(Equalize, 0.8, None), (Equalize, 0.6, None)],
    ];
    const CIFAR10: [SubPolicy; 25] = [
        [(Invert, 0.1, None), (Contrast, 0.2, Some(6))],
        [(Rotate, 0.7, Some(2)), (TranslateX, 0.3, Some(9))],
        [(Sharpness, 0.8, Some(1)), (Sharpness, 0.9, Some(3))],
        [(ShearY, 0.5, Some(8)), (TranslateY, 0.7, Some(9))],
        [(AutoContrast, 0.5, None), (Equalize, 0.9, None)],
        [(ShearY, 0.2, Some(7)), (Posterize, 0.3, Some(7))],
        [(Color, 0.4, Some(3)), (Brightness, 0.6, Some(7))],
        [(Sharpness, 0.3, Some(9)), (Brightness, 0.7, Some(9))],
        [(Equalize, 0.6, None), (Equalize, 0.5, None)],
        [(Contrast, 0.6, Some(7)), (Sharpness, 0.6, Some(5))],
        [(Color, 0.7, Some(7)), (TranslateX, 0.5, Some(8))],
        [(Equalize, 0.3, None), (AutoContrast, 0.4, None)],
        [(TranslateY, 0.4, Some(3)), (Sharpness, 0.2, Some(6))],
        [(Brightness, 0.9, Some(6)), (Color, 0.2, Some(8))],
        [(Solarize, 0.5, Some(2)), (Invert, 0.0, None)],
        [(Equalize, 0.2, None), (AutoContrast, 0.6, None)],
        [(Equalize, 0.2, None), (Equalize, 0.6, None)],
        [(Color, 0.9, Some(9)), (Equalize, 0.6, None)],
        [(AutoContrast, 0.8, None), (Solarize, 0.2, Some(8))],
        [(Brightness, 0.1, Some(3)), (Color, 0.7, Some(0))],
        [(Solarize, 0.4, Some(5)), (AutoContrast, 0.9, None)],
        [(TranslateY, 0.9, Some(9)), (TranslateY, 0.7, Some(9))],
        [(AutoContrast, 0.9, None), (Solarize, 0.8, Some(3))],
        [(Equalize, 0.8, None), (Invert, 0.1, None)],
        [(TranslateY, 0.7, Some(9)), (AutoContrast, 0.9, None)],
    ];
    const SVHN: [SubPolicy; 25] = [
        [(ShearX, 0.9, Some(4)), (Invert, 0.2, None)],
        [(ShearY, 0.9, Some(8)), (Invert, 0.7, None)],
        [(Equalize, 0.6, None), (Solarize, 0.6, Some(6))],
        [(Invert, 0.9, None), (Equalize, 0.6, None)],
        [(Equalize, 0.6, None), (Rotate, 0.9, Some(3))],
        [(ShearX, 0.9, Some(4)), (AutoContrast, 0.8, None)],
        [(ShearY, 0.9, Some(8)), (Invert, 0.4, None)],
        [(ShearY, 0.9, Some(5)), (Solarize, 0.2, Some(6))],
        [(Invert, 0.9, None), (AutoContrast, 0.8, None)],
        [(Equalize, 0.6, None), (Rotate, 0.9, Some(3))],
        [(ShearX, 0.9, Some(4)), (Solarize, 0.3, Some(3))],
        [(ShearY, 0.8, Some(8)), (Invert, 0.7, None)],
        [(Equalize, 0.9, None), (TranslateY, 0.6, Some(6))],
        [(Invert, 0.9, None), (Equalize, 0.6, None)],
        [(Contrast, 0.3, Some(3)), (Rotate, 0.8, Some(4))],
        [(Invert, 0.8, None), (TranslateY, 0.0, Some(2))],
        [(ShearY, 0.7, Some(6)), (Solarize, 0.4, Some(8))],
        [(Invert, 0.6, None), (Rotate, 0.8, Some(4))],
        [(ShearY, 0.3, Some(7)), (TranslateX, 0.9, Some(3))],
        [(ShearX, 0.1, Some(6)), (Invert, 0.6, None)],
        [(Solarize, 0.7, Some(2)), (TranslateY, 0.6, Some(7))],
        [(ShearY, 0.8, Some(4)), (Invert, 0.8, None)],
        [(ShearX, 0.7, Some(9)), (TranslateY, 0.8, Some(3))],
        [(ShearY, 0.8, Some(5)), (AutoContrast, 0.7, None)],
        [(ShearX, 0.7, Some(2)), (Invert, 0.1, None)],
    ];
    match policy {
        Policy::Imagenet => &IMAGENET,
        Policy::Cifar10 => &CIFAR10,
        Policy::Svhn => &SVHN,
    }
}

impl AutoAugment {
    /// The operations one sample of `size` (height, width) applies, with their
    /// magnitudes, from the draws of `rng`.
    pub fn draw(&self, rng: &mut SplitMix64, size: (usize, usize)) -> Vec<(AugOp, f64)> {
        let table = policies(self.policy);
        let sub = &table[rng.below(table.len() as u64) as usize];
        let probs = [rng.unit(), rng.unit()];
        let signs = [rng.below(2), rng.below(2)];
        let space = classic_space(size, false);
        let mut steps = Vec::with_capacity(2);
        for (i, &(op, p, bin)) in sub.iter().enumerate() {
            if probs[i] > p {
                continue;
            }
            let Some(s) = space.iter().find(|s| s.op == op) else {
                continue;
            };
            let mut magnitude = bin
                .and_then(|b| s.magnitude(10, b))
                .map_or(0.0, f64::from);
            if s.signed && signs[i] == 0 {
                magnitude = -magnitude;
            }
            steps.push((op, magnitude));
        }
        steps
    }
}

impl OpDef for AutoAugment {
    /// RGB u8 HWC in, the same out.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        check_input("auto_augment", input)?;
        Ok(input.clone())
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Kernel(Arc::new(PolicyKernel(self.clone())))
    }
}

impl Draws for AutoAugment {
    const NAME: &'static str = "auto_augment";

    fn steps(&self, rng: &mut SplitMix64, size: (usize, usize)) -> Vec<(AugOp, f64)> {
        self.draw(rng, size)
    }

    fn fill(&self) -> Fill {
        self.fill
    }
}
