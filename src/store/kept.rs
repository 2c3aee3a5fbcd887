//! Range mode's use of the cache folder: the bytes of the samples that the **next** epoch
//! reads first, kept on disk as this epoch reads them, so that the next epoch reads them
//! from there instead of asking the store again.
//!
//! Range mode holds fetched bytes in memory only until their read, which leaves the cache
//! folder's room (`--cache-size`) unused. The order of the next epoch is known in advance
//! ([`super::AheadFiles::order`]), so the room goes to the samples whose next use is
//! nearest, Belady's rule: the first samples of the next epoch's order whose bytes fit,
//! among those this epoch still reads (in a sharded epoch, a rank reads only its part, and
//! can keep only what it reads). They are written as they pass through this epoch's reads
//! (at offsets planned when the file is reserved); the next epoch reads them at its start,
//! and its prefetchers skip them.
//!
//! The file is a reservation of the cache ([`Cache::reserve`]: a temporary file at its full
//! size, counted against the limit, never evicted, removed when dropped or when found after
//! its process died). One file at a time: the next one is reserved when the reads of the
//! current one are done (early in its epoch, at about position `f·N` with the cache at a
//! fraction `f` of the dataset's `N` samples), so the two never hold the room together;
//! it plans only samples this epoch has not read yet, among the first half of the next
//! order ([`plan`] says why). Measured over 10 epochs with the cache at 10%, 30% and 63%
//! of the dataset: 10% of every later epoch's samples came from the file; 30% for three
//! epochs, then 25%; 50%, then 25%; and as many fewer requests were made (BENCHMARKS.md). A sample not written (the run stopped, a write failed) or a read that
//! fails is fetched from the store as before: the bytes kept are exactly the bytes read,
//! and every read checks its record as before (a shard record's CRC-32).
//!
//! Several readers share a folder (the ranks of a node): each [`join`]s it when its first
//! epoch starts and plans within its share of the room ([`sharers`]), so that no rank
//! keeps everything while another keeps nothing (a synchronous trainer waits on the
//! slowest).

use super::cache::{Cache, CacheKey, Pending};
use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

/// Where one sample's bytes are in the file.
struct Slot {
    offset: u64,
    len: usize,
    written: bool,
    /// Reads of it still to come from the file in its epoch.
    uses: u32,
}

