//! Container formats of other tools, as pure byte parsers: no I/O, no stores. Each builds
//! the index of one file from its bytes — where every sample's encoded image lies in the
//! file and what its labels are ([`RecordEntry`]) — so that a read is a slice of the file
//! (a memory map, or a cached store object): no copy, no decoding.
//!
//! `tfrecord.rs`: TensorFlow's TFRecord of `tf.train.Example`s (CRC-checked framing, a small
//! protobuf reader of its own, `protobuf.rs`); `mindrecord/`: MindSpore's MindRecord (its
//! JSON header and page index). Every builder returns a typed error naming the file, the
//! record and the reason for bytes that are not the format, and never allocates more than
//! the file's own size can justify.

pub mod crc32c;
pub mod mindrecord;
pub mod protobuf;
pub mod sqlite;
pub mod tfrecord;

use crate::spec::MAX_LABELS;

/// One sample of a container file: where its encoded image lies in the file and its labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordEntry {
    /// Byte offset of the encoded image in the file.
    pub offset: u64,
    /// Length of the encoded image in bytes.
    pub len: u64,
    /// Labels; the first is the class label.
    pub labels: [u32; MAX_LABELS],
    /// The sample's name in messages: a member name, or the record's number in the file.
    pub key: String,
}
