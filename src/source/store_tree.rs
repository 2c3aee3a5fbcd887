//! An image tree in object storage: `s3://bucket/prefix` holding `class/image.jpg` objects
//! and no manifest, read as a local `root/class/image.jpg` tree is
//! ([`ImageFolder::from_keys`]: the same classes, labels and sample order).
//!
//! The prefix is listed once (paginated by the store, at most [`MAX_OBJECTS`] keys). Each
//! image is one GET: [`FETCHERS`] threads fetch the objects of the epoch's order (the one
//! the pipeline announces, [`Source::epoch_starts`]; source order for a reader without
//! epochs) ahead of the
//! workers, holding at most [`AHEAD_OBJECTS`] objects and [`AHEAD_BYTES`] bytes that no
//! worker has taken yet, so memory stays bounded whatever the dataset's size. A read that
//! finds its object fetched takes it without a copy; one outside the window fetches it
//! itself. An object missing, forbidden or changed since the listing is that sample's
//! error, naming the object; a store still failing after the retries stops the run.
//!
//! When the cache folder can hold the tree (and range mode is not asked for, nor picked by
//! `fetch = "auto"` for a global shuffle through a smaller cache), the objects are kept
//! there as packs instead ([`super::tree_packs`]): the first epoch fetches every image
//! once, the later ones read them locally. Otherwise, in a shuffled run, the cache's room
//! keeps the images the next epoch reads first, as range mode keeps samples ([`Keeper`]):
//! the fetchers skip them, and their reads take them from there.
//!
//! One request per image makes this slower than a shards dataset by nature (the request
//! rate, not the bandwidth, is the limit): `bench` says so and points at
//! `convert --format shards`.

use super::image_folder::{Ignored, ImageFolder, DEFAULT_MAX_FILE_BYTES};
use super::root::StoreRoot;
use super::tree_packs::TreePacks;
use super::{Raw, RawSample, Source};
use crate::error::{Error, Result, SampleErrorKind};
use crate::shards::format::MANIFEST;
use crate::spec::Spec;
use crate::store::keeper::Keeping;
use crate::store::{stats, Cache, Keeper, Orders, StoreClient, StoreError};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Most keys listed under one prefix.
pub const MAX_OBJECTS: usize = 20_000_000;
/// Threads fetching objects ahead of the workers.
pub const FETCHERS: usize = 16;
/// Most objects fetched ahead and not yet taken.
pub const AHEAD_OBJECTS: usize = 256;
/// Most bytes fetched ahead and not yet taken (one larger object is still fetched alone).
pub const AHEAD_BYTES: u64 = 256 << 20;

/// Why a read found no bytes: the object's own fault (a sample error) or the store's.
type Fetched = std::result::Result<Vec<u8>, StoreError>;

#[derive(Default)]
struct Window {
    /// Sample indices in the order they will be read.
    order: Vec<usize>,
    /// Where each sample is in `order` (`usize::MAX`: not in it).
    position: Vec<usize>,
    /// The next position of `order` to fetch.
    next: usize,
    /// The furthest position read so far.
    read_to: usize,
    /// Fetched, not yet taken, by sample.
    ready: HashMap<usize, Fetched>,
    /// Being fetched, by sample.
    in_flight: HashMap<usize, u64>,
    /// Bytes of `ready` and `in_flight`.
    held: u64,
    stop: bool,
}

struct Shared {
    client: StoreClient,
    /// The key of each sample, relative to the prefix.
    keys: Arc<[String]>,
    sizes: Arc<[u64]>,
    /// The ETag each object was listed with (a GET of another version is refused).
    e_tags: Arc<[Option<String>]>,
    max_file_bytes: u64,
    /// Samples the fetchers leave alone (read from their pack).
    skip: Option<Arc<TreePacks>>,
    /// Without packs: the next epoch's first images kept in the cache folder's room
    /// (the fetchers leave alone those it serves).
    keeper: Option<Keeper>,
    window: Mutex<Window>,
    changed: Condvar,
    /// The process whose fetcher threads these are (see [`Shared::forked`]).
    pid: AtomicU32,
}

/// An ImageFolder dataset in object storage (see the module).
pub struct RemoteTree {
    listing: ImageFolder,
    shared: Arc<Shared>,
    /// The tree's packs in the cache, when they are read that way.
    packs: Option<Arc<TreePacks>>,
}

