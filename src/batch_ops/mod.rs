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

pub mod cutmix;
pub mod mixup;
pub mod mixup_cutmix;
pub mod one_hot;

use crate::rng::SplitMix64;
use crate::spec::{DType, LabelType, Layout, Spec, SpecError};
use serde::{Deserialize, Serialize};

pub use cutmix::CutMix;
pub use mixup::MixUp;
pub use mixup_cutmix::MixUpCutMix;
pub use one_hot::OneHot;

/// One batch op, tagged by `op` in a pipeline file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum BatchOp {
    /// Labels as float32 one-hot rows, optionally smoothed.
    OneHot(OneHot),
    /// MixUp: every sample blended with the previous one.
    Mixup(MixUp),
    /// CutMix: a box of the previous sample pasted into every sample.
    Cutmix(CutMix),
    /// MixUp or CutMix, chosen per batch.
    MixupCutmix(MixUpCutMix),
}

impl BatchOp {
    /// Its name in pipeline files.
    pub fn name(&self) -> &'static str {
        match self {
            BatchOp::OneHot(_) => "one_hot",
            BatchOp::Mixup(_) => "mixup",
            BatchOp::Cutmix(_) => "cutmix",
            BatchOp::MixupCutmix(_) => "mixup_cutmix",
        }
    }

    /// The spec of one sample after it, or why it cannot take `input`.
    pub fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        match self {
            BatchOp::OneHot(o) => o.output_spec(input),
            BatchOp::Mixup(m) => m.check().and_then(|()| mixable(input)),
            BatchOp::Cutmix(c) => c.check().and_then(|()| mixable(input)),
            BatchOp::MixupCutmix(m) => m.check().and_then(|()| mixable(input)),
        }
    }

    /// Mix the batch `b` in place, drawing from `rng` (the batch's stream); `one_hot`
    /// happens as samples are written, not here.
    pub(crate) fn apply(
        &self,
        b: &mut BatchView<'_>,
        rng: &mut SplitMix64,
        scratch: &mut Vec<f32>,
    ) {
        match self {
            BatchOp::OneHot(_) => {}
            BatchOp::Mixup(m) => {
                if let Some(lam) = m.draw(rng) {
                    mixup::mix(b, lam, scratch)
                }
            }
            BatchOp::Cutmix(c) => {
                if let Some(cut) = c.draw(rng, b.height(), b.width()) {
                    cutmix::paste(b, cut, scratch)
                }
            }
            BatchOp::MixupCutmix(m) => m.apply(b, rng, scratch),
        }
    }
}

/// What the mixing ops need: float images (float32, float16 or bfloat16) and float32 label rows (after `one_hot`).
fn mixable(input: &Spec) -> Result<Spec, SpecError> {
    if input.dtype == DType::U8 {
        return Err(SpecError::input(
            "mixing needs float images: put normalize or rescale in the ops",
        ));
    }
    if input.label != LabelType::F32 {
        return Err(SpecError::input(
            "mixing needs soft labels: put a one_hot batch op before it",
        ));
    }
    Ok(input.clone())
}

/// A `prob` or `switch_prob` in [0, 1].
fn check_prob(name: &'static str, p: f64) -> Result<(), SpecError> {
    if !(0.0..=1.0).contains(&p) {
        return Err(SpecError::param(name, format!("{p} is not in [0, 1]")));
    }
    Ok(())
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
