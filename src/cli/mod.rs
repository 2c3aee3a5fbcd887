//! Command-line interface: `check`, `run`, `convert`, `merge-index`, `bench`, `validate`.

mod bench;
mod check;
mod convert;
mod interrupt;
mod merge_index;
mod plot;
mod report;
mod run;
mod validate;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use imgfeed::source::Usage;
use imgfeed::{OnError, Pipeline, PipelineConfig, State, Uneven};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::PathBuf;

/// `imgfeed --version`: the version and the JPEG decoder this build has.
fn version_line() -> &'static str {
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
struct Cli {
    #[command(subcommand)]
    command: Command,
}

const EXIT_CODES: &str = "Exit codes: 0 every sample good; 1 a bad sample stopped the run, or \
    bad samples were skipped or replaced (listed on stderr); 2 usage, pipeline, dataset or \
    output errors (an output that cannot be created or written); 70 a bug in imgfeed; 130 \
    interrupted.";

/// `check` reads no sample: no bad-sample code.
const CHECK_EXIT_CODES: &str = "Exit codes: 0 the pipeline checks out; 2 usage, pipeline or \
    dataset errors; 70 a bug in imgfeed.";

/// `merge-index` reads manifests only: no bad-sample code.
const MERGE_EXIT_CODES: &str = "Exit codes: 0 merged; 2 usage errors, or slices that are \
    missing, mismatched or unwritable; 70 a bug in imgfeed.";

