//! MindSpore's MindRecord files, read from the file alone (its JSON header and page table),
//! as `mindspore.mindrecord.FileWriter` writes them.
//!
//! The layout (read from MindSpore's `shard_header`, `shard_page`, `shard_column` and
//! `shard_writer`, and from files its writer wrote):
//!
//! - `u64 LE` header length, the JSON header ([`header`]), zeros up to `header_size`; then
//!   pages of `page_size` bytes, page `i` at `header_size + i × page_size`.
//! - Rows are split into row groups. Each row group's blobs fill one `BLOB_DATA` page
//!   (`page_type_id` = the group, rows `start_row_id..end_row_id`): per row `u64 LE` length,
//!   then the blob — the one blob column's bytes, or, with several blob columns, each as
//!   `u64 BE` length + bytes in `blob_fields` order.
//! - The rows' scalar columns lie in `RAW_DATA` pages: per row `u64 LE` length + a
//!   MessagePack map ([`msgpack`]); a raw page's `row_group_ids` say where each group's rows
//!   start in it (a group's rows may continue on the next raw page).
//!
//! MindSpore also writes a SQLite `.db` beside each file (the same row → page offsets, plus
//! the index fields for its searches). The file alone says everything a reader needs, so
//! imgfeed neither needs nor reads the `.db`: no SQLite in the build for reading.
//!
//! A group written with `shard_num > 1` is `name0 … nameN-1`; every file's header lists the
//! group ([`Header::shard_addresses`]) and MindSpore reads the whole group, in that order,
//! from any one of its names: [`group`] gives the names, the source reads each file.

pub mod header;
pub mod msgpack;
pub mod writer;

use super::RecordEntry;
use crate::spec::MAX_LABELS;
pub use header::{ColumnDesc, Header, PageDesc, SchemaDesc};
use msgpack::{MsgpackError, Scalar};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The columns MindSpore's examples write an image dataset with.
pub const DEFAULT_IMAGE_COLUMN: &str = "data";
/// The class label column (int32 or int64).
pub const DEFAULT_LABEL_COLUMN: &str = "label";
/// The column naming the sample in messages (a string column; optional).
pub const DEFAULT_NAME_COLUMN: &str = "file_name";

/// Which columns hold a sample's image, label and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MindRecordOptions {
    /// A `bytes` column holding the encoded image.
    pub image_column: String,
    /// An `int32`/`int64` scalar column holding the class label.
    pub label_column: String,
    /// A `string` column naming the sample; when the schema has none, rows are named by
    /// number.
    pub name_column: String,
}

impl Default for MindRecordOptions {
    fn default() -> Self {
        MindRecordOptions {
            image_column: DEFAULT_IMAGE_COLUMN.to_string(),
            label_column: DEFAULT_LABEL_COLUMN.to_string(),
            name_column: DEFAULT_NAME_COLUMN.to_string(),
        }
    }
}

