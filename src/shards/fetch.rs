//! The shard files of a dataset in object storage, fetched whole into the local cache when
//! an epoch needs them and memory-mapped from there: the store's [`FetchAhead`] over the
//! manifest's shards (each checked against the manifest's size and CRC-32, and its header
//! checked, as it arrives), prefetching in the epoch's order of the sampling.

use super::format::{FileEntry, Manifest};
use crate::plan::Sampling;
use crate::store::{AheadFile, AheadFiles, Cache, CacheKey, FetchAhead, StoreClient};
use std::path::PathBuf;

pub use crate::store::ahead::PREFETCH;

/// Who lists a dataset's files.
const LISTED_BY: &str = "the manifest";

/// `entry` as the cache keys it.
pub(crate) fn key(entry: &FileEntry) -> CacheKey<'_> {
    CacheKey {
        name: &entry.file,
        size: entry.size,
        crc32: entry.crc32,
        checked: true,
        listed_by: LISTED_BY,
    }
}

/// The shard files of a remote dataset (see the module).
pub type RemoteFiles = FetchAhead;

/// The shards of `manifest`, fetched by `client` into `cache`; `keep` are the cached index
/// and names; `shard_of` the shard of every sample; `sampling` the epochs' order.
pub(crate) fn remote_files(
    client: StoreClient,
    cache: Cache,
    manifest: Manifest,
    keep: Vec<PathBuf>,
    shard_of: Vec<u32>,
    sampling: Sampling,
) -> RemoteFiles {
    let n = manifest.samples as usize;
    let by_file = sampling.shuffle_window.map(|_| shard_of.clone());
    let files = manifest
        .shards
        .iter()
        .map(|e| AheadFile {
            name: e.file.clone(),
            size: e.size,
            crc32: e.crc32,
            checked: true,
        })
        .collect();
    let check = move |object: &std::path::Path, map: &memmap2::Mmap| {
        super::source::check_shard(object, map, &manifest)
    };
    FetchAhead::new(
        client,
        cache,
        AheadFiles {
            files,
            listed_by: LISTED_BY,
            keep,
            file_of: shard_of,
            per_epoch: sampling.len(n) as u64,
            order: Box::new(move |epoch| sampling.order(n, epoch, by_file.as_deref())),
            check: Box::new(check),
        },
    )
}
