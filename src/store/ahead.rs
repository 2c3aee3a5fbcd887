//! Whole files of a location in object storage (shard files, container files), fetched
//! into the local [`Cache`] when an epoch needs them and memory-mapped from there: what
//! every reader of a few large files shares, knowing only their names, sizes and
//! checksums (or versions), the file each sample is in, and the epochs' order.
//!
//! A read of a sample's bytes copies them out of its mapped file (fetching the file first
//! when it is not cached: one download per file, however many workers ask at once), and
//! holds the map only while it copies: the files in use are exactly those counted
//! there, with those being fetched. The epoch's order is known: the one the pipeline
//! announces when it starts an epoch (the source's `epoch_starts`: the samples it will
//! read, from where a resumed epoch starts) or, without one (a reader that is not an
//! epoch), the reader's `order` of the epoch guessed from the reads' count; with the next
//! epoch's order, it gives every file's next use from the position reached (the lowest
//! position not yet read, so a worker still on an earlier batch keeps its file).
//!
//! - **Eviction by future use** (Belady's rule): when the cache limit needs room, the
//!   files going are those of the folder that are not ours first, then ours whose next
//!   use (in this epoch's remaining order, then the next epoch's) is furthest away or
//!   never; a file a reader is copying from or that is being fetched never goes.
//! - **Never dying for want of room that the open accepted** (the index and names plus
//!   the largest file, see the construction sites' check): a read whose file finds no
//!   room waits for readers to release theirs (at most [`WAIT_FOR_ROOM`]); prefetching
//!   fetches a file only when it fits without evicting a file needed sooner than it
//!   (the "do no harm" rule of prefetching), so how far ahead it fetches follows the
//!   room instead of failing, and it stands back while a read waits for room.
//! - **Cold reads at the store's speed**: [`PREFETCH_THREADS`] threads fetch the next files of the
//!   order at once; a file larger than [`PARTS_FROM`] comes as parallel ranged GETs of
//!   [`PART`] bytes, [`PARTS_IN_FLIGHT`] at a time ([`StoreClient::download_parts`]), so
//!   one very large file is not one connection's speed. Smaller files come whole: measured
//!   on both loopback servers, splitting 32 MB shards into 8 MiB parts made a cold epoch
//!   4% (fake-gcs-server) and 47% (moto, which reads the whole object for every range)
//!   slower than four whole-file streams. The size and CRC-32 are counted as the bytes
//!   arrive ([`super::Received`]) and checked before the file is renamed into place: no
//!   second pass over the file (that re-read was 7% of a cold epoch's cycles).
//!
//! A file downloaded again by this process after it was evicted is counted
//! ([`stats`]' `refetched`): the traffic a cache too small for the sampling costs.

use super::cache::Ranking;
use super::next_use::{Plan, NEVER};
use super::{stats, Cache, CacheKey, StoreClient, StoreError};
use crate::error::{Error, Result};
use memmap2::Mmap;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// One file as its reader lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AheadFile {
    /// Its name under the location.
    pub name: String,
    /// Its size.
    pub size: u64,
    /// Its CRC-32, or a tag of its version (a hash of its ETag) when `checked` is false.
    pub crc32: u32,
    /// Whether `crc32` is the file's checksum, checked when it arrives.
    pub checked: bool,
    /// `Some(object size)` when the cache holds not the object itself but its unpacked
    /// copy, `size` bytes of it (a Parquet file, a gzip'd TFRecord): the object is fetched
    /// whole into memory and [`AheadFiles::unpack`] writes the copy.
    pub unpacked_from: Option<u64>,
}

