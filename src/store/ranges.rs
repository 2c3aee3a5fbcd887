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

use super::keeper::Keeping;
use super::{stats, AheadFiles, Cache, Keeper, StoreClient};
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::ops::Range;
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
}

struct Inner {
    client: StoreClient,
    files: AheadFiles,
    ranges: Arc<[Range<u64>]>,
    budget: u64,
    /// The next epoch's first samples kept in the cache folder's room (`None`: no cache).
    keeper: Option<Keeper>,
    state: Mutex<State>,
    changed: Condvar,
    /// The process whose prefetchers these are.
    pid: AtomicU32,
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
        let key = u64::from(h.finalize()) << 32;
        let ranges: Arc<[Range<u64>]> = ranges.into();
        let keeper = cache.map(|cache| {
            let lens = Arc::clone(&ranges);
            Keeper::new(Keeping {
                cache,
                key,
                orders: files.order.clone(),
                per_epoch: files.per_epoch as usize,
                samples: ranges.len(),
                len_of: Box::new(move |i| lens.get(i).map(|r| r.end.saturating_sub(r.start))),
                keep: files.keep.clone(),
            })
        });
        RangeAhead {
            inner: Arc::new(Inner {
                client,
                files,
                ranges,
                budget: budget.max(1),
                keeper,
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
        *st = State {
            stop,
            ..State::default()
        };
    }

    /// The run reads no epoch after `epoch`: nothing is kept for one.
    pub fn last_epoch(&self, epoch: u64) {
        if let Some(k) = &self.inner.keeper {
            k.last_epoch(epoch);
        }
    }

    /// Epoch `epoch` reads the samples `order` (indices, in order; a resumed epoch's from
    /// where it resumes): the prefetchers walk it from its start, what was fetched for
    /// an earlier order is dropped.
    pub fn start_epoch(&self, epoch: u64, order: &[usize]) {
        self.forked();
        // First: the prefetchers skip what the kept file serves from the new order's start.
        if let Some(k) = &self.inner.keeper {
            k.start_epoch(epoch, order);
        }
        let mut st = lock(&self.inner.state);
        st.slots.clear();
        st.early.clear();
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
        let keeper = inner.keeper.as_ref();
        if keeper.is_some_and(|k| k.read(index, range.len(), scratch).is_some()) {
            stats::waited(t0.elapsed());
            return Ok(());
        }
        if let Some(b) = inner.take(file, &range, index) {
            scratch.clear();
            scratch.extend_from_slice(&b);
            if let Some(k) = keeper {
                k.passed(index, &b);
            }
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
        if let Some(k) = keeper {
            k.passed(index, &bytes);
        }
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
        lock(&self.inner.state).stop = true;
        // The kept files go now, not when the last prefetcher lets go of the state (the
        // process may end first).
        if let Some(k) = &self.inner.keeper {
            k.close();
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
                || self.keeper.as_ref().is_some_and(|k| k.serves(i))
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
