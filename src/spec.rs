//! What a sample looks like between two stages, known before any pixel is read.

use serde::{Deserialize, Serialize};

/// `1 class`, `3 classes`: a count with its noun in the right number.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n: u64 = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}
use std::fmt;

/// Most label columns a sample can have (CIFAR-100: coarse and fine).
pub const MAX_LABELS: usize = 2;

/// Element type of the image column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    /// 8-bit unsigned.
    U8,
    /// 32-bit float.
    F32,
    /// IEEE 754 half precision (`type_cast` on the image): written from the float32
    /// result, rounded to nearest even, by the final pass.
    F16,
    /// bfloat16 (the upper half of a float32, rounded to nearest even), as `F16`.
    BF16,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::U8 => 1,
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }
    /// numpy's name for it.
    pub fn name(self) -> &'static str {
        match self {
            DType::U8 => "uint8",
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
        }
    }
    /// A 16-bit float: only the final write produces it, so no op that changes pixels may
    /// follow it.
    pub fn is_half(self) -> bool {
        matches!(self, DType::F16 | DType::BF16)
    }
}

/// Memory layout of an image: interleaved channels or planes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// height, width, channels (interleaved, as decoded).
    Hwc,
    /// channels, height, width (planar, what most trainers want).
    Chw,
}

/// Element type of the label column(s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LabelType {
    /// What sources produce (MindSpore's ImageFolder and Cifar datasets give uint32).
    #[serde(rename = "uint32")]
    U32,
    /// `int32`.
    #[serde(rename = "int32")]
    I32,
    /// `int64`.
    #[serde(rename = "int64")]
    I64,
    /// `float32`.
    #[serde(rename = "float32")]
    F32,
}

impl LabelType {
    /// Bytes per label.
    pub fn size(self) -> usize {
        match self {
            LabelType::I64 => 8,
            _ => 4,
        }
    }

    /// numpy's name for it.
    pub fn name(self) -> &'static str {
        match self {
            LabelType::U32 => "uint32",
            LabelType::I32 => "int32",
            LabelType::I64 => "int64",
            LabelType::F32 => "float32",
        }
    }
}

/// The shape and type of one sample after a stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Still encoded bytes (before `decode`).
    pub encoded: bool,
    /// Height, or `None` when it varies from sample to sample.
    pub height: Option<usize>,
    /// Width, or `None` when it varies.
    pub width: Option<usize>,
    /// Channels (always 3 after decode: everything becomes RGB).
    pub channels: usize,
    /// Layout of the pixels.
    pub layout: Layout,
    /// Element type.
    pub dtype: DType,
    /// Element type of the labels.
    pub label: LabelType,
    /// Number of label columns (2 for CIFAR-100 with `label = "both"`).
    pub label_columns: usize,
    /// Decoded pixels exactly as a source that stores them decoded gives them (`raw`
    /// shards): no op has run yet, so `decode` passes them through. Every op clears it.
    pub source_pixels: bool,
}

impl Spec {
    /// Encoded bytes with one uint32 label, what file sources produce.
    pub fn encoded() -> Spec {
        Spec {
            encoded: true,
            height: None,
            width: None,
            channels: 3,
            layout: Layout::Hwc,
            dtype: DType::U8,
            label: LabelType::U32,
            label_columns: 1,
            source_pixels: false,
        }
    }

    /// `(height, width)` when both are fixed.
    pub fn fixed_size(&self) -> Option<(usize, usize)> {
        Some((self.height?, self.width?))
    }

    /// Shape of one image as a list of dimensions (`None` = varies).
    pub fn dims(&self) -> [Option<usize>; 3] {
        match self.layout {
            Layout::Hwc => [self.height, self.width, Some(self.channels)],
            Layout::Chw => [Some(self.channels), self.height, self.width],
        }
    }

    /// Elements in one image, when the size is fixed.
    pub fn elements(&self) -> Option<usize> {
        self.fixed_size().map(|(h, w)| h * w * self.channels)
    }
}

fn dim(d: Option<usize>) -> String {
    d.map_or_else(|| "?".to_string(), |v| v.to_string())
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let labels = if self.label_columns == 1 {
            format!("label {}", self.label.name())
        } else {
            format!("labels {} x{}", self.label.name(), self.label_columns)
        };
        if self.encoded {
            return write!(f, "encoded bytes, {labels}");
        }
        let [a, b, c] = self.dims();
        let layout = match self.layout {
            Layout::Hwc => "HWC",
            Layout::Chw => "CHW",
        };
        write!(
            f,
            "{} {layout} [{}, {}, {}], {labels}",
            self.dtype.name(),
            dim(a),
            dim(b),
            dim(c)
        )
    }
}

/// Why an op cannot run on the spec it is given, found before any pixel is read
/// ([`crate::Error::Op`] adds which op and where it is).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The input is not what the op takes (encoded bytes where pixels are needed, CHW where
    /// HWC is); the message says what to change.
    #[error("{0}")]
    Input(String),
    /// A parameter out of its range.
    #[error("{name}: {reason}")]
    Param {
        /// The parameter, as the pipeline file spells it.
        name: &'static str,
        /// What is wrong with its value.
        reason: String,
    },
    /// The op needs something this build of imgfeed lacks (a decoder feature).
    #[error("{0}")]
    Unavailable(String),
}

/// `name`, a probability: in [0, 1] (the ops' and the batch ops' `prob`, `switch_prob`).
pub(crate) fn check_prob(name: &'static str, p: f64) -> Result<(), SpecError> {
    if !(0.0..=1.0).contains(&p) {
        return Err(SpecError::param(name, format!("{p} is not in [0, 1]")));
    }
    Ok(())
}

/// One half: a random op's default probability (and a batch op's `switch_prob`).
pub(crate) fn half() -> f64 {
    0.5
}

impl SpecError {
    /// A `name` parameter that breaks its rule: `reason` says how.
    pub fn param(name: &'static str, reason: impl Into<String>) -> SpecError {
        SpecError::Param {
            name,
            reason: reason.into(),
        }
    }

    /// An input the op cannot take.
    pub fn input(why: impl Into<String>) -> SpecError {
        SpecError::Input(why.into())
    }
}
