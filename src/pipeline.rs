//! A pipeline: a source, its sampling, the ops and the batching, from a TOML file or built
//! in code; checked as a whole before any pixel is read.
//!
//! ```toml
//! [source]
//! kind = "image_folder"          # or "cifar10", "cifar100"
//! root = "../fixtures/imagefolder"  # relative to this file
//! shuffle = false
//!
//! [[ops]]
//! op = "decode"
//!
//! [batch]
//! size = 32
//! drop_remainder = true
//!
//! [engine]
//! workers = 2
//! ```
//!
//! Every table rejects unknown fields, and an unknown op is an error, with line and column.

use crate::batch_ops::{BatchContext, BatchLowered, BatchOp};
use crate::engine::batch::{BufShape, Pool};
use crate::engine::program::Program;
use crate::engine::{Epoch, Job, OnError, State};
use crate::error::{Error, Place, Result};
use crate::ops::Op;
use crate::plan::batch_count;
use crate::shards::StoreConfig;
use crate::source::Source;
pub use crate::source::{Dataset, SourceConfig, SourceKind};
use crate::spec::{Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

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
    places: OpPlaces,
    /// Where it wrote each batch op.
    #[serde(skip)]
    batch_places: OpPlaces,
}

impl PipelineConfig {
    /// The tables as JSON (what the Python package builds), checked table by table so that
    /// a mistake is named by where it is — `source`, `ops[1] (resize)`, `batch`, `engine`
    /// — and in the caller's words, not at a line and column of text nobody wrote.
    pub fn from_json(text: &str) -> Result<PipelineConfig> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| Error::Invalid(format!("the pipeline is not JSON: {e}")))?;
        serde_json::from_value::<PipelineConfig>(value.clone())
            .map_err(|e| Error::Invalid(locate_json_error(&value, &e)))
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
        if root.is_relative() && !crate::remote::is_remote(root) {
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

    /// The ops compiled for `source`, producing `out` (its checked output spec).
    pub(crate) fn compile(&self, source: &dyn Source, out: &Spec) -> Result<Program> {
        Program::compile(
            &source.spec(),
            source.stored_layout(),
            &self.ops,
            out,
            self.engine.fuse,
        )
    }

    /// As TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
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

/// Where one op of a pipeline file is written: its table, and each `key = value` line in it
/// (tables written as `[[ops]]`; an inline table gets only its own place).
#[derive(Clone, Debug)]
struct OpPlace {
    table: Place,
    /// `(key, its place, the value's text on that line)`.
    keys: Vec<(String, Place, String)>,
}

impl OpPlace {
    /// The place of `key` in this op's table, else of the table.
    fn of(&self, key: Option<&str>) -> Place {
        key.and_then(|k| self.keys.iter().find(|(name, ..)| name == k))
            .map_or_else(|| self.table.clone(), |(_, p, _)| p.clone())
    }

    /// Where serde's `message` about this table points: the unknown field it names, the key
    /// holding the unknown variant it names, else the table.
    fn culprit(&self, message: &str) -> Place {
        let quoted = |prefix: &str| {
            message
                .strip_prefix(prefix)
                .and_then(|m| m.split('`').next())
                .map(str::to_string)
        };
        if let Some(field) = quoted("unknown field `") {
            return self.of(Some(&field));
        }
        if let Some(variant) = quoted("unknown variant `") {
            // the value as written: a basic or a literal string, maybe with a comment after
            let written = |v: &str| {
                let v = v.trim();
                [format!("\"{variant}\""), format!("'{variant}'")]
                    .iter()
                    .any(|q| v.starts_with(q.as_str()))
            };
            if let Some((_, p, _)) = self.keys.iter().find(|(.., v)| written(v)) {
                return p.clone();
            }
        }
        self.table.clone()
    }
}

/// Where a pipeline file wrote its ops, so that an op's error can point at its line. Not part
/// of what the pipeline is: two configs that differ only here are equal.
#[derive(Clone, Debug, Default)]
struct OpPlaces(Vec<OpPlace>);

impl PartialEq for OpPlaces {
    fn eq(&self, _: &OpPlaces) -> bool {
        true
    }
}

/// A pipeline file's tables as written, with their byte spans (one lenient parse, for
/// pointing at mistakes and for what the typed parse cannot tell).
#[derive(Deserialize)]
struct Tables {
    source: Option<toml::Spanned<toml::Table>>,
    #[serde(default)]
    ops: Vec<toml::Spanned<toml::Table>>,
    batch: Option<toml::Value>,
    #[serde(default)]
    batch_ops: Vec<toml::Spanned<toml::Table>>,
}

impl Tables {
    /// `None` when the file does not parse as TOML (the typed parse reports where).
    fn read(text: &str) -> Option<Tables> {
        toml::from_str(text).ok()
    }
}

/// Where the table at `span` of `text` (the contents of `file`) and its keys are.
fn table_place(text: &str, span: std::ops::Range<usize>, file: &Path) -> OpPlace {
    let body = text.get(span.clone()).unwrap_or("");
    let mut keys = Vec::new();
    let mut offset = span.start;
    for line in body.split_inclusive('\n') {
        let key_at = line.len() - line.trim_start().len();
        let rest = &line[key_at..];
        let key: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        if let Some(value) = rest[key.len()..].trim_start().strip_prefix('=') {
            if !key.is_empty() {
                let place = Place::of(file, text, offset + key_at);
                keys.push((key, place, value.trim().to_string()));
            }
        }
        offset += line.len();
    }
    OpPlace {
        table: Place::of(file, text, span.start),
        keys,
    }
}

/// The places of the ops of `text` (the contents of `file`).
fn op_places(text: &str, file: &Path, ops: &[toml::Spanned<toml::Table>]) -> OpPlaces {
    OpPlaces(
        ops.iter()
            .map(|t| table_place(text, t.span(), file))
            .collect(),
    )
}

/// A mistake inside `[source]`, as `[source] at line L, column C: why`, at the field where
/// the message names one: the whole-file parse would point at the table (the table is split
/// into dataset and sampling fields by hand, which loses serde's places). `None` when the
/// table is valid or the file does not parse (the whole-file parse reports that).
fn source_error(text: &str, file: &Path, tables: &Option<Tables>) -> Option<String> {
    let source = tables.as_ref()?.source.as_ref()?;
    let place = table_place(text, source.span(), file);
    let err = toml::Value::Table(source.get_ref().clone())
        .try_into::<SourceConfig>()
        .err()?;
    let p = place.culprit(err.message());
    Some(format!(
        "[source] at line {}, column {}: {}",
        p.line,
        p.column,
        err.message().trim_end()
    ))
}

/// The first op of `text` that is not a valid op table, as `ops[i] (name) at line L, column
/// C: why`, the place being the field at fault where the message names one (an unknown
/// field), else the op's table; `None` when every op table is valid, or when the file does
/// not parse or an op's name is wrong (the whole-file parse reports those at their own line).
fn op_error<T: serde::de::DeserializeOwned>(
    list: &str,
    tables: &[toml::Spanned<toml::Table>],
    places: &OpPlaces,
) -> Option<String> {
    for (i, t) in tables.iter().enumerate() {
        let table = t.get_ref().clone();
        let name = table
            .get("op")
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_string();
        let Err(err) = toml::Value::Table(table).try_into::<T>() else {
            continue;
        };
        // An unknown or missing `op` name: the whole-file parse points at the `op = ...`
        // line itself, better than the table's.
        let message = err.message();
        if message.contains("missing field `op`")
            || message.starts_with(&format!("unknown variant `{name}`"))
        {
            return None;
        }
        let place = places.0.get(i).map(|p| p.culprit(err.message()));
        let at = place.map_or(String::new(), |p| {
            format!(" at line {}, column {}", p.line, p.column)
        });
        return Some(format!(
            "{list}[{i}] ({name}){at}: {}",
            err.message().trim_end()
        ));
    }
    None
}

/// A `normalize` whose mean and std are all at most 1 on u8 input (0–255, no `rescale`
/// before it): torchvision's 0–1 units where MindSpore's 0–255 ones are meant.
fn unit_warnings(ops: &[Op], stages: &[(String, Spec)]) -> Vec<String> {
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

/// A checked pipeline, ready to run epochs.
pub struct Pipeline {
    config: PipelineConfig,
    warnings: Vec<String>,
    source: Arc<dyn Source>,
    stages: Vec<(String, Spec)>,
    program: Arc<Program>,
    pool: Arc<Pool>,
    prefetch: usize,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("source", &self.source.describe())
            .field("stages", &self.stages)
            .finish()
    }
}

/// Build a pipeline in code.
///
/// ```no_run
/// use imgfeed::ops::{CenterCrop, Decode, Op, Resize};
/// use imgfeed::{Pipeline, SourceConfig, SourceKind};
/// let p = Pipeline::builder(SourceConfig::new(SourceKind::ImageFolder, "data/train"))
///     .op(Op::Decode(Decode::default()))
///     .op(Op::Resize(Resize::new(256)))
///     .op(Op::CenterCrop(CenterCrop::new(224)))
///     .batch(32, true)
///     .workers(2)
///     .build()?;
/// # Ok::<(), imgfeed::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct PipelineBuilder {
    config: PipelineConfig,
}

