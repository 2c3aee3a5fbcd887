//! Appends records to shard files, rolling to a new shard when one is full, and writes the
//! index, the names and the manifest at the end. Every file is written under a temporary
//! name (`NAME.tmp`) and renamed when all are complete, the manifest last: a folder with a
//! manifest holds a whole dataset, and an interrupted conversion leaves no manifest (its
//! temporary files are removed when the writer is dropped unfinished). With a
//! [`Publish`] (object storage), each finished file is handed to it instead of renamed, and
//! the manifest goes last through it.

use super::format::{
    crc32, header, tmp_name, Entry, FileEntry, Manifest, Slice, Storage, FORMAT, HEADER_LEN,
    INDEX_MAGIC, MANIFEST, SHARD_MAGIC, VERSION,
};
use super::publish::Publish;
use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Default `shard_size`: 1 GB.
pub const DEFAULT_SHARD_SIZE: u64 = 1_000_000_000;

/// File names of one conversion's output: the whole dataset's, or one slice's.
#[derive(Clone, Debug)]
pub struct Names {
    prefix: String,
    slice: Option<(usize, usize)>,
}

impl Names {
    /// Names of a whole dataset (`manifest.json`, `index.bin`, `names.bin`,
    /// `shard-00000.bin`, ...), or, with `slice = Some((id, count))`, of one slice
    /// (`slice-00001-of-00004.json`, `slice-00001-of-00004-index.bin`, ...).
    pub fn new(slice: Option<(usize, usize)>) -> Names {
        let prefix = match slice {
            Some((id, count)) => format!("slice-{id:05}-of-{count:05}-"),
            None => String::new(),
        };
        Names { prefix, slice }
    }
    /// The manifest's name.
    pub fn manifest(&self) -> String {
        match self.slice {
            Some((id, count)) => format!("slice-{id:05}-of-{count:05}.json"),
            None => MANIFEST.to_string(),
        }
    }
    /// The index file's name.
    pub fn index(&self) -> String {
        format!("{}index.bin", self.prefix)
    }
    /// The names file's name.
    pub fn names(&self) -> String {
        format!("{}names.bin", self.prefix)
    }
    /// Shard `n`'s name.
    pub fn shard(&self, n: usize) -> String {
        format!("{}shard-{n:05}.bin", self.prefix)
    }
}

struct OpenShard {
    out: BufWriter<File>,
    tmp: PathBuf,
    name: String,
    size: u64,
    crc: crc32fast::Hasher,
    samples: u64,
}

/// Everything in a manifest that the writer does not work out itself.
#[derive(Clone, Debug)]
pub struct Meta {
    /// JPEG quality (jpeg storage).
    pub quality: Option<u8>,
    /// Label columns.
    pub label_columns: usize,
    /// `(class name, label)`.
    pub classes: Vec<(String, u32)>,
    /// The source.
    pub source: super::format::Origin,
    /// The conversion ops.
    pub ops: serde_json::Value,
    /// The slice written, for a split conversion.
    pub slice: Option<Slice>,
}

/// Writes one dataset (or one slice of one) into a folder.
pub struct ShardWriter {
    dir: PathBuf,
    names_of: Names,
    storage: Storage,
    shard_size: u64,
    cur: Option<OpenShard>,
    shards: Vec<FileEntry>,
    /// Temporary files written so far and their final names.
    done: Vec<(PathBuf, PathBuf)>,
    index: Vec<u8>,
    names: Vec<u8>,
    count: u64,
    /// `None` before the first sample; then the common size, or `Some(None)` once sizes differ.
    size: Option<Option<[usize; 2]>>,
    finished: bool,
    /// Where finished files go, when not renamed in place.
    publish: Option<Box<dyn Publish>>,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl ShardWriter {
    /// Start writing into `dir` (created if needed). Refuses a folder that already holds
    /// this output's manifest.
    pub fn create(dir: &Path, names: Names, storage: Storage, shard_size: u64) -> Result<Self> {
        Self::create_with(dir, names, storage, shard_size, None)
    }

    /// [`ShardWriter::create`], handing every finished file to `publish` when given (`dir`
    /// is then a staging folder, and `publish` checks its own target for a manifest).
    pub fn create_with(
        dir: &Path,
        names: Names,
        storage: Storage,
        shard_size: u64,
        publish: Option<Box<dyn Publish>>,
    ) -> Result<Self> {
        create_out_dir(dir)?;
        let manifest = dir.join(names.manifest());
        if publish.is_none() && manifest.exists() {
            return Err(Error::Dataset {
                path: manifest,
                reason: "already exists: this folder holds a converted dataset (remove it or \
                         choose another --out)"
                    .into(),
            });
        }
        Ok(ShardWriter {
            dir: dir.to_path_buf(),
            names_of: names,
            storage,
            shard_size: shard_size.max(1),
            cur: None,
            shards: Vec::new(),
            done: Vec::new(),
            index: Vec::new(),
            names: Vec::new(),
            count: 0,
            size: None,
            finished: false,
            publish,
        })
    }

    /// Samples appended so far.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// True before the first sample.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn close_shard(&mut self) -> Result<()> {
        if let Some(mut s) = self.cur.take() {
            s.out.flush().map_err(io(&s.tmp))?;
            self.shards.push(FileEntry {
                file: s.name.clone(),
                size: s.size,
                crc32: s.crc.finalize(),
                samples: Some(s.samples),
            });
            drop(s.out);
            self.finished_file(s.tmp, &s.name)?;
        }
        Ok(())
    }

