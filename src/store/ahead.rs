//! Whole files of a location in object storage (shard files, container files), fetched
//! into the local [`Cache`] when an epoch needs them and memory-mapped from there: what
//! every reader of a few large files shares, knowing only their names, sizes and
//! checksums (or versions), the file each sample is in, and the epochs' order.
//!
//! A read of a sample's bytes copies them out of its mapped file (fetching the file first
//! when it is not cached: one download per file, however many workers ask at once). Each
//! read also moves a cursor along the epoch's order of first use of the files, and a
//! background thread fetches the next [`PREFETCH`] files of that order, so workers do not
//! wait for the network when it is fast enough. The order is the one the pipeline
//! announces when it starts an epoch (the source's `epoch_starts`: the samples it will
//! read, from where a resumed epoch starts); without one (a reader that is not an epoch)
//! it is the reader's `order` of the epoch, the epoch guessed from the reads' count. When
//! the cache limit needs room, the least recently used files that no worker is fetching
//! are removed (their maps dropped first).

use super::{stats, Cache, CacheKey, StoreClient, StoreError};
use crate::error::{Error, Result};
use memmap2::Mmap;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

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

/// The samples an epoch reads, in order (to prefetch without an announced order).
pub type EpochOrder = Box<dyn Fn(u64) -> Vec<usize> + Send + Sync>;

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
    /// The samples of an epoch, in order.
    pub order: EpochOrder,
    /// The check of each file as it arrives.
    pub check: CheckFile,
}

/// Files fetched ahead of the one being read.
pub const PREFETCH: usize = 2;

/// Why a fetch failed: a full cache (worth waiting for the fetches in flight) or else.
enum Fetch {
    Full(StoreError),
    Other(Error),
}

impl From<Error> for Fetch {
    fn from(e: Error) -> Fetch {
        Fetch::Other(e)
    }
}

/// What the workers and the prefetcher share.
struct Inner {
    client: StoreClient,
    cache: Cache,
    files: AheadFiles,
    state: Mutex<State>,
    changed: Condvar,
    /// Samples read, to know the epoch (reads / samples per epoch).
    reads: AtomicU64,
    /// The process whose prefetcher thread this is (see [`FetchAhead::forked`]).
    pid: AtomicU32,
}

/// Start the thread that fetches the queued shards. A failed fetch is left for the read
/// that needs the shard, which fetches it again and reports the error; without the
/// thread (it could not start), every shard is fetched by the read that needs it.
fn spawn_prefetcher(inner: &Arc<Inner>) {
    let worker = Arc::clone(inner);
    let spawned = std::thread::Builder::new()
        .name("imgfeed-prefetch".into())
        .spawn(move || loop {
            let next = {
                let mut st = lock(&worker.state);
                loop {
                    if st.stop {
                        return;
                    }
                    if let Some(s) = st.queue.pop_front() {
                        break s;
                    }
                    st = worker.changed.wait(st).unwrap_or_else(|p| p.into_inner());
                }
            };
            let _ = worker.get(next);
        });
    if spawned.is_err() {
        lock(&inner.state).stop = true;
    }
}

#[derive(Default)]
struct State {
    maps: Vec<Option<Arc<Mmap>>>,
    fetching: HashSet<usize>,
    /// The epoch `position` is for, and where each shard first comes in its order.
    epoch: Option<u64>,
    order: Vec<usize>,
    position: Vec<usize>,
    /// The last two shards read from (kept in the cache while others are fetched).
    recent: [Option<usize>; 2],
    /// Shards for the prefetcher to fetch, first first.
    queue: std::collections::VecDeque<usize>,
    stop: bool,
    /// The order was announced by [`FetchAhead::start_epoch`] (not guessed from reads).
    announced: bool,
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

impl FetchAhead {
    /// `files`, fetched by `client` into `cache`.
    pub fn new(client: StoreClient, cache: Cache, files: AheadFiles) -> FetchAhead {
        let n = files.files.len();
        let inner = Arc::new(Inner {
            client,
            cache,
            files,
            state: Mutex::new(State {
                maps: vec![None; n],
                ..State::default()
            }),
            changed: Condvar::new(),
            reads: AtomicU64::new(0),
            pid: AtomicU32::new(std::process::id()),
        });
        spawn_prefetcher(&inner);
        FetchAhead { inner }
    }

