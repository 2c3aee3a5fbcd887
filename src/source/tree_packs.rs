//! An image tree in object storage kept in the cache folder: its objects, in listing
//! order, grouped into **packs** of about [`PACK_BYTES`], each pack one file of the cache
//! (the objects' bytes one after the other), fetched whole and read locally from then on.
//!
//! Without packs every epoch asks the store for every image again, whatever the disk
//! holds; a cache file per image would make the folder millions of files. A pack is
//! assembled by GETting its objects ([`FETCHES`] at a time, each checked against its
//! listed size and ETag) into the file at their offsets, and is then a file like a shard: fetched
//! ahead in the epoch's order of first use, evicted by next use, within `--cache-size`
//! ([`crate::store::FetchAhead`]). Its name in the cache carries a hash of its objects'
//! keys, sizes and ETags, so an object replaced on the store never reads from an old
//! pack. The first epoch costs one GET per image as before; the later ones none, when the
//! cache holds the tree.
//!
//! A read whose pack is not at hand yet (the first epoch: a shuffled epoch needs nearly
//! every pack within its first reads) does not wait for it: its image is read by one GET,
//! fetched ahead like a tree read without packs, while the packs arrive. So the first
//! epoch runs at the pace of one GET per image, not behind the packs' download, for some
//! GETs more (the images read before their pack came).
//!
//! A pack that cannot be assembled because one of its objects is missing, forbidden or
//! changed is not kept: its samples are then read one GET each, so that object's sample
//! alone fails, naming it.

use crate::error::Result;
use crate::plan::Sampling;
use crate::store::{AheadFile, AheadFiles, Cache, FetchAhead, Received, StoreClient, StoreError};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// About the bytes of one pack: few enough files in the cache folder (4400 for
/// ImageNet's 140 GB), small enough that the first batch of a shuffled epoch, which needs
/// up to a batch's worth of packs, does not wait for much more than it reads.
pub const PACK_BYTES: u64 = 32 << 20;

/// Most objects in one pack (a tree of tiny images).
pub const PACK_OBJECTS: usize = 4096;

/// GETs in flight while one pack is assembled.
pub const FETCHES: usize = 16;

/// Who lists the packs, for messages.
const LISTED_BY: &str = "the image tree's listing";

/// The packs of a tree and their reader.
pub struct TreePacks {
    files: FetchAhead,
    /// The pack of each sample (`u32::MAX`: in none, an object over the size limit).
    pack_of: Vec<u32>,
    /// Each sample's offset in its pack.
    offset: Vec<u64>,
    /// Each sample's size (the listing's, shared with the per-image reader).
    sizes: Arc<[u64]>,
    /// Each pack's size.
    pack_sizes: Vec<u64>,
    /// Packs that could not be assembled: their samples are read one GET each.
    failed: Arc<[AtomicBool]>,
    /// Packs last seen at hand (a hint read without a lock: a read that finds its pack
    /// gone after all clears it).
    known: Vec<AtomicBool>,
    /// Called when a pack becomes known at hand: the per-image fetchers, waiting for room
    /// that images read from it now free, look again.
    on_known: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for TreePacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreePacks")
            .field("samples", &self.pack_of.len())
            .finish()
    }
}

/// The packs of samples `sizes` (listing order), leaving out those over `max` bytes (a
/// pack ends before one: its samples stay consecutive): `(pack of each sample, offset in
/// it, each pack's samples)`.
fn group(sizes: &[u64], max: u64) -> (Vec<u32>, Vec<u64>, Vec<std::ops::Range<usize>>) {
    let mut pack_of = vec![u32::MAX; sizes.len()];
    let mut offset = vec![0u64; sizes.len()];
    let mut packs: Vec<std::ops::Range<usize>> = Vec::new();
    let mut bytes = 0u64;
    let mut cut = true;
    for (i, &size) in sizes.iter().enumerate() {
        if size > max {
            cut = true;
            continue;
        }
        let full = cut
            || packs.last().is_none_or(|p| {
                !p.is_empty() && (bytes + size > PACK_BYTES || p.len() >= PACK_OBJECTS)
            });
        cut = false;
        if full {
            packs.push(i..i);
            bytes = 0;
        }
        let Some(p) = packs.last_mut() else { continue };
        p.end = i + 1;
        pack_of[i] = (packs.len() - 1) as u32;
        offset[i] = bytes;
        bytes += size;
    }
    (pack_of, offset, packs)
}

/// A pack's version tag: a hash of its objects' keys, sizes and ETags.
fn tag(keys: &[String], sizes: &[u64], e_tags: &[Option<String>]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for ((k, s), e) in keys.iter().zip(sizes).zip(e_tags) {
        h.update(k.as_bytes());
        h.update(&[0]);
        h.update(&s.to_le_bytes());
        h.update(e.as_deref().unwrap_or("").as_bytes());
        h.update(&[0]);
    }
    h.finalize()
}

