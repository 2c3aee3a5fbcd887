//! A converted dataset (`imgfeed convert --format shards`), memory-mapped: every sample is
//! one index lookup and one slice of a mapped shard, so random access (shuffle, sharding)
//! costs what sequential access does.
//!
//! Opening reads the manifest, maps the index, the names and every shard, and checks what
//! is cheap to check: sizes against the manifest (a truncated shard is an error naming it),
//! magic and version of every header, the index's and the names' checksums, and that every
//! index entry points inside its shard. Reading a sample checks the CRC-32 of its record, so
//! a corrupted shard fails the sample that reads the damage, naming the shard — never a
//! garbage batch. [`Shards::verify`] checks every shard's whole-file checksum.
//!
//! `jpeg` and `original` samples come out encoded (the pipeline decodes them); `raw` samples
//! come out as RGB u8 HWC pixels, which `decode` passes through.

use crate::error::{Error, Result, SampleErrorKind};
use crate::shards::format::{
    crc32, parse_header, Entry, FileEntry, Manifest, Storage, ENTRY_LEN, HEADER_LEN, INDEX_MAGIC,
    MANIFEST, SHARD_MAGIC,
};
use crate::spec::{DType, Layout, Spec};
use memmap2::Mmap;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Largest image a `raw` record may hold (decode's default pixel limit).
const MAX_PIXELS: u64 = crate::codec::decoder::DEFAULT_MAX_PIXELS;

/// A shards dataset, opened.
pub struct Shards {
    root: PathBuf,
    manifest: Manifest,
    index: Mmap,
    names: Mmap,
    files: Files,
    /// The shard of each sample (read from the index as it is checked).
    file_of: Vec<u32>,
}

/// Where the shard files' bytes are.
enum Files {
    /// Every shard mapped (a local dataset).
    Mapped(Vec<Mmap>),
    /// Fetched into a local cache and mapped when needed (a dataset in object storage).
    Remote(super::fetch::RemoteFiles),
}

impl std::fmt::Debug for Shards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shards")
            .field("root", &self.root)
            .field("samples", &self.manifest.samples)
            .field("storage", &self.manifest.storage)
            .finish()
    }
}

fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::Dataset {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Map `dir/entry.file` after checking its size against the manifest.
fn map_checked(dir: &Path, entry: &FileEntry) -> Result<(PathBuf, Mmap)> {
    let path = dir.join(&entry.file);
    let map = map_sized(&path, entry)?;
    Ok((path, map))
}

/// Map `path` after checking that it has `entry`'s size.
pub(crate) fn map_sized(path: &Path, entry: &FileEntry) -> Result<Mmap> {
    let file = File::open(path).map_err(|e| bad(path, e.to_string()))?;
    let size = file.metadata().map_err(|e| bad(path, e.to_string()))?.len();
    if size != entry.size {
        let what = if size < entry.size {
            "truncated"
        } else {
            "longer than written"
        };
        return Err(bad(
            path,
            format!(
                "{size} bytes, but the manifest says {}: the file is {what} (damaged or replaced)",
                entry.size
            ),
        ));
    }
    // SAFETY: the map is read-only; a file changed under it while mapped is outside what
    // any reader can defend against (every record read is still checksummed).
    unsafe { Mmap::map(&file) }.map_err(|e| bad(path, e.to_string()))
}

fn check_crc(path: &Path, bytes: &[u8], want: u32) -> Result<()> {
    let got = crc32(bytes);
    if got != want {
        return Err(bad(
            path,
            format!(
                "checksum mismatch (CRC-32 {got:08x}, manifest says {want:08x}): the file is \
                 corrupted"
            ),
        ));
    }
    Ok(())
}

impl Shards {
    /// True when `root` holds a converted dataset (a `manifest.json`).
    pub fn is_dataset(root: &Path) -> bool {
        root.join(MANIFEST).is_file()
    }

    /// Open the dataset in `root` (its `manifest.json`).
    pub fn open(root: &Path) -> Result<Shards> {
        Shards::open_manifest(root, MANIFEST)
    }

    /// Open the dataset that the manifest `root/name` describes (a slice's manifest reads
    /// as a dataset of that slice's samples).
    pub fn open_manifest(root: &Path, name: &str) -> Result<Shards> {
        let manifest = Manifest::read(&root.join(name))?;
        let index = map_checked(root, &manifest.index)?;
        let names = map_checked(root, &manifest.names)?;
        let mut shards = Vec::with_capacity(manifest.shards.len());
        for entry in &manifest.shards {
            let (spath, map) = map_checked(root, entry)?;
            check_shard(&spath, &map, &manifest)?;
            shards.push(map);
        }
        Shards::assemble(root, name, manifest, index, names, Files::Mapped(shards))
    }

    /// A dataset in object storage: the manifest as fetched, the index and the names
    /// already in the local cache (`index`, `names`: their paths and maps), and the shard
    /// files fetched when read. The same checks as a local dataset's.
    pub(crate) fn remote(
        root: &Path,
        manifest: Manifest,
        index: (PathBuf, Mmap),
        names: (PathBuf, Mmap),
        files: super::fetch::RemoteFiles,
    ) -> Result<Shards> {
        Shards::assemble(root, MANIFEST, manifest, index, names, Files::Remote(files))
    }

    fn assemble(
        root: &Path,
        name: &str,
        manifest: Manifest,
        (ipath, index): (PathBuf, Mmap),
        (npath, names): (PathBuf, Mmap),
        files: Files,
    ) -> Result<Shards> {
        let mpath = root.join(name);
        check_crc(&ipath, &index, manifest.index.crc32)?;
        let (entry_len, count) = parse_header(&ipath, &index, INDEX_MAGIC, "index")?;
        if entry_len as usize != ENTRY_LEN {
            return Err(bad(
                &ipath,
                format!("index entries of {entry_len} bytes, expected {ENTRY_LEN}"),
            ));
        }
        if count != manifest.samples {
            return Err(bad(
                &ipath,
                format!(
                    "{count} entries, but the manifest says {} samples",
                    manifest.samples
                ),
            ));
        }
        let body_len = (count as u128) * ENTRY_LEN as u128;
        if (index.len() - HEADER_LEN) as u128 != body_len {
            return Err(bad(
                &ipath,
                format!("{} bytes do not hold {count} entries", index.len()),
            ));
        }
        if count == 0 {
            return Err(bad(&mpath, "the dataset has no samples"));
        }
        check_crc(&npath, &names, manifest.names.crc32)?;
        let mut s = Shards {
            root: root.to_path_buf(),
            manifest,
            index,
            names,
            files,
            file_of: Vec::new(),
        };
        s.file_of = s.check_entries(&ipath)?;
        Ok(s)
    }

    /// Every entry must point inside its shard and the names, and a raw record must be
    /// exactly its pixels: after this, reads cannot go out of bounds. Returns the shard of
    /// each sample.
    fn check_entries(&self, ipath: &Path) -> Result<Vec<u32>> {
        let body = &self.index[HEADER_LEN..];
        let raw = self.manifest.storage == Storage::Raw;
        let mut file_of = Vec::with_capacity(self.manifest.samples as usize);
        for i in 0..self.manifest.samples as usize {
            let e = Entry::at(body, i).ok_or_else(|| bad(ipath, "index ends early"))?;
            let fail = |why: String| bad(ipath, format!("entry {i}: {why}"));
            let shard_len = self
                .manifest
                .shards
                .get(e.shard as usize)
                .map(|f| f.size)
                .ok_or_else(|| fail(format!("shard {} does not exist", e.shard)))?;
            let end = e.offset.checked_add(e.length);
            if e.offset < HEADER_LEN as u64 || end.is_none_or(|end| end > shard_len) {
                return Err(fail(format!(
                    "record at {}+{} lies outside shard {}",
                    e.offset, e.length, e.shard
                )));
            }
            let nend = e.name_offset.checked_add(e.name_len as u64);
            let name = nend
                .filter(|&n| n <= self.names.len() as u64)
                .and_then(|n| self.names.get(e.name_offset as usize..n as usize))
                .ok_or_else(|| fail("name lies outside the names file".into()))?;
            if std::str::from_utf8(name).is_err() {
                return Err(fail("name is not UTF-8".into()));
            }
            if raw {
                let (h, w) = (e.height as u64, e.width as u64);
                if h == 0 || w == 0 || h * w > MAX_PIXELS || h * w * 3 != e.length {
                    return Err(fail(format!(
                        "raw record of {} bytes does not hold {h}x{w} RGB pixels",
                        e.length
                    )));
                }
            }
            file_of.push(e.shard);
        }
        Ok(file_of)
    }

    /// The shard of each sample.
    pub fn file_of(&self) -> &[u32] {
        &self.file_of
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Index entry `index`.
    pub fn entry(&self, index: usize) -> Option<Entry> {
        Entry::at(self.index.get(HEADER_LEN..)?, index)
    }

    /// The stored bytes of sample `index` (checksum verified), of a local dataset (a
    /// remote one's records are copied out: [`Shards::record_into`]).
    pub fn record(&self, index: usize) -> Result<(Entry, &[u8])> {
        let (e, bytes) = self.locate(index)?;
        let Files::Mapped(maps) = &self.files else {
            return Err(crate::error::Invalid::RemoteRecord {
                root: self.root.clone(),
            }
            .into());
        };
        let bytes = maps
            .get(e.shard as usize)
            .and_then(|m| m.get(bytes))
            .ok_or_else(|| self.corrupt(index, &e, "record out of bounds".into()))?;
        self.checked(index, e, bytes)
    }

    /// The stored bytes of sample `index` (checksum verified), borrowed from a mapped
    /// shard or, for a dataset in object storage, copied into `scratch` from the cached
    /// shard (fetched first when it is not there).
    pub fn record_into<'a>(
        &'a self,
        index: usize,
        scratch: &'a mut Vec<u8>,
    ) -> Result<(Entry, &'a [u8])> {
        match &self.files {
            Files::Mapped(_) => self.record(index),
            Files::Remote(remote) => {
                let (e, range) = self.locate(index)?;
                remote.copy(e.shard as usize, range, index, scratch)?;
                self.checked(index, e, scratch)
            }
        }
    }

    /// The entry of sample `index` and its record's byte range in its shard.
    fn locate(&self, index: usize) -> Result<(Entry, std::ops::Range<usize>)> {
        let e = self
            .entry(index)
            .ok_or_else(|| Error::out_of_range(index, self.sample_name(index)))?;
        // In bounds: check_entries saw every entry inside its shard's size.
        Ok((e, e.offset as usize..(e.offset + e.length) as usize))
    }

    fn corrupt(&self, index: usize, e: &Entry, why: String) -> Error {
        let shard = self.manifest.shards.get(e.shard as usize);
        Error::Sample {
            index,
            file: self.sample_name(index),
            stage: "read",
            kind: SampleErrorKind::Corrupt,
            reason: format!("shard {}: {why}", shard.map_or("?", |s| s.file.as_str())),
        }
    }

    /// `bytes` if they have the record's checksum.
    fn checked<'a>(&self, index: usize, e: Entry, bytes: &'a [u8]) -> Result<(Entry, &'a [u8])> {
        if bytes.len() as u64 != e.length {
            return Err(self.corrupt(index, &e, "record out of bounds".into()));
        }
        let got = crc32(bytes);
        if got != e.crc32 {
            return Err(self.corrupt(
                index,
                &e,
                format!(
                    "checksum mismatch in the record at offset {} ({} bytes): the shard is \
                     corrupted",
                    e.offset, e.length
                ),
            ));
        }
        Ok((e, bytes))
    }

    /// Check every shard's whole-file checksum (reads everything; a remote dataset's
    /// shards are fetched, and checked as they arrive).
    pub fn verify(&self) -> Result<()> {
        match &self.files {
            Files::Mapped(maps) => {
                for (entry, map) in self.manifest.shards.iter().zip(maps) {
                    check_crc(&self.root.join(&entry.file), map, entry.crc32)?;
                }
                Ok(())
            }
            Files::Remote(remote) => remote.verify_all(),
        }
    }
}

