//! A run's span and progress: the epochs it makes (from `--start-epoch` to `--epochs`),
//! where its first epoch starts, the images it yields, its progress bar and the flags that
//! resume it.

use super::Common;
use imgfeed::error::Invalid;
use imgfeed::Pipeline;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub(super) fn skipping(p: &Pipeline) -> bool {
    p.config().engine.on_error == imgfeed::OnError::Skip
}

/// A resume at `--start-batch` > 0 without `--start-sample` while bad samples are skipped:
/// it starts at `batch × batch_size`, which is not where the stopped run's batch started if
/// it skipped samples before it (the hint names `--start-sample` for that).
pub(super) fn resume_warning(c: &Common, p: &Pipeline) -> Option<String> {
    (skipping(p) && c.start_batch > 0 && c.start_sample.is_none()).then(|| {
        format!(
            "--start-batch {} without --start-sample, with bad samples skipped: this starts at \
             sample {} (batch × batch size), but where the stopped run skipped samples before \
             that batch, it started later and this gives another stream; pass the \
             --start-sample of the stopped run's resume hint",
            c.start_batch,
            c.start_batch * p.config().batch.size
        )
    })
}

/// The epochs a run makes: from `--start-epoch` up to `--epochs` (or `source.num_epochs`);
/// the pipeline is told the last ([`Pipeline::last_epoch`]).
pub(super) fn epoch_range(
    c: &Common,
    p: &Pipeline,
    epochs: Option<u64>,
) -> imgfeed::Result<std::ops::Range<u64>> {
    if epochs == Some(0) {
        let setting = "--epochs";
        return Err(Invalid::TooSmall { setting, min: 1 }.into());
    }
    let end = epochs.unwrap_or(p.config().source.sampling.num_epochs);
    if c.start_epoch >= end {
        let start = c.start_epoch;
        return Err(Invalid::StartEpoch { start, end }.into());
    }
    // No epoch past the run's is read: nothing is kept in the cache for one.
    p.last_epoch(end - 1);
    Ok(c.start_epoch..end)
}

/// Epoch `e` of a run: the first one starts where `--start-batch` says.
pub(super) fn open_epoch(c: &Common, p: &Pipeline, e: u64) -> imgfeed::Result<imgfeed::Epoch> {
    if e == c.start_epoch {
        c.open_start(p)
    } else {
        Ok(p.epoch(e))
    }
}

/// A progress bar on stderr (drawn only on a terminal) over a whole run: its prefix (set
/// per epoch, [`epoch_label`]), the count of `what`, its rate rounded, and the run's ETA.
pub(super) fn progress(len: u64, what: &'static str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let rate = move |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
        let _ = write!(w, "{:.0} {what}/s", s.per_sec());
    };
    if let Ok(style) = ProgressStyle::with_template(&format!(
        "{{prefix}}{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {what} ({{rate}}, eta {{eta}})"
    )) {
        bar.set_style(style.with_key("rate", rate).progress_chars("=> "));
    }
    bar
}

/// The progress bar's prefix in epoch `e` of a run over `range`, counted as the summaries
/// and `--start-epoch` count (from 0): `epoch 3 of 0-19 `.
pub(super) fn epoch_label(e: u64, range: &std::ops::Range<u64>) -> String {
    format!(
        "epoch {e} of {}-{} ",
        range.start,
        range.end.saturating_sub(1)
    )
}

/// The images a run over `range` yields (barring skipped samples): each epoch's batches ×
/// the batch size (the last one short unless dropped), less the batches `--start-batch`
/// skips in the first.
pub(super) fn run_images(c: &Common, p: &Pipeline, range: &std::ops::Range<u64>) -> u64 {
    let bs = p.config().batch.size as u64;
    let per_epoch = (p.samples_per_epoch() as u64).min(p.batches_per_epoch() as u64 * bs);
    let skipped = (c.start_batch as u64 * bs).min(per_epoch);
    (per_epoch * (range.end - range.start)).saturating_sub(skipped)
}
