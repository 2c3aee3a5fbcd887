//! A pipeline checked as a whole before any pixel is read: the settings that need no
//! dataset, the spec chain through the ops and the batch ops, what a batch holds and whether
//! it fits in memory, and the warnings for what runs but looks like a mistake.

use super::config::PipelineConfig;
use crate::batch_ops::{BatchContext, BatchLowered};
use crate::error::{Error, Invalid, Result};
use crate::ops::Op;
use crate::spec::{Spec, SpecError};

/// The largest worker count (`engine.workers`, `--workers`).
pub const MAX_WORKERS: usize = 1024;

/// `n` as a batch size: at least 1.
pub(super) fn batch_size(n: usize) -> Result<(), Invalid> {
    at_least("batch.size", n, 1)
}

/// `n` as a worker count: 1 to [`MAX_WORKERS`].
pub(super) fn workers(n: usize) -> Result<(), Invalid> {
    if n == 0 || n > MAX_WORKERS {
        return Err(Invalid::OutOfRange {
            setting: "engine.workers",
            min: 1,
            max: MAX_WORKERS,
        });
    }
    Ok(())
}

/// `n` as a work unit: at least 1.
pub(super) fn work_unit(n: usize) -> Result<(), Invalid> {
    at_least("engine.work_unit (--work-unit)", n, 1)
}

/// `n` of `setting`, at least `min`.
fn at_least(setting: &'static str, n: usize, min: usize) -> Result<(), Invalid> {
    if n < min {
        return Err(Invalid::TooSmall { setting, min });
    }
    Ok(())
}

/// The settings that need no dataset, checked (the shard read from the environment where
/// the pipeline says `shard = "env"`): sampling, batch size, work unit and workers.
pub(super) fn settings(mut config: PipelineConfig) -> Result<PipelineConfig> {
    config.source.resolve_shard(|k| std::env::var(k).ok())?;
    config.source.sampling.validate().map_err(Invalid::from)?;
    batch_size(config.batch.size)?;
    if let Some(n) = config.engine.work_unit {
        work_unit(n)?;
    }
    workers(config.engine.workers)?;
    Ok(config)
}

/// What the checks found: the spec after every stage and what one batch holds.
pub(super) struct Checked {
    /// `(stage, spec after it)`, starting with the source, the batch ops last.
    pub stages: Vec<(String, Spec)>,
    /// The spec of one output sample.
    pub spec: Spec,
    /// Values per output sample.
    pub elems: usize,
}

/// The spec chain of `config` on samples of `source` (ops, then batch ops), and whether its
/// output can be batched: decoded, one size, one batch addressable.
pub(super) fn chain(config: &PipelineConfig, source: &Spec) -> Result<Checked> {
    let mut stages = config.spec_chain(source)?;
    let mut spec = stages
        .last()
        .map_or_else(|| source.clone(), |(_, s)| s.clone());
    let mut at = BatchContext {
        soft_labels: false,
        on_error: config.engine.on_error,
    };
    for (i, op) in config.batch_ops.iter().enumerate() {
        spec = op.def().output_spec(&spec, &at).map_err(|reason| {
            let key = match &reason {
                SpecError::Param { name, .. } => Some(*name),
                _ => None,
            };
            Invalid::BatchOp {
                index: i,
                op: op.name(),
                at: config.batch_places.0.get(i).map(|p| p.of(key)),
                reason,
            }
        })?;
        at.soft_labels |= matches!(op.def().lower(), BatchLowered::LabelRows { .. });
        stages.push((op.name().to_string(), spec.clone()));
    }
    if spec.encoded {
        return Err(Invalid::StillEncoded.into());
    }
    let Some(elems) = spec.elements().filter(|&e| e > 0) else {
        return Err(Invalid::VaryingSizes.into());
    };
    // One batch buffer must be addressable (the engine writes into it through raw
    // pointers, so its size is checked here, not assumed).
    let size = config.batch.size;
    let label_bytes = size
        .checked_mul(spec.label_columns)
        .and_then(|n| n.checked_mul(spec.label.size()));
    let batch_bytes = size
        .checked_mul(elems)
        .and_then(|n| n.checked_mul(spec.dtype.size()))
        .zip(label_bytes)
        .and_then(|(i, l)| i.checked_add(l));
    if batch_bytes.is_none_or(|b| b > 1 << 36) {
        return Err(Invalid::BatchTooLarge { size, elems }.into());
    }
    Ok(Checked {
        stages,
        spec,
        elems,
    })
}

impl PipelineConfig {
    /// The spec chain of `ops` on `source` ([`spec_chain`]), an op's error pointing at the
    /// op (or its parameter at fault) in the pipeline file this config was read from.
    pub fn spec_chain(&self, source: &Spec) -> Result<Vec<(String, Spec)>> {
        spec_chain(source, &self.ops).map_err(|e| match e {
            Error::Op {
                index,
                op,
                reason,
                at: None,
            } => {
                let key = match &reason {
                    SpecError::Param { name, .. } => Some(*name),
                    _ => None,
                };
                let at = self.places.0.get(index).map(|p| p.of(key));
                Error::Op {
                    index,
                    op,
                    reason,
                    at,
                }
            }
            e => e,
        })
    }
}

/// `(stage, spec after it)` for `ops` applied to samples of `source` (starting with
/// `("source", source)`), or the first op that cannot take its input, by index and name.
pub fn spec_chain(source: &Spec, ops: &[Op]) -> Result<Vec<(String, Spec)>> {
    let mut spec = source.clone();
    let mut stages = vec![("source".to_string(), spec.clone())];
    for (i, op) in ops.iter().enumerate() {
        spec = op.output_spec(&spec).map_err(|reason| Error::Op {
            index: i,
            op: op.name(),
            reason,
            at: None,
        })?;
        stages.push((op.name().to_string(), spec.clone()));
    }
    Ok(stages)
}

/// A `normalize` whose mean and std are all at most 1 on u8 input (0–255, no `rescale`
/// before it): torchvision's 0–1 units where MindSpore's 0–255 ones are meant.
pub(super) fn unit_warnings(ops: &[Op], stages: &[(String, Spec)]) -> Vec<String> {
    ops.iter()
        .enumerate()
        .filter_map(|(i, op)| match op {
            Op::Normalize(n) => {
                let input = &stages.get(i)?.1;
                let small = |v: &[f32]| v.iter().all(|x| x.abs() <= 1.0);
                (input.dtype == crate::spec::DType::U8 && small(&n.mean) && small(&n.std)).then(|| {
                    format!(
                        "ops[{i}] (normalize): mean {:?} and std {:?} are in 0–1 units (torchvision's), \
                         but the images are 0–255 here: multiply them by 255 (MindSpore's units), or \
                         put a `rescale` of 1/255 before normalize",
                        n.mean, n.std
                    )
                })
            }
            _ => None,
        })
        .collect()
}
