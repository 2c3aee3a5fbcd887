//! Samples' byte ranges of a location's files, fetched ahead of the readers in the epoch's
//! exact order (range mode, `fetch = "ranges"`): what keeps the global shuffle exact and
//! fast when the files do not fit the cache. The bytes fetched live in memory until their
//! read; the cache folder's room keeps the samples the next epoch reads first
//! (`src/store/kept.rs`), which that epoch then reads from disk.
//!
//! [`RangeAhead`] has the reading API of [`FetchAhead`](super::FetchAhead) and is built
//! from the same [`AheadFiles`] plus each sample's byte range in its file (a shard's index
//! entry, a container's record). When the pipeline announces an epoch
//! ([`RangeAhead::start_epoch`]: the samples it reads, in order), [`PREFETCHERS`] threads
//! walk that order ahead of the readers, a wave at a time: the next samples whose bytes
//! fit the room left in the memory budget, grouped by file and sorted by offset, ranges
//! less than [`GAP`] apart **coalesced** into one request (never across files, never
//! longer than [`MAX_SPAN`]), the requests issued in the order of their first sample,
//! [`IN_FLIGHT`] at a time per thread, as concurrent ranged GETs on the client's runtime
//! ([`StoreClient::get_ranges`], each retried like any request). A reader takes its
//! sample's bytes from there (waiting when they are in flight); a sample the epoch reads
//! twice (the `pad` of uneven sharding) is kept until its last use when both uses are in
//! the window, and fetched again otherwise. A read that nothing prefetched (no epoch
//! announced, a read out of the epoch's order, `validate`) does one ranged GET itself.
//!
//! Memory is bounded whatever the readers do: the bytes fetched and not yet read, in
//! flight included (whole requests, gaps included), never pass the budget
//! ([`budget`]: the smaller of the cache limit and [`MAX_BUDGET`], 256 MiB), except for
//! one sample larger than the whole budget, fetched alone. A reader far behind stops the
//! prefetchers (they wait for room), never the opposite.
//!
//! Checks: every record read is checked as before by its reader (a shard record's CRC-32
//! against its index entry). A file's whole-file check (the manifest's CRC-32 of a shard,
//! its header) does not apply in range mode, as no read sees a whole file: only
//! [`RangeAhead::verify_all`] reads every file (in ranges) and checks its size, CRC-32 and
//! header.
//!
//! Requests per sample: about one when the samples read together lie far apart in their
//! files (a large dataset, whose shards are many times the budget: ImageNet's 1.28 M
//! samples then cost 1.28 M GETs an epoch, $0.51 at S3's $0.0004 per 1000 GETs), fewer
//! when the budget holds a good part of the dataset and neighbours get coalesced.

use super::kept::{self, Kept};
use super::{stats, AheadFiles, Cache, StoreClient};
use crate::error::{Error, Result};
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Condvar, Mutex};

/// Ranges of one file less than this apart are fetched by one request, the gap's bytes
/// thrown away. A GET costs about what a few hundred KB of transfer do: a store's time to
/// first byte (10-30 ms on S3, a few ms on the loopback emulators) at the 20-100 MB/s one
/// connection streams, and on S3's price list $0.0004 per 1000 GETs while transfer inside
/// a region is free. Measured (`benches/range_gap.py`): fake-gcs-server on loopback
/// answers in 0.15 ms + 0.70 ns a byte, a request worth 216 KiB. 256 KiB is the low end,
/// so a merge never costs more time than the request it saves.
pub const GAP: u64 = 256 * 1024;

/// Longest coalesced request (a few samples' bytes, not a whole shard).
pub const MAX_SPAN: u64 = 8 << 20;

/// Requests in flight per prefetcher thread.
pub const IN_FLIGHT: usize = 16;

/// Prefetcher threads (each runs a wave of requests; two keep the store busy while one
/// waits for its wave's last request).
pub const PREFETCHERS: usize = 2;

/// Most bytes held in memory ahead of the readers.
pub const MAX_BUDGET: u64 = 256 << 20;

/// Most samples one wave plans.
const WAVE_SAMPLES: usize = 4096;

/// Reads between two looks for other readers' kept files (a 64th of an epoch of `len`).
fn scan_step(len: usize) -> usize {
    (len / 64).max(1)
}

/// The memory budget for a cache limit of `cache_limit` bytes: the smaller of the two.
pub fn budget(cache_limit: u64) -> u64 {
    cache_limit.clamp(1, MAX_BUDGET)
}

/// One sample's bytes wanted: its file and byte range there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Want {
    /// The file.
    pub file: u32,
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

/// One request of a plan: bytes `start..end` of `file`, covering the wants at
/// `members` of the plan's sorted list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merged {
    /// The file.
    pub file: u32,
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// The wants it covers: a range of the plan's sorted indices.
    pub members: Range<usize>,
}

/// The requests that fetch `wants`: the wants' indices sorted by file and offset, and the
/// requests over them, ranges of one file less than `gap` apart merged (a request never
/// longer than `max_span`, unless one want is).
pub fn coalesce(wants: &[Want], gap: u64, max_span: u64) -> (Vec<usize>, Vec<Merged>) {
    let mut sorted: Vec<usize> = (0..wants.len()).collect();
    sorted.sort_unstable_by_key(|&i| (wants[i].file, wants[i].start, wants[i].end));
    let mut out: Vec<Merged> = Vec::new();
    for (k, &i) in sorted.iter().enumerate() {
        let w = wants[i];
        if let Some(m) = out.last_mut() {
            let end = m.end.max(w.end);
            if m.file == w.file && w.start <= m.end.saturating_add(gap) && end - m.start <= max_span
            {
                m.end = end;
                m.members.end = k + 1;
                continue;
            }
        }
        out.push(Merged {
            file: w.file,
            start: w.start,
            end: w.end,
            members: k..k + 1,
        });
    }
    (sorted, out)
}

