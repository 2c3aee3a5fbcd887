//! A container file's index (its [`RecordEntry`]s) kept on disk, so it is built once: a
//! small binary file beside the data (`NAME.imgfeed-index`) where the folder is writable,
//! else in the cache (`CACHE/indexes/`), for read-only folders and files in object storage.
//!
//! It records what it was made from — the format, its options (which member holds the
//! image and the label) and the file's stamp (size and mtime, or size and ETag for an
//! object) — and a CRC-32 of itself; an index that does not match all of them, or does
//! not parse, is not used (the file is indexed again), so a changed file is never read
//! with a stale index.
//!
//! Layout (little-endian): magic `IMGFIDX1`, then three strings (`u32` length + UTF-8:
//! format, options, stamp), `u64` entry count, entries (`u64` offset, `u64` length,
//! `MAX_LABELS` × `u32` labels, `u32` key length + key), `u32` CRC-32 of all before it.
//! An index with entries not [`Stored::Plain`] (Parquet read in place) has the magic
//! `IMGFIDX2` and, after each entry's key, a `u8` (0 plain, 1 Snappy) and for Snappy its
//! `u32` lead, skip and length.

use crate::formats::{RecordEntry, Stored};
use crate::spec::MAX_LABELS;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

const MAGIC: &[u8; 8] = b"IMGFIDX1";
/// The magic of an index whose entries say how they are stored.
const MAGIC_STORED: &[u8; 8] = b"IMGFIDX2";

/// The ending of an index file's name.
pub const SUFFIX: &str = ".imgfeed-index";

/// What an index was made from: it is used only for the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexKey {
    /// The format's name.
    pub format: String,
    /// The format's options.
    pub options: String,
    /// The file's size and mtime (or ETag).
    pub stamp: String,
}

impl IndexKey {
    /// The stamp of a local file: its size and modification time.
    pub fn local_stamp(meta: &std::fs::Metadata) -> String {
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        format!("size={} mtime_ns={mtime}", meta.len())
    }
}

/// The index file beside `file`.
pub fn beside(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(SUFFIX);
    file.with_file_name(name)
}

/// The index file for `id` (a local file's absolute path, an object's URL) in the cache
/// root `cache`.
pub fn in_cache(cache: &Path, id: &str) -> PathBuf {
    let base = id.rsplit('/').next().unwrap_or(id);
    cache.join("indexes").join(format!(
        "{:08x}-{base}{SUFFIX}",
        crc32fast::hash(id.as_bytes())
    ))
}

/// The entries of the index at `path` if it was made from `key` and is whole.
pub fn load(path: &Path, key: &IndexKey) -> Option<Vec<RecordEntry>> {
    let bytes = std::fs::read(path).ok()?;
    parse(&bytes, key)
}

fn parse(bytes: &[u8], key: &IndexKey) -> Option<Vec<RecordEntry>> {
    let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
    if crc32fast::hash(body).to_le_bytes() != crc {
        return None;
    }
    let (with_stored, rest) = match body.strip_prefix(MAGIC) {
        Some(rest) => (false, rest),
        None => (true, body.strip_prefix(MAGIC_STORED)?),
    };
    let mut r = Reader(rest);
    if r.string()? != key.format || r.string()? != key.options || r.string()? != key.stamp {
        return None;
    }
    let n = r.u64()?;
    // Each entry takes at least 20 + 4 * MAX_LABELS bytes: a count that cannot fit is not
    // believed (and allocates nothing).
    if n > (r.0.len() / (20 + 4 * MAX_LABELS)) as u64 {
        return None;
    }
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let offset = r.u64()?;
        let len = r.u64()?;
        let mut labels = [0u32; MAX_LABELS];
        for l in &mut labels {
            *l = r.u32()?;
        }
        let key = r.string()?.to_string();
        let stored = match with_stored {
            false => Stored::Plain,
            true => match r.take(1)?[0] {
                0 => Stored::Plain,
                1 => Stored::Snappy {
                    lead: r.u32()?,
                    skip: r.u32()?,
                    len: r.u32()?,
                },
                _ => return None,
            },
        };
        out.push(RecordEntry {
            stored,
            offset,
            len,
            labels,
            key,
        });
    }
    r.0.is_empty().then_some(out)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (a, b) = self.0.split_at_checked(n)?;
        self.0 = b;
        Some(a)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn string(&mut self) -> Option<&'a str> {
        let n = self.u32()? as usize;
        std::str::from_utf8(self.take(n)?).ok()
    }
}

