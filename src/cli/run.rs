//! `imgfeed run`: iterate epochs and print what came out, with a digest of every byte so
//! that two runs (say, with different worker counts) can be compared.
//!
//! The digest is FNV-1a 64 folded, batch after batch, over each sample's fingerprint
//! ([`imgfeed::engine::fingerprint`], computed by the workers while the sample is in
//! their cache) and then over the fingerprint of the batch's label bytes.

use super::report::Reporter;
use super::{epoch_label, epoch_range, interrupt, open_epoch, progress, run_images, Common};
use anyhow::Result;
use imgfeed::engine::fingerprint::{fingerprint, fold, OFFSET64};
use imgfeed::Pipeline;
use std::path::Path;
use std::time::Instant;

pub fn run(
    c: &Common,
    epochs: Option<u64>,
    max_batches: Option<usize>,
    report: Option<&Path>,
) -> Result<i32> {
    let mut cfg = c.config()?;
    cfg.engine.fingerprint = true;
    // Time to the first batch counts opening the data (a store's listing, manifest, index).
    let opened = Instant::now();
    let p = Pipeline::new(cfg)?;
    super::warn(&p, true);
    if let Some(w) = super::resume_warning(c, &p) {
        eprintln!("warning: {w}");
    }
    let mut bad = Reporter::new(report)?;
    println!("{}", p.source().describe());
    if let Some(note) = super::dropped_note(&p) {
        println!("{note}");
    }
    let mut left = max_batches.unwrap_or(usize::MAX);
    let range = epoch_range(c, &p, epochs)?;
    let last = range.end - 1;
    let bar = progress(run_images(c, &p, &range), "images");
    // Opening a remote dataset fetched its manifest, index and names: counted in epoch 0.
    let mut traffic = imgfeed::store::Traffic::default();
    let mut first_batch: Option<f64> = None;
    for e in range.clone() {
        bar.set_prefix(epoch_label(e, &range));
        let t0 = Instant::now();
        let mut samples = 0usize;
        let mut batches = 0usize;
        let mut digest = OFFSET64;
        let mut shape = [0usize; 4];
        let mut label_sum = 0f64;
        let mut epoch = open_epoch(c, &p, e)?;
        while left > 0 {
            if interrupt::requested() {
                break; // dropping the epoch stops its workers
            }
            let Some(batch) = epoch.next() else { break };
            left -= 1;
            let batch = batch?;
            first_batch.get_or_insert_with(|| opened.elapsed().as_secs_f64());
            for err in batch.skipped() {
                bar.suspend(|| bad.add(err, Some(e)))?;
            }
            for &f in batch.fingerprints().unwrap_or_default() {
                digest = fold(digest, f);
            }
            digest = fold(digest, fingerprint(batch.label_bytes()));
            for i in 0..batch.len() * batch.label_columns() {
                label_sum += batch.labels().value(i).unwrap_or(0.0);
            }
            if batches == 0 {
                shape = batch.shape();
            }
            samples += batch.len();
            batches += 1;
            bar.inc(batch.len() as u64);
        }
        // Out of batches (--max-batches): where to resume, unless the epoch had no batch
        // left (with skipped samples it may end before `batches_per_epoch`: only asking
        // for the next batch tells).
        let stopped = if left == 0 && !interrupt::requested() {
            let s = epoch.state();
            (s.batch < p.batches_per_epoch() && epoch.next().is_some()).then_some(s)
        } else {
            None
        };
        for err in epoch.dropped_tail_errors() {
            bar.suspend(|| bad.add(&err, Some(e)))?;
        }
        let secs = t0.elapsed().as_secs_f64();
        if interrupt::requested() {
            bar.finish_and_clear();
            bad.finish()?;
            bad.print(super::bad_verb(&p));
            let s = epoch.state();
            eprintln!(
                "interrupted in epoch {e} after {batches} batches ({samples} samples, {secs:.3} s): \
                 resume with {}",
                super::resume_flags(&p, s, epoch.worlds())
            );
            return Ok(interrupt::EXIT);
        }
        let spec = p.output_spec();
        if batches == 0 {
            // no batch: the shape of one with no sample
            let d = spec.dims();
            shape = [0, d[0].unwrap_or(0), d[1].unwrap_or(0), d[2].unwrap_or(0)];
        }
        // Class indices sum to a whole number; soft labels to about one per sample.
        let label_sum = match spec.label {
            imgfeed::LabelType::F32 => format!("{label_sum:.3}"),
            _ => format!("{}", label_sum as i64),
        };
        let mut lines = vec![format!(
            "epoch {e}: {batches} batches, {samples} samples; images {} {:?}, labels {} (sum {label_sum}); digest {digest:016x}; {secs:.3} s, {:.1} images/s",
            spec.dtype.name(),
            shape,
            spec.label.name(),
            samples as f64 / secs.max(1e-9)
        )];
        if let Some(f) = first_batch.filter(|_| e == range.start) {
            lines.push(format!(
                "first batch {f:.3} s after opening the data (opening included)"
            ));
        }
        let now = imgfeed::store::snapshot();
        let moved = now.since(&traffic);
        traffic = now;
        if !moved.is_empty() {
            lines.push(format!("epoch {e}: {moved}"));
        }
        let stop = if let Some(s) = stopped {
            lines.push(format!(
                "stopped at epoch {} batch {}: resume with {}",
                s.epoch,
                s.batch,
                super::resume_flags(&p, s, epoch.worlds())
            ));
            true
        } else if left == 0 && e < last {
            lines.push(format!(
                "stopped after epoch {e}: resume with --start-epoch {} --start-batch 0",
                e + 1
            ));
            true
        } else {
            false
        };
        // the summary goes above the progress bar
        bar.suspend(|| lines.iter().for_each(|l| println!("{l}")));
        if stop {
            break;
        }
    }
    bar.finish_and_clear();
    bad.finish()?;
    bad.print(super::bad_verb(&p));
    // One rule for every command: bad samples (skipped or replaced) exit 1.
    Ok(if bad.bad.is_empty() { 0 } else { 1 })
}