/// A kept file let go of: dropped (the file removed) once the state's lock is released.
pub(super) struct Released(#[allow(dead_code)] Option<(Pending, Arc<File>)>);

/// The kept samples of one epoch, and their file while it is held.
pub(super) struct Kept {
    /// The epoch that reads them.
    epoch: u64,
    /// The reserved file (removed on drop), and a handle to read and write it at offsets.
    io: Option<(Pending, Arc<File>)>,
    at: HashMap<usize, Slot>,
    /// Reads of `epoch` still to come from the file.
    left: usize,
}

/// The name of the empty file by which a process reading in range mode joins the cache
/// folder ([`join`]); [`Cache::holders`] counts them.
const READER: &str = "ranges-reader";

/// Join `cache`'s folder as one of the readers that share its room for kept samples:
/// an empty file of this process, removed when the returned reservation is dropped (or
/// found after the process died). `None` when it cannot be made (then this reader is
/// not counted, and takes its share as if alone).
pub(super) fn join(cache: &Cache) -> Option<Pending> {
    let key = CacheKey {
        name: READER,
        size: 0,
        crc32: 0,
        checked: false,
        listed_by: "range mode",
    };
    match cache.reserve(&key, &[]) {
        Ok((Ok(pending), _)) => Some(pending),
        _ => None,
    }
}

/// How many readers share `cache`'s room now (those that [`join`]ed it, of live
/// processes; at least 1).
pub(super) fn sharers(cache: &Cache) -> u64 {
    cache.holders(READER).max(1) as u64
}

impl Kept {
    /// Reserve room in `cache` for the first samples of `next` (the order of epoch
    /// `epoch`; sample `i` is `ranges[i]` bytes long) that fit this process's share of it
    /// beside the files of `keep`, but those `read` marks (`read[i]`: read already, or
    /// not read by this process at all: they will not pass by again before `epoch`).
    /// The share is the room divided among the `sharers` readers of the folder, so that
    /// ranks of one node sharing it keep alike. When others hold more than theirs (they
    /// planned before this reader joined), what is free now, if that is at least half the
    /// share. `None` when nothing fits.
    pub(super) fn reserve(
        cache: &Cache,
        keep: &[PathBuf],
        epoch: u64,
        next: &[usize],
        ranges: &[Range<u64>],
        read: &[bool],
        sharers: u64,
    ) -> Option<Kept> {
        let kept_files: u64 = keep
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        let share = cache.limit().saturating_sub(kept_files) / sharers.max(1);
        let mut tries = vec![share];
        // Less than half the share free: none (the caller tries again later), rather than
        // a crumb that would hold this reader to it for an epoch.
        let free = cache
            .used()
            .map_or(0, |used| cache.limit().saturating_sub(used));
        if free >= share / 2 {
            tries.push(share.min(free));
        }
        for room in tries {
            let (at, size) = plan(next, ranges, read, room);
            if size == 0 {
                continue;
            }
            let key = CacheKey {
                name: "ranges-kept",
                size,
                crc32: epoch as u32,
                checked: false,
                listed_by: "range mode",
            };
            if let Ok((Ok(mut pending), _)) = cache.reserve(&key, keep) {
                let Some(file) = pending.file().and_then(|f| f.try_clone().ok()) else {
                    continue;
                };
                return Some(Kept {
                    epoch,
                    io: Some((pending, Arc::new(file))),
                    at,
                    left: 0,
                });
            }
        }
        None
    }

    /// The epoch that reads these samples.
    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Its epoch starts, reading `order`: forget what was not written and count the reads
    /// to come. False when none will come from the file (drop it).
    pub(super) fn start(&mut self, order: &[usize]) -> bool {
        self.at.retain(|_, s| s.written);
        self.left = 0;
        for i in order {
            if let Some(s) = self.at.get_mut(i) {
                s.uses += 1;
                self.left += 1;
            }
        }
        self.at.retain(|_, s| s.uses > 0);
        self.left > 0
    }

    /// Whether sample `index` is read from here (written, its epoch planned with it): the
    /// prefetchers skip it.
    pub(super) fn serves(&self, index: usize) -> bool {
        self.at.contains_key(&index)
    }

    /// Where to read sample `index` (`len` bytes) from, while the file is held and reads
    /// of it are still to come.
    pub(super) fn source(&self, index: usize, len: usize) -> Option<(Arc<File>, u64)> {
        let s = self
            .at
            .get(&index)
            .filter(|s| s.written && s.len == len && s.uses > 0)?;
        let (_, file) = self.io.as_ref()?;
        Some((Arc::clone(file), s.offset))
    }

    /// A read of sample `index` from `file` done (`ok`: it got the bytes; otherwise its
    /// later reads are given up too, and it is fetched like any sample). Returns the file
    /// when that was the last read to come (to drop once the lock is released: it is
    /// removed then).
    pub(super) fn used(&mut self, index: usize, file: &Arc<File>, ok: bool) -> Option<Released> {
        if !self.io.as_ref().is_some_and(|(_, f)| Arc::ptr_eq(f, file)) {
            return None;
        }
        let s = self.at.get_mut(&index)?;
        let done = if ok { s.uses.min(1) } else { s.uses };
        s.uses -= done;
        self.left = self.left.saturating_sub(done as usize);
        if !ok {
            // Not served from here any more: the prefetchers may plan it.
            self.at.remove(&index);
        }
        // The other samples stay: the prefetchers still skip them this epoch.
        (self.left == 0).then(|| Released(self.io.take()))
    }

    /// Where to write sample `index` (`len` bytes read), when it is kept and not yet
    /// written.
    pub(super) fn wants(&self, index: usize, len: usize) -> Option<(Arc<File>, u64)> {
        let s = self.at.get(&index).filter(|s| !s.written && s.len == len)?;
        let (_, file) = self.io.as_ref()?;
        Some((Arc::clone(file), s.offset))
    }

    /// Sample `index` was written to `file`.
    pub(super) fn written(&mut self, index: usize, file: &Arc<File>) {
        if self.io.as_ref().is_some_and(|(_, f)| Arc::ptr_eq(f, file)) {
            if let Some(s) = self.at.get_mut(&index) {
                s.written = true;
            }
        }
    }

    /// In a process forked from the one that reserved the file: close this process's
    /// handles and leave the file (the parent's) alone.
    pub(super) fn forget(mut self) {
        if let Some((pending, file)) = self.io.take() {
            drop(file);
            pending.leave();
        }
    }

    /// Let go of the file (to drop once the lock is released).
    pub(super) fn release(mut self) -> Released {
        Released(self.io.take())
    }
}

/// Read `len` bytes at `offset` of `file` into `scratch`.
pub(super) fn read(file: &File, offset: u64, len: usize, scratch: &mut Vec<u8>) -> bool {
    scratch.clear();
    scratch.resize(len, 0);
    file.read_exact_at(scratch, offset).is_ok()
}

/// Write `bytes` at `offset` of `file`.
pub(super) fn write(file: &File, offset: u64, bytes: &[u8]) -> bool {
    file.write_all_at(bytes, offset).is_ok()
}

/// The first samples of `next` whose bytes fit `room`, each once, at consecutive
/// offsets, leaving out those `read` marks (they do not pass by before), from the first half of `next` only; and the
/// bytes they take.
///
/// The half keeps the plan steady from epoch to epoch. The file is planned when the reads
/// of the previous one are done, at the position `x` of its epoch where the last kept
/// sample was read, and only unread samples (a share `1 - x`) can be kept; a plan that
/// filled the room wherever it had to reach would end at position `f / (1 - x)` of the
/// next order (the cache at a fraction `f` of the data), which is that epoch's `x`. For
/// `f` above 1/4 that grows until a file is planned after everything was read, and the
/// epoch after it keeps nothing (measured: 30% kept for six epochs, then 0-20%). Capped
/// at the half, `x` settles at or below 1/2: every epoch keeps `f` of the samples for `f`
/// up to about 1/4, and about 1/4 above.
fn plan(
    next: &[usize],
    ranges: &[Range<u64>],
    read: &[bool],
    room: u64,
) -> (HashMap<usize, Slot>, u64) {
    let mut at = HashMap::new();
    let mut size = 0u64;
    for &i in &next[..next.len().div_ceil(2)] {
        if at.contains_key(&i) || read.get(i).copied().unwrap_or(false) {
            continue;
        }
        let Some(r) = ranges.get(i) else { continue };
        let len = r.end.saturating_sub(r.start);
        if size + len > room {
            break;
        }
        at.insert(
            i,
            Slot {
                offset: size,
                len: len as usize,
                written: false,
                uses: 0,
            },
        );
        size += len;
    }
    (at, size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_takes_the_next_epochs_first_samples_that_fit_once_each() {
        let ranges: Vec<Range<u64>> = vec![0..10, 10..30, 30..35, 35..75, 75..76, 76..77];
        let (at, size) = plan(&[2, 1, 2, 0, 3, 4], &ranges, &[], 40);
        // 2 (5 bytes), 1 (20): 25; 0 (10 more) is past the first half
        assert_eq!(size, 25);
        let mut keys: Vec<_> = at.keys().copied().collect();
        keys.sort_unstable();
        assert_eq!(keys, [1, 2]);
        assert_eq!((at[&2].offset, at[&1].offset), (0, 5));
        // Nothing fits: nothing planned.
        assert_eq!(plan(&[3, 0], &ranges, &[], 39).1, 0);
        // Samples read already (1) pass their room to the next ones of the first half.
        let (at, size) = plan(
            &[2, 1, 0, 4, 3, 5],
            &ranges,
            &[false, true, false, false, false, false],
            60,
        );
        assert_eq!(size, 15);
        assert!(!at.contains_key(&1) && at.contains_key(&0) && !at.contains_key(&4));
    }

    /// A permutation of `0..n` from `seed` (Fisher-Yates on a 64-bit LCG).
    fn permutation(n: usize, seed: u64) -> Vec<usize> {
        let mut v: Vec<usize> = (0..n).collect();
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        for i in (1..n).rev() {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            v.swap(i, (x >> 33) as usize % (i + 1));
        }
        v
    }

    #[test]
    fn the_share_kept_settles_from_epoch_to_epoch_whatever_the_cache() {
        // 2000 samples of one byte; each next file planned when the reads of the current
        // one are done, without the samples read by then, as the epochs do. (Planned from
        // the whole next order, the 600-byte room kept 600 samples for five epochs, then
        // 268, 15, 122, 12, 298, 3.)
        let n = 2000;
        let ranges: Vec<Range<u64>> = (0..n as u64).map(|i| i..i + 1).collect();
        for (room, least) in [(200u64, 190usize), (600, 450), (1260, 450)] {
            let mut read = vec![false; n];
            let mut shares = Vec::new();
            for e in 1..12u64 {
                let order = permutation(n, e);
                let (at, _) = plan(&order, &ranges, &read, room);
                shares.push(at.len());
                // That epoch reads the kept samples by its last kept one's position.
                let x = order
                    .iter()
                    .rposition(|i| at.contains_key(i))
                    .map_or(0, |p| p + 1);
                read = vec![false; n];
                for &i in &order[..x] {
                    read[i] = true;
                }
            }
            assert!(
                shares.iter().all(|&k| k >= least),
                "room {room}: samples kept epoch after epoch {shares:?}"
            );
        }
    }

    #[test]
    fn readers_sharing_the_folder_reserve_their_share_and_dead_ones_are_not_counted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = super::super::StoreUrl::parse("http://127.0.0.1:9/ds").expect("url");
        let cache = Cache::open(Some(dir.path()), 100, &url, None).expect("cache");
        let ranges: Vec<Range<u64>> = (0..10u64).map(|i| i * 10..i * 10 + 10).collect();
        let order: Vec<usize> = (0..10).collect();
        let a = join(&cache).expect("joined");
        assert_eq!(sharers(&cache), 1);
        let b = join(&cache).expect("joined");
        // A reader of a process that died (the child below, waited for) is not counted,
        // and its file goes.
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let dead = child.id();
        child.wait().expect("wait");
        let stale = cache.dir().join(format!(".{READER}.00000000.tmp.{dead}.0"));
        std::fs::write(&stale, b"").expect("stale file");
        assert_eq!(sharers(&cache), 2);
        assert!(!stale.exists(), "a dead reader's file is removed");
        // Each of the two takes half the room: 5 of the 10-byte samples (the first half
        // of the order), then the other's half is all there is.
        let first = Kept::reserve(&cache, &[], 1, &order, &ranges, &[], 2).expect("room");
        assert_eq!(cache.used().expect("used"), 50);
        let second = Kept::reserve(&cache, &[], 1, &order, &ranges, &[], 2).expect("room");
        assert_eq!(cache.used().expect("used"), 100);
        // A third that finds the room taken keeps nothing.
        assert!(Kept::reserve(&cache, &[], 1, &order, &ranges, &[], 3).is_none());
        drop(second.release());
        // Nor one whose share is 50 where 50 are free, but not one of its samples fits
        // before a sample of 60 bytes that it would keep first.
        let big: Vec<Range<u64>> = vec![0..60, 60..70];
        assert!(Kept::reserve(&cache, &[], 1, &[0, 1], &big, &[], 2).is_none());
        // A crumb of its share is not taken either: 30 of 100 left for a share of 100.
        let crumbs = Kept::reserve(&cache, &[], 1, &order[..2], &ranges, &[], 1);
        let taken = Kept::reserve(&cache, &[], 1, &order[2..], &ranges, &[], 5);
        assert!(crumbs.is_some() && taken.is_some(), "10 + 20 bytes");
        assert_eq!(cache.used().expect("used"), 80);
        assert!(Kept::reserve(&cache, &[], 1, &order, &ranges, &[], 1).is_none());
        drop((
            first.release(),
            crumbs.map(Kept::release),
            taken.map(Kept::release),
        ));
        // One who planned alone (the room whole) leaves the next what is free.
        let alone = Kept::reserve(&cache, &[], 1, &order, &ranges, &[], 1).expect("room");
        assert_eq!(
            cache.used().expect("used"),
            50,
            "the first half of the order"
        );
        let late = Kept::reserve(&cache, &[], 1, &order[..4], &ranges, &[], 2).expect("room");
        assert_eq!(
            cache.used().expect("used"),
            70,
            "2 of the 4 samples' first half"
        );
        drop((alone.release(), late.release(), a));
        assert_eq!(sharers(&cache), 1);
        drop(b);
        assert_eq!(cache.used().expect("used"), 0, "nothing left");
    }

    #[test]
    fn a_failed_read_gives_up_the_samples_later_reads_and_a_child_leaves_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = super::super::StoreUrl::parse("http://127.0.0.1:9/ds").expect("url");
        let cache = Cache::open(Some(dir.path()), 100, &url, None).expect("cache");
        let ranges: Vec<Range<u64>> = vec![0..30, 30..70];
        // (both in the first half of the next order)
        let mut k = Kept::reserve(&cache, &[], 1, &[0, 1, 0, 1], &ranges, &[], 1).expect("room");
        for (i, len) in [(0, 30), (1, 40)] {
            let (f, off) = k.wants(i, len).expect("kept");
            assert!(write(&f, off, &vec![1; len]));
            k.written(i, &f);
        }
        assert!(k.start(&[0, 1, 0]));
        let (f, _) = k.source(0, 30).expect("held");
        // Sample 0's read failed: both its reads are given up, and it is fetched.
        assert!(k.used(0, &f, false).is_none(), "sample 1 is still to come");
        assert!(!k.serves(0) && k.source(0, 30).is_none());
        // A read the epoch did not count (sample 0 again) changes nothing.
        assert!(k.used(0, &f, true).is_none());
        assert!(k.source(1, 40).is_some());
        // A forked child closes its handles and leaves the file to the parent.
        k.forget();
        assert_eq!(cache.used().expect("used"), 70, "still there");
    }

    #[test]
    fn kept_samples_are_written_read_back_and_the_file_removed_after_the_last_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = super::super::StoreUrl::parse("http://127.0.0.1:9/ds").expect("url");
        let cache = Cache::open(Some(dir.path()), 100, &url, None).expect("cache");
        let ranges: Vec<Range<u64>> = vec![0..30, 30..70, 70..100, 100..150];
        let mut k = Kept::reserve(&cache, &[], 1, &[1, 0, 3, 2], &ranges, &[], 1).expect("room");
        // 1 (40) and 0 (30), the first half of the order, fit the 100 bytes
        assert_eq!(cache.used().expect("used"), 70, "reserved at its full size");
        let (f, off) = k.wants(1, 40).expect("kept");
        assert!(write(&f, off, &[7; 40]));
        k.written(1, &f);
        assert!(k.wants(1, 40).is_none(), "written once");
        assert!(k.wants(3, 50).is_none(), "not kept");
        // Its epoch reads 1 twice and 0 (never written: fetched as before).
        assert!(k.start(&[1, 2, 1, 0]));
        assert!(k.serves(1) && !k.serves(0));
        let mut scratch = Vec::new();
        for last in [false, true] {
            let (f, off) = k.source(1, 40).expect("held");
            assert!(read(&f, off, 40, &mut scratch));
            assert_eq!(scratch, [7; 40]);
            let released = k.used(1, &f, true);
            assert_eq!(released.is_some(), last);
        }
        assert!(k.source(1, 40).is_none(), "released");
        assert!(k.serves(1), "still skipped by the prefetchers");
        assert_eq!(cache.used().expect("used"), 0, "the file is gone");
    }
}
