//! `type_cast`: change the label column's type (MindSpore's `TypeCast` on the label; the
//! canonical pipelines cast to int32). The image type follows from the ops (u8 until a
//! normalize or rescale, float32 after), so only `column = "label"` is accepted.

use super::kernel::{Lowered, OpDef};
use crate::spec::{LabelType, Spec, SpecError};
use serde::{Deserialize, Serialize};

fn label() -> String {
    "label".into()
}

/// The `type_cast` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TypeCast {
    /// The column: only `label`.
    #[serde(default = "label")]
    pub column: String,
    /// `int32`, `int64`, `float32` (or `uint32`, the sources' own type).
    pub dtype: LabelType,
}

impl TypeCast {
    /// Cast the label column to `dtype`.
    pub fn new(dtype: LabelType) -> TypeCast {
        TypeCast {
            column: label(),
            dtype,
        }
    }
}

setters!(TypeCast { column: String });

impl OpDef for TypeCast {
    /// Changes the label type.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        if self.column != "label" {
            return Err(SpecError::param(
                "column",
                format!(
                    "{:?} is not supported (only \"label\"; the image type follows from \
                     normalize/rescale)",
                    self.column
                ),
            ));
        }
        Ok(Spec {
            label: self.dtype,
            ..input.clone()
        })
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Labels
    }

    fn takes_encoded(&self) -> bool {
        true
    }
}
