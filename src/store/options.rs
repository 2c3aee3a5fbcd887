//! Where a location in a store is reached, how it is cached and how its files are read: the
//! `endpoint`, `cache_dir`, `cache_size` and `fetch` fields of `[source]` (any kind: they
//! matter when the root is a URL), and the command line's `--endpoint`, `--cache-dir`,
//! `--cache-size` and `--fetch`.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The `[source]` fields of a location in a store.
pub const STORE_FIELDS: &[&str] = &["endpoint", "cache_dir", "cache_size", "fetch"];

/// How a location in object storage is reached and cached.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct StoreOptions {
    /// Where the store is reached: an S3-compatible server (`http://127.0.0.1:9000`,
    /// overriding `AWS_ENDPOINT_URL`), the GCS base URL (an emulator's), or the Azure blob
    /// service URL (Azurite's `http://127.0.0.1:10000/devstoreaccount1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The cache root (default `$XDG_CACHE_HOME/imgfeed`, else `~/.cache/imgfeed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_dir: Option<PathBuf>,
    /// Byte limit of the location's cache folder (`"20GB"`; default 100GB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_size: Option<String>,
    /// How files of few large objects (shards, containers) are read: `auto`, `files`
    /// (whole, through the cache) or `ranges` (samples' byte ranges, into memory).
    #[serde(default, skip_serializing_if = "Fetch::is_auto")]
    pub fetch: Fetch,
}

/// How a dataset's files in a store are read (the `fetch` field, `--fetch`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum Fetch {
    /// `ranges` for a global shuffle over files larger than the cache, `files` otherwise.
    #[default]
    Auto,
    /// Whole files fetched into the cache ahead of the epoch's order of first use.
    Files,
    /// Each sample's byte range fetched into memory ahead of the epoch's exact order
    /// (the global shuffle kept with a cache of any size; not for compressed files).
    Ranges,
}

impl Fetch {
    /// `auto`.
    pub fn is_auto(&self) -> bool {
        *self == Fetch::Auto
    }

    /// Whether files are read by ranges: asked, or `auto` with a global shuffle
    /// (`global_shuffle`) over files (`total` bytes) larger than the cache (`limit`).
    pub fn ranges(self, global_shuffle: bool, limit: u64, total: u64) -> bool {
        match self {
            Fetch::Ranges => true,
            Fetch::Files => false,
            Fetch::Auto => global_shuffle && limit < total,
        }
    }
}

impl std::fmt::Display for Fetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fetch::Auto => "auto",
            Fetch::Files => "files",
            Fetch::Ranges => "ranges",
        })
    }
}

setters!(StoreOptions {
    fetch: Fetch,
} optional {
    endpoint: String,
    cache_dir: PathBuf,
    cache_size: String,
});

impl StoreOptions {
    /// The cache limit in bytes.
    pub fn cache_limit(&self) -> crate::Result<u64> {
        match &self.cache_size {
            None => Ok(super::cache::DEFAULT_CACHE_SIZE),
            Some(s) => {
                crate::size::parse_size(s).map_err(|e| crate::error::Invalid::CacheSize(e).into())
            }
        }
    }
}
