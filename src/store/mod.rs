//! Object storage, knowing bytes and names only: a location (`s3://bucket/prefix`,
//! `gs://...`, `az://...`, `abfs[s]://container@account.dfs.core.windows.net/...`,
//! `http(s)://host/path`) parsed into a [`StoreUrl`], a [`StoreClient`] that reads, lists
//! and writes objects under it, bounded [`retry`]ing, a size-limited local [`cache`] of
//! files keyed by name, size and checksum, [`stats`] of the traffic and typed
//! [`error`]s naming the object. It never names a dataset format: the shards format's
//! remote reading and writing live in [`crate::shards`], the image tree's listing in
//! [`crate::source`].
//!
//! One concept per file: [`url`] parses locations, [`kind`] is what a store is (the
//! [`StoreKind`] trait and the client setup every store shares), one file per store
//! ([`s3`], [`gcs`], [`azure`], [`http`]) registered by one line of [`STORES`], [`client`]
//! talks to the store (its own small Tokio runtime, rebuilt in a forked process; the engine
//! stays thread-based), [`write`](mod@write) stores objects (multipart uploads streamed
//! from files), [`options`] is how a location is reached and cached (the `[source]`
//! fields `endpoint`, `cache_dir`, `cache_size`, `fetch`); [`ahead`] fetches whole files
//! into the cache ahead of the epoch, [`ranges`] samples' byte ranges into memory (range
//! mode), [`remote_files`] is the one a reader was given.

pub mod ahead;
pub mod azure;
pub mod cache;
pub mod client;
pub mod error;
mod forked;
pub mod gcs;
pub mod http;
pub mod keeper;
mod kept;
pub mod kind;
mod next_use;
pub mod options;
pub mod orders;
pub mod ranges;
pub mod remote_files;
pub mod retry;
pub mod s3;
pub mod stats;
pub mod url;
pub mod write;

pub use ahead::{AheadFile, AheadFiles, FetchAhead};
pub use cache::{Cache, CacheKey};
pub use client::{ObjectInfo, Received, StoreClient};
pub use error::{SetupError, StoreError};
pub use keeper::Keeper;
pub use kind::StoreKind;
pub use options::{Fetch, StoreOptions, STORE_FIELDS};
pub use orders::Orders;
pub use ranges::RangeAhead;
pub use remote_files::RemoteFiles;
pub use retry::RetryPolicy;
pub use stats::{snapshot, Traffic};
pub use url::{is_store_url, StoreUrl};

/// The stores, one line each: a location's scheme picks one (see [`StoreKind::schemes`]).
pub static STORES: &[&dyn StoreKind] = &[&s3::S3, &gcs::Gcs, &azure::Azure, &http::Http];
