//! The bytes of a shards dataset: file headers, index entries and the manifest, with the
//! checks that turn a damaged file into an error naming it. `docs/shards.md` describes the
//! same layout for readers in other languages.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The format version this build writes and reads.
pub const VERSION: u32 = 1;
/// `format` field of every manifest.
pub const FORMAT: &str = "imgfeed-shards";
/// The manifest of a whole dataset; its presence is what marks a folder as one.
pub const MANIFEST: &str = "manifest.json";
/// First 8 bytes of a shard file.
pub const SHARD_MAGIC: [u8; 8] = *b"IMGFSHRD";
/// First 8 bytes of an index file.
pub const INDEX_MAGIC: [u8; 8] = *b"IMGFINDX";
/// Bytes of a shard or index file header.
pub const HEADER_LEN: usize = 32;
/// Bytes of one index entry.
pub const ENTRY_LEN: usize = 56;
/// Largest manifest read (it lists shards, not samples, so it stays small).
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;

/// How samples are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum Storage {
    /// The source's encoded file, byte for byte.
    Original,
    /// Re-encoded as JPEG after the conversion ops.
    #[default]
    Jpeg,
    /// Decoded RGB u8 pixels, HWC, after the conversion ops.
    Raw,
}

impl Storage {
    /// The code stored in shard headers.
    pub fn code(self) -> u32 {
        match self {
            Storage::Original => 0,
            Storage::Jpeg => 1,
            Storage::Raw => 2,
        }
    }

    /// The name used in manifests and pipeline files.
    pub fn name(self) -> &'static str {
        match self {
            Storage::Original => "original",
            Storage::Jpeg => "jpeg",
            Storage::Raw => "raw",
        }
    }
}

/// One file the manifest lists, with what it must hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// Name, relative to the dataset folder.
    pub file: String,
    /// Size in bytes.
    pub size: u64,
    /// CRC-32 (IEEE, as zlib's `crc32`) of the whole file.
    pub crc32: u32,
    /// Samples stored in it (shards only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
}

/// The source a dataset was converted from, and how it was listed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    /// `image_folder`, `cifar10` or `cifar100`.
    pub kind: String,
    /// The dataset root at conversion time (informative).
    pub root: String,
    /// CIFAR split, when the source was CIFAR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<String>,
    /// CIFAR-100 label choice, when the source was CIFAR-100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Samples in the whole source.
    pub samples: u64,
}

/// Which part of the source a slice manifest covers: source samples `first..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slice {
    /// This slice.
    pub id: usize,
    /// Slices in all.
    pub count: usize,
    /// First source sample.
    pub first: u64,
    /// One past the last source sample.
    pub end: u64,
}

/// `manifest.json` (or a slice's `slice-I-of-K.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// Format version ([`VERSION`]).
    pub version: u32,
    /// How the images are stored.
    pub storage: Storage,
    /// JPEG quality, for `jpeg` storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<u8>,
    /// Samples in the dataset (entries in the index).
    pub samples: u64,
    /// Label columns (1, or 2 for CIFAR-100 with both labels).
    pub label_columns: usize,
    /// `(class name, label)` for folder sources, in folder-name order; empty for CIFAR.
    pub classes: Vec<(String, u32)>,
    /// Height and width of every sample when they are all the same (`raw` storage only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_size: Option<[usize; 2]>,
    /// Where the data came from.
    pub source: Origin,
    /// The conversion ops (as in the pipeline file), for the record.
    pub ops: serde_json::Value,
    /// The per-sample index.
    pub index: FileEntry,
    /// The sample names, concatenated.
    pub names: FileEntry,
    /// The shard files, in the order the index numbers them.
    pub shards: Vec<FileEntry>,
    /// Set on the manifest of one slice of a split conversion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<Slice>,
}

fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::Dataset {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// The error for a file whose version this build does not read.
pub fn version_error(path: &Path, found: u32) -> Error {
    let who = if found > VERSION { "newer" } else { "older" };
    bad(
        path,
        format!(
            "format version {found}, written by a {who} imgfeed; this one reads version \
             {VERSION} (convert the dataset again with this imgfeed)"
        ),
    )
}

impl Manifest {
    /// Read and check a manifest file (format name and version; the files it lists are
    /// checked when the dataset is opened).
    pub fn read(path: &Path) -> Result<Manifest> {
        let io = |e: std::io::Error| bad(path, e.to_string());
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > MAX_MANIFEST_BYTES {
            return Err(bad(path, format!("manifest of {len} bytes is too large")));
        }
        let text = std::fs::read(path).map_err(io)?;
        Manifest::parse(path, &text)
    }

    /// Parse and check a manifest's bytes (`path` names it in errors: a file, or an object
    /// of a remote dataset).
    pub fn parse(path: &Path, text: &[u8]) -> Result<Manifest> {
        // Read the version first, so a newer manifest with new fields says so.
        #[derive(Deserialize)]
        struct Head {
            format: Option<String>,
            version: Option<u32>,
        }
        let head: Head = serde_json::from_slice(text)
            .map_err(|e| bad(path, format!("not a shards manifest: {e}")))?;
        if head.format.as_deref() != Some(FORMAT) {
            return Err(bad(
                path,
                format!("not a shards manifest (format is not \"{FORMAT}\")"),
            ));
        }
        match head.version {
            Some(VERSION) => {}
            Some(v) => return Err(version_error(path, v)),
            None => return Err(bad(path, "manifest has no version")),
        }
        let m: Manifest = serde_json::from_slice(text)
            .map_err(|e| bad(path, format!("invalid manifest: {e}")))?;
        if m.label_columns == 0 || m.label_columns > crate::spec::MAX_LABELS {
            return Err(bad(
                path,
                format!("label_columns {} is not 1 or 2", m.label_columns),
            ));
        }
        if m.shards.len() > u32::MAX as usize {
            return Err(bad(path, "too many shards"));
        }
        for f in std::iter::once(&m.index)
            .chain(std::iter::once(&m.names))
            .chain(&m.shards)
        {
            check_file_name(path, &f.file)?;
        }
        Ok(m)
    }

    /// Write it as pretty JSON to `path`, through a temporary name renamed at the end.
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_vec_pretty(self).map_err(|e| Error::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(e),
        })?;
        write_atomic(path, &text)
    }
}

/// A listed file must sit in the dataset folder: a plain name, no path.
fn check_file_name(manifest: &Path, name: &str) -> Result<()> {
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\\'])
        && Path::new(name).file_name().is_some_and(|n| n == name);
    if plain {
        Ok(())
    } else {
        Err(bad(
            manifest,
            format!("lists {name:?}, which is not a file name in the dataset folder"),
        ))
    }
}

/// Write `bytes` to `path` via `path.tmp` and a rename, so a reader never sees half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = tmp_name(path);
    std::fs::write(&tmp, bytes).map_err(|source| Error::Io {
        path: tmp.clone(),
        source,
    })?;
    std::fs::rename(&tmp, path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The temporary name a file is written under before its final rename.
pub fn tmp_name(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// The 32-byte header of a shard (`SHARD_MAGIC`) or index (`INDEX_MAGIC`) file:
/// magic, version (u32), a kind-specific u32 (the storage code for shards, the entry
/// length for indexes), a u64 count (0 for shards, the entry count for indexes), and
/// 8 zero bytes.
pub fn header(magic: [u8; 8], field: u32, count: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&magic);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&field.to_le_bytes());
    h[16..24].copy_from_slice(&count.to_le_bytes());
    h
}

/// Check a header written by [`header`]; returns `(field, count)`.
pub fn parse_header(path: &Path, bytes: &[u8], magic: [u8; 8], what: &str) -> Result<(u32, u64)> {
    let h = bytes
        .get(..HEADER_LEN)
        .ok_or_else(|| bad(path, format!("too short for a {what} header")))?;
    if h[..8] != magic {
        return Err(bad(path, format!("not an imgfeed {what} file (bad magic)")));
    }
    let version = u32_at(h, 8);
    if version != VERSION {
        return Err(version_error(path, version));
    }
    Ok((u32_at(h, 12), u64_at(h, 16)))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        a.copy_from_slice(s);
    }
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

