//! Writes one file of a MindRecord group, with the `.db` index MindSpore's `MindDataset`
//! needs beside it, in the layout [`super`] reads: schema `data` bytes, `label` int32,
//! `file_name` string; MindSpore's default header (16 MiB) and page (32 MiB) sizes. Pages
//! are numbered as they fill and written in that order (the unused tail of a page is a
//! hole: sparse on file systems that have them, as MindSpore's own files are).

use super::super::sqlite::{self, Cell, Table};
use super::header::{BLOB_PAGE, RAW_PAGE};
use serde_json::json;
use std::io::{Seek, SeekFrom, Write};

/// MindSpore's default header size.
pub const HEADER_SIZE: u64 = 1 << 24;
/// MindSpore's default page size: the largest sample a page holds.
pub const PAGE_SIZE: u64 = 1 << 25;

/// A MindRecord file that cannot be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// Writing the file failed.
    #[error("writing the MindRecord file")]
    Io(#[from] std::io::Error),
    /// A sample larger than a page.
    #[error("a sample of {bytes} bytes does not fit in a MindRecord page ({page} bytes)")]
    TooLarge {
        /// The sample's bytes (with its length field).
        bytes: u64,
        /// The page size.
        page: u64,
    },
    /// A label MindRecord's int32 column cannot hold.
    #[error("label {0} does not fit MindRecord's int32 label column")]
    Label(u32),
    /// So many pages that the header outgrows its room.
    #[error("the header ({0} bytes) outgrew MindRecord's header size")]
    Header(usize),
    /// The `.db` index.
    #[error("the .db index")]
    Db(#[from] sqlite::RowTooLarge),
}

/// A page being filled, and the pages already written.
#[derive(Default)]
struct Open {
    buf: Vec<u8>,
    /// The row groups starting in this raw page: (group, offset).
    groups: Vec<(u64, u64)>,
    first_row: u64,
}

/// Where one row went: (blob page seq, blob offsets, raw page seq, raw offsets, group).
struct RowAt {
    blob_page: usize,
    blob: (u64, u64),
    raw_page: usize,
    raw: (u64, u64),
    group: u64,
}

/// One file of a MindRecord group being written.
pub struct FileWriter<W: Write + Seek> {
    out: W,
    shard_id: u64,
    sealed: bool,
    pages: Vec<serde_json::Value>,
    /// Page ids of the blob pages and raw pages, in the order each kind was written.
    blob_ids: Vec<u64>,
    raw_ids: Vec<u64>,
    blob: Open,
    raw: Open,
    rows: Vec<RowAt>,
    next_id: u64,
    scratch: Vec<u8>,
}

impl<W: Write + Seek> FileWriter<W> {
    /// A writer of file `shard_id` of a group, into `out` (the group's names are given
    /// to [`FileWriter::finish`]: a writer splitting samples by size learns them last).
    pub fn new(out: W, shard_id: u64) -> Self {
        let raw = Open {
            groups: vec![(0, 0)],
            ..Open::default()
        };
        FileWriter {
            out,
            shard_id,
            sealed: false,
            pages: Vec::new(),
            blob_ids: Vec::new(),
            raw_ids: Vec::new(),
            blob: Open::default(),
            raw,
            rows: Vec::new(),
            next_id: 0,
            scratch: Vec::new(),
        }
    }

    fn group(&self) -> u64 {
        self.blob_ids.len() as u64
    }

    /// Appends one sample.
    pub fn write(&mut self, data: &[u8], label: u32, file_name: &str) -> Result<(), WriteError> {
        if self.sealed {
            return Err(WriteError::Io(std::io::Error::other(
                "a sample written to a sealed MindRecord file",
            )));
        }
        let label_i32 = i32::try_from(label).map_err(|_| WriteError::Label(label))?;
        let blob_len = 8 + data.len() as u64;
        self.scratch.clear();
        raw_row(&mut self.scratch, file_name, label_i32);
        let raw_len = 8 + self.scratch.len() as u64;
        for n in [blob_len, raw_len] {
            if n > PAGE_SIZE {
                return Err(WriteError::TooLarge {
                    bytes: n,
                    page: PAGE_SIZE,
                });
            }
        }
        if self.blob.buf.len() as u64 + blob_len > PAGE_SIZE {
            self.close_blob()?;
            // The next row group starts here in the raw page.
            let (g, at) = (self.group(), self.raw.buf.len() as u64);
            self.raw.groups.push((g, at));
        }
        if self.raw.buf.len() as u64 + raw_len > PAGE_SIZE {
            self.close_raw()?;
            self.raw.groups.push((self.group(), 0));
        }
        let row = self.rows.len() as u64;
        if self.blob.buf.is_empty() {
            self.blob.first_row = row;
        }
        let b0 = self.blob.buf.len() as u64;
        self.blob
            .buf
            .extend_from_slice(&(data.len() as u64).to_le_bytes());
        self.blob.buf.extend_from_slice(data);
        let r0 = self.raw.buf.len() as u64;
        self.raw
            .buf
            .extend_from_slice(&(self.scratch.len() as u64).to_le_bytes());
        self.raw.buf.extend_from_slice(&self.scratch);
        self.rows.push(RowAt {
            blob_page: self.blob_ids.len(),
            blob: (b0, b0 + blob_len),
            raw_page: self.raw_ids.len(),
            raw: (r0, r0 + raw_len),
            group: self.group(),
        });
        Ok(())
    }

    fn put_page(&mut self, buf: &[u8]) -> Result<u64, WriteError> {
        let id = self.next_id;
        self.next_id += 1;
        self.out
            .seek(SeekFrom::Start(HEADER_SIZE + id * PAGE_SIZE))?;
        self.out.write_all(buf)?;
        Ok(id)
    }

    fn close_blob(&mut self) -> Result<(), WriteError> {
        let buf = std::mem::take(&mut self.blob.buf);
        let id = self.put_page(&buf)?;
        let end = self.rows.len() as u64;
        self.pages.push(json!({
            "end_row_id": end,
            "page_id": id,
            "page_size": buf.len(),
            "page_type": BLOB_PAGE,
            "page_type_id": self.group(),
            "row_group_ids": [{"id": 0, "offset": 0}],
            "shard_id": self.shard_id,
            "start_row_id": self.blob.first_row,
        }));
        self.blob_ids.push(id);
        self.blob.buf = buf;
        self.blob.buf.clear();
        Ok(())
    }

    fn close_raw(&mut self) -> Result<(), WriteError> {
        let buf = std::mem::take(&mut self.raw.buf);
        let id = self.put_page(&buf)?;
        let groups: Vec<_> = self
            .raw
            .groups
            .drain(..)
            .map(|(g, o)| json!({"id": g, "offset": o}))
            .collect();
        self.pages.push(json!({
            "end_row_id": 0,
            "page_id": id,
            "page_size": buf.len(),
            "page_type": RAW_PAGE,
            "page_type_id": self.raw_ids.len(),
            "row_group_ids": groups,
            "shard_id": self.shard_id,
            "start_row_id": 0,
        }));
        self.raw_ids.push(id);
        self.raw.buf = buf;
        self.raw.buf.clear();
        Ok(())
    }

    /// Samples written so far.
    pub fn rows(&self) -> u64 {
        self.rows.len() as u64
    }

    /// Bytes the file takes so far (its pages, and the header's room).
    pub fn size(&self) -> u64 {
        HEADER_SIZE + self.next_id * PAGE_SIZE + (self.blob.buf.len() + self.raw.buf.len()) as u64
    }

    /// Writes the last pages and lets go of the page buffers: nothing more is written but
    /// the header ([`FileWriter::finish`]).
    pub fn seal(&mut self) -> Result<(), WriteError> {
        if self.sealed {
            return Ok(());
        }
        if !self.blob.buf.is_empty() || self.blob_ids.is_empty() {
            self.close_blob()?;
        }
        if !self.raw.buf.is_empty() || self.raw_ids.is_empty() {
            self.close_raw()?;
        }
        self.blob.buf = Vec::new();
        self.raw.buf = Vec::new();
        self.scratch = Vec::new();
        self.sealed = true;
        Ok(())
    }

    /// Writes the header, naming the group's files `addresses` (in order; this one is
    /// `addresses[shard_id]`); returns the output and the bytes of its `.db` index (to be
    /// written as `<file>.db`).
    pub fn finish(mut self, addresses: &[String]) -> Result<(W, Vec<u8>), WriteError> {
        self.seal()?;
        let header = json!({
            "header_size": HEADER_SIZE,
            "index_fields": [],
            "page": self.pages,
            "page_size": PAGE_SIZE,
            "compression_size": 0,
            "schema": [{
                "blob_fields": ["data"],
                "desc": "imgfeed",
                "schema": {
                    "data": {"type": "bytes"},
                    "file_name": {"type": "string"},
                    "label": {"type": "int32"},
                },
            }],
            "shard_addresses": addresses,
            "shard_id": self.shard_id,
            "statistics": [],
            "version": "3.0",
        });
        let text = serde_json::to_vec(&header).map_err(std::io::Error::from)?;
        if 8 + text.len() as u64 > HEADER_SIZE {
            return Err(WriteError::Header(text.len()));
        }
        self.out.seek(SeekFrom::Start(0))?;
        self.out.write_all(&(text.len() as u64).to_le_bytes())?;
        self.out.write_all(&text)?;
        self.out.flush()?;
        let name = addresses
            .get(self.shard_id as usize)
            .cloned()
            .unwrap_or_default();
        let db = self.db(name)?;
        Ok((self.out, db))
    }

    /// The `.db` MindSpore's reader looks rows up in: the file's name, and per row its
    /// raw and blob pages and offsets.
    fn db(&self, name: String) -> Result<Vec<u8>, WriteError> {
        let rows = self
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                [
                    i as u64,
                    self.raw_ids[r.raw_page],
                    r.raw.0,
                    r.raw.1,
                    r.group,
                    self.blob_ids[r.blob_page],
                    r.blob.0,
                    r.blob.1,
                ]
                .into_iter()
                .map(|v| Cell::Int(v as i64))
                .collect()
            })
            .collect();
        Ok(sqlite::database(&[
            Table {
                name: "INDEXES".into(),
                sql: "CREATE TABLE INDEXES(  ROW_ID               INT  NOT NULL, PAGE_ID_RAW          INT  NOT NULL, PAGE_OFFSET_RAW      INT  NOT NULL, PAGE_OFFSET_RAW_END  INT  NOT NULL, ROW_GROUP_ID         INT  NOT NULL, PAGE_ID_BLOB         INT  NOT NULL, PAGE_OFFSET_BLOB     INT  NOT NULL, PAGE_OFFSET_BLOB_END INT  NOT NULL)".into(),
                rows,
            },
            Table {
                name: "SHARD_NAME".into(),
                sql: "CREATE TABLE SHARD_NAME(NAME TEXT NOT NULL)".into(),
                rows: vec![vec![Cell::Text(name)]],
            },
        ])?)
    }
}

