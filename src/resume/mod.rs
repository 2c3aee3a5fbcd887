//! Resuming an epoch on a different number of ranks: which positions of the epoch's order
//! remain, and how they are split among the ranks of the new world.
//!
//! An epoch's order is one permutation of the `N` samples ([`crate::plan::Sampling`]); the
//! epoch's *sequence* is the list of positions of that permutation its ranks read, and rank
//! `s` of a world of `W` ranks reads the sequence's positions `s, s + W, …`. Ranks that
//! step in lockstep (DDP, MindSpore's data parallel) have together read a prefix of the
//! sequence when a checkpoint is taken: after `k` batches of `B` samples each, the first
//! `min(k·B·W, end)` positions. That prefix length is the *global position*.
//!
//! * The **first world** of an epoch (`W₀` ranks) has the sequence of an ordinary epoch:
//!   position `v` is position `v mod N` of the permutation, for `v` below `W₀·ceil(N/W₀)`
//!   (`pad`: the last round wraps to the start), `W₀·floor(N/W₀)` (`drop`) or `N`
//!   (`exact`), each capped by `num_samples` per rank (`W₀·num_samples`). Its *content*
//!   is the positions below `N` (pad's wrapped round is padding, not content).
//! * A **resumed world** (`W` ranks from global position `P`) keeps the sequence's first
//!   `P` positions (already read) and replaces the rest by the *remainder* — the previous
//!   world's content from `P` on, `L` positions — split by the same rule and policy: `pad`
//!   gives every rank `ceil(L/W)`, its last round wrapping to the remainder's start;
//!   `drop` gives every rank `floor(L/W)` and leaves the last `L mod W` out; `exact` gives
//!   every position once. `num_samples` is not applied again: it fixed the epoch's extent
//!   when its first world began.
//!
//! So under `exact` the positions read before and after a change of world are each
//! sample of the epoch exactly once; under `pad` each at least once (the repeats are the
//! old world's padding already read plus the new world's); under `drop` each at most once.
//! The later epochs are ordinary epochs of the new world. [`World`] is one world of an
//! epoch, [`Sequence`] the epoch's worlds with the rule above; the state a job saves is the
//! pipeline's (`pipeline::JobState`).

mod error;

pub use error::{ResumeError, STATE_VERSION};

use crate::plan::Uneven;
use serde::{Deserialize, Serialize};

/// One world of an epoch: the ranks (and their batches) that read it from global position
/// `from` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct World {
    /// The global position this world started at (0 for the epoch's first world).
    pub from: usize,
    /// The number its ranks gave their first batch in this world (batches are numbered
    /// across the epoch, whatever the world).
    pub batch: usize,
    /// Ranks.
    pub num_shards: usize,
    /// Samples per batch on each rank.
    pub batch_size: usize,
    /// Whether each rank dropped its last incomplete batch.
    pub drop_remainder: bool,
}

/// One world's span of the sequence.
#[derive(Clone, Copy, Debug)]
struct Span {
    from: usize,
    /// End of the positions its ranks read (padding included).
    end: usize,
    /// End of the positions that are content (before pad's wrap-around).
    content: usize,
    shards: usize,
}

/// An epoch's worlds and the sampling rule that split the epoch among them.
#[derive(Clone, Debug)]
pub struct Sequence {
    spans: Vec<Span>,
    n: usize,
    uneven: Uneven,
}

impl Sequence {
    /// The layout of an epoch of `n` samples read by `worlds` in turn (the first one from
    /// position 0; each `from` not below the one before), under `uneven` and
    /// `num_samples`. A world whose `from` lies past the content left reads nothing.
    pub fn new(n: usize, uneven: Uneven, num_samples: Option<usize>, worlds: &[World]) -> Sequence {
        let mut spans: Vec<Span> = Vec::with_capacity(worlds.len());
        for w in worlds {
            let k = w.num_shards.max(1);
            let span = match spans.last() {
                None => {
                    let cap = num_samples.unwrap_or(usize::MAX);
                    let end = match uneven {
                        Uneven::Pad => k * cap.min(n.div_ceil(k)),
                        Uneven::Drop => k * cap.min(n / k),
                        Uneven::Exact => n.min(k.saturating_mul(cap)),
                    };
                    Span {
                        from: 0,
                        end,
                        content: end.min(n),
                        shards: k,
                    }
                }
                Some(prev) => {
                    let from = w.from.max(prev.from);
                    let left = prev.content.saturating_sub(from);
                    let (end, content) = match uneven {
                        Uneven::Pad => (from + k * left.div_ceil(k), from + left),
                        Uneven::Drop => (from + k * (left / k), from + k * (left / k)),
                        Uneven::Exact => (from + left, from + left),
                    };
                    Span {
                        from,
                        end,
                        content,
                        shards: k,
                    }
                }
            };
            spans.push(span);
        }
        Sequence { spans, n, uneven }
    }