impl AheadFile {
    /// The file as the cache keys it; `listed_by` says who lists it, for messages.
    pub fn key(&self, listed_by: &'static str) -> CacheKey<'_> {
        CacheKey {
            name: &self.name,
            size: self.size,
            crc32: self.crc32,
            checked: self.checked,
            listed_by,
        }
    }
}

/// Checks a file's map as it arrives (its magic, its header): `(object, map)`.
pub type CheckFile = Box<dyn Fn(&std::path::Path, &Mmap) -> Result<()> + Send + Sync>;

/// Writes the unpacked copy of a packed object: `(object, its bytes, out)`.
pub type Unpack =
    Box<dyn Fn(&std::path::Path, &[u8], &mut dyn std::io::Write) -> Result<()> + Send + Sync>;

/// Writes file `i` (of [`AheadFiles::files`]) into `out` from its start by `client`, when
/// the file is made of several objects rather than one (an image tree's pack): what was
/// written.
pub type Assemble =
    Box<dyn Fn(&StoreClient, usize, &mut std::fs::File) -> Result<super::Received> + Send + Sync>;

/// What a [`FetchAhead`] is given: the files, who lists them, the file of each sample and
/// how the epochs read them.
pub struct AheadFiles {
    /// The files.
    pub files: Vec<AheadFile>,
    /// Who lists them (`"the manifest"`), for messages.
    pub listed_by: &'static str,
    /// Cached paths that must stay (an index beside the files).
    pub keep: Vec<PathBuf>,
    /// The file of every sample (a hint for prefetching; bounds are checked on use).
    pub file_of: Vec<u32>,
    /// Samples an epoch reads.
    pub per_epoch: u64,
    /// The samples of an epoch, in order (this reader's, and another rank's).
    pub order: super::Orders,
    /// The check of each file as it arrives.
    pub check: CheckFile,
    /// How the files with [`AheadFile::unpacked_from`] are unpacked.
    pub unpack: Option<Unpack>,
    /// How every file is made, when the files are not objects of the store (an image
    /// tree's packs of objects); `None`: each file is the object of its name.
    pub assemble: Option<Assemble>,
}

/// Files the up-front room checks count as fetched ahead of the reader (a shard-aware
/// window's: its files plus these). Prefetching itself fetches as far ahead as the room
/// allows without harm, and needs none of it.
pub const PREFETCH: usize = 2;

/// Files fetched ahead at once (the prefetching threads), when they fit.
pub const PREFETCH_THREADS: usize = 4;

/// Files larger than this are downloaded as ranged parts; smaller ones whole.
pub const PARTS_FROM: u64 = 64 << 20;

/// Bytes of one ranged GET of a large file's download (within the 8-16 MB that S3's
/// performance guidance gives for byte-range fetches).
pub const PART: u64 = 16 << 20;

/// Ranged GETs of one file in flight at once.
pub const PARTS_IN_FLIGHT: usize = 4;

/// The longest a read waits for readers to release room in the cache.
pub const WAIT_FOR_ROOM: Duration = Duration::from_secs(600);

/// How long a read that needs room first waits for files needed before its own to be
/// done with, before it may evict any file not in use.
const NO_HARM_WAIT: Duration = Duration::from_millis(50);

/// How a fetch may make room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Room {
    /// A read needs the file now: any file not in use may go, waiting when none can.
    Read,
    /// A prefetch of a file next used this far away: only files needed later may go,
    /// and no room means no prefetch.
    Ahead(u64),
}

/// The state's lock and condition. A process forked from the one that opened the files
/// (a DataLoader worker) makes its own: the parent's lock may have been held at the fork by
/// a thread that the child does not have (a prefetcher reserving room), and would never be
/// released there. The parent's is leaked in the child.
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn fresh(files: usize) -> *mut Shared {
        Box::into_raw(Box::new(Shared {
            state: Mutex::new(State {
                maps: vec![None; files],
                using: vec![0; files],
                fetching: vec![false; files],
                failed: vec![false; files],
                downloaded: vec![false; files],
                ..State::default()
            }),
            changed: Condvar::new(),
        }))
    }
}

/// What the workers and the prefetchers share.
struct Inner {
    client: StoreClient,
    cache: Cache,
    files: AheadFiles,
    /// The file of each cached path.
    file_at: HashMap<PathBuf, usize>,
    /// This process's state and its condition (see [`Shared`]); never null, freed on drop.
    shared: AtomicPtr<Shared>,
    /// Samples read, to know the epoch (reads / samples per epoch) without an announced
    /// order.
    reads: AtomicU64,
    /// The process whose prefetcher threads these are (see [`FetchAhead::forked`]).
    pid: AtomicU32,
}

#[derive(Default)]
struct State {
    /// The maps of the files fetched (dropped when evicted).
    maps: Vec<Option<Arc<Mmap>>>,
    /// Maps handed to readers and not yet given back, per file.
    using: Vec<u32>,
    /// Files being fetched.
    fetching: Vec<bool>,
    /// Files whose prefetch failed this epoch: not prefetched again before the next (a
    /// read that needs one still fetches it, and reports the error); assembled files
    /// (see [`AheadFiles::assemble`]) not again at all.
    failed: Vec<bool>,
    /// Files this process downloaded (a second download is a refetch).
    downloaded: Vec<bool>,
    /// The epoch's future (`None` until the first read or announcement).
    plan: Option<Plan>,
    /// The order was announced by [`FetchAhead::start_epoch`] (not guessed from reads).
    announced: bool,
    /// Reads waiting for room (prefetching stands back meanwhile).
    waiting_room: usize,
    /// Bumped whenever room may have appeared or next uses changed (a file released or
    /// fetched, a new epoch); a prefetch that found no room waits for it to move.
    room_gen: u64,
    /// `room_gen` when a prefetch last found no room, and when.
    no_room: Option<(u64, Instant)>,
    /// Bytes of the prefetches in flight (their reserved room is not the readers').
    ahead_bytes: u64,
    stop: bool,
}