    /// A complete temporary file: to the publisher, or kept for the final rename.
    fn finished_file(&mut self, tmp: PathBuf, name: &str) -> Result<()> {
        match self.publish.as_mut() {
            Some(p) => p.file(tmp, name),
            None => {
                self.done.push((tmp, self.dir.join(name)));
                Ok(())
            }
        }
    }

    fn open_shard(&mut self) -> Result<()> {
        let name = self.names_of.shard(self.shards.len());
        let tmp = tmp_name(&self.dir.join(&name));
        let file = File::create(&tmp).map_err(io(&tmp))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let h = header(SHARD_MAGIC, self.storage.code(), 0);
        out.write_all(&h).map_err(io(&tmp))?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&h);
        self.cur = Some(OpenShard {
            out,
            tmp,
            name,
            size: HEADER_LEN as u64,
            crc,
            samples: 0,
        });
        Ok(())
    }

    /// Append one sample: its stored bytes, image size (0 × 0 when unknown), labels and
    /// name.
    pub fn append(
        &mut self,
        record: &[u8],
        size: (usize, usize),
        labels: [u32; 2],
        name: &str,
    ) -> Result<()> {
        let len = record.len() as u64;
        let full = self
            .cur
            .as_ref()
            .is_some_and(|s| s.samples > 0 && s.size + len > self.shard_size);
        if full {
            self.close_shard()?;
        }
        if self.cur.is_none() {
            self.open_shard()?;
        }
        let shard = self.shards.len() as u32;
        let Some(s) = self.cur.as_mut() else {
            return Err(Error::Internal("shard writer has no open shard".into()));
        };
        let entry = Entry {
            offset: s.size,
            length: len,
            name_offset: self.names.len() as u64,
            shard,
            crc32: crc32(record),
            height: size.0 as u32,
            width: size.1 as u32,
            labels,
            name_len: name.len() as u32,
        };
        s.out.write_all(record).map_err(io(&s.tmp))?;
        s.crc.update(record);
        s.size += len;
        s.samples += 1;
        self.index.extend_from_slice(&entry.to_bytes());
        self.names.extend_from_slice(name.as_bytes());
        self.count += 1;
        let this = [size.0, size.1];
        self.size = Some(match self.size {
            None => Some(this),
            Some(Some(s)) if s == this => Some(s),
            Some(_) => None,
        });
        Ok(())
    }

    fn write_file(&mut self, name: &str, head: Option<[u8; HEADER_LEN]>) -> Result<FileEntry> {
        let tmp = tmp_name(&self.dir.join(name));
        let body = if head.is_some() {
            &self.index
        } else {
            &self.names
        };
        let mut crc = crc32fast::Hasher::new();
        let mut out = BufWriter::new(File::create(&tmp).map_err(io(&tmp))?);
        let mut size = 0u64;
        if let Some(h) = head {
            out.write_all(&h).map_err(io(&tmp))?;
            crc.update(&h);
            size += h.len() as u64;
        }
        out.write_all(body).map_err(io(&tmp))?;
        crc.update(body);
        size += body.len() as u64;
        out.flush().map_err(io(&tmp))?;
        drop(out);
        self.finished_file(tmp, name)?;
        Ok(FileEntry {
            file: name.to_string(),
            size,
            crc32: crc.finalize(),
            samples: None,
        })
    }

    /// Write the index, the names and the manifest, and rename every file to its final
    /// name (the manifest last). Returns the manifest.
    pub fn finish(mut self, meta: Meta) -> Result<Manifest> {
        self.close_shard()?;
        let index_name = self.names_of.index();
        let head = header(INDEX_MAGIC, super::format::ENTRY_LEN as u32, self.count);
        let index = self.write_file(&index_name, Some(head))?;
        let names_name = self.names_of.names();
        let names = self.write_file(&names_name, None)?;
        for (tmp, path) in &self.done {
            std::fs::rename(tmp, path).map_err(io(path))?;
        }
        let manifest = Manifest {
            format: FORMAT.to_string(),
            version: VERSION,
            storage: self.storage,
            quality: meta.quality,
            samples: self.count,
            label_columns: meta.label_columns,
            classes: meta.classes,
            fixed_size: match (self.storage, self.size) {
                (Storage::Raw, Some(s)) => s,
                _ => None,
            },
            source: meta.source,
            ops: meta.ops,
            index,
            names,
            shards: std::mem::take(&mut self.shards),
            slice: meta.slice,
        };
        let name = self.names_of.manifest();
        match self.publish.as_mut() {
            Some(p) => {
                let text = serde_json::to_vec_pretty(&manifest).map_err(|e| Error::Io {
                    path: self.dir.join(&name),
                    source: std::io::Error::other(e),
                })?;
                p.finish(&name, text)?;
            }
            None => manifest.write(&self.dir.join(name))?,
        }
        self.finished = true;
        Ok(manifest)
    }
}

impl Drop for ShardWriter {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // Unfinished: remove what was written (best effort), leaving no partial dataset.
        if let Some(s) = self.cur.take() {
            drop(s.out);
            let _ = std::fs::remove_file(&s.tmp);
        }
        for (tmp, _) in &self.done {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Create the output folder `dir` (and its parents), or say in one message why it cannot
/// be: a file already there, or the system's reason (permissions, a read-only disk).
pub(crate) fn create_out_dir(dir: &std::path::Path) -> crate::Result<()> {
    let refuse = |source: std::io::Error| crate::Error::Io {
        path: dir.to_path_buf(),
        source,
    };
    if dir.exists() && !dir.is_dir() {
        return Err(refuse(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "the output folder cannot be created: a file of that name is there",
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        refuse(std::io::Error::new(
            e.kind(),
            format!("the output folder cannot be created: {e}"),
        ))
    })
}