/// One sample in the index (56 bytes, little-endian, in this field order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// Byte offset of the record in its shard file (from the start of the file).
    pub offset: u64,
    /// Bytes of the record.
    pub length: u64,
    /// Byte offset of the sample's name in the names file.
    pub name_offset: u64,
    /// Shard number (position in the manifest's `shards`).
    pub shard: u32,
    /// CRC-32 of the record's bytes.
    pub crc32: u32,
    /// Image height (0 when unknown: `original` storage).
    pub height: u32,
    /// Image width (0 when unknown).
    pub width: u32,
    /// Label columns (unused ones 0).
    pub labels: [u32; 2],
    /// Bytes of the name (UTF-8).
    pub name_len: u32,
}

impl Entry {
    /// The entry's 56 bytes.
    pub fn to_bytes(&self) -> [u8; ENTRY_LEN] {
        let mut b = [0u8; ENTRY_LEN];
        b[0..8].copy_from_slice(&self.offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.length.to_le_bytes());
        b[16..24].copy_from_slice(&self.name_offset.to_le_bytes());
        b[24..28].copy_from_slice(&self.shard.to_le_bytes());
        b[28..32].copy_from_slice(&self.crc32.to_le_bytes());
        b[32..36].copy_from_slice(&self.height.to_le_bytes());
        b[36..40].copy_from_slice(&self.width.to_le_bytes());
        b[40..44].copy_from_slice(&self.labels[0].to_le_bytes());
        b[44..48].copy_from_slice(&self.labels[1].to_le_bytes());
        b[48..52].copy_from_slice(&self.name_len.to_le_bytes());
        b
    }

    /// Entry `i` of an index body (`None` past its end).
    pub fn at(body: &[u8], i: usize) -> Option<Entry> {
        let b = body.get(i.checked_mul(ENTRY_LEN)?..)?.get(..ENTRY_LEN)?;
        Some(Entry {
            offset: u64_at(b, 0),
            length: u64_at(b, 8),
            name_offset: u64_at(b, 16),
            shard: u32_at(b, 24),
            crc32: u32_at(b, 28),
            height: u32_at(b, 32),
            width: u32_at(b, 36),
            labels: [u32_at(b, 40), u32_at(b, 44)],
            name_len: u32_at(b, 48),
        })
    }
}

/// CRC-32 (IEEE) of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_through_their_bytes() {
        let e = Entry {
            offset: 1 << 40,
            length: 123_456,
            name_offset: 77,
            shard: 3,
            crc32: 0xDEAD_BEEF,
            height: 256,
            width: 341,
            labels: [7, 9],
            name_len: 12,
        };
        let mut body = vec![0u8; ENTRY_LEN];
        body.extend_from_slice(&e.to_bytes());
        assert_eq!(Entry::at(&body, 1), Some(e));
        assert_eq!(Entry::at(&body, 2), None);
        assert_eq!(Entry::at(&body[..body.len() - 1], 1), None);
    }

    #[test]
    fn headers_check_magic_and_version() {
        let p = Path::new("x.bin");
        let h = header(SHARD_MAGIC, 2, 5);
        assert_eq!(parse_header(p, &h, SHARD_MAGIC, "shard").ok(), Some((2, 5)));
        let e = parse_header(p, &h, INDEX_MAGIC, "index").unwrap_err();
        assert!(e.to_string().contains("bad magic"), "{e}");
        let mut newer = h;
        newer[8] = 2;
        let e = parse_header(p, &newer, SHARD_MAGIC, "shard").unwrap_err();
        assert!(
            e.to_string().contains("version 2, written by a newer"),
            "{e}"
        );
        let e = parse_header(p, &h[..10], SHARD_MAGIC, "shard").unwrap_err();
        assert!(e.to_string().contains("too short"), "{e}");
    }

    #[test]
    fn crc_is_zlibs() {
        // zlib.crc32(b"123456789") == 0xCBF43926, the standard check value.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn listed_files_must_be_plain_names() {
        let m = Path::new("manifest.json");
        assert!(check_file_name(m, "shard-00000.bin").is_ok());
        for bad in [
            "",
            "../x.bin",
            "a/b.bin",
            ".hidden",
            "/etc/passwd",
            "..",
            "c:\\x",
        ] {
            assert!(check_file_name(m, bad).is_err(), "{bad}");
        }
    }
}
