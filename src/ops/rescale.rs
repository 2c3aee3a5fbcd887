//! `rescale`: `out = x * rescale + shift`, MindSpore's `Rescale(rescale, shift)`. Folded
//! with neighbouring `normalize` ops into one multiply-add per channel (see `pointwise`).

use super::kernel::{Lowered, OpDef};
use super::pointwise::Affine;
use crate::spec::{DType, Spec};
use serde::{Deserialize, Serialize};

/// The `rescale` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rescale {
    /// Factor.
    pub rescale: f32,
    /// Offset added after scaling.
    #[serde(default)]
    pub shift: f32,
}

impl OpDef for Rescale {
    /// Output is float32.
    fn output_spec(&self, input: &Spec) -> Result<Spec, String> {
        if !self.rescale.is_finite() || !self.shift.is_finite() {
            return Err("rescale: rescale and shift must be finite".into());
        }
        Ok(Spec {
            dtype: DType::F32,
            ..input.clone()
        })
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Affine(self.affine())
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