impl std::fmt::Debug for RemoteTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteTree")
            .field("url", self.shared.client.url())
            .field("samples", &self.shared.keys.len())
            .finish()
    }
}

fn lock(m: &Mutex<Window>) -> std::sync::MutexGuard<'_, Window> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The ImageFolder at `at` (`s3://bucket/prefix`), a prefix that holds no shards manifest
/// (its opener looked). A prefix with no object is an error saying what was looked for.
pub fn open_tree(
    at: StoreRoot,
    extensions: Option<&[String]>,
    class_indexing: Option<&BTreeMap<String, u32>>,
    max_file_bytes: Option<u64>,
) -> Result<RemoteTree> {
    let StoreRoot {
        root,
        url,
        client,
        options,
        sampling,
    } = at;
    let root = root.as_path();
    let listed = client.list_info(MAX_OBJECTS)?;
    if listed.is_empty() {
        return Err(StoreError::Request {
            object: format!("{url}/"),
            reason: "no object under this prefix: neither a shards dataset (manifest.json) \
                     nor an image tree (class/image.jpg)"
                .into(),
        }
        .into());
    }
    let shard_file = |k: &str| {
        !k.contains('/')
            && ((k.starts_with("slice-") && k.ends_with(".json"))
                || (k.ends_with(".bin") && (k.starts_with("shard-") || k.starts_with("slice-")))
                || k == "index.bin"
                || k == "names.bin")
    };
    if listed.iter().any(|(k, _)| shard_file(k)) {
        return Err(StoreError::NotFound {
            object: url.object(MANIFEST),
            hint: ": shard files but no manifest: a conversion still being written (its \
                   manifest comes last), or slices not merged yet (`imgfeed merge-index`)"
                .into(),
        }
        .into());
    }
    let listing = ImageFolder::from_keys(
        root,
        listed.iter().map(|(k, _)| k.as_str()),
        extensions,
        class_indexing,
    )?;
    let info_of: HashMap<&str, &crate::store::ObjectInfo> =
        listed.iter().map(|(k, i)| (k.as_str(), i)).collect();
    let n = listing.len();
    let mut keys = Vec::with_capacity(n);
    let mut sizes = Vec::with_capacity(n);
    let mut e_tags = Vec::with_capacity(n);
    for i in 0..n {
        let key = listing.sample_name(i).replace('\\', "/");
        let info = info_of.get(key.as_str());
        sizes.push(info.map_or(0, |i| i.size));
        e_tags.push(info.and_then(|i| i.e_tag.clone()));
        keys.push(key);
    }
    let max_file_bytes = match max_file_bytes {
        Some(0) => {
            return Err(crate::error::Invalid::TooSmall {
                setting: "source.max_file_bytes",
                min: 1,
            }
            .into())
        }
        Some(n) => n,
        None => DEFAULT_MAX_FILE_BYTES,
    };
    let (keys, sizes): (Arc<[String]>, Arc<[u64]>) = (keys.into(), sizes.into());
    let e_tags: Arc<[Option<String>]> = e_tags.into();
    let tree = Listed {
        url: &url,
        options: &options,
        sampling,
        keys: &keys,
        sizes: &sizes,
        e_tags: &e_tags,
        max_file_bytes,
    };
    let packs = packs(&client, &tree)?.map(Arc::new);
    // Kept images for a shuffled run only: an unshuffled one is most often a single pass
    // (a conversion, `validate`), which would write the cache's room for nothing.
    let keeper = match &packs {
        None if sampling.shuffle => keeper(&tree)?,
        _ => None,
    };
    let shared = Arc::new(Shared {
        client,
        keys,
        sizes,
        e_tags,
        max_file_bytes,
        skip: packs.clone(),
        keeper,
        window: Mutex::new(Window::default()),
        changed: Condvar::new(),
        pid: AtomicU32::new(std::process::id()),
    });
    if let Some(p) = &packs {
        // Images fetched before their pack came are dropped by the fetchers when they look
        // for room: a pack's arrival makes them look (the reads from it would not).
        let tree = Arc::downgrade(&shared);
        p.when_known(move || {
            if let Some(s) = tree.upgrade() {
                drop(lock(&s.window));
                s.changed.notify_all();
            }
        });
    }
    // With packs too: the reads whose pack is not at hand yet take their images from
    // these fetchers.
    spawn_fetchers(&shared)?;
    Ok(RemoteTree {
        listing,
        shared,
        packs,
    })
}

