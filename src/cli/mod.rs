//! Command-line interface: `check`, `run`, `convert`, `merge-index`, `bench`.

mod bench;
mod check;
mod convert;
mod merge_index;
mod run;

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
        /// Epochs to run.
        #[arg(long, default_value_t = 1)]
        epochs: u64,
        /// Print one JSON line instead of a table.
        #[arg(long)]
        json: bool,
        /// Do not time each stage (removes the timer calls from the hot loop).
        #[arg(long)]
        no_profile: bool,
    },
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
    /// Data-parallel shards, overriding `source.num_shards` (convert --format shards:
    /// slices converted separately and joined by merge-index).
    #[arg(long)]
    num_shards: Option<usize>,
    /// This process's shard, overriding `source.shard_id`.
    #[arg(long)]
    shard_id: Option<usize>,
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
        if let Some(n) = self.num_shards {
            cfg.source.num_shards = n;
        }
        if let Some(i) = self.shard_id {
            cfg.source.shard_id = i;
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
    let r: Result<i32> = match cli.command {
        Command::Check(c) => check::check(&c),
        Command::Run { common, epochs } => run::run(&common, epochs),
        Command::Convert {
            common,
            out,
            format: Format::Npy,
            ..
        } => convert::convert(&common, &out),
        Command::Convert {
            common,
            out,
            format: Format::Shards,
            shard_size,
            store,
        } => convert::convert_shards(&common, &out, shard_size, store),
        Command::MergeIndex { dir } => merge_index::merge_index(&dir),
        Command::Bench {
            common,
            epochs,
            json,
            no_profile,
        } => bench::bench(&common, epochs, json, !no_profile),
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
