//! `imgfeed bench`: throughput of a pipeline on real data, with what it cost, and a verdict
//! on what limits it (the decode, reading, another stage, or the consumer) with the change
//! that would help most. `--sweep-workers 1,2,4` measures each worker count in turn and
//! writes a table (and `--plot FILE`, an SVG).

use super::report::Reporter;
use super::{epoch_range, interrupt, open_epoch, plot, progress, Common};
use anyhow::Result;
use imgfeed::Pipeline;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What `bench` was asked besides the pipeline flags.
#[derive(Debug)]
pub struct BenchOpts {
    pub epochs: Option<u64>,
    pub json: bool,
    pub profile: bool,
    pub report: Option<PathBuf>,
    /// Worker counts to measure in turn.
    pub sweep: Option<Vec<usize>>,
    /// Where to write the sweep's SVG plot.
    pub plot: Option<PathBuf>,
    /// Milliseconds the consumer sleeps after each batch (a stand-in training step).
    pub step_ms: Option<f64>,
    /// `--html FILE`: the run(s) as one page.
    pub html: Option<PathBuf>,
}

fn rusage() -> (f64, u64) {
    // SAFETY: getrusage fills the struct we pass; zeroed is a valid initial value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0;
    if !ok {
        return (0.0, 0);
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    (t(ru.ru_utime) + t(ru.ru_stime), ru.ru_maxrss as u64 * 1024)
}

/// The figures of one measured run.
#[derive(Debug, Clone)]
pub(super) struct Measured {
    pub(super) workers: usize,
    pub(super) images: usize,
    pub(super) batches: usize,
    pub(super) wall: f64,
    pub(super) cpu: f64,
    pub(super) peak_rss: u64,
    bytes_in: u64,
    out_bytes: usize,
    /// Share of the workers' time per stage, in pipeline order.
    pub(super) split: Vec<(String, f64)>,
    /// `(seconds since the start, images so far)` after each batch (`--html`'s throughput
    /// over time).
    pub(super) timeline: Vec<(f64, usize)>,
    /// Seconds the consumer waited for the next batch.
    wait: f64,
    /// Seconds the consumer spent in its stand-in step (`--step-ms`).
    step: f64,
    /// Ctrl-C stopped the run: the figures cover the part that ran.
    interrupted: bool,
    /// The data is a converted (shards) dataset: advice to convert it does not apply.
    converted: bool,
    /// Seconds from opening the data to the first batch (`None`: no batch came).
    pub(super) first_batch: Option<f64>,
}

impl Measured {
    pub(super) fn images_per_s(&self) -> f64 {
        self.images as f64 / self.wall.max(1e-9)
    }
    fn mb_in_per_s(&self) -> f64 {
        self.bytes_in as f64 / 1e6 / self.wall.max(1e-9)
    }
    fn mb_out_per_s(&self) -> f64 {
        self.out_bytes as f64 / 1e6 / self.wall.max(1e-9)
    }
    pub(super) fn cpu_ms_per_image(&self) -> f64 {
        self.cpu * 1e3 / (self.images.max(1) as f64)
    }
    fn share(&self, stage: &str) -> f64 {
        self.split
            .iter()
            .filter(|(s, _)| s == stage)
            .map(|(_, f)| *f)
            .sum()
    }
}

/// What limits a run.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Verdict {
    /// `decode`, `io`, `consumer` or `stage:<name>`.
    pub(super) bound: String,
    /// What the measurements say.
    pub(super) finding: String,
    /// The one change that would help most.
    pub(super) advice: String,
}

fn pct(f: f64) -> String {
    format!("{:.0}%", f * 100.0)
}