impl TreePacks {
    /// The packs of the tree whose sample `i` is object `keys[i]` (`sizes[i]` bytes,
    /// ETag `e_tags[i]`), read through `cache` in the order `sampling` gives; objects
    /// over `max` bytes are in no pack (their reads fail on their size first).
    pub fn new(
        client: StoreClient,
        cache: Cache,
        keys: Arc<[String]>,
        sizes: Arc<[u64]>,
        e_tags: Arc<[Option<String>]>,
        max: u64,
        sampling: Sampling,
    ) -> TreePacks {
        let n = sizes.len();
        let (pack_of, offset, packs) = group(&sizes, max);
        let count = packs.len();
        let files: Vec<AheadFile> = packs
            .iter()
            .enumerate()
            .map(|(p, r)| AheadFile {
                name: format!("tree-pack-{p:06}-of-{count:06}"),
                size: sizes[r.clone()].iter().sum(),
                crc32: tag(&keys[r.clone()], &sizes[r.clone()], &e_tags[r.clone()]),
                checked: false,
                unpacked_from: None,
            })
            .collect();
        let pack_sizes: Vec<u64> = files.iter().map(|f| f.size).collect();
        let failed: Arc<[AtomicBool]> = (0..count).map(|_| AtomicBool::new(false)).collect();
        let assemble = {
            let (failed, sizes) = (Arc::clone(&failed), Arc::clone(&sizes));
            move |client: &StoreClient, p: usize, out: &mut std::fs::File| -> Result<Received> {
                let r = packs.get(p).cloned().unwrap_or(0..0);
                let (keys, sizes, e_tags) = (&keys[r.clone()], &sizes[r.clone()], &e_tags[r]);
                if failed.get(p).is_some_and(|f| f.load(Ordering::Relaxed)) {
                    // Not asked again (a prefetch of it): its samples are read one by one.
                    let first = keys.first().map_or("", String::as_str);
                    return Err(StoreError::Request {
                        object: client.url().object(first),
                        reason: "its pack could not be made: read one image at a time".into(),
                    }
                    .into());
                }
                assemble(client, keys, sizes, e_tags, out).map_err(|e| {
                    if matches!(
                        e,
                        StoreError::NotFound { .. }
                            | StoreError::Denied { .. }
                            | StoreError::Changed { .. }
                            | StoreError::Request { .. }
                    ) {
                        if let Some(f) = failed.get(p) {
                            f.store(true, Ordering::Relaxed);
                        }
                    }
                    e.into()
                })
            }
        };
        let by_file = sampling.shuffle_window.map(|_| pack_of.clone());
        let ahead = AheadFiles {
            files,
            listed_by: LISTED_BY,
            keep: Vec::new(),
            file_of: pack_of.clone(),
            per_epoch: sampling.len(n) as u64,
            order: crate::store::Orders::sampled(sampling, n, by_file),
            check: Box::new(|_, _| Ok(())),
            unpack: None,
            assemble: Some(Box::new(assemble)),
        };
        TreePacks {
            files: FetchAhead::new(client, cache, ahead),
            pack_of,
            offset,
            sizes,
            pack_sizes,
            failed,
            known: (0..count).map(|_| AtomicBool::new(false)).collect(),
            on_known: std::sync::OnceLock::new(),
        }
    }

    /// Call `f` whenever a pack becomes known at hand (once per pack and arrival; set
    /// once).
    pub fn when_known(&self, f: impl Fn() + Send + Sync + 'static) {
        let _ = self.on_known.set(Box::new(f));
    }

    /// The pack of each sample, for the shard-aware shuffle's windows.
    pub fn pack_of(&self) -> &[u32] {
        &self.pack_of
    }

    /// The packs' sizes.
    pub fn sizes(&self) -> &[u64] {
        &self.pack_sizes
    }

    /// Epoch `epoch` reads the samples `order`.
    pub fn start_epoch(&self, epoch: u64, order: &[usize]) {
        self.files.start_epoch(epoch, order);
    }

    fn failed(&self, p: u32) -> bool {
        self.failed
            .get(p as usize)
            .is_some_and(|f| f.load(Ordering::Relaxed))
    }