    fn last(&self) -> Option<&Span> {
        self.spans.last()
    }

    /// Where the current (last) world's sequence ends: the global position once every rank
    /// has read its share.
    pub fn end(&self) -> usize {
        self.last().map_or(0, |s| s.end)
    }

    /// The global position reached when every rank of the current world has read `per_rank`
    /// positions of its share (ranks with a shorter share having read all of it).
    pub fn position(&self, per_rank: usize) -> usize {
        self.last().map_or(0, |s| {
            s.from + per_rank.saturating_mul(s.shards).min(s.end - s.from)
        })
    }

    /// Samples rank `shard_id` of the current world reads.
    pub fn rank_len(&self, shard_id: usize) -> usize {
        self.last().map_or(0, |s| {
            (s.end - s.from).saturating_sub(shard_id).div_ceil(s.shards)
        })
    }

    /// The position in the epoch's permutation of global position `v` of the current
    /// world's sequence (`v` below [`Sequence::end`]).
    pub fn resolve(&self, mut v: usize) -> usize {
        for s in self.spans.iter().skip(1).rev() {
            if v < s.from {
                continue;
            }
            let left = s.content - s.from;
            let q = v - s.from;
            // Only pad reaches past the content: its last round wraps to the start.
            v = s.from + if q >= left && left > 0 { q % left } else { q };
        }
        if self.n == 0 {
            0
        } else {
            v % self.n
        }
    }

    /// The positions in the epoch's permutation that rank `shard_id` of the current world
    /// reads, in order.
    pub fn rank_positions(&self, shard_id: usize) -> Vec<usize> {
        let Some(s) = self.last().copied() else {
            return Vec::new();
        };
        (0..self.rank_len(shard_id))
            .map(|j| self.resolve(s.from + shard_id + j * s.shards))
            .collect()
    }

