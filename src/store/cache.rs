//! The local cache of a location's files: one folder per location under the cache root
//! (`--cache-dir`, default `$XDG_CACHE_HOME/imgfeed` or `~/.cache/imgfeed`), a byte limit
//! (`--cache-size`), and files keyed by name, size and checksum ([`CacheKey`], as the
//! caller lists them) and named after the checksum (`shard-00003.bin.1a2b3c4d`), so a file
//! rewritten on the store never reads as a stale copy.
//!
//! Several processes of one node may share it. A download is written under a temporary
//! name (`.NAME.tmp.PID.N`) and renamed when complete and checked (size and CRC-32 against
//! the key), so nobody sees half a file. Room is reserved under an exclusive lock on
//! `.lock` in the dataset's folder: the sizes of every file there (temporary ones
//! included, at their final size) are added up, the least recently used files that the
//! caller does not need are removed until the new file fits, and the temporary file is
//! created at its full size; then the lock is released for the download. The rename that
//! completes it takes the lock again: a rename while another reservation lists the folder
//! would hide the file from that count (listed under the old name, gone by the time its
//! size is read) and let the folder go past the limit. So the files in the folder never
//! add up to more than the limit. Temporary files of processes that died are removed when
//! found.

use super::{Received, StoreError, StoreUrl};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Default byte limit of a dataset's cache folder.
pub const DEFAULT_CACHE_SIZE: u64 = 100_000_000_000;

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A file as its reader lists it: the name under the location, its size and CRC-32, and
/// who lists it (`"the manifest"`, for messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheKey<'a> {
    /// The file's name under the location.
    pub name: &'a str,
    /// Its size in bytes.
    pub size: u64,
    /// Its CRC-32 (or, when `checked` is false, a tag of its version: a hash of its ETag;
    /// either way part of the cached file's name).
    pub crc32: u32,
    /// Whether `crc32` is the file's checksum, checked when a download completes.
    pub checked: bool,
    /// Who says so, for messages (`"the manifest"`).
    pub listed_by: &'static str,
}

/// A location's cache folder and its limit.
#[derive(Debug)]
pub struct Cache {
    dir: PathBuf,
    limit: u64,
}

