//! [`JobState`]: where a data-parallel job stands in an epoch — enough, from any one rank,
//! to resume on any number of ranks — and the [`Fingerprint`] that refuses a state taken
//! from another dataset, pipeline or seed.

use crate::engine::State;
use crate::error::OnError;
use crate::imgproc::fingerprint::{fingerprint, fold, OFFSET64};
use crate::pipeline::Pipeline;
use crate::plan::{batch_count, Uneven};
use crate::resume::{ResumeError, Sequence, World, STATE_VERSION};
use serde::{Deserialize, Serialize};

/// What a state must match to be resumed: the dataset, the pipeline's ops and the shuffle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fingerprint {
    /// Samples in the dataset (every shard).
    pub samples: usize,
    /// Hash of the dataset's sample names (relative to its root, so a dataset moved to
    /// another mount point is the same dataset), 16 hex digits.
    pub dataset: String,
    /// Hash of the ops and batch ops, 16 hex digits.
    pub pipeline: String,
    /// Seed of the shuffle and of the random ops.
    pub seed: u64,
    /// Whether epochs are shuffled.
    pub shuffle: bool,
    /// The shard-aware shuffle's window (`None`: the global shuffle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle_window: Option<usize>,
}

impl Fingerprint {
    /// The fingerprint of `p` (hashes every sample name once).
    pub fn of(p: &Pipeline) -> Fingerprint {
        let source = p.source();
        let root = source.root().to_string_lossy().into_owned();
        let mut h = fold(OFFSET64, source.len() as u64);
        for i in 0..source.len() {
            let name = source.sample_name(i);
            let rel = name.strip_prefix(root.as_str()).unwrap_or(&name);
            h = fold(h, fingerprint(rel.trim_start_matches('/').as_bytes()));
        }
        let c = p.config();
        // Serializing config types cannot fail (no maps with non-string keys).
        let ops = serde_json::to_string(&(&c.ops, &c.batch_ops)).unwrap_or_default();
        Fingerprint {
            samples: source.len(),
            dataset: format!("{h:016x}"),
            pipeline: format!("{:016x}", fingerprint(ops.as_bytes())),
            seed: c.source.sampling.seed,
            shuffle: c.source.sampling.shuffle,
            shuffle_window: c.source.sampling.shuffle_window,
        }
    }

    /// `Err` naming every field of `self` (the state's) that differs from `here`.
    pub fn check(&self, here: &Fingerprint) -> Result<(), ResumeError> {
        let mut diffs = Vec::new();
        if self.samples != here.samples || self.dataset != here.dataset {
            diffs.push(format!(
                "dataset (state: {} samples, names {}; here: {} samples, names {})",
                self.samples, self.dataset, here.samples, here.dataset
            ));
        }
        if self.pipeline != here.pipeline {
            diffs.push(format!(
                "pipeline ops (state: {}; here: {})",
                self.pipeline, here.pipeline
            ));
        }
        if self.seed != here.seed {
            diffs.push(format!("seed (state: {}; here: {})", self.seed, here.seed));
        }
        if self.shuffle != here.shuffle {
            diffs.push(format!(
                "shuffle (state: {}; here: {})",
                self.shuffle, here.shuffle
            ));
        }
        if self.shuffle_window != here.shuffle_window {
            let show = |w: Option<usize>| w.map_or("none".to_string(), |w| w.to_string());
            diffs.push(format!(
                "shuffle_window (state: {}; here: {})",
                show(self.shuffle_window),
                show(here.shuffle_window)
            ));
        }
        if diffs.is_empty() {
            Ok(())
        } else {
            Err(ResumeError::Foreign(diffs.join(", ")))
        }
    }
}

/// Where a data-parallel job stands in epoch `epoch`, as one rank saw it; any rank's is
/// enough to resume on any number of ranks ([`Pipeline::resume_job`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobState {
    /// [`STATE_VERSION`].
    pub version: u32,
    /// The epoch.
    pub epoch: u64,
    /// The global position: how much of the epoch's sequence the ranks have read together
    /// (the first `position` positions; see [`crate::resume`]).
    pub position: usize,
    /// Batches each rank has yielded in the epoch (the number of the next one).
    pub batch: usize,
    /// The rank that wrote the state.
    pub shard_id: usize,
    /// With `on_error = "skip"`: the writer's position in its share of the current world,
    /// past the samples it skipped (resuming that very rank of that very world is exact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<usize>,
    /// The worlds of the epoch so far, the current one last.
    pub worlds: Vec<World>,
    /// The policy the epoch is split by.
    pub uneven: Uneven,
    /// `num_samples` of the epoch's first world.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_samples: Option<usize>,
    /// What the state must match.
    pub fingerprint: Fingerprint,
}

/// Where a resumed rank starts: its state, its share's order and the position in it.
pub(crate) struct Start {
    pub state: State,
    pub order: Vec<usize>,
    pub start: usize,
    pub worlds: Vec<World>,
}

impl JobState {
    /// Parse the JSON that `serde_json::to_string` of a state wrote.
    pub fn from_json(s: &str) -> Result<JobState, ResumeError> {
        let j: JobState = serde_json::from_str(s).map_err(ResumeError::NotState)?;
        if j.version != STATE_VERSION {
            return Err(ResumeError::Version(j.version));
        }
        if j.worlds.is_empty() {
            return Err(ResumeError::Inconsistent("no world"));
        }
        Ok(j)
    }