/// The files of a location, fetched ahead (see the module).
pub struct FetchAhead {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for FetchAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchAhead")
            .field("url", self.inner.client.url())
            .finish()
    }
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Start the threads that fetch ahead. A failed prefetch is left for the read that needs
/// the file, which fetches it again and reports the error; without the threads (they
/// could not start), every file is fetched by the read that needs it.
fn spawn_prefetchers(inner: &Arc<Inner>) {
    for k in 0..PREFETCH_THREADS {
        let worker = Arc::clone(inner);
        let spawned = std::thread::Builder::new()
            .name(format!("imgfeed-prefetch-{k}"))
            .spawn(move || worker.prefetch_loop());
        if spawned.is_err() && k == 0 {
            lock(inner.state()).stop = true;
        }
    }
}

/// A map lent to a reader, given back on drop (the file may be evicted again then).
struct Held<'a> {
    inner: &'a Inner,
    file: usize,
    map: Arc<Mmap>,
}

impl Held<'_> {
    /// Copy bytes `range` of the file into `scratch`.
    fn copy_out(&self, range: std::ops::Range<usize>, scratch: &mut Vec<u8>) -> Result<()> {
        let bytes = self.map.get(range).ok_or_else(|| {
            Error::Internal(format!(
                "a record outside file {}, past the index checks",
                self.file
            ))
        })?;
        scratch.clear();
        scratch.extend_from_slice(bytes);
        Ok(())
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut st = lock(self.inner.state());
        if let Some(u) = st.using.get_mut(self.file) {
            *u = u.saturating_sub(1);
            if *u == 0 {
                st.room_gen += 1;
                if st.waiting_room > 0 {
                    drop(st);
                    self.inner.changed().notify_all();
                }
            }
        }
    }
}

impl FetchAhead {
    /// `files`, fetched by `client` into `cache`.
    pub fn new(client: StoreClient, cache: Cache, files: AheadFiles) -> FetchAhead {
        let n = files.files.len();
        let paths: Vec<PathBuf> = files
            .files
            .iter()
            .map(|f| cache.path_of(&f.key(files.listed_by)))
            .collect();
        let file_at = paths.into_iter().enumerate().map(|(i, p)| (p, i)).collect();
        let inner = Arc::new(Inner {
            client,
            cache,
            files,
            file_at,
            shared: AtomicPtr::new(Shared::fresh(n)),
            reads: AtomicU64::new(0),
            pid: AtomicU32::new(std::process::id()),
        });
        spawn_prefetchers(&inner);
        FetchAhead { inner }
    }

    /// In a process forked from the one that opened the dataset (a DataLoader worker), the
    /// prefetcher threads, the readers and the downloads they had in flight stayed in the
    /// parent: forget those (this process fetches the files itself) and start prefetchers
    /// of this process's own. One atomic load when nothing forked.
    fn forked(&self) {
        if !super::forked::first_call_in_child(&self.inner.pid) {
            return;
        }
        // A fresh state: the parent's lock may be held by a thread not in this process.
        // Maps, plan and counts start again (a cached file maps again without a request).
        let fresh = Shared::fresh(self.inner.files.files.len());
        let _leaked = self.inner.shared.swap(fresh, Ordering::AcqRel);
        spawn_prefetchers(&self.inner);
    }

    /// Epoch `epoch` reads the samples `order` (indices, in order; a resumed epoch's from
    /// where it resumes): prefetching and eviction follow it (and the next epoch's order),
    /// and its first files are fetched now.
    pub fn start_epoch(&self, epoch: u64, order: &[usize]) {
        self.forked();
        let next = self.inner.files.order.of(epoch + 1);
        let plan = Plan::new(
            epoch,
            order,
            &next,
            &self.inner.files.file_of,
            self.inner.files.files.len(),
        );
        let mut st = lock(self.inner.state());
        st.announced = true;
        st.plan = Some(plan);
        if self.inner.files.assemble.is_none() {
            // A file made of several objects that failed stays failed: its reader reads
            // those objects one by one (an image tree's pack).
            st.failed.fill(false);
        }
        st.room_gen += 1;
        drop(st);
        self.inner.changed().notify_all();
    }

    /// Copy bytes `range` of file `shard` into `scratch` (the read of sample `index`).
    pub fn copy(
        &self,
        shard: usize,
        range: std::ops::Range<usize>,
        index: usize,
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        self.forked();
        let t0 = Instant::now();
        let st = self.inner.note_read(index);
        let held = self.inner.acquire_locked(shard, st)?;
        stats::waited(t0.elapsed());
        held.copy_out(range, scratch)
    }

