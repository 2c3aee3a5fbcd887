//! What can go wrong with object storage, naming the object and the reason. Every variant
//! becomes a dataset error (exit code 2) naming the object.

use super::StoreKind;
use std::path::PathBuf;

/// Why a store's client cannot be set up (never holds a secret).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// Plain `http://` to an endpoint that is not loopback, without the store's variable.
    #[error(
        "endpoint {endpoint}: plain http:// is accepted for a loopback endpoint only (set \
         {var}=true to allow it elsewhere)"
    )]
    PlainHttp {
        /// The endpoint.
        endpoint: String,
        /// The variable that allows it.
        var: &'static str,
    },
    /// An endpoint that is not an `http(s)://` URL.
    #[error("endpoint {0:?} is not an http:// or https:// URL")]
    NotHttp(String),
    /// A plain `http://` server that is not loopback, without `AWS_ALLOW_HTTP`.
    #[error(
        "plain http:// is accepted for a loopback server only (set AWS_ALLOW_HTTP=true to \
         allow it elsewhere)"
    )]
    PlainHttpServer,
    /// No credentials, and the metadata server is not to be asked (which ones were looked
    /// for).
    #[error("{0}")]
    NoCredentials(&'static str),
    /// The store's builder refused the configuration.
    #[error("{0}")]
    Builder(#[source] object_store::Error),
    /// The client's runtime did not start.
    #[error("cannot start the I/O runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Why an object cannot be read or written, naming it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A root that is not a usable URL.
    #[error("{url}: {reason}")]
    Url {
        /// The root as given.
        url: String,
        /// Why.
        reason: String,
    },
    /// The store client could not be set up (endpoint, credentials in the environment).
    #[error("{url}: cannot set up the object-store client: {source}")]
    Setup {
        /// The location.
        url: String,
        /// Why.
        #[source]
        source: SetupError,
    },
    /// The object does not exist (404).
    #[error("{object}: no such object (404){hint}")]
    NotFound {
        /// `s3://bucket/key`.
        object: String,
        /// More help, from the reader that asked.
        hint: String,
    },
    /// No credentials in the environment, and no instance-metadata server to give them.
    #[error(
        "{object}: no credentials in the environment, and no instance-metadata server \
         answered (not a cloud node): check {}; with IMGFEED_NO_METADATA=true this is said \
         before any request",
        store.credentials_hint()
    )]
    NoCredentials {
        /// `s3://bucket/key`.
        object: String,
        /// The store whose client looked.
        store: &'static dyn StoreKind,
    },
    /// The bucket (container) does not exist: every object under it is missing.
    #[error("{bucket}: no such bucket in {} (check the name, the endpoint and the region)", store.name())]
    NoBucket {
        /// `s3://bucket`.
        bucket: String,
        /// The store that said so.
        store: &'static dyn StoreKind,
    },
    /// The credentials were refused or do not allow reading the object (401/403).
    #[error(
        "{object}: access denied by {} ({reason}); check {}",
        store.name(),
        store.credentials_hint()
    )]
    Denied {
        /// `s3://bucket/key`.
        object: String,
        /// The store that refused.
        store: &'static dyn StoreKind,
        /// The store's answer, without secrets.
        reason: String,
    },
    /// A request that failed in a way that retrying cannot fix (a 4xx other than the above).
    #[error("{object}: {reason}")]
    Request {
        /// `s3://bucket/key`.
        object: String,
        /// The store's answer.
        reason: String,
    },
    /// Still failing after the retries (timeouts, resets, 5xx, throttling).
    #[error("{object}: failed after {attempts} attempts over {secs:.1}s: {last}")]
    GaveUp {
        /// `s3://bucket/key`.
        object: String,
        /// Attempts made.
        attempts: u32,
        /// Seconds spent.
        secs: f64,
        /// The last failure.
        last: String,
    },
    /// The object is not what its reader expected (size or checksum): it changed on the
    /// store, or is damaged.
    #[error("{object}: {reason}")]
    Changed {
        /// `s3://bucket/key`.
        object: String,
        /// What differs.
        reason: String,
    },
    /// The cache limit cannot hold a file beside the files in use.
    #[error("cache {path}: {reason}")]
    CacheFull {
        /// The dataset's cache folder.
        path: PathBuf,
        /// What did not fit.
        reason: String,
    },
    /// The local cache folder cannot be used.
    #[error("cache {path}: {reason}")]
    Cache {
        /// The cache folder or file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl StoreError {
    /// The object or folder the error is about.
    pub fn subject(&self) -> PathBuf {
        match self {
            StoreError::Url { url, .. } | StoreError::Setup { url, .. } => url.into(),
            StoreError::NoBucket { bucket, .. } => bucket.into(),
            StoreError::NotFound { object, .. }
            | StoreError::Denied { object, .. }
            | StoreError::NoCredentials { object, .. }
            | StoreError::Request { object, .. }
            | StoreError::GaveUp { object, .. }
            | StoreError::Changed { object, .. } => object.into(),
            StoreError::Cache { path, .. } | StoreError::CacheFull { path, .. } => path.clone(),
        }
    }
}

impl From<StoreError> for crate::Error {
    fn from(e: StoreError) -> crate::Error {
        let path = e.subject();
        let full = e.to_string();
        let prefix = format!("{}: ", path.display());
        let prefix2 = format!("cache {}: ", path.display());
        let reason = full
            .strip_prefix(&prefix)
            .or_else(|| full.strip_prefix(&prefix2))
            .unwrap_or(&full)
            .to_string();
        crate::Error::Dataset { path, reason }
    }
}
