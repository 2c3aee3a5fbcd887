//! Parquet files with an image column, as the Hugging Face Hub stores datasets (`datasets`'
//! `to_parquet`, the Hub's `refs/convert/parquet`): `image` a struct {`bytes`, `path`} (or
//! plain binary), `label` an integer, the class names in the schema's `huggingface`
//! key-value metadata (`info.features.label.names`, `_type: ClassLabel`).
//!
//! Parquet stores a column's values in compressed pages, so an image is not a slice of the
//! file: a Parquet file is always *packed* ([`super::RecordFormat::is_packed`]). It is
//! unpacked once ([`unpack`]) into the cache, streamed row group by row group through the
//! `parquet` crate's low-level column reader (memory: one row group's image column chunk
//! and a batch of its values), into a flat container that [`index`] reads and whose images
//! the source slices, as it slices tars:
//!
//! ```text
//! "IMGFEED-PARQUET1"                 16 bytes
//! classes: u32 LE length, JSON       the class names (a JSON array of strings; may be empty)
//! per row, in file order: label u32 LE, length u64 LE, the image's encoded bytes
//! ```
//!
//! A sample's key is its row number in the file.
//!
//! Where the image column's pages are Snappy or uncompressed, [`super::RecordFormat::in_place`]
//! also locates each image in the file itself ([`super::parquet_pages`]); checked against
//! the copy, that index replaces it (local files: the copy is removed; objects: range mode
//! reads those ranges).

use super::RecordEntry;
use crate::spec::MAX_LABELS;
use bytes::Bytes;
use parquet::basic::Type as Physical;
use parquet::column::reader::{get_column_reader, ColumnReader};
use parquet::data_type::ByteArray;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::serialized_reader::SerializedPageReader;
use std::io::Write;
use std::sync::Arc;

/// The image column of Hugging Face datasets.
pub const DEFAULT_IMAGE_COLUMN: &str = "image";
/// The label column of Hugging Face datasets.
pub const DEFAULT_LABEL_COLUMN: &str = "label";

/// The first bytes of an unpacked file.
pub const MAGIC: &[u8; 16] = b"IMGFEED-PARQUET1";

/// The last bytes of a Parquet file (after its footer and the footer's length).
const MAGIC_END: &[u8; 4] = b"PAR1";

/// Rows read at once from a column.
const BATCH: usize = 64;

/// Why a Parquet file (or its unpacked copy) cannot be read: the row when one is at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParquetError {
    /// The `parquet` crate could not read the file (not Parquet, truncated, a corrupt page).
    #[error("not a readable Parquet file: {0}")]
    Read(#[source] parquet::errors::ParquetError),
    /// The reader gave up on the file without an error (a malformed file it does not
    /// defend against).
    #[error("not a readable Parquet file (the reader failed on it)")]
    Malformed,
    /// No column of that name.
    #[error("no {role} column {name:?} (the file's columns: {found})")]
    MissingColumn {
        /// `image` or `label`.
        role: &'static str,
        /// The name asked for.
        name: String,
        /// The columns there are.
        found: String,
    },
    /// The column is of another type.
    #[error("column {name:?} is {found}, not {expected}")]
    Kind {
        /// The column.
        name: String,
        /// What it must be.
        expected: &'static str,
        /// What it is.
        found: String,
    },
    /// A row without an image (a null, or a struct with `bytes` null: a `path` only).
    #[error("row {row}: the image is null (only images stored in the file are read)")]
    NullImage {
        /// The row in the file (0-based).
        row: u64,
    },
    /// A row without a label.
    #[error("row {row}: the label is null")]
    NullLabel {
        /// The row in the file.
        row: u64,
    },
    /// A label that is not a class number.
    #[error("row {row}: label {value} is not in 0..2^32")]
    Label {
        /// The row in the file.
        row: u64,
        /// The stored label.
        value: i64,
    },
    /// The columns disagree on how many rows there are.
    #[error("row group {group}: the image and label columns hold different row counts")]
    Rows {
        /// The row group.
        group: usize,
    },
    /// Writing the unpacked copy failed.
    #[error("writing the unpacked copy: {0}")]
    Write(#[source] std::io::Error),
    /// A footer or page header whose sizes or counts no true file has (they would make
    /// the `parquet` crate allocate or loop past what the file holds): refused first.
    #[error("not a readable Parquet file: at byte {offset}, {reason}")]
    Damaged {
        /// Where, in the file.
        offset: u64,
        /// What.
        reason: &'static str,
    },
    /// An unpacked copy that is not whole (not written by [`unpack`], or damaged).
    #[error("unpacked copy damaged at byte {offset}: {reason}")]
    Container {
        /// Where it goes wrong.
        offset: u64,
        /// How.
        reason: &'static str,
    },
}

/// Which columns hold a sample's image and label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParquetOptions {
    /// The image column: a struct with a binary `bytes` field, or binary.
    pub image_column: String,
    /// The integer label column.
    pub label_column: String,
}