/// A sample's bytes in a chunk.
struct Slot {
    chunk: u64,
    /// Where the sample starts in the chunk.
    at: usize,
    file: u32,
    start: u64,
    len: usize,
    /// Reads of it still to come.
    uses: u32,
}

enum Body {
    Pending,
    Ready(bytes::Bytes),
    Failed,
}

/// The bytes of one request.
struct Chunk {
    body: Body,
    /// Reads still to come of its samples (0 for a chunk of a finished epoch in flight).
    left: u32,
    size: u64,
}

#[derive(Default)]
struct State {
    announced: bool,
    order: Vec<usize>,
    /// The next position of `order` to plan.
    next: usize,
    slots: HashMap<usize, Slot>,
    chunks: HashMap<u64, Chunk>,
    next_chunk: u64,
    /// Bytes of the chunks held and in flight.
    held: u64,
    /// Samples read before their planned position (not fetched for it then).
    early: HashMap<usize, u32>,
    /// Whether this process's prefetchers run.
    started: bool,
    stop: bool,
    /// The epoch announced.
    epoch: u64,
    /// This epoch's samples kept on disk by the previous one (see [`super::kept`]).
    kept: Option<Kept>,
    /// The next epoch's, written as this one reads them.
    keeping: Option<Kept>,
    /// Reads of this epoch so far (about the position the readers are at).
    reads: usize,
    /// This process's place among those sharing the cache folder's room ([`kept::join`]).
    member: Option<kept::Member>,
    /// When no file could be reserved for the next epoch (others held the room): the
    /// count of reads at which to try again.
    retry: Option<usize>,
    /// Where the samples other readers of the folder keep for their next epoch go, by
    /// sample: this process writes those it reads ([`kept::peer_plans`]).
    peers: HashMap<usize, kept::Target>,
    /// The other readers' kept files looked at this epoch (and handles to them).
    peers_seen: HashMap<PathBuf, Arc<std::fs::File>>,
    /// The count of reads at which to look for other readers' kept files again.
    scan_at: usize,
    /// A look is under way.
    scanning: bool,
}

struct Inner {
    client: StoreClient,
    files: AheadFiles,
    ranges: Vec<Range<u64>>,
    budget: u64,
    /// The cache folder whose room keeps the next epoch's first samples (`None`: none).
    cache: Option<Cache>,
    state: Mutex<State>,
    changed: Condvar,
    /// The process whose prefetchers these are.
    pid: AtomicU32,
    /// What the samples' ranges and the epochs' orders depend on (but the rank): the
    /// readers of a folder with the same key can write each other's kept samples.
    key: u64,
}

