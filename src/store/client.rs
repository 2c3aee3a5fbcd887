//! The object-store client: an `object_store` store (Amazon S3, Google Cloud Storage,
//! Azure Blob Storage or a plain HTTP server) driven by a small Tokio runtime that this
//! client owns (two threads), so the engine stays thread-based and blocks on each call.
//! The stores' own retries are off: every request goes through [`RetryPolicy`], which
//! counts them.
//!
//! Configuration comes from the environment, as each store's SDKs read it
//! (`object_store`'s `from_env` of each builder): for S3 `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT_URL`, ...; for
//! GCS `GOOGLE_APPLICATION_CREDENTIALS`, `GOOGLE_SERVICE_ACCOUNT` (a service-account JSON
//! file, which may hold `"gcs_base_url"` and `"disable_oauth": true` for an emulator),
//! `GOOGLE_SERVICE_ACCOUNT_KEY`, `GOOGLE_BEARER_TOKEN`, `GOOGLE_SKIP_SIGNATURE`; for Azure
//! `AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_SAS_TOKEN`,
//! `AZURE_STORAGE_TOKEN`, the `AZURE_CLIENT_ID`/`AZURE_CLIENT_SECRET`/`AZURE_TENANT_ID`
//! service principal, `AZURE_STORAGE_USE_EMULATOR` (Azurite, at `AZURITE_BLOB_STORAGE_URL`).
//! Without credentials each store falls back to its instance-metadata service, unless
//! `IMGFEED_NO_METADATA=true` (or the SDKs' own `AWS_EC2_METADATA_DISABLED=true` for S3,
//! `NO_GCE_CHECK=true` for GCS): then the client is not set up, saying which credentials
//! it looked for, and nothing is asked of a metadata server.
//!
//! The `endpoint` (the pipeline's field, `--endpoint`) is where the store is reached: an
//! S3-compatible server's URL (overriding `AWS_ENDPOINT_URL`), the GCS base URL (an
//! emulator's `http://127.0.0.1:4443`, overriding `GOOGLE_BASE_URL` and the
//! service-account file's `gcs_base_url`), or the Azure blob service URL (Azurite's
//! `http://127.0.0.1:10000/devstoreaccount1`, path-style, overriding
//! `AZURE_STORAGE_ENDPOINT` and the emulator setting). Plain `http://` is accepted for a
//! loopback endpoint (elsewhere only with `AWS_ALLOW_HTTP=true`, `GOOGLE_ALLOW_HTTP=true`
//! or `AZURE_ALLOW_HTTP=true`). Secrets are never printed: errors carry the store's
//! answer, which holds none.
//!
//! Fork safety: the runtime's threads and the connection pool belong to the process that
//! built them. The client records that process's id; a call from another process (a
//! DataLoader worker forked after the dataset was opened) builds a fresh runtime and store
//! for itself, and the parent's are leaked there, never dropped (dropping a runtime whose
//! threads do not exist in this process could block). The check is one `getpid` and one
//! atomic load per request.

use super::error::SetupError;
use super::retry::{Failure, RetryPolicy};
use super::{stats, StoreError, StoreUrl};
use futures_util::StreamExt;
use object_store::multipart::MultipartStore;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use std::io::Write;
use std::ops::Range;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;

/// What a download found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Bytes of the object.
    pub size: u64,
    /// Its ETag, when the store gives one.
    pub e_tag: Option<String>,
}

/// What a download wrote: its length and CRC-32, computed from the bytes as they arrived
/// (the cache checks them against the file's listing without reading the file again).
///
/// Made only by this crate's downloads (`#[non_exhaustive]`): a [`super::cache::Pending`]
/// commits on its word, so nothing outside may vouch for bytes it did not count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Received {
    /// Bytes written.
    pub len: u64,
    /// Their CRC-32.
    pub crc32: u32,
}

impl Received {
    /// `len` bytes that this crate wrote into a cache file itself, counted but not hashed:
    /// for a file whose key is a version tag rather than a checksum (`checked: false`),
    /// whose pieces were each checked as they arrived (an image tree's pack).
    pub(crate) fn counted(len: u64) -> Received {
        Received { len, crc32: 0 }
    }

    /// The length and CRC-32 of `bytes` (what this crate wrote into a cache file itself).
    pub(crate) fn of(bytes: &[u8]) -> Received {
        Received {
            len: bytes.len() as u64,
            crc32: crc32fast::hash(bytes),
        }
    }
}