/// The tree as listed, and how it is read: what [`packs`] and [`keeper`] decide from.
struct Listed<'a> {
    url: &'a crate::store::StoreUrl,
    options: &'a crate::store::StoreOptions,
    sampling: crate::plan::Sampling,
    keys: &'a Arc<[String]>,
    sizes: &'a Arc<[u64]>,
    e_tags: &'a Arc<[Option<String>]>,
    max_file_bytes: u64,
}

impl Listed<'_> {
    /// The cache folder of the tree's location.
    fn cache(&self) -> Result<Cache> {
        Ok(Cache::open(
            self.options.cache_dir.as_deref(),
            self.options.cache_limit()?,
            self.url,
            self.options.endpoint.as_deref(),
        )?)
    }
}

/// The tree's packs in the cache ([`super::tree_packs`]), unless its images are read one
/// GET each every epoch: asked (`fetch = "ranges"`), or `auto` with a cache smaller than
/// the tree (packs evicted and made again would cost the same GETs, and disk writes
/// besides), or a store that gives no ETag for some image (a pack could not tell an image
/// replaced at the same size), or a cache too small for one pack (unless `fetch =
/// "files"` asked for packs: then that is an error saying what it needs). A shard-aware
/// window needs the packs, and room for its window of them.
fn packs(client: &StoreClient, tree: &Listed<'_>) -> Result<Option<TreePacks>> {
    use crate::store::Fetch;
    let Listed {
        url,
        options,
        sampling,
        keys,
        sizes,
        e_tags,
        max_file_bytes,
    } = *tree;
    let limit = options.cache_limit()?;
    let total: u64 = sizes.iter().filter(|&&s| s <= max_file_bytes).sum();
    let wanted = match options.fetch {
        Fetch::Ranges => false,
        Fetch::Files => true,
        Fetch::Auto => sampling.shuffle_window.is_some() || limit >= total,
    };
    if !wanted || e_tags.iter().any(Option::is_none) {
        return Ok(None);
    }
    let cache = tree.cache()?;
    let packs = TreePacks::new(
        client.another()?,
        cache,
        Arc::clone(keys),
        Arc::clone(sizes),
        Arc::clone(e_tags),
        max_file_bytes,
        sampling,
    );
    let pack_sizes = packs.sizes();
    let largest = pack_sizes.iter().copied().max().unwrap_or(0);
    if let Some(window) = sampling.shuffle_window {
        crate::plan::window::check_room(
            pack_sizes,
            0,
            limit,
            window,
            crate::store::ahead::PREFETCH,
        )
        .map_err(|source| crate::error::Invalid::WindowCache {
            url: url.to_string(),
            source,
        })?;
    } else if limit < largest {
        if options.fetch == Fetch::Files {
            return Err(crate::error::Invalid::TreeCacheTooSmall {
                limit,
                url: url.to_string(),
                least: largest,
            }
            .into());
        }
        return Ok(None);
    }
    Ok(Some(packs))
}

/// Without packs, the images each epoch reads first kept in the cache folder's room as the
/// epoch before reads them ([`Keeper`], as range mode keeps samples): those images are
/// read from there instead of the store. `None` when the cache folder cannot be opened
/// (the images are then all read from the store, as without a cache).
fn keeper(tree: &Listed<'_>) -> Result<Option<Keeper>> {
    // The options are checked already (by `packs`).
    let Ok(cache) = tree.cache() else {
        return Ok(None);
    };
    let (sampling, sizes, max_file_bytes) = (tree.sampling, tree.sizes, tree.max_file_bytes);
    let mut h = crc32fast::Hasher::new();
    for ((key, size), tag) in tree.keys.iter().zip(sizes.iter()).zip(tree.e_tags.iter()) {
        h.update(key.as_bytes());
        h.update(&size.to_le_bytes());
        h.update(tag.as_deref().unwrap_or("").as_bytes());
    }
    let n = tree.keys.len();
    let lens = Arc::clone(sizes);
    Ok(Some(Keeper::new(Keeping {
        cache,
        key: u64::from(h.finalize()) << 32,
        orders: Orders::sampled(sampling, n, None),
        per_epoch: sampling.len(n),
        samples: n,
        // An image over the limit is refused, never read: never kept.
        len_of: Box::new(move |i| lens.get(i).copied().filter(|&s| s <= max_file_bytes)),
        keep: Vec::new(),
    })))
}