    /// [`FetchAhead::copy`] when file `shard` is at hand (mapped here, or complete in the
    /// cache folder): `Ok(false)`, without waiting, when it would first have to be
    /// downloaded (or is being downloaded). The caller then reads the sample another way; the prefetchers
    /// still bring the file for the reads after (an image tree's first epoch reads its
    /// images one GET each while their packs arrive).
    pub fn copy_if_at_hand(
        &self,
        shard: usize,
        range: std::ops::Range<usize>,
        index: usize,
        scratch: &mut Vec<u8>,
    ) -> Result<bool> {
        self.forked();
        let t0 = Instant::now();
        let st = self.inner.note_read(index);
        if !self.inner.at_hand(shard, &st) {
            return Ok(false);
        }
        let held = self.inner.acquire_locked(shard, st)?;
        stats::waited(t0.elapsed());
        held.copy_out(range, scratch).map(|()| true)
    }

    /// A read of sample `index` made elsewhere (not from its file): noted, so the
    /// prefetchers' plan of the epoch moves on.
    pub fn note_read(&self, index: usize) {
        self.forked();
        drop(self.inner.note_read(index));
    }

    /// Whether file `shard` is at hand (see [`FetchAhead::copy_if_at_hand`]).
    pub fn at_hand(&self, shard: usize) -> bool {
        self.forked();
        let st = lock(self.inner.state());
        self.inner.at_hand(shard, &st)
    }

    /// Fetch every file (each is checked against its size and CRC-32 as it arrives; a
    /// cached one was when it arrived).
    pub fn verify_all(&self) -> Result<()> {
        self.forked();
        for shard in 0..self.inner.files.files.len() {
            drop(self.inner.acquire(shard)?);
        }
        Ok(())
    }
}

/// The cached copy of the file `key` names, downloaded by `client` when it is not there
/// (room made by evicting files not in `keep`); checked as [`Cache`] checks downloads.
pub fn cached(
    client: &StoreClient,
    cache: &Cache,
    key: &CacheKey<'_>,
    keep: &[PathBuf],
) -> Result<PathBuf> {
    if let Some(p) = cache.lookup(key) {
        stats::cache_hit();
        return Ok(p);
    }
    match cache.reserve(key, keep)?.0 {
        Err(done) => Ok(done),
        Ok(mut pending) => {
            let file = pending
                .file()
                .ok_or_else(|| Error::Internal("a pending download without its file".into()))?;
            let (_, got) = client.download(key.name, Some((key.size, key.listed_by)), file)?;
            stats::download();
            Ok(pending.commit(key, &client.url().object(key.name), got)?)
        }
    }
}

impl Drop for FetchAhead {
    fn drop(&mut self) {
        lock(self.inner.state()).stop = true;
        self.inner.changed().notify_all();
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: from `Shared::fresh`, freed only here (a replaced one is leaked).
        drop(unsafe { Box::from_raw(*self.shared.get_mut()) });
    }
}

impl Inner {
    /// This process's [`Shared`].
    fn shared(&self) -> &Shared {
        // SAFETY: never null; what it points to is freed only in `drop` (a replaced one
        // is leaked), so it lives as long as `&self`.
        unsafe { &*self.shared.load(Ordering::Acquire) }
    }

    fn state(&self) -> &Mutex<State> {
        &self.shared().state
    }

    fn changed(&self) -> &Condvar {
        &self.shared().changed
    }

    fn entry(&self, shard: usize) -> Result<&AheadFile> {
        self.files
            .files
            .get(shard)
            .ok_or_else(|| Error::Internal(format!("file {shard} is not listed")))
    }

