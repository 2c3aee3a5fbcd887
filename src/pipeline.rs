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

use crate::engine::batch::{BufShape, Pool};
use crate::engine::program::Program;
use crate::engine::{Epoch, Job, OnError, State};
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::plan::{batch_count, shard_from_env, Sampling, Uneven};
use crate::shards::StoreConfig;
use crate::source::{Cifar, CifarKind, CifarLabel, ImageFolder, Shards, Source, Usage};
use crate::spec::Spec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Kind of source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// `root/<class>/<image>`.
    ImageFolder,
    /// CIFAR-10 binary files.
    Cifar10,
    /// CIFAR-100 binary files.
    Cifar100,
    /// A dataset converted by `imgfeed convert --format shards` (a folder with a
    /// `manifest.json`). A root holding such a manifest is read as shards whatever the
    /// kind says, so a pipeline written for the original runs unchanged on its copy.
    Shards,
}

fn one() -> usize {
    1
}

fn one_epoch() -> u64 {
    1
}

fn is_one_epoch(n: &u64) -> bool {
    *n == 1
}

/// Where `num_shards` and `shard_id` come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShardFrom {
    /// The `num_shards` and `shard_id` fields (or the command line).
    #[default]
    Config,
    /// The launcher's environment: `WORLD_SIZE`/`RANK` (torchrun) or `RANK_SIZE`/`RANK_ID`
    /// (MindSpore), read when the pipeline is built.
    Env,
}

/// The `[source]` table: where the samples come from and which ones an epoch reads
/// (MindSpore puts the sampling arguments on the dataset too).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// What kind of dataset.
    pub kind: SourceKind,
    /// Dataset root (relative paths in a file are relative to the file's folder).
    pub root: PathBuf,
    /// image_folder: extensions to read (default jpg, jpeg, png, bmp, webp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<String>>,
    /// image_folder: folder name → label; only these folders are read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_indexing: Option<BTreeMap<String, u32>>,
    /// cifar10/cifar100: train, test or all (default train).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// cifar100: fine, coarse or both (default fine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<CifarLabel>,
    /// Read at most this many samples per epoch (per shard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_samples: Option<usize>,
    /// Shuffle every epoch.
    #[serde(default)]
    pub shuffle: bool,
    /// Seed of the shuffle and of the random ops.
    #[serde(default)]
    pub seed: u64,
    /// Data-parallel shards (MindSpore DistributedSampler semantics).
    #[serde(default = "one")]
    pub num_shards: usize,
    /// This process's shard.
    #[serde(default)]
    pub shard_id: usize,
    /// `"env"`: take `num_shards`/`shard_id` from the launcher's environment.
    #[serde(default)]
    pub shard: ShardFrom,
    /// When `num_shards` does not divide the dataset: `pad` (default, MindSpore's
    /// DistributedSampler), `drop` or `exact`.
    #[serde(default)]
    pub uneven: Uneven,
    /// Epochs a run makes (the permutation is reseeded every epoch).
    #[serde(default = "one_epoch", skip_serializing_if = "is_one_epoch")]
    pub num_epochs: u64,
    /// image_folder: largest file read, in bytes (default 256 MiB); a larger file fails its
    /// sample (kind `file_too_large`) before it is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_bytes: Option<u64>,
}

impl SourceConfig {
    /// A source of `kind` at `root` with every option at its default.
    pub fn new(kind: SourceKind, root: impl Into<PathBuf>) -> SourceConfig {
        SourceConfig {
            kind,
            root: root.into(),
            extensions: None,
            class_indexing: None,
            usage: None,
            label: None,
            num_samples: None,
            shuffle: false,
            seed: 0,
            num_shards: 1,
            shard_id: 0,
            shard: ShardFrom::Config,
            uneven: Uneven::Pad,
            num_epochs: 1,
            max_file_bytes: None,
        }
    }

    /// The sampling this table describes.
    pub fn sampling(&self) -> Sampling {
        Sampling {
            shuffle: self.shuffle,
            seed: self.seed,
            num_samples: self.num_samples,
            num_shards: self.num_shards,
            shard_id: self.shard_id,
            uneven: self.uneven,
        }
    }