/// Samples' byte ranges of a location's files, fetched ahead (see the module).
pub struct RangeAhead {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RangeAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeAhead")
            .field("url", self.inner.client.url())
            .field("budget", &self.inner.budget)
            .finish()
    }
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RangeAhead {
    /// `files`, whose sample `i` is bytes `ranges[i]` of file `files.file_of[i]`, read by
    /// `client` with at most `budget` bytes ahead of the readers in memory, and the next
    /// epoch's first samples kept in `cache` (when given) as far as its room allows.
    pub fn new(
        client: StoreClient,
        files: AheadFiles,
        ranges: Vec<Range<u64>>,
        budget: u64,
        cache: Option<Cache>,
    ) -> RangeAhead {
        let mut h = crc32fast::Hasher::new();
        for r in &ranges {
            h.update(&r.start.to_le_bytes());
            h.update(&r.end.to_le_bytes());
        }
        for f in &files.files {
            h.update(f.name.as_bytes());
            h.update(&f.size.to_le_bytes());
            h.update(&f.crc32.to_le_bytes());
            h.update(&[u8::from(f.checked)]);
        }
        let key = (u64::from(h.finalize()) << 32) ^ files.order.key;
        RangeAhead {
            inner: Arc::new(Inner {
                key,
                client,
                files,
                ranges,
                budget: budget.max(1),
                cache,
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
                pid: AtomicU32::new(std::process::id()),
            }),
        }
    }

    /// In a process forked from the one that started the prefetchers (a DataLoader
    /// worker), they and their requests stayed in the parent: start afresh here.
    fn forked(&self) {
        if !super::forked::first_call_in_child(&self.inner.pid) {
            return;
        }
        let mut st = lock(&self.inner.state);
        let stop = st.stop;
        // The kept files and the parent's place in the folder are the parent's: left
        // alone here (this process takes a place of its own when its epoch starts).
        for k in [st.kept.take(), st.keeping.take()].into_iter().flatten() {
            k.forget();
        }
        if let Some(m) = st.member.take() {
            m.leave();
        }
        *st = State {
            stop,
            ..State::default()
        };
    }

    /// Epoch `epoch` reads the samples `order` (indices, in order; a resumed epoch's from
    /// where it resumes): the prefetchers walk it from its start, what was fetched for
    /// an earlier order is dropped.
    pub fn start_epoch(&self, epoch: u64, order: &[usize]) {
        self.forked();
        let mut st = lock(&self.inner.state);
        // Where this epoch starts in the rank's order (a resumed one, further on).
        let position = (self.inner.files.per_epoch as usize).saturating_sub(order.len());
        let mut said = None;
        if st.member.is_none() {
            // Counted among the readers sharing the folder's room from its first epoch
            // (a process that only opened the dataset, a DataLoader's main process whose
            // workers read, takes no share).
            let (key, rank) = (self.inner.key, self.inner.files.order.rank);
            st.member = self
                .inner
                .cache
                .as_ref()
                .and_then(|c| kept::join(c, key, rank, epoch));
        } else {
            said = st.member.as_ref().map(kept::Member::handle);
        }
        st.slots.clear();
        st.early.clear();
        // The other readers' files are let go of outside the lock (closing the last
        // handle of a removed file frees its blocks).
        let peers = (
            std::mem::take(&mut st.peers),
            std::mem::take(&mut st.peers_seen),
        );
        st.scan_at = scan_step(order.len());
        st.scanning = false;
        // The samples the previous epoch kept for this one, if it did; anything else
        // kept is dropped (its file removed).
        st.epoch = epoch;
        st.reads = 0;
        st.retry = None;
        let mut released = Vec::new();
        released.extend(st.kept.take().map(Kept::release));
        st.kept = match st.keeping.take() {
            Some(mut k) if k.epoch() == epoch => {
                if k.start(order) {
                    Some(k)
                } else {
                    released.push(k.release());
                    None
                }
            }
            other => {
                released.extend(other.map(Kept::release));
                None
            }
        };
        let keep_next = st.kept.is_none();
        let mut freed = 0;
        st.chunks.retain(|_, c| match c.body {
            // In flight: dropped when it arrives.
            Body::Pending => {
                c.left = 0;
                true
            }
            _ => {
                freed += c.size;
                false
            }
        });
        st.held -= freed;
        st.order.clear();
        st.order.extend_from_slice(order);
        st.next = 0;
        st.announced = true;
        let start = !st.started && !st.stop;
        st.started = true;
        drop(st);
        // The files let go of are removed outside the lock.
        drop(released);
        drop(peers);
        if let Some(m) = said {
            m.at(epoch, position);
        }
        if start {
            for _ in 0..PREFETCHERS {
                let inner = Arc::clone(&self.inner);
                let spawned = std::thread::Builder::new()
                    .name("imgfeed-ranges".into())
                    .spawn(move || inner.prefetch());
                if spawned.is_err() {
                    // Without prefetchers every read fetches its own range.
                    lock(&self.inner.state).announced = false;
                }
            }
        }
        self.inner.changed.notify_all();
        if keep_next {
            self.inner.keep_next(epoch);
        }
    }

    /// Copy bytes `range` of file `file` into `scratch` (the read of sample `index`).
    pub fn copy(
        &self,
        file: usize,
        range: Range<usize>,
        index: usize,
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        self.forked();
        let t0 = std::time::Instant::now();
        let inner = &self.inner;
        let (served, next) = inner.read_kept(index, range.len(), scratch);
        if let Some(epoch) = next {
            Inner::plan_next(inner, epoch);
        }
        if let Some(by_other) = served {
            stats::kept(by_other);
            Inner::keep(inner, index, scratch);
            stats::waited(t0.elapsed());
            return Ok(());
        }
        if let Some(b) = inner.take(file, &range, index) {
            scratch.clear();
            scratch.extend_from_slice(&b);
            Inner::keep(inner, index, &b);
            stats::waited(t0.elapsed());
            return Ok(());
        }
        let name = &inner.entry(file)?.name;
        let mut got = None;
        inner.client.get_ranges(
            &[(name.as_str(), range.start as u64..range.end as u64)],
            1,
            |_, r| got = Some(r),
        );
        let bytes = got
            .ok_or_else(|| Error::Internal("a range request without an answer".into()))?
            .map_err(Error::from)?;
        scratch.clear();
        scratch.extend_from_slice(&bytes);
        Inner::keep(inner, index, &bytes);
        stats::waited(t0.elapsed());
        Ok(())
    }

    /// Read every file (in ranges of [`MAX_SPAN`]) and check its size and, when it is
    /// listed with one, its CRC-32 and its header: the whole-file check that range reads
    /// do not make.
    pub fn verify_all(&self) -> Result<()> {
        self.forked();
        let inner = &self.inner;
        for f in &inner.files.files {
            let object = inner.client.url().object(&f.name);
            let pieces: Vec<(&str, Range<u64>)> = (0..f.size.div_ceil(MAX_SPAN))
                .map(|k| {
                    let start = k * MAX_SPAN;
                    (f.name.as_str(), start..(start + MAX_SPAN).min(f.size))
                })
                .collect();
            let mut hasher = crc32fast::Hasher::new();
            for group in pieces.chunks(8) {
                let mut got: Vec<Option<Result<bytes::Bytes>>> =
                    std::iter::repeat_with(|| None).take(group.len()).collect();
                inner.client.get_ranges(group, 8, |i, r| {
                    if let Some(slot) = got.get_mut(i) {
                        *slot = Some(r.map_err(Error::from));
                    }
                });
                for (k, r) in got.into_iter().enumerate() {
                    let bytes = r.ok_or_else(|| {
                        Error::Internal("a range request without an answer".into())
                    })??;
                    if k == 0 && group.first().is_some_and(|p| p.1.start == 0) {
                        let mut map = memmap2::MmapMut::map_anon(bytes.len().max(1))
                            .map_err(|e| Error::Internal(format!("an anonymous map: {e}")))?;
                        map[..bytes.len()].copy_from_slice(&bytes);
                        let map = map
                            .make_read_only()
                            .map_err(|e| Error::Internal(format!("an anonymous map: {e}")))?;
                        (inner.files.check)(std::path::Path::new(&object), &map)?;
                    }
                    hasher.update(&bytes);
                }
            }
            let crc = hasher.finalize();
            if f.checked && crc != f.crc32 {
                return Err(Error::Dataset {
                    path: object.into(),
                    reason: format!(
                        "checksum mismatch (CRC-32 {crc:08x}, {} says {:08x}): the file is \
                         corrupted",
                        inner.files.listed_by, f.crc32
                    ),
                });
            }
        }
        Ok(())
    }
}

