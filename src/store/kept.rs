//! Range mode's use of the cache folder: the bytes of the samples that the **next** epoch
//! reads first, kept on disk as this epoch reads them, so that the next epoch reads them
//! from there instead of asking the store again.
//!
//! Range mode holds fetched bytes in memory only until their read, which leaves the cache
//! folder's room (`--cache-size`) unused. The order of the next epoch is known in advance
//! ([`super::AheadFiles::order`]), so the room goes to the samples whose next use is
//! nearest, Belady's rule: the first samples of the next epoch's order whose bytes fit,
//! among those a reader of the folder still reads this epoch. They are written as they
//! pass through this epoch's reads (at offsets planned when the file is reserved); the
//! next epoch reads them at its start, and its prefetchers skip them.
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
//! epoch starts (a file naming its rank, and how far it is, rewritten every 64th of its
//! epoch), and plans within its share of the room ([`readers`]), so that no rank keeps
//! everything while another keeps nothing (a synchronous trainer waits on the slowest).
//! And they **pool** what they read: in a sharded epoch a rank reads only `1/k` of the
//! samples, so alone it could keep only `1/k` of its next epoch's first samples. Its file
//! therefore ends with its plan (which sample at which offset, and a byte per sample set
//! once written), and the other readers with the same orders ([`peer_plans`], looked for
//! every 64th of their epoch) write the samples of it they read: each sample's bytes, then
//! its byte. A rank plans from the samples that any rank of the node still reads this
//! epoch: the ranks' orders are known (MindSpore's rule on the seeded permutation), and
//! each other rank's from a 32nd of the epoch past where it last said it was. When its
//! epoch starts it takes the samples whose byte is set; one written later, or never (a
//! rank that had read it already, a rank of another node), is fetched as before. The
//! folder must be on a local file system (as the cache's other rules assume): a byte seen
//! set then means the bytes before it were written.

use super::cache::{Cache, CacheKey, Pending};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where one sample's bytes are in the file.
struct Slot {
    offset: u64,
    len: usize,
    written: bool,
    /// Written by another reader of the folder (a rank that read it this epoch).
    by_other: bool,
    /// Reads of it still to come from the file in its epoch.
    uses: u32,
    /// Its place in the file's plan (and its flag's).
    entry: usize,
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
    /// Bytes of the samples (the plan and the flags follow them).
    data: u64,
    /// Samples planned.
    entries: usize,
}

/// Where a kept sample's bytes go: its offset in a kept file (this reader's or another
/// one's), and the byte that says they are written.
#[derive(Clone)]
pub(super) struct Target {
    file: Arc<File>,
    offset: u64,
    len: usize,
    flag: u64,
}

impl Target {
    /// Write `bytes` (the sample's, as read), then mark them written. The mark is written
    /// after the bytes, so a reader that sees it reads them whole; a write that fails or
    /// stops halfway leaves no mark, and the sample is fetched as before.
    pub(super) fn write(&self, bytes: &[u8]) -> bool {
        bytes.len() == self.len
            && self.file.write_all_at(bytes, self.offset).is_ok()
            && self.file.write_all_at(&[1], self.flag).is_ok()
    }

    /// The kept file it writes into.
    pub(super) fn file(&self) -> &Arc<File> {
        &self.file
    }
}

/// The name of the empty file by which a process reading in range mode joins the cache
/// folder ([`join`]); [`readers`] reads them ([`Cache::held`]).
const READER: &str = "ranges-reader";

/// The kept files' name.
const KEPT: &str = "ranges-kept";

/// What follows a kept file's samples, so that the other readers of the folder can write
/// into it: the plan, an entry per sample (`index`, `offset`, `len`: three little-endian
/// `u64`), a byte per entry set once its sample is written, and the footer ([`MAGIC`],
/// then the readers' key, the epoch, the entries and the samples' bytes, `u64` each).
const MAGIC: &[u8; 8] = b"imgfkept";
const ENTRY: u64 = 24;
const FOOTER: u64 = 40;

/// The bytes of the plan, the flags and the footer of a file of `entries` samples.
fn tail(entries: usize) -> u64 {
    entries as u64 * (ENTRY + 1) + FOOTER
}

