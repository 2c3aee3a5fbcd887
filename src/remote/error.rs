//! What can go wrong reading a dataset from object storage, naming the object and the
//! reason. Every variant becomes a dataset error (exit code 2) naming the object.

use super::url::Store;
use std::path::PathBuf;

/// Where a store's credentials come from, for an access-denied message.
fn credentials_hint(store: Store) -> &'static str {
    match store {
        Store::S3 | Store::Http => {
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or the profile) and the bucket policy"
        }
        Store::Gcs => {
            "GOOGLE_APPLICATION_CREDENTIALS (or GOOGLE_SERVICE_ACCOUNT) and the bucket's IAM \
             permissions"
        }
        Store::Azure => {
            "AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY (or a SAS token, a \
             service principal) and the container's access"
        }
    }
}

/// Why a remote dataset cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// A root that is not a usable URL.
    #[error("{url}: {reason}")]
    Url {
        /// The root as given.
        url: String,
        /// Why.
        reason: String,
    },
    /// The store client could not be set up (endpoint, credentials in the environment).
    #[error("{url}: cannot set up the object-store client: {reason}")]
    Setup {
        /// The dataset root.
        url: String,
        /// Why (never holds a secret).
        reason: String,
    },
    /// The object does not exist (404).
    #[error("{object}: no such object (404){hint}")]
    NotFound {
        /// `s3://bucket/key`.
        object: String,
        /// More help, for the manifest.
        hint: String,
    },
    /// The credentials were refused or do not allow reading the object (401/403).
    #[error(
        "{object}: access denied by {} ({reason}); check {}",
        store.name(),
        credentials_hint(*store)
    )]
    Denied {
        /// `s3://bucket/key`.
        object: String,
        /// The store that refused.
        store: Store,
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
    /// The object is not what the manifest lists (size or checksum): the dataset changed
    /// on the store, or is damaged. Never read as pixels.
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

impl RemoteError {
    /// The object or folder the error is about.
    pub fn subject(&self) -> PathBuf {
        match self {
            RemoteError::Url { url, .. } | RemoteError::Setup { url, .. } => url.into(),
            RemoteError::NotFound { object, .. }
            | RemoteError::Denied { object, .. }
            | RemoteError::Request { object, .. }
            | RemoteError::GaveUp { object, .. }
            | RemoteError::Changed { object, .. } => object.into(),
            RemoteError::Cache { path, .. } | RemoteError::CacheFull { path, .. } => path.clone(),
        }
    }
}

impl From<RemoteError> for crate::Error {
    fn from(e: RemoteError) -> crate::Error {
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