#[derive(Subcommand, Debug)]
enum Command {
    /// Check a pipeline and print the sample spec after each stage (reads no pixel).
    #[command(after_help = CHECK_EXIT_CODES)]
    Check {
        #[command(flatten)]
        input: Input,
        #[command(flatten)]
        engine: EngineFlags,
        #[command(flatten)]
        sampling: SamplingFlags,
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
        #[arg(long)]
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
        /// The folder the slices were written to (or `s3://bucket/prefix`).
        dir: PathBuf,
        /// S3-compatible endpoint for an s3:// DIR, overriding `AWS_ENDPOINT_URL`.
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
    Validate(validate::ValidateArgs),
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// images.npy, labels.npy, samples.txt, classes.json
    Npy,
    /// shard files + index + manifest.json, read back by pointing --data at the folder
    Shards,
}

/// `I/K` with I below K.
fn parse_slice(s: &str) -> std::result::Result<(usize, usize), String> {
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
    if k == 0 || i >= k {
        return Err(format!(
            "{s}: I must be below K (slices 0/{k} .. {}/{k})",
            k.max(1) - 1
        ));
    }
    Ok((i, k))
}

/// The pipeline file and where its data is.
#[derive(Args, Debug)]
struct Input {
    /// The pipeline file (TOML).
    pipeline: PathBuf,
    /// Dataset root, overriding the pipeline's `source.root`: a folder, or a shards
    /// dataset in object storage (s3://bucket/prefix).
    #[arg(long)]
    data: Option<PathBuf>,
    /// CIFAR split, overriding `source.usage` (default: train for cifar10/cifar100).
    #[arg(long, value_enum)]
    usage: Option<Usage>,
    /// S3-compatible endpoint for an s3:// root, overriding `source.endpoint` and
    /// AWS_ENDPOINT_URL (http:// for a loopback address only).
    #[arg(long)]
    endpoint: Option<String>,
    /// Cache root for an s3:// root, overriding `source.cache_dir` (default
    /// $XDG_CACHE_HOME/imgfeed, else ~/.cache/imgfeed).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Byte limit of the dataset's cache folder (20GB, 512MiB), overriding
    /// `source.cache_size` (default 100GB).
    #[arg(long)]
    cache_size: Option<String>,
}

/// Threads and batches.
#[derive(Args, Debug)]
struct EngineFlags {
    /// Worker threads, overriding `engine.workers` (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Batch size, overriding `batch.size`.
    #[arg(long)]
    batch_size: Option<usize>,
    /// Samples a worker claims at once, at least 1, overriding `engine.work_unit`
    /// (default: 1 for image files, 64 for CIFAR records).
    #[arg(long)]
    work_unit: Option<usize>,
}

/// The sampler: order and data-parallel sharding (MindSpore's DistributedSampler).
#[derive(Args, Debug)]
struct SamplingFlags {
    /// Seed of the shuffle and the random ops, overriding `source.seed` (default 0).
    #[arg(long)]
    seed: Option<u64>,
    /// Shuffle every epoch, overriding `source.shuffle` (default false: the file's order,
    /// as `shuffle = false`; the Python dataset API shuffles by default, as MindSpore).
    #[arg(long, overrides_with = "no_shuffle")]
    shuffle: bool,
    /// Keep the source order, overriding `source.shuffle`.
    #[arg(long, overrides_with = "shuffle")]
    no_shuffle: bool,
    /// Data-parallel ranks sharing each epoch, overriding `source.num_shards` (default 1;
    /// and `shard = "env"`): this process sees rank --shard-id's samples.
    #[arg(long)]
    num_shards: Option<usize>,
    /// This process's rank, below --num-shards, overriding `source.shard_id` (default 0).
    #[arg(long)]
    shard_id: Option<usize>,
    /// When the ranks do not divide the dataset, overriding `source.uneven` (default pad:
    /// repeat samples from the start so every rank gets ceil(N/K), as MindSpore).
    #[arg(long, value_enum)]
    uneven: Option<Uneven>,
}

/// What a bad sample does.
#[derive(Args, Debug)]
struct ErrorFlags {
    /// Bad samples: error (stop), skip (leave out, report) or replace (fill from the same
    /// shard, report), overriding `engine.on_error` (default error).
    #[arg(long, value_enum)]
    on_error: Option<OnError>,
}

/// Where to start (resume a stopped run).
#[derive(Args, Debug)]
struct ResumeFlags {
    /// Start at this epoch.
    #[arg(long)]
    start_epoch: Option<u64>,
    /// Start at this batch of the start epoch.
    #[arg(long)]
    start_batch: Option<usize>,
    /// With --start-batch after skipped samples: the position in the shard's order of the
    /// batch's first sample, as the resume hint prints it (default: batch × batch size).
    #[arg(long)]
    start_sample: Option<usize>,
}

/// What a command was given: its flags, merged (a group a command does not take is left
/// at its defaults).
#[derive(Debug, Default)]
struct Common {
    pipeline: PathBuf,
    data: Option<PathBuf>,
    usage: Option<Usage>,
    endpoint: Option<String>,
    cache_dir: Option<PathBuf>,
    cache_size: Option<String>,
    workers: Option<usize>,
    batch_size: Option<usize>,
    work_unit: Option<usize>,
    seed: Option<u64>,
    shuffle: bool,
    no_shuffle: bool,
    num_shards: Option<usize>,
    shard_id: Option<usize>,
    uneven: Option<Uneven>,
    on_error: Option<OnError>,
    start_epoch: u64,
    start_batch: usize,
    start_sample: Option<usize>,
    /// Whether any resume flag was given (even at its default value).
    resume_given: bool,
}

impl Common {
    fn new(input: Input, engine: EngineFlags) -> Common {
        Common {
            pipeline: input.pipeline,
            data: input.data,
            usage: input.usage,
            endpoint: input.endpoint,
            cache_dir: input.cache_dir,
            cache_size: input.cache_size,
            workers: engine.workers,
            batch_size: engine.batch_size,
            work_unit: engine.work_unit,
            ..Common::default()
        }
    }

    fn sampling(mut self, s: SamplingFlags) -> Common {
        self.seed = s.seed;
        self.shuffle = s.shuffle;
        self.no_shuffle = s.no_shuffle;
        self.num_shards = s.num_shards;
        self.shard_id = s.shard_id;
        self.uneven = s.uneven;
        self
    }

    fn errors(mut self, e: ErrorFlags) -> Common {
        self.on_error = e.on_error;
        self
    }

    fn resume(mut self, r: ResumeFlags) -> Common {
        self.start_epoch = r.start_epoch.unwrap_or(0);
        self.start_batch = r.start_batch.unwrap_or(0);
        self.start_sample = r.start_sample;
        self.resume_given =
            r.start_epoch.is_some() || r.start_batch.is_some() || r.start_sample.is_some();
        self
    }

    /// Whether any resume flag was given.
    fn resumes(&self) -> bool {
        self.resume_given
    }

