//! `imgfeed validate TARGET`: the dataset doctor. TARGET is a pipeline file (its source and
//! its `decode` settings are used), a dataset folder (CIFAR binary or pickle files are
//! recognised by their names, anything else is read as an ImageFolder tree) or a dataset in
//! object storage (shards when a manifest is there, else an image tree). Every sample
//! is read and decoded once; the output is a table of bad files by error kind and a
//! summary. Exit code 1 when a sample is bad, 130 when interrupted.

use super::report::Reporter;
use super::validate_html::Checked;
use super::{interrupt, progress};
use anyhow::Result;
use imgfeed::error::Invalid;
use imgfeed::ops::{Decode, Op};
use imgfeed::source::Usage;
use imgfeed::validate::{duplicates, validate, ValidateOptions, ValidateReport, SIDE_BUCKETS};
use imgfeed::{Dataset, PipelineConfig, SourceConfig};
use std::path::{Path, PathBuf};

/// Options of `imgfeed validate`.
#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// A pipeline file, a dataset folder (ImageFolder tree, CIFAR binary or pickle files,
    /// shards, WebDataset tars, TFRecord, MindRecord or Parquet files), record files (a
    /// `.tar`, `.tfrecord`, `.mindrecordN` or `.parquet` file, a brace pattern
    /// `train-{0000..0146}.tar`), or a dataset in object storage (s3://bucket/prefix, gs://,
    /// az://: an image tree or shards).
    target: PathBuf,
    /// Where the store of a URL is reached (an S3-compatible server, the GCS base URL,
    /// the Azure blob service URL), overriding `source.endpoint`.
    #[arg(long)]
    endpoint: Option<String>,
    /// Cache root for a URL, overriding `source.cache_dir`.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Dataset root, overriding the pipeline's `source.root`.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// CIFAR split (train, test, all); a folder defaults to every file present.
    #[arg(long)]
    usage: Option<Usage>,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write every bad sample to FILE as JSON lines.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Also write the report as one self-contained page to FILE (classes, sizes, formats,
    /// bad files, duplicates, thumbnails; no script, nothing fetched).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Another dataset (a folder, URL or pipeline file, e.g. the validation set) to look
    /// for this one's pictures in: the same bytes or pixels in both is leakage.
    #[arg(long, value_name = "DATA")]
    against: Option<PathBuf>,
}

/// A source configuration for a bare dataset folder: the first source kind that
/// recognises its files (CIFAR by their names, a shards manifest), else an ImageFolder tree
/// (the registry's last kind takes any folder).
fn folder_source(dir: &Path) -> Result<SourceConfig> {
    let dataset = Dataset::detect(dir)
        .ok_or_else(|| anyhow::anyhow!("{}: no source kind reads this folder", dir.display()))?;
    Ok(dataset.into())
}

/// The source and decode settings TARGET stands for (a URL, a folder, container files named
/// by their extension or a pipeline file), and the pipeline's `on_error` where a pipeline
/// file gives one.
fn resolve(target: &Path) -> Result<(SourceConfig, Decode, Option<imgfeed::OnError>)> {
    Ok(if imgfeed::store::url::is_remote(target) {
        let dataset = Dataset::by_extension(target).unwrap_or_else(|| Dataset::in_store(target));
        (dataset.into(), Decode::default(), None)
    } else if target.is_dir() {
        (folder_source(target)?, Decode::default(), None)
    } else if let Some(dataset) = Dataset::by_extension(target) {
        // Container files named by their extension: a `.tar`, a pattern of them.
        (dataset.into(), Decode::default(), None)
    } else {
        let cfg = PipelineConfig::from_file(target)?;
        let decode = cfg
            .ops
            .iter()
            .find_map(|o| match o {
                Op::Decode(d) => Some(d.clone()),
                _ => None,
            })
            .unwrap_or_default();
        (cfg.source, decode, Some(cfg.engine.on_error))
    })
}

/// `--endpoint` and `--cache-dir`, which apply to every dataset of the command.
fn store_flags(a: &ValidateArgs, source: &mut SourceConfig) {
    if let Some(e) = &a.endpoint {
        source.remote.endpoint = Some(e.clone());
    }
    if let Some(c) = &a.cache_dir {
        source.remote.cache_dir = Some(c.clone());
    }
}