/// The default cache root: `$XDG_CACHE_HOME/imgfeed`, else `$HOME/.cache/imgfeed`.
pub fn default_root() -> Option<PathBuf> {
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    non_empty("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| non_empty("HOME").map(|h| Path::new(&h).join(".cache")))
        .map(|c| c.join("imgfeed"))
}

fn cache_err(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::Cache {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// An exclusive `flock` on a file, released on drop.
struct Lock(File);

impl Lock {
    fn take(path: &Path) -> Result<Lock, StoreError> {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| cache_err(path, e.to_string()))?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a file descriptor this function owns.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            return Err(cache_err(path, std::io::Error::last_os_error().to_string()));
        }
        Ok(Lock(f))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: unlocking the descriptor taken in `take`.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// A temporary file's owner, when the name is one of ours: `.NAME.tmp.PID.N`.
fn tmp_owner(name: &str) -> Option<i32> {
    let (_, tail) = name.rsplit_once(".tmp.")?;
    tail.split('.').next()?.parse().ok()
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// A file being downloaded: its temporary path, removed on drop unless committed.
#[derive(Debug)]
pub struct Pending {
    tmp: PathBuf,
    dest: PathBuf,
    file: Option<File>,
}

impl Pending {
    /// The open temporary file, to write the download into (from its start).
    pub fn file(&mut self) -> Option<&mut File> {
        self.file.as_mut()
    }

    /// Check the download against `entry` by what the downloader counted and hashed as
    /// the bytes arrived (`got`: the file is not read again), and rename it to its final
    /// name.
    pub fn commit(
        mut self,
        entry: &CacheKey<'_>,
        object: &str,
        got: Received,
    ) -> Result<PathBuf, StoreError> {
        let file = self.file.take();
        drop(file);
        if got.len != entry.size {
            return Err(StoreError::Changed {
                object: object.to_string(),
                reason: format!(
                    "downloaded {} bytes, but {} says {}",
                    got.len, entry.listed_by, entry.size
                ),
            });
        }
        if entry.checked && got.crc32 != entry.crc32 {
            return Err(StoreError::Changed {
                object: object.to_string(),
                reason: format!(
                    "checksum mismatch (CRC-32 {:08x}, {} says {:08x}): the object was \
                     replaced or damaged on the store",
                    got.crc32,
                    entry.listed_by.trim_start_matches("the "),
                    entry.crc32
                ),
            });
        }
        // Under the lock: a reservation listing the folder sees this file under one name.
        let dir = self.dest.parent().unwrap_or(Path::new("."));
        let _lock = Lock::take(&dir.join(".lock"))?;
        std::fs::rename(&self.tmp, &self.dest).map_err(|e| cache_err(&self.dest, e.to_string()))?;
        Ok(self.dest.clone())
    }
}

impl Pending {
    /// The temporary file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.tmp
    }

    /// Close this process's handle and leave the file where it is: in a forked child, the
    /// file is the parent's to remove.
    pub(crate) fn leave(mut self) {
        self.file = None;
        self.tmp = PathBuf::new();
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

impl Cache {
    /// The cache folder of the location `url` (through `endpoint`) under `root`.
    pub fn open(
        root: Option<&Path>,
        limit: u64,
        url: &StoreUrl,
        endpoint: Option<&str>,
    ) -> Result<Cache, StoreError> {
        let root = match root {
            Some(r) => r.to_path_buf(),
            None => default_root().ok_or_else(|| {
                cache_err(
                    Path::new("~/.cache/imgfeed"),
                    "neither XDG_CACHE_HOME nor HOME is set: give --cache-dir",
                )
            })?,
        };
        let id = format!("{}|{url}", endpoint.unwrap_or(""));
        let safe: String = url
            .to_string()
            .trim_start_matches("s3://")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(60)
            .collect();
        let dir = root.join(format!("s3-{safe}-{:08x}", crc32fast::hash(id.as_bytes())));
        std::fs::create_dir_all(&dir).map_err(|e| cache_err(&dir, e.to_string()))?;
        Ok(Cache { dir, limit })
    }

    /// The dataset's cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The byte limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Where `entry` lives once cached.
    pub fn path_of(&self, entry: &CacheKey<'_>) -> PathBuf {
        self.dir.join(format!("{}.{:08x}", entry.name, entry.crc32))
    }

    /// The cached copy of `entry` when it is complete (and marks it used now).
    pub fn lookup(&self, entry: &CacheKey<'_>) -> Option<PathBuf> {
        let path = self.path_of(entry);
        let f = File::options().append(true).open(&path).ok()?;
        if f.metadata().ok()?.len() != entry.size {
            return None;
        }
        let _ = f.set_modified(std::time::SystemTime::now());
        Some(path)
    }

    /// Bytes of the files in the folder now (temporary ones at their reserved size).
    pub fn used(&self) -> Result<u64, StoreError> {
        Ok(self.scan()?.iter().map(|(_, size, _)| size).sum())
    }

    /// The temporary files of `name` that live processes hold here, with their sizes:
    /// the readers that joined the folder by reserving a file of that name and hold it,
    /// or their kept files (range mode's, see `super::kept`). Dead processes' files are
    /// removed on the way.
    pub fn held(&self, name: &str) -> Vec<(PathBuf, u64)> {
        let prefix = format!(".{name}.");
        let Ok(files) = self.scan() else {
            return Vec::new();
        };
        files
            .into_iter()
            .filter(|(p, _, _)| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix) && tmp_owner(n).is_some())
            })
            .map(|(p, size, _)| (p, size))
            .collect()
    }

    /// `(path, size, last use)` of every cache file, removing dead processes' temporary
    /// files.
    fn scan(&self) -> Result<Vec<(PathBuf, u64, std::time::SystemTime)>, StoreError> {
        let mut out = Vec::new();
        let rd = std::fs::read_dir(&self.dir).map_err(|e| cache_err(&self.dir, e.to_string()))?;
        for ent in rd.flatten() {
            let name = ent.file_name().to_string_lossy().into_owned();
            if name == ".lock" {
                continue;
            }
            if let Some(pid) = tmp_owner(&name) {
                if !alive(pid) {
                    let _ = std::fs::remove_file(ent.path());
                    continue;
                }
            }
            if let Ok(meta) = ent.metadata() {
                let used = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
                out.push((ent.path(), meta.len(), used));
            }
        }
        Ok(out)
    }

    /// Reserve room for `entry` and open its temporary file, evicting the least recently
    /// used files not in `keep`. Returns `Ok(Err(path))` when another process finished the
    /// file meanwhile, and the paths evicted.
    #[allow(clippy::type_complexity)]
    pub fn reserve(
        &self,
        entry: &CacheKey<'_>,
        keep: &[PathBuf],
    ) -> Result<(Result<Pending, PathBuf>, Vec<PathBuf>), StoreError> {
        self.reserve_ranked(entry, keep, None)
    }

    /// [`Cache::reserve`], choosing what to evict by the caller's `ranking` (the files'
    /// next use: furthest first) instead of the least recently used first. Nothing is
    /// removed unless the new file then fits: a refusal ([`StoreError::CacheFull`]) leaves
    /// the folder as it was.
    #[allow(clippy::type_complexity)]
    pub fn reserve_ranked(
        &self,
        entry: &CacheKey<'_>,
        keep: &[PathBuf],
        ranking: Option<&Ranking<'_>>,
    ) -> Result<(Result<Pending, PathBuf>, Vec<PathBuf>), StoreError> {
        let _lock = Lock::take(&self.dir.join(".lock"))?;
        if let Some(done) = self.lookup(entry) {
            return Ok((Err(done), Vec::new()));
        }
        let dest = self.path_of(entry);
        let files = self.scan()?;
        let mut used: u64 = files.iter().map(|(_, s, _)| s).sum();
        let mut evicted = Vec::new();
        if used.saturating_add(entry.size) > self.limit {
            // Candidates, first to go first: complete files (not temporary ones) not kept.
            let mut order: Vec<(u64, std::time::SystemTime, PathBuf, u64)> = files
                .into_iter()
                .filter(|(p, _, _)| {
                    let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                    !keep.contains(p) && name.is_some_and(|n| tmp_owner(&n).is_none())
                })
                .filter_map(|(p, size, t)| match ranking {
                    None => Some((0, t, p, size)),
                    Some(r) => match (r.next_use)(&p) {
                        Some(d) if d > r.beyond => Some((d, t, p, size)),
                        _ => None,
                    },
                })
                .collect();
            // Furthest next use first (then least recently used); plain LRU without one.
            order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let free: u64 = order.iter().map(|o| o.3).sum();
            if used.saturating_sub(free).saturating_add(entry.size) <= self.limit {
                for (_, _, path, size) in order {
                    if used.saturating_add(entry.size) <= self.limit {
                        break;
                    }
                    if std::fs::remove_file(&path).is_ok() {
                        used = used.saturating_sub(size);
                        evicted.push(path);
                    }
                }
            }
        }
        if used.saturating_add(entry.size) > self.limit {
            return Err(StoreError::CacheFull {
                path: self.dir.clone(),
                reason: format!(
                    "the cache limit of {} bytes cannot hold {} ({} bytes) beside the {used} \
                     bytes of files in use: raise --cache-size",
                    self.limit, entry.name, entry.size
                ),
            });
        }
        let tmp = self.dir.join(format!(
            ".{}.{:08x}.tmp.{}.{}",
            entry.name,
            entry.crc32,
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        // Readable too: range mode reads back what it keeps there (`super::kept`).
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| cache_err(&tmp, e.to_string()))?;
        file.set_len(entry.size)
            .map_err(|e| cache_err(&tmp, e.to_string()))?;
        Ok((
            Ok(Pending {
                tmp,
                dest,
                file: Some(file),
            }),
            evicted,
        ))
    }
}

/// How [`Cache::reserve_ranked`] chooses the files to evict: by their next use, as the
/// caller knows it (the epoch's order), furthest first (Belady's rule).
pub struct Ranking<'a> {
    /// How far away the next use of the cached file at a path is (in samples, say):
    /// `None` when it must stay (a reader holds its map, it is being fetched), `u64::MAX`
    /// for a file the caller does not list (it goes first).
    pub next_use: &'a dyn Fn(&Path) -> Option<u64>,
    /// Only files whose next use is further away than this may go: 0 for a read that
    /// needs the file now, the file's own next use for a prefetch (which must not evict a
    /// file needed sooner than the one it fetches).
    pub beyond: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, size: u64) -> CacheKey<'_> {
        CacheKey {
            name,
            size,
            checked: true,
            crc32: crc32fast::hash(&vec![7u8; size as usize]),
            listed_by: "the manifest",
        }
    }

    fn put(cache: &Cache, e: &CacheKey<'_>, keep: &[PathBuf]) -> Result<PathBuf, StoreError> {
        let (pending, _) = cache.reserve(e, keep)?;
        let mut p = pending.expect("not cached yet");
        let bytes = vec![7u8; e.size as usize];
        std::io::Write::write_all(p.file().expect("open"), &bytes).expect("writes");
        p.commit(e, "s3://b/x", Received::of(&bytes))
    }

    #[test]
    fn the_limit_holds_by_evicting_the_least_recently_used_files_not_kept() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let url = StoreUrl::parse("s3://b/p").expect("url");
        let cache = Cache::open(Some(tmp.path()), 250, &url, None).expect("opens");
        let a = put(&cache, &entry("a", 100), &[]).expect("a");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = put(&cache, &entry("b", 100), &[]).expect("b");
        assert_eq!(cache.used().expect("scan"), 200);
        // c needs room: a (least recently used) goes unless kept.
        let c = put(&cache, &entry("c", 100), std::slice::from_ref(&a)).expect("c");
        assert!(a.exists() && !b.exists() && c.exists());
        assert!(cache.used().expect("scan") <= 250);
        assert_eq!(cache.lookup(&entry("c", 100)), Some(c.clone()));
        // Nothing can go: refused, naming the limit.
        let e = put(&cache, &entry("d", 100), &[a, c]).expect_err("too small");
        assert!(e.to_string().contains("raise --cache-size"), "{e}");
        assert!(cache.used().expect("scan") <= 250);
        // A download whose bytes differ from its key is not kept.
        let mut bad = entry("e", 10);
        bad.crc32 ^= 1;
        let e = put(&cache, &bad, &[]).expect_err("checksum");
        assert!(e.to_string().contains("checksum mismatch"), "{e}");
        assert_eq!(cache.lookup(&bad), None);
    }

    #[test]
    fn a_ranking_evicts_the_furthest_next_use_and_nothing_when_it_cannot_fit() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let url = StoreUrl::parse("s3://b/p").expect("url");
        let cache = Cache::open(Some(tmp.path()), 300, &url, None).expect("opens");
        let a = put(&cache, &entry("a", 100), &[]).expect("a");
        let b = put(&cache, &entry("b", 100), &[]).expect("b");
        let c = put(&cache, &entry("c", 100), &[]).expect("c");
        // a is needed furthest away (LRU would take a too: make it the most recent).
        assert!(cache.lookup(&entry("a", 100)).is_some());
        let far = |p: &Path| -> Option<u64> {
            Some(if p == a {
                30
            } else if p == b {
                20
            } else {
                10
            })
        };
        let rank = Ranking {
            next_use: &far,
            beyond: 0,
        };
        let (pending, evicted) = cache
            .reserve_ranked(&entry("d", 100), &[], Some(&rank))
            .expect("room");
        assert_eq!(evicted, vec![a.clone()]);
        drop(pending);
        // Only files needed after 25 may go (none is left): refused, nothing removed.
        let rank = Ranking {
            next_use: &far,
            beyond: 25,
        };
        let e = cache
            .reserve_ranked(&entry("e", 150), &[], Some(&rank))
            .expect_err("no room");
        assert!(matches!(e, StoreError::CacheFull { .. }), "{e}");
        assert!(b.exists() && c.exists());
        assert!(cache.used().expect("scan") <= 300);
    }
}