impl PipelineBuilder {
    /// Append an op.
    pub fn op(mut self, op: Op) -> Self {
        self.config.ops.push(op);
        self
    }
    /// Append a batch op.
    pub fn batch_op(mut self, op: BatchOp) -> Self {
        self.config.batch_ops.push(op);
        self
    }
    /// Batch size and whether to drop the last incomplete batch.
    pub fn batch(mut self, size: usize, drop_remainder: bool) -> Self {
        self.config.batch = BatchConfig {
            size,
            drop_remainder,
        };
        self
    }
    /// Worker threads.
    pub fn workers(mut self, n: usize) -> Self {
        self.config.engine.workers = n;
        self
    }
    /// Replace the whole engine table.
    pub fn engine(mut self, engine: EngineConfig) -> Self {
        self.config.engine = engine;
        self
    }
    /// Check and build.
    pub fn build(self) -> Result<Pipeline> {
        Pipeline::new(self.config)
    }
}

impl Pipeline {
    /// Start building a pipeline over `source` (batch 1, no ops, default engine).
    pub fn builder(source: SourceConfig) -> PipelineBuilder {
        PipelineBuilder {
            config: PipelineConfig {
                source,
                ops: Vec::new(),
                batch: BatchConfig {
                    size: 1,
                    drop_remainder: false,
                },
                engine: EngineConfig::default(),
                store: None,
                batch_ops: Vec::new(),
                places: OpPlaces::default(),
                batch_places: OpPlaces::default(),
            },
        }
    }