pub fn run(a: &ValidateArgs) -> Result<i32> {
    let (mut source, decode, on_error) = resolve(&a.target)?;
    if let Some(d) = &a.data {
        source.dataset.set_data(d);
    }
    store_flags(a, &mut source);
    if let Some(u) = a.usage {
        source.set_usage(u)?;
    }
    let workers = a.workers.unwrap_or_else(imgfeed::pipeline::default_workers);
    if workers == 0 {
        let setting = "--workers";
        return Err(imgfeed::Error::from(Invalid::TooSmall { setting, min: 1 }).into());
    }
    // The same checks a pipeline makes (e.g. decoder = "turbo" needs the feature).
    imgfeed::ops::Op::Decode(decode.clone())
        .output_spec(&imgfeed::Spec::encoded())
        .map_err(|e| imgfeed::Error::from(Invalid::Decode(e)))?;
    let jpeg = decode.decoder.describe();
    let opened = source.open()?;
    let warnings = opened.warnings();
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let mut bad = Reporter::new(a.report.as_deref())?;
    let check = |s: &dyn imgfeed::source::Source, decode: &Decode| {
        let bar = progress(s.len() as u64, "samples");
        let report = validate(
            s,
            &ValidateOptions {
                decode: decode.clone(),
                workers,
            },
            interrupt::flag(),
            |n| bar.set_position(n as u64),
        );
        bar.finish_and_clear();
        report
    };
    let report = check(opened.as_ref(), &decode);
    // --against: the other dataset, read the same way, and this one's pictures in it
    let against = match &a.against {
        Some(target) if !report.interrupted => {
            let (mut other, other_decode, _) = resolve(target)?;
            store_flags(a, &mut other);
            let other = other.open()?;
            let r = check(other.as_ref(), &other_decode);
            let leaks = duplicates::between(&report.digests, &r.digests);
            Some((other, r, leaks))
        }
        _ => None,
    };
    for e in &report.bad {
        bad.add(e, None)?;
    }
    bad.finish()?;
    if let Some(path) = &a.html {
        let page = super::validate_html::page(&super::validate_html::Page {
            main: Checked {
                report: &report,
                source: opened.as_ref(),
            },
            against: against.as_ref().map(|(s, r, leaks)| {
                (
                    Checked {
                        report: r,
                        source: s.as_ref(),
                    },
                    leaks.clone(),
                )
            }),
            on_error: (on_error.unwrap_or_default(), on_error.is_some()),
            decode: decode.clone(),
            jpeg: jpeg.clone(),
        });
        std::fs::write(path, page).map_err(|source| imgfeed::Error::Io {
            path: path.clone(),
            source,
        })?;
    }
    let leaks = against.as_ref().map(|(s, r, l)| (s.as_ref(), r, l));
    if a.json {
        let mut v = to_json(&report, &bad);
        v["jpeg_decoder"] = serde_json::json!(jpeg);
        v["warnings"] = serde_json::json!(warnings);
        v["duplicates"] = duplicates_json(&report, opened.as_ref());
        if let Some((s, r, l)) = leaks {
            v["against"] = serde_json::json!({
                "source": r.source,
                "samples": r.samples,
                "bad": r.bad.len(),
                "in_both": l.iter().map(|(i, j, same)| serde_json::json!({
                    "path": opened.sample_name(*i),
                    "other": s.sample_name(*j),
                    "same": same.name(),
                })).collect::<Vec<_>>(),
            });
        }
        println!("{v}");
    } else {
        print_text(&report, &bad);
        print_duplicates(&report, opened.as_ref(), leaks);
        println!("jpeg decoder {jpeg}");
        if let Some(path) = &a.html {
            println!("report page: {}", path.display());
        }
    }
    Ok(if report.interrupted {
        interrupt::EXIT
    } else if report.bad.is_empty() {
        0
    } else {
        1
    })
}

