//! Command-line interface: `check`, `run`, `convert`, `bench`, `validate`.

mod bench;
mod check;
mod convert;
mod interrupt;
mod report;
mod run;
mod validate;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use imgfeed::source::Usage;
use imgfeed::{Pipeline, PipelineConfig};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::PathBuf;

/// Turn image datasets into training batches.
#[derive(Parser, Debug)]
#[command(name = "imgfeed", version, about)]
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
        /// Epochs to run.
        #[arg(long, default_value_t = 1)]
        epochs: u64,
        /// Write every bad (skipped) sample to FILE as JSON lines.
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
    },
    /// Measure throughput: images/s, MB/s, CPU time, peak RSS, time per stage.
    Bench {
        #[command(flatten)]
        common: Common,
        /// Epochs to run.
        #[arg(long, default_value_t = 1)]
        epochs: u64,
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
}

impl Common {
    fn config(&self) -> imgfeed::Result<PipelineConfig> {
        let mut cfg = PipelineConfig::from_file(&self.pipeline)?;
        if let Some(d) = &self.data {
            cfg.source.root = d.clone();
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
        if let Some(u) = self.usage {
            if cfg.source.kind == imgfeed::SourceKind::ImageFolder {
                return Err(imgfeed::Error::Invalid(
                    "--usage applies to cifar10 and cifar100 sources only".into(),
                ));
            }
            cfg.source.usage = Some(u);
        }
        Ok(cfg)
    }

    fn pipeline(&self) -> imgfeed::Result<Pipeline> {
        Pipeline::new(self.config()?)
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

/// Exit code for an error: 2 for usage/pipeline errors, 1 for data errors.
fn exit_code(e: &anyhow::Error) -> i32 {
    match e.downcast_ref::<imgfeed::Error>() {
        Some(err) if err.is_usage() => 2,
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
            report,
        } => run::run(&common, epochs, report.as_deref()),
        Command::Convert {
            common,
            out,
            format: Format::Npy,
            report,
        } => convert::convert(&common, &out, report.as_deref()),
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
            exit_code(&e)
        }
    }
}