/// A reader's file in the folder ([`join`]): its key (what its orders depend on: readers
/// with the same key read the same epochs' orders), its rank, and how far it is (the
/// epoch, and the position in its rank's order of it), as one line of fixed width, so
/// that [`Member::at`] rewrites it in place.
fn member_line(key: u64, rank: usize, epoch: u64, position: usize) -> String {
    format!("{key:016x} {rank:010} {epoch:020} {position:020}\n")
}

/// Its length.
const MEMBER_LINE: usize = 16 + 1 + 10 + 1 + 20 + 1 + 20 + 1;

/// This process's place among the readers sharing a folder ([`join`]).
pub(super) struct Member {
    /// Removed when dropped.
    pending: Pending,
    handle: MemberHandle,
}

impl Member {
    /// A handle to its file, to say how far this reader is outside the state's lock.
    pub(super) fn handle(&self) -> MemberHandle {
        self.handle.clone()
    }

    /// In a forked child: close this process's handle and leave the file (the parent's).
    pub(super) fn leave(self) {
        self.pending.leave();
    }
}

/// A handle to a [`Member`]'s file.
#[derive(Clone)]
pub(super) struct MemberHandle {
    file: Arc<File>,
    key: u64,
    rank: usize,
}

impl MemberHandle {
    /// Say how far this reader is: `position` in its order of epoch `epoch` (the other
    /// readers plan by it, see [`readers`]).
    pub(super) fn at(&self, epoch: u64, position: usize) {
        let line = member_line(self.key, self.rank, epoch, position);
        let _ = self.file.write_all_at(line.as_bytes(), 0);
    }
}

/// Join `cache`'s folder as one of the readers that share its room for kept samples:
/// a file of this process naming `key`, its `rank` and how far it is (at `position` of
/// epoch `epoch`), removed when the returned member is dropped (or found after the process
/// died). `None` when it cannot be made (then this reader is not counted, and takes its
/// share as if alone).
pub(super) fn join(
    cache: &Cache,
    key: u64,
    rank: usize,
    epoch: u64,
    position: usize,
) -> Option<Member> {
    let key_entry = CacheKey {
        name: READER,
        size: 0,
        crc32: 0,
        checked: false,
        listed_by: "range mode",
    };
    match cache.reserve(&key_entry, &[]) {
        Ok((Ok(mut pending), _)) => {
            let handle = MemberHandle {
                file: Arc::new(pending.file()?.try_clone().ok()?),
                key,
                rank,
            };
            handle.at(epoch, position);
            Some(Member { pending, handle })
        }
        _ => None,
    }
}

/// Another reader with the same key ([`readers`]): its rank, and how far it said it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Peer {
    pub rank: usize,
    pub epoch: u64,
    pub position: usize,
}

/// The readers sharing a folder's room ([`readers`]).
pub(super) struct Readers {
    /// How many (those that [`join`]ed it, of live processes; at least 1).
    pub count: u64,
    /// The bytes of their files.
    pub bytes: u64,
    /// Those with the caller's key, each rank once (the least advanced of its readers).
    pub peers: Vec<Peer>,
}

/// The readers that share `cache`'s room now, and those reading with `key`.
pub(super) fn readers(cache: &Cache, key: u64) -> Readers {
    let held = cache.held(READER);
    let mut peers: Vec<Peer> = held
        .iter()
        .filter_map(|(path, _)| {
            let mut line = [0u8; MEMBER_LINE];
            let got = File::open(path).ok()?.read_at(&mut line, 0).ok()?;
            let text = std::str::from_utf8(line.get(..got)?).ok()?;
            let mut fields = text.split_whitespace();
            (u64::from_str_radix(fields.next()?, 16).ok()? == key).then_some(())?;
            Some(Peer {
                rank: fields.next()?.parse().ok()?,
                epoch: fields.next()?.parse().ok()?,
                position: fields.next()?.parse().ok()?,
            })
        })
        .collect();
    peers.sort_unstable_by_key(|p| (p.rank, p.epoch, p.position));
    peers.dedup_by_key(|p| p.rank);
    Readers {
        count: held.len().max(1) as u64,
        bytes: held.iter().map(|(_, size)| size).sum(),
        peers,
    }
}

