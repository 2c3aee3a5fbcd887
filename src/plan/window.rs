//! The shard-aware shuffle (`[source] shuffle_window = N`): an epoch's order that reads a
//! dataset made of multi-sample files (shards, container files) a window of `N` files at a
//! time, so that a cache holding `N` files (plus what is fetched ahead) keeps every read
//! local — in the spirit of mosaicml-streaming's `py1b`/`py1e` shuffles.
//!
//! Seeded by `(seed, epoch)`: the files are permuted; the permuted list is cut into
//! consecutive windows of `N` files; within each window all its samples are permuted;
//! the windows are concatenated. MindSpore's sharding rule then applies to that order
//! unchanged ([`super::Sampling::order`]: rank `s` takes positions `s, s + k, …`), so the
//! ranks of a node read the same window at the same time and share the node's cache.
//!
//! The files are the distinct values of the sample → file table, in increasing order; a
//! file without samples (an empty container file) takes no place in any window.
//! [`cache_need`] and [`window_that_fits`] are what a cache must hold for a window.

use crate::rng::{mix, SplitMix64};

/// Tag of the shard-aware shuffle's stream (the global shuffle's is `0x5348`).
const STREAM: u64 = 0x5357;

/// Fisher–Yates with `g`: the shuffle of both the global order and the windows.
pub(super) fn fisher_yates(v: &mut [usize], g: &mut SplitMix64) {
    for i in (1..v.len()).rev() {
        let j = g.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// The samples of each file: `(starts, members)`, file `f`'s samples (in index order)
/// being `members[starts[f]..starts[f + 1]]`; files numbered by increasing id, only
/// those that hold a sample.
fn group(file_of: &[u32]) -> (Vec<usize>, Vec<usize>) {
    let n = file_of.len();
    let max = file_of.iter().copied().max().map_or(0, |m| m as usize);
    // Dense ids (every reader's: 0..files) are counted directly; anything else is ranked.
    let (rank, files): (Box<dyn Fn(u32) -> usize>, usize) = if max <= n {
        (Box::new(|id| id as usize), max + 1)
    } else {
        let mut ids = file_of.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let files = ids.len();
        (
            Box::new(move |id| ids.binary_search(&id).unwrap_or(0)),
            files,
        )
    };
    let mut counts = vec![0usize; files];
    for &f in file_of {
        counts[rank(f)] += 1;
    }
    // Files without samples take no place: `ordinal` numbers the others.
    let mut ordinal = vec![usize::MAX; files];
    let mut starts = vec![0usize];
    for (f, &c) in counts.iter().enumerate() {
        if c > 0 {
            ordinal[f] = starts.len() - 1;
            starts.push(starts[starts.len() - 1] + c);
        }
    }
    let mut fill: Vec<usize> = starts[..starts.len() - 1].to_vec();
    let mut members = vec![0usize; n];
    for (i, &f) in file_of.iter().enumerate() {
        let o = ordinal[rank(f)];
        members[fill[o]] = i;
        fill[o] += 1;
    }
    (starts, members)
}

/// Epoch `epoch`'s order of the samples whose files are `file_of` (sample `i` is in file
/// `file_of[i]`), reading `window` files at a time (see the module).
pub fn permutation(file_of: &[u32], window: usize, seed: u64, epoch: u64) -> Vec<usize> {
    let (starts, members) = group(file_of);
    let files = starts.len() - 1;
    let mut g = SplitMix64::new(mix(&[seed, epoch, STREAM]));
    let mut file_order: Vec<usize> = (0..files).collect();
    fisher_yates(&mut file_order, &mut g);
    let mut out = Vec::with_capacity(file_of.len());
    for chunk in file_order.chunks(window.max(1)) {
        let from = out.len();
        for &f in chunk {
            out.extend_from_slice(&members[starts[f]..starts[f + 1]]);
        }
        fisher_yates(&mut out[from..], &mut g);
    }
    out
}

/// The windows of [`permutation`]: the files of each, in its order (for tests and
/// measurements: which files an order's stretch may read).
pub fn windows(file_of: &[u32], window: usize, seed: u64, epoch: u64) -> Vec<Vec<u32>> {
    let mut ids: Vec<u32> = file_of.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let mut g = SplitMix64::new(mix(&[seed, epoch, STREAM]));
    let mut file_order: Vec<usize> = (0..ids.len()).collect();
    fisher_yates(&mut file_order, &mut g);
    file_order
        .chunks(window.max(1))
        .map(|c| c.iter().map(|&f| ids[f]).collect())
        .collect()
}

/// The cache a window of `window` files needs: `keep` (an index, the names) plus the
/// `window + prefetch` largest of the files `sizes` (any window may be the largest files,
/// and the reader fetches `prefetch` files past the one it reads).
pub fn cache_need(sizes: &[u64], keep: u64, window: usize, prefetch: usize) -> u64 {
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    keep + sorted
        .iter()
        .take(window.saturating_add(prefetch))
        .sum::<u64>()
}

/// The largest window whose [`cache_need`] fits in `limit` (0: none does; the number of
/// files when the cache holds them all).
pub fn window_that_fits(sizes: &[u64], keep: u64, limit: u64, prefetch: usize) -> usize {
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let mut used = keep;
    for (taken, &s) in sorted.iter().enumerate() {
        used += s;
        if used > limit {
            return taken.saturating_sub(prefetch);
        }
    }
    if used > limit {
        0
    } else {
        sorted.len()
    }
}

/// A cache too small for a window of files (see [`check_room`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "--cache-size (source.cache_size) {limit} bytes cannot hold a shuffle window of {window} \
     files plus the {prefetch} fetched ahead (with the index and names): give at least {need} \
     bytes{}",
    fits_hint(*.fits)
)]
pub struct CacheShort {
    /// The cache's limit in bytes.
    pub limit: u64,
    /// The window asked for.
    pub window: usize,
    /// Files fetched past the one read.
    pub prefetch: usize,
    /// The least cache that holds the window.
    pub need: u64,
    /// The largest window this cache holds (0: none).
    pub fits: usize,
}

