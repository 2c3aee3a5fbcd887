//! Command-line interface: `check`, `run`, `convert`, `merge-index`, `bench`, `preview`,
//! `validate`.
//!
//! `args` is the grammar (subcommands and flag groups), `common` what a command was given
//! (the flags as the library's `Overrides`, applied by it), `span` a run's epochs and
//! progress; this file dispatches and maps errors to exit codes.

mod args;
mod bench;
mod bench_html;
mod check;
mod common;
mod convert;
mod interrupt;
mod merge_index;
mod plot;
mod preview;
mod report;
mod run;
mod span;
mod start;
mod validate;
mod validate_html;

use anyhow::Result;
use args::{parse, refuse, Command, Format};
use common::Common;
use imgfeed::{OnError, Pipeline};
use span::{epoch_label, epoch_range, open_epoch, progress, resume_warning, run_images};
use start::resume_flags;

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

/// What `drop_remainder` leaves out of every epoch (barring skipped samples), in words, or
/// `None` when it leaves out nothing.
fn dropped_note(p: &Pipeline) -> Option<String> {
    let bs = p.config().batch.size;
    let samples = p.samples_per_epoch();
    let dropped = samples.saturating_sub(p.batches_per_epoch() * bs);
    (p.config().batch.drop_remainder && dropped > 0 && dropped < samples).then(|| {
        format!(
            "drop_remainder: the last {dropped} of each epoch's {samples} samples are dropped \
             (they do not fill a batch of {bs}; drop_remainder = false keeps them in a short \
             last batch)"
        )
    })
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

/// The `imgfeed` command with `args` (its name first, as `std::env::args_os` gives them):
/// runs it and returns its exit code. Also the wheel's `imgfeed` (a console script into the
/// Python module), so the command is this code in both.
pub fn main_with_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    quiet_on_closed_pipe();
    let cli = parse(args.into_iter().collect());
    interrupt::install();
    let r: Result<i32> = match cli.command {
        Command::Check {
            input,
            engine,
            sampling,
            errors,
            print_config,
        } => {
            let c = Common::new(input, engine).sampling(sampling).errors(errors);
            check::check(&c, print_config)
        }
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
                                "{flag} applies to `convert --format shards`, `webdataset` and `mindrecord` only (this is --format npy)"
                            ));
                        }
                    }
                    if slice.is_some() && c.resumes() {
                        refuse(
                            "convert",
                            "--slice and --start-epoch/--start-batch/--start-sample/--start-position do not go \
                             together: a slice job converts its whole slice"
                                .into(),
                        );
                    }
                    convert::convert(&c, &out, slice, report.as_deref())
                }
                Format::Shards | Format::Webdataset | Format::Mindrecord => {
                    let (name, container) = match format {
                        Format::Webdataset => ("webdataset", convert::Container::WebDataset),
                        Format::Mindrecord => ("mindrecord", convert::Container::MindRecord),
                        _ => ("shards", convert::Container::Shards),
                    };
                    if let Some(flag) = c.sampling_flags().first() {
                        refuse(
                            "convert",
                            format!(
                                "{flag} does not apply to `convert --format {name}`: a {name} \
                             dataset holds every sample in source order, and training shuffles \
                             and shards it as it would the original (split a conversion into \
                             jobs with --slice I/K)"
                            ),
                        );
                    }
                    if c.resumes() {
                        refuse(
                            "convert",
                            format!("--start-epoch/--start-batch/--start-sample/--start-position do not apply to \
                             `convert --format {name}` (split a conversion into jobs with \
                             --slice I/K)"),
                        );
                    }
                    convert::convert_shards(
                        &c,
                        &out,
                        (shard_size, store, slice),
                        report.as_deref(),
                        container,
                    )
                }
            }
        }
        Command::MergeIndex { dir, endpoint } => merge_index::merge_index(&dir, endpoint),
        Command::MergeNpy { out, slices } => merge_index::merge_npy(&out, &slices),
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
            html,
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
                html,
            };
            bench::bench(&c, &opts)
        }
        Command::Preview {
            input,
            engine,
            sampling,
            errors,
            mut resume,
            epoch,
            count,
            out,
            with_source,
            tile,
        } => {
            resume.start_epoch = resume.start_epoch.or(epoch);
            let c = Common::new(input, engine)
                .sampling(sampling)
                .errors(errors)
                .resume(resume);
            let opts = imgfeed::preview::PreviewOptions {
                count,
                with_source,
                tile,
            };
            preview::run(&c, &opts, &out)
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

/// A closed output (`imgfeed run ... | head -1`) ends the process quietly, as it ends `cat`
/// or `seq`: the default action of SIGPIPE, which Rust's runtime (and Python's) otherwise
/// ignores (so that the next `println!` would panic on the write's `EPIPE`).
fn quiet_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: `signal` with SIG_DFL installs no handler; the command calls it before it
    // starts any thread of its own.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
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
        let setting = "batch.size";
        let invalid = imgfeed::error::Invalid::TooSmall { setting, min: 1 };
        assert_eq!(code(Error::Invalid(invalid)), 2);
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