/// Start the [`FETCHERS`] threads.
fn spawn_fetchers(shared: &Arc<Shared>) -> Result<()> {
    for k in 0..FETCHERS {
        let s = Arc::clone(shared);
        std::thread::Builder::new()
            .name(format!("imgfeed-fetch-{k}"))
            .spawn(move || s.fetch_ahead())
            .map_err(|e| Error::Internal(format!("cannot start a fetch thread: {e}")))?;
    }
    Ok(())
}

impl Shared {
    /// In a process forked from the one that listed the prefix (a DataLoader worker), the
    /// fetcher threads and the fetches they had in flight stayed in the parent: forget
    /// those fetches (the reads fetch their objects themselves) and start fetchers of this
    /// process's own. One atomic load when nothing forked.
    fn forked(self: &Arc<Shared>) -> Result<()> {
        let pid = std::process::id();
        let was = self.pid.load(Ordering::Acquire);
        if was == pid
            || self
                .pid
                .compare_exchange(was, pid, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return Ok(());
        }
        let mut w = lock(&self.window);
        let lost: u64 = w.in_flight.values().sum();
        w.in_flight.clear();
        w.held = w.held.saturating_sub(lost);
        drop(w);
        // A read of this process already waiting for one of those fetches makes it.
        self.changed.notify_all();
        spawn_fetchers(self)
    }

    /// Read `order` from now on: what was fetched ahead for the previous order is dropped.
    fn announce(&self, order: Vec<usize>) {
        let mut position = vec![usize::MAX; self.keys.len()];
        for (k, &i) in order.iter().enumerate() {
            if let Some(p) = position.get_mut(i) {
                *p = k;
            }
        }
        let mut w = lock(&self.window);
        let dropped: u64 = w
            .ready
            .keys()
            .map(|&i| self.sizes.get(i).copied().unwrap_or(0))
            .sum();
        w.ready.clear();
        w.held = w.held.saturating_sub(dropped);
        w.order = order;
        w.position = position;
        w.next = 0;
        w.read_to = 0;
        drop(w);
        self.changed.notify_all();
    }

    /// One fetcher: the next object of the order while the window has room.
    fn fetch_ahead(&self) {
        loop {
            let (index, size) = {
                let mut w = lock(&self.window);
                let mut skipped = 0usize;
                loop {
                    if w.stop {
                        return;
                    }
                    let next = w.order.get(w.next).copied();
                    // With packs, reads from them do not move `read_to`: only the
                    // window's objects and bytes bound the fetchers then.
                    let ahead = if self.skip.is_some() {
                        0
                    } else {
                        w.next.saturating_sub(w.read_to)
                    };
                    if let Some(i) = next {
                        let size = self.sizes.get(i).copied().unwrap_or(0);
                        // Read from its pack (known to be at hand): nothing to fetch.
                        let packed = self.skip.as_ref().is_some_and(|p| p.known_at_hand(i))
                            || self.keeper.as_ref().is_some_and(|k| k.serves(i));
                        let taken = w.ready.contains_key(&i) || w.in_flight.contains_key(&i);
                        if taken || packed || size > self.max_file_bytes {
                            w.next += 1; // read (and refused) by the worker itself
                            skipped += 1;
                            if skipped.is_multiple_of(4096) {
                                // A walk past a whole cached epoch lets go of the lock
                                // now and then (the readers, a fork).
                                drop(w);
                                w = lock(&self.window);
                            }
                            continue;
                        }
                        let mut pending = w.ready.len() + w.in_flight.len();
                        let mut room = pending < AHEAD_OBJECTS
                            && ahead < AHEAD_OBJECTS
                            && (w.held + size <= AHEAD_BYTES || pending == 0);
                        if let (false, Some(packs)) = (room, &self.skip) {
                            // Images fetched before their pack came, whose reads take the
                            // pack now: their room is free again.
                            let stale: Vec<usize> = w
                                .ready
                                .keys()
                                .copied()
                                .filter(|&k| packs.known_at_hand(k))
                                .collect();
                            for k in stale {
                                w.ready.remove(&k);
                                let size = self.sizes.get(k).copied().unwrap_or(0);
                                w.held = w.held.saturating_sub(size);
                            }
                            pending = w.ready.len() + w.in_flight.len();
                            room = pending < AHEAD_OBJECTS
                                && ahead < AHEAD_OBJECTS
                                && (w.held + size <= AHEAD_BYTES || pending == 0);
                        }
                        if room {
                            w.next += 1;
                            w.in_flight.insert(i, size);
                            w.held += size;
                            break (i, size);
                        }
                    }
                    w = self.changed.wait(w).unwrap_or_else(|p| p.into_inner());
                }
            };
            // An image whose pack is at hand is read from there (asked outside the
            // window's lock: it may look at the cache folder).
            if self.skip.as_ref().is_some_and(|p| p.at_hand(index)) {
                let mut w = lock(&self.window);
                w.in_flight.remove(&index);
                w.held = w.held.saturating_sub(size);
                drop(w);
                self.changed.notify_all();
                continue;
            }
            let got = self.get(index);
            let mut w = lock(&self.window);
            w.in_flight.remove(&index);
            // Still wanted (the order did not change meanwhile): keep it for the read.
            if w.position.get(index).is_some_and(|&p| p != usize::MAX) {
                w.ready.insert(index, got);
            } else {
                w.held = w.held.saturating_sub(size);
            }
            drop(w);
            self.changed.notify_all();
        }
    }