    /// Read, parse and check a pipeline file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Pipeline> {
        Pipeline::new(PipelineConfig::from_file(path)?)
    }

    /// Check a configuration against its source and build it.
    pub fn new(config: PipelineConfig) -> Result<Pipeline> {
        // The settings are checked before the dataset is listed.
        let config = Pipeline::checked(config)?;
        let source = config.source.open()?;
        Pipeline::with_source(config, source)
    }

    /// The settings that need no dataset: the shard from the environment, epochs,
    /// sampling, batch size and workers.
    fn checked(mut config: PipelineConfig) -> Result<PipelineConfig> {
        config.source.resolve_shard(|k| std::env::var(k).ok())?;
        config
            .source
            .sampling
            .validate()
            .map_err(|e| Error::Invalid(format!("source: {e}")))?;
        if config.batch.size == 0 {
            return Err(Error::Invalid("batch.size must be at least 1".into()));
        }
        if config.engine.work_unit == Some(0) {
            return Err(Error::Invalid(
                "engine.work_unit (--work-unit) must be at least 1".into(),
            ));
        }
        if config.engine.workers == 0 || config.engine.workers > 1024 {
            return Err(Error::Invalid(
                "engine.workers must be between 1 and 1024".into(),
            ));
        }
        Ok(config)
    }

    /// [`Pipeline::new`] over a source already opened from `config.source` (a caller that
    /// listed the dataset once to show its size and classes does not list it again).
    pub fn with_source(config: PipelineConfig, source: Arc<dyn Source>) -> Result<Pipeline> {
        let config = Pipeline::checked(config)?;
        let mut stages = config.spec_chain(&source.spec())?;
        let mut spec = stages
            .last()
            .map_or_else(|| source.spec(), |(_, s)| s.clone());
        let mut at = BatchContext {
            soft_labels: false,
            on_error: config.engine.on_error,
        };
        for (i, op) in config.batch_ops.iter().enumerate() {
            spec = op.def().output_spec(&spec, &at).map_err(|e| {
                let key = match &e {
                    SpecError::Param { name, .. } => Some(*name),
                    _ => None,
                };
                let at = config.batch_places.0.get(i).map(|p| p.of(key));
                let at = at.map_or(String::new(), |p| format!("{p}: "));
                Error::Invalid(format!("{at}batch_ops[{i}] ({}): {e}", op.name()))
            })?;
            at.soft_labels |= matches!(op.def().lower(), BatchLowered::LabelRows { .. });
            stages.push((op.name().to_string(), spec.clone()));
        }
        if spec.encoded {
            return Err(Error::Invalid(
                "the samples are still encoded at the end: add a `decode` op".into(),
            ));
        }
        let Some(elems) = spec.elements().filter(|&e| e > 0) else {
            return Err(Error::Invalid(
                "image sizes vary from sample to sample, so they cannot be batched: end the \
                 ops with center_crop, random_crop or resize to [h, w]"
                    .into(),
            ));
        };
        // One batch buffer must be addressable (the engine writes into it through raw
        // pointers, so its size is checked here, not assumed).
        let label_bytes = config
            .batch
            .size
            .checked_mul(spec.label_columns)
            .and_then(|n| n.checked_mul(spec.label.size()));
        let batch_bytes = config
            .batch
            .size
            .checked_mul(elems)
            .and_then(|n| n.checked_mul(spec.dtype.size()))
            .zip(label_bytes)
            .and_then(|(i, l)| i.checked_add(l));
        if batch_bytes.is_none_or(|b| b > 1 << 36) {
            return Err(Error::Invalid(format!(
                "a batch of {} samples of {elems} values each is too large",
                config.batch.size
            )));
        }
        let program = config.compile(source.as_ref(), &spec)?;
        let shape = BufShape {
            batch_size: config.batch.size,
            sample_elems: elems,
            dtype: spec.dtype,
            label: spec.label,
            label_cols: spec.label_columns,
            fingerprints: config.engine.fingerprint,
        };
        let e = &config.engine;
        let batch_bytes = (shape.batch_size * shape.sample_elems * shape.dtype.size()).max(1);
        // Soft labels can outweigh the images (one_hot with many classes): keep the pool's
        // label buffers under 1 GiB.
        let label_bytes = (shape.batch_size * shape.label_cols * spec.label.size()).max(1);
        let prefetch = e
            .prefetch
            .unwrap_or_else(|| {
                ((6 << 20) / batch_bytes)
                    .clamp(2, 16)
                    .min((1 << 30) / label_bytes)
            })
            .max(1);
        let pool = Arc::new(Pool::new(shape, prefetch + e.queue.max(1) + 2));
        Ok(Pipeline {
            warnings: unit_warnings(&config.ops, &stages),
            config,
            source,
            stages,
            program: Arc::new(program),
            pool,
            prefetch,
        })
    }

    /// What looks like a mistake but runs: a `normalize` given 0–1 mean and std (torchvision's
    /// units) on 0–255 pixels, which would produce values around ±2000. Every command
    /// prints these; nothing is changed.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The warning for a pipeline whose epochs yield no batch (fewer samples than a batch
    /// with `drop_remainder`), or `None`.
    pub fn empty_epoch_warning(&self) -> Option<String> {
        (self.batches_per_epoch() == 0).then(|| {
            format!(
                "{} an epoch, fewer than the batch size {} with drop_remainder: every epoch \
                 yields no batch (lower the batch size, or set drop_remainder = false)",
                crate::spec::count(self.samples_per_epoch() as u64, "sample", "samples"),
                self.config.batch.size
            )
        })
    }

    /// The configuration it was built from.
    pub fn config(&self) -> &PipelineConfig {
        &self.config
    }

    /// The source.
    pub fn source(&self) -> &dyn Source {
        self.source.as_ref()
    }

    /// `(stage, spec after it)`, starting with the source.
    pub fn stages(&self) -> &[(String, Spec)] {
        &self.stages
    }

    /// The fusions the engine applies, in words.
    pub fn fusions(&self) -> &[String] {
        &self.program.fusions
    }

    /// The spec of one output sample.
    pub fn output_spec(&self) -> &Spec {
        &self.program.out
    }

    /// Samples read per epoch (this shard, after `num_samples`).
    pub fn samples_per_epoch(&self) -> usize {
        self.config.source.sampling.len(self.source.len())
    }

    /// Batches per epoch.
    pub fn batches_per_epoch(&self) -> usize {
        batch_count(
            self.samples_per_epoch(),
            self.config.batch.size,
            self.config.batch.drop_remainder,
        )
    }

    /// Start epoch `epoch` (it seeds the shuffle and the random ops).
    pub fn epoch(&self, epoch: u64) -> Epoch {
        let order = self.config.source.sampling.order(self.source.len(), epoch);
        self.launch(State::epoch_start(epoch), order, 0)
    }

    /// Start where `state` says: the batches a run that stopped at `state` would have
    /// yielded next, with any worker count (the order and every random choice depend
    /// only on the seed, the epoch and the sample).
    pub fn resume(&self, state: State) -> Result<Epoch> {
        let order = self
            .config
            .source
            .sampling
            .order(self.source.len(), state.epoch);
        let (bs, drop) = (self.config.batch.size, self.config.batch.drop_remainder);
        let batches = batch_count(order.len(), bs, drop);
        if state.batch > batches {
            return Err(Error::Invalid(format!(
                "cannot start at batch {} of epoch {}: it has {batches} batches",
                state.batch, state.epoch
            )));
        }
        let start = match state.sample {
            Some(s) if self.config.engine.on_error == OnError::Skip => s,
            _ => (state.batch * bs).min(order.len()),
        };
        if start > order.len() {
            return Err(Error::Invalid(format!(
                "cannot start at sample {start} of epoch {}: this shard has {} samples",
                state.epoch,
                order.len()
            )));
        }
        Ok(self.launch(state, order, start))
    }

    /// Epoch `epoch`'s contiguous slice `id` of `count` of this shard's order (positions
    /// [`crate::shards::slice_range`]): the slices of a conversion split into jobs, which
    /// together hold the epoch's samples once, in order, with the same bytes (every random
    /// draw depends on the sample, not on the slice). Batches are numbered from 0.
    pub fn epoch_slice(&self, epoch: u64, id: usize, count: usize) -> Result<Epoch> {
        if count == 0 || id >= count {
            return Err(Error::Invalid(format!(
                "slice {id}/{count}: the slice number must be below the number of slices"
            )));
        }
        let mut order = self.config.source.sampling.order(self.source.len(), epoch);
        let (first, end) = crate::shards::slice_range(order.len(), id, count);
        order.truncate(end);
        Ok(self.launch(State::epoch_start(epoch), order, first))
    }

    /// Run this shard's `order` of `state.epoch` from position `start` (checked to be
    /// inside it), numbering batches from `state.batch`.
    fn launch(&self, state: State, order: Vec<usize>, start: usize) -> Epoch {
        let e = &self.config.engine;
        let (bs, drop) = (self.config.batch.size, self.config.batch.drop_remainder);
        // Skip mode reads to the end of the order (later samples fill in for skipped
        // ones); the others read exactly the announced batches.
        let end = if e.on_error == OnError::Skip {
            order.len()
        } else {
            (batch_count(order.len(), bs, drop) * bs).min(order.len())
        };
        let total = end.saturating_sub(start);
        self.source
            .epoch_starts(state.epoch, order.get(start..end).unwrap_or(&[]));
        Epoch::start(Job {
            source: Arc::clone(&self.source),
            program: Arc::clone(&self.program),
            pool: Arc::clone(&self.pool),
            order,
            start,
            total,
            first_batch: state.batch,
            batches: total.div_ceil(bs),
            drop_remainder: drop,
            seed: self.config.source.sampling.seed,
            epoch: state.epoch,
            workers: e.workers,
            prefetch: self.prefetch,
            queue: e.queue,
            on_error: e.on_error,
            profile: e.profile,
            work_unit: e
                .work_unit
                .unwrap_or_else(|| self.source.work_unit())
                .max(1),
            label_rows: self
                .config
                .batch_ops
                .iter()
                .find_map(|op| match op.def().lower() {
                    BatchLowered::LabelRows { on, off, stage } => Some((on, off, stage)),
                    BatchLowered::Batch(_) => None,
                }),
            batch_kernels: self
                .config
                .batch_ops
                .iter()
                .filter_map(|op| match op.def().lower() {
                    BatchLowered::Batch(k) => Some(k),
                    BatchLowered::LabelRows { .. } => None,
                })
                .collect(),
        })
    }
}

