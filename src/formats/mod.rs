//! Container formats that other tools write (WebDataset tars, TFRecord, MindRecord,
//! Parquet), as pure parsers over a file's bytes: no I/O, no stores, no decoding.
//!
//! Each format is one [`RecordFormat`]: given the whole bytes of one of its files, it
//! builds the file's index, one [`RecordEntry`] per sample, locating the sample's encoded
//! image inside those bytes (so a read is a slice of a memory map or of a cached object)
//! with its labels. Its errors are its own typed enum naming the member or record and
//! why. The generic source over a list of such files, with the index kept on disk, is
//! `crate::source::record_files`.
//!
//! `tar.rs`: WebDataset. `parquet.rs`: Parquet files with an image column (the Hugging Face
//! Hub's), unpacked once into a flat copy that is indexed; `parquet_pages.rs` (with
//! `thrift.rs`, its page headers, and `snappy.rs`, its codec read from the middle) finds
//! each image in the file itself, for range reads. `tfrecord.rs`: TensorFlow's TFRecord of `tf.train.Example`s
//! (CRC-32C-checked frames, `crc32c.rs`; the examples read by the small wire reader
//! `protobuf.rs`; gzip'd files unpacked once). `mindrecord/`: MindSpore's MindRecord (its
//! JSON header and page table, the raw rows' MessagePack; the group a file belongs to; the
//! writer of `imgfeed convert --format mindrecord` and its `.db`, through `sqlite.rs`).

use crate::spec::MAX_LABELS;

pub mod crc32c;
pub mod mindrecord;
pub mod parquet;
pub mod parquet_pages;
pub mod protobuf;
pub mod snappy;
pub mod sqlite;
pub mod tar;
pub mod tfrecord;
pub mod thrift;

/// How a sample's encoded image is stored in its byte range of the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stored {
    /// The range is the image.
    #[default]
    Plain,
    /// The range is part of a Snappy stream (a Parquet page): from its start, `lead`
    /// bytes of literal and then whole elements, decoding to `skip` bytes before the
    /// image's `len` ([`snappy::decode_within`]).
    Snappy {
        /// Literal bytes before the first element's tag.
        lead: u32,
        /// Output bytes before the image.
        skip: u32,
        /// The image's length.
        len: u32,
    },
}

impl Stored {
    /// The image, given its range's bytes at `buf[input]`: `input` itself when plain,
    /// else decoded and appended to `buf`.
    pub fn image(
        &self,
        buf: &mut Vec<u8>,
        input: std::ops::Range<usize>,
    ) -> Result<std::ops::Range<usize>, snappy::SnappyError> {
        match *self {
            Stored::Plain => Ok(input),
            Stored::Snappy { lead, skip, len } => {
                let (skip, len) = (skip as usize, len as usize);
                let out = snappy::decode_within(buf, input, lead as usize, skip + len)?;
                Ok(out.start + skip..out.end)
            }
        }
    }
}

/// One sample of a container file, as its index holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordEntry {
    /// Where the sample's encoded image starts in the file (or, when not
    /// [`Stored::Plain`], the bytes that hold it).
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
    /// How the image is stored in those bytes.
    pub stored: Stored,
    /// Its labels; the first [`RecordFormat::label_columns`] are meaningful, the rest 0.
    pub labels: [u32; MAX_LABELS],
    /// Its name inside the file (a WebDataset key, a record number): sample names and
    /// messages are `FILE:KEY`.
    pub key: String,
}

/// A container format: how its files are named and indexed (see the module).
pub trait RecordFormat: Send + Sync {
    /// Why a file cannot be indexed (naming the member or record and the reason).
    type Error: std::error::Error + Send + Sync + 'static;

    /// The format's name (its source kind's name).
    fn name(&self) -> &'static str;

    /// The endings of its file names (`.tar`), lower case: a folder's files with one of
    /// them are the dataset's, and `--data` recognises a path by them.
    fn extensions(&self) -> &'static [&'static str];

    /// Everything besides the file's bytes that its index depends on (which member holds
    /// the image, which the label): a persisted index made with other options is rebuilt.
    fn options(&self) -> String;

    /// Label columns the entries carry (1, or 2 for a coarse and a fine label).
    fn label_columns(&self) -> usize {
        1
    }

    /// The index of one file, given its whole bytes: its samples in file order. Every
    /// entry lies inside `bytes`.
    fn index(&self, bytes: &[u8]) -> Result<Vec<RecordEntry>, Self::Error>;

    /// Whether the file `name` with these bytes is stored compressed (a gzip'd TFRecord):
    /// it is then unpacked once ([`RecordFormat::unpack`]) into the cache, and that copy is
    /// indexed and read in its place, unless [`RecordFormat::in_place`] locates its
    /// samples in the file itself. A format packed whatever the bytes (Parquet: true for
    /// empty `bytes`) is the one whose files may be read in place.
    fn is_packed(&self, name: &str, bytes: &[u8]) -> bool {
        let _ = (name, bytes);
        false
    }

    /// Write the unpacked bytes of a packed file to `out` (streamed: memory stays bounded).
    fn unpack(&self, bytes: &[u8], out: &mut dyn std::io::Write) -> Result<(), Self::Error> {
        let _ = (bytes, out);
        Ok(())
    }

    /// The index of a packed file read in place (each entry the bytes of the file that
    /// hold the sample, [`RecordEntry::stored`] saying how), given its bytes and the index
    /// of its unpacked copy (`unpacked`: the labels and keys, in the same order); `None`
    /// when the file's samples are not ranges of it (a compressed TFRecord; a Parquet
    /// page this reader does not follow). Checked against the copy, it replaces it: a
    /// local file is read from its own bytes, and range mode reads these ranges.
    fn in_place(&self, bytes: &[u8], unpacked: &[RecordEntry]) -> Option<Vec<RecordEntry>> {
        let _ = (bytes, unpacked);
        None
    }

    /// The class names a file's (unpacked) bytes carry, as `(name, label)` (Parquet's
    /// Hugging Face metadata); empty when the format carries none.
    fn classes(&self, bytes: &[u8]) -> Vec<(String, u32)> {
        let _ = bytes;
        Vec::new()
    }
}
