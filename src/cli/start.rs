//! Where a resumed run starts when the resume flags give a global position
//! (`--start-position` with `--start-world`): the job state they stand for, and the hint an
//! interrupted run prints, which resumes it on any `--num-shards`.

use super::Common;
use imgfeed::pipeline::JobState;
use imgfeed::resume::{World, STATE_VERSION};
use imgfeed::{Pipeline, State};

/// One world of `--start-world`: `N` (N ranks from the epoch's start) or `N@P:K` (N ranks
/// from global position P, their first batch numbered K).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WorldFlag {
    num_shards: usize,
    from: usize,
    batch: usize,
}

/// `--start-world`'s value: the worlds of the epoch so far, the first one from its start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Worlds(pub(super) Vec<WorldFlag>);

/// Parse `--start-world`.
pub(super) fn parse_worlds(s: &str) -> Result<Worlds, String> {
    let mut worlds = Vec::new();
    for (i, item) in s.split(',').enumerate() {
        let num = |v: &str, what: &str| {
            v.trim()
                .parse::<usize>()
                .map_err(|_| format!("{what} {v:?} in {item:?} is not a whole number"))
        };
        let (shards, rest) = item.split_once('@').unwrap_or((item, ""));
        let num_shards = num(shards, "the ranks")?;
        if num_shards == 0 {
            return Err(format!("{item:?}: a world has at least one rank"));
        }
        let (from, batch) = match (i, rest) {
            (0, "") => (0, 0),
            (0, _) => return Err(format!("the first world {item:?} starts the epoch: no @")),
            (_, "") => return Err(format!("{item:?}: a later world needs @POSITION:BATCH")),
            (_, r) => {
                let (p, k) = r
                    .split_once(':')
                    .ok_or_else(|| format!("{item:?}: a later world needs @POSITION:BATCH"))?;
                (num(p, "the position")?, num(k, "the batch")?)
            }
        };
        worlds.push(WorldFlag {
            num_shards,
            from,
            batch,
        });
    }
    Ok(Worlds(worlds))
}

/// The job state `--start-epoch`, `--start-batch`, `--start-sample`, `--start-position` and
/// `--start-world` stand for, on `p` (whose dataset, ops and seed the run's flags give, so
/// the fingerprint is `p`'s). The worlds' batch size and `drop_remainder` are `p`'s.
pub(super) fn job_state(
    c: &Common,
    p: &Pipeline,
    position: usize,
    worlds: &[WorldFlag],
) -> JobState {
    let cfg = p.config();
    let s = &cfg.source.sampling;
    JobState {
        version: STATE_VERSION,
        epoch: c.start_epoch,
        position,
        batch: c.start_batch,
        shard_id: s.shard_id,
        sample: c.start_sample,
        worlds: worlds
            .iter()
            .map(|w| World {
                from: w.from,
                batch: w.batch,
                num_shards: w.num_shards,
                batch_size: cfg.batch.size,
                drop_remainder: cfg.batch.drop_remainder,
            })
            .collect(),
        uneven: s.uneven,
        num_samples: s.num_samples,
        fingerprint: p.fingerprint().clone(),
    }
}

/// The flags that resume a run of `p` stopped at `s` in an epoch split among `worlds`, on
/// this world or any other (`--start-sample` only where skipped samples moved the next
/// batch's first sample off `batch × batch_size`: it applies to this very rank and world).
pub(super) fn resume_flags(p: &Pipeline, s: State, worlds: &[World]) -> String {
    let job = p.job_state(s, worlds);
    let mut flags = format!("--start-epoch {} --start-batch {}", s.epoch, s.batch);
    let plain = job
        .world()
        .map_or(0, |w| s.batch.saturating_sub(w.batch) * w.batch_size);
    // Under `on_error = "skip"` the hint always names it (a resume without it warns:
    // `span::resume_warning`), so the stream cannot shift silently.
    let skipping = super::span::skipping(p) && s.batch > 0;
    if let Some(sample) = job.sample.filter(|&x| x != plain || skipping) {
        flags.push_str(&format!(" --start-sample {sample}"));
    }
    let list: Vec<String> = job
        .worlds
        .iter()
        .enumerate()
        .map(|(i, w)| match i {
            0 => w.num_shards.to_string(),
            _ => format!("{}@{}:{}", w.num_shards, w.from, w.batch),
        })
        .collect();
    flags.push_str(&format!(
        " --start-position {} --start-world {}",
        job.position,
        list.join(",")
    ));
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_world_reads_a_list_of_worlds() {
        let w = parse_worlds("8,4@64:2").expect("parses").0;
        assert_eq!(w.len(), 2);
        assert_eq!((w[1].num_shards, w[1].from, w[1].batch), (4, 64, 2));
        assert!(parse_worlds("0").is_err());
        assert!(parse_worlds("8@3:1").is_err());
        assert!(parse_worlds("8,4").unwrap_err().contains("@POSITION:BATCH"));
        assert!(parse_worlds("x")
            .unwrap_err()
            .contains("not a whole number"));
    }
}