/// A raw row: the MessagePack map `{"file_name": …, "label": …}`, keys sorted as
/// MindSpore writes them.
fn raw_row(out: &mut Vec<u8>, file_name: &str, label: i32) {
    out.push(0x82);
    str(out, "file_name");
    str(out, file_name);
    str(out, "label");
    match label {
        0..=0x7F => out.push(label as u8),
        -32..=-1 => out.push(label as i8 as u8),
        0x80..=0xFF => out.extend_from_slice(&[0xCC, label as u8]),
        0x100..=0xFFFF => {
            out.push(0xCD);
            out.extend_from_slice(&(label as u16).to_be_bytes());
        }
        0x1_0000.. => {
            out.push(0xCE);
            out.extend_from_slice(&(label as u32).to_be_bytes());
        }
        _ => {
            out.push(0xD2);
            out.extend_from_slice(&label.to_be_bytes());
        }
    }
}

fn str(out: &mut Vec<u8>, s: &str) {
    let n = s.len();
    match n {
        0..=31 => out.push(0xA0 | n as u8),
        32..=0xFF => out.extend_from_slice(&[0xD9, n as u8]),
        0x100..=0xFFFF => {
            out.push(0xDA);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        _ => {
            out.push(0xDB);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
    }
    out.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::super::{group, index, read_header, MindRecordOptions};
    use super::*;

    #[test]
    fn what_is_written_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let names = vec!["g.mindrecord0".to_string(), "g.mindrecord1".to_string()];
        let samples: Vec<(Vec<u8>, u32, String)> = (0..7u32)
            .map(|i| {
                (
                    vec![i as u8; 100 + i as usize * 50],
                    i * 40,
                    format!("c/{i}.jpg"),
                )
            })
            .collect();
        for (k, chunk) in samples.chunks(4).enumerate() {
            let f = std::fs::File::create(dir.path().join(&names[k])).unwrap();
            let mut w = FileWriter::new(f, k as u64);
            for (d, l, n) in chunk {
                w.write(d, *l, n).unwrap();
            }
            let (_, db) = w.finish(&names).unwrap();
            std::fs::write(dir.path().join(format!("{}.db", names[k])), db).unwrap();
        }
        let p1 = dir.path().join(&names[1]);
        let b = std::fs::read(&p1).unwrap();
        let files = group(&read_header(&b).unwrap(), &p1).unwrap();
        let mut got = Vec::new();
        for f in files {
            let b = std::fs::read(&f).unwrap();
            for e in index(&b, &MindRecordOptions::default()).unwrap() {
                got.push((
                    b[e.offset as usize..(e.offset + e.len) as usize].to_vec(),
                    e.labels[0],
                    e.key,
                ));
            }
        }
        assert_eq!(got, samples);
    }
}
