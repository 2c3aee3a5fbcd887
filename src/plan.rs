//! Pure index math for one epoch: shuffle → shard → limit → batches.
//!
//! Semantics follow MindSpore's samplers:
//! * `shuffle`: one permutation of all samples per epoch, seeded by `(seed, epoch)`, shared
//!   by every shard (so shards stay disjoint). With `shuffle_window = N` (a dataset made of
//!   multi-sample files) the permutation reads `N` files at a time ([`window`]: the
//!   shard-aware shuffle); everything after it is the same.
//! * sharding (`DistributedSampler`): shard `s` takes positions `s, s + num_shards, …` of
//!   the (shuffled) order. What happens when `num_shards` does not divide `N` is the
//!   [`Uneven`] policy: `pad` (MindSpore's and PyTorch's default: every shard gets
//!   `ceil(N / num_shards)`, wrapping around to the start of the order), `drop` (every shard
//!   gets `floor(N / num_shards)`; the last `N mod num_shards` of this epoch's order are left
//!   out) or `exact` (shard `s` keeps the positions below `N`: nothing repeated or dropped,
//!   shards differ by at most one sample — for evaluation).
//! * `num_samples`: keep the first `num_samples` of this shard's order.
//! * batches: `ceil(len / size)`, or `floor` with `drop_remainder`.
//!
//! The generator is SplitMix64 with a Fisher–Yates shuffle, written out here so that a
//! seed gives the same order forever, whatever a dependency upgrade does to its own
//! sequences.

use crate::rng::mix;
use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};

pub mod window;

/// What sharding does with the `N mod num_shards` samples left over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum Uneven {
    /// Every shard gets `ceil(N / num_shards)`: the last round wraps around to the start of
    /// the order (MindSpore's `DistributedSampler`, PyTorch's default).
    #[default]
    Pad,
    /// Every shard gets `floor(N / num_shards)`; the leftovers sit this epoch out (a
    /// shuffled order leaves out different samples each epoch).
    Drop,
    /// No sample repeated or dropped; shards differ by at most one sample (evaluation).
    Exact,
}

/// Where `num_shards` and `shard_id` come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShardFrom {
    /// The `num_shards` and `shard_id` fields (or the command line).
    #[default]
    Config,
    /// The launcher's environment: `WORLD_SIZE`/`RANK` (torchrun) or `RANK_SIZE`/`RANK_ID`
    /// (MindSpore), read when the pipeline is built.
    Env,
}

fn one() -> usize {
    1
}

fn one_epoch() -> u64 {
    1
}

fn is_one_epoch(n: &u64) -> bool {
    *n == 1
}

/// How an epoch's samples are chosen, and how many epochs a run makes: the sampling fields
/// of the `[source]` table (MindSpore puts the sampling arguments on the dataset too),
/// the same for every kind of source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Sampling {
    /// Shuffle every epoch.
    #[serde(default)]
    pub shuffle: bool,
    /// Seed of the shuffle and of random ops.
    #[serde(default)]
    pub seed: u64,
    /// Keep at most this many samples (per shard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_samples: Option<usize>,
    /// Number of data-parallel shards (MindSpore's DistributedSampler semantics).
    #[serde(default = "one")]
    pub num_shards: usize,
    /// This shard.
    #[serde(default)]
    pub shard_id: usize,
    /// `"env"`: take `num_shards`/`shard_id` from the launcher's environment.
    #[serde(default)]
    pub shard: ShardFrom,
    /// What to do when `num_shards` does not divide the dataset: `pad` (default,
    /// MindSpore's DistributedSampler), `drop` or `exact`.
    #[serde(default)]
    pub uneven: Uneven,
    /// Epochs a run makes (the permutation is reseeded every epoch).
    #[serde(default = "one_epoch", skip_serializing_if = "is_one_epoch")]
    pub num_epochs: u64,
    /// The shard-aware shuffle: read the dataset's files `N` at a time (a window of files
    /// shuffled together; see [`window`]). Needs `shuffle` and a dataset made of
    /// multi-sample files; `None`: the global shuffle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle_window: Option<usize>,
}

impl Default for Sampling {
    fn default() -> Sampling {
        Sampling {
            shuffle: false,
            seed: 0,
            num_samples: None,
            num_shards: 1,
            shard_id: 0,
            shard: ShardFrom::Config,
            uneven: Uneven::Pad,
            num_epochs: 1,
            shuffle_window: None,
        }
    }
}