/// The runtime and the store of one process.
pub(super) struct Io {
    /// The process that built them.
    pid: u32,
    pub(super) runtime: tokio::runtime::Runtime,
    pub(super) store: Arc<dyn ObjectStore>,
    /// The store's multipart uploads (`None` for a plain HTTP server: read-only).
    pub(super) multipart: Option<Arc<dyn MultipartStore>>,
}

// `StoreClient` hands `&Io` to any thread (through its `AtomicPtr`): it must be shareable.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<Io>();
};

/// A bucket (container) and prefix in object storage, or a plain HTTP server's folder
/// (read-only), with the runtime that drives the requests (see the module).
pub struct StoreClient {
    url: StoreUrl,
    endpoint: Option<String>,
    /// This process's [`Io`]: built in [`StoreClient::new`], replaced (the old one leaked)
    /// when a call comes from another process. Never null; freed only in `drop`.
    io: AtomicPtr<Io>,
    pub(super) retry: RetryPolicy,
}

impl std::fmt::Debug for StoreClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreClient")
            .field("url", &self.url)
            .finish()
    }
}

impl Io {
    /// The store of `url` and a runtime, for this process.
    fn build(url: &StoreUrl, endpoint: Option<&str>) -> Result<Io, StoreError> {
        let (store, multipart) =
            url.store()
                .build(url, endpoint)
                .map_err(|source| StoreError::Setup {
                    url: url.to_string(),
                    source,
                })?;
        Ok(Io {
            pid: std::process::id(),
            runtime: runtime(url)?,
            store,
            multipart,
        })
    }
}

impl StoreClient {
    /// A client for `url`; `endpoint` says where its store is reached (see the module).
    pub fn new(url: &StoreUrl, endpoint: Option<&str>) -> Result<StoreClient, StoreError> {
        let io = Io::build(url, endpoint)?;
        Ok(StoreClient {
            url: url.clone(),
            endpoint: endpoint.map(str::to_string),
            io: AtomicPtr::new(Box::into_raw(Box::new(io))),
            retry: RetryPolicy::default(),
        })
    }

    /// Another client of the same location, endpoint and retry policy, with a runtime of
    /// its own (for a second reader of the dataset's objects).
    pub fn another(&self) -> Result<StoreClient, StoreError> {
        let mut c = StoreClient::new(&self.url, self.endpoint.as_deref())?;
        c.retry = self.retry;
        Ok(c)
    }

