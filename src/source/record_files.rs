//! One source over a list of container files of any [`RecordFormat`] (WebDataset tars,
//! TFRecord, MindRecord): the files are listed once, each file's index is built once and
//! kept on disk ([`super::record_index`]), and a sample is a slice of its file's memory
//! map. Random access makes the engine's global shuffle, sharding, resume and worker-count
//! independence hold as for any source.
//!
//! The files are named by the root: a file (`train-0000.tar`), a folder (every file in it
//! with one of the format's extensions, in name order), or a pattern (`train-{0000..0146}
//! .tar`, lists `{a,b}` and `::` joins: [`super::brace`]), in the pattern's order. A sample's
//! name is `FILE:KEY`, `FILE` as listed (relative to a folder root).
//!
//! In object storage ([`RecordFiles::open_store`]) the root names objects the same ways
//! (an object, a pattern, or a prefix holding them); the prefix is listed once, each object
//! fetched whole into the cache (the store's [`FetchAhead`], ahead of the epoch's order),
//! or, in range mode (`fetch`: see [`crate::store::ranges`]), each sample's record by its
//! byte range ahead of the epoch's exact order ([`RangeAhead`]), its index kept under the
//! cache root keyed by size and ETag. A packed object (a Parquet file, a gzip'd TFRecord)
//! is fetched whole once to index its unpacked copy; that copy is then a file of the cache
//! made when an epoch needs it. A Parquet object whose images are ranges of its pages
//! (Snappy or uncompressed: [`RecordFormat::in_place`], checked against the copy) gets an
//! index in place too, and range mode reads those ranges, decoding each
//! ([`crate::formats::Stored`]), with no copy.
//!
//! A file the format cannot index (a truncated tar, a sample without its label) is a
//! dataset error naming the file, the member and the reason when the source opens.

use super::brace;
use super::record_index::{self, IndexKey};
use super::root::StoreRoot;
use super::{Raw, RawSample, Source};
use crate::error::{Error, Result};
use crate::formats::{RecordEntry, RecordFormat, Stored};
use crate::spec::{Spec, MAX_LABELS};
use crate::store::ahead::PREFETCH;
use crate::store::{
    AheadFile, AheadFiles, Cache, Fetch, FetchAhead, RangeAhead, RemoteFiles, StoreClient, StoreUrl,
};
use memmap2::Mmap;
use std::path::{Path, PathBuf};

/// A dataset of container files, opened (see the module).
pub struct RecordFiles {
    kind: &'static str,
    root: PathBuf,
    label_columns: usize,
    /// Each file's name as listed.
    names: Vec<String>,
    files: Files,
    samples: Vec<Slot>,
    keys: Vec<Box<str>>,
    /// The class names the first file carries (Parquet's metadata), as `(name, label)`.
    classes: Vec<(String, u32)>,
    /// The file of each sample.
    file_of: Vec<u32>,
    /// What runs but costs more than it should (packed files through a cache too small
    /// for the global shuffle).
    warning: Option<String>,
}

/// Where the files' bytes are.
enum Files {
    /// Each local file mapped (`None`: an empty file).
    Mapped(Vec<Option<Mmap>>),
    /// Objects in a store, fetched whole into the cache ahead of the epoch's order or by
    /// samples' byte ranges (the `fetch` option); a packed object's unpacked copy is
    /// mapped instead (`Some`).
    Remote(RemoteFiles, Vec<Option<Mmap>>),
}

/// Where a sample is.
#[derive(Clone, Copy, Debug)]
struct Slot {
    file: u32,
    offset: u64,
    len: u64,
    stored: Stored,
    labels: [u32; MAX_LABELS],
}

impl std::fmt::Debug for RecordFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordFiles")
            .field("kind", &self.kind)
            .field("root", &self.root)
            .field("files", &self.names.len())
            .field("samples", &self.samples.len())
            .finish()
    }
}

fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::Dataset {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Whether `root` names files of a format with `extensions`: a file or a pattern ending
/// in one of them, or a folder holding such files.
pub fn names_files(root: &Path, extensions: &[&str]) -> bool {
    let Some(text) = root.to_str() else {
        return false;
    };
    let ends = |t: &str| {
        let t = t.to_ascii_lowercase();
        extensions.iter().any(|e| t.ends_with(e))
    };
    if brace::is_pattern(text) || crate::store::is_store_url(text) {
        return ends(text.trim_end_matches('/'));
    }
    if root.is_dir() {
        return std::fs::read_dir(root).is_ok_and(|d| {
            d.flatten()
                .any(|e| e.file_name().to_str().is_some_and(ends) && e.path().is_file())
        });
    }
    ends(text)
}

/// The local files `root` names, as `(name, path)`: see the module.
pub fn list_local(root: &Path, extensions: &[&str]) -> Result<Vec<(String, PathBuf)>> {
    let text = root.to_str().unwrap_or_default();
    if brace::is_pattern(text) {
        let names = brace::expand(text).map_err(|e| bad(root, e.to_string()))?;
        return names
            .into_iter()
            .map(|n| {
                let p = PathBuf::from(&n);
                if p.is_file() {
                    Ok((n, p))
                } else {
                    Err(bad(&p, "no such file (named by the pattern)"))
                }
            })
            .collect();
    }
    if root.is_dir() {
        let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(root)
            .map_err(|e| bad(root, e.to_string()))?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_string();
                let lower = name.to_ascii_lowercase();
                let p = e.path();
                (extensions.iter().any(|x| lower.ends_with(x)) && p.is_file()).then_some((name, p))
            })
            .collect();
        found.sort();
        if found.is_empty() {
            return Err(bad(
                root,
                format!("no {} files in this folder", extensions.join(" or ")),
            ));
        }
        return Ok(found);
    }
    if !root.is_file() {
        return Err(bad(root, "no such file or folder"));
    }
    let name = root
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(text)
        .to_string();
    Ok(vec![(name, root.to_path_buf())])
}

