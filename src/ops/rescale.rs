//! `rescale`: `out = x * rescale + shift`, MindSpore's `Rescale(rescale, shift)`. Folded
//! with neighbouring `normalize` ops into one multiply-add per channel (see `pointwise`).

use super::kernel::{Lowered, OpDef, Undo};
use crate::imgproc::Affine;
use crate::spec::{DType, Spec, SpecError};
use serde::{Deserialize, Serialize};

/// The `rescale` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Rescale {
    /// Factor.
    pub rescale: f32,
    /// Offset added after scaling.
    #[serde(default)]
    pub shift: f32,
}

impl Rescale {
    /// `x * rescale + shift`.
    pub fn new(rescale: f32, shift: f32) -> Rescale {
        Rescale { rescale, shift }
    }
}

impl OpDef for Rescale {
    /// Output is float32.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        if !self.rescale.is_finite() || !self.shift.is_finite() {
            let name = if self.rescale.is_finite() {
                "shift"
            } else {
                "rescale"
            };
            return Err(SpecError::param(name, "must be finite"));
        }
        Ok(Spec {
            dtype: DType::F32,
            ..input.clone()
        })
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Affine(self.affine())
    }

    /// `(x - shift) / rescale`, unless the factor is 0 (every value became `shift`).
    fn undo(&self, _: &Spec) -> Undo {
        self.affine()
            .inverse()
            .map_or(Undo::Lost("rescale by 0"), Undo::Affine)
    }
}

impl Rescale {
    /// As a per-channel affine map.
    pub fn affine(&self) -> Affine {
        Affine {
            scale: [self.rescale; 3],
            shift: [self.shift; 3],
        }
    }
}
