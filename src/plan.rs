//! Pure index math for one epoch: shuffle → shard → limit → batches.
//!
//! Semantics follow MindSpore's samplers:
//! * `shuffle`: one permutation of all samples per epoch, seeded by `(seed, epoch)`, shared
//!   by every shard (so shards stay disjoint).
//! * sharding (`DistributedSampler`): every shard gets `ceil(N / num_shards)` samples; shard
//!   `s` takes positions `s, s + num_shards, …` of the (shuffled) order, wrapping around to
//!   the start to pad the last round, so all shards have the same length.
//! * `num_samples`: keep the first `num_samples` of this shard's order.
//! * batches: `ceil(len / size)`, or `floor` with `drop_remainder`.
//!
//! The generator is SplitMix64 with a Fisher–Yates shuffle, written out here so that a
//! seed gives the same order forever, whatever a dependency upgrade does to its own
//! sequences.

/// How an epoch's samples are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sampling {
    /// Shuffle every epoch.
    pub shuffle: bool,
    /// Seed of the shuffle and of random ops.
    pub seed: u64,
    /// Keep at most this many samples (per shard).
    pub num_samples: Option<usize>,
    /// Number of data-parallel shards.
    pub num_shards: usize,
    /// This shard.
    pub shard_id: usize,
}

impl Default for Sampling {
    fn default() -> Sampling {
        Sampling {
            shuffle: false,
            seed: 0,
            num_samples: None,
            num_shards: 1,
            shard_id: 0,
        }
    }
}

/// SplitMix64: tiny, fast, and its output for a seed never changes.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, bound)` (`bound > 0`), by widening multiplication (Lemire), with
    /// rejection so there is no bias.
    pub fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0);
        let threshold = bound.wrapping_neg() % bound;
        loop {
            let m = (self.next_u64() as u128) * (bound as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

fn mix(parts: &[u64]) -> u64 {
    let mut g = SplitMix64::new(0x6A09_E667_F3BC_C908);
    let mut h = 0u64;
    for &p in parts {
        g.0 ^= p;
        h = g.next_u64() ^ h.rotate_left(17);
    }
    h
}

/// The random stream of one sample in one epoch: the same for any worker count.
pub fn sample_rng(seed: u64, epoch: u64, index: usize) -> SplitMix64 {
    SplitMix64::new(mix(&[seed, epoch, index as u64, 0x5A4D]))
}

impl Sampling {
    /// Checks the shard parameters.
    pub fn validate(&self) -> Result<(), String> {
        if self.num_shards == 0 {
            return Err("num_shards must be at least 1".into());
        }
        if self.shard_id >= self.num_shards {
            return Err(format!(
                "shard_id {} must be below num_shards {}",
                self.shard_id, self.num_shards
            ));
        }
        if self.num_samples == Some(0) {
            return Err("num_samples must be positive".into());
        }
        Ok(())
    }

    /// Number of samples this shard yields per epoch for a source of `n`.
    pub fn len(&self, n: usize) -> usize {
        let per_shard = n.div_ceil(self.num_shards.max(1));
        self.num_samples.map_or(per_shard, |m| m.min(per_shard))
    }

    /// The ordered source indices this shard reads in `epoch`.
    pub fn order(&self, n: usize, epoch: u64) -> Vec<usize> {
        let mut all: Vec<usize> = (0..n).collect();
        if self.shuffle {
            let mut g = SplitMix64::new(mix(&[self.seed, epoch, 0x5348]));
            for i in (1..n).rev() {
                let j = g.below(i as u64 + 1) as usize;
                all.swap(i, j);
            }
        }
        let len = self.len(n);
        if self.num_shards == 1 {
            all.truncate(len);
            return all;
        }
        (0..len)
            .map(|k| all[(self.shard_id + k * self.num_shards) % n])
            .collect()
    }
}

/// Number of batches for `len` samples.
pub fn batch_count(len: usize, batch_size: usize, drop_remainder: bool) -> usize {
    if drop_remainder {
        len / batch_size
    } else {
        len.div_ceil(batch_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampling(shuffle: bool, shards: usize, id: usize) -> Sampling {
        Sampling {
            shuffle,
            seed: 42,
            num_shards: shards,
            shard_id: id,
            ..Sampling::default()
        }
    }

    #[test]
    fn shuffle_is_a_permutation_that_changes_with_epoch_and_repeats_with_seed() {
        for n in [1, 2, 10, 1000] {
            let s = sampling(true, 1, 0);
            let mut o = s.order(n, 3);
            assert_eq!(o, s.order(n, 3));
            o.sort();
            assert_eq!(o, (0..n).collect::<Vec<_>>());
        }
        let s = sampling(true, 1, 0);
        assert_ne!(s.order(1000, 0), s.order(1000, 1));
        assert_ne!(s.order(1000, 0), (0..1000).collect::<Vec<_>>());
        let other = Sampling { seed: 43, ..s };
        assert_ne!(s.order(1000, 0), other.order(1000, 0));
    }

    #[test]
    fn shards_are_disjoint_cover_everything_and_pad_by_wrapping() {
        for n in [7, 8, 9, 100, 101] {
            for shards in [1, 2, 3, 4] {
                let mut seen = vec![0usize; n];
                let per = n.div_ceil(shards);
                for id in 0..shards {
                    let o = sampling(true, shards, id).order(n, 5);
                    assert_eq!(o.len(), per);
                    for i in o {
                        seen[i] += 1;
                    }
                }
                // every sample at least once; the padding repeats exactly per*shards - n
                assert!(seen.iter().all(|&c| c >= 1));
                assert_eq!(seen.iter().sum::<usize>() - n, per * shards - n);
            }
        }
        // MindSpore DistributedSampler, no shuffle, 5 samples over 2 shards:
        // shard 0: 0 2 4, shard 1: 1 3 0 (wrapped)
        assert_eq!(sampling(false, 2, 0).order(5, 0), vec![0, 2, 4]);
        assert_eq!(sampling(false, 2, 1).order(5, 0), vec![1, 3, 0]);
    }

    #[test]
    fn num_samples_limits_each_shard() {
        let s = Sampling {
            num_samples: Some(3),
            ..sampling(false, 1, 0)
        };
        assert_eq!(s.order(10, 0), vec![0, 1, 2]);
        let s = Sampling {
            num_samples: Some(100),
            ..s
        };
        assert_eq!(s.order(10, 0).len(), 10);
    }

    #[test]
    fn batch_counts_follow_drop_remainder() {
        assert_eq!(batch_count(10, 3, true), 3);
        assert_eq!(batch_count(10, 3, false), 4);
        assert_eq!(batch_count(9, 3, false), 3);
        assert_eq!(batch_count(2, 3, true), 0);
    }

    #[test]
    fn below_is_in_range_and_covers_it() {
        let mut g = SplitMix64::new(1);
        let mut hits = [0; 7];
        for _ in 0..7000 {
            hits[g.below(7) as usize] += 1;
        }
        assert!(hits.iter().all(|&h| h > 800), "{hits:?}");
    }
}
