//! Why a pipeline cannot run although it parses: [`Invalid`], the payload of
//! [`crate::Error::Invalid`] (an `invalid pipeline: …` usage error, exit code 2).
//!
//! One variant per rule, with the values that broke it and, where another error is the
//! cause (a sampling rule, a JSON table, an op's spec rule, a size that does not parse), that
//! error as the [`std::error::Error::source`]. One variant carries free-form text: a
//! measurement with nothing to measure ([`Invalid::NothingToMeasure`], holding the warning
//! that says why).

use crate::error::Place;
use crate::plan::SamplingError;
use crate::resume::ResumeError;
use crate::size::SizeError;
use crate::spec::SpecError;
use std::path::PathBuf;

/// Why a pipeline (or a command's settings) cannot run: the payload of
/// [`crate::Error::Invalid`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Invalid {
    /// A count below its least value (`batch.size`, `--epochs`, `engine.work_unit`, ...).
    #[error("{setting} must be at least {min}")]
    TooSmall {
        /// The setting as the user wrote it (table key and, where it has one, its flag).
        setting: &'static str,
        /// Its least value.
        min: usize,
    },
    /// A count outside its range (`engine.workers`).
    #[error("{setting} must be between {min} and {max}")]
    OutOfRange {
        /// The setting.
        setting: &'static str,
        /// Its least value.
        min: usize,
        /// Its greatest value.
        max: usize,
    },
    /// The sampling (`[source]`'s shard, sample and epoch counts) cannot be used.
    #[error("source: {0}")]
    Sampling(#[from] SamplingError),
    /// A job state that cannot be resumed by this pipeline.
    #[error("cannot resume: {0}")]
    Resume(#[from] ResumeError),
    /// The pipeline given as JSON is not JSON.
    #[error("the pipeline is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// The pipeline given as JSON is not an object of tables.
    #[error("the pipeline must be a table of tables: {0}")]
    NotTables(#[source] serde_json::Error),
    /// One table of a pipeline given as JSON does not parse (`source`, `ops[1] (resize)`,
    /// `engine`, ...); `table` is `None` when no single table is at fault.
    #[error("{}{source}", table.as_ref().map(|t| format!("{t}: ")).unwrap_or_default())]
    Table {
        /// The table at fault, as the user would name it.
        table: Option<String>,
        /// What the parser said.
        #[source]
        source: serde_json::Error,
    },
    /// An override (a command-line flag, a keyword of the Python package's
    /// `Pipeline.replace`) whose value does not parse.
    #[error("{table}: {key}: {source}")]
    Override {
        /// The table it overrides (`source`, `batch`, `engine`).
        table: &'static str,
        /// The override's name.
        key: String,
        /// What the parser said.
        #[source]
        source: serde_json::Error,
    },
    /// A batch op that cannot take what comes before it, or has a bad parameter.
    #[error("{}batch_ops[{index}] ({op}): {reason}", at.as_ref().map(|p| format!("{p}: ")).unwrap_or_default())]
    BatchOp {
        /// Its place in the pipeline's batch ops, from 0.
        index: usize,
        /// Its name.
        op: &'static str,
        /// Why.
        #[source]
        reason: SpecError,
        /// Where it (or the parameter at fault) is written, for a pipeline read from a file.
        at: Option<Place>,
    },
    /// `imgfeed validate`'s decode options cannot be used (e.g. a decoder this build lacks).
    #[error("decode: {0}")]
    Decode(#[source] SpecError),
    /// The ops end with encoded samples.
    #[error("the samples are still encoded at the end: add a `decode` op")]
    StillEncoded,
    /// The ops end with images whose size varies from sample to sample.
    #[error(
        "image sizes vary from sample to sample, so they cannot be batched: end the ops with \
         center_crop, random_crop or resize to [h, w]"
    )]
    VaryingSizes,
    /// One batch buffer would not be addressable.
    #[error("a batch of {size} samples of {elems} values each is too large")]
    BatchTooLarge {
        /// The batch size.
        size: usize,
        /// Values per sample.
        elems: usize,
    },
    /// A resume point past the end of its epoch's batches.
    #[error("cannot start at batch {batch} of epoch {epoch}: it has {batches} batches")]
    ResumeBatch {
        /// The batch asked for.
        batch: usize,
        /// The epoch.
        epoch: u64,
        /// The epoch's batches.
        batches: usize,
    },
    /// A resume point past the end of the shard's order.
    #[error("cannot start at sample {sample} of epoch {epoch}: this shard has {samples} samples")]
    ResumeSample {
        /// The position asked for.
        sample: usize,
        /// The epoch.
        epoch: u64,
        /// The shard's samples in that epoch.
        samples: usize,
    },
    /// A resume position whose sample contradicts its batch: a batch starts at `batch ×
    /// batch_size`, or later where `on_error = "skip"` left samples out before it.
    #[error(
        "cannot start batch {batch} of epoch {epoch} at sample {sample} (--start-sample): \
         batch {batch} starts at sample {first} (batch × batch size){}",
        if *skipping { ", or later where samples before it were skipped, never earlier" }
        else { ", as no sample is left out unless on_error = \"skip\"" }
    )]
    ResumeContradicts {
        /// The batch asked for.
        batch: usize,
        /// The position asked for.
        sample: usize,
        /// The epoch.
        epoch: u64,
        /// `batch × batch_size`.
        first: usize,
        /// Whether bad samples are skipped (which moves a batch's first sample later).
        skipping: bool,
    },
    /// A `[source]` without `root`, and no `--data` (or `data=`) to give it.
    #[error(
        "source: no dataset root: set `root` in [source], or pass --data DIR (data= in Python)"
    )]
    NoRoot,
    /// A run's first epoch not below its last.
    #[error("--start-epoch {start} is not below the {end} epochs of the run")]
    StartEpoch {
        /// The first epoch asked for.
        start: u64,
        /// The run's end (epochs `start..end`).
        end: u64,
    },
    /// A slice `id` of `count` that does not exist.
    #[error("slice {id}/{count}: the slice number must be below the number of slices")]
    Slice {
        /// The slice asked for.
        id: usize,
        /// The number of slices.
        count: usize,
    },
    /// `num_shards` given without `shard_id`, or the other way round (MindSpore's rule: a
    /// rank is named with the ranks it is one of).
    #[error("num_shards and shard_id (--num-shards and --shard-id) must be given together")]
    ShardsApart,
    /// A CIFAR split (`usage`) given for a source without splits.
    #[error("usage (--usage) applies to cifar10 and cifar100 sources only, not to {kind}")]
    Usage {
        /// The source's kind.
        kind: String,
    },
    /// A listing option (`class_indexing`, `usage`, `label`) of a converted dataset's source
    /// that is not the one it was converted with (labels are stored).
    #[error("source: `{field}` is {want}, but {} was converted with {stored}", root.display())]
    NotAsConverted {
        /// The option.
        field: &'static str,
        /// Its value in the pipeline.
        want: String,
        /// The converted dataset.
        root: PathBuf,
        /// Its value in the conversion.
        stored: String,
    },
    /// An image folder's `extensions` list that is empty or holds an empty extension.
    #[error("image_folder: `extensions` must list non-empty extensions")]
    Extensions,
    /// A conversion to `.npy` of bfloat16 images.
    #[error(
        "bfloat16 images have no .npy type (numpy has no bfloat16): cast the image to float16 \
         or float32 for a conversion, or read bfloat16 batches from the library or the Python \
         package"
    )]
    NpyBfloat16,
    /// `.npy` output asked for somewhere that is not a local folder (object storage takes
    /// `convert --format shards` only).
    #[error(
        "--out {}: npy files are written to a local folder only (`convert --format shards` \
         writes to object storage)",
        out.display()
    )]
    NpyNotLocal {
        /// The output asked for.
        out: PathBuf,
    },
    /// A conversion's `--out` in a store imgfeed reads but does not write (`http(s)://`).
    #[error("--out {url}: datasets are written to s3://, gs://, az:// and abfs[s]:// locations (and local folders); {scheme}:// is read-only")]
    ReadOnlyStore {
        /// The output asked for.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// A JPEG quality (`store.quality`, `--quality`) outside 1..=100.
    #[error("store.quality {0} must be between 1 and 100")]
    Quality(u8),
    /// A shard size (`store.shard_size`, `--shard-size`) that is not a size.
    #[error("store.shard_size: {0}")]
    ShardSize(#[source] SizeError),
    /// A cache size (`source.cache_size`, `--cache-size`) that is not a size.
    #[error("source.cache_size: {0}")]
    CacheSize(#[source] SizeError),
    /// A cache too small for a remote dataset's index, names and largest shard.
    #[error(
        "--cache-size (source.cache_size) {limit} bytes cannot hold {url}'s index, names and \
         largest shard ({least} bytes); give at least that (then one shard is cached at a \
         time and reads wait for each other), better a few shards more (the workers read \
         and shards are fetched ahead at once; shards that do not fit are fetched again)"
    )]
    CacheTooSmall {
        /// The cache's limit in bytes.
        limit: u64,
        /// The dataset.
        url: String,
        /// What it needs at least.
        least: u64,
    },
    /// A cache too small for one pack of an image tree in a store, with `fetch = "files"`.
    #[error(
        "--cache-size (source.cache_size) {limit} bytes cannot hold one pack of {url}'s \
         images ({least} bytes), which --fetch files reads through the cache; give at least \
         that, or leave --fetch at auto (then the images are read one GET each)"
    )]
    TreeCacheTooSmall {
        /// The cache's limit in bytes.
        limit: u64,
        /// The tree.
        url: String,
        /// Its largest pack.
        least: u64,
    },
    /// A remote shards dataset's record asked for by borrowing (`Shards::record`).
    #[error("{}: a dataset in object storage is read with record_into", root.display())]
    RemoteRecord {
        /// The dataset's root.
        root: PathBuf,
    },
    /// A slice of an npy conversion whose file is not an array a conversion writes.
    #[error("{}: not an npy array as `convert --format npy` writes it", path.display())]
    NotNpy {
        /// The file.
        path: PathBuf,
    },
    /// `merge-npy` given no slice folder.
    #[error("merge-npy: no slice folder given")]
    NoSlices,
    /// A slice of an npy conversion that differs from the first slice.
    #[error("{}: its {what} differs from the first slice's: the slices are not of one conversion", slice.display())]
    SlicesDiffer {
        /// The slice folder.
        slice: PathBuf,
        /// What differs.
        what: &'static str,
    },
    /// `source.num_samples` in a conversion, which stores every sample.
    #[error(
        "source.num_samples does not apply to a conversion, which stores every sample \
         (use --slice I/K to convert part of a dataset)"
    )]
    NumSamplesInConversion,
    /// `batch_ops` in a conversion, which stores samples, not batches.
    #[error("batch_ops do not apply to a conversion, which stores samples, not batches")]
    BatchOpsInConversion,
    /// `store.mode = "original"` with ops, or with a source of pixels.
    #[error(
        "store.mode = \"original\" keeps the source's files untouched: it needs a source of \
         encoded files and a pipeline with no ops ({ops} ops; the source yields {yields})"
    )]
    OriginalNeedsFiles {
        /// The pipeline's op count.
        ops: usize,
        /// What the source yields.
        yields: crate::spec::Spec,
    },
    /// A stored mode that keeps RGB u8 HWC pixels after ops that end in something else.
    #[error(
        "store.mode = \"{mode}\" stores RGB u8 HWC images, but the ops end in {spec}: end \
         them before rescale, normalize or hwc_to_chw (and after decode)"
    )]
    StoreNeedsRgbU8 {
        /// The store mode's name in the pipeline file.
        mode: &'static str,
        /// What the ops end in.
        spec: crate::spec::Spec,
    },
    /// A conversion that WebDataset tars cannot hold as asked.
    #[error("convert --format webdataset: {why}")]
    WebDatasetOutput {
        /// What cannot be written, and what can.
        why: &'static str,
    },
    /// A conversion that a MindRecord group cannot hold as asked.
    #[error("convert --format mindrecord: {why}")]
    MindRecordOutput {
        /// What cannot be written, and what can.
        why: &'static str,
    },
    /// A measurement whose epochs yield nothing (free-form: the empty-epoch warning).
    #[error("nothing to measure: {0}")]
    NothingToMeasure(String),
    /// `shuffle_window` on a source that is not made of multi-sample files.
    #[error(
        "shuffle_window shuffles windows of files and needs a dataset made of multi-sample \
         files (shards, webdataset, tfrecord, mindrecord, parquet), but {kind} at {} holds \
         one sample per file or record: leave shuffle_window out (the global shuffle), or \
         convert the dataset to shards",
        root.display()
    )]
    WindowKind {
        /// The source's kind.
        kind: &'static str,
        /// Its root.
        root: PathBuf,
    },
    /// A cache too small for `shuffle_window`'s window of files.
    #[error("{url}: {source}")]
    WindowCache {
        /// The dataset.
        url: String,
        /// What the window needs.
        #[source]
        source: crate::plan::window::CacheShort,
    },
    /// `fetch = "ranges"` for compressed container files whose samples are not byte
    /// ranges of them (gzip'd TFRecord; Parquet pages compressed other than by Snappy),
    /// which are unpacked whole and read from that copy.
    #[error(
        "{object}: --fetch ranges (source.fetch) cannot read this compressed file: its \
         images are not byte ranges of it (a gzip'd TFRecord; Parquet pages compressed by \
         another codec than Snappy, or laid out as this reader does not follow), so it is \
         unpacked whole into the cache and read from there; use fetch = \"files\" (or \
         \"auto\")"
    )]
    RangesOfPacked {
        /// The first compressed object.
        object: String,
    },
}