    /// With `shard = "env"`, fill `num_shards`/`shard_id` from the variables `get` reads.
    pub fn resolve_shard(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<()> {
        if self.shard == ShardFrom::Env {
            let (n, id) =
                shard_from_env(get).map_err(|e| Error::Invalid(format!("source: {e}")))?;
            self.num_shards = n;
            self.shard_id = id;
        }
        Ok(())
    }

    /// Open the dataset (lists or maps files; reads no sample).
    pub fn open(&self) -> Result<Arc<dyn Source>> {
        if self.kind == SourceKind::Shards || Shards::is_dataset(&self.root) {
            return self.open_shards();
        }
        let misplaced = |field: &str| {
            Err(Error::Invalid(format!(
                "source: `{field}` does not apply to kind {:?}",
                self.kind
            )))
        };
        match self.kind {
            SourceKind::ImageFolder => {
                if self.usage.is_some() {
                    return misplaced("usage");
                }
                if self.label.is_some() {
                    return misplaced("label");
                }
                let f = ImageFolder::open(
                    &self.root,
                    self.extensions.as_deref(),
                    self.class_indexing.as_ref(),
                )?;
                let f = match self.max_file_bytes {
                    Some(0) => {
                        return Err(Error::Invalid(
                            "source: max_file_bytes must be positive".into(),
                        ))
                    }
                    Some(n) => f.with_max_file_bytes(n),
                    None => f,
                };
                Ok(Arc::new(f))
            }
            SourceKind::Shards => self.open_shards(),
            SourceKind::Cifar10 | SourceKind::Cifar100 => {
                if self.extensions.is_some() {
                    return misplaced("extensions");
                }
                if self.class_indexing.is_some() {
                    return misplaced("class_indexing");
                }
                if self.max_file_bytes.is_some() {
                    return misplaced("max_file_bytes");
                }
                let kind = if self.kind == SourceKind::Cifar10 {
                    if self.label.is_some() {
                        return misplaced("label");
                    }
                    CifarKind::Cifar10
                } else {
                    CifarKind::Cifar100
                };
                let c = Cifar::open(
                    &self.root,
                    kind,
                    self.usage.unwrap_or_default(),
                    self.label.unwrap_or_default(),
                )?;
                Ok(Arc::new(c))
            }
        }
    }
}

impl SourceConfig {
    /// A converted dataset. The listing options of the original source applied when it
    /// was converted: `extensions` is ignored, and `class_indexing`, `usage` and `label`
    /// must say what the conversion used (labels are stored), or it is an error.
    fn open_shards(&self) -> Result<Arc<dyn Source>> {
        let s = Shards::open(&self.root)?;
        let m = s.manifest();
        let differs = |field: &str, want: String, stored: String| {
            Err(Error::Invalid(format!(
                "source: `{field}` is {want}, but {} was converted with {stored}",
                self.root.display()
            )))
        };
        if let Some(map) = &self.class_indexing {
            let stored: BTreeMap<String, u32> = m.classes.iter().cloned().collect();
            if map != &stored {
                return differs("class_indexing", format!("{map:?}"), format!("{stored:?}"));
            }
        }
        let name = |v: serde_json::Result<serde_json::Value>| {
            v.ok().and_then(|v| v.as_str().map(str::to_string))
        };
        if let Some(u) = self.usage {
            let want = name(serde_json::to_value(u));
            if want != m.source.usage {
                return differs(
                    "usage",
                    format!("{want:?}"),
                    format!("{:?}", m.source.usage),
                );
            }
        }
        if let Some(l) = self.label {
            let want = name(serde_json::to_value(l));
            if want != m.source.label {
                return differs(
                    "label",
                    format!("{want:?}"),
                    format!("{:?}", m.source.label),
                );
            }
        }
        Ok(Arc::new(s))
    }
}

/// The `[batch]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchConfig {
    /// Samples per batch.
    pub size: usize,
    /// Drop the last, incomplete batch (MindSpore's `drop_remainder`).
    #[serde(default)]
    pub drop_remainder: bool,
}

impl Default for BatchConfig {
    /// One sample a batch (what a conversion pipeline without `[batch]` gets).
    fn default() -> BatchConfig {
        BatchConfig {
            size: 1,
            drop_remainder: false,
        }
    }
}

fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

fn two() -> usize {
    2
}

/// The `[engine]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
pub struct PipelineConfig {
    /// Where samples come from.
    pub source: SourceConfig,
    /// Per-sample ops, in order.
    #[serde(default)]
    pub ops: Vec<Op>,
    /// Batching; may be left out of a conversion pipeline (one with `[store]`).
    #[serde(default)]
    pub batch: BatchConfig,
    /// Threads and queues.
    #[serde(default)]
    pub engine: EngineConfig,
    /// How `convert --format shards` stores samples (conversion pipelines only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreConfig>,
}