impl Drop for RangeAhead {
    fn drop(&mut self) {
        let mut st = lock(&self.inner.state);
        st.stop = true;
        // The kept files go now, not when the last prefetcher lets go of the state (the
        // process may end first). Not in a forked child: they are the parent's.
        let kept = [st.kept.take(), st.keeping.take()];
        let member = st.member.take();
        let peers = (
            std::mem::take(&mut st.peers),
            std::mem::take(&mut st.peers_seen),
        );
        drop(st);
        drop(peers);
        let child = super::forked::first_call_in_child(&self.inner.pid);
        for k in kept.into_iter().flatten() {
            if child {
                k.forget();
            } else {
                drop(k.release());
            }
        }
        match member {
            Some(m) if child => m.leave(),
            m => drop(m),
        }
        self.inner.changed.notify_all();
    }
}

impl Inner {
    fn entry(&self, file: usize) -> Result<&super::AheadFile> {
        self.files
            .files
            .get(file)
            .ok_or_else(|| Error::Internal(format!("file {file} is not listed")))
    }

    /// [`Inner::keep_next`] on a thread of its own: planning computes an epoch's order,
    /// not work for a reader.
    fn plan_next(inner: &Arc<Inner>, epoch: u64) {
        let moved = Arc::clone(inner);
        let spawned = std::thread::Builder::new()
            .name("imgfeed-kept".into())
            .spawn(move || moved.keep_next(epoch));
        if spawned.is_err() {
            inner.keep_next(epoch);
        }
    }

    /// Reserve the file that keeps epoch `epoch + 1`'s first samples (see
    /// [`super::kept`]), unless there is no cache, no room or another epoch was announced
    /// meanwhile.
    fn keep_next(&self, epoch: u64) {
        let Some(cache) = &self.cache else { return };
        let orders = &self.files.order;
        let next = orders.of(epoch + 1);
        // Only the samples a reader of the folder has still to read this epoch pass by
        // before the next: not those read already, nor those no rank of this node reads
        // (another node's: nobody here could write them). This process's own by its
        // reads; the other ranks' (which write what they read of the plan) by where they
        // said they are in the folder.
        let mut read = vec![true; self.ranges.len()];
        {
            let st = lock(&self.state);
            if st.epoch != epoch {
                return;
            }
            for &i in st.order.iter().skip(st.reads) {
                if let Some(r) = read.get_mut(i) {
                    *r = false;
                }
            }
        }
        let readers = kept::readers(cache, self.key);
        for peer in &readers.peers {
            if peer.rank == orders.rank || peer.rank >= orders.ranks || peer.epoch > epoch {
                continue;
            }
            let theirs = orders.of_rank(epoch, peer.rank);
            // From where it said it is (it says so every 64th of its epoch, and finds
            // this plan within the next 64th): a 32nd further on.
            let from = if peer.epoch < epoch {
                0
            } else {
                peer.position
                    .saturating_add(theirs.len() / 32 + 1)
                    .min(theirs.len())
            };
            for &i in &theirs[from..] {
                if let Some(r) = read.get_mut(i) {
                    *r = false;
                }
            }
        }
        let Some(k) = Kept::reserve(
            cache,
            &self.files.keep,
            epoch + 1,
            &next,
            &self.ranges,
            &read,
            &readers,
            self.key,
        ) else {
            // Others sharing the folder may hold the room (a rank that planned before
            // this one joined): try again later in the epoch, at reads doubling from a
            // 64th of it, up to three quarters of it.
            let mut st = lock(&self.state);
            if st.epoch == epoch && st.keeping.is_none() && !st.stop {
                let len = st.order.len();
                let at = (st.reads * 2).max(st.reads + (len / 64).max(1));
                st.retry = (at < len * 3 / 4).then_some(at);
            }
            return;
        };
        let mut st = lock(&self.state);
        let stale = if st.epoch == epoch && st.keeping.is_none() && !st.stop {
            st.keeping = Some(k);
            None
        } else {
            Some(k.release())
        };
        drop(st);
        drop(stale);
    }