/// The bytes of an index of `entries` made from `key`.
pub fn encode(key: &IndexKey, entries: &[RecordEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + entries.len() * 48);
    let with_stored = entries.iter().any(|e| e.stored != Stored::Plain);
    out.extend_from_slice(if with_stored { MAGIC_STORED } else { MAGIC });
    let string = |out: &mut Vec<u8>, s: &str| {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    string(&mut out, &key.format);
    string(&mut out, &key.options);
    string(&mut out, &key.stamp);
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for e in entries {
        out.extend_from_slice(&e.offset.to_le_bytes());
        out.extend_from_slice(&e.len.to_le_bytes());
        for l in e.labels {
            out.extend_from_slice(&l.to_le_bytes());
        }
        string(&mut out, &e.key);
        if with_stored {
            match e.stored {
                Stored::Plain => out.push(0),
                Stored::Snappy { lead, skip, len } => {
                    out.push(1);
                    for v in [lead, skip, len] {
                        out.extend_from_slice(&v.to_le_bytes());
                    }
                }
            }
        }
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

static TMP: AtomicU64 = AtomicU64::new(0);

/// Write the index of `entries` to `path`, whole or not at all (a temporary file renamed:
/// several processes may index one file at once).
pub fn save(path: &Path, key: &IndexKey, entries: &[RecordEntry]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(format!(
        ".tmp.{}.{}",
        std::process::id(),
        TMP.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, encode(key, entries))?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(stamp: &str) -> IndexKey {
        IndexKey {
            format: "webdataset".into(),
            options: "image=jpg;label=cls".into(),
            stamp: stamp.into(),
        }
    }

    #[test]
    fn an_index_round_trips_only_for_its_key_and_whole() {
        let mut entries = vec![
            RecordEntry {
                stored: Stored::Plain,
                offset: 512,
                len: 3,
                labels: [4, 0],
                key: "a/b".into(),
            },
            RecordEntry {
                stored: Stored::Plain,
                offset: 2048,
                len: 70_000,
                labels: [1, 0],
                key: "ü".into(),
            },
        ];
        let bytes = encode(&key("size=1"), &entries);
        assert!(
            bytes.starts_with(MAGIC),
            "plain entries keep the first layout"
        );
        assert_eq!(parse(&bytes, &key("size=1")), Some(entries.clone()));
        assert_eq!(parse(&bytes, &key("size=2")), None, "another stamp");
        entries[1].stored = Stored::Snappy {
            lead: 7,
            skip: 300,
            len: 69_000,
        };
        let stored = encode(&key("size=1"), &entries);
        assert!(stored.starts_with(MAGIC_STORED));
        assert_eq!(parse(&stored, &key("size=1")), Some(entries));
        for bytes in [bytes, stored] {
            for i in 0..bytes.len() {
                let mut b = bytes.clone();
                b[i] ^= 0x10;
                assert_eq!(parse(&b, &key("size=1")), None, "byte {i} flipped");
                assert_eq!(parse(&bytes[..i], &key("size=1")), None, "cut at {i}");
            }
        }
    }

    #[test]
    fn saved_indexes_load_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("x.tar");
        let p = beside(&file);
        assert!(p.to_string_lossy().ends_with("x.tar.imgfeed-index"));
        save(&p, &key("s"), &[]).expect("saves");
        assert_eq!(load(&p, &key("s")), Some(vec![]));
        let c = in_cache(dir.path(), "s3://b/p/x.tar");
        assert!(c.starts_with(dir.path().join("indexes")));
    }
}