    /// In a process forked from the one that opened the dataset (a DataLoader worker), the
    /// prefetcher thread and the downloads it had in flight stayed in the parent: forget
    /// those downloads (this process fetches the shards itself) and start a prefetcher of
    /// this process's own. One atomic load when nothing forked.
    fn forked(&self) {
        let pid = std::process::id();
        let was = self.inner.pid.load(Ordering::Acquire);
        if was == pid
            || self
                .inner
                .pid
                .compare_exchange(was, pid, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return;
        }
        let mut st = lock(&self.inner.state);
        st.fetching.clear();
        st.queue.clear();
        let stopped = st.stop;
        drop(st);
        // A read of this process already waiting for one of those downloads fetches it.
        self.inner.changed.notify_all();
        if !stopped {
            spawn_prefetcher(&self.inner);
        }
    }

    /// Epoch `epoch` reads the samples `order` (indices, in order; a resumed epoch's from
    /// where it resumes): prefetching follows the shards' order of first use in it, and
    /// starts with its first shards now.
    pub fn start_epoch(&self, epoch: u64, order: &[usize]) {
        self.forked();
        let order = self.inner.shard_order_of(order.iter().copied());
        let mut position = vec![usize::MAX; self.inner.files.files.len()];
        for (k, &s) in order.iter().enumerate() {
            if let Some(p) = position.get_mut(s) {
                *p = k;
            }
        }
        let mut st = lock(&self.inner.state);
        st.announced = true;
        st.epoch = Some(epoch);
        st.queue.clear();
        for &s in order.iter().take(PREFETCH) {
            let have = st.maps.get(s).is_some_and(Option::is_some);
            if !have && !st.fetching.contains(&s) {
                st.queue.push_back(s);
            }
        }
        st.order = order;
        st.position = position;
        drop(st);
        self.inner.changed.notify_all();
    }

    /// Copy bytes `range` of file `shard` into `scratch` (the read of sample `index`).
    pub fn copy(
        &self,
        shard: usize,
        range: std::ops::Range<usize>,
        index: usize,
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        let _ = index;
        self.forked();
        self.inner.hint(shard);
        let t0 = std::time::Instant::now();
        let map = self.inner.get(shard)?;
        stats::waited(t0.elapsed());
        let bytes = map.get(range).ok_or_else(|| {
            Error::Internal(format!(
                "a record outside file {shard}, past the index checks"
            ))
        })?;
        scratch.clear();
        scratch.extend_from_slice(bytes);
        Ok(())
    }

    /// Fetch every file (each is checked against its size and CRC-32 as it arrives; a
    /// cached one was when it arrived).
    pub fn verify_all(&self) -> Result<()> {
        self.forked();
        for shard in 0..self.inner.files.files.len() {
            self.inner.get(shard)?;
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
            client.download(key.name, Some((key.size, key.listed_by)), file)?;
            stats::download();
            Ok(pending.commit(key, &client.url().object(key.name))?)
        }
    }
}

impl Drop for FetchAhead {
    fn drop(&mut self) {
        lock(&self.inner.state).stop = true;
        self.inner.changed.notify_all();
    }
}

impl Inner {
    fn entry(&self, shard: usize) -> Result<&AheadFile> {
        self.files
            .files
            .get(shard)
            .ok_or_else(|| Error::Internal(format!("file {shard} is not listed")))
    }