    /// Look for the other readers' kept files of the epoch after `epoch` (their plans),
    /// so that this process writes the samples of them it reads.
    fn scan_peers(&self, epoch: u64) {
        let Some(cache) = &self.cache else { return };
        let (seen, files, own) = {
            let mut st = lock(&self.state);
            if st.epoch != epoch || st.stop {
                st.scanning = false;
                return;
            }
            let own = st
                .keeping
                .as_ref()
                .and_then(|k| k.path().map(Path::to_path_buf));
            let seen: HashSet<PathBuf> = st.peers_seen.keys().cloned().collect();
            let files: Vec<Arc<std::fs::File>> = st.peers_seen.values().cloned().collect();
            (seen, files, own)
        };
        // Files their readers removed (read already): let go of them.
        let gone: Vec<Arc<std::fs::File>> =
            files.into_iter().filter(|f| !kept::linked(f)).collect();
        // This process's own files (its kept file, or the next one being reserved) are
        // not another reader's.
        let pid = format!(".tmp.{}.", std::process::id());
        let mine = |p: &Path| {
            own.as_deref() == Some(p)
                || p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.contains(&pid))
        };
        let found = kept::peer_plans(cache, self.key, epoch + 1, self.ranges.len(), &seen, &mine);
        let mut st = lock(&self.state);
        st.scanning = false;
        if st.epoch != epoch {
            return;
        }
        if !gone.is_empty() {
            let held = |f: &Arc<std::fs::File>| !gone.iter().any(|g| Arc::ptr_eq(g, f));
            st.peers.retain(|_, t| held(t.file()));
            st.peers_seen.retain(|_, f| held(f));
        }
        for plan in found {
            st.peers_seen.insert(plan.path, plan.file);
            for (i, t) in plan.targets {
                st.peers.entry(i).or_insert(t);
            }
        }
    }

    /// Read sample `index` (`len` bytes) from the kept file into `scratch`, when it is
    /// there: `Some(by another reader)` when it was (and whether another reader wrote
    /// it), and `Some(epoch)` when that was the file's last read to come (or a failed one
    /// gave up the last ones; the file is removed): reserve the next file for the epoch
    /// after `epoch`.
    fn read_kept(
        &self,
        index: usize,
        len: usize,
        scratch: &mut Vec<u8>,
    ) -> (Option<bool>, Option<u64>) {
        let Some((file, offset, by_other)) = lock(&self.state)
            .kept
            .as_ref()
            .and_then(|k| k.source(index, len))
        else {
            return (None, None);
        };
        let ok = kept::read(&file, offset, len, scratch);
        let mut st = lock(&self.state);
        let released = st.kept.as_mut().and_then(|k| k.used(index, &file, ok));
        let epoch = st.epoch;
        drop(st);
        let last = released.is_some();
        drop(released);
        (ok.then_some(by_other), last.then_some(epoch))
    }

    /// Sample `index` was read (`bytes`): count the read, and write it to the next
    /// epoch's kept file when it is one of the samples kept there, or to another
    /// reader's when it is one of theirs. Then, when it is time, try reserving the next
    /// file again (see [`Inner::keep_next`]), or look for other readers' files.
    fn keep(inner: &Arc<Inner>, index: usize, bytes: &[u8]) {
        let (mut again, mut scan) = (None, None);
        let (own, theirs) = {
            let mut st = lock(&inner.state);
            st.reads += 1;
            if st.retry.is_some_and(|at| st.reads >= at) {
                st.retry = None;
                again = Some(st.epoch);
            }
            if st.announced && st.reads >= st.scan_at && !st.scanning && !st.stop {
                let len = st.order.len();
                st.scan_at = st.reads + scan_step(len);
                st.scanning = true;
                let position = (inner.files.per_epoch as usize).saturating_sub(len) + st.reads;
                scan = Some((
                    st.epoch,
                    position,
                    st.member.as_ref().map(kept::Member::handle),
                ));
            }
            let own = st
                .keeping
                .as_ref()
                .and_then(|k| k.wants(index, bytes.len()));
            let theirs = if own.is_none() && !st.peers.is_empty() {
                st.peers.remove(&index)
            } else {
                None
            };
            (own, theirs)
        };
        if let Some(t) = own {
            if t.write(bytes) {
                if let Some(k) = lock(&inner.state).keeping.as_mut() {
                    k.written(index, t.file());
                }
            }
        }
        if let Some(t) = theirs {
            t.write(bytes);
        }
        if let Some(epoch) = again {
            Inner::plan_next(inner, epoch);
        }
        if let Some((epoch, position, member)) = scan {
            // Say how far this reader is, for the others' plans.
            if let Some(m) = member {
                m.at(epoch, position);
            }
            let moved = Arc::clone(inner);
            let spawned = std::thread::Builder::new()
                .name("imgfeed-kept".into())
                .spawn(move || moved.scan_peers(epoch));
            if spawned.is_err() {
                lock(&inner.state).scanning = false;
            }
        }
    }

    /// The prefetched bytes of sample `index` (bytes `range` of `file`), waiting while
    /// they are in flight, this use of them consumed; `None` when nothing prefetched them
    /// (or their request failed): the read fetches them itself. A read before the
    /// prefetchers got to its sample is noted, so they skip that use.
    fn take(&self, file: usize, range: &Range<usize>, index: usize) -> Option<bytes::Bytes> {
        let mut st = lock(&self.state);
        loop {
            let Some(slot) = st.slots.get(&index) else {
                if st.announced && st.next < st.order.len() {
                    *st.early.entry(index).or_insert(0) += 1;
                }
                return None;
            };
            if slot.file as usize != file
                || slot.start != range.start as u64
                || slot.len != range.len()
            {
                return None;
            }
            let (chunk, at, len) = (slot.chunk, slot.at, slot.len);
            let body = match st.chunks.get(&chunk).map(|c| &c.body) {
                Some(Body::Pending) => {
                    st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
                    continue;
                }
                Some(Body::Ready(b)) => b.get(at..at + len).map(|_| b.slice(at..at + len)),
                Some(Body::Failed) | None => None,
            };
            let freed = self.consume(&mut st, index, chunk);
            drop(st);
            if freed {
                self.changed.notify_all();
            }
            return body;
        }
    }

    /// A read of sample `index` from `chunk` is done: forget what no later read needs.
    /// True when bytes were freed.
    fn consume(&self, st: &mut State, index: usize, chunk: u64) -> bool {
        if let Some(slot) = st.slots.get_mut(&index) {
            slot.uses = slot.uses.saturating_sub(1);
            if slot.uses == 0 {
                st.slots.remove(&index);
            }
        }
        let Some(c) = st.chunks.get_mut(&chunk) else {
            return false;
        };
        c.left = c.left.saturating_sub(1);
        if c.left == 0 {
            let size = c.size;
            st.chunks.remove(&chunk);
            st.held -= size;
            return true;
        }
        false
    }

    /// A prefetcher: plan a wave, fetch it, again, until dropped.
    fn prefetch(self: Arc<Inner>) {
        loop {
            let Some(wave) = self.plan() else {
                return;
            };
            let requests: Vec<(&str, Range<u64>)> = wave
                .iter()
                .map(|(_, file, range)| {
                    let name = self
                        .files
                        .files
                        .get(*file as usize)
                        .map_or("", |f| f.name.as_str());
                    (name, range.clone())
                })
                .collect();
            self.client.get_ranges(&requests, IN_FLIGHT, |i, got| {
                if let Some(&(id, _, _)) = wave.get(i) {
                    self.deposit(id, got.ok());
                }
            });
        }
    }

    /// Chunk `id`'s bytes arrived (`None`: its request failed, its reads ask again).
    fn deposit(&self, id: u64, got: Option<bytes::Bytes>) {
        let mut st = lock(&self.state);
        if let Some(c) = st.chunks.get_mut(&id) {
            if c.left == 0 {
                // Of an order given up, or every sample's use went to another request.
                let size = c.size;
                st.chunks.remove(&id);
                st.held -= size;
            } else {
                c.body = got.map_or(Body::Failed, Body::Ready);
            }
        }
        drop(st);
        self.changed.notify_all();
    }

    /// The next wave's requests, `(chunk, file, range)` in the order of their first
    /// sample, once the epoch has samples left to plan and room: `None` when stopped.
    fn plan(&self) -> Option<Vec<(u64, u32, Range<u64>)>> {
        let mut st = lock(&self.state);
        let mut wants: Vec<Want> = Vec::new();
        let mut samples: Vec<(usize, usize)> = Vec::new();
        loop {
            if st.stop {
                return None;
            }
            if st.announced && st.next < st.order.len() && st.held < self.budget {
                let room = self.budget - st.held;
                wants.clear();
                samples.clear();
                let end = self.gather(&st, room, &mut wants, &mut samples);
                if wants.is_empty() {
                    // Every sample gathered is held already, or was read early.
                    self.commit(&mut st, &[], end, Vec::new(), Vec::new());
                    continue;
                }
                // Shrink the wave until its requests fit the room (one sample may pass
                // it when nothing else is held).
                let mut take = wants.len();
                loop {
                    let (sorted, merged) = coalesce(&wants[..take], GAP, MAX_SPAN);
                    let bytes: u64 = merged.iter().map(|m| m.end - m.start).sum();
                    if bytes <= room || (take == 1 && st.held == 0) {
                        let cut = samples.get(take).map_or(end, |s| s.1);
                        return Some(self.commit(&mut st, &samples[..take], cut, sorted, merged));
                    }
                    if take == 1 {
                        break;
                    }
                    take = take.div_ceil(2);
                }
                // Not even one sample fits beside what is held: wait for reads.
                st = self
                    .changed
                    .wait_timeout(st, std::time::Duration::from_millis(50))
                    .map_or_else(|p| p.into_inner().0, |(g, _)| g);
                continue;
            }
            st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The samples to fetch from position `next` on, `(sample, position)` in `samples`
    /// and their ranges in `wants`, up to half of `room` bytes (at least one): those not
    /// held already and not read early. Returns the position after the last one looked
    /// at. Changes nothing: [`Inner::commit`] does.
    fn gather(
        &self,
        st: &State,
        room: u64,
        wants: &mut Vec<Want>,
        samples: &mut Vec<(usize, usize)>,
    ) -> usize {
        let mut bytes = 0u64;
        let mut k = st.next;
        while k < st.order.len()
            && wants.len() < WAVE_SAMPLES
            && (bytes < room / 2 || wants.is_empty())
        {
            let i = st.order[k];
            k += 1;
            if st.early.contains_key(&i)
                || st.slots.contains_key(&i)
                || st.kept.as_ref().is_some_and(|k| k.serves(i))
            {
                continue;
            }
            // Out of range: not fetched, its read says so.
            let (Some(&file), Some(r)) = (self.files.file_of.get(i), self.ranges.get(i)) else {
                continue;
            };
            wants.push(Want {
                file,
                start: r.start,
                end: r.end,
            });
            samples.push((i, k - 1));
            bytes += r.end - r.start;
        }
        k
    }

    /// Record the wave that fetches `samples` (`(sample, position)`, by position) with
    /// the requests `merged` over `sorted` (their plan): positions up to `cut` are
    /// planned; a sample held already gets one more use, one read early is skipped.
    fn commit(
        &self,
        st: &mut State,
        samples: &[(usize, usize)],
        cut: usize,
        sorted: Vec<usize>,
        merged: Vec<Merged>,
    ) -> Vec<(u64, u32, Range<u64>)> {
        let mut members = samples.iter().map(|s| s.1).peekable();
        for k in st.next..cut {
            if members.next_if_eq(&k).is_some() {
                continue;
            }
            let Some(&i) = st.order.get(k) else { break };
            if let Some(n) = st.early.get_mut(&i) {
                *n -= 1;
                if *n == 0 {
                    st.early.remove(&i);
                }
            } else if let Some(slot) = st.slots.get_mut(&i) {
                slot.uses += 1;
                let chunk = slot.chunk;
                if let Some(c) = st.chunks.get_mut(&chunk) {
                    c.left += 1;
                }
            }
        }
        st.next = cut;
        let mut wave: Vec<(usize, u64, u32, Range<u64>)> = Vec::with_capacity(merged.len());
        for m in merged {
            let id = st.next_chunk;
            st.next_chunk += 1;
            st.chunks.insert(
                id,
                Chunk {
                    body: Body::Pending,
                    left: 0,
                    size: m.end - m.start,
                },
            );
            st.held += m.end - m.start;
            let mut first = usize::MAX;
            let mut left = 0;
            for &w in &sorted[m.members.clone()] {
                let (i, pos) = samples[w];
                first = first.min(pos);
                if let Some(slot) = st.slots.get_mut(&i) {
                    // Twice in this wave: the first request's bytes serve both.
                    slot.uses += 1;
                    let chunk = slot.chunk;
                    if let Some(c) = st.chunks.get_mut(&chunk) {
                        c.left += 1;
                    }
                    continue;
                }
                let r = &self.ranges[i];
                st.slots.insert(
                    i,
                    Slot {
                        chunk: id,
                        at: (r.start - m.start) as usize,
                        file: m.file,
                        start: r.start,
                        len: (r.end - r.start) as usize,
                        uses: 1,
                    },
                );
                left += 1;
            }
            if let Some(c) = st.chunks.get_mut(&id) {
                c.left += left;
            }
            wave.push((first, id, m.file, m.start..m.end));
        }
        wave.sort_unstable_by_key(|w| w.0);
        wave.into_iter().map(|(_, id, f, r)| (id, f, r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(file: u32, start: u64, end: u64) -> Want {
        Want { file, start, end }
    }

    /// Every want is inside exactly one request of its file, listed once.
    fn covered_once(wants: &[Want], sorted: &[usize], merged: &[Merged]) {
        let mut seen = vec![0; wants.len()];
        for m in merged {
            for &i in &sorted[m.members.clone()] {
                let w = wants[i];
                assert_eq!(w.file, m.file, "a request across files");
                assert!(m.start <= w.start && w.end <= m.end, "{w:?} outside {m:?}");
                seen[i] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{seen:?}");
    }

    /// The byte of file `f` at `at`.
    fn byte(f: u32, at: u64) -> u8 {
        ((f as u64 * 131 + at) % 251) as u8
    }

    /// Plan, fetch (from the pattern) and read an epoch's `order` as the prefetchers and
    /// the workers do, one step at a time, with `budget` bytes; `early` is read before
    /// anything is planned. Every read gets its sample's bytes (but `early`'s planned
    /// use: it read them itself), memory never passes the budget, and nothing is left.
    fn walk(budget: u64, order: &[usize], early: usize) {
        let n = 60;
        let file_of: Vec<u32> = (0..n).map(|i| (i % 4) as u32).collect();
        let ranges: Vec<Range<u64>> = (0..n as u64)
            .map(|i| {
                let start = (i / 4) * 400;
                start..start + 100 + (i * 37) % 200
            })
            .collect();
        let files = AheadFiles {
            files: (0..4)
                .map(|k| super::super::AheadFile {
                    name: format!("f{k}"),
                    size: 6000,
                    crc32: 0,
                    checked: false,
                    unpacked_from: None,
                })
                .collect(),
            listed_by: "the test",
            keep: Vec::new(),
            file_of: file_of.clone(),
            per_epoch: order.len() as u64,
            order: crate::store::Orders::fixed(Vec::new()),
            check: Box::new(|_, _| Ok(())),
            unpack: None,
            assemble: None,
        };
        let url = super::super::StoreUrl::parse("http://127.0.0.1:9/none").expect("url");
        let client = StoreClient::new(&url, None).expect("client");
        let ahead = RangeAhead::new(client, files, ranges.clone(), budget, None);
        let inner = &ahead.inner;
        {
            let mut st = lock(&inner.state);
            st.announced = true;
            st.order = order.to_vec();
        }
        let early_at = order
            .iter()
            .rposition(|&i| i == early)
            .expect("in the order");
        let read = |i: usize| {
            inner.take(
                file_of[i] as usize,
                &(ranges[i].start as usize..ranges[i].end as usize),
                i,
            )
        };
        assert!(read(early).is_none(), "nothing planned yet");
        let mut r = 0;
        while r < order.len() {
            let (next, held) = {
                let st = lock(&inner.state);
                (st.next, st.held)
            };
            if next < order.len() && held + 300 <= budget {
                let wave = inner.plan().expect("a wave");
                assert!(lock(&inner.state).held <= budget, "over the budget");
                for (id, f, range) in wave {
                    let bytes: Vec<u8> = range.clone().map(|at| byte(f, at)).collect();
                    inner.deposit(id, Some(bytes::Bytes::from(bytes)));
                }
                continue;
            }
            assert!(r < next, "a read past the plan with the budget full");
            let i = order[r];
            let got = read(i);
            if r == early_at {
                assert!(got.is_none(), "the early read's use is not fetched again");
            } else {
                let got = got.unwrap_or_else(|| panic!("position {r}, sample {i}: not fetched"));
                let want: Vec<u8> = ranges[i].clone().map(|at| byte(file_of[i], at)).collect();
                assert_eq!(&got[..], &want[..], "position {r}, sample {i}");
            }
            r += 1;
        }
        let st = lock(&inner.state);
        assert_eq!(st.next, order.len());
        assert_eq!(st.held, 0, "memory freed");
        assert!(st.slots.is_empty() && st.chunks.is_empty(), "all read");
        // (The early sample's own read, at its place, is noted early again: an extra
        // request if it came once more, never a lost one.)
        assert!(st.early.len() <= 1, "{:?}", st.early);
    }

    /// A shuffled order of 60 samples, padded with its first five again.
    fn padded_order() -> Vec<usize> {
        let mut order: Vec<usize> = (0..60).collect();
        let mut x = 99u64;
        for k in (1..order.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.swap(k, (x % (k as u64 + 1)) as usize);
        }
        let pad: Vec<usize> = order[..5].to_vec();
        order.extend(pad);
        order
    }

    #[test]
    fn every_read_gets_its_bytes_within_the_budget_and_nothing_is_left() {
        let order = padded_order();
        // A budget of a few samples: many waves, each within it.
        walk(1500, &order, order[40]);
        // A budget larger than the epoch: one wave, the padded samples kept for their
        // second use.
        walk(1 << 20, &order, order[40]);
    }

    #[test]
    fn ranges_closer_than_the_gap_are_merged_and_others_are_not() {
        let wants = [
            want(0, 5000, 6000),
            want(0, 100, 1000),
            want(0, 1500, 2000),
            want(0, 2000 + 10_000, 13_000),
        ];
        let (sorted, merged) = coalesce(&wants, 4000, 1 << 20);
        covered_once(&wants, &sorted, &merged);
        let spans: Vec<(u64, u64)> = merged.iter().map(|m| (m.start, m.end)).collect();
        // 1000 -> 1500 and 2000 -> 5000 are within 4000; 6000 -> 12000 is not.
        assert_eq!(spans, vec![(100, 6000), (12_000, 13_000)]);
        let (sorted, merged) = coalesce(&wants, 0, 1 << 20);
        covered_once(&wants, &sorted, &merged);
        assert_eq!(
            merged.len(),
            4,
            "no gap: nothing merged but touching ranges"
        );
    }

    #[test]
    fn ranges_of_different_files_are_never_merged() {
        let wants = [
            want(1, 0, 10),
            want(0, 10, 20),
            want(1, 10, 20),
            want(2, 0, 10),
        ];
        let (sorted, merged) = coalesce(&wants, 1 << 20, 1 << 20);
        covered_once(&wants, &sorted, &merged);
        let files: Vec<u32> = merged.iter().map(|m| m.file).collect();
        assert_eq!(files, vec![0, 1, 2]);
        assert_eq!((merged[1].start, merged[1].end), (0, 20));
    }

    #[test]
    fn a_request_stays_within_the_span_unless_one_sample_is_longer() {
        let wants: Vec<Want> = (0..10).map(|k| want(0, k * 100, k * 100 + 90)).collect();
        let (sorted, merged) = coalesce(&wants, 1000, 300);
        covered_once(&wants, &sorted, &merged);
        assert!(merged.iter().all(|m| m.end - m.start <= 300), "{merged:?}");
        assert_eq!(merged.len(), 4);
        let big = [want(0, 0, 1000), want(0, 1000, 1010)];
        let (sorted, merged) = coalesce(&big, 1000, 300);
        covered_once(&big, &sorted, &merged);
        assert_eq!(merged.len(), 2);
    }

    #[test]
    fn a_shuffled_plan_covers_every_sample_exactly_once() {
        // 5 files of 200 samples of 1000 bytes, 300 of them in a scrambled order.
        let mut wants = Vec::new();
        let mut x = 12345u64;
        for _ in 0..300 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (file, k) = ((x % 5) as u32, (x >> 8) % 200);
            if !wants
                .iter()
                .any(|w: &Want| w.file == file && w.start == k * 1000)
            {
                wants.push(want(file, k * 1000, k * 1000 + 1000));
            }
        }
        let (sorted, merged) = coalesce(&wants, 1500, 1 << 20);
        covered_once(&wants, &sorted, &merged);
        assert!(merged.len() < wants.len(), "neighbours were merged");
        for pair in merged.windows(2) {
            if pair[0].file == pair[1].file {
                assert!(pair[1].start > pair[0].end + 1500, "{pair:?} should be one");
            }
        }
    }
}
