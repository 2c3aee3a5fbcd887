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
    bad samples were skipped or replaced (listed on stderr); 2 usage, pipeline or dataset \
    errors; 70 a bug in imgfeed; 130 interrupted.";

#[derive(Subcommand, Debug)]
enum Command {
    /// Check a pipeline and print the sample spec after each stage (reads no pixel).
    #[command(after_help = EXIT_CODES)]
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
    #[command(after_help = EXIT_CODES)]
    MergeIndex {
        /// The folder the slices were written to.
        dir: PathBuf,
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
    /// Dataset root, overriding the pipeline's `source.root`.
    #[arg(long)]
    data: Option<PathBuf>,
    /// CIFAR split, overriding `source.usage` (default: train for cifar10/cifar100).
    #[arg(long, value_enum)]
    usage: Option<Usage>,
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
    /// Shuffle every epoch, overriding `source.shuffle` (default: true).
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

/// A flag the command does not take with these others: a usage error (exit 2), saying why.
fn refuse(why: String) -> ! {
    use clap::CommandFactory;
    Cli::command()
        .error(clap::error::ErrorKind::ArgumentConflict, why)
        .exit()
}

impl Common {
    fn config(&self) -> imgfeed::Result<PipelineConfig> {
        let mut cfg = PipelineConfig::from_file(&self.pipeline)?;
        if let Some(d) = &self.data {
            *cfg.source.dataset.root_mut() = d.clone();
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

/// A progress bar on stderr (drawn only on a terminal): `epoch 3/20` when the run has
/// epochs, the count of `what`, its rate rounded, and the ETA.
fn progress(len: u64, what: &'static str, epoch: Option<(u64, u64)>) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let label = epoch.map_or_else(String::new, |(e, n)| format!("epoch {}/{n} ", e + 1));
    let rate = move |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
        let _ = write!(w, "{:.0} {what}/s", s.per_sec());
    };
    if let Ok(style) = ProgressStyle::with_template(&format!(
        "{label}{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {what} ({{rate}}, eta {{eta}})"
    )) {
        bar.set_style(style.with_key("rate", rate).progress_chars("=> "));
    }
    bar
}

/// The warning for a pipeline whose epochs yield no batch (fewer samples than a batch with
/// `drop_remainder`), or `None`.
fn no_batch(p: &Pipeline) -> Option<String> {
    (p.batches_per_epoch() == 0).then(|| {
        let cfg = p.config();
        format!(
            "{} an epoch, fewer than the batch size {} with drop_remainder: every epoch yields \
             no batch (lower --batch-size, or set drop_remainder = false)",
            imgfeed::spec::count(p.samples_per_epoch() as u64, "sample", "samples"),
            cfg.batch.size
        )
    })
}

/// The pipeline's own warnings (e.g. normalize's units), and for `run` and `check`
/// (`batches`) one that yields no batch.
fn warn(p: &Pipeline, batches: bool) {
    for w in p.warnings() {
        eprintln!("warning: {w}");
    }
    if let Some(w) = no_batch(p).filter(|_| batches) {
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

/// Exit code for an error: 2 for usage/pipeline errors, 70 for a bug in imgfeed
/// (sysexits' EX_SOFTWARE), 1 for data and output errors.
fn exit_code(e: &anyhow::Error) -> i32 {
    match e.downcast_ref::<imgfeed::Error>() {
        Some(err) if err.is_usage() => 2,
        Some(imgfeed::Error::Internal(_)) => 70,
        _ => 1,
    }
}

pub fn main() -> i32 {
    let cli = Cli::parse();
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
                            refuse(format!(
                                "{flag} applies to `convert --format shards` only (this is --format npy)"
                            ));
                        }
                    }
                    if slice.is_some() && c.resumes() {
                        refuse(
                            "--slice and --start-epoch/--start-batch/--start-sample do not go \
                             together: a slice job converts its whole slice"
                                .into(),
                        );
                    }
                    convert::convert(&c, &out, slice, report.as_deref())
                }
                Format::Shards => {
                    if let Some(flag) = c.sampling_flags().first() {
                        refuse(format!(
                            "{flag} does not apply to `convert --format shards`: a shards \
                             dataset holds every sample in source order, and training shuffles \
                             and shards it as it would the original (split a conversion into \
                             jobs with --slice I/K)"
                        ));
                    }
                    if c.resumes() {
                        refuse(
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
        Command::MergeIndex { dir } => merge_index::merge_index(&dir),
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
                refuse("--sweep-workers needs worker counts of at least 1 (e.g. 1,2,4)".into());
            }
            if step_ms.is_some_and(|ms| !(ms >= 0.0 && ms.is_finite())) {
                refuse("--step-ms must be a number of milliseconds, at least 0".into());
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
            eprintln!("error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
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
