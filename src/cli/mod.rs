//! Command-line interface: `check`, `run`, `convert`, `merge-index`, `bench`, `validate`.

mod bench;
mod check;
mod convert;
mod interrupt;
mod merge_index;
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

#[derive(Subcommand, Debug)]
enum Command {
    /// Check a pipeline and print the sample spec after each stage (reads no pixel).
    Check(Common),
    /// Run the pipeline and print a summary of what came out.
    Run {
        #[command(flatten)]
        common: Common,
        /// Epochs of the run (default `source.num_epochs`); with `--start-epoch`, the run
        /// covers epochs start..epochs.
        #[arg(long)]
        epochs: Option<u64>,
        /// Stop after this many batches and print the state to resume from.
        #[arg(long)]
        max_batches: Option<usize>,
        /// Write every bad (skipped or replaced) sample to FILE as JSON lines.
        #[arg(long)]
        report: Option<PathBuf>,
    },
    /// Write every sample (nothing dropped) to files.
    Convert {
        #[command(flatten)]
        common: Common,
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Npy)]
        format: Format,
        /// Write every bad (skipped) sample to FILE as JSON lines.
        #[arg(long)]
        report: Option<PathBuf>,
        /// shards: bytes per shard file (1GB, 512MB, ...), overriding `store.shard_size`
        /// (default 1GB).
        #[arg(long)]
        shard_size: Option<String>,
        /// shards: how samples are stored (jpeg, raw, original), overriding `store.mode`.
        #[arg(long)]
        store: Option<String>,
    },
    /// Join the slice manifests of a split shards conversion (`convert --format shards
    /// --num-shards K --shard-id I --out DIR`, one per slice) into DIR/manifest.json.
    MergeIndex {
        /// The folder the slices were written to.
        dir: PathBuf,
    },
    /// Measure throughput: images/s, MB/s, CPU time, peak RSS, time per stage.
    Bench {
        #[command(flatten)]
        common: Common,
        /// Epochs of the run (default `source.num_epochs`).
        #[arg(long)]
        epochs: Option<u64>,
        /// Print one JSON line instead of a table.
        #[arg(long)]
        json: bool,
        /// Do not time each stage (removes the timer calls from the hot loop).
        #[arg(long)]
        no_profile: bool,
        /// Write every bad (skipped) sample to FILE as JSON lines.
        #[arg(long)]
        report: Option<PathBuf>,
    },
    /// Read and decode every sample once: bad files by kind, classes, sizes, formats.
    Validate(validate::ValidateArgs),
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Format {
    /// images.npy, labels.npy, samples.txt
    Npy,
    /// shard files + index + manifest.json, read back by pointing --data at the folder
    Shards,
}

/// Options every command takes.
#[derive(Args, Debug)]
struct Common {
    /// The pipeline file (TOML).
    pipeline: PathBuf,
    /// Dataset root, overriding the pipeline's `source.root`.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Worker threads, overriding `engine.workers`.
    #[arg(long)]
    workers: Option<usize>,
    /// Batch size, overriding `batch.size`.
    #[arg(long)]
    batch_size: Option<usize>,
    /// CIFAR split (train, test, all), overriding `source.usage`.
    #[arg(long)]
    usage: Option<Usage>,
    /// Samples a worker claims at once, overriding `engine.work_unit`.
    #[arg(long)]
    work_unit: Option<usize>,
    /// Seed of the shuffle and the random ops, overriding `source.seed`.
    #[arg(long)]
    seed: Option<u64>,
    /// Shuffle every epoch (overrides `source.shuffle`).
    #[arg(long, overrides_with = "no_shuffle")]
    shuffle: bool,
    /// Keep the source order (overrides `source.shuffle`).
    #[arg(long, overrides_with = "shuffle")]
    no_shuffle: bool,
    /// Data-parallel shards, overriding `source.num_shards` (and `shard = "env"`).
    #[arg(long)]
    num_shards: Option<usize>,
    /// This process's shard, overriding `source.shard_id` (and `shard = "env"`).
    #[arg(long)]
    shard_id: Option<usize>,
    /// When the shards do not divide the dataset: pad, drop or exact.
    #[arg(long)]
    uneven: Option<Uneven>,
    /// Bad samples: error (stop), skip (leave out, report) or replace (fill from the same
    /// shard, report), overriding `engine.on_error`.
    #[arg(long)]
    on_error: Option<OnError>,
    /// Start at this epoch (resume).
    #[arg(long, default_value_t = 0)]
    start_epoch: u64,
    /// Start at this batch of the start epoch (resume).
    #[arg(long, default_value_t = 0)]
    start_batch: usize,
    /// With --start-batch after skipped samples: the position in the shard's order of the
    /// batch's first sample, as the resume hint prints it (default: batch × batch size).
    #[arg(long)]
    start_sample: Option<usize>,
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

fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(&format!(
        "{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {what} ({{per_sec}}, eta {{eta}})"
    )) {
        bar.set_style(style.progress_chars("=> "));
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
        Command::Check(c) => check::check(&c),
        Command::Run {
            common,
            epochs,
            max_batches,
            report,
        } => run::run(&common, epochs, max_batches, report.as_deref()),
        Command::Convert {
            common,
            out,
            format: Format::Npy,
            report,
            ..
        } => convert::convert(&common, &out, report.as_deref()),
        Command::Convert {
            common,
            out,
            format: Format::Shards,
            shard_size,
            store,
            report,
        } => convert::convert_shards(&common, &out, shard_size, store, report.as_deref()),
        Command::MergeIndex { dir } => merge_index::merge_index(&dir),
        Command::Bench {
            common,
            epochs,
            json,
            no_profile,
            report,
        } => bench::bench(&common, epochs, json, !no_profile, report.as_deref()),
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
