//! Range mode's use of the cache folder: the bytes of the samples that the **next** epoch
//! reads first, kept on disk as this epoch reads them, so that the next epoch reads them
//! from there instead of asking the store again.
//!
//! Range mode holds fetched bytes in memory only until their read, which leaves the cache
//! folder's room (`--cache-size`) unused. The order of the next epoch is known in advance
//! ([`super::AheadFiles::order`]), so the room goes to the samples whose next use is
//! nearest, Belady's rule: the first samples of the next epoch's order whose bytes fit.
//! Every sample is read once an epoch, so all of them pass through this epoch's reads and
//! are written then (at offsets planned when the file is reserved); the next epoch reads
//! them at its start, and its prefetchers skip them. With the cache at a fraction `f` of
//! the dataset, an epoch makes about `f` fewer requests.
//!
//! The file is a reservation of the cache ([`Cache::reserve`]: a temporary file at its full
//! size, counted against the limit, never evicted, removed when dropped or when found after
//! its process died). One file at a time: the next one is reserved when the reads of the
//! current one are done (early in its epoch), so the two never hold the room together;
//! samples of the next epoch's prefix read before that are not kept. A sample not written
//! (the run stopped, a write failed) or a read that fails is fetched from the store as
//! before: the bytes kept are exactly the bytes read, and every read checks its record as
//! before (a shard record's CRC-32).

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
}

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

impl Kept {
    /// Reserve room in `cache` for the first samples of `next` (the order of epoch
    /// `epoch`; sample `i` is `ranges[i]` bytes long) that fit it beside the files of
    /// `keep`: the most that fit, else (another process holds part of the room) what is
    /// free now. `None` when nothing fits.
    pub(super) fn reserve(
        cache: &Cache,
        keep: &[PathBuf],
        epoch: u64,
        next: &[usize],
        ranges: &[Range<u64>],
    ) -> Option<Kept> {
        let kept_files: u64 = keep
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        let mut tries = vec![cache.limit().saturating_sub(kept_files)];
        if let Ok(used) = cache.used() {
            tries.push(cache.limit().saturating_sub(used));
        }
        for room in tries {
            let (at, size) = plan(next, ranges, room);
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
        self.left = order.iter().filter(|i| self.at.contains_key(i)).count();
        self.left > 0
    }

    /// Whether sample `index` is read from here (written, its epoch planned with it): the
    /// prefetchers skip it.
    pub(super) fn serves(&self, index: usize) -> bool {
        self.at.contains_key(&index)
    }

    /// Where to read sample `index` (`len` bytes) from, while the file is held.
    pub(super) fn source(&self, index: usize, len: usize) -> Option<(Arc<File>, u64)> {
        let s = self.at.get(&index).filter(|s| s.written && s.len == len)?;
        let (_, file) = self.io.as_ref()?;
        Some((Arc::clone(file), s.offset))
    }

    /// One read from `file` done; true when it was the last (the file is removed).
    pub(super) fn used(&mut self, file: &Arc<File>) -> bool {
        if !self.io.as_ref().is_some_and(|(_, f)| Arc::ptr_eq(f, file)) {
            return false;
        }
        self.left = self.left.saturating_sub(1);
        if self.left == 0 {
            // The sample set stays: the prefetchers still skip its samples this epoch.
            self.io = None;
            return true;
        }
        false
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

    /// In a process forked from the one that reserved the file: leave the file (the
    /// parent's) alone.
    pub(super) fn forget(self) {
        std::mem::forget(self);
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
/// offsets; and the bytes they take.
fn plan(next: &[usize], ranges: &[Range<u64>], room: u64) -> (HashMap<usize, Slot>, u64) {
    let mut at = HashMap::new();
    let mut size = 0u64;
    for &i in next {
        if at.contains_key(&i) {
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
        let ranges: Vec<Range<u64>> = vec![0..10, 10..30, 30..35, 35..75];
        let (at, size) = plan(&[2, 1, 2, 0, 3], &ranges, 40);
        // 2 (5 bytes), 1 (20), 0 (10): 35; 3 (40 more) does not fit
        assert_eq!(size, 35);
        let mut keys: Vec<_> = at.keys().copied().collect();
        keys.sort_unstable();
        assert_eq!(keys, [0, 1, 2]);
        assert_eq!((at[&2].offset, at[&1].offset, at[&0].offset), (0, 5, 25));
        // Nothing fits: nothing planned.
        assert_eq!(plan(&[3], &ranges, 39).1, 0);
    }

    #[test]
    fn kept_samples_are_written_read_back_and_the_file_removed_after_the_last_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = super::super::StoreUrl::parse("http://127.0.0.1:9/ds").expect("url");
        let cache = Cache::open(Some(dir.path()), 100, &url, None).expect("cache");
        let ranges: Vec<Range<u64>> = vec![0..30, 30..70, 70..100, 100..150];
        let mut k = Kept::reserve(&cache, &[], 1, &[1, 0, 3, 2], &ranges).expect("room");
        // 1 (40) and 0 (30) fit the 100 bytes; 3 (50) does not
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
            assert_eq!(k.used(&f), last);
        }
        assert!(k.source(1, 40).is_none(), "released");
        assert!(k.serves(1), "still skipped by the prefetchers");
        assert_eq!(cache.used().expect("used"), 0, "the file is gone");
    }
}