/// What is wrong with a MindRecord file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MindRecordError {
    /// Shorter than the 8-byte header length, or than the header it announces.
    #[error("not a MindRecord file: header of {header} bytes announced, the file has {file}")]
    Short {
        /// Header bytes announced.
        header: u64,
        /// File size.
        file: u64,
    },
    /// The header is not MindRecord's JSON.
    #[error("not a MindRecord header")]
    Json(#[source] serde_json::Error),
    /// The header's sizes contradict each other.
    #[error("the header lies: {0}")]
    Header(&'static str),
    /// A column the options name is missing or of the wrong type.
    #[error("column {column:?}: {reason}")]
    Column {
        /// The column.
        column: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// A page lies outside the file or overflows its size.
    #[error("the header lies: page {page} ({reason})")]
    Page {
        /// The page's id.
        page: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// A row group's pages disagree.
    #[error("the header lies: row group {group} ({reason})")]
    Group {
        /// The row group.
        group: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// A row's blob or raw data is damaged.
    #[error("row {row}: {reason}")]
    Row {
        /// The row (0-based in the file).
        row: u64,
        /// What is wrong.
        reason: String,
    },
    /// A row's raw columns are not MessagePack.
    #[error("row {row}: raw columns damaged")]
    Raw {
        /// The row.
        row: u64,
        /// The reader's error.
        #[source]
        source: MsgpackError,
    },
}

/// Parses the header of a MindRecord file (its first bytes: at least the header length and
/// the JSON; the whole file does).
pub fn read_header(bytes: &[u8]) -> Result<Header, MindRecordError> {
    let err = |fault| fault;
    let size = bytes.len() as u64;
    let announced = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        .ok_or(err(MindRecordError::Short {
            header: 8,
            file: size,
        }))?;
    if announced > size.saturating_sub(8) {
        return Err(err(MindRecordError::Short {
            header: announced.saturating_add(8),
            file: size,
        }));
    }
    let json = &bytes[8..8 + announced as usize];
    let h: Header = serde_json::from_slice(json).map_err(|e| err(MindRecordError::Json(e)))?;
    if h.header_size < 8 + announced {
        return Err(err(MindRecordError::Header(
            "header_size is smaller than the header",
        )));
    }
    if h.page_size == 0 {
        return Err(err(MindRecordError::Header("page_size is 0")));
    }
    if h.shard_addresses.is_empty() {
        return Err(err(MindRecordError::Header("shard_addresses is empty")));
    }
    Ok(h)
}

/// The files of the group `file` belongs to, in MindSpore's order: the header's
/// `shard_addresses`, which are file names in the same folder.
pub fn group(header: &Header, file: &Path) -> Result<Vec<PathBuf>, MindRecordError> {
    let dir = file.parent().unwrap_or(Path::new(""));
    header
        .shard_addresses
        .iter()
        .map(|a| {
            // MindSpore writes bare names; refuse anything that would leave the folder.
            let name = Path::new(a);
            match (name.file_name(), name.components().count()) {
                (Some(n), 1) => Ok(dir.join(n)),
                _ => Err(MindRecordError::Header(
                    "shard_addresses holds a path, not a file name",
                )),
            }
        })
        .collect()
}

/// Where a row's image lies inside its blob.
#[derive(Clone, Copy)]
enum BlobLayout {
    /// The only blob column: the whole blob.
    Whole,
    /// Column `i` of several, each `u64 BE` length + bytes.
    Field(usize),
}

/// The columns checked against the schema.
struct Columns {
    blob: BlobLayout,
    name: bool,
}

fn columns(h: &Header, opts: &MindRecordOptions) -> Result<Columns, MindRecordError> {
    let col = |c: &str, reason: &str| MindRecordError::Column {
        column: c.to_string(),
        reason: reason.to_string(),
    };
    let [schema] = h.schema.as_slice() else {
        return Err(MindRecordError::Header(
            "the header holds no schema, or several",
        ));
    };
    let image = schema
        .schema
        .get(&opts.image_column)
        .ok_or_else(|| col(&opts.image_column, "not in the file's schema"))?;
    if image.kind != "bytes" {
        return Err(col(
            &opts.image_column,
            &format!("is {}, not bytes", image.kind),
        ));
    }
    let at = schema
        .blob_fields
        .iter()
        .position(|f| *f == opts.image_column)
        .ok_or(MindRecordError::Header(
            "a bytes column is not among blob_fields",
        ))?;
    let blob = if schema.blob_fields.len() == 1 {
        BlobLayout::Whole
    } else {
        BlobLayout::Field(at)
    };
    let label = schema
        .schema
        .get(&opts.label_column)
        .ok_or_else(|| col(&opts.label_column, "not in the file's schema"))?;
    if !matches!(label.kind.as_str(), "int32" | "int64") || label.shape.is_some() {
        return Err(col(
            &opts.label_column,
            &format!("is {}, not an int32/int64 scalar", label.kind),
        ));
    }
    if schema.blob_fields.contains(&opts.label_column) {
        return Err(MindRecordError::Header(
            "a scalar column is among blob_fields",
        ));
    }
    let name = schema
        .schema
        .get(&opts.name_column)
        .is_some_and(|c| c.kind == "string" && c.shape.is_none());
    Ok(Columns { blob, name })
}

fn u64_le(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))
}

/// A page's used bytes, checked to lie in the file: `(start, end)`.
fn page_span(h: &Header, p: &PageDesc, file_len: u64) -> Result<(u64, u64), MindRecordError> {
    let page = |reason| MindRecordError::Page {
        page: p.page_id,
        reason,
    };
    if p.page_size > h.page_size {
        return Err(page("uses more bytes than page_size"));
    }
    let start = p
        .page_id
        .checked_mul(h.page_size)
        .and_then(|o| o.checked_add(h.header_size))
        .ok_or(page("lies past any file"))?;
    let end = start
        .checked_add(p.page_size)
        .ok_or(page("lies past any file"))?;
    if end > file_len {
        return Err(page("lies past the end of the file"));
    }
    Ok((start, end))
}

/// The image's `(offset, len)` inside one row's blob at `blob_start` (file offsets).
fn image_in_blob(
    bytes: &[u8],
    start: u64,
    len: u64,
    layout: BlobLayout,
) -> Result<(u64, u64), String> {
    match layout {
        BlobLayout::Whole => Ok((start, len)),
        BlobLayout::Field(i) => {
            let mut pos = start;
            let end = start + len;
            for k in 0..=i {
                if end - pos < 8 {
                    return Err("blob column lengths run past the blob".into());
                }
                let n = u64::from_be_bytes(
                    bytes[pos as usize..pos as usize + 8]
                        .try_into()
                        .unwrap_or([0; 8]),
                );
                pos += 8;
                if n > end - pos {
                    return Err("a blob column runs past the blob".into());
                }
                if k == i {
                    return Ok((pos, n));
                }
                pos += n;
            }
            Err("blob column not found".into())
        }
    }
}

/// The index of one MindRecord file: every row's image (where it lies in the file) and
/// label, rows in the file's order (row id). `file` names the file in errors.
pub fn index(bytes: &[u8], opts: &MindRecordOptions) -> Result<Vec<RecordEntry>, MindRecordError> {
    let h = read_header(bytes)?;
    index_with_header(bytes, &h, opts)
}

/// The MindRecord format of the `mindrecord` source kind (see the module).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MindRecord {
    /// Which columns hold the image, label and name.
    pub options: MindRecordOptions,
}

impl super::RecordFormat for MindRecord {
    type Error = MindRecordError;

    fn name(&self) -> &'static str {
        "mindrecord"
    }

    /// `.mindrecord`; the files of a group (`.mindrecord0`, `.mindrecord1`, …) are
    /// recognised by [`is_mindrecord_name`].
    fn extensions(&self) -> &'static [&'static str] {
        &[".mindrecord"]
    }

    fn options(&self) -> String {
        let o = &self.options;
        format!(
            "image={:?} label={:?} name={:?}",
            o.image_column, o.label_column, o.name_column
        )
    }

    fn index(&self, bytes: &[u8]) -> Result<Vec<RecordEntry>, MindRecordError> {
        index(bytes, &self.options)
    }
}

