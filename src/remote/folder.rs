//! A prefix in object storage as a [`Folder`]: `merge-index` on `s3://bucket/prefix`
//! reads the slices' manifests, indexes and names from there and writes the merged ones
//! back (the manifest last, as the caller does it).

use super::{RemoteOptions, RemoteUrl, StoreClient};
use crate::error::Result;
use crate::shards::folder::Folder;
use std::path::{Path, PathBuf};

/// Most objects listed under one prefix (a dataset's files: shards, slices' files).
const MAX_LISTED: usize = 1_000_000;

/// `s3://bucket/prefix` as a folder of files.
#[derive(Debug)]
pub struct RemoteFolder {
    client: StoreClient,
}

impl RemoteFolder {
    /// The prefix `root` (`s3://bucket/prefix`), reached as `options` say.
    pub fn open(root: &Path, options: &RemoteOptions) -> Result<RemoteFolder> {
        let url = RemoteUrl::parse(&root.to_string_lossy())?;
        let client = StoreClient::new(&url, options.endpoint.as_deref())?;
        Ok(RemoteFolder { client })
    }
}

impl Folder for RemoteFolder {
    fn names_starting(&self, start: &str) -> Result<Vec<String>> {
        let mut found: Vec<String> = self
            .client
            .list(MAX_LISTED)?
            .into_iter()
            .map(|(key, _)| key)
            .filter(|k| !k.contains('/') && k.starts_with(start))
            .collect();
        found.sort();
        Ok(found)
    }

    fn read(&self, name: &str, limit: u64) -> Result<Vec<u8>> {
        Ok(self.client.get(name, limit)?.0)
    }

    fn write(&self, name: &str, bytes: Vec<u8>) -> Result<()> {
        Ok(self.client.put(name, bytes)?)
    }

    fn exists(&self, name: &str) -> Result<bool> {
        Ok(self.client.exists(name)?)
    }

    fn path(&self, name: &str) -> PathBuf {
        PathBuf::from(self.client.url().object(name))
    }

    fn root(&self) -> PathBuf {
        PathBuf::from(self.client.url().to_string())
    }
}