    /// GET the object of sample `index`, checked against the listing's size and ETag.
    fn get(&self, index: usize) -> Fetched {
        let key = self.keys.get(index).map_or("", String::as_str);
        let want = self.sizes.get(index).copied().unwrap_or(0);
        let (bytes, info) = self.client.get(key, self.max_file_bytes)?;
        let listed = self.e_tags.get(index).and_then(Option::as_deref);
        if !crate::store::client::same_version(listed, info.e_tag.as_deref()) {
            return Err(StoreError::Changed {
                object: self.client.url().object(key),
                reason: "its ETag is not the one it had when the prefix was listed: the \
                         object was rewritten since"
                    .into(),
            });
        }
        if info.size != want {
            return Err(StoreError::Changed {
                object: self.client.url().object(key),
                reason: format!(
                    "{} bytes, but {want} when the prefix was listed: the object changed",
                    info.size
                ),
            });
        }
        Ok(bytes)
    }

    /// The bytes of sample `index` when the fetchers have them or are getting them (then
    /// it waits); `None` otherwise. Either way the read is noted (the fetchers stay within
    /// their distance of it).
    fn take_fetched(&self, index: usize) -> Option<Fetched> {
        let t0 = std::time::Instant::now();
        let mut w = lock(&self.window);
        self.reached(&mut w, index);
        loop {
            if let Some(got) = w.ready.remove(&index) {
                let size = self.sizes.get(index).copied().unwrap_or(0);
                w.held = w.held.saturating_sub(size);
                drop(w);
                self.changed.notify_all();
                stats::waited(t0.elapsed());
                return Some(got);
            }
            if !w.in_flight.contains_key(&index) {
                return None;
            }
            w = self.changed.wait(w).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The readers reached sample `index` (the fetchers stay within their distance of the
    /// furthest read).
    fn reached(&self, w: &mut Window, index: usize) {
        if let Some(&p) = w.position.get(index) {
            if p != usize::MAX && p > w.read_to {
                w.read_to = p;
                self.changed.notify_all();
            }
        }
    }

    /// Sample `index` was read from elsewhere than the fetchers (the kept images): the
    /// readers reached it all the same.
    fn read_elsewhere(&self, index: usize) {
        let mut w = lock(&self.window);
        self.reached(&mut w, index);
    }

    /// The bytes of sample `index`: fetched ahead, being fetched (wait), or fetched now.
    fn take(&self, index: usize) -> Fetched {
        let t0 = std::time::Instant::now();
        if lock(&self.window).order.is_empty() {
            // Read without an epoch (a conversion reads in source order): fetch in that.
            self.announce((0..self.keys.len()).collect());
        }
        if let Some(got) = self.take_fetched(index) {
            return got;
        }
        let got = self.get(index);
        stats::waited(t0.elapsed());
        got
    }
}

impl Drop for RemoteTree {
    fn drop(&mut self) {
        lock(&self.shared.window).stop = true;
        // The kept images' file goes now, not when the last fetcher lets go of it.
        if let Some(k) = &self.shared.keeper {
            k.close();
        }
        self.shared.changed.notify_all();
    }
}

impl Source for RemoteTree {
    fn describe(&self) -> String {
        self.listing.describe()
    }

    fn root(&self) -> &Path {
        self.listing.root()
    }

    fn len(&self) -> usize {
        self.listing.len()
    }

    fn spec(&self) -> Spec {
        self.listing.spec()
    }

    fn classes(&self) -> &[(String, u32)] {
        self.listing.classes()
    }

    fn ignored(&self) -> &[(PathBuf, Ignored)] {
        self.listing.ignored()
    }

    fn warnings(&self) -> Vec<String> {
        self.listing.warnings()
    }

    fn sample_name(&self, index: usize) -> String {
        self.listing.sample_name(index)
    }

    fn per_object(&self) -> bool {
        self.packs.is_none()
    }

    fn file_of(&self) -> Option<&[u32]> {
        self.packs.as_deref().map(TreePacks::pack_of)
    }

    fn last_epoch(&self, epoch: u64) {
        if let Some(k) = &self.shared.keeper {
            k.last_epoch(epoch);
        }
    }

    fn epoch_starts(&self, epoch: u64, order: &[usize]) {
        if let Some(packs) = &self.packs {
            packs.start_epoch(epoch, order);
        }
        if let Some(k) = &self.shared.keeper {
            k.start_epoch(epoch, order);
        }
        // A thread that cannot start here leaves the reads to fetch their own objects.
        let _ = self.shared.forked();
        self.shared.announce(order.to_vec());
    }

    fn read<'a>(&'a self, index: usize, scratch: &'a mut Vec<u8>) -> Result<RawSample<'a>> {
        let (_, label) = self
            .listing
            .sample(index)
            .ok_or_else(|| Error::out_of_range(index, self.sample_name(index)))?;
        let fail = |kind: SampleErrorKind, reason: String| Error::Sample {
            index,
            file: self.sample_name(index),
            stage: "read",
            kind,
            reason,
        };
        let size = self.shared.sizes.get(index).copied().unwrap_or(0);
        let max = self.shared.max_file_bytes;
        if size > max {
            return Err(fail(
                SampleErrorKind::FileTooLarge,
                format!("object is {size} bytes, over the limit of {max} (max_file_bytes)"),
            ));
        }
        self.shared.forked()?;
        // From its pack when it is known at hand; else fetched already (its pack was not
        // at hand then), else from its pack when it is at hand, else one GET (fetched
        // ahead).
        let got = match &self.packs {
            Some(packs) => {
                let tried = packs.known_at_hand(index);
                if tried && packs.read(index, scratch)? {
                    None
                } else {
                    match self.shared.take_fetched(index) {
                        Some(got) => {
                            if !tried {
                                packs.note_read(index);
                            }
                            Some(got)
                        }
                        None if !tried && packs.read(index, scratch)? => None,
                        None => Some(self.shared.take(index)),
                    }
                }
            }
            None => match &self.shared.keeper {
                Some(k) if k.read(index, size as usize, scratch).is_some() => {
                    self.shared.read_elsewhere(index);
                    None
                }
                Some(k) => {
                    let got = self.shared.take(index);
                    if let Ok(bytes) = &got {
                        k.passed(index, bytes);
                    }
                    Some(got)
                }
                None => Some(self.shared.take(index)),
            },
        };
        match got {
            None => {}
            Some(Ok(mut bytes)) => {
                // The fetched buffer becomes the sample's: no copy.
                std::mem::swap(scratch, &mut bytes);
            }
            Some(Err(
                e @ (StoreError::NotFound { .. }
                | StoreError::Denied { .. }
                | StoreError::Changed { .. }
                | StoreError::Request { .. }),
            )) => return Err(fail(SampleErrorKind::Io, e.to_string())),
            Some(Err(e)) => return Err(e.into()),
        }
        Ok(RawSample {
            raw: Raw::Encoded(scratch),
            labels: [label, 0],
        })
    }
}