/// The verdict from a run's own figures on a machine with `cores` cores.
fn verdict(m: &Measured, cores: usize) -> Verdict {
    let busy = m.cpu / m.wall.max(1e-9);
    let waited = m.wait / m.wall.max(1e-9);
    if m.step > 0.0 && waited < 0.10 {
        return Verdict {
            bound: "consumer".into(),
            finding: format!(
                "consumer-bound: the consumer waited for a batch only {} of the time (its \
                 step took {}); the loader is ahead and its queue stays full",
                pct(waited),
                pct(m.step / m.wall.max(1e-9))
            ),
            advice: "the trainer's step is the bottleneck: more loader workers will not help \
                     (use fewer, and give the cores to the trainer)"
                .into(),
        };
    }
    let per_worker = m.images_per_s() / m.workers.max(1) as f64;
    let read = m.share("read");
    let decode = m.share("decode");
    if read >= 0.4 && read >= decode {
        return Verdict {
            bound: "io".into(),
            finding: format!(
                "I/O-bound: reading takes {} of the workers' time, at {:.1} MB/s from the \
                 device ({:.1} cores busy of {} workers)",
                pct(read),
                m.mb_in_per_s(),
                busy,
                m.workers
            ),
            advice: if m.converted {
                "read less: these shards are read already; `--store jpeg` with \
                 pipelines/convert_jpeg256.toml stores a third of raw's bytes, or move the \
                 data to a faster disk; more workers overlap more reads"
                    .into()
            } else {
                "read less and more sequentially: `imgfeed convert --format shards` \
                 (one memory-mapped file per GB; `--store jpeg` with \
                 pipelines/convert_jpeg256.toml stores a third of the bytes), or move the \
                 data to a faster disk; more workers overlap more reads"
                    .into()
            },
        };
    }
    let more = m.workers < cores;
    // The workers could use min(workers, cores) cores; far fewer busy means something else
    // had them (another process) or the run was too short to fill them: "every core is
    // busy" would contradict the figure beside it.
    let usable = m.workers.min(cores) as f64;
    let starved = !more && busy < 0.75 * usable;
    let starved_advice = || {
        format!(
            "the {} workers kept only {busy:.1} of this machine's {cores} cores busy: other \
             processes had the rest, or the run was too short to fill them; measure on an \
             idle machine (and a longer run: --epochs) before changing the pipeline",
            m.workers
        )
    };
    if decode >= 0.4 {
        let advice = if starved {
            starved_advice()
        } else if m.converted {
            "every core decodes: these shards store encoded images; converting with \
             `--store raw` (no decode when read) or from images resized to 256 \
             (pipelines/convert_jpeg256.toml) decodes less"
                .into()
        } else if more {
            format!(
                "more workers: this machine has {cores} cores and the run used {}; each \
                 worker adds about {per_worker:.0} images/s until the cores are busy \
                 (`--sweep-workers` shows it)",
                m.workers
            )
        } else {
            "every core decodes: decode less — `imgfeed convert --format shards --store raw` \
             (no decode when read) or `--store jpeg` of images resized to 256 \
             (pipelines/convert_jpeg256.toml)"
                .into()
        };
        return Verdict {
            bound: "decode".into(),
            finding: format!(
                "decode-bound: decoding takes {} of the workers' time; {per_worker:.0} \
                 images/s per worker ({} workers, {busy:.1} cores busy)",
                pct(decode),
                m.workers
            ),
            advice,
        };
    }
    let (stage, share) = m
        .split
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(("write".to_string(), 0.0), |(s, f)| (s.clone(), *f));
    Verdict {
        bound: format!("stage:{stage}"),
        finding: format!(
            "compute-bound: {stage} takes the largest share of the workers' time ({}); \
             {per_worker:.0} images/s per worker",
            pct(share)
        ),
        advice: if more {
            format!(
                "more workers: this machine has {cores} cores and the run used {}",
                m.workers
            )
        } else if starved {
            starved_advice()
        } else if m.converted {
            format!(
                "every core is busy: make {stage} cheaper (the data is converted already: \
                 {stage} is per-epoch work; a conversion whose pipeline does it, e.g. resizing \
                 as pipelines/convert_raw256.toml, leaves less of it)"
            )
        } else {
            format!("every core is busy: make {stage} cheaper (or store its result: convert)")
        },
    }
}

