//! The command line's grammar: the subcommands, their flags (grouped as the commands share
//! them), and the parse that answers a flag given to the wrong subcommand with the ones that
//! take it.

use clap::{Args, Parser, Subcommand};
use imgfeed::source::Usage;
use imgfeed::{OnError, Uneven};
use std::path::PathBuf;

/// `imgfeed --version`: the version and the JPEG decoder this build has.
pub(super) fn version_line() -> &'static str {
    static LINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LINE.get_or_init(|| {
        format!(
            "{} (JPEG: {})",
            env!("CARGO_PKG_VERSION"),
            imgfeed::ops::jpeg_decoder()
        )
    })
}

/// Turn image datasets into training batches.
#[derive(Parser, Debug)]
#[command(name = "imgfeed", version = version_line(), about)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) command: Command,
}

pub(super) const EXIT_CODES: &str =
    "Exit codes: 0 every sample good; 1 a bad sample stopped the run, or \
    bad samples were skipped or replaced (listed on stderr); 2 usage, pipeline, dataset or \
    output errors (an output that cannot be created or written); 70 a bug in imgfeed; 130 \
    interrupted.";

/// `check` reads no sample: no bad-sample code.
pub(super) const CHECK_EXIT_CODES: &str =
    "Exit codes: 0 the pipeline checks out; 2 usage, pipeline or \
    dataset errors; 70 a bug in imgfeed.";

/// `merge-index` reads manifests only: no bad-sample code.
pub(super) const MERGE_EXIT_CODES: &str =
    "Exit codes: 0 merged; 2 usage errors, or slices that are \
    missing, mismatched or unwritable; 70 a bug in imgfeed.";