    fn key<'a>(&self, f: &'a AheadFile) -> CacheKey<'a> {
        f.key(self.files.listed_by)
    }

    /// A read of `shard`: note it, and queue the next shards of the epoch's order.
    fn hint(&self, shard: usize) {
        let per_epoch = self.files.per_epoch.max(1);
        let epoch = self.reads.fetch_add(1, Ordering::Relaxed) / per_epoch;
        let mut st = lock(&self.state);
        if !st.announced && st.epoch != Some(epoch) {
            drop(st);
            let order = self.shard_order(epoch);
            let mut position = vec![usize::MAX; self.files.files.len()];
            for (k, &s) in order.iter().enumerate() {
                if let Some(p) = position.get_mut(s) {
                    *p = k;
                }
            }
            st = lock(&self.state);
            st.epoch = Some(epoch);
            st.order = order;
            st.position = position;
        }
        if st.recent[0] != Some(shard) {
            st.recent = [Some(shard), st.recent[0]];
        }
        let Some(&at) = st.position.get(shard) else {
            return;
        };
        let next: Vec<usize> = st
            .order
            .iter()
            .skip(at.saturating_add(1))
            .take(PREFETCH)
            .copied()
            .collect();
        let mut queued = false;
        for s in next {
            let have = st.maps.get(s).is_some_and(Option::is_some);
            if !have && !st.fetching.contains(&s) && !st.queue.contains(&s) {
                st.queue.push_back(s);
                queued = true;
            }
        }
        drop(st);
        if queued {
            self.changed.notify_all();
        }
    }

    /// The files of `epoch` in their order of first use.
    fn shard_order(&self, epoch: u64) -> Vec<usize> {
        self.shard_order_of((self.files.order)(epoch))
    }

    /// The shards of the samples `order` in their order of first use.
    fn shard_order_of(&self, order: impl IntoIterator<Item = usize>) -> Vec<usize> {
        let mut seen = vec![false; self.files.files.len()];
        let mut out = Vec::new();
        for i in order {
            let Some(s) = self.files.file_of.get(i).map(|&s| s as usize) else {
                continue;
            };
            if let Some(f) = seen.get_mut(s) {
                if !*f {
                    *f = true;
                    out.push(s);
                }
            }
        }
        out
    }

    /// The map of `shard`, fetching it (once, whoever asks) when it is not there.
    fn get(&self, shard: usize) -> Result<Arc<Mmap>> {
        let mut st = lock(&self.state);
        loop {
            if let Some(Some(m)) = st.maps.get(shard) {
                return Ok(Arc::clone(m));
            }
            if !st.fetching.contains(&shard) {
                break;
            }
            st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.fetching.insert(shard);
        let busy: Vec<usize> = st
            .fetching
            .iter()
            .copied()
            .chain(st.recent.iter().flatten().copied())
            .collect();
        drop(st);
        let keep: Vec<PathBuf> = self
            .files
            .keep
            .iter()
            .cloned()
            .chain(
                busy.iter()
                    .filter_map(|&s| self.files.files.get(s))
                    .map(|e| self.cache.path_of(&self.key(e))),
            )
            .collect();
        let mut got = self.fetch(shard, &keep);
        // A full cache whose room is held by other fetches in flight: wait for them (they
        // end: each is bounded by its retries) and try again, for at most ten minutes.
        let mut waits = 0;
        while let Err(Fetch::Full(_)) = &got {
            waits += 1;
            if waits > 3000 {
                break;
            }
            let mut st = lock(&self.state);
            if st.fetching.len() <= 1 {
                break;
            }
            st = self
                .changed
                .wait_timeout(st, std::time::Duration::from_millis(200))
                .map_or_else(|p| p.into_inner().0, |(g, _)| g);
            drop(st);
            got = self.fetch(shard, &keep);
        }
        let got = got.map_err(|e| match e {
            Fetch::Full(e) => Error::from(e),
            Fetch::Other(e) => e,
        });
        let mut st = lock(&self.state);
        st.fetching.remove(&shard);
        let out = got.map(|map| {
            let map = Arc::new(map);
            if let Some(slot) = st.maps.get_mut(shard) {
                *slot = Some(Arc::clone(&map));
            }
            map
        });
        drop(st);
        self.changed.notify_all();
        out
    }

    /// Download (or find in the cache) and map `shard`.
    fn fetch(&self, shard: usize, keep: &[PathBuf]) -> std::result::Result<Mmap, Fetch> {
        let entry = self.entry(shard)?;
        let object = self.client.url().object(&entry.name);
        let key = self.key(entry);
        let path = match self.cache.lookup(&key) {
            Some(p) => {
                stats::cache_hit();
                p
            }
            None => {
                let (pending, evicted) = self.cache.reserve(&key, keep).map_err(|e| match e {
                    full @ StoreError::CacheFull { .. } => Fetch::Full(full),
                    e => Fetch::Other(e.into()),
                })?;
                self.forget(&evicted);
                match pending {
                    Err(done) => {
                        stats::cache_hit();
                        done
                    }
                    Ok(mut pending) => {
                        let file = pending.file().ok_or_else(|| {
                            Error::Internal("a pending download without its file".into())
                        })?;
                        self.client
                            .download(&entry.name, Some((entry.size, key.listed_by)), file)
                            .map_err(Error::from)?;
                        stats::download();
                        pending.commit(&key, &object).map_err(Error::from)?
                    }
                }
            }
        };
        let map = map_sized(&path, entry.size, self.files.listed_by)?;
        (self.files.check)(std::path::Path::new(&object), &map)?;
        Ok(map)
    }

    /// Drop the maps of evicted files.
    fn forget(&self, evicted: &[PathBuf]) {
        if evicted.is_empty() {
            return;
        }
        let mut st = lock(&self.state);
        for (i, e) in self.files.files.iter().enumerate() {
            if evicted.contains(&self.cache.path_of(&self.key(e))) {
                if let Some(slot) = st.maps.get_mut(i) {
                    *slot = None;
                }
            }
        }
    }
}

/// Map the cached file `path` after checking that it has `size` bytes, as `listed_by` says.
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
