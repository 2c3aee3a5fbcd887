//! The `[store]` table of a conversion pipeline: how `convert --format shards` stores each
//! sample.
//!
//! ```toml
//! [store]
//! mode = "jpeg"        # "jpeg", "raw" or "original"
//! quality = 90         # jpeg only, 1-100
//! shard_size = "1GB"   # bytes per shard file: a number, or with kB/MB/GB/KiB/MiB/GiB
//! ```

use super::format::Storage;
use super::writer::DEFAULT_SHARD_SIZE;
use crate::error::Invalid;
use crate::size::parse_size;
use serde::{Deserialize, Serialize};

fn ninety() -> u8 {
    90
}

/// The `[store]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct StoreConfig {
    /// `jpeg` (re-encoded after the ops), `raw` (RGB u8 HWC after the ops) or `original`
    /// (the source's file bytes; the pipeline must have no ops).
    #[serde(default)]
    pub mode: Storage,
    /// JPEG quality, 1 to 100 (default 90).
    #[serde(default = "ninety")]
    pub quality: u8,
    /// Bytes per shard file (default 1GB); a shard holds at least one sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_size: Option<String>,
    /// `(id, count)`: this conversion job writes the contiguous slice `id` of `count` of
    /// the source ([`crate::shards::slice_range`]) and its own manifest, which
    /// [`crate::shards::merge_index`] joins with the others' (the CLI's `--slice I/K`).
    /// `None`: the whole source. A job property, not a `[store]` key.
    #[serde(skip)]
    pub slice: Option<(usize, usize)>,
}

setters!(StoreConfig {
    mode: Storage,
    quality: u8,
} optional {
    shard_size: String,
    slice: (usize, usize),
});

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig {
            mode: Storage::Jpeg,
            quality: 90,
            shard_size: None,
            slice: None,
        }
    }
}

impl StoreConfig {
    /// Checks the parameters; returns the shard size in bytes.
    pub fn check(&self) -> Result<u64, Invalid> {
        if self.mode == Storage::Jpeg && !(1..=100).contains(&self.quality) {
            return Err(Invalid::Quality(self.quality));
        }
        match &self.shard_size {
            None => Ok(DEFAULT_SHARD_SIZE),
            Some(s) => parse_size(s).map_err(Invalid::ShardSize),
        }
    }
}

/// The source samples `[first, end)` that slice `id` of `count` converts.
pub fn slice_range(n: usize, id: usize, count: usize) -> (usize, usize) {
    let at = |i: usize| ((i as u128 * n as u128) / count.max(1) as u128) as usize;
    (at(id), at(id + 1))
}
