//! The epochs' orders a reader of a location in object storage is given: its own (to
//! prefetch and evict by), and another rank's of the same sampling (range mode's kept
//! samples are written by whichever rank of the node reads them, see `super::kept`).

use crate::plan::Sampling;

/// How the epochs read a location's samples.
#[derive(Clone)]
pub struct Orders {
    /// Epoch `e`'s order of rank `r` (`None`: this reader's own).
    of: std::sync::Arc<dyn Fn(u64, Option<usize>) -> Vec<usize> + Send + Sync>,
    /// This reader's rank (MindSpore's `shard_id`).
    pub rank: usize,
    /// The number of ranks (`num_shards`).
    pub ranks: usize,
    /// What the orders depend on beside the rank (the sampling's seed, shuffle, window,
    /// sample count): readers with the same key split the same orders.
    pub key: u64,
}

impl Orders {
    /// The orders `sampling` gives a source of `n` samples (`by_file`: the file of each
    /// sample, for a shard-aware window).
    pub fn sampled(sampling: Sampling, n: usize, by_file: Option<Vec<u32>>) -> Orders {
        let mut any_rank = sampling;
        any_rank.shard_id = 0;
        let key = u64::from(crc32fast::hash(format!("{n} {any_rank:?}").as_bytes()));
        Orders {
            of: std::sync::Arc::new(move |epoch, rank| {
                let mut s = sampling;
                if let Some(r) = rank {
                    s.shard_id = r;
                }
                s.order(n, epoch, by_file.as_deref())
            }),
            rank: sampling.shard_id,
            ranks: sampling.num_shards,
            key,
        }
    }

    /// The same `order` every epoch, one rank (tests).
    #[cfg(test)]
    pub fn fixed(order: Vec<usize>) -> Orders {
        Orders {
            of: std::sync::Arc::new(move |_, _| order.clone()),
            rank: 0,
            ranks: 1,
            key: 0,
        }
    }

    /// This reader's order of epoch `epoch`.
    pub fn of(&self, epoch: u64) -> Vec<usize> {
        (self.of)(epoch, None)
    }

    /// Rank `rank`'s order of epoch `epoch`.
    pub fn of_rank(&self, epoch: u64, rank: usize) -> Vec<usize> {
        (self.of)(epoch, Some(rank))
    }
}
