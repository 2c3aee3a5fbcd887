//! Opening a shards dataset in object storage: the manifest first (always fetched, by the
//! opener that looks for it, so a dataset converted again is noticed), then the index and the names into the cache
//! (checked against the manifest's sizes and CRC-32s), then a [`Shards`] whose shard files
//! are fetched when an epoch needs them ([`RemoteFiles`](super::fetch::RemoteFiles)): the same checks as a local
//! dataset's, the same records, the same batches.

use super::fetch::{key, PREFETCH};
use super::format::{Entry, FileEntry, Manifest, HEADER_LEN, MANIFEST};
use super::Shards;
use crate::error::Result;
use crate::plan::Sampling;
use crate::store::{Cache, StoreClient, StoreOptions};
use memmap2::Mmap;
use std::path::{Path, PathBuf};

/// Open the shards dataset at `root` (`s3://bucket/prefix`), reached by `client`, whose
/// manifest's bytes are `manifest` (fetched by the caller: the request that found it).
pub fn open(
    root: &Path,
    client: StoreClient,
    manifest: &[u8],
    options: &StoreOptions,
    sampling: &Sampling,
) -> Result<Shards> {
    let url = client.url().clone();
    let manifest = Manifest::parse(Path::new(&url.object(MANIFEST)), manifest)?;
    let cache = Cache::open(
        options.cache_dir.as_deref(),
        options.cache_limit()?,
        &url,
        options.endpoint.as_deref(),
    )?;
    let largest = manifest.shards.iter().map(|f| f.size).max().unwrap_or(0);
    let total = manifest.shards.iter().map(|f| f.size).sum();
    let ranged = super::fetch::by_ranges(options.fetch, sampling, cache.limit(), total);
    // By ranges, no shard goes to the cache: only the index and the names.
    let least = manifest.index.size + manifest.names.size + if ranged { 0 } else { largest };
    if cache.limit() < least {
        return Err(crate::error::Invalid::CacheTooSmall {
            limit: cache.limit(),
            url: url.to_string(),
            least,
        }
        .into());
    }
    if let Some(window) = sampling.shuffle_window {
        let sizes: Vec<u64> = manifest.shards.iter().map(|f| f.size).collect();
        let keep = manifest.index.size + manifest.names.size;
        crate::plan::window::check_room(&sizes, keep, cache.limit(), window, PREFETCH).map_err(
            |source| crate::error::Invalid::WindowCache {
                url: url.to_string(),
                source,
            },
        )?;
    }
    let index = small_file(&client, &cache, &manifest.index, &[])?;
    let names = small_file(
        &client,
        &cache,
        &manifest.names,
        std::slice::from_ref(&index.0),
    )?;
    let keep = vec![index.0.clone(), names.0.clone()];
    let shard_of = shard_of(&index.1, manifest.samples);
    let for_messages = |file: &str| PathBuf::from(url.object(file));
    let (ipath, npath) = (
        for_messages(&manifest.index.file),
        for_messages(&manifest.names.file),
    );
    let ranges = ranged.then(|| super::fetch::sample_ranges(&index.1, manifest.samples));
    let files = super::fetch::remote_files(
        client,
        cache,
        manifest.clone(),
        keep,
        shard_of,
        *sampling,
        ranges,
    );
    Shards::remote(root, manifest, (ipath, index.1), (npath, names.1), files)
}

/// The index or the names: from the cache, or downloaded into it.
fn small_file(
    client: &StoreClient,
    cache: &Cache,
    entry: &FileEntry,
    keep: &[PathBuf],
) -> Result<(PathBuf, Mmap)> {
    let path = crate::store::ahead::cached(client, cache, &key(entry), keep)?;
    let map = super::source::map_sized(&path, entry)?;
    Ok((path, map))
}

/// The shard of each sample, read from the index (a prefetch hint: the index is checked
/// after, and a sample it cannot place says shard `u32::MAX`).
fn shard_of(index: &[u8], samples: u64) -> Vec<u32> {
    let body = index.get(HEADER_LEN..).unwrap_or(&[]);
    (0..samples as usize)
        .map(|i| Entry::at(body, i).map_or(u32::MAX, |e| e.shard))
        .collect()
}
