//! `imgfeed preview PIPELINE --out FILE`: the first samples of an epoch as the pipeline
//! hands them to the trainer, turned back into pictures, on a contact sheet (`.png`) or a
//! page (`.html`, what the pipeline did on hover). The library's `imgfeed::preview` does
//! the work; this file reads the flags and writes the file.

use super::Common;
use anyhow::Result;
use imgfeed::preview::{html, preview, sheet, PreviewOptions};
use std::path::Path;

pub fn run(c: &Common, opts: &PreviewOptions, out: &Path) -> Result<i32> {
    let p = c.pipeline()?;
    super::warn(&p, true);
    p.last_epoch(c.start_epoch);
    let epoch = c.open_start(&p)?;
    let t0 = std::time::Instant::now();
    let shown = preview(&p, epoch, opts)?;
    let page = out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"));
    let bytes = if page {
        let title = format!(
            "imgfeed preview: {} (epoch {}, from batch {})",
            c.pipeline.display(),
            c.start_epoch,
            c.start_batch
        );
        html::page(&shown, &title)?.into_bytes()
    } else {
        sheet::sheet(&shown).png()?
    };
    std::fs::write(out, bytes).map_err(|source| imgfeed::Error::Io {
        path: out.to_path_buf(),
        source,
    })?;
    if shown.tiles.is_empty() {
        eprintln!(
            "warning: the epoch yields no sample from there (fewer samples than the batch size \
             with drop_remainder? --batch-size N shows them)"
        );
    }
    for n in &shown.notes {
        println!("note: {n}");
    }
    for b in &shown.bad {
        eprintln!("{} {b}", super::bad_verb(&p));
    }
    println!(
        "wrote {} of epoch {} to {} in {:.2} s",
        imgfeed::spec::count(shown.tiles.len() as u64, "sample", "samples"),
        c.start_epoch,
        out.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(if shown.bad.is_empty() { 0 } else { 1 })
}
