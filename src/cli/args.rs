//! The command line's grammar: the subcommands, their flags (grouped as the commands share
//! them), and the parse that answers a flag given to the wrong subcommand with the ones that
//! take it.

use clap::{Args, Parser, Subcommand};
use imgfeed::pipeline::overrides::{FlagGroup, Setting, SETTINGS};
use imgfeed::pipeline::Overrides;
use std::marker::PhantomData;
use std::path::PathBuf;

/// `imgfeed --version`: the version and the JPEG decoder this build has.
pub(super) fn version_line() -> &'static str {
    static LINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LINE.get_or_init(|| {
        format!(
            "{} (JPEG: {})",
            env!("CARGO_PKG_VERSION"),
            imgfeed::codec::jpeg_decoder()
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
        /// Output format: npy (the epoch's samples in its order; the sampling flags apply),
        /// shards (every sample in source order, for reading back; no sampling flags),
        /// webdataset (tars other tools read; as shards, without --slice) or mindrecord (a
        /// MindRecord group MindSpore reads; as webdataset, to a local folder).
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
        /// shards, webdataset and mindrecord only: bytes per file (1GB, 512MB, ...), overriding
        /// `store.shard_size` (default 1GB).
        #[arg(long)]
        shard_size: Option<String>,
        /// shards, webdataset and mindrecord only: how samples are stored, overriding
        /// `store.mode` (default jpeg; webdataset, mindrecord: jpeg or original).
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
    /// Join the folders of a split npy conversion (`convert --format npy --slice I/K --out
    /// SLICE`, one per slice) into OUT, byte for byte what one conversion writes.
    #[command(after_help = MERGE_EXIT_CODES)]
    MergeNpy {
        /// The folder to write (images.npy, labels.npy, samples.txt, classes.json).
        out: PathBuf,
        /// The slice folders, in slice order (0/K first).
        #[arg(required = true)]
        slices: Vec<PathBuf>,
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
        /// Also write the run as one self-contained page to FILE: throughput over time, the
        /// time per stage behind the verdict, and the worker sweep (with --sweep-workers).
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
    },
    /// Look at what the pipeline makes: the first samples of an epoch, as the trainer gets
    /// them, turned back into pictures on a contact sheet (PNG) or a page (HTML).
    #[command(after_help = EXIT_CODES)]
    Preview {
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
        /// The epoch to show (default 0): the same as --start-epoch.
        #[arg(long, conflicts_with = "start_epoch")]
        epoch: Option<u64>,
        /// Samples to show (default 16).
        #[arg(long, default_value_t = 16, value_parser = at_least_one)]
        count: usize,
        /// The file to write: FILE.png a contact sheet, FILE.html a page (what the pipeline
        /// did to each sample on hover).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Put each sample's decoded original beside it.
        #[arg(long)]
        with_source: bool,
        /// The longer side of each picture in pixels (default: the samples' own size).
        #[arg(long, value_name = "PX", value_parser = at_least_one)]
        tile: Option<usize>,
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
    /// WebDataset tars (KEY.jpg + KEY.cls) + webdataset.json, for the webdataset package
    /// and other readers (and imgfeed: --data at the folder)
    Webdataset,
    /// a MindRecord group (data.mindrecord0 … + their .db: data, label, file_name) for
    /// MindSpore's MindDataset (and imgfeed: --data at any of its files)
    Mindrecord,
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

/// A setting's flag whose values the command line refuses itself, naming the flag
/// (`--batch-size 0`, `--workers 0`, `--seed -1`), instead of the pipeline key the library's
/// check would name; the values it lets through are the table's type, so reading them back
/// is unchanged.
fn named_refusals(arg: clap::Arg) -> clap::Arg {
    match arg.get_id().as_str() {
        "batch_size" | "work_unit" | "num_shards" => arg.value_parser(at_least_one),
        "workers" => arg.value_parser(worker_count),
        "seed" => arg.value_parser(seed).allow_negative_numbers(true),
        _ => arg,
    }
}

/// The pipeline file and where its data is.
#[derive(Args, Debug)]
pub(super) struct Input {
    /// The pipeline file (TOML).
    pub(super) pipeline: PathBuf,
    /// `--data`, `--usage` and the store's flags.
    #[command(flatten)]
    pub(super) settings: Settings<InputGroup>,
}

/// A group of the library's settings ([`imgfeed::pipeline::SETTINGS`]) as flags.
pub(super) trait Group {
    /// The group.
    const GROUP: FlagGroup;
}

macro_rules! groups {
    ($($(#[$doc:meta])* $marker:ident = $group:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Debug)]
        pub(super) struct $marker;
        impl Group for $marker {
            const GROUP: FlagGroup = FlagGroup::$group;
        }
    )*};
}

groups! {
    /// Where the data is.
    InputGroup = Input;
    /// Threads and batches.
    EngineGroup = Engine;
    /// The sampler: order and data-parallel sharding (MindSpore's DistributedSampler).
    SamplingGroup = Sampling;
    /// What a bad sample does.
    ErrorGroup = Errors;
}

/// The flags of the settings in group `G`, made from the library's table of settings (its
/// doc is their help, its parser their parser) and read back as the [`Overrides`] they give.
#[derive(Debug)]
pub(super) struct Settings<G> {
    /// The settings given.
    pub(super) given: Overrides,
    group: PhantomData<G>,
}

impl<G: Group> Settings<G> {
    /// Whether a row's flag is in this group.
    fn ours(row: &Setting) -> bool {
        row.flag.is_some_and(|f| f.group == G::GROUP)
    }
}

impl<G: Group> Args for Settings<G> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.args(
            SETTINGS
                .iter()
                .filter(|r| Self::ours(r))
                .flat_map(Setting::args)
                .map(named_refusals),
        )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl<G: Group> clap::FromArgMatches for Settings<G> {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Ok(Settings {
            given: Overrides::from_flags(m, Self::ours),
            group: PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// Threads and batches.
pub(super) type EngineFlags = Settings<EngineGroup>;
/// The sampler's flags.
pub(super) type SamplingFlags = Settings<SamplingGroup>;
/// What a bad sample does.
pub(super) type ErrorFlags = Settings<ErrorGroup>;

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
    /// The start epoch's global position: the samples of its order that all ranks have
    /// read together, as the resume hint prints it (with --start-world). Resumes on any
    /// --num-shards: the rest of the epoch is split among the ranks.
    #[arg(long, requires = "start_world")]
    pub(super) start_position: Option<usize>,
    /// The ranks that reached --start-position: N (N ranks from the epoch's start) or a
    /// list like 8,4@64:2 (then 4 ranks from position 64, first batch numbered 2), as the
    /// resume hint prints it.
    #[arg(long, requires = "start_position", value_parser = super::start::parse_worlds)]
    pub(super) start_world: Option<super::start::Worlds>,
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