impl Kept {
    /// Reserve room in `cache` for the first samples of `next` (the order of epoch
    /// `epoch`; sample `i` is `len_of(i)` bytes long) that fit this process's share of it
    /// beside the files of `keep`, but those `read` marks (`read[i]`: read already, or
    /// read by no reader of the folder before `epoch`: they will not pass by again).
    /// The share is the room divided among the `readers` of the folder, so that ranks of
    /// one node sharing it keep alike. When others hold more than theirs (they planned
    /// before this reader joined), what is free now, if that is at least half the share.
    /// The file ends with its plan (`key`: the readers' key), for the other readers to
    /// write what they read of it ([`peer_plans`]). `None` when nothing fits.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reserve(
        cache: &Cache,
        keep: &[PathBuf],
        epoch: u64,
        next: &[usize],
        len_of: &dyn Fn(usize) -> Option<u64>,
        read: &[bool],
        readers: &Readers,
        key: u64,
    ) -> Option<Kept> {
        let kept_files: u64 = keep
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        let share = cache
            .limit()
            .saturating_sub(kept_files)
            .saturating_sub(readers.bytes)
            / readers.count.max(1);
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
            let (at, planned, data) = plan(next, len_of, read, room);
            if planned.is_empty() {
                continue;
            }
            let entry = CacheKey {
                name: KEPT,
                size: data + tail(planned.len()),
                crc32: epoch as u32,
                checked: false,
                listed_by: "range mode",
            };
            if let Ok((Ok(mut pending), _)) = cache.reserve(&entry, keep) {
                let Some(file) = pending.file().and_then(|f| f.try_clone().ok()) else {
                    continue;
                };
                let mut end = Vec::with_capacity(tail(planned.len()) as usize);
                for &(i, offset, len) in &planned {
                    for v in [i as u64, offset, len as u64] {
                        end.extend_from_slice(&v.to_le_bytes());
                    }
                }
                end.resize(end.len() + planned.len(), 0);
                end.extend_from_slice(MAGIC);
                for v in [key, epoch, planned.len() as u64, data] {
                    end.extend_from_slice(&v.to_le_bytes());
                }
                // Without its plan the others cannot write into it; this reader still can.
                let _ = file.write_all_at(&end, data);
                return Some(Kept {
                    epoch,
                    io: Some((pending, Arc::new(file))),
                    at,
                    left: 0,
                    data,
                    entries: planned.len(),
                });
            }
        }
        None
    }

    /// The epoch that reads these samples.
    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The file's path, while it is held.
    pub(super) fn path(&self) -> Option<&Path> {
        self.io.as_ref().map(|(p, _)| p.path())
    }

    /// Its epoch starts, reading `order`: take the samples the other readers wrote (their
    /// flags), forget what was not written, and count the reads to come. False when none
    /// will come from the file (drop it).
    pub(super) fn start(&mut self, order: &[usize]) -> bool {
        if let Some((_, file)) = &self.io {
            let mut flags = vec![0u8; self.entries];
            let at = self.data + self.entries as u64 * ENTRY;
            if file.read_exact_at(&mut flags, at).is_ok() {
                for s in self.at.values_mut() {
                    if !s.written && flags.get(s.entry) == Some(&1) {
                        s.written = true;
                        s.by_other = true;
                    }
                }
            }
        }
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
    /// of it are still to come, and whether another reader wrote it.
    pub(super) fn source(&self, index: usize, len: usize) -> Option<(Arc<File>, u64, bool)> {
        let s = self
            .at
            .get(&index)
            .filter(|s| s.written && s.len == len && s.uses > 0)?;
        let (_, file) = self.io.as_ref()?;
        Some((Arc::clone(file), s.offset, s.by_other))
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
    pub(super) fn wants(&self, index: usize, len: usize) -> Option<Target> {
        let s = self.at.get(&index).filter(|s| !s.written && s.len == len)?;
        let (_, file) = self.io.as_ref()?;
        Some(Target {
            file: Arc::clone(file),
            offset: s.offset,
            len,
            flag: self.data + self.entries as u64 * ENTRY + s.entry as u64,
        })
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

/// Another reader's kept file, found by [`peer_plans`]: its path, a handle, and where the
/// samples of its plan go.
pub(super) struct PeerPlan {
    pub path: PathBuf,
    pub file: Arc<File>,
    pub targets: Vec<(usize, Target)>,
}

/// Whether `file` is still in its folder (its reader removes it once its epoch has read
/// it: writing into it then is of no use, and the handle would keep its blocks).
pub(super) fn linked(file: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    file.metadata().is_ok_and(|m| m.nlink() > 0)
}

/// The other readers' kept files for epoch `epoch` in `cache` with the readers' `key`,
/// of `samples` samples, but those in `seen` and those `own` says are this process's. A
/// file whose plan is not written yet is left for a later look; one whose tail does not
/// hold together (sizes, offsets, sample indices) is not written into.
pub(super) fn peer_plans(
    cache: &Cache,
    key: u64,
    epoch: u64,
    samples: usize,
    seen: &HashSet<PathBuf>,
    own: &dyn Fn(&Path) -> bool,
) -> Vec<PeerPlan> {
    let mut out = Vec::new();
    for (path, size) in cache.held(KEPT) {
        if seen.contains(&path) || own(&path) || size < FOOTER {
            continue;
        }
        let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
        else {
            continue;
        };
        let mut footer = [0u8; FOOTER as usize];
        if file.read_exact_at(&mut footer, size - FOOTER).is_err() || &footer[..8] != MAGIC {
            continue;
        }
        let field = |k: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&footer[8 + 8 * k..16 + 8 * k]);
            u64::from_le_bytes(b)
        };
        let (their_key, their_epoch, entries, data) = (field(0), field(1), field(2), field(3));
        // At most a sample per entry, each entry within the file: nothing read or
        // allocated past the file's size whatever the footer says.
        if their_key != key
            || their_epoch != epoch
            || entries == 0
            || entries > (size - FOOTER) / (ENTRY + 1)
            || entries > samples as u64
        {
            continue;
        }
        let entries = entries as usize;
        if data.checked_add(tail(entries)) != Some(size) {
            continue;
        }
        let mut plan = vec![0u8; entries * ENTRY as usize];
        if file.read_exact_at(&mut plan, data).is_err() {
            continue;
        }
        let file = Arc::new(file);
        let flags = data + entries as u64 * ENTRY;
        let targets = plan
            .chunks_exact(ENTRY as usize)
            .enumerate()
            .filter_map(|(k, e)| {
                let word = |j: usize| {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&e[8 * j..8 * j + 8]);
                    u64::from_le_bytes(b)
                };
                let (index, offset, len) = (word(0), word(1), word(2));
                // An entry that points past the samples' bytes is not written into.
                (offset.checked_add(len)? <= data && index < samples as u64).then_some(())?;
                Some((
                    usize::try_from(index).ok()?,
                    Target {
                        file: Arc::clone(&file),
                        offset,
                        len: usize::try_from(len).ok()?,
                        flag: flags + k as u64,
                    },
                ))
            })
            .collect();
        out.push(PeerPlan {
            path,
            file,
            targets,
        });
    }
    out
}