/// Where in the tables `value` the error `whole` (of the whole config's parse) is: the first
/// table that does not parse on its own, with its error.
fn locate_json_error(value: &serde_json::Value, whole: &serde_json::Error) -> String {
    use serde::de::DeserializeOwned;
    fn check<T: DeserializeOwned>(v: &serde_json::Value) -> Option<String> {
        serde_json::from_value::<T>(v.clone())
            .err()
            .map(|e| e.to_string())
    }
    let Some(tables) = value.as_object() else {
        return format!("the pipeline must be a table of tables: {whole}");
    };
    let listed = |key: &str| tables.get(key).and_then(|v| v.as_array()).cloned();
    let named = |t: &serde_json::Value, key: &str| {
        t.get(key)
            .and_then(|v| v.as_str())
            .map_or(String::new(), |n| format!(" ({n})"))
    };
    if let Some(e) = tables.get("source").and_then(check::<SourceConfig>) {
        return format!("source: {e}");
    }
    for (i, op) in listed("ops").unwrap_or_default().iter().enumerate() {
        if let Some(e) = check::<Op>(op) {
            return format!("ops[{i}]{}: {e}", named(op, "op"));
        }
    }
    for (i, op) in listed("batch_ops").unwrap_or_default().iter().enumerate() {
        if let Some(e) = check::<BatchOp>(op) {
            return format!("batch_ops[{i}]{}: {e}", named(op, "op"));
        }
    }
    if let Some(e) = tables.get("batch").and_then(check::<BatchConfig>) {
        return format!("batch: {e}");
    }
    if let Some(e) = tables.get("engine").and_then(check::<EngineConfig>) {
        return format!("engine: {e}");
    }
    if let Some(e) = tables.get("store").and_then(check::<StoreConfig>) {
        return format!("store: {e}");
    }
    whole.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::image::{bug, Sample};
    use crate::ops::kernel::Kernel;
    use crate::Fault;

    /// A kernel that finds its own state inconsistent on every sample.
    #[derive(Debug)]
    struct Broken;

    impl Kernel for Broken {
        fn name(&self) -> &'static str {
            "broken"
        }

        fn run(&self, _: &mut Sample<'_, '_>) -> std::result::Result<(), Fault> {
            Err(bug("the kernel's plan does not fit the image"))
        }
    }

    /// An internal fault (a bug, not a bad file) ends the epoch as `Error::Internal`, under
    /// every error policy: never skipped, replaced or reported as a bad sample.
    #[test]
    fn an_internal_fault_ends_the_epoch_as_a_bug_whatever_the_error_policy() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/imagefolder");
        for on_error in [OnError::Error, OnError::Skip, OnError::Replace] {
            let source = SourceConfig::new(SourceKind::ImageFolder, &root);
            let config = PipelineConfig::new(
                source,
                vec![
                    Op::Decode(Default::default()),
                    Op::CenterCrop(crate::ops::CenterCrop::new(8)),
                ],
                BatchConfig::new(2),
            )
            .engine(EngineConfig::default().workers(2).on_error(on_error));
            let mut p = Pipeline::new(config).expect("builds");
            let mut program = (*p.program).clone();
            program.kernels.push(Arc::new(Broken));
            p.program = Arc::new(program);
            let results: Vec<_> = p.epoch(0).collect();
            assert_eq!(
                results.len(),
                1,
                "{on_error:?}: the first error ends the epoch"
            );
            match &results[0] {
                Err(Error::Internal(m)) => assert!(
                    m.contains("broken: the kernel's plan does not fit the image"),
                    "{on_error:?}: {m}"
                ),
                other => panic!("{on_error:?}: expected Error::Internal, got {other:?}"),
            }
        }
    }
}