/// Why a sampling cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SamplingError {
    /// `num_shards` is 0.
    #[error("num_shards must be at least 1")]
    NoShards,
    /// `shard_id` is not below `num_shards`.
    #[error("shard_id {shard_id} must be below num_shards {num_shards}")]
    ShardId {
        /// The shard asked for.
        shard_id: usize,
        /// The number of shards.
        num_shards: usize,
    },
    /// `num_samples` is 0.
    #[error("num_samples must be positive")]
    NoSamples,
    /// `num_epochs` is 0.
    #[error("num_epochs must be at least 1")]
    NoEpochs,
    /// `shard = "env"` and the launcher's variables are missing or wrong.
    #[error("shard = \"env\": {0}")]
    Env(String),
    /// `shuffle_window` is 0.
    #[error("shuffle_window (--shuffle-window) must be at least 1 (files)")]
    NoWindow,
    /// `shuffle_window` without `shuffle`.
    #[error(
        "shuffle_window = {0} (--shuffle-window) shuffles within windows of files: it needs \
         shuffle = true (--shuffle)"
    )]
    WindowWithoutShuffle(usize),
}

/// The sampling fields as the `[source]` table spells them (every other field of the
/// table belongs to the kind of dataset).
pub const SAMPLING_FIELDS: [&str; 9] = [
    "shuffle",
    "seed",
    "num_samples",
    "num_shards",
    "shard_id",
    "shard",
    "uneven",
    "num_epochs",
    "shuffle_window",
];

impl Sampling {
    /// Checks the shard parameters.
    pub fn validate(&self) -> Result<(), SamplingError> {
        if self.num_shards == 0 {
            return Err(SamplingError::NoShards);
        }
        if self.shard_id >= self.num_shards {
            return Err(SamplingError::ShardId {
                shard_id: self.shard_id,
                num_shards: self.num_shards,
            });
        }
        if self.num_samples == Some(0) {
            return Err(SamplingError::NoSamples);
        }
        if self.num_epochs == 0 {
            return Err(SamplingError::NoEpochs);
        }
        match self.shuffle_window {
            Some(0) => return Err(SamplingError::NoWindow),
            Some(n) if !self.shuffle => return Err(SamplingError::WindowWithoutShuffle(n)),
            _ => {}
        }
        Ok(())
    }

