//! Batch ops: stages after `[batch]`, one file each, listed as `[[batch_ops]]` tables:
//!
//! ```toml
//! [[batch_ops]]
//! op = "one_hot"
//! num_classes = 1000
//! smoothing = 0.1
//!
//! [[batch_ops]]
//! op = "mixup_cutmix"       # torchvision v2's RandomChoice([MixUp(0.2), CutMix(1.0)])
//! mixup_alpha = 0.2
//! cutmix_alpha = 1.0
//! ```
//!
//! `one_hot` turns the labels into float32 rows of `num_classes` (written by the worker
//! with each sample); `mixup`, `cutmix` and `mixup_cutmix` mix a whole batch with itself
//! rolled by one (torchvision v2's pairing), on the worker thread that completes the batch,
//! drawing from the batch's own stream `(seed, epoch, batch)` — the same batches for any
//! worker count, and on resume.

use crate::error::OnError;
use crate::rng::SplitMix64;
use crate::spec::{DType, Layout, Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What a batch op is to the pipeline — the contract every batch op's file implements
/// (the batch-op counterpart of [`crate::ops`]' `OpDef`): its spec rule and what it
/// compiles to. The pipeline and the engine run these and name no batch op.
pub(crate) trait BatchOpDef {
    /// The spec of one sample after it, or why it cannot take `input` where it stands
    /// (`at`: what the batch ops before it did, and the engine's error policy).
    fn output_spec(&self, input: &Spec, at: &BatchContext) -> Result<Spec, SpecError>;

    /// What the engine runs for it.
    fn lower(&self) -> BatchLowered;
}

/// Where a batch op stands in the pipeline, for its spec rule.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BatchContext {
    /// A batch op before this one made the labels soft rows (lowered to label rows).
    pub(crate) soft_labels: bool,
    /// The engine's policy for bad samples.
    pub(crate) on_error: OnError,
}

/// What a batch op compiles to.
pub(crate) enum BatchLowered {
    /// Label rows the worker writes with each sample, `on` at the sample's class and
    /// `off` elsewhere (the row length is the spec's label columns); a class not below it
    /// fails the sample in stage `stage`.
    LabelRows {
        on: f32,
        off: f32,
        stage: &'static str,
    },
    /// A kernel run on each complete batch, in place, by the worker that completes it.
    Batch(Arc<dyn BatchKernel>),
}