    /// This process's runtime and store: the ones built here, or fresh ones when this is
    /// a forked child of the process that built them (theirs are leaked, see the module).
    pub(super) fn io(&self) -> Result<&Io, StoreError> {
        let pid = std::process::id();
        loop {
            let current = self.io.load(Ordering::Acquire);
            // SAFETY: `io` is never null and what it points to is freed only in `drop`
            // (which has `&mut self`): a replaced one is leaked, so the reference lives as
            // long as `&self`.
            let io = unsafe { &*current };
            if io.pid == pid {
                return Ok(io);
            }
            let fresh = Box::into_raw(Box::new(Io::build(&self.url, self.endpoint.as_deref())?));
            match self
                .io
                .compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire)
            {
                // The parent's `Io` (at `current`) is leaked on purpose.
                Ok(_) => {
                    // SAFETY: just installed, never freed before `drop`.
                    return Ok(unsafe { &*fresh });
                }
                Err(_) => {
                    // Another thread of this process installed one first: drop ours (its
                    // runtime's threads are this process's) and use theirs.
                    // SAFETY: `fresh` came from `Box::into_raw` above and was not shared.
                    drop(unsafe { Box::from_raw(fresh) });
                }
            }
        }
    }

    /// With another retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> StoreClient {
        self.retry = retry;
        self
    }

    /// The location.
    pub fn url(&self) -> &StoreUrl {
        &self.url
    }

    pub(super) fn classify(&self, file: &str, e: object_store::Error) -> Failure {
        let object = self.url.object(file);
        if asked_no_metadata_server(&e.to_string()) {
            return Failure::Fatal(StoreError::NoCredentials {
                object,
                store: self.url.store(),
            });
        }
        if names_missing_bucket(&e.to_string()) {
            return Failure::Fatal(StoreError::NoBucket {
                bucket: format!("{}://{}", self.url.scheme, self.url.bucket),
                store: self.url.store(),
            });
        }
        match e {
            object_store::Error::NotFound { .. } => Failure::Fatal(StoreError::NotFound {
                object,
                hint: String::new(),
            }),
            object_store::Error::PermissionDenied { source, .. }
            | object_store::Error::Unauthenticated { source, .. } => {
                Failure::Fatal(StoreError::Denied {
                    object,
                    store: self.url.store(),
                    reason: short(&source.to_string()),
                })
            }
            object_store::Error::Precondition { .. } => Failure::Fatal(StoreError::Changed {
                object,
                reason: "the object changed on the store during the download (its ETag \
                         differs): the dataset was rewritten while being read"
                    .into(),
            }),
            e => {
                let text = e.to_string();
                match status_of(&text) {
                    Some(s) if (400..500).contains(&s) && s != 408 && s != 429 => {
                        Failure::Fatal(StoreError::Request {
                            object,
                            reason: short(&text),
                        })
                    }
                    _ => Failure::Transient(short(&text)),
                }
            }
        }
    }

    /// Download `file` whole into `out` (retrying; a retry after part of the body resumes
    /// where it stopped, asking for the same ETag). Checks the size against `expect`: the
    /// size, and who says so (`"the manifest"`), for the message.
    pub fn download(
        &self,
        file: &str,
        expect: Option<(u64, &str)>,
        out: &mut std::fs::File,
    ) -> Result<(ObjectInfo, Received), StoreError> {
        let object = self.url.object(file);
        let location = ObjectPath::from(self.url.key(file));
        let mut written: u64 = 0;
        // Hashed as written: a retry resumes at `written`, so every byte is hashed once.
        let mut hasher = crc32fast::Hasher::new();
        let mut info: Option<ObjectInfo> = None;
        let io = self.io()?;
        self.retry
            .run(&object, |_| {
                let opts = GetOptions {
                    range: (written > 0).then_some(GetRange::Offset(written)),
                    if_match: info.as_ref().and_then(|i| i.e_tag.clone()),
                    ..GetOptions::default()
                };
                stats::request();
                io.runtime.block_on(async {
                    let got = io
                        .store
                        .get_opts(&location, opts)
                        .await
                        .map_err(|e| self.classify(file, e))?;
                    let found = ObjectInfo {
                        size: got.meta.size,
                        e_tag: got.meta.e_tag.clone(),
                    };
                    if let Some((want, by)) = expect {
                        if found.size != want {
                            return Err(Failure::Fatal(StoreError::Changed {
                                object: object.clone(),
                                reason: format!(
                                    "{} bytes on the store, but {by} says {want}: the \
                                 object was replaced or truncated",
                                    found.size
                                ),
                            }));
                        }
                    }
                    if let Some(first) = &info {
                        if first.e_tag.is_some() && first.e_tag != found.e_tag {
                            return Err(Failure::Fatal(StoreError::Changed {
                                object: object.clone(),
                                reason: "the object changed on the store during the download"
                                    .into(),
                            }));
                        }
                    } else {
                        info = Some(found.clone());
                    }
                    let mut stream = got.into_stream();
                    while let Some(chunk) = stream.next().await {
                        let chunk = chunk.map_err(|e| self.classify(file, e))?;
                        stats::bytes(chunk.len() as u64);
                        out.write_all(&chunk).map_err(|e| {
                            Failure::Fatal(StoreError::Cache {
                                path: "download".into(),
                                reason: format!("writing {object}: {e}"),
                            })
                        })?;
                        hasher.update(&chunk);
                        written += chunk.len() as u64;
                    }
                    if written != found.size {
                        return Err(Failure::Transient(format!(
                            "body ended after {written} of {} bytes",
                            found.size
                        )));
                    }
                    Ok(found)
                })
            })
            .map(|found| {
                let got = Received {
                    len: written,
                    crc32: hasher.clone().finalize(),
                };
                (found, got)
            })
    }

    /// The whole of a small object, at most `limit` bytes.
    pub fn get(&self, file: &str, limit: u64) -> Result<(Vec<u8>, ObjectInfo), StoreError> {
        let object = self.url.object(file);
        let location = ObjectPath::from(self.url.key(file));
        let io = self.io()?;
        self.retry.run(&object, |_| {
            stats::request();
            io.runtime.block_on(async {
                let got = io
                    .store
                    .get_opts(&location, GetOptions::default())
                    .await
                    .map_err(|e| self.classify(file, e))?;
                let info = ObjectInfo {
                    size: got.meta.size,
                    e_tag: got.meta.e_tag.clone(),
                };
                if info.size > limit {
                    return Err(Failure::Fatal(StoreError::Request {
                        object: object.clone(),
                        reason: format!("{} bytes, more than the {limit} expected", info.size),
                    }));
                }
                let bytes = got.bytes().await.map_err(|e| self.classify(file, e))?;
                stats::bytes(bytes.len() as u64);
                if bytes.len() as u64 != info.size {
                    return Err(Failure::Transient(format!(
                        "body of {} bytes, expected {}",
                        bytes.len(),
                        info.size
                    )));
                }
                Ok((bytes.to_vec(), info))
            })
        })
    }

    /// Bytes `range` of `file` (one ranged GET, retried).
    pub fn get_range(&self, file: &str, range: Range<u64>) -> Result<Vec<u8>, StoreError> {
        let object = self.url.object(file);
        let location = ObjectPath::from(self.url.key(file));
        let want = range.end.saturating_sub(range.start);
        let io = self.io()?;
        self.retry.run(&object, |_| {
            stats::request();
            io.runtime.block_on(async {
                let bytes = io
                    .store
                    .get_range(&location, range.clone())
                    .await
                    .map_err(|e| self.classify(file, e))?;
                stats::bytes(bytes.len() as u64);
                if bytes.len() as u64 != want {
                    return Err(Failure::Transient(format!(
                        "{} bytes of the {want} asked for",
                        bytes.len()
                    )));
                }
                Ok(bytes.to_vec())
            })
        })
    }

    /// Download `file` (of `size` bytes, as `listed_by` says) into `out`, which has that
    /// size already (a reserved cache file): as parts of `part` bytes, up to `in_flight`
    /// of them at once (one ranged GET each, on threads of their own, each written at its
    /// offset as it arrives and retried on its own, resuming where it stopped), so one
    /// large file comes at the store's speed rather than one connection's. Every part asks
    /// for the ETag the first answer gave: an object replaced meanwhile fails as changed.
    /// A file of one part, or a plain HTTP server (which need not serve ranges), is
    /// downloaded as [`StoreClient::download`] does.
    pub fn download_parts(
        &self,
        file: &str,
        size: u64,
        listed_by: &str,
        out: &mut std::fs::File,
        part: u64,
        in_flight: usize,
    ) -> Result<(ObjectInfo, Received), StoreError> {
        let part = part.max(1);
        let parts = size.div_ceil(part);
        if parts <= 1 || in_flight <= 1 || self.url.scheme.starts_with("http") {
            return self.download(file, Some((size, listed_by)), out);
        }
        let io = self.io()?;
        let out: &std::fs::File = out;
        let next = std::sync::atomic::AtomicU64::new(0);
        let failed = std::sync::atomic::AtomicBool::new(false);
        let first: std::sync::Mutex<Option<ObjectInfo>> = std::sync::Mutex::new(None);
        let errors: std::sync::Mutex<Option<StoreError>> = std::sync::Mutex::new(None);
        // Each part's CRC-32, combined in order at the end (no second pass over the file).
        let hashes: Vec<std::sync::Mutex<Option<crc32fast::Hasher>>> =
            (0..parts).map(|_| std::sync::Mutex::new(None)).collect();
        let one = |k: u64| -> Result<(), StoreError> {
            let start = k * part;
            let end = (start + part).min(size);
            let object = self.url.object(file);
            let location = ObjectPath::from(self.url.key(file));
            let mut at = start;
            // A retry resumes at `at`: every byte of the part is hashed once.
            let mut hasher = crc32fast::Hasher::new();
            self.retry.run(&object, |_| {
                let e_tag = first
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                    .and_then(|i| i.e_tag.clone());
                let opts = GetOptions {
                    range: Some(GetRange::Bounded(at..end)),
                    if_match: e_tag.clone(),
                    ..GetOptions::default()
                };
                stats::request();
                io.runtime.block_on(async {
                    let got = io
                        .store
                        .get_opts(&location, opts)
                        .await
                        .map_err(|e| self.classify(file, e))?;
                    if got.meta.size != size {
                        return Err(Failure::Fatal(StoreError::Changed {
                            object: object.clone(),
                            reason: format!(
                                "{} bytes on the store, but {listed_by} says {size}: the \
                                 object was replaced or truncated",
                                got.meta.size
                            ),
                        }));
                    }
                    {
                        let mut seen = first.lock().unwrap_or_else(|p| p.into_inner());
                        match &*seen {
                            None => {
                                *seen = Some(ObjectInfo {
                                    size,
                                    e_tag: got.meta.e_tag.clone(),
                                })
                            }
                            Some(i) if i.e_tag.is_some() && i.e_tag != got.meta.e_tag => {
                                return Err(Failure::Fatal(StoreError::Changed {
                                    object: object.clone(),
                                    reason: "the object changed on the store during the \
                                             download"
                                        .into(),
                                }));
                            }
                            Some(_) => {}
                        }
                    }
                    let mut stream = got.into_stream();
                    while let Some(chunk) = stream.next().await {
                        let chunk = chunk.map_err(|e| self.classify(file, e))?;
                        stats::bytes(chunk.len() as u64);
                        let room = end.saturating_sub(at);
                        let take = (chunk.len() as u64).min(room) as usize;
                        std::os::unix::fs::FileExt::write_all_at(out, &chunk[..take], at).map_err(
                            |e| {
                                Failure::Fatal(StoreError::Cache {
                                    path: "download".into(),
                                    reason: format!("writing {object}: {e}"),
                                })
                            },
                        )?;
                        hasher.update(&chunk[..take]);
                        at += take as u64;
                    }
                    if at != end {
                        return Err(Failure::Transient(format!(
                            "part body ended at byte {at} of {start}..{end}"
                        )));
                    }
                    Ok(())
                })
            })?;
            if let Some(slot) = hashes.get(k as usize) {
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(hasher);
            }
            Ok(())
        };
        std::thread::scope(|scope| {
            for _ in 0..(in_flight as u64).min(parts) {
                scope.spawn(|| loop {
                    if failed.load(Ordering::Relaxed) {
                        return;
                    }
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= parts {
                        return;
                    }
                    if let Err(e) = one(k) {
                        failed.store(true, Ordering::Relaxed);
                        errors
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get_or_insert(e);
                        return;
                    }
                });
            }
        });
        if let Some(e) = errors.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        let mut whole = crc32fast::Hasher::new();
        for (k, slot) in hashes.into_iter().enumerate() {
            match slot.into_inner().unwrap_or_else(|p| p.into_inner()) {
                Some(h) => whole.combine(&h),
                None => {
                    return Err(StoreError::Cache {
                        path: "download".into(),
                        reason: format!("part {k} of {} never arrived", self.url.object(file)),
                    })
                }
            }
        }
        let info = first
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or(ObjectInfo { size, e_tag: None });
        Ok((
            info,
            Received {
                len: size,
                crc32: whole.finalize(),
            },
        ))
    }

    /// Bytes `ranges` of files (`(file, range)` each), at most `parallel` requests in
    /// flight at once on the client's runtime, each one retried as
    /// [`get_range`](Self::get_range) retries it and counted as a range request; `done(i, bytes)` is
    /// called on this thread for request `i` as it ends (in any order).
    pub fn get_ranges(
        &self,
        ranges: &[(&str, Range<u64>)],
        parallel: usize,
        mut done: impl FnMut(usize, Result<bytes::Bytes, StoreError>),
    ) {
        let asked: Vec<(&str, Ask)> = ranges
            .iter()
            .map(|(f, r)| (*f, Ask::Range(r.clone())))
            .collect();
        self.get_many(&asked, parallel, &mut |i, got| {
            done(i, got);
            true
        });
    }

    /// Whole objects `(file, size as listed, ETag as listed)`, at most `parallel` GETs in
    /// flight at once on the client's runtime, each retried like [`get`](Self::get) and
    /// checked against its listing: another size, or another ETag when both are known (an
    /// object rewritten since, even to the same size, compared without quotes), is
    /// [`StoreError::Changed`], naming the object;
    /// `done(i, bytes)` is called on this thread for object `i` as it arrives (in any
    /// order), and returns whether to go on (false: the requests not yet answered are
    /// dropped).
    pub fn get_objects(
        &self,
        objects: &[(&str, u64, Option<&str>)],
        parallel: usize,
        mut done: impl FnMut(usize, Result<bytes::Bytes, StoreError>) -> bool,
    ) {
        let asked: Vec<(&str, Ask)> = objects
            .iter()
            .map(|&(f, s, e)| (f, Ask::Whole(s, e)))
            .collect();
        self.get_many(&asked, parallel, &mut done);
    }

    /// The requests `asked`, `parallel` at a time on the client's runtime, `done(i, got)`
    /// on this thread as each ends (every one failing with the runtime's error when it
    /// cannot be had), until `done` says to stop.
    fn get_many(
        &self,
        asked: &[(&str, Ask)],
        parallel: usize,
        done: &mut dyn FnMut(usize, Result<bytes::Bytes, StoreError>) -> bool,
    ) {
        let io = match self.io() {
            Ok(io) => io,
            Err(e) => {
                let text = e.to_string();
                for (i, (file, _)) in asked.iter().enumerate() {
                    let go_on = done(
                        i,
                        Err(StoreError::Request {
                            object: self.url.object(file),
                            reason: text.clone(),
                        }),
                    );
                    if !go_on {
                        break;
                    }
                }
                return;
            }
        };
        io.runtime.block_on(async {
            let mut arriving = futures_util::stream::iter(asked.iter().enumerate())
                .map(|(i, (file, ask))| async move {
                    let got = match ask {
                        Ask::Range(r) => self.get_range_async(io, file, r.clone()).await,
                        Ask::Whole(size, e_tag) => {
                            self.get_object_async(io, file, *size, *e_tag).await
                        }
                    };
                    (i, got)
                })
                .buffer_unordered(parallel.max(1));
            while let Some((i, got)) = arriving.next().await {
                if !done(i, got) {
                    break;
                }
            }
        });
    }

    /// One GET of [`get_objects`](Self::get_objects), retried.
    async fn get_object_async(
        &self,
        io: &Io,
        file: &str,
        size: u64,
        e_tag: Option<&str>,
    ) -> Result<bytes::Bytes, StoreError> {
        let object = self.url.object(file);
        let location = ObjectPath::from(self.url.key(file));
        self.retry
            .run_async(&object, |_| {
                stats::request();
                let (location, object) = (&location, &object);
                async move {
                    let got = io
                        .store
                        .get_opts(location, GetOptions::default())
                        .await
                        .map_err(|e| self.classify(file, e))?;
                    if !same_version(e_tag, got.meta.e_tag.as_deref()) {
                        return Err(Failure::Fatal(StoreError::Changed {
                            object: object.clone(),
                            reason: "its ETag is not the one it was listed with: the object \
                                     was rewritten since"
                                .into(),
                        }));
                    }
                    if got.meta.size != size {
                        return Err(Failure::Fatal(StoreError::Changed {
                            object: object.clone(),
                            reason: format!(
                                "{} bytes, but {size} when it was listed: the object changed",
                                got.meta.size
                            ),
                        }));
                    }
                    let bytes = got.bytes().await.map_err(|e| self.classify(file, e))?;
                    all_of(bytes, size)
                }
            })
            .await
    }

    /// One ranged GET of [`get_ranges`](Self::get_ranges), retried.
    async fn get_range_async(
        &self,
        io: &Io,
        file: &str,
        range: Range<u64>,
    ) -> Result<bytes::Bytes, StoreError> {
        let object = self.url.object(file);
        let location = ObjectPath::from(self.url.key(file));
        let want = range.end.saturating_sub(range.start);
        self.retry
            .run_async(&object, |_| {
                stats::request();
                stats::ranged();
                let (location, range) = (&location, range.clone());
                async move {
                    let bytes = io
                        .store
                        .get_range(location, range)
                        .await
                        .map_err(|e| self.classify(file, e))?;
                    all_of(bytes, want)
                }
            })
            .await
    }
}