    /// The state as JSON.
    pub fn to_json(&self) -> String {
        // Plain fields only: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The world the state was taken in (`None` only for a state built by hand without
    /// worlds, which [`Pipeline::resume_job`] refuses).
    pub fn world(&self) -> Option<&World> {
        self.worlds.last()
    }

    /// The job state of a rank of `p` at `state` of an epoch split among `worlds` (empty:
    /// `p`'s own world from the epoch's start).
    pub fn at(p: &Pipeline, state: State, worlds: &[World]) -> JobState {
        let s = &p.config().source.sampling;
        let worlds = if worlds.is_empty() {
            vec![first_world(p)]
        } else {
            worlds.to_vec()
        };
        let w = worlds[worlds.len() - 1];
        let layout = Sequence::new(p.source().len(), s.uneven, s.num_samples, &worlds);
        let done = state.batch.saturating_sub(w.batch);
        // Rank 0 has the largest share under every policy: once the ranks yielded its
        // batches the epoch is over (drop_remainder's leftovers stay dropped). A rank with
        // a smaller share (exact, or none at all) says nothing of the others' last batch.
        let most = batch_count(layout.rank_len(0), w.batch_size, w.drop_remainder);
        let position = if done >= most {
            layout.end()
        } else {
            layout.position(done * w.batch_size)
        };
        let skip = p.config().engine.on_error == OnError::Skip;
        JobState {
            version: STATE_VERSION,
            epoch: state.epoch,
            position,
            batch: state.batch,
            shard_id: s.shard_id,
            sample: state.sample.filter(|_| skip),
            worlds,
            uneven: s.uneven,
            num_samples: s.num_samples,
            fingerprint: p.fingerprint().clone(),
        }
    }

    /// The state of rank `p` once it has resumed this state and yielded `batches` more
    /// batches (in the world of `p`): where a reader that splits a resumed epoch into
    /// ranges of batches starts each range.
    pub fn advanced(&self, p: &Pipeline, batches: usize) -> Result<JobState, ResumeError> {
        let start = self.start(p)?;
        let state = State {
            epoch: self.epoch,
            batch: start.state.batch + batches,
            sample: None,
        };
        Ok(JobState::at(p, state, &start.worlds))
    }

    /// `(batches, samples)` that rank `p` yields resuming this state (before any
    /// `on_error = "skip"` shortens it).
    pub fn extent(&self, p: &Pipeline) -> Result<(usize, usize), ResumeError> {
        let start = self.start(p)?;
        let (bs, drop) = (p.config().batch.size, p.config().batch.drop_remainder);
        let len = start.order.len();
        let end = (batch_count(len, bs, drop) * bs).min(len);
        let total = end.saturating_sub(start.start);
        Ok((total.div_ceil(bs), total))
    }

    /// Where rank `p` (its `num_shards`, `shard_id`, batch) starts to resume this state.
    pub(crate) fn start(&self, p: &Pipeline) -> Result<Start, ResumeError> {
        if self.version != STATE_VERSION {
            return Err(ResumeError::Version(self.version));
        }
        let Some(&old) = self.worlds.last() else {
            return Err(ResumeError::Inconsistent("no world"));
        };
        self.fingerprint.check(p.fingerprint())?;
        let s = &p.config().source.sampling;
        if s.uneven != self.uneven {
            return Err(ResumeError::Sampling {
                setting: "uneven",
                state: format!("{:?}", self.uneven).to_lowercase(),
                here: format!("{:?}", s.uneven).to_lowercase(),
            });
        }
        if s.num_samples != self.num_samples {
            let show = |m: Option<usize>| m.map_or("none".to_string(), |m| m.to_string());
            return Err(ResumeError::Sampling {
                setting: "num_samples",
                state: show(self.num_samples),
                here: show(s.num_samples),
            });
        }
        if self.batch < old.batch {
            return Err(ResumeError::Inconsistent("batch before its world's first"));
        }
        let here = World {
            from: self.position,
            batch: self.batch,
            ..first_world(p)
        };
        let same_world = here.num_shards == old.num_shards
            && here.batch_size == old.batch_size
            && here.drop_remainder == old.drop_remainder;
        let n = p.source().len();
        let perm = p.permutation(self.epoch);
        let (worlds, start) = if same_world {
            // The same world: every rank goes on in its own share (the writer after the
            // samples it skipped, the others after the batches they yielded).
            let layout = Sequence::new(n, s.uneven, s.num_samples, &self.worlds);
            let share = layout.rank_len(s.shard_id);
            let skip = p.config().engine.on_error == OnError::Skip;
            let start = match self.sample {
                Some(x) if skip && s.shard_id == self.shard_id => x,
                _ => (self.batch - old.batch) * old.batch_size,
            };
            let start = if self.position >= layout.end() {
                share
            } else {
                start.min(share)
            };
            (self.worlds.clone(), start)
        } else {
            let mut worlds = self.worlds.clone();
            worlds.push(here);
            (worlds, 0)
        };
        let layout = Sequence::new(n, s.uneven, s.num_samples, &worlds);
        let order = layout
            .rank_positions(s.shard_id)
            .into_iter()
            .map(|v| perm[v])
            .collect();
        Ok(Start {
            state: State {
                epoch: self.epoch,
                batch: self.batch,
                sample: Some(start),
            },
            order,
            start,
            worlds,
        })
    }
}

/// The world `p` is built for, from the start of an epoch.
pub(crate) fn first_world(p: &Pipeline) -> World {
    let c = p.config();
    World {
        from: 0,
        batch: 0,
        num_shards: c.source.sampling.num_shards,
        batch_size: c.batch.size,
        drop_remainder: c.batch.drop_remainder,
    }
}
