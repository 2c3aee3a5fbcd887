//! A dataset root, parsed once where a source is opened: a local folder, or a prefix in
//! object storage with the one client that every later request of this dataset goes
//! through. What a store prefix holds (a shards dataset or not) is learned in one request:
//! the GET of its manifest, whose bytes the shards reader then takes.

use crate::error::Result;
use crate::plan::Sampling;
use crate::shards::format::{MANIFEST, MAX_MANIFEST_BYTES};
use crate::store::{StoreClient, StoreError, StoreOptions, StoreUrl};
use std::path::{Path, PathBuf};

/// Where a dataset is (see the module).
#[derive(Debug)]
pub enum DatasetRoot {
    /// A local folder.
    Local(PathBuf),
    /// A prefix in object storage.
    Store(Box<StoreRoot>),
}

/// A prefix in object storage, its client, and how it is cached.
#[derive(Debug)]
pub struct StoreRoot {
    /// The root as given (sample names and messages are relative to it).
    pub root: PathBuf,
    /// The parsed location.
    pub url: StoreUrl,
    /// The dataset's one client.
    pub client: StoreClient,
    /// Where the store is reached and how the cache is kept.
    pub options: StoreOptions,
    /// The sampling the dataset is read with (what its files are fetched ahead for).
    pub sampling: Sampling,
}

impl DatasetRoot {
    /// Parse `root`: a location in a store (its client set up as `options` say), else a
    /// local folder.
    pub fn parse(root: &Path, options: &StoreOptions) -> Result<DatasetRoot> {
        let Some(text) = root.to_str().filter(|t| crate::store::is_store_url(t)) else {
            return Ok(DatasetRoot::Local(root.to_path_buf()));
        };
        let url = StoreUrl::parse(text)?;
        let client = StoreClient::new(&url, options.endpoint.as_deref())?;
        Ok(DatasetRoot::Store(Box::new(StoreRoot {
            root: root.to_path_buf(),
            url,
            client,
            options: options.clone(),
            sampling: Sampling::default(),
        })))
    }
}

impl StoreRoot {
    /// The bytes of the prefix's shards manifest, `None` when it has none: the one request
    /// that says what the prefix holds.
    pub fn manifest(&self) -> Result<Option<Vec<u8>>> {
        match self.client.get(MANIFEST, MAX_MANIFEST_BYTES) {
            Ok((bytes, _)) => Ok(Some(bytes)),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The manifest's object, for messages.
    pub fn manifest_object(&self) -> String {
        self.url.object(MANIFEST)
    }
}
