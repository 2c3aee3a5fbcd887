//! `type_cast`: change a column's type (MindSpore's `TypeCast`).
//!
//! * On the label column (the canonical pipelines cast to int32): `uint32`, `int32`,
//!   `int64` or `float32`, the batch buffer's label type.
//! * On the image column: `float32`, `float16` or `bfloat16`, for mixed-precision training.
//!   A u8 image becomes float (the values as they are, 0–255); a float16/bfloat16 cast is
//!   folded into the final write (each value rounded to nearest even from the float32
//!   result), so it comes last: no op that changes pixels may follow it (`hwc_to_chw` and
//!   label casts may).

use super::kernel::{Lowered, OpDef, Undo};
use crate::imgproc::Affine;
use crate::spec::{DType, LabelType, Spec, SpecError};
use serde::{Deserialize, Serialize};

fn label() -> String {
    "label".into()
}

/// A type `type_cast` casts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum CastType {
    /// `uint32` (labels: the sources' own type).
    #[serde(rename = "uint32")]
    U32,
    /// `int32` (labels).
    #[serde(rename = "int32")]
    I32,
    /// `int64` (labels).
    #[serde(rename = "int64")]
    I64,
    /// `float32` (labels or images).
    #[serde(rename = "float32")]
    F32,
    /// `float16` (images).
    #[serde(rename = "float16")]
    F16,
    /// `bfloat16` (images).
    #[serde(rename = "bfloat16")]
    BF16,
}

impl From<LabelType> for CastType {
    fn from(t: LabelType) -> CastType {
        match t {
            LabelType::U32 => CastType::U32,
            LabelType::I32 => CastType::I32,
            LabelType::I64 => CastType::I64,
            LabelType::F32 => CastType::F32,
        }
    }
}

impl CastType {
    /// The label type it names, if it is one.
    fn label(self) -> Option<LabelType> {
        match self {
            CastType::U32 => Some(LabelType::U32),
            CastType::I32 => Some(LabelType::I32),
            CastType::I64 => Some(LabelType::I64),
            CastType::F32 => Some(LabelType::F32),
            CastType::F16 | CastType::BF16 => None,
        }
    }

    /// The image type it names, if it is one.
    fn image(self) -> Option<DType> {
        match self {
            CastType::F32 => Some(DType::F32),
            CastType::F16 => Some(DType::F16),
            CastType::BF16 => Some(DType::BF16),
            CastType::U32 | CastType::I32 | CastType::I64 => None,
        }
    }
}

/// The `type_cast` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TypeCast {
    /// The column: `label` (the default) or `image`.
    #[serde(default = "label")]
    pub column: String,
    /// Labels: `int32`, `int64`, `float32` (or `uint32`, the sources' own type).
    /// Images: `float32`, `float16` or `bfloat16`.
    pub dtype: CastType,
}

impl TypeCast {
    /// Cast the label column to `dtype`.
    pub fn new(dtype: impl Into<CastType>) -> TypeCast {
        TypeCast {
            column: label(),
            dtype: dtype.into(),
        }
    }

    /// Cast the image column to `dtype` (`F32`, `F16` or `BF16`).
    pub fn image(dtype: CastType) -> TypeCast {
        TypeCast {
            column: "image".into(),
            dtype,
        }
    }

    fn on_image(&self) -> bool {
        self.column == "image"
    }
}

setters!(TypeCast { column: String });

impl OpDef for TypeCast {
    /// Changes the label type, or the image's element type.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        match self.column.as_str() {
            "label" => {
                let Some(label) = self.dtype.label() else {
                    return Err(SpecError::param(
                        "dtype",
                        "labels are cast to uint32, int32, int64 or float32 (float16 and \
                         bfloat16 are for column = \"image\")",
                    ));
                };
                Ok(Spec {
                    label,
                    ..input.clone()
                })
            }
            "image" => {
                let Some(dtype) = self.dtype.image() else {
                    return Err(SpecError::param(
                        "dtype",
                        "images are cast to float32, float16 or bfloat16",
                    ));
                };
                if input.dtype.is_half() {
                    return Err(SpecError::input(format!(
                        "the image is already {}: cast it once",
                        input.dtype.name()
                    )));
                }
                Ok(Spec {
                    dtype,
                    ..input.clone()
                })
            }
            other => Err(SpecError::param(
                "column",
                format!("{other:?} is not a column (\"label\" or \"image\")"),
            )),
        }
    }

    fn lower(&self, input: &Spec) -> Lowered {
        if !self.on_image() {
            return Lowered::Labels;
        }
        if input.dtype == DType::U8 {
            // The pixel values as they are, as floats: an identity map, folded with the
            // pointwise ops around it.
            return Lowered::Affine(Affine::identity());
        }
        match self.dtype {
            CastType::F16 | CastType::BF16 => {
                Lowered::Nothing("type_cast (image): rounded to 16 bits by the final write")
            }
            _ => Lowered::Nothing("type_cast (image): already float32"),
        }
    }

    fn takes_encoded(&self) -> bool {
        !self.on_image()
    }

    /// On the image: back to the type it had (a u8 image cast to floats holds its values
    /// as they were). A label cast leaves the pixels alone.
    fn undo(&self, input: &Spec) -> Undo {
        if self.on_image() {
            Undo::DType(input.dtype)
        } else {
            Undo::Show
        }
    }
}