fn fits_hint(fits: usize) -> String {
    match fits {
        0 => String::new(),
        1 => ", or set shuffle_window = 1".into(),
        n => format!(", or set shuffle_window to {n} or less"),
    }
}

/// `Err` when a cache of `limit` bytes cannot hold `keep` and a window of `window` of the
/// files `sizes` plus the `prefetch` fetched ahead ([`cache_need`]): what a dataset read
/// from a store checks before its first batch.
pub fn check_room(
    sizes: &[u64],
    keep: u64,
    limit: u64,
    window: usize,
    prefetch: usize,
) -> Result<(), CacheShort> {
    let need = cache_need(sizes, keep, window, prefetch);
    if need <= limit {
        return Ok(());
    }
    Err(CacheShort {
        limit,
        window,
        prefetch,
        need,
        fits: window_that_fits(sizes, keep, limit, prefetch),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `files` files of `per` samples each, in file order (as a converted dataset).
    fn sorted_files(files: u32, per: usize) -> Vec<u32> {
        (0..files)
            .flat_map(|f| std::iter::repeat_n(f, per))
            .collect()
    }

    #[test]
    fn is_a_permutation_fixed_by_seed_and_changed_by_epoch() {
        let file_of = sorted_files(10, 7);
        let o = permutation(&file_of, 3, 42, 1);
        assert_eq!(o, permutation(&file_of, 3, 42, 1));
        assert_ne!(o, permutation(&file_of, 3, 42, 2));
        assert_ne!(o, permutation(&file_of, 3, 43, 1));
        let mut sorted = o.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..70).collect::<Vec<_>>());
    }

    #[test]
    fn each_window_holds_exactly_the_samples_of_its_files() {
        // uneven files, interleaved ids, an id without samples, a sparse id
        let mut file_of = sorted_files(9, 5);
        file_of.extend([3, 3, 8, 1_000_000, 1_000_000]);
        file_of.swap(0, 44);
        for window in [1, 2, 4, 20] {
            let o = permutation(&file_of, window, 7, 3);
            let ws = windows(&file_of, window, 7, 3);
            let mut at = 0;
            for w in &ws {
                let want: usize = file_of.iter().filter(|f| w.contains(f)).count();
                let stretch = &o[at..at + want];
                assert!(
                    stretch.iter().all(|&i| w.contains(&file_of[i])),
                    "window {w:?} of {window}: {stretch:?}"
                );
                at += want;
            }
            assert_eq!(at, file_of.len());
            assert!(ws.iter().all(|w| w.len() <= window));
            assert_eq!(ws.iter().map(Vec::len).sum::<usize>(), 10);
        }
    }

    #[test]
    fn a_window_of_every_file_is_still_a_shuffle_and_samples_move_within_windows() {
        let file_of = sorted_files(4, 25);
        let o = permutation(&file_of, 4, 1, 0);
        assert_ne!(o, (0..100).collect::<Vec<_>>());
        // window 1: each file's samples are consecutive, in a shuffled order
        let o = permutation(&file_of, 1, 1, 0);
        for chunk in o.chunks(25) {
            assert!(chunk.iter().all(|&i| file_of[i] == file_of[chunk[0]]));
            assert_ne!(chunk.to_vec(), {
                let mut s = chunk.to_vec();
                s.sort_unstable();
                s
            });
        }
    }

    #[test]
    fn the_cache_need_counts_the_largest_files_and_the_fit_inverts_it() {
        let sizes = [5, 1, 9, 3, 7];
        assert_eq!(cache_need(&sizes, 2, 1, 2), 2 + 9 + 7 + 5);
        assert_eq!(cache_need(&sizes, 0, 10, 2), 25);
        for limit in 0..40 {
            let w = window_that_fits(&sizes, 2, limit, 2);
            if w > 0 {
                assert!(cache_need(&sizes, 2, w, 2) <= limit, "{limit}: {w}");
            }
            if w < sizes.len() {
                assert!(cache_need(&sizes, 2, w + 1, 2) > limit, "{limit}: {w}");
            }
        }
        assert_eq!(window_that_fits(&sizes, 2, 2 + 9 + 7 + 5, 2), 1);
        assert_eq!(window_that_fits(&sizes, 2, 2 + 9 + 7, 2), 0);
        assert_eq!(check_room(&sizes, 2, 26, 1, 2), Ok(()));
        let e = check_room(&sizes, 2, 26, 3, 2).expect_err("too small");
        assert_eq!((e.need, e.fits), (27, 2));
        let text = e.to_string();
        assert!(text.contains("give at least 27 bytes"), "{text}");
        assert!(text.contains("shuffle_window to 2 or less"), "{text}");
    }

    /// The order, then MindSpore's sharding unchanged: ranks are disjoint and cover the
    /// epoch (exact), and rank `s`'s `j`-th sample is the order's position `s + j·k`, so the
    /// ranks read one window at a time together.
    #[test]
    fn sharding_applies_to_the_windowed_order_unchanged() {
        use crate::plan::{Sampling, Uneven};
        let file_of = sorted_files(12, 9);
        let n = file_of.len();
        let base = Sampling {
            shuffle: true,
            seed: 5,
            shuffle_window: Some(3),
            uneven: Uneven::Exact,
            num_shards: 4,
            ..Sampling::default()
        };
        let all = base.permutation(n, 2, Some(&file_of));
        assert_eq!(all, permutation(&file_of, 3, 5, 2));
        let mut seen = vec![0; n];
        for id in 0..4 {
            let s = Sampling {
                shard_id: id,
                ..base
            };
            let o = s.order(n, 2, Some(&file_of));
            for (j, &i) in o.iter().enumerate() {
                assert_eq!(i, all[id + j * 4]);
                seen[i] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c == 1));
        // without files (or without a window) the shuffle is the global one
        let global = Sampling {
            shuffle_window: None,
            ..base
        };
        assert_eq!(
            base.permutation(n, 2, None),
            global.permutation(n, 2, Some(&file_of))
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn windows_partition_the_order(
                file_of in proptest::collection::vec(0u32..12, 1..200),
                window in 1usize..6, seed in any::<u64>(), epoch in 0u64..100
            ) {
                let o = permutation(&file_of, window, seed, epoch);
                let mut sorted = o.clone();
                sorted.sort_unstable();
                prop_assert_eq!(sorted, (0..file_of.len()).collect::<Vec<_>>());
                let mut at = 0;
                for w in windows(&file_of, window, seed, epoch) {
                    let want = file_of.iter().filter(|f| w.contains(f)).count();
                    prop_assert!(o[at..at + want].iter().all(|&i| w.contains(&file_of[i])));
                    at += want;
                }
                prop_assert_eq!(at, file_of.len());
            }
        }
    }
}
