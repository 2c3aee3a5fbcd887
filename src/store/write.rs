//! Writing to object storage: whole small objects (`put`), files streamed as multipart
//! uploads one part at a time (bounded memory: one part buffer, whatever the file's size;
//! each part retried on its own, the upload aborted on failure so no parts linger),
//! existence checks, listings bounded in count, and deletes. Every request goes through
//! the client's [`RetryPolicy`](super::RetryPolicy) and is counted ([`super::stats`]).

use super::client::Io;
use super::retry::Failure;
use super::{stats, StoreClient, StoreError};
use futures_util::StreamExt;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::io::Read;
use std::path::Path;

/// Default size of one part of a multipart upload (S3 takes parts of 5 MiB and more,
/// but the last, and at most 10,000 parts: larger files get larger parts).
pub const PART_SIZE: u64 = 16 << 20;

/// Most parts of one upload (S3's limit).
const MAX_PARTS: u64 = 10_000;

/// The part size: [`PART_SIZE`], or `IMGFEED_S3_PART_SIZE` bytes (at least 1 KiB: for
/// tests against a server whose minimum part size is lowered), raised so that `size`
/// fits in [`MAX_PARTS`] parts.
fn part_size(size: u64) -> u64 {
    let base = std::env::var("IMGFEED_S3_PART_SIZE")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(PART_SIZE, |v| v.max(1024));
    base.max(size.div_ceil(MAX_PARTS))
}

fn local(path: &Path, what: &str, e: std::io::Error) -> StoreError {
    StoreError::Cache {
        path: path.to_path_buf(),
        reason: format!("{what}: {e}"),
    }
}

impl StoreClient {
    fn location(&self, file: &str) -> ObjectPath {
        ObjectPath::from(self.url().key(file))
    }

    /// Whether `file` exists under the prefix.
    pub fn exists(&self, file: &str) -> Result<bool, StoreError> {
        let object = self.url().object(file);
        let location = self.location(file);
        let io = self.io()?;
        let found = self.retry.run(&object, |_| {
            stats::request();
            io.runtime
                .block_on(io.store.head(&location))
                .map(|_| true)
                .map_err(|e| self.classify(file, e))
        });
        match found {
            Err(StoreError::NotFound { .. }) => Ok(false),
            other => other,
        }
    }

    /// Store `bytes` as `file` in one request (retried).
    pub fn put(&self, file: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        let object = self.url().object(file);
        let location = self.location(file);
        let len = bytes.len() as u64;
        let payload = PutPayload::from(bytes);
        let io = self.io()?;
        self.retry.run(&object, |_| {
            stats::request();
            io.runtime
                .block_on(io.store.put(&location, payload.clone()))
                .map_err(|e| self.classify(file, e))
        })?;
        stats::sent(len);
        stats::upload();
        Ok(())
    }

    /// Upload the local file `path` as `file`: one request when it fits in a part, else a
    /// multipart upload streamed from the file one part at a time. Returns its size.
    pub fn upload(&self, path: &Path, file: &str) -> Result<u64, StoreError> {
        let size = std::fs::metadata(path)
            .map_err(|e| local(path, "cannot read the file to upload", e))?
            .len();
        let part = part_size(size);
        if size <= part {
            let bytes = std::fs::read(path)
                .map_err(|e| local(path, "cannot read the file to upload", e))?;
            self.put(file, bytes)?;
            return Ok(size);
        }
        let object = self.url().object(file);
        let location = self.location(file);
        let io = self.io()?;
        let mp = io.multipart.as_deref().ok_or_else(|| StoreError::Request {
            object: object.clone(),
            reason: "a plain HTTP server is read-only".into(),
        })?;
        let id = self.retry.run(&object, |_| {
            stats::request();
            io.runtime
                .block_on(mp.create_multipart(&location))
                .map_err(|e| self.classify(file, e))
        })?;
        let parts = self.upload_parts(io, mp, path, file, &location, &id, size, part);
        let done = parts.and_then(|parts| {
            let mut attempt_done = false;
            self.retry.run(&object, |_| {
                stats::request();
                let first = !attempt_done;
                attempt_done = true;
                match io
                    .runtime
                    .block_on(mp.complete_multipart(&location, &id, parts.clone()))
                {
                    Ok(_) => Ok(()),
                    // A retried completion whose first attempt went through (its answer
                    // lost): the upload is gone, the object is there.
                    Err(object_store::Error::NotFound { .. }) if !first => {
                        match io.runtime.block_on(io.store.head(&location)) {
                            Ok(meta) if meta.size == size => Ok(()),
                            _ => Err(Failure::Fatal(StoreError::Request {
                                object: object.clone(),
                                reason: "the multipart upload vanished before it completed".into(),
                            })),
                        }
                    }
                    Err(e) => Err(self.classify(file, e)),
                }
            })
        });
        match done {
            Ok(()) => {
                stats::upload();
                Ok(size)
            }
            Err(e) => {
                // Best effort: the parts stored so far are not left behind (a store also
                // drops them after its own expiry rule, where one is set).
                stats::request();
                let _ = io.runtime.block_on(mp.abort_multipart(&location, &id));
                Err(e)
            }
        }
    }