impl Default for ParquetOptions {
    fn default() -> Self {
        ParquetOptions {
            image_column: DEFAULT_IMAGE_COLUMN.to_string(),
            label_column: DEFAULT_LABEL_COLUMN.to_string(),
        }
    }
}

/// The Parquet format of the `parquet` source kind (see the module).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parquet {
    /// Which columns hold the image and the label.
    pub options: ParquetOptions,
}

impl super::RecordFormat for Parquet {
    type Error = ParquetError;

    fn name(&self) -> &'static str {
        "parquet"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &[".parquet"]
    }

    fn options(&self) -> String {
        format!(
            "image={:?} label={:?}",
            self.options.image_column, self.options.label_column
        )
    }

    fn index(&self, bytes: &[u8]) -> Result<Vec<RecordEntry>, ParquetError> {
        index(bytes)
    }

    fn is_packed(&self, _name: &str, _bytes: &[u8]) -> bool {
        true
    }

    fn unpack(&self, bytes: &[u8], out: &mut dyn Write) -> Result<(), ParquetError> {
        unpack(bytes, &self.options, out)
    }

    fn classes(&self, bytes: &[u8]) -> Vec<(String, u32)> {
        if bytes.starts_with(MAGIC) {
            return classes(bytes);
        }
        // A Parquet file read in place: its own metadata.
        guarded(|| metadata(bytes))
            .map(|meta| class_names(&meta, &self.options.label_column))
            .unwrap_or_default()
            .into_iter()
            .zip(0..)
            .collect()
    }

    fn in_place(&self, bytes: &[u8], unpacked: &[RecordEntry]) -> Option<Vec<RecordEntry>> {
        let spans = guarded(|| Ok(image_spans(bytes, &self.options, unpacked.len()))).ok()??;
        if spans.len() != unpacked.len() {
            return None;
        }
        Some(
            spans
                .into_iter()
                .zip(unpacked)
                .map(|(s, e)| RecordEntry {
                    offset: s.start,
                    len: s.end - s.start,
                    stored: s.stored,
                    labels: e.labels,
                    key: e.key.clone(),
                })
                .collect(),
        )
    }
}

/// Where each row's image lies in the file itself, row group after row group
/// ([`super::parquet_pages`]); `None` when some page is not one it follows, or the row
/// groups do not hold the `rows` the file was read with.
fn image_spans(
    bytes: &[u8],
    options: &ParquetOptions,
    rows: usize,
) -> Option<Vec<super::parquet_pages::ValueSpan>> {
    use super::parquet_pages::{value_spans, Codec};
    use parquet::basic::Compression;
    let meta = metadata(bytes).ok()?;
    let image = find(&meta, "image", &options.image_column, true).ok()?;
    let descr = meta.file_metadata().schema_descr().column(image);
    if descr.physical_type() != Physical::BYTE_ARRAY || descr.max_rep_level() != 0 {
        return None;
    }
    let counts = meta
        .row_groups()
        .iter()
        .map(|rg| usize::try_from(rg.num_rows()).ok())
        .collect::<Option<Vec<usize>>>()?;
    if counts.iter().try_fold(0usize, |a, &n| a.checked_add(n)) != Some(rows) {
        return None;
    }
    let mut out = Vec::with_capacity(rows);
    for rg in meta.row_groups() {
        let chunk = rg.column(image);
        let codec = match chunk.compression() {
            Compression::UNCOMPRESSED => Codec::None,
            Compression::SNAPPY => Codec::Snappy,
            _ => return None,
        };
        let (start, len) = chunk.byte_range();
        let rows = usize::try_from(rg.num_rows()).ok()?;
        let spans = value_spans(
            bytes,
            start..start.checked_add(len)?,
            codec,
            descr.max_def_level(),
            rows,
        )?;
        out.extend(spans);
    }
    Some(out)
}