    /// Sample `index`'s bytes into `scratch` from its pack, when the pack is at hand (in
    /// the cache): `Ok(false)` when it is not yet (it is being fetched, or will be), or
    /// cannot be made, or the sample is in none: read it by one GET instead.
    pub fn read(&self, index: usize, scratch: &mut Vec<u8>) -> Result<bool> {
        let Some(&p) = self.pack_of.get(index).filter(|&&p| p != u32::MAX) else {
            self.files.note_read(index);
            return Ok(false);
        };
        if self.failed(p) {
            self.know(p, false);
            self.files.note_read(index);
            return Ok(false);
        }
        let start = self.offset.get(index).copied().unwrap_or(0) as usize;
        let len = self.sizes.get(index).copied().unwrap_or(0) as usize;
        match self
            .files
            .copy_if_at_hand(p as usize, start..start + len, index, scratch)
        {
            Ok(read) => {
                self.know(p, read);
                Ok(read)
            }
            Err(_) if self.failed(p) => {
                self.know(p, false);
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// A read of sample `index` made elsewhere (an image fetched before its pack came):
    /// noted, so the packs' prefetching moves on.
    pub fn note_read(&self, index: usize) {
        self.files.note_read(index);
    }

    /// Whether sample `index` would be read from its pack now (see [`TreePacks::read`]):
    /// the per-image fetchers skip it.
    pub fn at_hand(&self, index: usize) -> bool {
        let Some(&p) = self.pack_of.get(index).filter(|&&p| p != u32::MAX) else {
            return false;
        };
        if self.failed(p) {
            self.know(p, false);
            return false;
        }
        let at_hand = self.files.at_hand(p as usize);
        self.know(p, at_hand);
        at_hand
    }

    /// Whether sample `index`'s pack was last seen at hand: no lock, no look at the
    /// folder (the per-image fetchers' and the reads' first question).
    pub fn known_at_hand(&self, index: usize) -> bool {
        self.pack_of
            .get(index)
            .and_then(|&p| self.known.get(p as usize))
            .is_some_and(|k| k.load(Ordering::Relaxed))
    }

    fn know(&self, p: u32, at_hand: bool) {
        let Some(k) = self.known.get(p as usize) else {
            return;
        };
        // Read first: a read of a pack known already writes nothing.
        if k.load(Ordering::Relaxed) != at_hand && !k.swap(at_hand, Ordering::Relaxed) && at_hand {
            if let Some(f) = self.on_known.get() {
                f();
            }
        }
    }
}

/// GET the objects `keys` (`sizes` bytes and ETag `e_tags` each, as listed, in pack
/// order) into `out` at their offsets, [`FETCHES`] at a time: what was written, or the first object's error.
fn assemble(
    client: &StoreClient,
    keys: &[String],
    sizes: &[u64],
    e_tags: &[Option<String>],
    out: &std::fs::File,
) -> std::result::Result<Received, StoreError> {
    let mut offsets = Vec::with_capacity(sizes.len());
    let mut at = 0u64;
    for size in sizes {
        offsets.push(at);
        at += size;
    }
    let asked: Vec<(&str, u64, Option<&str>)> = keys
        .iter()
        .zip(sizes)
        .zip(e_tags)
        .map(|((k, &s), e)| (k.as_str(), s, e.as_deref()))
        .collect();
    let mut first_error = None;
    let mut len = 0u64;
    client.get_objects(&asked, FETCHES, |i, got| {
        let written = got.and_then(|bytes| {
            let offset = offsets.get(i).copied().unwrap_or(0);
            out.write_all_at(&bytes, offset)
                .map(|()| bytes.len() as u64)
                .map_err(|e| StoreError::Cache {
                    path: client
                        .url()
                        .object(keys.get(i).map_or("", String::as_str))
                        .into(),
                    reason: format!("writing it into its pack: {e}"),
                })
        });
        match written {
            Ok(n) => len += n,
            // The pack will not be made: no more requests for it.
            Err(e) => first_error = Some(e),
        }
        first_error.is_none()
    });
    match first_error {
        Some(e) => Err(e),
        None => Ok(Received::counted(len)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_group_objects_in_listing_order_up_to_their_size_and_leave_out_the_too_large() {
        let mb = 1 << 20;
        let sizes = [10 * mb, 20 * mb, 5 * mb, 300 * mb, 40 * mb, 1];
        let (pack_of, offset, packs) = group(&sizes, 256 * mb);
        // 10 + 20 fit 32 MB; 5 starts the next; the 300 MB object is in none; a 40 MB
        // object alone; the last byte after it.
        assert_eq!(pack_of, [0, 0, 1, u32::MAX, 2, 3]);
        assert_eq!(offset, [0, 10 * mb, 0, 0, 0, 0]);
        assert_eq!(packs, [0..2, 2..3, 4..5, 5..6]);
        // An object left out between two small ones ends the pack: every pack's samples
        // are consecutive, at the offsets their sizes give.
        let (pack_of, offset, packs) = group(&[1, 300 * mb, 1, 2], 256 * mb);
        assert_eq!(pack_of, [0, u32::MAX, 1, 1]);
        assert_eq!(offset, [0, 0, 0, 1]);
        assert_eq!(packs, [0..1, 2..4]);
        // Many tiny objects: at most PACK_OBJECTS a pack.
        let tiny = vec![1u64; PACK_OBJECTS + 1];
        let (pack_of, _, packs) = group(&tiny, 10);
        assert_eq!(packs.len(), 2);
        assert_eq!(pack_of[PACK_OBJECTS], 1);
        assert!(group(&[], 10).2.is_empty());
    }

    #[test]
    fn a_pack_tag_changes_with_any_object_key_size_or_etag() {
        let keys = vec!["a/1.jpg".to_string(), "a/2.jpg".to_string()];
        let e = vec![Some("\"x\"".to_string()), None];
        let base = tag(&keys, &[3, 4], &e);
        assert_ne!(base, tag(&keys, &[3, 5], &e));
        assert_ne!(base, tag(&keys, &[3, 4], &[None, None]));
        let renamed = vec!["a/1.jpg".to_string(), "b/2.jpg".to_string()];
        assert_ne!(base, tag(&renamed, &[3, 4], &e));
        assert_eq!(base, tag(&keys, &[3, 4], &e));
    }
}