    /// The parts of a multipart upload, read from `path` into one buffer at a time.
    #[allow(clippy::too_many_arguments)]
    fn upload_parts(
        &self,
        io: &Io,
        mp: &dyn MultipartStore,
        path: &Path,
        file: &str,
        location: &ObjectPath,
        id: &object_store::MultipartId,
        size: u64,
        part: u64,
    ) -> Result<Vec<PartId>, StoreError> {
        let object = self.url().object(file);
        let mut f = std::fs::File::open(path)
            .map_err(|e| local(path, "cannot open the file to upload", e))?;
        let mut parts = Vec::with_capacity(size.div_ceil(part) as usize);
        let mut left = size;
        let mut idx = 0usize;
        while left > 0 {
            let n = left.min(part) as usize;
            // A fresh buffer per part: the payload owns it until the request is done.
            let mut buf = vec![0u8; n];
            f.read_exact(&mut buf)
                .map_err(|e| local(path, "the file to upload changed while being read", e))?;
            let payload = PutPayload::from(buf);
            let got = self.retry.run(&object, |_| {
                stats::request();
                io.runtime
                    .block_on(mp.put_part(location, id, idx, payload.clone()))
                    .map_err(|e| self.classify(file, e))
            })?;
            stats::sent(n as u64);
            parts.push(got);
            left -= n as u64;
            idx += 1;
        }
        Ok(parts)
    }

    /// Remove `file` (one attempt: for cleaning up after a failure).
    pub fn delete_once(&self, file: &str) -> Result<(), StoreError> {
        let location = self.location(file);
        let io = self.io()?;
        stats::request();
        io.runtime
            .block_on(io.store.delete(&location))
            .map_err(|e| match self.classify(file, e) {
                Failure::Fatal(e) => e,
                Failure::Transient(reason) => StoreError::Request {
                    object: self.url().object(file),
                    reason,
                },
            })
    }

    /// The keys under the prefix (relative to it, `/`-separated), at most `limit` of them:
    /// more is an error naming the prefix. The store pages the listing (one request per
    /// page, counted as one); a failure restarts it, within the retry policy's bounds.
    pub fn list(&self, limit: usize) -> Result<Vec<(String, u64)>, StoreError> {
        Ok(self
            .list_info(limit)?
            .into_iter()
            .map(|(k, info)| (k, info.size))
            .collect())
    }

    /// [`StoreClient::list`] with each object's size and ETag.
    pub fn list_info(&self, limit: usize) -> Result<Vec<(String, super::ObjectInfo)>, StoreError> {
        let object = format!("{}/", self.url());
        let prefix = self.url().prefix.clone();
        let location = (!prefix.is_empty()).then(|| ObjectPath::from(prefix.as_str()));
        let io = self.io()?;
        self.retry.run(&object, |_| {
            stats::request();
            io.runtime.block_on(async {
                let mut stream = io.store.list(location.as_ref());
                let mut out = Vec::new();
                while let Some(meta) = stream.next().await {
                    let meta = meta.map_err(|e| self.classify("", e))?;
                    let key = meta.location.as_ref();
                    let rel = if prefix.is_empty() {
                        key
                    } else {
                        key.strip_prefix(prefix.as_str())
                            .and_then(|k| k.strip_prefix('/'))
                            .unwrap_or(key)
                    };
                    if out.len() >= limit {
                        return Err(Failure::Fatal(StoreError::Request {
                            object: object.clone(),
                            reason: format!("more than {limit} objects under the prefix"),
                        }));
                    }
                    let info = super::ObjectInfo {
                        size: meta.size,
                        e_tag: meta.e_tag.clone(),
                    };
                    out.push((rel.to_string(), info));
                }
                Ok(out)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_grow_so_that_a_file_fits_in_ten_thousand() {
        assert_eq!(part_size(1), PART_SIZE);
        assert_eq!(part_size(PART_SIZE * MAX_PARTS), PART_SIZE);
        let huge = PART_SIZE * MAX_PARTS * 3 + 7;
        assert!(part_size(huge) * MAX_PARTS >= huge);
    }
}