impl PipelineConfig {
    /// Parse pipeline TOML; `path` names it in errors and anchors a relative `root`.
    pub fn parse(text: &str, path: &Path) -> Result<PipelineConfig> {
        // An op's own mistakes (an unknown field, a bad value) are reported at that op's
        // table: the whole-file parse below would point at the first `[[ops]]` (serde
        // buffers a tagged enum's fields, losing their places).
        if let Some(message) = op_error(text) {
            return Err(Error::Config {
                path: path.to_path_buf(),
                message,
            });
        }
        let mut cfg: PipelineConfig = toml::from_str(text).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        // `[batch]` may be left out of conversion pipelines (with `[store]`) only.
        let has_batch = toml::from_str::<toml::Table>(text).is_ok_and(|t| t.contains_key("batch"));
        if cfg.store.is_none() && !has_batch {
            return Err(Error::Config {
                path: path.to_path_buf(),
                message: "missing field `batch` (only conversion pipelines, with `[store]`, \
                          may leave it out)"
                    .into(),
            });
        }
        if cfg.source.root.is_relative() {
            if let Some(dir) = path.parent() {
                cfg.source.root = dir.join(&cfg.source.root);
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
        })?;
        stages.push((op.name().to_string(), spec.clone()));
    }
    Ok(stages)
}

/// The first `[[ops]]` table of `text` that is not a valid op, as `ops[i] (name) at line L,
/// column C: why`; `None` when every op table is valid, or when the file does not parse or
/// an op's name is wrong (the whole-file parse reports those at their own line).
fn op_error(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct OpTables {
        #[serde(default)]
        ops: Vec<toml::Spanned<toml::Table>>,
    }
    let tables: OpTables = toml::from_str(text).ok()?;
    for (i, t) in tables.ops.into_iter().enumerate() {
        let start = t.span().start;
        let table = t.into_inner();
        let name = table
            .get("op")
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_string();
        let Err(err) = toml::Value::Table(table).try_into::<Op>() else {
            continue;
        };
        // An unknown or missing `op` name: the whole-file parse points at the `op = ...`
        // line itself, better than the table's.
        let tag = ["unknown variant", "missing field `op`"];
        if tag.iter().any(|t| err.message().contains(t)) {
            return None;
        }
        let before = &text[..start.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map_or(0, |n| n + 1) + 1;
        return Some(format!(
            "ops[{i}] ({name}) at line {line}, column {column}: {}",
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
/// use imgfeed::ops::{CenterCrop, Decode, Op, Resize, Size};
/// use imgfeed::{Pipeline, SourceConfig, SourceKind};
/// let p = Pipeline::builder(SourceConfig::new(SourceKind::ImageFolder, "data/train"))
///     .op(Op::Decode(Decode::default()))
///     .op(Op::Resize(Resize { size: Size::One(256), filter: Default::default(), exact: None }))
///     .op(Op::CenterCrop(CenterCrop { size: Size::One(224) }))
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
        if config.source.num_epochs == 0 {
            return Err(Error::Invalid(
                "source.num_epochs must be at least 1".into(),
            ));
        }
        config
            .source
            .sampling()
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
        let stages = spec_chain(&source.spec(), &config.ops)?;
        let spec = stages
            .last()
            .map_or_else(|| source.spec(), |(_, s)| s.clone());
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
        let batch_bytes = config
            .batch
            .size
            .checked_mul(elems)
            .and_then(|n| n.checked_mul(spec.dtype.size()));
        if batch_bytes.is_none_or(|b| b > 1 << 36) {
            return Err(Error::Invalid(format!(
                "a batch of {} samples of {elems} values each is too large",
                config.batch.size
            )));
        }
        let program = Program::compile(
            &source.spec(),
            source.stored_layout(),
            &config.ops,
            &spec,
            config.engine.fuse,
        )?;
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
        let prefetch = e
            .prefetch
            .unwrap_or_else(|| ((6 << 20) / batch_bytes).clamp(2, 16))
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
        self.config.source.sampling().len(self.source.len())
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
        let order = self
            .config
            .source
            .sampling()
            .order(self.source.len(), epoch);
        self.launch(State::epoch_start(epoch), order, 0)
    }

    /// Start where `state` says: the batches a run that stopped at `state` would have
    /// yielded next, with any worker count (the order and every random choice depend
    /// only on the seed, the epoch and the sample).
    pub fn resume(&self, state: State) -> Result<Epoch> {
        let order = self
            .config
            .source
            .sampling()
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
            seed: self.config.source.seed,
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
        })
    }
}