    /// With `shard = "env"`, fill `num_shards`/`shard_id` from the variables `get` reads.
    pub fn resolve_shard(
        &mut self,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<(), SamplingError> {
        if self.shard == ShardFrom::Env {
            (self.num_shards, self.shard_id) = shard_from_env(get)?;
        }
        Ok(())
    }

    /// Samples this shard takes from a source of `n`, before `num_samples`.
    fn shard_len(&self, n: usize) -> usize {
        let k = self.num_shards.max(1);
        match self.uneven {
            Uneven::Pad => n.div_ceil(k),
            Uneven::Drop => n / k,
            Uneven::Exact => n.saturating_sub(self.shard_id).div_ceil(k),
        }
    }

    /// Number of samples this shard yields per epoch for a source of `n`.
    pub fn len(&self, n: usize) -> usize {
        let per_shard = self.shard_len(n);
        self.num_samples.map_or(per_shard, |m| m.min(per_shard))
    }

    /// Epoch `epoch`'s order of all `n` samples, before sharding (shared by every shard).
    /// `file_of` is the file of each sample (the source's `file_of`): with
    /// `shuffle_window` the order reads that many files at a time ([`window`]); without
    /// it (or for a source not made of files, which a pipeline refuses with a window) the
    /// shuffle is global.
    pub fn permutation(&self, n: usize, epoch: u64, file_of: Option<&[u32]>) -> Vec<usize> {
        if let (true, Some(w), Some(files)) = (self.shuffle, self.shuffle_window, file_of) {
            if files.len() == n {
                return window::permutation(files, w, self.seed, epoch);
            }
        }
        let mut all: Vec<usize> = (0..n).collect();
        if self.shuffle {
            let mut g = SplitMix64::new(mix(&[self.seed, epoch, 0x5348]));
            window::fisher_yates(&mut all, &mut g);
        }
        all
    }

    /// The ordered source indices this shard reads in `epoch` (`file_of`: see
    /// [`Sampling::permutation`]).
    pub fn order(&self, n: usize, epoch: u64, file_of: Option<&[u32]>) -> Vec<usize> {
        let mut all = self.permutation(n, epoch, file_of);
        let len = self.len(n);
        if self.num_shards == 1 {
            all.truncate(len);
            return all;
        }
        // Under every policy position k of this shard is `shard_id + k * num_shards` of the
        // epoch's order; only pad reaches past the end (and wraps).
        (0..len)
            .map(|k| all[(self.shard_id + k * self.num_shards) % n])
            .collect()
    }
}

/// `(num_shards, shard_id)` from the variables a launcher sets: `WORLD_SIZE`/`RANK`
/// (torchrun, and most PyTorch launchers) or else `RANK_SIZE`/`RANK_ID` (MindSpore's
/// scripts). `get` reads a variable (`std::env::var(..).ok()` in the binary).
pub fn shard_from_env(
    get: impl Fn(&str) -> Option<String>,
) -> Result<(usize, usize), SamplingError> {
    let pairs = [("WORLD_SIZE", "RANK"), ("RANK_SIZE", "RANK_ID")];
    for (size_var, rank_var) in pairs {
        let (size, rank) = (get(size_var), get(rank_var));
        if size.is_none() && rank.is_none() {
            continue;
        }
        let parse = |name: &str, v: Option<String>| -> Result<usize, SamplingError> {
            let v = v.ok_or_else(|| {
                SamplingError::Env(format!(
                    "{size_var} and {rank_var} must be set together, but {name} is not set"
                ))
            })?;
            v.trim()
                .parse::<usize>()
                .map_err(|_| SamplingError::Env(format!("{name}={v:?} is not a whole number")))
        };
        let size = parse(size_var, size)?;
        let rank = parse(rank_var, rank)?;
        if size == 0 || rank >= size {
            return Err(SamplingError::Env(format!(
                "{rank_var}={rank} must be below {size_var}={size}"
            )));
        }
        return Ok((size, rank));
    }
    Err(SamplingError::Env(
        "neither WORLD_SIZE/RANK (torchrun) nor RANK_SIZE/RANK_ID (MindSpore) is set".into(),
    ))
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
            let mut o = s.order(n, 3, None);
            assert_eq!(o, s.order(n, 3, None));
            o.sort();
            assert_eq!(o, (0..n).collect::<Vec<_>>());
        }
        let s = sampling(true, 1, 0);
        assert_ne!(s.order(1000, 0, None), s.order(1000, 1, None));
        assert_ne!(s.order(1000, 0, None), (0..1000).collect::<Vec<_>>());
        let other = Sampling { seed: 43, ..s };
        assert_ne!(s.order(1000, 0, None), other.order(1000, 0, None));
    }

    #[test]
    fn shards_are_disjoint_cover_everything_and_pad_by_wrapping() {
        for n in [7, 8, 9, 100, 101] {
            for shards in [1, 2, 3, 4] {
                let mut seen = vec![0usize; n];
                let per = n.div_ceil(shards);
                for id in 0..shards {
                    let o = sampling(true, shards, id).order(n, 5, None);
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
        assert_eq!(sampling(false, 2, 0).order(5, 0, None), vec![0, 2, 4]);
        assert_eq!(sampling(false, 2, 1).order(5, 0, None), vec![1, 3, 0]);
    }

    fn policy(uneven: Uneven, shuffle: bool, shards: usize, id: usize) -> Sampling {
        Sampling {
            uneven,
            ..sampling(shuffle, shards, id)
        }
    }

    #[test]
    fn n110_over_4_shards_under_each_policy() {
        for (uneven, lens) in [
            (Uneven::Pad, [28, 28, 28, 28]),
            (Uneven::Drop, [27, 27, 27, 27]),
            (Uneven::Exact, [28, 28, 27, 27]),
        ] {
            let mut seen = vec![0usize; 110];
            for (id, &want) in lens.iter().enumerate() {
                let s = policy(uneven, true, 4, id);
                assert_eq!(s.len(110), want, "{uneven:?} shard {id}");
                let o = s.order(110, 1, None);
                assert_eq!(o.len(), want);
                for i in o {
                    seen[i] += 1;
                }
            }
            let covered = seen.iter().filter(|&&c| c > 0).count();
            match uneven {
                // pad: all 110 plus two repeats; exact: each once
                Uneven::Pad => assert_eq!(covered, 110),
                Uneven::Exact => assert!(seen.iter().all(|&c| c == 1)),
                // drop: 108 distinct, two left out this epoch
                Uneven::Drop => {
                    assert_eq!(covered, 108);
                    assert!(seen.iter().all(|&c| c <= 1));
                }
            }
        }
    }

    #[test]
    fn shard_from_env_reads_torchrun_then_mindspore_variables() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            shard_from_env(env(&[("WORLD_SIZE", "8"), ("RANK", "3")])),
            Ok((8, 3))
        );
        assert_eq!(
            shard_from_env(env(&[("RANK_SIZE", "4"), ("RANK_ID", "1")])),
            Ok((4, 1))
        );
        let e = shard_from_env(env(&[("WORLD_SIZE", "8")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("RANK is not set"), "{e}");
        let e = shard_from_env(env(&[("WORLD_SIZE", "2"), ("RANK", "2")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("must be below"), "{e}");
        let e = shard_from_env(env(&[("RANK_SIZE", "x"), ("RANK_ID", "0")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a whole number"), "{e}");
        assert!(shard_from_env(env(&[])).is_err());
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        fn uneven() -> impl Strategy<Value = Uneven> {
            prop_oneof![Just(Uneven::Pad), Just(Uneven::Drop), Just(Uneven::Exact)]
        }

        proptest! {
            #[test]
            fn every_epoch_is_a_permutation_fixed_by_seed_and_epoch(
                n in 1usize..500, seed in any::<u64>(), epoch in 0u64..1000
            ) {
                let s = Sampling { shuffle: true, seed, ..Sampling::default() };
                let o = s.order(n, epoch, None);
                prop_assert_eq!(&o, &s.order(n, epoch, None));
                let mut sorted = o.clone();
                sorted.sort_unstable();
                prop_assert_eq!(sorted, (0..n).collect::<Vec<_>>());
                if n >= 8 {
                    // 8! orders: a collision between two epochs is a 1-in-40320 event at
                    // worst, and these seeds are fixed by proptest's own seed.
                    prop_assert_ne!(o, s.order(n, epoch + 1, None));
                }
            }

            #[test]
            fn shards_are_disjoint_and_cover_under_each_policy(
                n in 1usize..300, shards in 1usize..9, seed in any::<u64>(),
                epoch in 0u64..50, uneven in uneven(), shuffle in any::<bool>()
            ) {
                let mut seen = vec![0usize; n];
                let mut lens = Vec::new();
                for id in 0..shards {
                    let s = Sampling { shuffle, seed, num_shards: shards, shard_id: id, uneven,
                                       ..Sampling::default() };
                    let o = s.order(n, epoch, None);
                    prop_assert_eq!(o.len(), s.len(n));
                    lens.push(o.len());
                    for i in o { seen[i] += 1; }
                }
                let total: usize = lens.iter().sum();
                let max = *lens.iter().max().unwrap_or(&0);
                let min = *lens.iter().min().unwrap_or(&0);
                match uneven {
                    Uneven::Pad => {
                        prop_assert!(seen.iter().all(|&c| c >= 1));
                        prop_assert_eq!(min, max);
                        prop_assert_eq!(total, n.div_ceil(shards) * shards);
                        // wrapping spreads the padding evenly: no sample comes up more
                        // than ceil(total / n) times
                        prop_assert!(seen.iter().all(|&c| c <= total.div_ceil(n)));
                    }
                    Uneven::Drop => {
                        prop_assert!(seen.iter().all(|&c| c <= 1));
                        prop_assert_eq!(min, max);
                        prop_assert_eq!(total, n / shards * shards);
                    }
                    Uneven::Exact => {
                        prop_assert!(seen.iter().all(|&c| c == 1));
                        prop_assert!(max - min <= 1);
                    }
                }
            }

            #[test]
            fn batch_counts_are_equal_across_shards_under_pad_and_drop(
                n in 1usize..300, shards in 1usize..9, bs in 1usize..40,
                drop_remainder in any::<bool>(), pad in any::<bool>()
            ) {
                let uneven = if pad { Uneven::Pad } else { Uneven::Drop };
                let counts: Vec<usize> = (0..shards).map(|id| {
                    let s = Sampling { num_shards: shards, shard_id: id, uneven,
                                       ..Sampling::default() };
                    batch_count(s.len(n), bs, drop_remainder)
                }).collect();
                prop_assert!(counts.iter().all(|&c| c == counts[0]));
                let len = Sampling { num_shards: shards, uneven, ..Sampling::default() }.len(n);
                let want = if drop_remainder { len / bs } else { len.div_ceil(bs) };
                prop_assert_eq!(counts[0], want);
            }
        }
    }

    #[test]
    fn num_samples_limits_each_shard() {
        let s = Sampling {
            num_samples: Some(3),
            ..sampling(false, 1, 0)
        };
        assert_eq!(s.order(10, 0, None), vec![0, 1, 2]);
        let s = Sampling {
            num_samples: Some(100),
            ..s
        };
        assert_eq!(s.order(10, 0, None).len(), 10);
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