/// A shard's header must be a shard's, of the manifest's storage.
pub(crate) fn check_shard(path: &Path, map: &[u8], manifest: &Manifest) -> Result<()> {
    let (code, _) = parse_header(path, map, SHARD_MAGIC, "shard")?;
    if code != manifest.storage.code() {
        return Err(bad(
            path,
            format!(
                "shard storage code {code}, but the manifest says {}",
                manifest.storage.name()
            ),
        ));
    }
    Ok(())
}

/// What the source kind (`crate::source::shards`) reports of an open dataset.
impl Shards {
    /// One line: root, samples, storage, shards, classes.
    pub fn describe(&self) -> String {
        let m = &self.manifest;
        format!(
            "shards {}: {}, {} storage{}, {}, {}",
            self.root.display(),
            crate::spec::count(m.samples, "sample", "samples"),
            m.storage.name(),
            m.quality
                .map_or(String::new(), |q| format!(" (quality {q})")),
            crate::spec::count(m.shards.len() as u64, "shard", "shards"),
            crate::spec::count(m.classes.len() as u64, "class", "classes")
        )
    }

    /// The dataset's root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Samples.
    pub fn len(&self) -> usize {
        self.manifest.samples as usize
    }

    /// Whether it holds no sample (opening refuses such a dataset, so never).
    pub fn is_empty(&self) -> bool {
        self.manifest.samples == 0
    }

    /// What a read yields.
    pub fn spec(&self) -> Spec {
        let label_columns = self.manifest.label_columns;
        match self.manifest.storage {
            Storage::Original | Storage::Jpeg => Spec {
                label_columns,
                ..Spec::encoded()
            },
            Storage::Raw => Spec {
                encoded: false,
                height: self.manifest.fixed_size.map(|s| s[0]),
                width: self.manifest.fixed_size.map(|s| s[1]),
                channels: 3,
                layout: Layout::Hwc,
                dtype: DType::U8,
                label_columns,
                source_pixels: true,
                ..Spec::encoded()
            },
        }
    }

    /// `(class name, label)`.
    pub fn classes(&self) -> &[(String, u32)] {
        &self.manifest.classes
    }

    /// An epoch reads the samples `order`: a dataset in object storage fetches its shards
    /// in that order.
    pub fn epoch_starts(&self, epoch: u64, order: &[usize]) {
        if let Files::Remote(remote) = &self.files {
            remote.start_epoch(epoch, order);
        }
    }

    /// The run reads no epoch after `epoch` (see [`crate::source::Source::last_epoch`]).
    pub fn last_epoch(&self, epoch: u64) {
        if let Files::Remote(remote) = &self.files {
            remote.last_epoch(epoch);
        }
    }

    /// The root-relative path sample `index` was converted from.
    pub fn sample_name(&self, index: usize) -> String {
        self.entry(index)
            .and_then(|e| {
                let start = e.name_offset as usize;
                let bytes = self
                    .names
                    .get(start..start.checked_add(e.name_len as usize)?)?;
                Some(String::from_utf8_lossy(bytes).into_owned())
            })
            .unwrap_or_else(|| format!("<sample {index} out of range>"))
    }
}
