//! Datasets in object storage: a shards dataset at `s3://bucket/prefix` (any S3-compatible
//! store: `AWS_ENDPOINT_URL` or the `endpoint` field), `gs://bucket/prefix` (Google Cloud
//! Storage) or `az://container/prefix` (Azure Blob Storage; also
//! `abfs[s]://container@account.dfs.core.windows.net/prefix`) is read through a local cache folder
//! with a byte limit, fetching whole shard files ahead of the epoch's order and
//! memory-mapping them as a local dataset's ([`crate::shards::Shards`]: the same checks,
//! the same records).
//!
//! One concept per file: [`url`] parses roots, [`client`] talks to the store (its own small
//! Tokio runtime, rebuilt in a forked process; the engine stays thread-based), [`retry`] bounds and counts retries,
//! [`cache`] keeps the local copies within the limit, [`files`] fetches and prefetches
//! shards, [`dataset`] opens a dataset, [`options`] is the `[source]` fields, [`stats`]
//! counts the traffic, [`error`] says what went wrong, naming the object; [`tree`] reads
//! an image tree (`class/image.jpg` objects, no manifest). Writing:
//! [`write`](mod@write) stores objects (multipart uploads streamed from files), [`upload`] is a
//! conversion's output in object storage (the manifest last).

pub mod cache;
pub mod client;
pub mod dataset;
pub mod error;
pub mod files;
pub mod folder;
pub mod options;
pub mod retry;
pub mod stats;
pub mod tree;
pub mod upload;
pub mod url;
pub mod write;

pub use cache::Cache;
pub use client::StoreClient;
pub use dataset::open_remote;
pub use error::RemoteError;
pub use files::RemoteFiles;
pub use folder::RemoteFolder;
pub use options::{RemoteOptions, REMOTE_FIELDS};
pub use retry::RetryPolicy;
pub use stats::{snapshot, Traffic};
pub use tree::{open_tree, RemoteTree};
pub use upload::Uploader;
pub use url::{is_remote, RemoteUrl, Store};
