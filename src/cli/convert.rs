//! `imgfeed convert`: write every sample of one epoch to files. Nothing is dropped: the
//! last batch is kept whatever `drop_remainder` says, and a bad sample is reported (file and
//! reason) and left out while the rest is written; the exit code is then 1. The files are
//! renamed into place at the end: Ctrl-C (exit 130) or an error leaves no complete-looking
//! file.

use super::report::Reporter;
use super::{interrupt, progress, Common};
use anyhow::Result;
use imgfeed::shards::slice_range;
use imgfeed::sink::write_npy_dir;
use imgfeed::sink::{
    convert_to_mindrecord_until, convert_to_shards_until, convert_to_webdataset_until,
};
use imgfeed::{OnError, Pipeline};
use std::path::{Path, PathBuf};

/// `path` absolute with its links resolved, for a path that may not exist yet: its nearest
/// existing ancestor resolved, the rest appended; `None` where nothing of it resolves.
fn resolved(path: &Path) -> Option<PathBuf> {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(found) = at.canonicalize() {
            return Some(rest.iter().rev().fold(found, |p, c| p.join(c)));
        }
        rest.push(at.file_name()?.to_owned());
        at = match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
    }
}

/// An output folder inside the dataset it converts would become part of that dataset: an
/// ImageFolder tree would read it as one more class (an empty one, taking a label and
/// moving every label after it), so `--out` inside `--data` is refused.
fn refuse_out_inside_data(c: &Common, out: &Path) -> Result<()> {
    let cfg = c.config()?;
    let data = cfg.source.root();
    // a URL root (s3://...) is no local folder: nothing resolves
    if let (Ok(data_abs), Some(out_abs)) = (data.canonicalize(), resolved(out)) {
        if out_abs.starts_with(&data_abs) {
            super::args::refuse(
                "convert",
                format!(
                    "--out {} is inside the dataset {}: the next read would take it for part \
                     of the dataset (an ImageFolder tree for one more class, moving every label \
                     after it); write the output outside the dataset's folder",
                    out.display(),
                    data.display()
                ),
            );
        }
    }
    Ok(())
}

pub fn convert(
    c: &Common,
    out: &Path,
    slice: Option<(usize, usize)>,
    report: Option<&Path>,
) -> Result<i32> {
    refuse_out_inside_data(c, out)?;
    let mut bad = Reporter::new(report)?;
    let mut cfg = c.config()?;
    cfg.batch.drop_remainder = false;
    cfg.engine.on_error = OnError::Skip;
    let p = Pipeline::new(cfg)?;
    super::warn(&p, false);
    if let Some(w) = super::resume_warning(c, &p) {
        eprintln!("warning: {w}");
    }
    // One pass: nothing is kept in the cache for the epoch after it.
    p.last_epoch(c.start_epoch);
    let (epoch, total) = match slice {
        Some((id, count)) => {
            let (first, end) = slice_range(p.samples_per_epoch(), id, count);
            (p.epoch_slice(c.start_epoch, id, count)?, end - first)
        }
        None => (c.open_start(&p)?, p.samples_per_epoch()),
    };
    let bar = progress(total as u64, "samples");
    let mut report_err = Ok(());
    let report = write_npy_dir(
        epoch,
        &p,
        out,
        interrupt::flag(),
        |n| bar.inc(n as u64),
        |e| {
            if let Err(w) = bad.add(e, Some(c.start_epoch)) {
                report_err = Err(w);
            }
        },
    )?;
    bar.finish_and_clear();
    report_err?;
    bad.finish()?;
    bad.print("skipped");
    if report.interrupted {
        eprintln!(
            "interrupted after {} samples: nothing written to {} (partial files removed)",
            report.samples,
            out.display()
        );
        return Ok(interrupt::EXIT);
    }
    let spec = p.output_spec();
    let d = spec.dims();
    println!(
        "wrote {} samples to {}: images.npy {} [{}, {}, {}, {}], labels.npy {}, samples.txt{}",
        report.samples,
        out.display(),
        spec.dtype.name(),
        report.samples,
        d[0].unwrap_or(0),
        d[1].unwrap_or(0),
        d[2].unwrap_or(0),
        spec.label.name(),
        if report.skipped > 0 {
            format!("; {} bad sample(s) skipped", report.skipped)
        } else {
            String::new()
        }
    );
    Ok(if report.skipped > 0 { 1 } else { 0 })
}

