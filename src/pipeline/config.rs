//! The pipeline file's tables: `[batch]`, `[engine]` and the whole [`PipelineConfig`], read
//! from TOML (a file) or JSON (the Python package), written back as TOML.

use super::places::{locate_json_error, op_error, op_places, source_error, OpPlaces, Tables};
use crate::batch_ops::BatchOp;
use crate::error::OnError;
use crate::error::{Error, Invalid, Result};
use crate::ops::Op;
use crate::shards::StoreConfig;
use crate::source::SourceConfig;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The `[batch]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct BatchConfig {
    /// Samples per batch.
    pub size: usize,
    /// Drop the last, incomplete batch (MindSpore's `drop_remainder`).
    #[serde(default)]
    pub drop_remainder: bool,
}

impl BatchConfig {
    /// Batches of `size`, the last one kept even when short.
    pub fn new(size: usize) -> BatchConfig {
        BatchConfig {
            size,
            drop_remainder: false,
        }
    }
}

setters!(BatchConfig {
    drop_remainder: bool,
});

impl Default for BatchConfig {
    /// One sample a batch (what a conversion pipeline without `[batch]` gets).
    fn default() -> BatchConfig {
        BatchConfig {
            size: 1,
            drop_remainder: false,
        }
    }
}

/// The worker count when none is given (`engine.workers`, the CLI's `--workers`,
/// `imgfeed validate`): one per core the process may use, 2 where that cannot be told.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

fn two() -> usize {
    2
}

/// The `[engine]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct EngineConfig {
    /// Worker threads (MindSpore's `num_parallel_workers`); default: one per core.
    #[serde(default = "default_workers")]
    pub workers: usize,
    /// Batches being filled at once. Default: as many as fit in 6 MB, between 2 and 16 —
    /// 2 for ImageNet-sized batches (19 MB), 4 for CIFAR ones (1.5 MB), whose batches fill
    /// in microseconds (measured: 4 beat 2, 8 and 16, whose extra buffers cost page faults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch: Option<usize>,
    /// Ready batches waiting for the trainer (the device queue).
    #[serde(default = "two")]
    pub queue: usize,
    /// `error` (default), `skip` or `replace` bad samples.
    #[serde(default)]
    pub on_error: OnError,
    /// Time every stage of every sample (for `imgfeed bench`).
    #[serde(default)]
    pub profile: bool,
    /// Samples a worker claims at once; default: the source's measured choice (1 for
    /// image files, 64 for CIFAR records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_unit: Option<usize>,
    /// Apply the geometric fusions (resize + center_crop in one call, decoding only the
    /// region a crop reads). `false` runs each op on its own: to check and measure them.
    #[serde(default = "yes")]
    pub fuse: bool,
    /// Workers fingerprint every sample they write ([`crate::Batch::fingerprints`]): a
    /// cheap way to compare outputs across runs, worker counts and machines. `imgfeed
    /// run` turns it on for its digest.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fingerprint: bool,
}

setters!(EngineConfig {
    workers: usize,
    queue: usize,
    on_error: OnError,
    profile: bool,
    fuse: bool,
    fingerprint: bool,
} optional {
    prefetch: usize,
    work_unit: usize,
});

fn yes() -> bool {
    true
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            workers: default_workers(),
            prefetch: None,
            queue: 2,
            on_error: OnError::Error,
            profile: false,
            work_unit: None,
            fuse: true,
            fingerprint: false,
        }
    }
}

/// A whole pipeline description, as in a pipeline file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PipelineConfig {
    /// Where samples come from.
    pub source: SourceConfig,
    /// Per-sample ops, in order.
    #[serde(default)]
    pub ops: Vec<Op>,
    /// Batching; may be left out of a conversion pipeline (one with `[store]`).
    #[serde(default)]
    pub batch: BatchConfig,
    /// Stages on whole batches (`one_hot`, `mixup`, `cutmix`, `mixup_cutmix`), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batch_ops: Vec<BatchOp>,
    /// Threads and queues.
    #[serde(default)]
    pub engine: EngineConfig,
    /// How `convert --format shards` stores samples (conversion pipelines only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreConfig>,
    /// Where a pipeline file wrote each op (for errors).
    #[serde(skip)]
    pub(super) places: OpPlaces,
    /// Where it wrote each batch op.
    #[serde(skip)]
    pub(super) batch_places: OpPlaces,
}