    /// The policy the layout splits by.
    pub fn uneven(&self) -> Uneven {
        self.uneven
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Sampling;
    use proptest::prelude::*;

    fn world(from: usize, shards: usize, bs: usize) -> World {
        World {
            from,
            batch: 0,
            num_shards: shards,
            batch_size: bs,
            drop_remainder: false,
        }
    }

    fn uneven() -> impl Strategy<Value = Uneven> {
        prop_oneof![Just(Uneven::Pad), Just(Uneven::Drop), Just(Uneven::Exact)]
    }

    /// The README's example: 110 samples, 8 ranks of batch 4 stopped after 2 batches, the
    /// rest on 4 ranks.
    #[test]
    fn eight_to_four_ranks_reads_the_rest_of_the_epoch_once() {
        let first = Sequence::new(110, Uneven::Exact, None, &[world(0, 8, 4)]);
        let p = first.position(2 * 4);
        assert_eq!(p, 64);
        let then = Sequence::new(110, Uneven::Exact, None, &[world(0, 8, 4), world(p, 4, 4)]);
        assert_eq!(
            then.rank_positions(0),
            vec![64, 68, 72, 76, 80, 84, 88, 92, 96, 100, 104, 108]
        );
        assert_eq!(then.rank_positions(3).len(), 11);
        let pad = Sequence::new(110, Uneven::Pad, None, &[world(0, 8, 4), world(p, 4, 4)]);
        // 46 left over 4 ranks: 12 each, the last round wraps to the remainder's start
        assert_eq!(
            pad.rank_positions(2),
            vec![66, 70, 74, 78, 82, 86, 90, 94, 98, 102, 106, 64]
        );
        let drop = Sequence::new(110, Uneven::Drop, None, &[world(0, 8, 4), world(p, 4, 4)]);
        // the first world's extent is 104 (8 × 13): 40 left, 10 each
        assert_eq!(drop.end(), 104);
        assert_eq!(drop.rank_positions(1).len(), 10);
    }

    proptest! {
        /// One world is an ordinary epoch: the same order as `Sampling::order`.
        #[test]
        fn one_world_is_the_ordinary_split(
            n in 1usize..300, shards in 1usize..9, uneven in uneven(),
            cap in proptest::option::of(1usize..60), seed in any::<u64>(), epoch in 0u64..9,
        ) {
            let layout = Sequence::new(n, uneven, cap, &[world(0, shards, 1)]);
            for id in 0..shards {
                let s = Sampling { shuffle: true, seed, num_shards: shards, shard_id: id, uneven,
                                   num_samples: cap, ..Sampling::default() };
                let perm = s.permutation(n, epoch, None);
                let got: Vec<usize> = layout.rank_positions(id).iter().map(|&p| perm[p]).collect();
                prop_assert_eq!(got, s.order(n, epoch, None));
            }
        }

        /// `W` ranks read `k` batches of `B` in lockstep, then `W'` ranks (batch `B'`)
        /// read the rest, then maybe `W''`: the union is what the policy promises.
        #[test]
        fn a_change_of_world_reads_the_rest_of_the_epoch_as_the_policy_says(
            n in 1usize..300, w in 1usize..9, w2 in 1usize..9, w3 in 1usize..9,
            bs in 1usize..17, bs2 in 1usize..17, k in 0usize..40, k2 in 0usize..40,
            third in any::<bool>(), uneven in uneven(), cap in proptest::option::of(1usize..60),
        ) {
            let first = Sequence::new(n, uneven, cap, &[world(0, w, bs)]);
            let extent = first.end().min(n); // the epoch's content
            let mut seen = vec![0usize; n];
            // ranks of the first world read k batches each (all of it if shorter)
            for id in 0..w {
                let pos = first.rank_positions(id);
                for &p in pos.iter().take(k * bs) { seen[p] += 1; }
            }
            let p1 = first.position(k * bs);
            let mut worlds = vec![world(0, w, bs), world(p1, w2, bs2)];
            let mut layout = Sequence::new(n, uneven, cap, &worlds);
            let left = extent.saturating_sub(p1);
            let lens: Vec<usize> = (0..w2).map(|id| layout.rank_len(id)).collect();
            if third {
                for id in 0..w2 {
                    for &p in layout.rank_positions(id).iter().take(k2 * bs2) { seen[p] += 1; }
                }
                let p2 = layout.position(k2 * bs2);
                worlds.push(world(p2, w3, bs));
                layout = Sequence::new(n, uneven, cap, &worlds);
                for id in 0..w3 {
                    for p in layout.rank_positions(id) { seen[p] += 1; }
                }
            } else {
                for id in 0..w2 {
                    for p in layout.rank_positions(id) { seen[p] += 1; }
                }
            }
            let max = *lens.iter().max().unwrap_or(&0);
            let min = *lens.iter().min().unwrap_or(&0);
            match uneven {
                Uneven::Exact => {
                    prop_assert!(seen[..extent].iter().all(|&c| c == 1), "{:?}", seen);
                    prop_assert!(seen[extent..].iter().all(|&c| c == 0));
                    prop_assert!(max - min <= 1);
                }
                Uneven::Pad => {
                    prop_assert!(seen[..extent].iter().all(|&c| c >= 1), "{:?}", seen);
                    prop_assert_eq!(min, max);
                    if p1 < extent { prop_assert_eq!(max, left.div_ceil(w2)); }
                }
                Uneven::Drop => {
                    prop_assert!(seen.iter().all(|&c| c <= 1));
                    prop_assert_eq!(min, max);
                    prop_assert_eq!(max, left / w2);
                    if !third {
                        let missing = seen[..extent].iter().filter(|&&c| c == 0).count();
                        prop_assert_eq!(missing, left % w2);
                    }
                }
            }
        }

        /// Resuming on the same world from its own position continues each rank's share.
        #[test]
        fn the_same_world_continues_each_rank(
            n in 1usize..300, w in 1usize..9, bs in 1usize..17, k in 0usize..40,
            uneven in prop_oneof![Just(Uneven::Drop), Just(Uneven::Exact)],
        ) {
            let first = Sequence::new(n, uneven, None, &[world(0, w, bs)]);
            let p = first.position(k * bs);
            let then = Sequence::new(n, uneven, None, &[world(0, w, bs), world(p, w, bs)]);
            for id in 0..w {
                let rest: Vec<usize> = first.rank_positions(id).into_iter().skip(k * bs).collect();
                prop_assert_eq!(then.rank_positions(id), rest);
            }
        }
    }
}