/// A kernel on a complete batch: it reads and writes the float images and soft label rows
/// of [`BatchView`] and draws from the batch's own stream `(seed, epoch, batch)`.
pub(crate) trait BatchKernel: Send + Sync + std::fmt::Debug {
    fn apply(&self, b: &mut BatchView<'_>, rng: &mut SplitMix64, scratch: &mut Vec<f32>);
}

/// Declares the batch ops: for each, its module (`pub mod`), its type (re-exported here)
/// and its variant of [`BatchOp`], named in pipeline files as the module is (the variant's
/// snake_case name, checked by a test).
macro_rules! batch_ops {
    ($($(#[$doc:meta])* $module:ident :: $ty:ident as $variant:ident,)*) => {
        $(pub mod $module;)*
        $(pub use $module::$ty;)*

        /// One batch op, tagged by `op` in a pipeline file.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
        #[non_exhaustive]
        pub enum BatchOp {
            $($(#[$doc])* $variant($ty),)*
        }

        impl BatchOp {
            /// Every batch op's name in pipeline files.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($module)),*];

            /// Its name in pipeline files.
            pub fn name(&self) -> &'static str {
                match self {
                    $(BatchOp::$variant(_) => stringify!($module),)*
                }
            }

            pub(crate) fn def(&self) -> &dyn BatchOpDef {
                match self {
                    $(BatchOp::$variant(o) => o,)*
                }
            }
        }
    };
}

batch_ops! {
    /// Labels as float32 one-hot rows, optionally smoothed.
    one_hot::OneHot as OneHot,
    /// MixUp: every sample blended with the previous one.
    mixup::MixUp as Mixup,
    /// CutMix: a box of the previous sample pasted into every sample.
    cutmix::CutMix as Cutmix,
    /// MixUp or CutMix, chosen per batch.
    mixup_cutmix::MixUpCutMix as MixupCutmix,
}

/// What the mixing ops need: float images (float32, float16 or bfloat16), soft label rows
/// (a batch op that writes them before), and batches that stay as cut (not `on_error =
/// "skip"`, whose re-cutting would undo the mixing's pairing).
fn mixable(input: &Spec, at: &BatchContext) -> Result<Spec, SpecError> {
    if input.dtype == DType::U8 {
        return Err(SpecError::input(
            "mixing needs float images: put normalize or rescale in the ops",
        ));
    }
    if !at.soft_labels {
        return Err(SpecError::input(
            "mixing needs soft labels: put a one_hot batch op before it",
        ));
    }
    if at.on_error == OnError::Skip {
        return Err(SpecError::input(
            "mixing cannot run with on_error = \"skip\" (skipped samples re-cut the \
             batches after they are mixed): use \"replace\" or \"error\"",
        ));
    }
    Ok(input.clone())
}

/// An `alpha` of a Beta distribution.
fn check_alpha(name: &'static str, a: f64) -> Result<(), SpecError> {
    if !(a > 0.0 && a.is_finite()) {
        return Err(SpecError::param(name, format!("{a} must be positive")));
    }
    Ok(())
}

fn one() -> f64 {
    1.0
}

/// A complete batch as the mixing ops see it.
pub(crate) struct BatchView<'a> {
    /// `n` samples of `dims` (C, H, W or H, W, C by `layout`).
    pub(crate) images: &'a mut [f32],
    /// `n` rows of `classes`.
    pub(crate) labels: &'a mut [f32],
    pub(crate) n: usize,
    pub(crate) dims: [usize; 3],
    pub(crate) layout: Layout,
    pub(crate) classes: usize,
}

impl BatchView<'_> {
    fn sample_len(&self) -> usize {
        self.dims.iter().product()
    }

    fn height(&self) -> usize {
        match self.layout {
            Layout::Chw => self.dims[1],
            Layout::Hwc => self.dims[0],
        }
    }

    fn width(&self) -> usize {
        match self.layout {
            Layout::Chw => self.dims[2],
            Layout::Hwc => self.dims[1],
        }
    }
}

/// `rows` (each `len` long) mixed with themselves rolled by one, as torchvision v2:
/// `row[i] = rolled[i] * (1 - lam) + row[i] * lam`, with `rolled[i] = row[i - 1]` (the last
/// row for the first), each product rounded to f32 as torch computes it.
pub(crate) fn mix_rolled(rows: &mut [f32], len: usize, n: usize, lam: f64, last: &mut Vec<f32>) {
    if n < 2 || len == 0 {
        return;
    }
    let (keep, take) = (lam as f32, (1.0 - lam) as f32);
    last.clear();
    last.extend_from_slice(&rows[(n - 1) * len..n * len]);
    for i in (1..n).rev() {
        let (before, at) = rows.split_at_mut(i * len);
        let prev = &before[(i - 1) * len..];
        for (x, &p) in at[..len].iter_mut().zip(prev) {
            *x = p * take + *x * keep;
        }
    }
    for (x, &p) in rows[..len].iter_mut().zip(last.iter()) {
        *x = p * take + *x * keep;
    }
}

#[cfg(test)]
mod tests {
    use super::BatchOp;

    #[test]
    fn each_batch_op_is_named_in_pipeline_files_as_its_module() {
        let tables = [
            r#"{"op": "one_hot", "num_classes": 3}"#,
            r#"{"op": "mixup"}"#,
            r#"{"op": "cutmix"}"#,
            r#"{"op": "mixup_cutmix"}"#,
        ];
        assert_eq!(tables.len(), BatchOp::NAMES.len());
        for (t, name) in tables.iter().zip(BatchOp::NAMES) {
            let op: BatchOp = serde_json::from_str(t).expect("parses");
            assert_eq!(op.name(), *name);
            let back = serde_json::to_value(&op).expect("serializes");
            assert_eq!(back["op"], *name);
        }
    }
}
