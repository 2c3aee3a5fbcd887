//! The folder a dataset's files are in, for the steps that read and write whole small
//! files by name (`merge-index`): a local folder ([`LocalFolder`]) or a prefix in object
//! storage ([`StoreFolder`]). Writes are whole or not at all (a rename
//! locally; one request to a store).

use crate::error::{Error, Result};
use crate::store::{StoreClient, StoreOptions, StoreUrl};
use std::path::{Path, PathBuf};

/// Files by name in one folder (see the module).
pub trait Folder {
    /// The names of the files directly in the folder that start with `start`, sorted.
    fn names_starting(&self, start: &str) -> Result<Vec<String>>;
    /// The bytes of `name`; a file of more than `limit` bytes is an error naming it.
    fn read(&self, name: &str, limit: u64) -> Result<Vec<u8>>;
    /// Store `bytes` as `name`, whole or not at all.
    fn write(&self, name: &str, bytes: Vec<u8>) -> Result<()>;
    /// Whether `name` exists.
    fn exists(&self, name: &str) -> Result<bool>;
    /// `name` in messages (a path, or `s3://bucket/key`).
    fn path(&self, name: &str) -> PathBuf;
    /// The folder in messages.
    fn root(&self) -> PathBuf;
}

/// A local folder.
#[derive(Clone, Debug)]
pub struct LocalFolder(pub PathBuf);

fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::Dataset {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

impl Folder for LocalFolder {
    fn names_starting(&self, start: &str) -> Result<Vec<String>> {
        let dir = &self.0;
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| bad(dir, e.to_string()))? {
            let entry = entry.map_err(|e| bad(dir, e.to_string()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(start) {
                found.push(name);
            }
        }
        found.sort();
        Ok(found)
    }

    fn read(&self, name: &str, limit: u64) -> Result<Vec<u8>> {
        let path = self.0.join(name);
        let len = std::fs::metadata(&path)
            .map_err(|e| bad(&path, e.to_string()))?
            .len();
        if len > limit {
            return Err(bad(
                &path,
                format!("{len} bytes, more than the {limit} expected"),
            ));
        }
        std::fs::read(&path).map_err(|e| bad(&path, e.to_string()))
    }

    fn write(&self, name: &str, bytes: Vec<u8>) -> Result<()> {
        super::format::write_atomic(&self.0.join(name), &bytes)
    }

    fn exists(&self, name: &str) -> Result<bool> {
        Ok(self.0.join(name).exists())
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn root(&self) -> PathBuf {
        self.0.clone()
    }
}

/// Most objects listed under one prefix (a dataset's files: shards, slices' files).
const MAX_LISTED: usize = 1_000_000;

/// `s3://bucket/prefix` as a folder of files.
#[derive(Debug)]
pub struct StoreFolder {
    client: StoreClient,
}

impl StoreFolder {
    /// The prefix `root` (`s3://bucket/prefix`), reached as `options` say.
    pub fn open(root: &Path, options: &StoreOptions) -> Result<StoreFolder> {
        let url = StoreUrl::parse(&root.to_string_lossy())?;
        let client = StoreClient::new(&url, options.endpoint.as_deref())?;
        Ok(StoreFolder { client })
    }
}

impl Folder for StoreFolder {
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