    /// The sampling flags given, by name.
    fn sampling_flags(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        let given = [
            (self.seed.is_some(), "--seed"),
            (self.shuffle, "--shuffle"),
            (self.no_shuffle, "--no-shuffle"),
            (self.num_shards.is_some(), "--num-shards"),
            (self.shard_id.is_some(), "--shard-id"),
            (self.uneven.is_some(), "--uneven"),
        ];
        for (yes, name) in given {
            if yes {
                v.push(name);
            }
        }
        v
    }
}

/// A flag the subcommand `sub` does not take with these others, or a bad value: a usage
/// error (exit 2) saying why, followed by `sub`'s own usage line.
fn refuse(sub: &str, why: String) -> ! {
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

/// Parse the command line. A flag that the subcommand does not take but another does
/// (`run --json`) is answered with the commands that take it, not with clap's tip to pass
/// it as a value (`-- --json`).
fn parse() -> Cli {
    use clap::CommandFactory;
    use clap::FromArgMatches;
    let mut cli = Cli::command();
    let err = match cli.try_get_matches_from_mut(std::env::args_os()) {
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
            // args_os: a path that is not UTF-8 is a valid argument (`args` would panic)
            let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
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
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

impl Common {
    fn config(&self) -> imgfeed::Result<PipelineConfig> {
        let mut cfg = PipelineConfig::from_file(&self.pipeline)?;
        if let Some(d) = &self.data {
            *cfg.source.dataset.root_mut() = d.clone();
        }
        let remote = &mut cfg.source.remote;
        if let Some(e) = &self.endpoint {
            remote.endpoint = Some(e.clone());
        }
        if let Some(d) = &self.cache_dir {
            remote.cache_dir = Some(d.clone());
        }
        if let Some(n) = &self.cache_size {
            remote.cache_size = Some(n.clone());
        }
        if let Some(w) = self.workers {
            cfg.engine.workers = w;
        }
        if let Some(b) = self.batch_size {
            cfg.batch.size = b;
        }
        if let Some(u) = self.work_unit {
            cfg.engine.work_unit = Some(u);
        }
        if let Some(seed) = self.seed {
            cfg.source.sampling.seed = seed;
        }
        if self.shuffle {
            cfg.source.sampling.shuffle = true;
        }
        if self.no_shuffle {
            cfg.source.sampling.shuffle = false;
        }
        if self.num_shards.is_some() || self.shard_id.is_some() {
            cfg.source.sampling.shard = imgfeed::ShardFrom::Config;
        }
        if let Some(n) = self.num_shards {
            cfg.source.sampling.num_shards = n;
        }
        if let Some(id) = self.shard_id {
            cfg.source.sampling.shard_id = id;
        }
        if let Some(u) = self.uneven {
            cfg.source.sampling.uneven = u;
        }
        if let Some(o) = self.on_error {
            cfg.engine.on_error = o;
        }
        if let Some(u) = self.usage {
            cfg.source.set_usage(u)?;
        }
        Ok(cfg)
    }

    fn pipeline(&self) -> imgfeed::Result<Pipeline> {
        Pipeline::new(self.config()?)
    }

    /// Where `--start-epoch`, `--start-batch` and `--start-sample` say to start.
    fn start(&self) -> State {
        State {
            epoch: self.start_epoch,
            batch: self.start_batch,
            sample: self.start_sample,
        }
    }
}

/// The flags that resume a run at `s`: `--start-sample` only where skipped samples moved
/// the next batch's first sample off `batch × batch_size`.
fn resume_flags(s: State, batch_size: usize) -> String {
    let mut flags = format!("--start-epoch {} --start-batch {}", s.epoch, s.batch);
    if let Some(sample) = s.sample.filter(|&x| x != s.batch * batch_size) {
        flags.push_str(&format!(" --start-sample {sample}"));
    }
    flags
}

/// The epochs a run makes: from `--start-epoch` up to `--epochs` (or `source.num_epochs`).
fn epoch_range(
    c: &Common,
    p: &Pipeline,
    epochs: Option<u64>,
) -> imgfeed::Result<std::ops::Range<u64>> {
    if epochs == Some(0) {
        return Err(imgfeed::Error::Invalid(
            "--epochs must be at least 1".into(),
        ));
    }
    let end = epochs.unwrap_or(p.config().source.sampling.num_epochs);
    if c.start_epoch >= end {
        return Err(imgfeed::Error::Invalid(format!(
            "--start-epoch {} is not below the {end} epochs of the run",
            c.start_epoch
        )));
    }
    Ok(c.start_epoch..end)
}

/// Epoch `e` of a run: the first one starts where `--start-batch` says.
fn open_epoch(c: &Common, p: &Pipeline, e: u64) -> imgfeed::Result<imgfeed::Epoch> {
    if e == c.start_epoch {
        p.resume(c.start())
    } else {
        Ok(p.epoch(e))
    }
}

/// A progress bar on stderr (drawn only on a terminal) over a whole run: its prefix (set
/// per epoch, [`epoch_label`]), the count of `what`, its rate rounded, and the run's ETA.
fn progress(len: u64, what: &'static str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let rate = move |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
        let _ = write!(w, "{:.0} {what}/s", s.per_sec());
    };
    if let Ok(style) = ProgressStyle::with_template(&format!(
        "{{prefix}}{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {what} ({{rate}}, eta {{eta}})"
    )) {
        bar.set_style(style.with_key("rate", rate).progress_chars("=> "));
    }
    bar
}

/// The progress bar's prefix in epoch `e` of a run over `range`, counted as the summaries
/// and `--start-epoch` count (from 0): `epoch 3 of 0-19 `.
fn epoch_label(e: u64, range: &std::ops::Range<u64>) -> String {
    format!(
        "epoch {e} of {}-{} ",
        range.start,
        range.end.saturating_sub(1)
    )
}

/// The images a run over `range` yields (barring skipped samples): each epoch's batches ×
/// the batch size (the last one short unless dropped), less the batches `--start-batch`
/// skips in the first.
fn run_images(c: &Common, p: &Pipeline, range: &std::ops::Range<u64>) -> u64 {
    let bs = p.config().batch.size as u64;
    let per_epoch = (p.samples_per_epoch() as u64).min(p.batches_per_epoch() as u64 * bs);
    let skipped = (c.start_batch as u64 * bs).min(per_epoch);
    (per_epoch * (range.end - range.start)).saturating_sub(skipped)
}

/// The pipeline's own warnings (e.g. normalize's units), and for `run` and `check`
/// (`batches`) one that yields no batch.
fn warn(p: &Pipeline, batches: bool) {
    for w in p.warnings() {
        eprintln!("warning: {w}");
    }
    if let Some(w) = p.empty_epoch_warning().filter(|_| batches) {
        eprintln!("warning: {w}");
    }
}

/// What `run` and `bench` call the bad samples they report.
fn bad_verb(p: &Pipeline) -> &'static str {
    match p.config().engine.on_error {
        OnError::Replace => "replaced",
        _ => "skipped",
    }
}

/// Exit code for an error: 2 for usage, pipeline, dataset and output errors (an output
/// that cannot be created or written), 70 for a bug in imgfeed (sysexits' EX_SOFTWARE), 1
/// for bad samples.
fn exit_code(e: &anyhow::Error) -> i32 {
    match e.downcast_ref::<imgfeed::Error>() {
        Some(err) if err.is_usage() => 2,
        Some(imgfeed::Error::Io { .. }) => 2,
        Some(imgfeed::Error::Internal(_)) => 70,
        _ => 1,
    }
}

pub fn main() -> i32 {
    let cli = parse();
    interrupt::install();
    let r: Result<i32> = match cli.command {
        Command::Check {
            input,
            engine,
            sampling,
        } => check::check(&Common::new(input, engine).sampling(sampling)),
        Command::Run {
            input,
            engine,
            sampling,
            errors,
            resume,
            epochs,
            max_batches,
            report,
        } => {
            let c = Common::new(input, engine)
                .sampling(sampling)
                .errors(errors)
                .resume(resume);
            run::run(&c, epochs, max_batches, report.as_deref())
        }
        Command::Convert {
            input,
            engine,
            sampling,
            resume,
            out,
            format,
            slice,
            report,
            shard_size,
            store,
        } => {
            let c = Common::new(input, engine).sampling(sampling).resume(resume);
            match format {
                Format::Npy => {
                    for (given, flag) in [
                        (store.is_some(), "--store"),
                        (shard_size.is_some(), "--shard-size"),
                    ] {
                        if given {
                            refuse("convert", format!(
                                "{flag} applies to `convert --format shards` only (this is --format npy)"
                            ));
                        }
                    }
                    if slice.is_some() && c.resumes() {
                        refuse(
                            "convert",
                            "--slice and --start-epoch/--start-batch/--start-sample do not go \
                             together: a slice job converts its whole slice"
                                .into(),
                        );
                    }
                    convert::convert(&c, &out, slice, report.as_deref())
                }
                Format::Shards => {
                    if let Some(flag) = c.sampling_flags().first() {
                        refuse(
                            "convert",
                            format!(
                                "{flag} does not apply to `convert --format shards`: a shards \
                             dataset holds every sample in source order, and training shuffles \
                             and shards it as it would the original (split a conversion into \
                             jobs with --slice I/K)"
                            ),
                        );
                    }
                    if c.resumes() {
                        refuse(
                            "convert",
                            "--start-epoch/--start-batch/--start-sample do not apply to \
                             `convert --format shards` (split a conversion into jobs with \
                             --slice I/K)"
                                .into(),
                        );
                    }
                    convert::convert_shards(&c, &out, (shard_size, store, slice), report.as_deref())
                }
            }
        }
        Command::MergeIndex { dir, endpoint } => merge_index::merge_index(&dir, endpoint),
        Command::Bench {
            input,
            engine,
            sampling,
            errors,
            resume,
            epochs,
            json,
            no_profile,
            report,
            sweep_workers,
            plot,
            step_ms,
        } => {
            if sweep_workers
                .as_ref()
                .is_some_and(|w| w.is_empty() || w.contains(&0))
            {
                refuse(
                    "bench",
                    "--sweep-workers needs worker counts of at least 1 (e.g. 1,2,4)".into(),
                );
            }
            if step_ms.is_some_and(|ms| !(ms >= 0.0 && ms.is_finite())) {
                refuse(
                    "bench",
                    "--step-ms must be a number of milliseconds, at least 0".into(),
                );
            }
            let c = Common::new(input, engine)
                .sampling(sampling)
                .errors(errors)
                .resume(resume);
            let opts = bench::BenchOpts {
                epochs,
                json,
                profile: !no_profile,
                report,
                sweep: sweep_workers,
                plot,
                step_ms,
            };
            bench::bench(&c, &opts)
        }
        Command::Validate(v) => validate::run(&v),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            let message = e.to_string();
            eprintln!("error: {message}");
            for cause in e.chain().skip(1).map(|c| c.to_string()) {
                // an error that already says its cause's words is not followed by them
                if !message.contains(&cause) {
                    eprintln!("  caused by: {cause}");
                }
            }
            if matches!(
                e.downcast_ref::<imgfeed::Error>(),
                Some(imgfeed::Error::Sample { .. })
            ) {
                eprintln!(
                    "hint: --on-error skip (or replace) goes on past bad samples and reports \
                     them; `imgfeed validate` lists every bad file of a dataset"
                );
            }
            exit_code(&e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::exit_code;
    use imgfeed::Error;

    #[test]
    fn the_progress_bar_counts_what_the_run_yields_and_epochs_from_0() {
        let mut cfg =
            imgfeed::PipelineConfig::from_file("pipelines/resnet50_eval.toml").expect("pipeline");
        cfg.batch.size = 5; // 12 samples, drop_remainder: 10 an epoch
        let p = imgfeed::Pipeline::new(cfg).expect("pipeline");
        let c = super::Common::default();
        assert_eq!(super::run_images(&c, &p, &(0..3)), 30);
        let resumed = super::Common {
            start_epoch: 1,
            start_batch: 1,
            ..super::Common::default()
        };
        assert_eq!(super::run_images(&resumed, &p, &(1..3)), 15);
        assert_eq!(super::epoch_label(3, &(0..20)), "epoch 3 of 0-19 ");
    }

    #[test]
    fn output_errors_exit_2() {
        let e = Error::Io {
            path: "out/afile".into(),
            source: std::io::Error::other("cannot be created"),
        };
        assert_eq!(exit_code(&anyhow::Error::from(e)), 2);
    }

    #[test]
    fn exit_codes_separate_usage_data_and_bugs() {
        let code = |e: Error| exit_code(&anyhow::Error::from(e));
        assert_eq!(code(Error::Internal("a plan bug".into())), 70);
        assert_eq!(
            code(Error::Invalid("batch.size must be at least 1".into())),
            2
        );
        let sample = Error::Sample {
            index: 3,
            file: "a/x.jpg".into(),
            stage: "decode",
            kind: imgfeed::SampleErrorKind::Corrupt,
            reason: "truncated".into(),
        };
        assert_eq!(code(sample), 1);
        // wrapped in context, as the commands report them
        let wrapped = anyhow::Error::from(Error::Internal("x".into())).context("run");
        assert_eq!(exit_code(&wrapped), 70);
    }
}
