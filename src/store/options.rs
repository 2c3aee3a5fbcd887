//! Where a location in a store is reached and how it is cached: the `endpoint`, `cache_dir` and
//! `cache_size` fields of `[source]` (any kind: they matter when the root is a URL), and
//! the command line's `--endpoint`, `--cache-dir` and `--cache-size`.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The `[source]` fields of a location in a store.
pub const STORE_FIELDS: &[&str] = &["endpoint", "cache_dir", "cache_size"];

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
}

setters!(StoreOptions {
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