/// Read `len` bytes at `offset` of `file` into `scratch`.
pub(super) fn read(file: &File, offset: u64, len: usize, scratch: &mut Vec<u8>) -> bool {
    scratch.clear();
    scratch.resize(len, 0);
    file.read_exact_at(scratch, offset).is_ok()
}

/// The first samples of `next` whose bytes, with the file's tail ([`tail`]), fit `room`,
/// each once, at consecutive offsets, leaving out those `read` marks (they do not pass
/// by before), from the first half of `next` only: where each is, the plan's entries
/// (`index`, `offset`, `len`) in order, and the bytes of the samples.
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
#[allow(clippy::type_complexity)]
fn plan(
    next: &[usize],
    len_of: &dyn Fn(usize) -> Option<u64>,
    read: &[bool],
    room: u64,
) -> (HashMap<usize, Slot>, Vec<(usize, u64, usize)>, u64) {
    let mut at = HashMap::new();
    let mut planned = Vec::new();
    let mut size = 0u64;
    for &i in &next[..next.len().div_ceil(2)] {
        if at.contains_key(&i) || read.get(i).copied().unwrap_or(false) {
            continue;
        }
        let Some(len) = len_of(i) else { continue };
        if size + len + tail(planned.len() + 1) > room {
            break;
        }
        at.insert(
            i,
            Slot {
                offset: size,
                len: len as usize,
                written: false,
                by_other: false,
                uses: 0,
                entry: planned.len(),
            },
        );
        planned.push((i, size, len as usize));
        size += len;
    }
    (at, planned, size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Range;

    /// The lengths of samples at `ranges`.
    fn lens(ranges: &[Range<u64>]) -> impl Fn(usize) -> Option<u64> + '_ {
        |i| ranges.get(i).map(|r| r.end - r.start)
    }

    #[test]
    fn the_plan_takes_the_next_epochs_first_samples_that_fit_once_each() {
        let ranges: Vec<Range<u64>> = vec![0..10, 10..30, 30..35, 35..75, 75..76, 76..77];
        let (at, planned, size) = plan(&[2, 1, 2, 0, 3, 4], &lens(&ranges), &[], 40 + tail(2));
        // 2 (5 bytes), 1 (20): 25; 0 (10 more) is past the first half
        assert_eq!(size, 25);
        assert_eq!(planned, [(2, 0, 5), (1, 5, 20)]);
        let mut keys: Vec<_> = at.keys().copied().collect();
        keys.sort_unstable();
        assert_eq!(keys, [1, 2]);
        assert_eq!((at[&2].offset, at[&1].offset), (0, 5));
        assert_eq!((at[&2].entry, at[&1].entry), (0, 1));
        // Nothing fits (the plan's tail counts): nothing planned.
        assert_eq!(plan(&[3, 0], &lens(&ranges), &[], 39 + tail(1)).2, 0);
        assert_eq!(plan(&[3, 0], &lens(&ranges), &[], 40 + tail(1) - 1).2, 0);
        assert_eq!(plan(&[3, 0], &lens(&ranges), &[], 40 + tail(1)).2, 40);
        // Samples read already (1) pass their room to the next ones of the first half.
        let (at, _, size) = plan(
            &[2, 1, 0, 4, 3, 5],
            &lens(&ranges),
            &[false, true, false, false, false, false],
            60 + tail(3),
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
        // 2000 samples of 100 bytes; each next file planned when the reads of the current
        // one are done, without the samples read by then, as the epochs do. (Planned from
        // the whole next order, the room of 600 samples kept 600 for five epochs, then
        // 268, 15, 122, 12, 298, 3.)
        let n = 2000;
        let ranges: Vec<Range<u64>> = (0..n as u64).map(|i| i * 100..i * 100 + 100).collect();
        for (room, least) in [(200usize, 190usize), (600, 450), (1260, 450)] {
            let room = room as u64 * 100 + tail(room);
            let mut read = vec![false; n];
            let mut shares = Vec::new();
            for e in 1..12u64 {
                let order = permutation(n, e);
                let (at, _, _) = plan(&order, &lens(&ranges), &read, room);
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

    /// `count` readers, with the bytes of those that joined `cache`.
    fn sharing(cache: &Cache, count: u64) -> Readers {
        Readers {
            count,
            bytes: readers(cache, 0).bytes,
            peers: Vec::new(),
        }
    }

    #[test]
    fn readers_sharing_the_folder_reserve_their_share_and_dead_ones_are_not_counted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = super::super::StoreUrl::parse("http://127.0.0.1:9/ds").expect("url");
        // Two readers' files and two shares of 5 samples of 100 bytes with their tails.
        let one = 500 + tail(5);
        let members = 2 * MEMBER_LINE as u64;
        let limit = 2 * one + members;
        let cache = Cache::open(Some(dir.path()), limit, &url, None).expect("cache");
        let ranges: Vec<Range<u64>> = (0..10u64).map(|i| i * 100..i * 100 + 100).collect();
        let order: Vec<usize> = (0..10).collect();
        let a = join(&cache, 0, 0, 1, 0).expect("joined");
        assert_eq!(readers(&cache, 0).count, 1);
        let b = join(&cache, 0, 1, 1, 0).expect("joined");
        // A reader of a process that died (the child below, waited for) is not counted,
        // and its file goes.
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let dead = child.id();
        child.wait().expect("wait");
        let stale = cache.dir().join(format!(".{READER}.00000000.tmp.{dead}.0"));
        std::fs::write(&stale, member_line(0, 2, 1, 0)).expect("stale file");
        a.handle().at(1, 40);
        let now = readers(&cache, 0);
        let peer = |rank, epoch, position| Peer {
            rank,
            epoch,
            position,
        };
        assert_eq!(
            (now.count, now.bytes, now.peers),
            (2, members, vec![peer(0, 1, 40), peer(1, 1, 0)])
        );
        assert!(!stale.exists(), "a dead reader's file is removed");
        assert!(readers(&cache, 1).peers.is_empty(), "another key");
        let kept = |order: &[usize], ranges: &[Range<u64>], r: &Readers| {
            Kept::reserve(&cache, &[], 1, order, &lens(ranges), &[], r, 0)
        };
        // Each of the two takes half the room: 5 of the samples (the first half of the
        // order), then the other's half is all there is.
        let first = kept(&order, &ranges, &sharing(&cache, 2)).expect("room");
        assert_eq!(cache.used().expect("used"), members + one);
        let second = kept(&order, &ranges, &sharing(&cache, 2)).expect("room");
        assert_eq!(cache.used().expect("used"), limit);
        // A third that finds the room taken keeps nothing.
        assert!(kept(&order, &ranges, &sharing(&cache, 3)).is_none());
        drop(second.release());
        // Nor one whose share is free, but not one of its samples fits before a sample
        // of 700 bytes that it would keep first.
        let big: Vec<Range<u64>> = vec![0..700, 700..800];
        assert!(kept(&[0, 1], &big, &sharing(&cache, 2)).is_none());
        // A crumb of its share is not taken either.
        let crumbs = kept(&order[..2], &ranges, &sharing(&cache, 1));
        let taken = kept(&order[2..], &ranges, &sharing(&cache, 5));
        assert!(crumbs.is_some() && taken.is_some(), "a sample each");
        assert_eq!(
            cache.used().expect("used"),
            members + one + 2 * (100 + tail(1))
        );
        assert!(kept(&order, &ranges, &sharing(&cache, 1)).is_none());
        drop((
            first.release(),
            crumbs.map(Kept::release),
            taken.map(Kept::release),
        ));
        // One who planned alone (the room whole) leaves the next what is free.
        let alone = kept(&order, &ranges, &sharing(&cache, 1)).expect("room");
        assert_eq!(
            cache.used().expect("used"),
            members + one,
            "the first half of the order"
        );
        let late = kept(&order[..4], &ranges, &sharing(&cache, 2)).expect("room");
        assert_eq!(
            cache.used().expect("used"),
            members + one + 200 + tail(2),
            "2 of the 4 samples' first half"
        );
        drop((alone.release(), late.release()));
        // Two readers of one rank (a DataLoader's workers): the rank counts once, at the
        // least advanced.
        let c = join(&cache, 0, 0, 2, 0).expect("joined");
        assert_eq!(readers(&cache, 0).peers, [peer(0, 1, 40), peer(1, 1, 0)]);
        drop((a, c));
        assert_eq!(readers(&cache, 0).count, 1);
        drop(b);
        assert_eq!(cache.used().expect("used"), 0, "nothing left");
    }

    #[test]
    fn a_failed_read_gives_up_the_samples_later_reads_and_a_child_leaves_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = super::super::StoreUrl::parse("http://127.0.0.1:9/ds").expect("url");
        let cache = Cache::open(Some(dir.path()), 200, &url, None).expect("cache");
        let ranges: Vec<Range<u64>> = vec![0..30, 30..70];
        // (both in the first half of the next order)
        let alone = readers(&cache, 0);
        let mut k = Kept::reserve(
            &cache,
            &[],
            1,
            &[0, 1, 0, 1],
            &lens(&ranges),
            &[],
            &alone,
            0,
        )
        .expect("room");
        for (i, len) in [(0, 30), (1, 40)] {
            let t = k.wants(i, len).expect("kept");
            assert!(t.write(&vec![1; len]));
            k.written(i, t.file());
        }
        assert!(k.start(&[0, 1, 0]));
        let (f, _, by_other) = k.source(0, 30).expect("held");
        assert!(!by_other, "written by this reader");
        // Sample 0's read failed: both its reads are given up, and it is fetched.
        assert!(k.used(0, &f, false).is_none(), "sample 1 is still to come");
        assert!(!k.serves(0) && k.source(0, 30).is_none());
        // A read the epoch did not count (sample 0 again) changes nothing.
        assert!(k.used(0, &f, true).is_none());
        assert!(k.source(1, 40).is_some());
        // A forked child closes its handles and leaves the file to the parent.
        k.forget();
        assert_eq!(cache.used().expect("used"), 70 + tail(2), "still there");
    }

    #[test]
    fn kept_samples_are_written_read_back_and_the_file_removed_after_the_last_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = super::super::StoreUrl::parse("http://127.0.0.1:9/ds").expect("url");
        let cache = Cache::open(Some(dir.path()), 200, &url, None).expect("cache");
        let ranges: Vec<Range<u64>> = vec![0..30, 30..70, 70..100, 100..150];
        let alone = readers(&cache, 0);
        let mut k = Kept::reserve(
            &cache,
            &[],
            1,
            &[1, 0, 3, 2],
            &lens(&ranges),
            &[],
            &alone,
            0,
        )
        .expect("room");
        // 1 (40) and 0 (30), the first half of the order, fit with their tail
        assert_eq!(
            cache.used().expect("used"),
            70 + tail(2),
            "reserved at its full size"
        );
        let t = k.wants(1, 40).expect("kept");
        assert!(!t.write(&[7; 39]), "not the sample's length");
        assert!(t.write(&[7; 40]));
        k.written(1, t.file());
        assert!(k.wants(1, 40).is_none(), "written once");
        assert!(k.wants(3, 50).is_none(), "not kept");
        // Its epoch reads 1 twice and 0 (never written: fetched as before).
        assert!(k.start(&[1, 2, 1, 0]));
        assert!(k.serves(1) && !k.serves(0));
        let mut scratch = Vec::new();
        for last in [false, true] {
            let (f, off, _) = k.source(1, 40).expect("held");
            assert!(read(&f, off, 40, &mut scratch));
            assert_eq!(scratch, [7; 40]);
            let released = k.used(1, &f, true);
            assert_eq!(released.is_some(), last);
        }
        assert!(k.source(1, 40).is_none(), "released");
        assert!(k.serves(1), "still skipped by the prefetchers");
        assert_eq!(cache.used().expect("used"), 0, "the file is gone");
    }

    #[test]
    fn another_reader_writes_the_samples_of_a_plan_it_reads_and_they_are_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = super::super::StoreUrl::parse("http://127.0.0.1:9/ds").expect("url");
        let cache = Cache::open(Some(dir.path()), 10_000, &url, None).expect("cache");
        let ranges: Vec<Range<u64>> = (0..8u64).map(|i| i * 10..i * 10 + 10 + i).collect();
        let alone = readers(&cache, 7);
        // Rank 0 keeps the first half of its next order, 3 and 1, for epoch 2.
        let mut k = Kept::reserve(
            &cache,
            &[],
            2,
            &[3, 1, 0, 2],
            &lens(&ranges),
            &[],
            &alone,
            7,
        )
        .expect("room");
        let own = k.path().map(Path::to_path_buf);
        // A file of the folder whose plan is not written yet is left for later.
        let half_made = CacheKey {
            name: KEPT,
            size: 100,
            crc32: 2,
            checked: false,
            listed_by: "test",
        };
        let (pending, _) = cache.reserve(&half_made, &[]).expect("reserved");
        let _pending = pending.expect("new");
        let seen = HashSet::new();
        let none = |_: &Path| false;
        let mine = |p: &Path| Some(p) == own.as_deref();
        for (key, epoch, samples, own) in [
            (8, 2, 8, &none as &dyn Fn(&Path) -> bool),
            (7, 3, 8, &none),
            (7, 2, 8, &mine),
            (7, 2, 1, &none),
        ] {
            assert!(
                peer_plans(&cache, key, epoch, samples, &seen, own).is_empty(),
                "key {key}, epoch {epoch}, {samples} samples"
            );
        }
        // Of 3 samples, sample 3 is none: only 1 is written into.
        let of_three = peer_plans(&cache, 7, 2, 3, &seen, &none);
        let indices: Vec<usize> = of_three[0].targets.iter().map(|t| t.0).collect();
        assert_eq!(indices, [1]);
        // Another reader (rank 1) finds the plan, and writes sample 3 as it reads it.
        let found = peer_plans(&cache, 7, 2, 8, &seen, &none);
        assert_eq!(found.len(), 1, "one plan");
        assert_eq!(Some(&found[0].path), own.as_ref());
        assert!(linked(&found[0].file));
        let mut targets: HashMap<usize, Target> = found[0].targets.iter().cloned().collect();
        assert_eq!(targets.len(), 2);
        let three: Vec<u8> = (0..13).collect();
        let t = targets.remove(&3).expect("3 is planned");
        assert!(!t.write(&three[..12]), "not its length");
        assert!(t.write(&three));
        let seen: HashSet<PathBuf> = [found[0].path.clone()].into();
        assert!(peer_plans(&cache, 7, 2, 8, &seen, &none).is_empty(), "seen");
        // Rank 0's epoch 2 reads 3 from its file, written by the other; 1 was not.
        assert!(k.start(&[3, 1, 0, 2]));
        assert!(k.serves(3) && !k.serves(1));
        let (f, off, by_other) = k.source(3, 13).expect("held");
        assert!(by_other);
        let mut scratch = Vec::new();
        assert!(read(&f, off, 13, &mut scratch));
        assert_eq!(scratch, three);
        // Its last read removes the file: the other reader lets go of it.
        assert!(k.used(3, &f, true).is_some());
        assert!(!linked(&found[0].file));
    }

    #[test]
    fn a_kept_file_whose_tail_does_not_hold_together_is_not_written_into() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = super::super::StoreUrl::parse("http://127.0.0.1:9/ds").expect("url");
        let cache = Cache::open(Some(dir.path()), 1 << 20, &url, None).expect("cache");
        // A file of `size` bytes ending with a footer saying `entries` and `data`, its
        // plan entry (if it has room for one) `entry`.
        let file = |size: u64, entries: u64, data: u64, entry: [u64; 3]| {
            let key = CacheKey {
                name: KEPT,
                size,
                crc32: 2,
                checked: false,
                listed_by: "test",
            };
            let (pending, _) = cache.reserve(&key, &[]).expect("reserved");
            let mut pending = pending.expect("new");
            let f = pending.file().expect("open");
            if let Some(at) = data.checked_add(ENTRY).filter(|&end| end + FOOTER <= size) {
                let bytes: Vec<u8> = entry.iter().flat_map(|v| v.to_le_bytes()).collect();
                f.write_all_at(&bytes, at - ENTRY).expect("entry");
            }
            let mut footer = MAGIC.to_vec();
            for v in [7u64, 2, entries, data] {
                footer.extend_from_slice(&v.to_le_bytes());
            }
            f.write_all_at(&footer, size - FOOTER).expect("footer");
            pending
        };
        let none = |_: &Path| false;
        let plans = |samples| peer_plans(&cache, 7, 2, samples, &HashSet::new(), &none);
        // One entry of 10 bytes: sample 3 at 0.
        let good = file(10 + tail(1), 1, 10, [3, 0, 10]);
        assert_eq!(plans(8).len(), 1);
        assert_eq!(plans(8)[0].targets.len(), 1);
        // Sample 3 is not one of 3 samples.
        assert!(plans(3)[0].targets.is_empty());
        drop(good);
        let bad = [
            // entries * 25 wraps to 1 (the inverse of 25): a 41-byte tail, and an
            // allocation of about 8e18 bytes if it were believed.
            file(200, 0x8f5c_28f5_c28f_5c29, 200 - 41, [0; 3]),
            // More entries than the file holds.
            file(100, 1000, 0, [0; 3]),
            // None.
            file(100, 0, 100 - FOOTER, [0; 3]),
            // Sizes that do not add up.
            file(10 + tail(1), 1, 11, [3, 0, 10]),
        ];
        assert!(plans(8).is_empty(), "no plan taken");
        drop(bad);
        // An entry past the samples' bytes is left out.
        let _past = file(10 + tail(1), 1, 10, [3, 5, 10]);
        assert!(plans(8)[0].targets.is_empty());
    }
}