impl Drop for StoreClient {
    fn drop(&mut self) {
        let io = *self.io.get_mut();
        // SAFETY: `io` came from `Box::into_raw` and is freed only here.
        let io = unsafe { Box::from_raw(io) };
        if io.pid != std::process::id() {
            // Built by the parent of this forked process: its runtime's threads are not
            // here, and dropping it could block.
            std::mem::forget(io);
        }
    }
}

/// `bytes` received (counted), when they are the `want` asked for; fewer (a body cut
/// short) are a transient failure, tried again.
fn all_of(bytes: bytes::Bytes, want: u64) -> Result<bytes::Bytes, Failure> {
    stats::bytes(bytes.len() as u64);
    if bytes.len() as u64 != want {
        return Err(Failure::Transient(format!(
            "{} bytes of the {want} asked for",
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// One request of [`StoreClient::get_many`].
enum Ask<'a> {
    /// These bytes of the object (a ranged GET).
    Range(Range<u64>),
    /// The whole object, of this size and ETag as listed.
    Whole(u64, Option<&'a str>),
}

/// Whether ETag `listed` (from a listing) and `got` (from a GET) name the same version
/// of an object: compared without the quotes and weak marker that some listings leave
/// out (Azure lists `0x8D…`, its GETs say `"0x8D…"`); an unknown one matches any.
pub(crate) fn same_version(listed: Option<&str>, got: Option<&str>) -> bool {
    fn bare(t: &str) -> &str {
        t.trim().trim_start_matches("W/").trim_matches('"')
    }
    match (listed, got) {
        (Some(a), Some(b)) => bare(a) == bare(b),
        _ => true,
    }
}

/// The client's own small Tokio runtime (two threads).
fn runtime(url: &StoreUrl) -> Result<tokio::runtime::Runtime, StoreError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("imgfeed-store")
        .enable_all()
        .build()
        .map_err(|e| StoreError::Setup {
            url: url.to_string(),
            source: SetupError::Runtime(e),
        })
}

/// The HTTP status in an `object_store` message (`... status code: 503 ...`).
fn status_of(text: &str) -> Option<u16> {
    let at = text.find("status code: ")? + "status code: ".len();
    text.get(at..at + 3)?.parse().ok()
}

/// Whether a request failed because the client, finding no credentials in the
/// environment, asked the instance-metadata server (169.254.169.254) and nothing answered
/// there: not a cloud node, so retrying cannot help (a server that answers with an error is
/// retried as any other).
fn asked_no_metadata_server(text: &str) -> bool {
    text.contains("169.254.169.254") && text.contains("error sending request")
}

/// Whether a store's answer says the bucket (container) itself does not exist: S3's
/// `NoSuchBucket`, Azure's `ContainerNotFound`, GCS's "bucket does not exist".
fn names_missing_bucket(text: &str) -> bool {
    ["NoSuchBucket", "ContainerNotFound", "bucket does not exist"]
        .iter()
        .any(|code| text.contains(code))
}

/// The first line of a store's message, at most 300 characters.
fn short(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    line.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_of_one_version_match_whatever_their_quoting() {
        // Azure lists `0x8D…` and answers a GET with `"0x8D…"`; weak tags of a proxy.
        assert!(same_version(Some("0x8DC1A"), Some("\"0x8DC1A\"")));
        assert!(same_version(Some("\"abc\""), Some("W/\"abc\"")));
        assert!(!same_version(Some("\"abc\""), Some("\"abd\"")));
        // Unknown on either side: nothing to compare.
        assert!(same_version(None, Some("\"abc\"")));
        assert!(same_version(Some("\"abc\""), None));
    }

    #[test]
    fn an_absent_metadata_server_is_recognised() {
        assert!(asked_no_metadata_server("Generic S3 error: Error performing PUT http://169.254.169.254/latest/api/token in 1.9ms - HTTP error: error sending request"));
        assert!(!asked_no_metadata_server(
            "Error performing GET http://127.0.0.1:9000/b/k - HTTP error: error sending request"
        ));
    }

    #[test]
    fn a_missing_bucket_is_recognised_in_each_stores_words() {
        assert!(names_missing_bucket("Server returned non-2xx status code: 404 Not Found: <?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code>"));
        assert!(names_missing_bucket(
            "404 The specified container does not exist. ContainerNotFound"
        ));
        assert!(!names_missing_bucket(
            "404 Not Found: <Error><Code>NoSuchKey</Code>"
        ));
    }

    #[test]
    fn status_codes_are_found_in_store_messages() {
        assert_eq!(
            status_of("Generic S3 error: Error performing GET http://x in 1ms - Server returned non-2xx status code: 503 Service Unavailable: "),
            Some(503)
        );
        assert_eq!(status_of("connection reset"), None);
    }
}