/// Run the pipeline of `c` (with `workers` when given) for the epochs asked, timing the
/// consumer's waits. Ctrl-C ends it early with the figures of what ran (marked
/// `interrupted`); `None` when it came before the first batch.
fn measure(
    c: &Common,
    workers: Option<usize>,
    o: &BenchOpts,
    bad: &mut Reporter,
    header: bool,
) -> Result<(Pipeline, Option<Measured>)> {
    let mut cfg = c.config()?;
    cfg.engine.profile = o.profile;
    if let Some(w) = workers {
        cfg.engine.workers = w;
    }
    let opened = Instant::now();
    let p = Pipeline::new(cfg)?;
    super::warn(&p, false);
    if let Some(w) = super::resume_warning(c, &p) {
        eprintln!("warning: {w}");
    }
    if let Some(w) = p.empty_epoch_warning() {
        let e = imgfeed::error::Invalid::NothingToMeasure(w);
        return Err(imgfeed::Error::from(e).into());
    }
    if header {
        print_header(&p);
    }
    let step = o
        .step_ms
        .map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1e3));
    let (cpu0, _) = rusage();
    let t0 = Instant::now();
    let (mut images, mut batches, mut out_bytes) = (0usize, 0usize, 0usize);
    let (mut wait, mut stepped) = (Duration::ZERO, Duration::ZERO);
    let mut times = imgfeed::StageTimes::default();
    let mut timeline = Vec::new();
    let mut first_batch = None;
    let range = epoch_range(c, &p, o.epochs)?;
    let bar = progress(super::run_images(c, &p, &range), "images");
    for e in range.clone() {
        bar.set_prefix(super::epoch_label(e, &range));
        let mut epoch = open_epoch(c, &p, e)?;
        loop {
            if interrupt::requested() {
                break;
            }
            let w0 = Instant::now();
            let Some(batch) = epoch.next() else { break };
            wait += w0.elapsed();
            let batch = batch?;
            first_batch.get_or_insert_with(|| opened.elapsed().as_secs_f64());
            for err in batch.skipped() {
                bar.suspend(|| bad.add(err, Some(e)))?;
            }
            images += batch.len();
            out_bytes += batch.image_bytes().len();
            batches += 1;
            if o.html.is_some() {
                timeline.push((t0.elapsed().as_secs_f64(), images));
            }
            bar.inc(batch.len() as u64);
            if let Some(d) = step {
                let s0 = Instant::now();
                std::thread::sleep(d);
                stepped += s0.elapsed();
            }
        }
        for err in epoch.dropped_tail_errors() {
            bar.suspend(|| bad.add(&err, Some(e)))?;
        }
        times.merge(&epoch.finish());
        if interrupt::requested() {
            break;
        }
    }
    bar.finish_and_clear();
    let wall = t0.elapsed().as_secs_f64();
    let interrupted = interrupt::requested();
    if interrupted {
        eprintln!(
            "interrupted after {batches} batches ({images} images, {wall:.3} s){}",
            if batches == 0 {
                ": no figures"
            } else {
                ": the figures below are partial, of that part of the run"
            }
        );
        if batches == 0 {
            return Ok((p, None));
        }
    }
    let (cpu1, peak_rss) = rusage();
    let total_ns: u64 = times.stages.iter().map(|s| s.1).sum();
    let split = times
        .stages
        .iter()
        .map(|(s, ns)| (s.to_string(), *ns as f64 / total_ns.max(1) as f64))
        .collect();
    let m = Measured {
        workers: p.config().engine.workers,
        images,
        batches,
        wall,
        cpu: cpu1 - cpu0,
        peak_rss,
        bytes_in: times.bytes_in,
        out_bytes,
        split,
        timeline,
        wait: wait.as_secs_f64(),
        step: stepped.as_secs_f64(),
        interrupted,
        converted: p.source().describe().starts_with("shards "),
        first_batch,
    };
    Ok((p, Some(m)))
}

/// The JPEG decoder the pipeline's `decode` runs (none without a decode op).
fn jpeg(p: &Pipeline) -> Option<String> {
    p.config().ops.iter().find_map(|o| match o {
        imgfeed::ops::Op::Decode(d) => Some(d.decoder.describe()),
        _ => None,
    })
}

/// What is measured, printed before the run (and its progress bar).
fn print_header(p: &Pipeline) {
    println!("{}", p.source().describe());
    if p.source().per_object() {
        println!(
            "store        an image tree in object storage: one request per image, slower by \
             nature than shards (a few large files, fetched whole and cached); convert it once \
             with `imgfeed convert PIPELINE --format shards --out s3://...` and read that"
        );
    }
    println!("workers      {}", p.config().engine.workers);
    if let Some(j) = jpeg(p) {
        println!("jpeg decoder {j}");
    }
}

