//! `imgfeed bench`: throughput of a pipeline on real data, with what it cost.

use super::report::Reporter;
use super::{epoch_range, interrupt, open_epoch, progress, Common};
use anyhow::Result;
use std::path::Path;
use std::time::Instant;

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

pub fn bench(
    c: &Common,
    epochs: Option<u64>,
    json: bool,
    profile: bool,
    report: Option<&Path>,
) -> Result<i32> {
    let mut bad = Reporter::new(report)?;
    let mut cfg = c.config()?;
    cfg.engine.profile = profile;
    let p = imgfeed::Pipeline::new(cfg)?;
    super::warn(&p, false);
    if let Some(w) = super::no_batch(&p) {
        return Err(imgfeed::Error::Invalid(format!("nothing to measure: {w}")).into());
    }
    let (cpu0, _) = rusage();
    let t0 = Instant::now();
    let mut images = 0usize;
    let mut batches = 0usize;
    let mut out_bytes = 0usize;
    let mut times = imgfeed::StageTimes::default();
    for e in epoch_range(c, &p, epochs)? {
        let bar = progress(p.batches_per_epoch() as u64, "batches");
        let mut epoch = open_epoch(c, &p, e)?;
        for batch in &mut epoch {
            if interrupt::requested() {
                break;
            }
            let batch = batch?;
            for err in batch.skipped() {
                bar.suspend(|| bad.add(err))?;
            }
            images += batch.len();
            out_bytes += batch.image_bytes().len();
            batches += 1;
            bar.inc(1);
        }
        for err in epoch.dropped_tail_errors() {
            bar.suspend(|| bad.add(&err))?;
        }
        bar.finish_and_clear();
        times.merge(&epoch.finish());
        if interrupt::requested() {
            break;
        }
    }
    bad.finish()?;
    bad.print(super::bad_verb(&p));
    if interrupt::requested() {
        eprintln!(
            "interrupted after {batches} batches ({images} images, {:.3} s): no figures",
            t0.elapsed().as_secs_f64()
        );
        return Ok(interrupt::EXIT);
    }
    let wall = t0.elapsed().as_secs_f64();
    let (cpu1, peak_rss) = rusage();
    let cpu = cpu1 - cpu0;
    let total_ns: u64 = times.stages.iter().map(|s| s.1).sum();
    let split: Vec<(String, f64)> = times
        .stages
        .iter()
        .map(|(s, ns)| (s.to_string(), *ns as f64 / total_ns.max(1) as f64))
        .collect();
    let ips = images as f64 / wall.max(1e-9);
    let mb_in = times.bytes_in as f64 / 1e6 / wall.max(1e-9);
    let mb_out = out_bytes as f64 / 1e6 / wall.max(1e-9);
    let cfg = p.config();
    // The JPEG decoder the pipeline's `decode` runs (none without a decode op).
    let jpeg = cfg.ops.iter().find_map(|o| match o {
        imgfeed::ops::Op::Decode(d) => Some(d.decoder.describe()),
        _ => None,
    });
    if json {
        let v = serde_json::json!({
            "what": "imgfeed-bench",
            "pipeline": c.pipeline.display().to_string(),
            "jpeg_decoder": jpeg,
            "workers": cfg.engine.workers,
            "images": images,
            "batches": batches,
            "wall_s": (wall * 1000.0).round() / 1000.0,
            "cpu_s": (cpu * 1000.0).round() / 1000.0,
            "images_per_s": (ips * 10.0).round() / 10.0,
            "mb_in_per_s": (mb_in * 10.0).round() / 10.0,
            "mb_out_per_s": (mb_out * 10.0).round() / 10.0,
            "peak_rss_mb": (peak_rss as f64 / 1e6 * 10.0).round() / 10.0,
            "stage_split": split.iter().map(|(s, f)| (s.clone(), serde_json::json!((f * 1000.0).round() / 1000.0))).collect::<serde_json::Map<String, serde_json::Value>>(),
        });
        println!("{v}");
    } else {
        println!("{}", p.source().describe());
        println!("workers      {}", cfg.engine.workers);
        if let Some(j) = &jpeg {
            println!("jpeg decoder {j}");
        }
        println!("images       {images} in {batches} batches");
        println!("wall         {wall:.3} s");
        println!(
            "cpu          {cpu:.3} s ({:.2} cores busy)",
            cpu / wall.max(1e-9)
        );
        println!("throughput   {ips:.1} images/s");
        println!("input        {mb_in:.1} MB/s read");
        println!("output       {mb_out:.1} MB/s written to batches");
        println!("peak RSS     {:.1} MB", peak_rss as f64 / 1e6);
        if !split.is_empty() {
            println!("time per stage (share of worker time):");
            for (s, f) in &split {
                println!("  {s:<14} {:5.1}%", f * 100.0);
            }
        }
    }
    // One rule for every command: bad samples (skipped or replaced) exit 1.
    Ok(if bad.bad.is_empty() { 0 } else { 1 })
}