    fn key<'a>(&self, f: &'a AheadFile) -> CacheKey<'a> {
        f.key(self.files.listed_by)
    }

    /// Whether file `shard` is mapped, or complete in the cache folder (where a fetch of
    /// it only maps it: a download in progress is under a temporary name).
    fn at_hand(&self, shard: usize, st: &State) -> bool {
        st.maps.get(shard).is_some_and(Option::is_some)
            || self
                .files
                .files
                .get(shard)
                .is_some_and(|f| self.cache.lookup(&self.key(f)).is_some())
    }

    /// A read of sample `index`: the state, locked, with the plan's position moved (the
    /// plan of the epoch the reads' count says made first when no order was announced).
    fn note_read(&self, index: usize) -> std::sync::MutexGuard<'_, State> {
        let per_epoch = self.files.per_epoch.max(1);
        let epoch = self.reads.fetch_add(1, Ordering::Relaxed) / per_epoch;
        let mut st = lock(self.state());
        if !st.announced && st.plan.as_ref().is_none_or(|p| p.epoch != epoch) {
            drop(st);
            let plan = Plan::new(
                epoch,
                &self.files.order.of(epoch),
                &self.files.order.of(epoch + 1),
                &self.files.file_of,
                self.files.files.len(),
            );
            st = lock(self.state());
            st.plan = Some(plan);
            st.room_gen += 1;
            self.changed().notify_all();
        }
        if let Some(p) = st.plan.as_mut() {
            p.mark(index);
        }
        st
    }

    /// The map of `shard`, lent to a reader: fetched (once, whoever asks) when it is not
    /// there.
    fn acquire(&self, shard: usize) -> Result<Held<'_>> {
        self.acquire_locked(shard, lock(self.state()))
    }

    /// [`Inner::acquire`] with the state locked already (by the read's [`Inner::note_read`]).
    fn acquire_locked<'a>(
        &'a self,
        shard: usize,
        mut st: std::sync::MutexGuard<'a, State>,
    ) -> Result<Held<'a>> {
        loop {
            if shard >= st.maps.len() {
                return Err(Error::Internal(format!("file {shard} is not listed")));
            }
            if let Some(Some(m)) = st.maps.get(shard) {
                let map = Arc::clone(m);
                st.using[shard] += 1;
                return Ok(Held {
                    inner: self,
                    file: shard,
                    map,
                });
            }
            if !st.fetching[shard] {
                break;
            }
            st = self.changed().wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.fetching[shard] = true;
        drop(st);
        let got = self.fetch(shard, Room::Read);
        let mut st = lock(self.state());
        st.fetching[shard] = false;
        st.room_gen += 1;
        let out = match got {
            Ok(Some(map)) => {
                let map = Arc::new(map);
                st.maps[shard] = Some(Arc::clone(&map));
                st.using[shard] += 1;
                Ok(Held {
                    inner: self,
                    file: shard,
                    map,
                })
            }
            Ok(None) => Err(Error::Internal(format!(
                "file {shard}: a read's fetch ended without the file"
            ))),
            Err(e) => Err(e),
        };
        drop(st);
        self.changed().notify_all();
        out
    }

    /// A prefetching thread: fetch the file not cached whose next use comes first, when it
    /// fits without evicting a file needed sooner; else wait for room or a new plan.
    fn prefetch_loop(&self) {
        let mut st = lock(self.state());
        loop {
            if st.stop {
                return;
            }
            let blocked = st.waiting_room > 0
                || st.no_room.is_some_and(|(g, t)| {
                    g == st.room_gen && t.elapsed() < Duration::from_millis(200)
                });
            let pick = if blocked { None } else { self.pick(&st) };
            let Some((f, d)) = pick else {
                st = self
                    .changed()
                    .wait_timeout(st, Duration::from_millis(20))
                    .map_or_else(|p| p.into_inner().0, |(g, _)| g);
                continue;
            };
            let size = self.files.files.get(f).map_or(0, |e| e.size);
            st.fetching[f] = true;
            st.ahead_bytes += size;
            drop(st);
            let got = self.fetch(f, Room::Ahead(d));
            st = lock(self.state());
            st.fetching[f] = false;
            st.ahead_bytes = st.ahead_bytes.saturating_sub(size);
            match got {
                Ok(Some(map)) => {
                    st.maps[f] = Some(Arc::new(map));
                    st.room_gen += 1;
                }
                // No room without harm: wait until some may appear.
                Ok(None) => st.no_room = Some((st.room_gen, Instant::now())),
                // Left for the read that needs it (which reports the error).
                Err(_) => {
                    if let Some(x) = st.failed.get_mut(f) {
                        *x = true;
                    }
                    st.no_room = Some((st.room_gen, Instant::now()));
                }
            }
            drop(st);
            self.changed().notify_all();
            st = lock(self.state());
        }
    }

    /// The file to prefetch: not mapped, not being fetched, read in the rest of this
    /// epoch (the next epoch's files are fetched when it starts: a run that ends here
    /// fetches nothing it does not read), the soonest; with its next use. Beside the
    /// first prefetch in flight, others only while the room they reserve stays within a
    /// third of the limit (the rest is the readers').
    fn pick(&self, st: &State) -> Option<(usize, u64)> {
        let plan = st.plan.as_ref()?;
        let left = plan.len.saturating_sub(plan.cursor()) as u64;
        let room = self.cache.limit() / 3;
        let fits = |f: usize| {
            let size = self.files.files.get(f).map_or(0, |e| e.size);
            st.ahead_bytes == 0 || st.ahead_bytes.saturating_add(size) <= room
        };
        (0..st.maps.len())
            .filter(|&f| st.maps[f].is_none() && !st.fetching[f] && !st.failed[f] && fits(f))
            .map(|f| (f, plan.next_use(f)))
            .filter(|&(_, d)| d < left)
            .min_by_key(|&(f, d)| (d, f))
    }

    /// Download (or find in the cache) and map `shard`, making room as `room` allows:
    /// `None` when a prefetch finds no room.
    fn fetch(&self, shard: usize, room: Room) -> Result<Option<Mmap>> {
        let entry = self.entry(shard)?;
        let object = self.client.url().object(&entry.name);
        let key = self.key(entry);
        let path = match self.cache.lookup(&key) {
            Some(p) => {
                stats::cache_hit();
                p
            }
            None => {
                let Some(pending) = self.reserve(shard, &key, room)? else {
                    return Ok(None);
                };
                match pending {
                    Err(done) => {
                        stats::cache_hit();
                        done
                    }
                    Ok(mut pending) => {
                        let file = pending.file().ok_or_else(|| {
                            Error::Internal("a pending download without its file".into())
                        })?;
                        let got = if let Some(assemble) = &self.files.assemble {
                            assemble(&self.client, shard, file)?
                        } else if let Some(packed) = entry.unpacked_from {
                            self.unpack_into(entry, packed, &object, file)?
                        } else {
                            self.client
                                .download_parts(
                                    &entry.name,
                                    entry.size,
                                    key.listed_by,
                                    file,
                                    if entry.size > PARTS_FROM {
                                        PART
                                    } else {
                                        entry.size
                                    },
                                    PARTS_IN_FLIGHT,
                                )
                                .map_err(Error::from)?
                                .1
                        };
                        stats::download();
                        let path = pending.commit(&key, &object, got).map_err(Error::from)?;
                        let mut st = lock(self.state());
                        if let Some(d) = st.downloaded.get_mut(shard) {
                            if *d {
                                stats::refetched(entry.size);
                            }
                            *d = true;
                        }
                        drop(st);
                        path
                    }
                }
            }
        };
        let map = map_sized(&path, entry.size, self.files.listed_by)?;
        (self.files.check)(std::path::Path::new(&object), &map)?;
        Ok(Some(map))
    }

    /// The unpacked copy of `entry` (an object of `packed` bytes) written into `out`: the
    /// object fetched whole into memory (one at a time per prefetching thread), unpacked,
    /// its first `entry.size` bytes kept (what the index reads; a copy that comes out
    /// shorter fails the commit's size check, naming the object).
    fn unpack_into(
        &self,
        entry: &AheadFile,
        packed: u64,
        object: &str,
        out: &mut std::fs::File,
    ) -> Result<super::Received> {
        let unpack = self.files.unpack.as_ref().ok_or_else(|| {
            Error::Internal(format!(
                "{object}: a packed file without a way to unpack it"
            ))
        })?;
        let (bytes, _) = self.client.get(&entry.name, packed)?;
        if bytes.len() as u64 != packed {
            return Err(StoreError::Changed {
                object: object.to_string(),
                reason: format!(
                    "{} bytes on the store, but {} says {packed}",
                    bytes.len(),
                    self.files.listed_by
                ),
            }
            .into());
        }
        let mut kept = Prefix {
            out: std::io::BufWriter::with_capacity(1 << 20, out),
            left: entry.size,
            hasher: crc32fast::Hasher::new(),
            len: 0,
        };
        unpack(std::path::Path::new(object), &bytes, &mut kept)?;
        std::io::Write::flush(&mut kept.out).map_err(|e| Error::Dataset {
            path: object.into(),
            reason: format!("writing its unpacked copy: {e}"),
        })?;
        Ok(super::Received {
            len: kept.len,
            crc32: kept.hasher.finalize(),
        })
    }

    /// Reserve room for `shard` (see [`Room`]), evicting by next use under the state's
    /// lock (so no reader takes a map of a file being evicted): `None` when a prefetch
    /// finds no room; a read waits for room, at most [`WAIT_FOR_ROOM`], evicting only
    /// files needed after its own for the first [`NO_HARM_WAIT`] (another worker still
    /// reading the file before it finishes with it, rather than fetching it again).
    #[allow(clippy::type_complexity)]
    fn reserve(
        &self,
        shard: usize,
        key: &CacheKey<'_>,
        room: Room,
    ) -> Result<Option<std::result::Result<super::cache::Pending, PathBuf>>> {
        let t0 = Instant::now();
        let mut waiting = false;
        let mut st = lock(self.state());
        let out = loop {
            let beyond = match room {
                Room::Read if t0.elapsed() < NO_HARM_WAIT => {
                    let own = st.plan.as_ref().map_or(NEVER, |p| p.next_use(shard));
                    if own >= NEVER {
                        0
                    } else {
                        own + 1
                    }
                }
                Room::Read => 0,
                Room::Ahead(d) => d.saturating_add(1),
            };
            let ranked = {
                let st = &*st;
                let next_use = |p: &std::path::Path| -> Option<u64> {
                    match self.file_at.get(p) {
                        None => Some(u64::MAX),
                        Some(&f) if f == shard || st.using[f] > 0 || st.fetching[f] => None,
                        Some(&f) => Some(
                            st.plan
                                .as_ref()
                                .map_or(NEVER, |p| p.next_use(f))
                                .saturating_add(1)
                                .min(NEVER),
                        ),
                    }
                };
                self.cache.reserve_ranked(
                    key,
                    &self.files.keep,
                    Some(&Ranking {
                        next_use: &next_use,
                        beyond,
                    }),
                )
            };
            match ranked {
                Ok((pending, evicted)) => {
                    for p in &evicted {
                        if let Some(&f) = self.file_at.get(p) {
                            st.maps[f] = None;
                        }
                    }
                    break Ok(Some(pending));
                }
                Err(StoreError::CacheFull { .. }) if matches!(room, Room::Ahead(_)) => {
                    break Ok(None)
                }
                Err(e @ StoreError::CacheFull { .. }) => {
                    if t0.elapsed() >= WAIT_FOR_ROOM {
                        break Err(Error::from(e));
                    }
                    // Files in use (readers copying, fetches in flight, another
                    // process's downloads) hold the room: wait for one to be released.
                    if !waiting {
                        waiting = true;
                        st.waiting_room += 1;
                    }
                    st = self
                        .changed()
                        .wait_timeout(st, Duration::from_millis(100))
                        .map_or_else(|p| p.into_inner().0, |(g, _)| g);
                }
                Err(e) => break Err(Error::from(e)),
            }
        };
        if waiting {
            st.waiting_room = st.waiting_room.saturating_sub(1);
        }
        out
    }
}