fn round(x: f64, digits: i32) -> f64 {
    let k = 10f64.powi(digits);
    (x * k).round() / k
}

fn to_json(c: &Common, p: &Pipeline, m: &Measured, v: &Verdict) -> serde_json::Value {
    let split: serde_json::Map<String, serde_json::Value> = m
        .split
        .iter()
        .map(|(s, f)| (s.clone(), serde_json::json!(round(*f, 3))))
        .collect();
    serde_json::json!({
        "what": "imgfeed-bench",
        "pipeline": c.pipeline.display().to_string(),
        "jpeg_decoder": jpeg(p),
        "workers": m.workers,
        "cores": cores(),
        "images": m.images,
        "batches": m.batches,
        "wall_s": round(m.wall, 3),
        "cpu_s": round(m.cpu, 3),
        "cpu_ms_per_image": round(m.cpu_ms_per_image(), 4),
        "images_per_s": round(m.images_per_s(), 1),
        "images_per_s_per_worker": round(m.images_per_s() / m.workers.max(1) as f64, 1),
        "mb_in_per_s": round(m.mb_in_per_s(), 1),
        "mb_out_per_s": round(m.mb_out_per_s(), 1),
        "peak_rss_mb": round(m.peak_rss as f64 / 1e6, 1),
        "consumer_wait_s": round(m.wait, 3),
        "consumer_step_s": round(m.step, 3),
        "first_batch_s": m.first_batch.map(|f| round(f, 3)),
        "stage_split": split,
        "verdict": {"bound": v.bound, "finding": v.finding, "advice": v.advice},
        "partial": m.interrupted,
        "caution": caution(m),
    })
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs shorter than this, or with fewer images, measure start-up more than throughput.
const MIN_WALL_S: f64 = 1.0;
const MIN_IMAGES: usize = 500;

/// A word of caution when the run was too short to measure throughput, else `None`.
fn caution(m: &Measured) -> Option<String> {
    (m.wall < MIN_WALL_S || m.images < MIN_IMAGES).then(|| {
        format!(
            "only {} images in {:.2} s: too little to measure (start-up and the last \
             batches weigh on every figure); use at least {MIN_IMAGES} images and \
             {MIN_WALL_S:.0} s (more data, or --epochs)",
            m.images, m.wall
        )
    })
}

fn print_table(p: &Pipeline, m: &Measured, v: &Verdict) {
    if m.interrupted {
        println!("PARTIAL      interrupted: these figures cover the part of the run that ran");
    }
    println!("images       {} in {} batches", m.images, m.batches);
    println!("wall         {:.3} s", m.wall);
    println!(
        "cpu          {:.3} s ({:.2} cores busy), {:.2} ms per image",
        m.cpu,
        m.cpu / m.wall.max(1e-9),
        m.cpu_ms_per_image()
    );
    println!("throughput   {:.0} images/s", m.images_per_s());
    println!("input        {:.1} MB/s read", m.mb_in_per_s());
    println!(
        "output       {:.1} MB/s written to batches",
        m.mb_out_per_s()
    );
    println!("peak RSS     {:.1} MB", m.peak_rss as f64 / 1e6);
    if let Some(f) = m.first_batch {
        println!("first batch  {f:.3} s after opening the data (opening included)");
    }
    let store = imgfeed::store::snapshot();
    if !store.is_empty() {
        println!(
            "store        {} ({:.1} MB/s, {:.0} requests/s over the run)",
            store,
            store.bytes as f64 / 1e6 / m.wall.max(1e-9),
            store.requests as f64 / m.wall.max(1e-9)
        );
        // Worker time spent waiting for shard files: the store's share of the run.
        let share = store.waited_ns as f64 / 1e9 / (m.workers.max(1) as f64 * m.wall).max(1e-9);
        let tree = p.source().per_object();
        if share > 0.1 {
            let per = m.images.max(1) as f64;
            let help = if tree {
                "one request per image: shards need a few".to_string()
            } else if store.refetched > 0 {
                format!(
                    "{} files came again after eviction: a larger --cache-size would keep them",
                    store.refetched
                )
            } else {
                "a faster link, a warm --cache-dir or larger shards would help".to_string()
            };
            println!(
                "store        the store is the bottleneck: reads waited for it {:.0}% of the \
                 workers' time; {:.1} kB and {:.2} requests per image; {help}",
                share * 100.0,
                store.bytes as f64 / 1e3 / per,
                store.requests as f64 / per,
            );
        }
    }
    if m.step > 0.0 {
        println!(
            "consumer     waited {:.3} s for batches, stepped {:.3} s",
            m.wait, m.step
        );
    }
    if !m.split.is_empty() {
        println!("time per stage (share of worker time):");
        for (s, f) in &m.split {
            println!("  {s:<14} {:5.1}%", f * 100.0);
        }
    }
    println!("verdict      {}", v.finding);
    println!("advice       {}", v.advice);
    if let Some(c) = caution(m) {
        println!("caution      {c}");
    }
}

pub fn bench(c: &Common, o: &BenchOpts) -> Result<i32> {
    let mut bad = Reporter::new(o.report.as_deref())?;
    let counts: Vec<Option<usize>> = match &o.sweep {
        Some(ws) => ws.iter().map(|&w| Some(w)).collect(),
        None => vec![None],
    };
    if let (Some(ws), false) = (&o.sweep, o.json) {
        let p = c.pipeline()?;
        println!("{}", p.source().describe());
        println!("workers      {ws:?}, one run each");
        if let Some(j) = jpeg(&p) {
            println!("jpeg decoder {j}");
        }
    }
    let mut runs = Vec::new();
    for &w in &counts {
        let header = !o.json && o.sweep.is_none();
        let (p, m) = measure(c, w, o, &mut bad, header)?;
        let Some(m) = m else {
            bad.finish()?;
            bad.print(super::bad_verb(&p));
            return Ok(interrupt::EXIT);
        };
        let v = verdict(&m, cores());
        // A sweep prints its table at the end, or now if Ctrl-C cut it short.
        if o.sweep.is_none() || m.interrupted {
            if o.json {
                println!("{}", to_json(c, &p, &m, &v));
            } else {
                print_table(&p, &m, &v);
            }
        }
        if m.interrupted {
            bad.finish()?;
            bad.print(super::bad_verb(&p));
            return Ok(interrupt::EXIT);
        }
        runs.push((p, m, v));
    }
    bad.finish()?;
    if let Some((p, _, _)) = runs.first() {
        bad.print(super::bad_verb(p));
    }
    if o.sweep.is_some() {
        if o.json {
            let all: Vec<_> = runs.iter().map(|(p, m, v)| to_json(c, p, m, v)).collect();
            println!(
                "{}",
                serde_json::json!({"what": "imgfeed-bench-sweep", "runs": all})
            );
        } else {
            println!("workers  images/s  per worker  cpu ms/image  cores busy  bound");
            for (_, m, v) in &runs {
                println!(
                    "{:>7}  {:>8.0}  {:>10.0}  {:>12.2}  {:>10.2}  {}",
                    m.workers,
                    m.images_per_s(),
                    m.images_per_s() / m.workers.max(1) as f64,
                    m.cpu_ms_per_image(),
                    m.cpu / m.wall.max(1e-9),
                    v.bound
                );
            }
            if let Some((_, _, v)) = runs.last() {
                println!("verdict (most workers) {}", v.finding);
                println!("advice  {}", v.advice);
            }
        }
        if let Some(path) = &o.plot {
            let points: Vec<plot::Point> = runs
                .iter()
                .map(|(_, m, _)| plot::Point {
                    workers: m.workers,
                    images_per_s: m.images_per_s(),
                    cpu_ms_per_image: m.cpu_ms_per_image(),
                })
                .collect();
            let data = runs
                .first()
                .map(|(p, _, _)| p.config().source.root().display().to_string())
                .unwrap_or_default();
            let title = format!("imgfeed bench {} on {data}", c.pipeline.display());
            std::fs::write(path, plot::svg(&title, &points))
                .map_err(|e| anyhow::anyhow!("--plot {}: {e}", path.display()))?;
            if !o.json {
                println!("plot         {}", path.display());
            }
        }
    }
    if let Some(path) = &o.html {
        let data = runs
            .first()
            .map(|(p, _, _)| p.source().describe())
            .unwrap_or_default();
        let title = format!("imgfeed bench {}: {data}", c.pipeline.display());
        let measured: Vec<(&Measured, &Verdict)> = runs.iter().map(|(_, m, v)| (m, v)).collect();
        std::fs::write(path, super::bench_html::page(&title, &measured)).map_err(|source| {
            imgfeed::Error::Io {
                path: path.clone(),
                source,
            }
        })?;
        if !o.json {
            println!("page         {}", path.display());
        }
    }
    // One rule for every command: bad samples (skipped or replaced) exit 1.
    Ok(if bad.bad.is_empty() { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(split: &[(&str, f64)], workers: usize, wait: f64, step: f64) -> Measured {
        Measured {
            workers,
            images: 1000,
            batches: 32,
            wall: 1.0,
            cpu: workers as f64 * 0.95,
            peak_rss: 0,
            bytes_in: 100_000_000,
            out_bytes: 0,
            split: split.iter().map(|(s, f)| (s.to_string(), *f)).collect(),
            timeline: Vec::new(),
            wait,
            step,
            interrupted: false,
            first_batch: None,
            converted: false,
        }
    }

    #[test]
    fn a_verdict_does_not_contradict_its_figures() {
        // 2 workers on 2 cores, but only 0.8 cores busy (another process had the rest)
        let mut decode = run(
            &[("read", 0.05), ("decode", 0.7), ("write", 0.25)],
            2,
            0.9,
            0.0,
        );
        decode.cpu = 0.8;
        let v = verdict(&decode, 2);
        assert_eq!(v.bound, "decode");
        assert!(!v.advice.contains("every core"), "{v:?}");
        assert!(
            v.advice.contains("only 0.8 of this machine's 2 cores busy"),
            "{v:?}"
        );
        let mut resize = run(
            &[("decode", 0.1), ("resize", 0.7), ("write", 0.2)],
            2,
            0.9,
            0.0,
        );
        resize.cpu = 0.8;
        let v = verdict(&resize, 2);
        assert!(!v.advice.contains("every core"), "{v:?}");
        // data converted already: no advice to convert it
        let mut raw = run(
            &[("decode", 0.0), ("resize", 0.7), ("write", 0.3)],
            2,
            0.9,
            0.0,
        );
        raw.converted = true;
        let v = verdict(&raw, 2);
        assert!(v.advice.contains("every core is busy"), "{v:?}");
        assert!(!v.advice.contains("store its result: convert"), "{v:?}");
        raw.split = vec![("read".into(), 0.6), ("write".into(), 0.4)];
        let v = verdict(&raw, 2);
        assert_eq!(v.bound, "io");
        assert!(!v.advice.contains("convert --format shards"), "{v:?}");
    }

    #[test]
    fn the_verdict_names_what_limits_the_run() {
        let decode = run(
            &[("read", 0.05), ("decode", 0.7), ("write", 0.25)],
            2,
            0.9,
            0.0,
        );
        let v = verdict(&decode, 8);
        assert_eq!(v.bound, "decode");
        assert!(v.finding.contains("500 images/s per worker"), "{v:?}");
        assert!(v.advice.contains("more workers"), "{v:?}");
        let v = verdict(&decode, 2);
        assert!(v.advice.contains("--store raw"), "{v:?}");
        let io = run(
            &[("read", 0.6), ("decode", 0.3), ("write", 0.1)],
            2,
            0.9,
            0.0,
        );
        let v = verdict(&io, 2);
        assert_eq!(v.bound, "io");
        assert!(v.finding.contains("100.0 MB/s"), "{v:?}");
        let consumer = run(&[("decode", 0.7)], 2, 0.02, 0.95);
        assert_eq!(verdict(&consumer, 2).bound, "consumer");
        let resize = run(
            &[("read", 0.1), ("decode", 0.2), ("resize", 0.6)],
            2,
            0.9,
            0.0,
        );
        assert_eq!(verdict(&resize, 2).bound, "stage:resize");
    }
}