/// A file's bytes, borrowed, for reading its footer.
struct Borrowed<'a>(&'a [u8]);

impl Length for Borrowed<'_> {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
}

impl ChunkReader for Borrowed<'_> {
    type T = std::io::Cursor<Vec<u8>>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        let rest = usize::try_from(start)
            .ok()
            .and_then(|s| self.0.get(s..))
            .ok_or_else(|| eof(start, 0))?;
        Ok(std::io::Cursor::new(rest.to_vec()))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        slice(self.0, 0, start, length).map(Bytes::copy_from_slice)
    }
}

/// One column chunk's bytes, copied out of the file (the page reader needs them owned),
/// answering reads at the file's offsets.
struct Chunk {
    start: u64,
    bytes: Bytes,
    file_len: u64,
}

impl Length for Chunk {
    fn len(&self) -> u64 {
        self.file_len
    }
}

impl ChunkReader for Chunk {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        use bytes::Buf;
        let at = start
            .checked_sub(self.start)
            .and_then(|a| usize::try_from(a).ok())
            .filter(|&a| a <= self.bytes.len())
            .ok_or_else(|| eof(start, 0))?;
        Ok(self.bytes.slice(at..).reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let at = start
            .checked_sub(self.start)
            .ok_or_else(|| eof(start, length))?;
        slice(&self.bytes, 0, at, length)?;
        let at = at as usize;
        Ok(self.bytes.slice(at..at + length))
    }
}

fn eof(start: u64, length: usize) -> parquet::errors::ParquetError {
    parquet::errors::ParquetError::EOF(format!(
        "{length} bytes at {start}: outside the file or its column chunk"
    ))
}

fn slice(bytes: &[u8], base: u64, start: u64, length: usize) -> parquet::errors::Result<&[u8]> {
    usize::try_from(start.saturating_sub(base))
        .ok()
        .and_then(|s| bytes.get(s..s.checked_add(length)?))
        .ok_or_else(|| eof(start, length))
}

/// The file's footer: its schema and row groups. The footer's thrift is walked first
/// ([`super::thrift`], bounded by its bytes): one that does not hold together (a list
/// longer than the bytes left, nesting past 32) is refused before the `parquet` crate,
/// whose walk of such a footer can take seconds.
fn metadata(bytes: &[u8]) -> Result<ParquetMetaData, ParquetError> {
    let n = bytes.len();
    if n >= 12 && bytes.ends_with(MAGIC_END) {
        let len = u32::from_le_bytes([bytes[n - 8], bytes[n - 7], bytes[n - 6], bytes[n - 5]]);
        let start = (n - 8).checked_sub(len as usize);
        if let Some(footer) = start.and_then(|s| bytes.get(s..n - 8)) {
            let mut c = super::thrift::Compact::new(footer);
            if let Err(e) = c.skip(super::thrift::STRUCT) {
                return Err(ParquetError::Damaged {
                    offset: (n - 8 - footer.len() + e.at()) as u64,
                    reason: "a footer that does not hold together",
                });
            }
        }
    }
    guarded(|| {
        ParquetMetaDataReader::new()
            .parse_and_finish(&Borrowed(bytes))
            .map_err(ParquetError::Read)
    })
}

/// Runs `f`, a panic inside the `parquet` crate on a malformed file becoming
/// [`ParquetError::Malformed`] (the crate does not promise to reject every bad file with
/// an error; a reader of users' files must not abort on one).
fn guarded<T>(f: impl FnOnce() -> Result<T, ParquetError>) -> Result<T, ParquetError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or(Err(ParquetError::Malformed))
}