/// Whether a file name is a MindRecord file's: `NAME.mindrecord` or, in a group,
/// `NAME.mindrecordN` (never its `.db`).
pub fn is_mindrecord_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    match lower.rfind(".mindrecord") {
        Some(at) => lower[at + ".mindrecord".len()..]
            .bytes()
            .all(|b| b.is_ascii_digit()),
        None => false,
    }
}

fn index_with_header(
    bytes: &[u8],
    h: &Header,
    opts: &MindRecordOptions,
) -> Result<Vec<RecordEntry>, MindRecordError> {
    let cols = columns(h, opts)?;
    let file_len = bytes.len() as u64;
    let group_err = |group, reason| MindRecordError::Group { group, reason };

    // Raw segments of each row group, in page order.
    let mut raw: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    let mut raw_pages: Vec<&PageDesc> = h
        .page
        .iter()
        .filter(|p| p.page_type == header::RAW_PAGE)
        .collect();
    raw_pages.sort_by_key(|p| p.page_id);
    for p in raw_pages {
        let (start, _) = page_span(h, p, file_len)?;
        for (k, g) in p.row_group_ids.iter().enumerate() {
            let seg_end = p.row_group_ids.get(k + 1).map_or(p.page_size, |n| n.offset);
            if g.offset > seg_end || seg_end > p.page_size {
                return Err(MindRecordError::Page {
                    page: p.page_id,
                    reason: "row group offsets out of order or past the page",
                });
            }
            raw.entry(g.id)
                .or_default()
                .push((start + g.offset, start + seg_end));
        }
    }

    let mut blobs: Vec<&PageDesc> = h
        .page
        .iter()
        .filter(|p| p.page_type == header::BLOB_PAGE)
        .collect();
    blobs.sort_by_key(|p| p.page_type_id);
    let mut out = Vec::new();
    let mut next_row = 0u64;
    for p in blobs {
        let group = p.page_type_id;
        if p.start_row_id != next_row || p.end_row_id < p.start_row_id {
            return Err(group_err(group, "row ids not contiguous"));
        }
        let (start, end) = page_span(h, p, file_len)?;
        let mut segs = raw.remove(&group).unwrap_or_default().into_iter();
        let mut seg = segs.next().unwrap_or((0, 0));
        let mut pos = start;
        for row in p.start_row_id..p.end_row_id {
            // The blob.
            let row_err = |reason: String| MindRecordError::Row { row, reason };
            if end - pos < 8 {
                return Err(group_err(group, "fewer blobs than its rows"));
            }
            let len = u64_le(&bytes[pos as usize..pos as usize + 8]);
            pos += 8;
            if len > end - pos {
                return Err(row_err(format!("blob of {len} bytes runs past its page")));
            }
            let (offset, image_len) = image_in_blob(bytes, pos, len, cols.blob).map_err(row_err)?;
            pos += len;
            // The raw row: the next one of the group's segments.
            while seg.1 - seg.0 < 8 {
                if seg.1 != seg.0 {
                    return Err(row_err("raw row length cut by the end of its page".into()));
                }
                seg = segs
                    .next()
                    .ok_or_else(|| group_err(group, "fewer raw rows than its rows"))?;
            }
            let rlen = u64_le(&bytes[seg.0 as usize..seg.0 as usize + 8]);
            if rlen > seg.1 - seg.0 - 8 {
                return Err(row_err(format!(
                    "raw row of {rlen} bytes runs past its page"
                )));
            }
            let r = &bytes[(seg.0 + 8) as usize..(seg.0 + 8 + rlen) as usize];
            seg.0 += 8 + rlen;
            let label = match msgpack::column(r, &opts.label_column) {
                Ok(Some(Scalar::Int(v))) => {
                    u32::try_from(v).map_err(|_| row_err(format!("label {v} is not in 0..2^32")))?
                }
                Ok(_) => {
                    return Err(row_err(format!(
                        "no integer in column {:?}",
                        opts.label_column
                    )))
                }
                Err(source) => return Err(MindRecordError::Raw { row, source }),
            };
            let key = match cols.name.then(|| msgpack::column(r, &opts.name_column)) {
                Some(Ok(Some(Scalar::Str(s)))) => String::from_utf8_lossy(s).into_owned(),
                _ => row.to_string(),
            };
            let mut labels = [0u32; MAX_LABELS];
            labels[0] = label;
            out.push(RecordEntry {
                stored: crate::formats::Stored::Plain,
                offset,
                len: image_len,
                labels,
                key,
            });
        }
        if seg.0 != seg.1 || segs.next().is_some() {
            return Err(group_err(group, "more raw rows than its rows"));
        }
        next_row = p.end_row_id;
    }
    if let Some((&group, _)) = raw.iter().next() {
        return Err(group_err(group, "raw rows without a blob page"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
