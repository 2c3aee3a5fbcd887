//! The shard files of a dataset in object storage, fetched whole into the local
//! [`Cache`] when an epoch needs them and memory-mapped from there.
//!
//! A read of a record copies it out of its mapped shard (fetching the shard first when it
//! is not cached: one download per shard, however many workers ask at once). Each read
//! also moves a cursor along the epoch's order of first use of the shards, and a
//! background thread fetches the next [`PREFETCH`] shards of that order, so workers do not
//! wait for the network when it is fast enough. The order is the one the pipeline
//! announces when it starts an epoch (the source's `epoch_starts`: the
//! samples it will read, from where a resumed epoch starts); without one (a reader that is
//! not an epoch) it is computed from the sampling, the epoch guessed from the reads'
//! count. When the cache limit needs room, the least recently used shards that no worker
//! is fetching are removed (their maps dropped first).

use super::format::{FileEntry, Manifest};
use crate::error::{Error, Result};
use crate::plan::Sampling;
use crate::store::{stats, Cache, CacheKey, StoreClient, StoreError};
use memmap2::Mmap;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// `entry` as the cache keys it.
pub(crate) fn key(entry: &FileEntry) -> CacheKey<'_> {
    CacheKey {
        name: &entry.file,
        size: entry.size,
        crc32: entry.crc32,
        listed_by: "the manifest",
    }
}

/// Shards fetched ahead of the one being read.
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
    manifest: Manifest,
    /// Paths that must stay in the cache (index, names).
    keep: Vec<PathBuf>,
    /// The shard of every sample (a hint for prefetching; bounds are checked on use).
    shard_of: Vec<u32>,
    sampling: Sampling,
    state: Mutex<State>,
    changed: Condvar,
    /// Samples read, to know the epoch (reads / samples per epoch).
    reads: AtomicU64,
    /// The process whose prefetcher thread this is (see [`RemoteFiles::forked`]).
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
    /// The order was announced by [`RemoteFiles::start_epoch`] (not guessed from reads).
    announced: bool,
}

/// The shard files of a remote dataset (see the module).
pub struct RemoteFiles {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RemoteFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteFiles")
            .field("url", self.inner.client.url())
            .finish()
    }
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RemoteFiles {
    /// The shards of `manifest`, fetched by `client` into `cache`; `keep` are the cached
    /// index and names; `shard_of` the shard of every sample; `sampling` the epochs' order.
    pub(crate) fn new(
        client: StoreClient,
        cache: Cache,
        manifest: Manifest,
        keep: Vec<PathBuf>,
        shard_of: Vec<u32>,
        sampling: Sampling,
    ) -> RemoteFiles {
        let n = manifest.shards.len();
        let inner = Arc::new(Inner {
            client,
            cache,
            manifest,
            keep,
            shard_of,
            sampling,
            state: Mutex::new(State {
                maps: vec![None; n],
                ..State::default()
            }),
            changed: Condvar::new(),
            reads: AtomicU64::new(0),
            pid: AtomicU32::new(std::process::id()),
        });
        spawn_prefetcher(&inner);
        RemoteFiles { inner }
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
    pub(crate) fn start_epoch(&self, epoch: u64, order: &[usize]) {
        self.forked();
        let order = self.inner.shard_order_of(order.iter().copied());
        let mut position = vec![usize::MAX; self.inner.manifest.shards.len()];
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

    /// Copy bytes `range` of `shard` into `scratch` (the read of sample `index`).
    pub(crate) fn copy(
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
                "a record outside shard {shard}, past the index checks"
            ))
        })?;
        scratch.clear();
        scratch.extend_from_slice(bytes);
        Ok(())
    }

    /// Fetch every shard (each is checked against the manifest's size and CRC-32 as it
    /// arrives; a cached one was when it arrived).
    pub(crate) fn verify_all(&self) -> Result<()> {
        self.forked();
        for shard in 0..self.inner.manifest.shards.len() {
            self.inner.get(shard)?;
        }
        Ok(())
    }
}

impl Drop for RemoteFiles {
    fn drop(&mut self) {
        lock(&self.inner.state).stop = true;
        self.inner.changed.notify_all();
    }
}

impl Inner {
    fn entry(&self, shard: usize) -> Result<&FileEntry> {
        self.manifest
            .shards
            .get(shard)
            .ok_or_else(|| Error::Internal(format!("shard {shard} is not in the manifest")))
    }

    /// A read of `shard`: note it, and queue the next shards of the epoch's order.
    fn hint(&self, shard: usize) {
        let n = self.manifest.samples as usize;
        let per_epoch = self.sampling.len(n).max(1) as u64;
        let epoch = self.reads.fetch_add(1, Ordering::Relaxed) / per_epoch;
        let mut st = lock(&self.state);
        if !st.announced && st.epoch != Some(epoch) {
            drop(st);
            let order = self.shard_order(epoch);
            let mut position = vec![usize::MAX; self.manifest.shards.len()];
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

    /// The shards of `epoch` in their order of first use.
    fn shard_order(&self, epoch: u64) -> Vec<usize> {
        let n = self.manifest.samples as usize;
        self.shard_order_of(self.sampling.order(n, epoch))
    }

    /// The shards of the samples `order` in their order of first use.
    fn shard_order_of(&self, order: impl IntoIterator<Item = usize>) -> Vec<usize> {
        let mut seen = vec![false; self.manifest.shards.len()];
        let mut out = Vec::new();
        for i in order {
            let Some(s) = self.shard_of.get(i).map(|&s| s as usize) else {
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
            .keep
            .iter()
            .cloned()
            .chain(
                busy.iter()
                    .filter_map(|&s| self.manifest.shards.get(s))
                    .map(|e| self.cache.path_of(&key(e))),
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
        let object = self.client.url().object(&entry.file);
        let key = key(entry);
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
                            .download(&entry.file, Some((entry.size, key.listed_by)), file)
                            .map_err(Error::from)?;
                        stats::download();
                        pending.commit(&key, &object).map_err(Error::from)?
                    }
                }
            }
        };
        let map = super::source::map_sized(&path, entry)?;
        super::source::check_shard(std::path::Path::new(&object), &map, &self.manifest)?;
        Ok(map)
    }

    /// Drop the maps of evicted files.
    fn forget(&self, evicted: &[PathBuf]) {
        if evicted.is_empty() {
            return;
        }
        let mut st = lock(&self.state);
        for (i, e) in self.manifest.shards.iter().enumerate() {
            if evicted.contains(&self.cache.path_of(&key(e))) {
                if let Some(slot) = st.maps.get_mut(i) {
                    *slot = None;
                }
            }
        }
    }
}