/// Map the cached file `path` after checking that it has `size` bytes, as `listed_by` says.
/// A writer that keeps the first `left` bytes written (counted and hashed) and drops the
/// rest: an unpacked copy cut to what its index reads.
struct Prefix<W: std::io::Write> {
    out: W,
    left: u64,
    hasher: crc32fast::Hasher,
    len: u64,
}

impl<W: std::io::Write> std::io::Write for Prefix<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let take = (buf.len() as u64).min(self.left) as usize;
        if let Some(kept) = buf.get(..take) {
            self.out.write_all(kept)?;
            self.hasher.update(kept);
            self.len += take as u64;
            self.left -= take as u64;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

fn map_sized(path: &std::path::Path, size: u64, listed_by: &str) -> Result<Mmap> {
    let bad = |reason: String| Error::Dataset {
        path: path.to_path_buf(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let len = file.metadata().map_err(|e| bad(e.to_string()))?.len();
    if len != size {
        let what = if len < size {
            "truncated"
        } else {
            "longer than written"
        };
        return Err(bad(format!(
            "{len} bytes, but {listed_by} says {size}: the file is {what} (damaged or replaced)"
        )));
    }
    // SAFETY: read-only, a cache file written whole and renamed into place.
    unsafe { Mmap::map(&file) }.map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreUrl;

    const SIZE: u64 = 100;

    fn listed(name: &str) -> AheadFile {
        AheadFile {
            name: name.into(),
            size: SIZE,
            crc32: crc32fast::hash(&[name.as_bytes()[0]; SIZE as usize]),
            checked: true,
            unpacked_from: None,
        }
    }

    /// Files `a`..`e` (one sample each: sample i is in file i) under a cache of `limit`
    /// bytes, reading `order`; no prefetching threads and no requests (every file the
    /// tests use is put in the cache by hand).
    fn inner(dir: &std::path::Path, limit: u64, order: Vec<usize>) -> Inner {
        let url = StoreUrl::parse("http://127.0.0.1:9/ds").expect("url");
        let client = StoreClient::new(&url, None).expect("client");
        let cache = Cache::open(Some(dir), limit, &url, None).expect("cache");
        let files: Vec<AheadFile> = ["a", "b", "c", "d", "e"].map(listed).to_vec();
        let n = files.len();
        let file_at = files
            .iter()
            .enumerate()
            .map(|(i, f)| (cache.path_of(&f.key("the manifest")), i))
            .collect();
        let plan = Plan::new(0, &order, &order, &[0, 1, 2, 3, 4], n);
        let inner = Inner {
            client,
            cache,
            files: AheadFiles {
                files,
                listed_by: "the manifest",
                keep: Vec::new(),
                file_of: vec![0, 1, 2, 3, 4],
                per_epoch: order.len() as u64,
                order: super::super::Orders::fixed(order),
                check: Box::new(|_, _| Ok(())),
                unpack: None,
                assemble: None,
            },
            file_at,
            shared: AtomicPtr::new(Shared::fresh(n)),
            reads: AtomicU64::new(0),
            pid: AtomicU32::new(std::process::id()),
        };
        {
            let mut st = lock(inner.state());
            st.plan = Some(plan);
            st.announced = true;
        }
        inner
    }

    /// Put file `f` in the cache as a download would, and map it.
    fn put(inner: &Inner, f: usize) {
        let e = &inner.files.files[f];
        let key = inner.key(e);
        let (pending, _) = inner.cache.reserve(&key, &[]).expect("room");
        let mut p = pending.expect("not cached yet");
        let byte = e.name.as_bytes()[0];
        let bytes = [byte; SIZE as usize];
        std::io::Write::write_all(p.file().expect("open"), &bytes).expect("writes");
        p.commit(&key, "x", crate::store::Received::of(&bytes))
            .expect("commits");
        let map = inner.fetch(f, Room::Read).expect("maps").expect("cached");
        lock(inner.state()).maps[f] = Some(Arc::new(map));
    }

    fn cached(inner: &Inner, f: usize) -> bool {
        inner
            .cache
            .lookup(&inner.key(&inner.files.files[f]))
            .is_some()
    }

    #[test]
    fn room_goes_to_the_file_needed_furthest_away_and_the_limit_holds() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // Room for three files; the order reads e, then b, then a; c and d never.
        let inner = inner(tmp.path(), 3 * SIZE, vec![4, 1, 0]);
        put(&inner, 0);
        put(&inner, 1);
        put(&inner, 2);
        // A stranger in the folder (an older version of a file): goes first.
        std::fs::write(inner.cache.dir().join("old.bin.00000000"), [0u8; 10]).expect("write");
        assert!(cached(&inner, 0) && cached(&inner, 1) && cached(&inner, 2));
        // e needs room: the stranger and c (never used again) go, not a or b (LRU
        // would have taken a, the least recently used).
        let got = inner.reserve(4, &inner.key(&inner.files.files[4]), Room::Read);
        assert!(matches!(got, Ok(Some(Ok(_)))));
        assert!(cached(&inner, 0) && cached(&inner, 1) && !cached(&inner, 2));
        assert!(!inner.cache.dir().join("old.bin.00000000").exists());
        assert!(
            lock(inner.state()).maps[2].is_none(),
            "the evicted map is dropped"
        );
        drop(got);
        assert!(inner.cache.used().expect("scan") <= 3 * SIZE);
        // With c gone, d's room must come from a (next used after b): a goes.
        put(&inner, 4);
        let got = inner.reserve(3, &inner.key(&inner.files.files[3]), Room::Read);
        assert!(matches!(got, Ok(Some(Ok(_)))));
        assert!(!cached(&inner, 0) && cached(&inner, 1) && cached(&inner, 4));
        assert!(inner.cache.used().expect("scan") <= 3 * SIZE);
    }

    #[test]
    fn a_prefetch_never_evicts_a_file_needed_sooner() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // Room for two; order a, b, c: prefetching c may not evict a or b.
        let inner = inner(tmp.path(), 2 * SIZE, vec![0, 1, 2]);
        put(&inner, 0);
        put(&inner, 1);
        let key = inner.key(&inner.files.files[2]);
        let d = lock(inner.state()).plan.as_ref().expect("plan").next_use(2);
        assert!(matches!(inner.reserve(2, &key, Room::Ahead(d)), Ok(None)));
        assert!(cached(&inner, 0) && cached(&inner, 1));
        // Past a, a's next use is never: prefetching c may take its room.
        lock(inner.state()).plan.as_mut().expect("plan").mark(0);
        let d = lock(inner.state()).plan.as_ref().expect("plan").next_use(2);
        assert!(matches!(
            inner.reserve(2, &key, Room::Ahead(d)),
            Ok(Some(Ok(_)))
        ));
        assert!(!cached(&inner, 0) && cached(&inner, 1));
    }

    #[test]
    fn a_read_waits_for_room_while_the_files_are_in_use() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let inner = inner(tmp.path(), 2 * SIZE, vec![0, 1, 2]);
        put(&inner, 0);
        put(&inner, 1);
        // Readers hold both files: c's read waits instead of failing.
        let held_a = inner.acquire(0).expect("a");
        let held_b = inner.acquire(1).expect("b");
        assert_eq!(lock(inner.state()).using, vec![1, 1, 0, 0, 0]);
        let key = inner.key(&inner.files.files[2]);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| inner.reserve(2, &key, Room::Read).map(|r| r.is_some()));
            std::thread::sleep(Duration::from_millis(300));
            assert!(
                !waiter.is_finished(),
                "the read waits while both are in use"
            );
            assert_eq!(lock(inner.state()).waiting_room, 1);
            assert!(cached(&inner, 0) && cached(&inner, 1));
            drop(held_b);
            assert!(matches!(waiter.join().expect("joins"), Ok(true)));
        });
        // b, released, made the room; a, still held, stayed.
        assert!(cached(&inner, 0) && !cached(&inner, 1));
        assert_eq!(lock(inner.state()).waiting_room, 0);
        drop(held_a);
        assert_eq!(lock(inner.state()).using, vec![0; 5]);
    }
}