/// What `convert --format shards` stores: `--shard-size`, `--store` and `--slice`.
type StoreFlags = (
    Option<String>,
    Option<imgfeed::shards::Storage>,
    Option<(usize, usize)>,
);

/// What a container conversion wrote, for its one line.
struct Written {
    samples: u64,
    storage: &'static str,
    files: usize,
    bytes: u64,
    manifest: String,
    slice: Option<imgfeed::shards::format::Slice>,
    skipped: usize,
}

/// `convert --format shards` (or `webdataset`: tars for other tools).
/// The container `convert_shards` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    /// imgfeed's shards.
    Shards,
    /// WebDataset tars.
    WebDataset,
    /// A MindRecord group.
    MindRecord,
}

pub fn convert_shards(
    c: &Common,
    out: &Path,
    (shard_size, store, slice): StoreFlags,
    report: Option<&Path>,
    container: Container,
) -> Result<i32> {
    refuse_out_inside_data(c, out)?;
    let cfg = c.config()?;
    let mut st = cfg.store.clone().unwrap_or_default();
    if let Some(s) = shard_size {
        st.shard_size = Some(s);
    }
    if let Some(m) = store {
        st.mode = m;
    }
    st.slice = slice;
    let bar = progress(0, "samples");
    let mut bad = Reporter::new(report)?;
    let mut report_err = Ok(());
    let on_start = |n: usize| bar.set_length(n as u64);
    let on_progress = |n: usize| bar.inc(n as u64);
    let on_skip = |e: &imgfeed::Error| {
        if let Err(w) = bad.add(e, None) {
            report_err = Err(w);
        }
    };
    let done = if container == Container::MindRecord {
        convert_to_mindrecord_until(
            &cfg,
            &st,
            out,
            on_start,
            on_progress,
            on_skip,
            interrupt::flag(),
        )?
        .map(|r| Written {
            samples: r.samples,
            storage: st.mode.name(),
            files: r.files.len(),
            bytes: r.files.iter().map(|f| f.1).sum(),
            manifest: out
                .join(r.files.first().map_or("", |f| f.0.as_str()))
                .display()
                .to_string(),
            slice: None,
            skipped: r.skipped,
        })
    } else if container == Container::WebDataset {
        convert_to_webdataset_until(
            &cfg,
            &st,
            out,
            on_start,
            on_progress,
            on_skip,
            interrupt::flag(),
        )?
        .map(|r| Written {
            samples: r.manifest.samples,
            storage: r.manifest.storage.name(),
            files: r.manifest.shards.len(),
            bytes: r.manifest.shards.iter().map(|s| s.size).sum(),
            manifest: out
                .join(imgfeed::sink::webdataset::MANIFEST)
                .display()
                .to_string(),
            slice: None,
            skipped: r.skipped,
        })
    } else {
        convert_to_shards_until(
            &cfg,
            &st,
            out,
            on_start,
            on_progress,
            on_skip,
            interrupt::flag(),
        )?
        .map(|r| Written {
            samples: r.manifest.samples,
            storage: r.manifest.storage.name(),
            files: r.manifest.shards.len(),
            bytes: r.manifest.shards.iter().map(|s| s.size).sum(),
            manifest: out.join(&r.manifest_name).display().to_string(),
            slice: r.manifest.slice,
            skipped: r.skipped,
        })
    };
    bar.finish_and_clear();
    report_err?;
    bad.finish()?;
    bad.print("skipped");
    let Some(w) = done else {
        eprintln!(
            "interrupted: no dataset written to {} (temporary files removed)",
            out.display()
        );
        return Ok(interrupt::EXIT);
    };
    println!(
        "wrote {} samples ({} storage) in {} {}(s), {:.1} MB, to {}{}{}",
        w.samples,
        w.storage,
        w.files,
        match container {
            Container::Shards => "shard",
            Container::WebDataset => "tar",
            Container::MindRecord => "MindRecord file",
        },
        w.bytes as f64 / 1e6,
        w.manifest,
        match w.slice {
            Some(s) => format!(
                "; slice {} of {} (source samples {}..{}): run merge-index when all are done",
                s.id, s.count, s.first, s.end
            ),
            None => String::new(),
        },
        if w.skipped > 0 {
            format!("; {} bad sample(s) skipped", w.skipped)
        } else {
            String::new()
        }
    );
    let traffic = imgfeed::store::snapshot();
    if !traffic.is_empty() {
        println!("{traffic}");
    }
    Ok(if w.skipped > 0 { 1 } else { 0 })
}