#[derive(Subcommand, Debug)]
pub(super) enum Command {
    /// Check a pipeline and print the sample spec after each stage (reads no pixel).
    #[command(after_help = CHECK_EXIT_CODES)]
    Check {
        #[command(flatten)]
        input: Input,
        #[command(flatten)]
        engine: EngineFlags,
        #[command(flatten)]
        sampling: SamplingFlags,
        #[command(flatten)]
        errors: ErrorFlags,
        /// Print the pipeline's tables as JSON, with the flags applied (what the other
        /// commands run), and nothing else: the dataset is not opened.
        #[arg(long)]
        print_config: bool,
    },
    /// Run the pipeline and print a summary of what came out.
    #[command(after_help = EXIT_CODES)]
    Run {
        #[command(flatten)]
        input: Input,
        #[command(flatten)]
        engine: EngineFlags,
        #[command(flatten)]
        sampling: SamplingFlags,
        #[command(flatten)]
        errors: ErrorFlags,
        #[command(flatten)]
        resume: ResumeFlags,
        /// Epochs of the run (default: the pipeline's `source.num_epochs`, itself 1); with
        /// `--start-epoch`, the run covers epochs start..epochs.
        #[arg(long)]
        epochs: Option<u64>,
        /// Stop after this many batches and print the state to resume from.
        #[arg(long, value_parser = at_least_one)]
        max_batches: Option<usize>,
        /// Write every bad (skipped or replaced) sample to FILE as JSON lines.
        #[arg(long)]
        report: Option<PathBuf>,
    },
    /// Write every sample of one epoch to files (nothing dropped). Bad samples are always
    /// skipped and listed (there is no --on-error): the rest is written, exit code 1.
    #[command(after_help = EXIT_CODES)]
    Convert {
        #[command(flatten)]
        input: Input,
        #[command(flatten)]
        engine: EngineFlags,
        #[command(flatten)]
        sampling: SamplingFlags,
        #[command(flatten)]
        resume: ResumeFlags,
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
        /// Output format: npy (the epoch's samples in its order; the sampling flags apply)
        /// or shards (every sample in source order, for reading back; no sampling flags).
        #[arg(long, value_enum, default_value_t = Format::Npy)]
        format: Format,
        /// Convert only the contiguous slice I of K (e.g. 0/4) of what the conversion would
        /// write: parallel jobs over one dataset; `merge-index` joins shards slices, and npy
        /// slices concatenated are the whole conversion.
        #[arg(long, value_name = "I/K", value_parser = parse_slice)]
        slice: Option<(usize, usize)>,
        /// Write every bad (skipped) sample to FILE as JSON lines.
        #[arg(long)]
        report: Option<PathBuf>,
        /// shards only: bytes per shard file (1GB, 512MB, ...), overriding
        /// `store.shard_size` (default 1GB).
        #[arg(long)]
        shard_size: Option<String>,
        /// shards only: how samples are stored, overriding `store.mode` (default jpeg).
        #[arg(long, value_enum)]
        store: Option<imgfeed::shards::Storage>,
    },
    /// Join the slice manifests of a split shards conversion (`convert --format shards
    /// --slice I/K --out DIR`, one per slice) into DIR/manifest.json.
    #[command(after_help = MERGE_EXIT_CODES)]
    MergeIndex {
        /// The folder the slices were written to (or `s3://`, `gs://`, `az://` prefix).
        dir: PathBuf,
        /// The store's endpoint for a URL DIR: an S3-compatible server (overriding
        /// `AWS_ENDPOINT_URL`), the GCS base URL, or the Azure blob service URL.
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
    },
    /// Measure throughput: images/s, MB/s, CPU time, peak RSS, time per stage.
    #[command(after_help = EXIT_CODES)]
    Bench {
        #[command(flatten)]
        input: Input,
        #[command(flatten)]
        engine: EngineFlags,
        #[command(flatten)]
        sampling: SamplingFlags,
        #[command(flatten)]
        errors: ErrorFlags,
        #[command(flatten)]
        resume: ResumeFlags,
        /// Epochs of the run (default: the pipeline's `source.num_epochs`, itself 1).
        #[arg(long)]
        epochs: Option<u64>,
        /// Print one JSON line instead of a table.
        #[arg(long)]
        json: bool,
        /// Do not time each stage (removes the timer calls from the hot loop; the verdict
        /// then cannot name a stage).
        #[arg(long)]
        no_profile: bool,
        /// Write every bad (skipped or replaced) sample to FILE as JSON lines.
        #[arg(long)]
        report: Option<PathBuf>,
        /// Measure each worker count in turn (e.g. 1,2,4,8) and print a table: images/s,
        /// per worker, CPU per image, cores busy, what limits each (with --json: every run).
        #[arg(
            long,
            value_name = "N,N,...",
            value_delimiter = ',',
            conflicts_with = "workers"
        )]
        sweep_workers: Option<Vec<usize>>,
        /// With --sweep-workers: write an SVG plot of images/s and CPU ms per image against
        /// workers to FILE.
        #[arg(long, value_name = "FILE", requires = "sweep_workers")]
        plot: Option<PathBuf>,
        /// Sleep this many milliseconds after each batch, standing in for a training step:
        /// the verdict then says whether the loader or the consumer limits the run.
        #[arg(long, value_name = "MS")]
        step_ms: Option<f64>,
    },
    /// Read and decode every sample once: bad files by kind, classes, sizes, formats.
    #[command(after_help = EXIT_CODES)]
    Validate(super::validate::ValidateArgs),
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    /// images.npy, labels.npy, samples.txt, classes.json
    Npy,
    /// shard files + index + manifest.json, read back by pointing --data at the folder
    Shards,
}

/// `I/K` with I below K.
pub(super) fn parse_slice(s: &str) -> std::result::Result<(usize, usize), String> {
    let (i, k) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?} is not I/K (e.g. 0/4)"))?;
    let (i, k): (usize, usize) = (
        i.trim()
            .parse()
            .map_err(|_| format!("{i:?} is not a number"))?,
        k.trim()
            .parse()
            .map_err(|_| format!("{k:?} is not a number"))?,
    );
    if k == 0 {
        return Err(format!(
            "{s}: K, the number of slices, must be at least 1 (e.g. 0/4 .. 3/4)"
        ));
    }
    if i >= k {
        return Err(format!(
            "{s}: I must be below K (slices 0/{k} .. {}/{k})",
            k - 1
        ));
    }
    Ok((i, k))
}