impl PipelineConfig {
    /// The tables as JSON (what the Python package builds), checked table by table so that
    /// a mistake is named by where it is — `source`, `ops[1] (resize)`, `batch`, `engine`
    /// — and in the caller's words, not at a line and column of text nobody wrote.
    pub fn from_json(text: &str) -> Result<PipelineConfig> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(Invalid::NotJson)?;
        serde_json::from_value::<PipelineConfig>(value.clone())
            .map_err(|e| Error::Invalid(locate_json_error(&value, e)))
    }

    /// `source` through `ops` into `batch`, the engine at its defaults, no `[store]`.
    pub fn new(source: SourceConfig, ops: Vec<Op>, batch: BatchConfig) -> PipelineConfig {
        PipelineConfig {
            source,
            ops,
            batch,
            engine: EngineConfig::default(),
            store: None,
            batch_ops: Vec::new(),
            places: OpPlaces::default(),
            batch_places: OpPlaces::default(),
        }
    }
}

setters!(PipelineConfig {
    engine: EngineConfig,
} optional {
    store: StoreConfig,
});

impl PipelineConfig {
    /// Parse pipeline TOML; `path` names it in errors and anchors a relative `root`.
    pub fn parse(text: &str, path: &Path) -> Result<PipelineConfig> {
        // An op's own mistakes (an unknown field, a bad value) are reported at that op's
        // table: the whole-file parse below would point at the first `[[ops]]` (serde
        // buffers a tagged enum's fields, losing their places).
        let tables = Tables::read(text);
        let (ops, batch_ops) = tables
            .as_ref()
            .map_or((&[][..], &[][..]), |t| (&t.ops[..], &t.batch_ops[..]));
        let places = op_places(text, path, ops);
        let batch_places = op_places(text, path, batch_ops);
        let found = source_error(text, path, &tables)
            .or_else(|| op_error::<Op>("ops", ops, &places))
            .or_else(|| op_error::<BatchOp>("batch_ops", batch_ops, &batch_places));
        if let Some(message) = found {
            return Err(Error::Config {
                path: path.to_path_buf(),
                message,
            });
        }
        let mut cfg: PipelineConfig = toml::from_str(text).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        cfg.places = places;
        cfg.batch_places = batch_places;
        // `[batch]` may be left out of conversion pipelines (with `[store]`) only.
        let has_batch = tables.as_ref().is_some_and(|t| t.batch.is_some());
        if cfg.store.is_none() && !has_batch {
            return Err(Error::Config {
                path: path.to_path_buf(),
                message: "missing field `batch` (only conversion pipelines, with `[store]`, \
                          may leave it out)"
                    .into(),
            });
        }
        let root = cfg.source.dataset.root_mut();
        // no root (`--data` gives it): left empty, for `open` to ask for it
        if root.is_relative() && !root.as_os_str().is_empty() && !crate::store::url::is_remote(root)
        {
            if let Some(dir) = path.parent() {
                *root = dir.join(&*root);
            }
        }
        Ok(cfg)
    }

    /// Read and parse a pipeline file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<PipelineConfig> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        PipelineConfig::parse(&text, path)
    }
    /// As TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_root_in_a_pipeline_file_is_not_made_relative_to_the_file() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines");
        let text = std::fs::read_to_string(dir.join("resnet50_eval.toml")).expect("reads");
        let text: String = text
            .lines()
            .map(|l| {
                if l.starts_with("root") {
                    "root = \"s3://bucket/ds\""
                } else {
                    l
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let cfg = PipelineConfig::parse(&text, &dir.join("x.toml")).expect("parses");
        assert_eq!(cfg.source.root(), Path::new("s3://bucket/ds"));
    }
}
