//! A conversion's output in object storage (`convert --format shards --out s3://...`, or
//! `gs://`, `az://`, `abfs[s]://`: every store but a plain HTTP server):
//! the [`Publish`] that uploads each finished file of the [`ShardWriter`] from a local
//! staging folder while the conversion goes on, then the manifest last.
//!
//! One thread uploads, in the order the files were finished; at most one file waits for it
//! (the writer blocks on a second), so the staging folder holds at most three shards (the
//! one being written, one waiting, one being uploaded) and memory one part
//! ([`crate::store::write`]). Each file is removed from the staging folder once stored. On
//! failure, or when the conversion stops (Ctrl-C, an error), the objects already stored
//! are deleted (best effort) and no manifest is written: a reader of the prefix sees no
//! dataset.
//!
//! [`ShardWriter`]: crate::shards::ShardWriter

use super::publish::Publish;
use crate::error::{Error, Result};
use crate::store::{StoreClient, StoreError, StoreOptions, StoreUrl};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Uploads a conversion's files to a prefix in object storage (see the module).
pub struct Uploader {
    client: Arc<StoreClient>,
    staging: PathBuf,
    jobs: Option<SyncSender<(PathBuf, String)>>,
    thread: Option<JoinHandle<std::result::Result<(), StoreError>>>,
    /// Objects stored so far (removed again when the conversion does not finish).
    stored: Arc<Mutex<Vec<String>>>,
    /// Raised to make the thread skip what is left.
    cancel: Arc<AtomicBool>,
    finished: bool,
}

impl std::fmt::Debug for Uploader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uploader")
            .field("url", self.client.url())
            .field("staging", &self.staging)
            .finish()
    }
}

/// A staging folder of this process's own under the system's temporary folder.
fn staging_dir() -> Result<PathBuf> {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("imgfeed-upload-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
        path: dir.clone(),
        source,
    })?;
    Ok(dir)
}

impl Uploader {
    /// An uploader to `out` (`s3://bucket/prefix`, ...), reached as `options` say. Refuses a
    /// prefix that already holds `manifest` (a dataset, or this slice of one).
    pub fn new(out: &Path, options: &StoreOptions, manifest: &str) -> Result<Uploader> {
        let url = StoreUrl::parse(&out.to_string_lossy())?;
        if url.store().read_only() {
            return Err(crate::error::Invalid::ReadOnlyStore {
                url: url.to_string(),
                scheme: url.scheme.to_string(),
            }
            .into());
        }
        let client = StoreClient::new(&url, options.endpoint.as_deref())?;
        if client.exists(manifest)? {
            return Err(Error::Dataset {
                path: PathBuf::from(url.object(manifest)),
                reason: "already exists: this prefix holds a converted dataset (remove it or \
                         choose another --out)"
                    .into(),
            });
        }
        let client = Arc::new(client);
        let staging = staging_dir()?;
        let stored = Arc::new(Mutex::new(Vec::new()));
        let cancel = Arc::new(AtomicBool::new(false));
        let (tx, rx) = sync_channel::<(PathBuf, String)>(1);
        let thread = {
            let (client, stored, cancel) = (client.clone(), stored.clone(), cancel.clone());
            std::thread::Builder::new()
                .name("imgfeed-upload".into())
                .spawn(move || {
                    for (tmp, name) in rx {
                        if cancel.load(Ordering::Relaxed) {
                            let _ = std::fs::remove_file(&tmp);
                            continue;
                        }
                        let r = client.upload(&tmp, &name);
                        let _ = std::fs::remove_file(&tmp);
                        if let Err(e) = r {
                            // Stop taking files: the writer's next hand-over fails and
                            // picks up this error.
                            cancel.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                        stored.lock().unwrap_or_else(|p| p.into_inner()).push(name);
                    }
                    Ok(())
                })
                .map_err(|e| Error::Internal(format!("cannot start the upload thread: {e}")))?
        };
        Ok(Uploader {
            client,
            staging,
            jobs: Some(tx),
            thread: Some(thread),
            stored,
            cancel,
            finished: false,
        })
    }

    /// The local folder the writer writes in before the files are uploaded.
    pub fn staging(&self) -> &Path {
        &self.staging
    }

    /// Wait for the upload thread; its error, if it failed.
    fn join(&mut self) -> Result<()> {
        self.jobs = None;
        match self.thread.take().map(JoinHandle::join) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(e.into()),
            Some(Err(_)) => Err(Error::Internal("the upload thread panicked".into())),
        }
    }
}

impl Publish for Uploader {
    fn file(&mut self, tmp: PathBuf, name: &str) -> Result<()> {
        let sent = match &self.jobs {
            Some(tx) => tx.send((tmp, name.to_string())).map_err(|e| e.0 .0),
            None => Err(tmp),
        };
        match sent {
            Ok(()) => Ok(()),
            Err(tmp) => {
                // The thread stopped on an error: report it.
                let _ = std::fs::remove_file(&tmp);
                self.join()?;
                Err(Error::Internal("the upload thread stopped".into()))
            }
        }
    }

    fn finish(&mut self, name: &str, manifest: Vec<u8>) -> Result<()> {
        self.join()?;
        self.client.put(name, manifest)?;
        self.finished = true;
        Ok(())
    }

    fn target(&self) -> String {
        self.client.url().to_string()
    }
}

impl Drop for Uploader {
    fn drop(&mut self) {
        if !self.finished {
            self.cancel.store(true, Ordering::Relaxed);
            let _ = self.join();
            let stored =
                std::mem::take(&mut *self.stored.lock().unwrap_or_else(|p| p.into_inner()));
            for name in stored {
                let _ = self.client.delete_once(&name);
            }
        }
        let _ = std::fs::remove_dir_all(&self.staging);
    }
}