/// A count of at least 1 (`--batch-size 0` is refused naming the flag, before the pipeline
/// is read).
pub(super) fn at_least_one(s: &str) -> std::result::Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a whole number")),
    }
}

/// A worker count: 1 to [`imgfeed::pipeline::check::MAX_WORKERS`].
pub(super) fn worker_count(s: &str) -> std::result::Result<usize, String> {
    let max = imgfeed::pipeline::check::MAX_WORKERS;
    match at_least_one(s)? {
        n if n > max => Err(format!("must be between 1 and {max}")),
        n => Ok(n),
    }
}

/// A seed: a whole number from 0 to 2^64 - 1 (`--seed -1` is read as a value, and refused
/// in those words, not answered with clap's tip to write `-- -1`).
pub(super) fn seed(s: &str) -> std::result::Result<u64, String> {
    s.trim().parse::<u64>().map_err(|_| {
        format!(
            "seeds are whole numbers from 0 to {} (2^64 - 1), as source.seed and Python's \
             seed=",
            u64::MAX
        )
    })
}

/// The pipeline file and where its data is.
#[derive(Args, Debug)]
pub(super) struct Input {
    /// The pipeline file (TOML).
    pub(super) pipeline: PathBuf,
    /// Dataset root, overriding the pipeline's `source.root`: a folder, or a shards
    /// dataset in object storage (s3://bucket/prefix).
    #[arg(long)]
    pub(super) data: Option<PathBuf>,
    /// CIFAR split, overriding `source.usage` (default: train for cifar10/cifar100).
    #[arg(long, value_enum)]
    pub(super) usage: Option<Usage>,
    /// Where the store of a URL root is reached, overriding `source.endpoint`: an
    /// S3-compatible server for s3:// (overriding AWS_ENDPOINT_URL), the base URL for gs://
    /// (an emulator's), the blob service URL for az:// (Azurite's
    /// http://127.0.0.1:10000/devstoreaccount1); http:// for a loopback address only.
    #[arg(long)]
    pub(super) endpoint: Option<String>,
    /// Cache root for a URL root, overriding `source.cache_dir` (default
    /// $XDG_CACHE_HOME/imgfeed, else ~/.cache/imgfeed).
    #[arg(long)]
    pub(super) cache_dir: Option<PathBuf>,
    /// Byte limit of the dataset's cache folder (20GB, 512MiB), overriding
    /// `source.cache_size` (default 100GB).
    #[arg(long)]
    pub(super) cache_size: Option<String>,
}

/// Threads and batches.
#[derive(Args, Debug)]
pub(super) struct EngineFlags {
    /// Worker threads, overriding `engine.workers` (default: one per core).
    #[arg(long, value_parser = worker_count)]
    pub(super) workers: Option<usize>,
    /// Batch size, overriding `batch.size`.
    #[arg(long, value_parser = at_least_one)]
    pub(super) batch_size: Option<usize>,
    /// Samples a worker claims at once, at least 1, overriding `engine.work_unit`
    /// (default: 1 for image files, 64 for CIFAR records).
    #[arg(long, value_parser = at_least_one)]
    pub(super) work_unit: Option<usize>,
}

/// The sampler: order and data-parallel sharding (MindSpore's DistributedSampler).
#[derive(Args, Debug)]
pub(super) struct SamplingFlags {
    /// Seed of the shuffle and the random ops, overriding `source.seed` (default 0).
    #[arg(long, allow_negative_numbers = true, value_parser = seed)]
    pub(super) seed: Option<u64>,
    /// Shuffle every epoch, overriding `source.shuffle` (default false: the file's order,
    /// as `shuffle = false`; the Python dataset API shuffles by default, as MindSpore).
    #[arg(long, overrides_with = "no_shuffle")]
    pub(super) shuffle: bool,
    /// Keep the source order, overriding `source.shuffle`.
    #[arg(long, overrides_with = "shuffle")]
    pub(super) no_shuffle: bool,
    /// Data-parallel ranks sharing each epoch, overriding `source.num_shards` (default 1;
    /// and `shard = "env"`): this process sees rank --shard-id's samples.
    #[arg(long, value_parser = at_least_one)]
    pub(super) num_shards: Option<usize>,
    /// This process's rank, below --num-shards, overriding `source.shard_id` (default 0).
    #[arg(long)]
    pub(super) shard_id: Option<usize>,
    /// When the ranks do not divide the dataset, overriding `source.uneven` (default pad:
    /// repeat samples from the start so every rank gets ceil(N/K), as MindSpore).
    #[arg(long, value_enum)]
    pub(super) uneven: Option<Uneven>,
}