/// The leaf columns of the file, `(index, dotted path)`.
fn leaves(meta: &ParquetMetaData) -> Vec<(usize, String)> {
    let schema = meta.file_metadata().schema_descr();
    (0..schema.num_columns())
        .map(|i| (i, schema.column(i).path().string()))
        .collect()
}

/// The leaf column holding `name`'s values: `name` itself, or `name.bytes` (an HF image
/// struct).
fn find(
    meta: &ParquetMetaData,
    role: &'static str,
    name: &str,
    image: bool,
) -> Result<usize, ParquetError> {
    let all = leaves(meta);
    let bytes = format!("{name}.bytes");
    all.iter()
        .find(|(_, p)| p == name || (image && *p == bytes))
        .map(|(i, _)| *i)
        .ok_or_else(|| ParquetError::MissingColumn {
            role,
            name: name.to_string(),
            found: all
                .iter()
                .map(|(_, p)| p.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// A reader of column `col` of row group `group`.
fn column(
    bytes: &[u8],
    meta: &ParquetMetaData,
    group: usize,
    col: usize,
) -> Result<ColumnReader, ParquetError> {
    let rg = meta.row_group(group);
    let chunk = rg.column(col);
    let (start, len) = chunk.byte_range();
    let len = usize::try_from(len).map_err(|_| ParquetError::Read(eof(start, usize::MAX)))?;
    let data = slice(bytes, 0, start, len).map_err(ParquetError::Read)?;
    let reader = Chunk {
        start,
        bytes: Bytes::copy_from_slice(data),
        file_len: bytes.len() as u64,
    };
    let descr = meta.file_metadata().schema_descr().column(col);
    let min_value = match descr.physical_type() {
        Physical::BYTE_ARRAY | Physical::INT32 | Physical::FLOAT => 4,
        Physical::INT64 | Physical::DOUBLE => 8,
        _ => 1,
    };
    super::parquet_pages::check_chunk(data, min_value).map_err(|(at, reason)| {
        ParquetError::Damaged {
            offset: start.saturating_add(at as u64),
            reason,
        }
    })?;
    let rows = usize::try_from(rg.num_rows()).map_err(|_| ParquetError::Malformed)?;
    let pages = SerializedPageReader::new(Arc::new(reader), chunk, rows, None)
        .map_err(ParquetError::Read)?;
    Ok(get_column_reader(
        meta.file_metadata().schema_descr().column(col),
        Box::new(pages),
    ))
}

/// Unpack the Parquet file `bytes` into `out` (see the module for the layout).
pub fn unpack(
    bytes: &[u8],
    options: &ParquetOptions,
    out: &mut dyn Write,
) -> Result<(), ParquetError> {
    guarded(|| unpack_unguarded(bytes, options, out))
}

fn unpack_unguarded(
    bytes: &[u8],
    options: &ParquetOptions,
    out: &mut dyn Write,
) -> Result<(), ParquetError> {
    let meta = metadata(bytes)?;
    // The crate asserts (panics) on a negative column offset or size: a lying footer is
    // refused here first, so no input reaches that assert (the fuzz target found it).
    let len = bytes.len() as i64;
    for rg in meta.row_groups() {
        for c in rg.columns() {
            let start = c.dictionary_page_offset().unwrap_or(c.data_page_offset());
            let size = c.compressed_size();
            if start < 0 || size < 0 || start.checked_add(size).is_none_or(|end| end > len) {
                return Err(ParquetError::Malformed);
            }
        }
    }
    let schema = meta.file_metadata().schema_descr();
    let image = find(&meta, "image", &options.image_column, true)?;
    let label = find(&meta, "label", &options.label_column, false)?;
    let image_descr = schema.column(image);
    if image_descr.physical_type() != Physical::BYTE_ARRAY {
        return Err(ParquetError::Kind {
            name: image_descr.path().string(),
            expected: "binary",
            found: image_descr.physical_type().to_string(),
        });
    }
    if image_descr.max_rep_level() != 0 || schema.column(label).max_rep_level() != 0 {
        return Err(ParquetError::Kind {
            name: options.image_column.clone(),
            expected: "one value per row",
            found: "a list".to_string(),
        });
    }
    let names = class_names(&meta, &options.label_column);
    let json = serde_json::to_vec(&names).unwrap_or_default();
    let w = |r: std::io::Result<()>| r.map_err(ParquetError::Write);
    w(out.write_all(MAGIC))?;
    w(out.write_all(&(json.len() as u32).to_le_bytes()))?;
    w(out.write_all(&json))?;
    let image_max = image_descr.max_def_level();
    let label_max = schema.column(label).max_def_level();
    let mut row = 0u64;
    let (mut values, mut defs) = (Vec::<ByteArray>::with_capacity(BATCH), Vec::new());
    let (mut labels, mut label_defs) = (Vec::<i64>::with_capacity(BATCH), Vec::new());
    let (mut ints, mut int_defs) = (Vec::<i32>::new(), Vec::new());
    for group in 0..meta.num_row_groups() {
        let ColumnReader::ByteArrayColumnReader(mut images) = column(bytes, &meta, group, image)?
        else {
            return Err(ParquetError::Malformed);
        };
        let mut labels_reader = column(bytes, &meta, group, label)?;
        loop {
            values.clear();
            defs.clear();
            let (n, _, _) = images
                .read_records(BATCH, Some(&mut defs), None, &mut values)
                .map_err(ParquetError::Read)?;
            if n == 0 {
                break;
            }
            labels.clear();
            label_defs.clear();
            let got = match &mut labels_reader {
                ColumnReader::Int64ColumnReader(r) => {
                    r.read_records(n, Some(&mut label_defs), None, &mut labels)
                }
                ColumnReader::Int32ColumnReader(r) => {
                    ints.clear();
                    int_defs.clear();
                    let got = r.read_records(n, Some(&mut int_defs), None, &mut ints);
                    labels.extend(ints.iter().map(|&v| i64::from(v)));
                    label_defs.extend_from_slice(&int_defs);
                    got
                }
                _ => {
                    let d = schema.column(label);
                    return Err(ParquetError::Kind {
                        name: d.path().string(),
                        expected: "an integer",
                        found: d.physical_type().to_string(),
                    });
                }
            }
            .map_err(ParquetError::Read)?;
            if got.0 != n {
                return Err(ParquetError::Rows { group });
            }
            let (mut vi, mut li) = (values.iter(), labels.iter());
            for i in 0..n {
                let present = |d: &[i16], max: i16| max == 0 || d.get(i) == Some(&max);
                if !present(&defs, image_max) {
                    return Err(ParquetError::NullImage { row });
                }
                if !present(&label_defs, label_max) {
                    return Err(ParquetError::NullLabel { row });
                }
                let (Some(v), Some(&l)) = (vi.next(), li.next()) else {
                    return Err(ParquetError::Rows { group });
                };
                let l = u32::try_from(l).map_err(|_| ParquetError::Label { row, value: l })?;
                let data = v.data();
                w(out.write_all(&l.to_le_bytes()))?;
                w(out.write_all(&(data.len() as u64).to_le_bytes()))?;
                w(out.write_all(data))?;
                row += 1;
            }
        }
    }
    Ok(())
}

/// The class names of `label` in the file's `huggingface` metadata (empty: none there).
fn class_names(meta: &ParquetMetaData, label: &str) -> Vec<String> {
    let Some(text) = meta
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == "huggingface"))
        .and_then(|k| k.value.as_deref())
    else {
        return Vec::new();
    };
    let Ok(json) = serde_json::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    let feature = &json["info"]["features"][label];
    if feature["_type"] != "ClassLabel" {
        return Vec::new();
    }
    feature["names"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The header of an unpacked copy: where its rows start, its class names.
fn header(bytes: &[u8]) -> Result<(usize, &[u8]), ParquetError> {
    let bad = |offset: usize, reason| ParquetError::Container {
        offset: offset as u64,
        reason,
    };
    if !bytes.starts_with(MAGIC) {
        return Err(bad(0, "not an unpacked Parquet file"));
    }
    let at = MAGIC.len();
    let len = bytes
        .get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or(bad(at, "truncated header"))?;
    let json = bytes
        .get(at + 4..at + 4 + len)
        .ok_or(bad(at, "truncated class names"))?;
    Ok((at + 4 + len, json))
}

/// The class names of an unpacked copy, as `(name, label)` (empty when it has none).
pub fn classes(bytes: &[u8]) -> Vec<(String, u32)> {
    header(bytes)
        .ok()
        .and_then(|(_, json)| serde_json::from_slice::<Vec<String>>(json).ok())
        .unwrap_or_default()
        .into_iter()
        .zip(0u32..)
        .collect()
}

/// The index of an unpacked copy: one entry per row, its image's bytes located.
pub fn index(bytes: &[u8]) -> Result<Vec<RecordEntry>, ParquetError> {
    let (mut at, _) = header(bytes)?;
    let mut entries = Vec::new();
    let mut row = 0u64;
    while at < bytes.len() {
        let head = bytes.get(at..at + 12).ok_or(ParquetError::Container {
            offset: at as u64,
            reason: "truncated row header",
        })?;
        let label = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let mut len = [0u8; 8];
        len.copy_from_slice(&head[4..12]);
        let len = u64::from_le_bytes(len);
        let start = at + 12;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| start.checked_add(l))
            .filter(|&e| e <= bytes.len())
            .ok_or(ParquetError::Container {
                offset: at as u64,
                reason: "truncated image",
            })?;
        let mut labels = [0u32; MAX_LABELS];
        labels[0] = label;
        entries.push(RecordEntry {
            stored: super::Stored::Plain,
            offset: start as u64,
            len,
            labels,
            key: row.to_string(),
        });
        row += 1;
        at = end;
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
        std::fs::read(dir.join(name)).expect("fixture")
    }

    #[test]
    fn hf_datasets_file_unpacks_to_its_images_labels_and_class_names() {
        // fixtures/records/make_records.py parquet: three rows in two row groups.
        let file = fixture("records/small.parquet");
        let mut copy = Vec::new();
        unpack(&file, &ParquetOptions::default(), &mut copy).expect("unpacks");
        let entries = index(&copy).expect("indexes");
        let want = [
            ("edge/one_pixel.jpg", 2),
            ("edge/one_pixel.png", 0),
            ("edge/gray.jpg", 1),
        ];
        assert_eq!(entries.len(), want.len());
        for (i, (e, (image, label))) in entries.iter().zip(want).enumerate() {
            let got = &copy[e.offset as usize..(e.offset + e.len) as usize];
            assert_eq!(got, &fixture(image)[..], "{image}");
            assert_eq!(e.labels[0], label);
            assert_eq!(e.key, i.to_string());
        }
        let names: Vec<(String, u32)> = ["a", "b", "c"]
            .iter()
            .zip(0..)
            .map(|(n, l)| (n.to_string(), l))
            .collect();
        assert_eq!(classes(&copy), names);
    }

    /// Each entry's image read from `file` alone.
    fn images_in_place(file: &[u8], entries: &[RecordEntry]) -> Vec<Vec<u8>> {
        entries
            .iter()
            .map(|e| {
                let mut buf = file[e.offset as usize..(e.offset + e.len) as usize].to_vec();
                let n = buf.len();
                let got = e.stored.image(&mut buf, 0..n).expect("decodes");
                buf[got].to_vec()
            })
            .collect()
    }

    #[test]
    fn images_are_read_in_place_from_their_pages() {
        let file = fixture("records/small.parquet");
        let mut copy = Vec::new();
        unpack(&file, &ParquetOptions::default(), &mut copy).expect("unpacks");
        let unpacked = index(&copy).expect("indexes");
        let format = Parquet::default();
        let entries = super::super::RecordFormat::in_place(&format, &file, &unpacked)
            .expect("Snappy pages are read in place");
        assert_eq!(entries.len(), 3);
        for ((e, u), got) in entries
            .iter()
            .zip(&unpacked)
            .zip(images_in_place(&file, &entries))
        {
            assert_eq!(got, copy[u.offset as usize..(u.offset + u.len) as usize]);
            assert_eq!((e.labels, &e.key), (u.labels, &u.key));
            assert!(matches!(e.stored, super::super::Stored::Snappy { .. }));
        }
        // Bytes that are not those indexed (another file under the same name) fail to
        // decode or give other bytes: never a panic.
        let mut other = file.clone();
        for e in &entries {
            other[e.offset as usize] ^= 0xff;
        }
        for e in &entries {
            let mut buf = other[e.offset as usize..(e.offset + e.len) as usize].to_vec();
            let n = buf.len();
            let _ = e.stored.image(&mut buf, 0..n);
        }
    }

    #[test]
    fn row_counts_that_disagree_are_not_read_in_place_and_allocate_nothing_for_them() {
        let file = fixture("records/small.parquet");
        let options = ParquetOptions::default();
        assert_eq!(image_spans(&file, &options, 3).map(|s| s.len()), Some(3));
        assert!(image_spans(&file, &options, 2).is_none());
        assert!(image_spans(&file, &options, 1 << 40).is_none());
        // The page walker itself, told of far more rows than the chunk holds (a footer
        // that lies): no allocation for them, and no index.
        let meta = metadata(&file).expect("footer");
        let image = find(&meta, "image", "image", true).expect("column");
        let chunk = meta.row_group(0).column(image);
        let (start, len) = chunk.byte_range();
        let spans = super::super::parquet_pages::value_spans(
            &file,
            start..start + len,
            super::super::parquet_pages::Codec::Snappy,
            2,
            1 << 40,
        );
        assert!(spans.is_none());
    }

    #[test]
    fn page_headers_and_footers_no_true_file_has_are_refused_first() {
        // Found by the fuzzer (fixtures/fuzzed/README.md): each one refused at once, with
        // what is wrong, before the `parquet` crate allocates or walks for it.
        for (name, says) in [
            (
                "fuzzed/parquet_huge_dictionary.parquet",
                "a dictionary page of more values than its bytes hold",
            ),
            (
                "fuzzed/parquet_footer_past_its_bytes.parquet",
                "a footer that does not hold together",
            ),
            (
                "fuzzed/parquet_page_header_past_its_bytes.parquet",
                "a page header that does not hold together",
            ),
        ] {
            let file = fixture(name);
            let t0 = std::time::Instant::now();
            let e =
                unpack(&file, &ParquetOptions::default(), &mut Vec::new()).expect_err("refused");
            assert!(t0.elapsed() < std::time::Duration::from_secs(5), "{name}");
            assert!(matches!(e, ParquetError::Damaged { .. }), "{name}: {e}");
            assert!(e.to_string().contains(says), "{name}: {e}");
        }
        // A true file's pages and footer pass the same checks.
        let file = fixture("records/small.parquet");
        unpack(&file, &ParquetOptions::default(), &mut Vec::new()).expect("unpacks");
    }

    #[test]
    fn a_missing_column_names_the_files_columns() {
        let file = fixture("records/small.parquet");
        let options = ParquetOptions {
            label_column: "class".to_string(),
            ..ParquetOptions::default()
        };
        let e = unpack(&file, &options, &mut Vec::new()).expect_err("no such column");
        assert_eq!(
            e.to_string(),
            "no label column \"class\" (the file's columns: image.bytes, image.path, label)"
        );
    }

    #[test]
    fn a_damaged_copy_is_an_error_not_a_panic() {
        let file = fixture("records/small.parquet");
        let mut copy = Vec::new();
        unpack(&file, &ParquetOptions::default(), &mut copy).expect("unpacks");
        for cut in [0, 5, MAGIC.len() + 2, copy.len() - 1] {
            assert!(index(&copy[..cut]).is_err(), "cut at {cut}");
        }
        assert!(matches!(
            unpack(
                &file[..file.len() - 9],
                &ParquetOptions::default(),
                &mut Vec::new()
            ),
            Err(ParquetError::Read(_))
        ));
    }
}