/// The duplicate groups, each with its members' files and labels.
fn duplicates_json(r: &ValidateReport, s: &dyn imgfeed::source::Source) -> serde_json::Value {
    use serde_json::json;
    let groups = |across: bool| {
        r.duplicates
            .iter()
            .filter(|g| g.across_classes() == across)
            .map(|g| {
                json!({
                    "same": g.same.name(),
                    "samples": g.members.iter().map(|(i, l)| json!({
                        "path": s.sample_name(*i), "label": l,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect::<Vec<_>>()
    };
    json!({ "within_class": groups(false), "across_classes": groups(true) })
}

type Leaks<'a> = Option<(
    &'a dyn imgfeed::source::Source,
    &'a ValidateReport,
    &'a Vec<(usize, usize, duplicates::Same)>,
)>;

fn print_duplicates(r: &ValidateReport, s: &dyn imgfeed::source::Source, leaks: Leaks<'_>) {
    if !r.duplicates.is_empty() {
        let across = r.duplicates.iter().filter(|g| g.across_classes()).count();
        println!(
            "\nexact duplicates: {} groups ({} within a class, {across} across classes)",
            r.duplicates.len(),
            r.duplicates.len() - across
        );
        for g in &r.duplicates {
            let files: Vec<String> = g.members.iter().map(|(i, _)| s.sample_name(*i)).collect();
            let tag = if g.across_classes() {
                ", across classes"
            } else {
                ""
            };
            println!("  same {}{tag}: {}", g.same.name(), files.join(" = "));
        }
    }
    if let Some((other, o, l)) = leaks {
        println!("\nin both this dataset and {}: {}", o.source, l.len());
        for (i, j, same) in l {
            println!(
                "  same {}: {} = {}",
                same.name(),
                s.sample_name(*i),
                other.sample_name(*j)
            );
        }
    }
}

fn bucket_names() -> Vec<String> {
    let mut v = Vec::new();
    let mut lo = 0;
    for ub in SIDE_BUCKETS {
        v.push(format!("{lo}-{}", ub - 1));
        lo = ub;
    }
    v.push(format!("{lo}+"));
    v
}

fn to_json(r: &ValidateReport, bad: &Reporter) -> serde_json::Value {
    use serde_json::{json, Map, Value};
    let by_kind: Map<String, Value> = r
        .bad_by_kind()
        .into_iter()
        .map(|(k, n)| (k.name().to_string(), json!(n)))
        .collect();
    let buckets: Map<String, Value> = bucket_names()
        .into_iter()
        .zip(r.shorter_side)
        .map(|(k, n)| (k, json!(n)))
        .collect();
    let ignored_by: Map<String, Value> = r
        .ignored_by_reason()
        .into_iter()
        .map(|(k, n)| (k.name().to_string(), json!(n)))
        .collect();
    let c = &r.colors;
    json!({
        "what": "imgfeed-validate",
        "source": r.source,
        "samples": r.samples,
        "checked": r.checked,
        "ok": r.checked - r.bad.len(),
        "bad": r.bad.len(),
        "interrupted": r.interrupted,
        "seconds": (r.seconds * 1000.0).round() / 1000.0,
        "bad_by_kind": by_kind,
        "bad_samples": bad.bad.iter().map(|b| b.to_json()).collect::<Vec<_>>(),
        "classes": r.classes.iter().map(|(label, name, n, b)| json!({
            "label": label, "name": name, "samples": n, "bad": b,
        })).collect::<Vec<_>>(),
        "width": {"min": r.width.min, "median": r.width.median, "max": r.width.max},
        "height": {"min": r.height.min, "median": r.height.median, "max": r.height.max},
        "shorter_side": buckets,
        "formats": r.formats,
        "colors": {
            "gray": c.gray, "cmyk": c.cmyk, "alpha": c.alpha, "palette": c.palette,
            "sixteen_bit": c.sixteen_bit, "progressive": c.progressive,
            "exif_oriented": c.exif_oriented,
        },
        "ignored_by_reason": ignored_by,
        "ignored": r.ignored.iter().map(|(p, why)| json!({
            "path": p.to_string_lossy(), "reason": why.name(),
        })).collect::<Vec<_>>(),
    })
}

fn print_text(r: &ValidateReport, bad: &Reporter) {
    println!("{}", r.source);
    println!(
        "checked {} of {} samples in {:.2} s: {} ok, {} bad{}",
        r.checked,
        r.samples,
        r.seconds,
        r.checked - r.bad.len(),
        r.bad.len(),
        if r.interrupted { " (interrupted)" } else { "" }
    );
    if !bad.bad.is_empty() {
        println!("\nbad samples by kind:");
        for (kind, n) in r.bad_by_kind() {
            println!("  {:<16} {n}", kind.name());
            for b in bad.bad.iter().filter(|b| b.kind == kind.name()) {
                println!("    {}  {}: {}", b.file, b.stage, b.reason);
            }
        }
    }
    if !r.classes.is_empty() {
        println!("\nsamples per class (bad among them):");
        for (label, name, n, b) in &r.classes {
            let name = name.as_deref().unwrap_or("");
            println!("  {label:>5} {name:<20} {n:>8} ({b} bad)");
        }
    }
    if r.width.max > 0 {
        println!(
            "\nsizes: width {} / {} / {}, height {} / {} / {} (min / median / max)",
            r.width.min, r.width.median, r.width.max, r.height.min, r.height.median, r.height.max
        );
        let buckets: Vec<String> = bucket_names()
            .into_iter()
            .zip(r.shorter_side)
            .filter(|(_, n)| *n > 0)
            .map(|(b, n)| format!("{b}: {n}"))
            .collect();
        println!("shorter side: {}", buckets.join(", "));
    }
    let formats: Vec<String> = r.formats.iter().map(|(f, n)| format!("{f} {n}")).collect();
    println!("formats: {}", formats.join(", "));
    let c = &r.colors;
    println!(
        "colour: gray {}, cmyk {}, alpha {}, palette {}, 16-bit {}, progressive {}",
        c.gray, c.cmyk, c.alpha, c.palette, c.sixteen_bit, c.progressive
    );
    if c.exif_oriented > 0 {
        println!(
            "EXIF orientation: {} images stored turned or mirrored (decode's exif_transpose = \
             true shows them upright, as Pillow's ImageOps.exif_transpose)",
            c.exif_oriented
        );
    }
    if !r.ignored.is_empty() {
        let by: Vec<String> = r
            .ignored_by_reason()
            .into_iter()
            .map(|(k, n)| format!("{} {n}", k.name()))
            .collect();
        println!("\nignored {} entries ({}):", r.ignored.len(), by.join(", "));
        for (p, why) in &r.ignored {
            println!("  {:<40} {}", p.display(), why.name());
        }
    }
}
