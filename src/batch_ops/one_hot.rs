//! `one_hot`: labels become float32 rows of `num_classes` — `1 - smoothing + smoothing / K`
//! at the label, `smoothing / K` elsewhere (MindSpore's `OneHot` with `smoothing_rate`,
//! timm's smoothed targets, torchvision's `label_smoothing`). The worker writes each
//! sample's row as it writes the sample; a label not below `num_classes` fails its sample.

use super::{BatchContext, BatchLowered, BatchOpDef};
use crate::spec::{LabelType, Spec, SpecError};
use serde::{Deserialize, Serialize};

/// The `one_hot` batch op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct OneHot {
    /// Classes (the row length).
    pub num_classes: usize,
    /// Label smoothing in [0, 1) (default 0).
    #[serde(default)]
    pub smoothing: f64,
}

impl OneHot {
    /// Rows of `num_classes`, no smoothing.
    pub fn new(num_classes: usize) -> OneHot {
        OneHot {
            num_classes,
            smoothing: 0.0,
        }
    }

    /// `(on, off)`: the values at the label and elsewhere.
    pub fn values(&self) -> (f32, f32) {
        let off = self.smoothing / self.num_classes as f64;
        ((1.0 - self.smoothing + off) as f32, off as f32)
    }

}

impl BatchOpDef for OneHot {
    fn output_spec(&self, input: &Spec, at: &BatchContext) -> Result<Spec, SpecError> {
        if at.soft_labels {
            return Err(SpecError::input("the labels are already one-hot"));
        }
        if !(1..=1 << 20).contains(&self.num_classes) {
            return Err(SpecError::param(
                "num_classes",
                "must be between 1 and 1048576",
            ));
        }
        if !(0.0..1.0).contains(&self.smoothing) {
            return Err(SpecError::param(
                "smoothing",
                format!("{} is not in [0, 1)", self.smoothing),
            ));
        }
        if input.label_columns != 1 {
            return Err(SpecError::input(
                "one_hot needs one label column (CIFAR-100 label = \"both\" has two)",
            ));
        }
        Ok(Spec {
            label: LabelType::F32,
            label_columns: self.num_classes,
            ..input.clone()
        })
    }

    /// The worker writes each sample's row as it writes the sample.
    fn lower(&self) -> BatchLowered {
        let (on, off) = self.values();
        BatchLowered::LabelRows {
            on,
            off,
            stage: "one_hot",
        }
    }
}

setters!(OneHot { smoothing: f64 });