/// One local file's bytes and index: the index kept beside it (or in the cache) when it
/// was made from this very file, else built and kept.
fn index_local<F: RecordFormat>(
    path: &Path,
    format: &F,
) -> Result<(Option<Mmap>, Vec<RecordEntry>)> {
    let file = std::fs::File::open(path).map_err(|e| bad(path, e.to_string()))?;
    let meta = file.metadata().map_err(|e| bad(path, e.to_string()))?;
    let key = IndexKey {
        format: format.name().to_string(),
        options: format.options(),
        stamp: IndexKey::local_stamp(&meta),
    };
    let map = if meta.len() == 0 {
        None
    } else {
        // SAFETY: read-only; a file changed under the map is outside what a reader can
        // defend against (its index is checked against its size and mtime when opened).
        Some(unsafe { Mmap::map(&file) }.map_err(|e| bad(path, e.to_string()))?)
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let (beside, cached) = index_places(path);
    let places = (beside.as_path(), cached.as_deref());
    // The unpacked copy of a packed file, mapped, its path and its index.
    let from_copy = |packed: &[u8]| -> Result<(PathBuf, Option<Mmap>, Vec<RecordEntry>)> {
        let (copy_path, copy) = unpacked(path, &key.stamp, packed, format)?;
        let bytes: &[u8] = copy.as_deref().unwrap_or_default();
        let entries = indexed(path, &key, bytes, format, places)?;
        Ok((copy_path, copy, entries))
    };
    let packed = match map {
        // Packed by its name (Parquet): maybe read in place. Packed by its bytes (a gzip'd
        // TFRecord): only ever from its copy.
        Some(m) if format.is_packed(name, &[]) => m,
        Some(m) if format.is_packed(name, &m) => {
            let (_, copy, entries) = from_copy(&m)?;
            return Ok((copy, entries));
        }
        map => {
            let bytes: &[u8] = map.as_deref().unwrap_or_default();
            let entries = indexed(path, &key, bytes, format, places)?;
            return Ok((map, entries));
        }
    };
    // Packed. Read in place when its images are ranges of it (Parquet's Snappy or
    // uncompressed pages): no copy kept. The index in place sits beside the copy's (an
    // empty one: the file has none).
    let in_place_key = IndexKey {
        stamp: format!("{} in place", key.stamp),
        ..key.clone()
    };
    let in_place = |p: &Path| p.with_extension("imgfeed-in-place");
    let places = (in_place(&beside), cached.as_deref().map(in_place));
    let kept = record_index::load(&places.0, &in_place_key).or_else(|| {
        places
            .1
            .as_deref()
            .and_then(|c| record_index::load(c, &in_place_key))
    });
    match kept {
        Some(e) if !e.is_empty() && fits(&e, packed.len() as u64) => {
            return Ok((Some(packed), e));
        }
        // Known to have none: the copy.
        Some(e) if e.is_empty() => {
            let (_, copy, entries) = from_copy(&packed)?;
            return Ok((copy, entries));
        }
        _ => {}
    }
    // First seen: unpacked (the copy indexes the rows and is what the index in place must
    // read back exactly), then, when read in place, the copy removed.
    let (copy_path, copy, entries) = from_copy(&packed)?;
    let bytes: &[u8] = copy.as_deref().unwrap_or_default();
    let here = format
        .in_place(&packed, &entries)
        .filter(|h| !h.is_empty() && same_images(&packed, h, bytes, &entries));
    let saved = |e: &[RecordEntry]| {
        record_index::save(&places.0, &in_place_key, e).is_ok()
            || places
                .1
                .as_deref()
                .is_some_and(|c| record_index::save(c, &in_place_key, e).is_ok())
    };
    match here {
        Some(here) if saved(&here) => {
            drop(copy);
            let _ = std::fs::remove_file(&copy_path);
            Ok((Some(packed), here))
        }
        Some(_) => Ok((copy, entries)),
        None => {
            let _ = saved(&[]);
            Ok((copy, entries))
        }
    }
}

/// Where a local file's index is kept: beside it, or (a read-only folder) in the cache.
fn index_places(path: &Path) -> (PathBuf, Option<PathBuf>) {
    let beside = record_index::beside(path);
    let cached = cache_root().map(|c| {
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        record_index::in_cache(&c, &abs.to_string_lossy())
    });
    (beside, cached)
}

/// The index of `bytes` (the file `path`'s, or its unpacked copy's), made from `key`:
/// loaded from where it is kept (`places`), else built and kept there.
fn indexed<F: RecordFormat>(
    path: &Path,
    key: &IndexKey,
    bytes: &[u8],
    format: &F,
    places: (&Path, Option<&Path>),
) -> Result<Vec<RecordEntry>> {
    let (beside, cached) = places;
    let kept =
        record_index::load(beside, key).or_else(|| cached.and_then(|c| record_index::load(c, key)));
    if let Some(entries) = kept.filter(|e| fits(e, bytes.len() as u64)) {
        return Ok(entries);
    }
    let entries = format.index(bytes).map_err(|e| bad(path, e.to_string()))?;
    if !fits(&entries, bytes.len() as u64) {
        return Err(Error::Internal(format!(
            "{}: the {} index builder made an entry outside the file",
            path.display(),
            format.name()
        )));
    }
    if record_index::save(beside, key, &entries).is_err() {
        if let Some(c) = cached {
            // Nowhere to keep it: it is built again next time.
            let _ = record_index::save(c, key, &entries);
        }
    }
    Ok(entries)
}

/// The unpacked copy of the packed file `path` (whose bytes are `packed`, its stamp
/// `stamp`): where it is, and mapped. Made once in the cache (`CACHE/unpacked/`), under a
/// name that holds the file's path and stamp, so a changed file is unpacked again.
fn unpacked<F: RecordFormat>(
    path: &Path,
    stamp: &str,
    packed: &[u8],
    format: &F,
) -> Result<(PathBuf, Option<Mmap>)> {
    let cache = cache_root().ok_or_else(|| {
        bad(
            path,
            "a compressed file is unpacked into the cache, and there is none: set \
             XDG_CACHE_HOME or HOME",
        )
    })?;
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let copy = unpacked_copy(&cache, &abs.to_string_lossy(), stamp, &format.options());
    // Another process reading the file in place may remove the copy between the check
    // and the map: made again, once.
    let map = match unpack_into(path, &copy, packed, format) {
        Err(_) if !copy.is_file() => unpack_into(path, &copy, packed, format)?,
        r => r?,
    };
    Ok((copy, map))
}

/// Where the unpacked copy of the file or object `id` with stamp `stamp`, unpacked with
/// the format's `options`, is kept (`CACHE/unpacked/`): its name holds all three, so a
/// changed file, or other columns of a Parquet file, is unpacked again.
fn unpacked_copy(cache: &Path, id: &str, stamp: &str, options: &str) -> PathBuf {
    let base = id
        .rsplit('/')
        .next()
        .filter(|b| !b.is_empty())
        .unwrap_or("file");
    cache.join("unpacked").join(format!(
        "{:08x}-{base}",
        crc32fast::hash(format!("{id}|{stamp}|{options}").as_bytes())
    ))
}

/// Tells temporary copies of one process apart (threads may unpack one file at once).
static COPY_TMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// `copy`, mapped: made by unpacking `packed` (the bytes of `path`) unless there already.
fn unpack_into<F: RecordFormat>(
    path: &Path,
    copy: &Path,
    packed: &[u8],
    format: &F,
) -> Result<Option<Mmap>> {
    if !copy.is_file() {
        let io = |e: std::io::Error| bad(copy, e.to_string());
        if let Some(dir) = copy.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let tmp = copy.with_extension(format!(
            "tmp.{}.{}",
            std::process::id(),
            COPY_TMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp).map_err(io)?);
        let written = format
            .unpack(packed, &mut out)
            .map_err(|e| bad(path, e.to_string()))
            .and_then(|()| out.into_inner().map_err(|e| io(e.into_error())).map(drop))
            .and_then(|()| std::fs::rename(&tmp, copy).map_err(io));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    }
    map_copy(copy)
}

/// An unpacked copy, mapped (`None`: empty).
fn map_copy(copy: &Path) -> Result<Option<Mmap>> {
    let file = std::fs::File::open(copy).map_err(|e| bad(copy, e.to_string()))?;
    if file.metadata().map_err(|e| bad(copy, e.to_string()))?.len() == 0 {
        return Ok(None);
    }
    // SAFETY: read-only, a file only this module writes (whole, by a rename).
    Ok(Some(
        unsafe { Mmap::map(&file) }.map_err(|e| bad(copy, e.to_string()))?,
    ))
}

/// Who lists a store's container files, for messages.
const LISTED: &str = "the listing";

/// What an index of an object was made from: its size and ETag.
fn stamp(info: &crate::store::ObjectInfo) -> String {
    format!(
        "size={} etag={}",
        info.size,
        info.e_tag.as_deref().unwrap_or("-")
    )
}

/// The prefix a store root lists and the names it picks there: an object or a pattern
/// (`s3://b/wds/train-{0..9}.tar`: `s3://b/wds` and the names), or a prefix (`None`: every
/// object there with one of `extensions`).
pub(super) fn store_selection(
    text: &str,
    extensions: &[&str],
) -> std::result::Result<(String, Option<Vec<String>>), String> {
    let trimmed = text.trim_end_matches('/');
    let lower = trimmed.to_ascii_lowercase();
    let named = brace::is_pattern(trimmed) || extensions.iter().any(|e| lower.ends_with(e));
    if !named {
        return Ok((trimmed.to_string(), None));
    }
    let names = brace::expand(trimmed).map_err(|e| e.to_string())?;
    let first_brace = [trimmed.find('{'), trimmed.find("::")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(trimmed.len());
    let scheme_end = trimmed.find("://").map_or(0, |i| i + 3);
    let cut = trimmed[..first_brace]
        .rfind('/')
        .filter(|&i| i > scheme_end)
        .ok_or_else(|| format!("{text}: name a bucket and the objects in it"))?;
    let parent = &trimmed[..cut];
    let rel = names
        .iter()
        .map(|n| {
            n.strip_prefix(parent)
                .and_then(|r| r.strip_prefix('/'))
                .filter(|r| !r.is_empty() && !r.contains('/'))
                .map(str::to_string)
                .ok_or_else(|| format!("{n}: every object must be directly under {parent}/"))
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok((parent.to_string(), Some(rel)))
}

/// The cache root indexes of read-only folders go to.
fn cache_root() -> Option<PathBuf> {
    crate::store::cache::default_root()
}

/// Every entry lies inside a file of `len` bytes.
fn fits(entries: &[RecordEntry], len: u64) -> bool {
    entries
        .iter()
        .all(|e| e.offset.checked_add(e.len).is_some_and(|end| end <= len))
}

/// Run `f` on every item on a few threads, results in the items' order.
fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len())
        .max(1);
    if threads == 1 {
        return items.iter().map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<R>>> =
        items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                if let Ok(mut slot) = results[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    results
        .into_iter()
        .filter_map(|m| m.into_inner().ok().flatten())
        .collect()
}

impl RecordFiles {
    /// The local files `root` names (see the module), indexed.
    pub fn open_local<F: RecordFormat>(root: &Path, format: &F) -> Result<RecordFiles> {
        let files = list_local(root, format.extensions())?;
        RecordFiles::open_listed(root, files, format)
    }

    /// The local `files` (`(name, path)`, in the dataset's order) of the dataset at `root`,
    /// indexed: for a format whose files are not listed by extension alone (a MindRecord
    /// group, named by any one of its files).
    pub fn open_listed<F: RecordFormat>(
        root: &Path,
        files: Vec<(String, PathBuf)>,
        format: &F,
    ) -> Result<RecordFiles> {
        let indexed = in_parallel(&files, |(_, path)| index_local(path, format));
        if indexed.len() != files.len() {
            return Err(Error::Internal(format!(
                "{}: a thread indexing its files stopped",
                root.display()
            )));
        }
        let mut maps = Vec::with_capacity(files.len());
        let mut all = Vec::with_capacity(files.len());
        for r in indexed {
            let (map, entries) = r?;
            maps.push(map);
            all.push(entries);
        }
        let names = files.into_iter().map(|(n, _)| n).collect();
        let classes = format.classes(maps.first().and_then(Option::as_deref).unwrap_or_default());
        RecordFiles::assemble(format, root, names, Files::Mapped(maps), all, classes)
    }

    fn assemble<F: RecordFormat>(
        format: &F,
        root: &Path,
        names: Vec<String>,
        files: Files,
        indexes: Vec<Vec<RecordEntry>>,
        classes: Vec<(String, u32)>,
    ) -> Result<RecordFiles> {
        let total: usize = indexes.iter().map(Vec::len).sum();
        if total == 0 {
            return Err(bad(root, "the dataset has no samples"));
        }
        if names.len() > u32::MAX as usize {
            return Err(bad(root, "more than 2^32 files"));
        }
        let mut samples = Vec::with_capacity(total);
        let mut keys = Vec::with_capacity(total);
        let file_of = file_of(&indexes);
        for (file, entries) in indexes.into_iter().enumerate() {
            for e in entries {
                samples.push(Slot {
                    file: file as u32,
                    offset: e.offset,
                    len: e.len,
                    stored: e.stored,
                    labels: e.labels,
                });
                keys.push(e.key.into_boxed_str());
            }
        }
        Ok(RecordFiles {
            kind: format.name(),
            root: root.to_path_buf(),
            label_columns: format.label_columns(),
            names,
            files,
            samples,
            keys,
            classes,
            file_of,
            warning: None,
        })
    }

    /// The objects a store root names (see the module: an object, a pattern of them, or
    /// a prefix holding them), indexed: each index from the cache (`CACHE/indexes/`, made
    /// from the object's size and ETag) or built from the object fetched into the cache,
    /// which reads then find there.
    pub fn open_store<F: RecordFormat + Clone + 'static>(
        at: &StoreRoot,
        format: &F,
    ) -> Result<RecordFiles> {
        let text = at.root.to_string_lossy().into_owned();
        let (parent, wanted) =
            store_selection(&text, format.extensions()).map_err(|reason| bad(&at.root, reason))?;
        let url = StoreUrl::parse(&parent)?;
        let endpoint = at.options.endpoint.as_deref();
        let client = StoreClient::new(&url, endpoint)?;
        let listed = client.list_info(super::store_tree::MAX_OBJECTS)?;
        let found: Vec<(String, crate::store::ObjectInfo)> = match wanted {
            Some(names) => {
                let by_name: std::collections::HashMap<&str, &crate::store::ObjectInfo> =
                    listed.iter().map(|(k, i)| (k.as_str(), i)).collect();
                names
                    .into_iter()
                    .map(|n| match by_name.get(n.as_str()) {
                        Some(i) => Ok((n, (*i).clone())),
                        None => Err(bad(
                            Path::new(&url.object(&n)),
                            "no such object (named by the pattern)",
                        )),
                    })
                    .collect::<Result<_>>()?
            }
            None => {
                let mut all: Vec<_> = listed
                    .into_iter()
                    .filter(|(k, _)| {
                        let lower = k.to_ascii_lowercase();
                        !k.contains('/') && format.extensions().iter().any(|e| lower.ends_with(e))
                    })
                    .collect();
                all.sort_by(|a, b| a.0.cmp(&b.0));
                all
            }
        };
        RecordFiles::open_objects(at, format, client, found)
    }

    /// The objects `found` (`(name, info)` under `client`'s prefix, as its listing gave
    /// them, in the dataset's order) of the dataset at `at`, indexed as
    /// [`RecordFiles::open_store`] does: for a format whose objects are not picked by
    /// extension alone (a MindRecord group, named by any one of its files).
    pub fn open_objects<F: RecordFormat + Clone + 'static>(
        at: &StoreRoot,
        format: &F,
        client: StoreClient,
        found: Vec<(String, crate::store::ObjectInfo)>,
    ) -> Result<RecordFiles> {
        let url = client.url().clone();
        let endpoint = at.options.endpoint.as_deref();
        if found.is_empty() {
            return Err(bad(
                &at.root,
                format!("no {} objects there", format.extensions().join(" or ")),
            ));
        }
        let cache = Cache::open(
            at.options.cache_dir.as_deref(),
            at.options.cache_limit()?,
            &url,
            endpoint,
        )?;
        // The cache must hold the largest file, and a shuffle window's files beside those
        // fetched ahead: refused before anything is fetched.
        let room_for = |sizes: &[u64]| -> Result<()> {
            let largest = sizes.iter().copied().max().unwrap_or(0);
            if cache.limit() < largest {
                return Err(crate::error::Invalid::CacheTooSmall {
                    limit: cache.limit(),
                    url: url.to_string(),
                    least: largest,
                }
                .into());
            }
            if let Some(window) = at.sampling.shuffle_window {
                crate::plan::window::check_room(sizes, 0, cache.limit(), window, PREFETCH)
                    .map_err(|source| crate::error::Invalid::WindowCache {
                        url: url.to_string(),
                        source,
                    })?;
            }
            Ok(())
        };
        room_for(&found.iter().map(|(_, i)| i.size).collect::<Vec<_>>())?;
        let index_root = at
            .options
            .cache_dir
            .clone()
            .or_else(cache_root)
            .ok_or_else(|| bad(&at.root, "no cache folder: give --cache-dir"))?;
        let mut files: Vec<AheadFile> = found
            .iter()
            .map(|(name, info)| AheadFile {
                name: name.clone(),
                size: info.size,
                crc32: crc32fast::hash(stamp(info).as_bytes()),
                checked: false,
                unpacked_from: None,
            })
            .collect();
        // The objects themselves, as range mode reads them (`files` become unpacked copies).
        let objects = files.clone();
        let mut indexes = Vec::with_capacity(files.len());
        // Whether range mode is likely (from the objects' sizes; decided below from the
        // copies'): a packed object read in place then puts no copy into the cache.
        let ranges_likely = crate::shards::fetch::by_ranges(
            at.options.fetch,
            &at.sampling,
            cache.limit(),
            found.iter().map(|(_, i)| i.size).sum(),
        );
        // Each packed object's index in place (Parquet pages range mode reads), where it
        // has one: `None` for a file not packed (its index is in place).
        let mut in_place: Vec<Option<Vec<RecordEntry>>> = Vec::with_capacity(files.len());
        // The first bytes of the first packed copy (before its first record): its class
        // names (Parquet's header).
        let mut head: Option<Vec<u8>> = None;
        for ((name, info), file) in found.iter().zip(files.iter_mut()) {
            let object = url.object(name);
            let key = IndexKey {
                format: format.name().to_string(),
                options: format.options(),
                stamp: stamp(info),
            };
            // A packed object's index is of its unpacked copy: kept under another stamp.
            let unpacked_key = IndexKey {
                stamp: format!("{} unpacked", key.stamp),
                ..key.clone()
            };
            // And its index in place, beside (empty: the object has none).
            let in_place_key = IndexKey {
                stamp: format!("{} in place", key.stamp),
                ..key.clone()
            };
            let kept = record_index::in_cache(&index_root, &object);
            let kept_head = kept.with_extension("imgfeed-head");
            let kept_in_place = kept.with_extension("imgfeed-in-place");
            if let Some(e) = record_index::load(&kept, &key).filter(|e| fits(e, info.size)) {
                indexes.push(e);
                in_place.push(None);
                continue;
            }
            let packed_by_name = format.is_packed(name, &[]);
            let loaded_in_place = packed_by_name
                .then(|| record_index::load(&kept_in_place, &in_place_key))
                .flatten()
                .filter(|e| fits(e, info.size));
            let unpacked_index = record_index::load(&kept, &unpacked_key)
                // Packed by name (Parquet) and indexed by a version that kept no index in
                // place: indexed again.
                .filter(|_| !packed_by_name || loaded_in_place.is_some());
            if let Some(e) = unpacked_index {
                // Packed, indexed before: the copy is made when an epoch reads the file. The
                // first one's header (its class names) is kept beside its index; an index
                // kept without it (by an earlier version) is made again with it.
                let need_head = head.is_none() && !e.is_empty();
                let found_head = need_head.then(|| std::fs::read(&kept_head).ok()).flatten();
                if !need_head || found_head.is_some() {
                    if need_head {
                        head = found_head;
                    }
                    as_unpacked(file, &unpacked_key.stamp, info.size, &e);
                    in_place.push(
                        loaded_in_place
                            .filter(|p| p.len() == e.len() && (!p.is_empty() || e.is_empty())),
                    );
                    indexes.push(e);
                    continue;
                }
            }
            let object_path = Path::new(&object);
            if format.is_packed(name, &[]) {
                // Packed whatever its bytes (Parquet): fetched into memory, unpacked there to
                // index it, and the copy the epochs read put into the cache now when there is
                // room (else the fetch-ahead makes it when an epoch needs it).
                let (bytes, _) = client.get(name, info.size)?;
                crate::store::stats::download();
                let (entries, copy) = index_packed(format, object_path, &bytes, &mut Vec::new())?;
                let here = format
                    .in_place(&bytes, &entries)
                    .filter(|p| same_images(&bytes, p, &copy, &entries));
                drop(bytes);
                let _ = record_index::save(
                    &kept_in_place,
                    &in_place_key,
                    here.as_deref().unwrap_or_default(),
                );
                // (An empty index in place marks a file that has none, unless it has no rows.)
                let here = here.filter(|p| !p.is_empty() || entries.is_empty());
                // A copy is put into the cache now unless range mode will read this file in
                // place.
                let copy_wanted = here.is_none() || !ranges_likely;
                in_place.push(here);
                as_unpacked(file, &unpacked_key.stamp, info.size, &entries);
                if copy_wanted {
                    keep_copy(&cache, &file.key(LISTED), &copy);
                }
                let first = copy
                    .get(..first_offset(&entries))
                    .unwrap_or_default()
                    .to_vec();
                let _ = record_index::save(&kept, &unpacked_key, &entries);
                let _ = std::fs::write(&kept_head, &first);
                if head.is_none() && !entries.is_empty() {
                    head = Some(first);
                }
                indexes.push(entries);
                continue;
            }
            let path = crate::store::ahead::cached(&client, &cache, &file.key(LISTED), &[])?;
            let f = std::fs::File::open(&path).map_err(|e| bad(&path, e.to_string()))?;
            // SAFETY: read-only, a cache file written whole and renamed into place.
            let map = unsafe { Mmap::map(&f) }.map_err(|e| bad(&path, e.to_string()))?;
            if !format.is_packed(name, &map) {
                let entries = format
                    .index(&map)
                    .map_err(|e| bad(object_path, e.to_string()))?;
                if !fits(&entries, map.len() as u64) {
                    return Err(Error::Internal(format!(
                        "{object}: the {} index builder made an entry outside the file",
                        format.name()
                    )));
                }
                // Not kept: built again next time.
                let _ = record_index::save(&kept, &key, &entries);
                indexes.push(entries);
                in_place.push(None);
                continue;
            }
            // Packed by its bytes (a gzip'd TFRecord): unpacked once in memory to index it.
            // The copy the epochs read is made by the fetch-ahead when they need it, in the
            // cache and within its limit (the packed download left in the cache goes first
            // when room is needed).
            let (entries, copy) = index_packed(format, object_path, &map, &mut Vec::new())?;
            drop(map);
            let first = copy.get(..first_offset(&entries)).unwrap_or_default();
            let _ = record_index::save(&kept, &unpacked_key, &entries);
            let _ = std::fs::write(&kept_head, first);
            if head.is_none() && !entries.is_empty() {
                head = Some(first.to_vec());
            }
            as_unpacked(file, &unpacked_key.stamp, info.size, &entries);
            indexes.push(entries);
            // A compressed stream has no sample ranges.
            in_place.push(None);
        }
        // Range mode reads records in place: not an unpacked copy, but a packed object's
        // index in place when every one has it (Parquet's uncompressed or Snappy pages).
        let not_in_place = files
            .iter()
            .zip(&in_place)
            .find(|(f, p)| f.unpacked_from.is_some() && p.is_none())
            .map(|(f, _)| f);
        // A global shuffle through a cache smaller than the copies whole files would need.
        let total = files.iter().map(|f| f.size).sum();
        let can_range = not_in_place.is_none();
        let ranged = match not_in_place {
            Some(AheadFile { name, .. }) if at.options.fetch == Fetch::Ranges => {
                return Err(crate::error::Invalid::RangesOfPacked {
                    object: url.object(name),
                }
                .into());
            }
            Some(_) => false,
            None => crate::shards::fetch::by_ranges(
                at.options.fetch,
                &at.sampling,
                cache.limit(),
                total,
            ),
        };
        if ranged {
            for (i, p) in in_place.into_iter().enumerate() {
                if let Some(p) = p {
                    indexes[i] = p;
                }
            }
            // Copies an earlier run left in the cache are not read in range mode: their
            // room goes to the kept samples.
            for f in files.iter().filter(|f| f.unpacked_from.is_some()) {
                if cache.lookup(&f.key(LISTED)).is_some() {
                    let _ = std::fs::remove_file(cache.path_of(&f.key(LISTED)));
                }
            }
            files = objects;
        } else if files.iter().any(|f| f.unpacked_from.is_some()) {
            // What the cache holds of a packed object read whole is its copy: the room
            // checks again, with the copies' sizes.
            let sizes: Vec<u64> = files.iter().map(|f| f.size).collect();
            room_for(&sizes)?;
        }
        let file_of = file_of(&indexes);
        let n = file_of.len();
        let sampling = at.sampling;
        let by_file = sampling.shuffle_window.map(|_| file_of.clone());
        let limit = cache.limit();
        let unpacker = format.clone();
        let files = AheadFiles {
            files,
            listed_by: LISTED,
            keep: Vec::new(),
            file_of,
            per_epoch: sampling.len(n) as u64,
            order: crate::store::Orders::sampled(sampling, n, by_file),
            check: Box::new(|_, _| Ok(())),
            unpack: Some(Box::new(move |object, packed, out| {
                unpacker
                    .unpack(packed, out)
                    .map_err(|e| bad(object, e.to_string()))
            })),
            assemble: None,
        };
        let count = files.files.len();
        let copies: Vec<u64> = files
            .files
            .iter()
            .filter(|f| f.unpacked_from.is_some())
            .map(|f| f.size)
            .collect();
        let ahead = if ranged {
            let ranges = indexes
                .iter()
                .flatten()
                .map(|e| e.offset..e.offset.saturating_add(e.len))
                .collect();
            RemoteFiles::Ranges(RangeAhead::new(
                client,
                files,
                ranges,
                crate::store::ranges::budget(limit),
                Some(cache),
            ))
        } else {
            RemoteFiles::Whole(FetchAhead::new(client, cache, files))
        };
        let names = found.into_iter().map(|(n, _)| n).collect();
        let classes = format.classes(head.as_deref().unwrap_or_default());
        let mut opened = RecordFiles::assemble(
            format,
            &at.root,
            names,
            Files::Remote(ahead, (0..count).map(|_| None).collect()),
            indexes,
            classes,
        )?;
        // Whole copies in the global shuffle's order through a cache that cannot hold them
        // all: each made again several times an epoch. It runs; say what would not.
        if !copies.is_empty()
            && crate::shards::fetch::global_shuffle(&at.sampling)
            && copies.iter().sum::<u64>() > limit
        {
            let window = match crate::plan::window::window_that_fits(&copies, 0, limit, PREFETCH) {
                0 => format!(
                    "a shuffle window (of 1 file it needs a cache of {} bytes)",
                    crate::plan::window::cache_need(&copies, 0, 1, PREFETCH)
                ),
                n => format!("a shuffle window (--shuffle-window {n} fits)"),
            };
            let advice = if can_range {
                // Asked for whole files, of pages range reads could read in place.
                format!(
                    "Use --fetch ranges (or auto: these files' images are read by ranges of \
                     their pages), or {window}"
                )
            } else {
                format!(
                    "Use {window}, or convert the files once to WebDataset tars (`imgfeed \
                     convert ... --format webdataset`), which range reads keep in the global \
                     shuffle's order"
                )
            };
            opened.warning = Some(format!(
                "{url}: the {} files are read through unpacked copies ({} bytes in all), \
                 more than --cache-size ({limit} bytes) holds: with the global shuffle each \
                 copy is made again several times an epoch. {advice}",
                format.name(),
                copies.iter().sum::<u64>(),
            ));
        }
        Ok(opened)
    }

    /// The files, as listed.
    pub fn files(&self) -> &[String] {
        &self.names
    }
}

/// The index of the packed file `object` (its bytes `packed`) and its unpacked copy, made
/// in `copy`.
fn index_packed<F: RecordFormat>(
    format: &F,
    object: &Path,
    packed: &[u8],
    copy: &mut Vec<u8>,
) -> Result<(Vec<RecordEntry>, Vec<u8>)> {
    format
        .unpack(packed, copy)
        .map_err(|e| bad(object, e.to_string()))?;
    let entries = format.index(copy).map_err(|e| bad(object, e.to_string()))?;
    if !fits(&entries, copy.len() as u64) {
        return Err(Error::Internal(format!(
            "{}: the {} index builder made an entry outside the file",
            object.display(),
            format.name()
        )));
    }
    Ok((entries, std::mem::take(copy)))
}

/// Whether every image of the index in place `here` (of the packed file `packed`) reads
/// as the same bytes as in the unpacked copy (`copy`, indexed by `unpacked`): an index in
/// place is used only when it gives exactly what the copy gives.
fn same_images(packed: &[u8], here: &[RecordEntry], copy: &[u8], unpacked: &[RecordEntry]) -> bool {
    let mut buf = Vec::new();
    here.len() == unpacked.len()
        && here.iter().zip(unpacked).all(|(h, u)| {
            let (Some(bytes), Some(want)) = (
                packed.get(h.offset as usize..h.offset.saturating_add(h.len) as usize),
                copy.get(u.offset as usize..u.offset.saturating_add(u.len) as usize),
            ) else {
                return false;
            };
            buf.clear();
            buf.extend_from_slice(bytes);
            let n = buf.len();
            h.labels == u.labels
                && h.key == u.key
                && h.stored
                    .image(&mut buf, 0..n)
                    .is_ok_and(|r| buf[r] == *want)
        })
}

/// Where a copy's first record starts (what comes before it is its header).
fn first_offset(entries: &[RecordEntry]) -> usize {
    entries.iter().map(|e| e.offset).min().unwrap_or(0) as usize
}

/// Put the unpacked copy `copy` into the cache as `key` (its first `key.size` bytes) if
/// it is not there and the cache has room; otherwise nothing (the fetch-ahead makes it).
fn keep_copy(cache: &Cache, key: &crate::store::CacheKey<'_>, copy: &[u8]) {
    let Some(kept) = copy.get(..key.size as usize) else {
        return;
    };
    if cache.lookup(key).is_some() {
        return;
    }
    if let Ok((Ok(mut pending), _)) = cache.reserve(key, &[]) {
        let written = pending
            .file()
            .is_some_and(|f| std::io::Write::write_all(f, kept).is_ok());
        if written {
            let _ = pending.commit(key, key.name, crate::store::Received::of(kept));
        }
    }
}

/// Make `file` the unpacked copy of its object (of `packed` bytes, version `stamp`): the
/// cache holds the copy's first bytes up to the end of its last record (what `entries`
/// read), under a name of its own.
fn as_unpacked(file: &mut AheadFile, stamp: &str, packed: u64, entries: &[RecordEntry]) {
    file.size = entries
        .iter()
        .map(|e| e.offset.saturating_add(e.len))
        .max()
        .unwrap_or(0);
    file.crc32 = crc32fast::hash(stamp.as_bytes());
    file.unpacked_from = Some(packed);
}

/// The file of each sample of `indexes` (one per file).
fn file_of(indexes: &[Vec<RecordEntry>]) -> Vec<u32> {
    let mut file_of = Vec::with_capacity(indexes.iter().map(Vec::len).sum());
    for (i, e) in indexes.iter().enumerate() {
        file_of.extend(std::iter::repeat_n(i as u32, e.len()));
    }
    file_of
}

impl Source for RecordFiles {
    fn warnings(&self) -> Vec<String> {
        self.warning.iter().cloned().collect()
    }

    fn describe(&self) -> String {
        format!(
            "{} {}: {} in {}",
            self.kind,
            self.root.display(),
            crate::spec::count(self.samples.len() as u64, "sample", "samples"),
            crate::spec::count(self.names.len() as u64, "file", "files"),
        )
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn classes(&self) -> &[(String, u32)] {
        &self.classes
    }

    fn len(&self) -> usize {
        self.samples.len()
    }

    fn spec(&self) -> Spec {
        Spec {
            label_columns: self.label_columns,
            ..Spec::encoded()
        }
    }

    fn sample_name(&self, index: usize) -> String {
        match (self.samples.get(index), self.keys.get(index)) {
            (Some(s), Some(k)) => format!("{}:{k}", self.names[s.file as usize]),
            _ => format!("{}:#{index}", self.root.display()),
        }
    }

    fn read<'a>(&'a self, index: usize, scratch: &'a mut Vec<u8>) -> Result<RawSample<'a>> {
        let s = self
            .samples
            .get(index)
            .ok_or_else(|| Error::out_of_range(index, self.sample_name(index)))?;
        let range = s.offset as usize..(s.offset + s.len) as usize;
        let mapped = match &self.files {
            Files::Mapped(maps) => Some(maps.get(s.file as usize).and_then(Option::as_deref)),
            Files::Remote(_, maps) if maps.get(s.file as usize).is_some_and(Option::is_some) => {
                Some(maps.get(s.file as usize).and_then(Option::as_deref))
            }
            Files::Remote(ahead, _) => {
                ahead.copy(s.file as usize, range.clone(), index, scratch)?;
                None
            }
        };
        let outside = || {
            Error::Internal(format!(
                "{}: indexed outside its file",
                self.sample_name(index)
            ))
        };
        if let Some(map) = mapped {
            let bytes = map.and_then(|m| m.get(range)).ok_or_else(outside)?;
            if s.stored == Stored::Plain {
                return Ok(RawSample {
                    raw: Raw::Encoded(bytes),
                    labels: s.labels,
                });
            }
            scratch.clear();
            scratch.extend_from_slice(bytes);
        }
        // Plain, or inside a compressed page (Parquet read in place): decoded after its
        // bytes, in the scratch.
        let n = scratch.len();
        let image = s.stored.image(scratch, 0..n).map_err(|e| Error::Sample {
            index,
            file: self.sample_name(index),
            stage: "read",
            kind: crate::error::SampleErrorKind::Corrupt,
            reason: format!("its bytes in the file do not decode as indexed: {e}"),
        })?;
        Ok(RawSample {
            raw: Raw::Encoded(&scratch[image]),
            labels: s.labels,
        })
    }

    fn file_of(&self) -> Option<&[u32]> {
        Some(&self.file_of)
    }

    fn last_epoch(&self, epoch: u64) {
        if let Files::Remote(ahead, _) = &self.files {
            ahead.last_epoch(epoch);
        }
    }

    fn epoch_starts(&self, epoch: u64, order: &[usize]) {
        if let Files::Remote(ahead, maps) = &self.files {
            if maps.iter().all(Option::is_none) {
                ahead.start_epoch(epoch, order);
            } else {
                // Unpacked copies are read from the cache folder: nothing to fetch for them.
                let fetched: Vec<usize> = order
                    .iter()
                    .copied()
                    .filter(|&i| {
                        self.samples
                            .get(i)
                            .is_some_and(|s| maps.get(s.file as usize).is_some_and(Option::is_none))
                    })
                    .collect();
                ahead.start_epoch(epoch, &fetched);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_root_names_a_prefix_and_the_objects_there() {
        let tar = &[".tar"][..];
        assert_eq!(
            store_selection("s3://b/wds/train-{0..1}.tar", tar),
            Ok((
                "s3://b/wds".to_string(),
                Some(vec!["train-0.tar".to_string(), "train-1.tar".to_string()])
            ))
        );
        assert_eq!(
            store_selection("gs://b/x.TAR", tar),
            Ok(("gs://b".to_string(), Some(vec!["x.TAR".to_string()])))
        );
        assert_eq!(
            store_selection("s3://b/wds/", tar),
            Ok(("s3://b/wds".to_string(), None))
        );
        assert!(store_selection("s3://b/{a,c/d}.tar", tar).is_err());
        assert!(store_selection("s3://x.tar", tar).is_err());
    }
}
