//! The shard files of a dataset in object storage, read as the `fetch` option says
//! ([`RemoteFiles`]): fetched whole into the local cache when an epoch needs them and
//! memory-mapped from there (the store's [`FetchAhead`] over the manifest's shards, each
//! checked against the manifest's size and CRC-32, and its header checked, as it arrives,
//! prefetched in the epoch's order of the sampling), or, in range mode, each sample's
//! record fetched by its byte range ahead of the epoch's exact order ([`RangeAhead`]: the
//! index entries give the ranges; every record's CRC-32 is checked when read, as always,
//! but no whole shard is, see [`crate::store::ranges`]).

use super::format::{Entry, FileEntry, Manifest, HEADER_LEN};
use crate::plan::Sampling;
use crate::store::{
    AheadFile, AheadFiles, Cache, CacheKey, Fetch, FetchAhead, RangeAhead, StoreClient,
};
use std::ops::Range;
use std::path::PathBuf;

pub use crate::store::ahead::PREFETCH;
pub use crate::store::RemoteFiles;

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

/// Whether `sampling` reads every epoch in one global shuffle of all the samples (what
/// range mode keeps exact when the files do not fit the cache); a shard-aware shuffle
/// (`shuffle_window`) reads a window of whole files at a time instead.
pub fn global_shuffle(sampling: &Sampling) -> bool {
    sampling.shuffle && sampling.shuffle_window.is_none()
}

/// Whether files of `total` bytes are read by ranges: `fetch` as given, `auto` deciding
/// by the sampling and the cache `limit` ([`Fetch::ranges`]).
pub fn by_ranges(fetch: Fetch, sampling: &Sampling, limit: u64, total: u64) -> bool {
    fetch.ranges(global_shuffle(sampling), limit, total)
}

/// The byte range of every sample's record in its shard, from the index's bytes (a
/// sample the index cannot place gets an empty range: the index is checked after).
pub(crate) fn sample_ranges(index: &[u8], samples: u64) -> Vec<Range<u64>> {
    let body = index.get(HEADER_LEN..).unwrap_or(&[]);
    (0..samples as usize)
        .map(|i| Entry::at(body, i).map_or(0..0, |e| e.offset..e.offset.saturating_add(e.length)))
        .collect()
}

/// The shards of `manifest`, fetched by `client` into `cache`; `keep` are the cached index
/// and names; `shard_of` the shard of every sample; `sampling` the epochs' order;
/// `ranges` each sample's byte range when they are read by ranges (with at most
/// `budget` bytes ahead in memory), `None` to read whole files.
pub(crate) fn remote_files(
    client: StoreClient,
    cache: Cache,
    manifest: Manifest,
    keep: Vec<PathBuf>,
    shard_of: Vec<u32>,
    sampling: Sampling,
    ranges: Option<Vec<Range<u64>>>,
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
            unpacked_from: None,
        })
        .collect();
    let limit = cache.limit();
    let check = move |object: &std::path::Path, map: &memmap2::Mmap| {
        super::source::check_shard(object, map, &manifest)
    };
    let files = AheadFiles {
        files,
        listed_by: LISTED_BY,
        keep,
        file_of: shard_of,
        per_epoch: sampling.len(n) as u64,
        order: crate::store::Orders::sampled(sampling, n, by_file),
        check: Box::new(check),
        unpack: None,
        assemble: None,
    };
    match ranges {
        Some(ranges) => RemoteFiles::Ranges(RangeAhead::new(
            client,
            files,
            ranges,
            crate::store::ranges::budget(limit),
            Some(cache),
        )),
        None => RemoteFiles::Whole(FetchAhead::new(client, cache, files)),
    }
}
