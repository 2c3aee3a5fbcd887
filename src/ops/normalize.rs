//! `normalize`: `out = (x - mean) / std` per channel, MindSpore's convention — mean and std
//! in the units of the input (0–255 for u8 images: torchvision's ImageNet mean
//! `[0.485, 0.456, 0.406]` is `[123.675, 116.28, 103.53]` here). Folded with neighbouring
//! `rescale` ops into one multiply-add per channel (see `pointwise`).

use super::kernel::{Lowered, OpDef, Undo};
use crate::imgproc::Affine;
use crate::spec::{DType, Spec, SpecError};
use serde::{Deserialize, Serialize};

/// The `normalize` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Normalize {
    /// Per-channel mean (R, G, B).
    pub mean: Vec<f32>,
    /// Per-channel standard deviation (R, G, B).
    pub std: Vec<f32>,
}

impl Normalize {
    /// `(x - mean) / std` per channel.
    pub fn new(mean: impl Into<Vec<f32>>, std: impl Into<Vec<f32>>) -> Normalize {
        Normalize {
            mean: mean.into(),
            std: std.into(),
        }
    }
}

impl OpDef for Normalize {
    /// Output is float32; mean and std must have one value per channel.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        let c = input.channels;
        if self.mean.len() != c || self.std.len() != c {
            let name = if self.mean.len() != c { "mean" } else { "std" };
            return Err(SpecError::param(
                name,
                format!(
                    "mean and std need {c} values (one per channel), got {} and {}",
                    self.mean.len(),
                    self.std.len()
                ),
            ));
        }
        if self.mean.iter().any(|m| !m.is_finite()) {
            return Err(SpecError::param("mean", "values must be finite"));
        }
        if self.std.iter().any(|s| *s == 0.0 || !s.is_finite()) {
            return Err(SpecError::param("std", "values must be non-zero and finite"));
        }
        Ok(Spec {
            dtype: DType::F32,
            ..input.clone()
        })
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Affine(self.affine())
    }

    /// `x * std + mean`: std is never 0 (checked), so this always undoes it.
    fn undo(&self, _: &Spec) -> Undo {
        self.affine().inverse().map_or(Undo::Lost("std 0"), Undo::Affine)
    }
}

impl Normalize {
    /// As a per-channel affine map: `x * (1/std) + (-mean/std)`.
    pub fn affine(&self) -> Affine {
        let mut a = Affine::identity();
        for c in 0..3 {
            let (m, s) = (
                self.mean[c.min(self.mean.len() - 1)],
                self.std[c.min(self.std.len() - 1)],
            );
            a.scale[c] = 1.0 / s;
            a.shift[c] = -m / s;
        }
        a
    }
}