/// What a bad sample does.
#[derive(Args, Debug)]
pub(super) struct ErrorFlags {
    /// Bad samples: error (stop), skip (leave out, report) or replace (fill from the same
    /// shard, report), overriding `engine.on_error` (default error).
    #[arg(long, value_enum)]
    pub(super) on_error: Option<OnError>,
}

/// Where to start (resume a stopped run).
#[derive(Args, Debug)]
pub(super) struct ResumeFlags {
    /// Start at this epoch.
    #[arg(long)]
    pub(super) start_epoch: Option<u64>,
    /// Start at this batch of the start epoch.
    #[arg(long)]
    pub(super) start_batch: Option<usize>,
    /// With --start-batch after skipped samples: the position in the shard's order of the
    /// batch's first sample, as the resume hint prints it (default: batch × batch size).
    #[arg(long)]
    pub(super) start_sample: Option<usize>,
}

/// A flag the subcommand `sub` does not take with these others, or a bad value: a usage
/// error (exit 2) saying why, followed by `sub`'s own usage line.
pub(super) fn refuse(sub: &str, why: String) -> ! {
    use clap::CommandFactory;
    let mut cli = Cli::command();
    cli.build();
    match cli.find_subcommand_mut(sub) {
        Some(cmd) => cmd
            .clone()
            .error(clap::error::ErrorKind::ArgumentConflict, why)
            .exit(),
        None => cli
            .error(clap::error::ErrorKind::ArgumentConflict, why)
            .exit(),
    }
}

/// Parse the command line (`args`: the program's name, then its arguments). A flag that the subcommand does not take but another does
/// (`run --json`) is answered with the commands that take it, not with clap's tip to pass
/// it as a value (`-- --json`).
pub(super) fn parse(args: Vec<std::ffi::OsString>) -> Cli {
    use clap::CommandFactory;
    use clap::FromArgMatches;
    let mut cli = Cli::command();
    let err = match cli.try_get_matches_from_mut(args.iter()) {
        Ok(m) => match Cli::from_arg_matches(&m) {
            Ok(c) => return c,
            Err(e) => e,
        },
        Err(e) => e,
    };
    if err.kind() == clap::error::ErrorKind::UnknownArgument {
        if let Some(clap::error::ContextValue::String(flag)) =
            err.get(clap::error::ContextKind::InvalidArg)
        {
            // OsString: a path that is not UTF-8 is a valid argument
            let sub = args
                .iter()
                .skip(1)
                .find_map(|a| a.to_str().and_then(|a| cli.find_subcommand(a)))
                .map(|c| c.get_name().to_string());
            let long = flag
                .split('=')
                .next()
                .unwrap_or(flag)
                .trim_start_matches('-');
            let takers: Vec<String> = cli
                .get_subcommands()
                .filter(|c| c.get_arguments().any(|a| a.get_long() == Some(long)))
                .map(|c| format!("`{}`", c.get_name()))
                .collect();
            if let (Some(sub), false) = (sub, takers.is_empty()) {
                refuse(
                    &sub,
                    format!(
                        "`{sub}` does not take --{long}: only {} {}",
                        and_list(&takers),
                        if takers.len() == 1 { "does" } else { "do" }
                    ),
                );
            }
        }
    }
    err.exit()
}

/// `a`, `a and b`, `a, b and c`.
pub(super) fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}
