//! TFRecord files of `tf.train.Example`s, as TensorFlow's `TFRecordWriter` (and the TPU
//! ImageNet scripts, and the `tfrecord` package) write them.
//!
//! A record is `length: u64 LE`, `masked CRC-32C of the length: u32 LE`, `length` bytes of
//! data, `masked CRC-32C of the data: u32 LE`. Both CRCs are checked while the index is
//! built. The data is a `tf.train.Example`:
//!
//! ```text
//! Example  { Features features = 1; }
//! Features { map<string, Feature> feature = 1; }     // entries: key = 1, value = 2
//! Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
//! BytesList { repeated bytes value = 1; }   Int64List { repeated int64 value = 1; }  // packed or not
//! ```
//!
//! read by the small wire reader of [`super::protobuf`] just far enough to find the image
//! feature's one bytes value (where it lies in the file: the sample is a slice of it) and
//! the label feature's int64 (plus a configurable offset: TensorFlow's ImageNet labels
//! start at 1). A gzip'd file ([`is_gzip`]) is decompressed once ([`gunzip`]) and then
//! indexed as a plain one.

use super::crc32c::masked;
use super::protobuf::{varint, Fields, Value, WireError};
use super::RecordEntry;
use crate::spec::MAX_LABELS;
use std::io::{Read, Write};

/// The feature names a TFRecord of ImageNet-style examples uses.
pub const DEFAULT_IMAGE_FEATURE: &str = "image/encoded";
/// The label feature of ImageNet-style examples (int64, 1-based in TensorFlow's scripts).
pub const DEFAULT_LABEL_FEATURE: &str = "image/class/label";

/// Which features hold a sample's image and label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TfRecordOptions {
    /// The bytes feature holding the encoded image.
    pub image_feature: String,
    /// The int64 feature holding the class label.
    pub label_feature: String,
    /// Added to the stored label (`-1` for TensorFlow's 1-based ImageNet labels); the
    /// result must lie in `0..2^32`.
    pub label_offset: i64,
}

impl Default for TfRecordOptions {
    fn default() -> Self {
        TfRecordOptions {
            image_feature: DEFAULT_IMAGE_FEATURE.to_string(),
            label_feature: DEFAULT_LABEL_FEATURE.to_string(),
            label_offset: 0,
        }
    }
}

/// A TFRecord file that cannot be indexed: the record (its number and where it starts)
/// and why (the source names the file).
#[derive(Debug, thiserror::Error)]
#[error("record {record} (at byte {offset}): {fault}")]
pub struct TfRecordError {
    /// The record's number in the file (0-based).
    pub record: u64,
    /// Where the record starts in the file.
    pub offset: u64,
    /// What is wrong with it.
    #[source]
    pub fault: TfRecordFault,
}

/// What is wrong with one record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TfRecordFault {
    /// The file ends inside the record.
    #[error("truncated: the file ends inside the record ({0} more bytes needed)")]
    Truncated(u64),
    /// The length's CRC does not match: not a TFRecord file, or a damaged one.
    #[error("bad CRC of the record length (not a TFRecord file, or a damaged one)")]
    LengthCrc,
    /// The data's CRC does not match.
    #[error("bad CRC of the record data (the file is damaged)")]
    DataCrc,
    /// The data is not a protobuf message.
    #[error("not a tf.train.Example")]
    Example(#[source] WireError),
    /// The example has no feature of that name.
    #[error("no feature {0:?}")]
    Missing(String),
    /// The feature is of another kind.
    #[error("feature {feature:?} is not a {expected} list")]
    Kind {
        /// The feature.
        feature: String,
        /// What it must be.
        expected: &'static str,
    },
    /// The feature holds no value, or several where one is expected.
    #[error("feature {feature:?} holds {count} values, not one")]
    Count {
        /// The feature.
        feature: String,
        /// How many it holds.
        count: usize,
    },
    /// A gzip'd file that does not decompress.
    #[error("not a whole gzip stream")]
    Gzip(#[source] std::io::Error),
    /// The label plus the offset is not a class number.
    #[error("label {value} (with label_offset {offset}) is not in 0..2^32")]
    Label {
        /// The stored label.
        value: i64,
        /// The configured offset.
        offset: i64,
    },
}

/// Whether the bytes start as a gzip stream does.
pub fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1F, 0x8B])
}

/// Decompresses a gzip'd TFRecord (all members, as TensorFlow's reader does) into `out`;
/// returns the bytes written.
pub fn gunzip(input: impl Read, mut out: impl Write) -> std::io::Result<u64> {
    let mut d = flate2::read::MultiGzDecoder::new(input);
    std::io::copy(&mut d, &mut out)
}

/// The TFRecord format of the `tfrecord` source kind (see the module).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TfRecord {
    /// Which features hold the image and the label.
    pub options: TfRecordOptions,
}

impl super::RecordFormat for TfRecord {
    type Error = TfRecordError;

    fn name(&self) -> &'static str {
        "tfrecord"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &[".tfrecord", ".tfrecords", ".tfrecord.gz", ".tfrecords.gz"]
    }

    fn options(&self) -> String {
        let o = &self.options;
        format!(
            "image={:?} label={:?} label_offset={}",
            o.image_feature, o.label_feature, o.label_offset
        )
    }

    fn index(&self, bytes: &[u8]) -> Result<Vec<RecordEntry>, TfRecordError> {
        index(bytes, &self.options)
    }

    fn is_packed(&self, _name: &str, bytes: &[u8]) -> bool {
        is_gzip(bytes)
    }

    fn unpack(&self, bytes: &[u8], out: &mut dyn Write) -> Result<(), TfRecordError> {
        gunzip(bytes, out).map(drop).map_err(|e| TfRecordError {
            record: 0,
            offset: 0,
            fault: TfRecordFault::Gzip(e),
        })
    }
}

/// Where one record's data lies in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Where the record (its length field) starts.
    pub start: u64,
    /// Where its data starts.
    pub data: u64,
    /// The data's length.
    pub len: u64,
}

/// The records of a TFRecord file, CRC-checked, in order.
pub fn frames(bytes: &[u8]) -> impl Iterator<Item = Result<Frame, (u64, TfRecordFault)>> + '_ {
    let mut pos = 0usize;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || pos >= bytes.len() {
            return None;
        }
        let r = frame(bytes, pos);
        match &r {
            Ok(f) => pos = (f.data + f.len + 4) as usize,
            Err(_) => failed = true,
        }
        Some(r.map_err(|fault| (pos as u64, fault)))
    })
}

fn frame(bytes: &[u8], pos: usize) -> Result<Frame, TfRecordFault> {
    let left = (bytes.len() - pos) as u64;
    if left < 12 {
        return Err(TfRecordFault::Truncated(12 - left));
    }
    let head = &bytes[pos..pos + 12];
    let len_bytes = &head[..8];
    let crc = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    if masked(len_bytes) != crc {
        return Err(TfRecordFault::LengthCrc);
    }
    let len = u64::from_le_bytes(len_bytes.try_into().unwrap_or([0; 8]));
    let need = len.saturating_add(16);
    if need > left {
        return Err(TfRecordFault::Truncated(need - left));
    }
    // `need <= left` bounds `len` by the slice's length: these fit in usize.
    let data_start = pos + 12;
    let data_end = data_start + len as usize;
    let data = &bytes[data_start..data_end];
    let c = &bytes[data_end..data_end + 4];
    if masked(data) != u32::from_le_bytes([c[0], c[1], c[2], c[3]]) {
        return Err(TfRecordFault::DataCrc);
    }
    Ok(Frame {
        start: pos as u64,
        data: data_start as u64,
        len,
    })
}

/// What [`parse_example`] finds in one example.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExampleFields {
    /// Where the image bytes start in the example's data.
    pub image_offset: usize,
    /// Their length.
    pub image_len: usize,
    /// The label, offset applied.
    pub label: u32,
}

/// Finds the image feature's bytes and the label in one serialized `tf.train.Example`.
pub fn parse_example(data: &[u8], opts: &TfRecordOptions) -> Result<ExampleFields, TfRecordFault> {
    let mut image: Option<&[u8]> = None;
    let mut image_at = 0usize;
    let mut label: Option<&[u8]> = None;
    // Example.features (1) → Features.feature (1, map entries) → key (1), value (2).
    for f in Fields::new(data) {
        let (n, v) = f.map_err(TfRecordFault::Example)?;
        let (1, Value::Bytes(features, features_at)) = (n, v) else {
            continue;
        };
        for e in Fields::new(features) {
            let (n, v) = e.map_err(TfRecordFault::Example)?;
            let (1, Value::Bytes(entry, entry_at)) = (n, v) else {
                continue;
            };
            let mut key: &[u8] = &[];
            let mut value: Option<(&[u8], usize)> = None;
            for kv in Fields::new(entry) {
                match kv.map_err(TfRecordFault::Example)? {
                    (1, Value::Bytes(k, _)) => key = k,
                    (2, Value::Bytes(v, at)) => value = Some((v, at)),
                    _ => {}
                }
            }
            let Some((feature, at)) = value else { continue };
            // Protobuf: the last entry of a key wins.
            if key == opts.image_feature.as_bytes() {
                image = Some(feature);
                image_at = features_at + entry_at + at;
            } else if key == opts.label_feature.as_bytes() {
                label = Some(feature);
            }
        }
    }
    let image = image.ok_or_else(|| TfRecordFault::Missing(opts.image_feature.clone()))?;
    let (off, len) = one_bytes(image, &opts.image_feature)?;
    let label = label.ok_or_else(|| TfRecordFault::Missing(opts.label_feature.clone()))?;
    let value = one_int64(label, &opts.label_feature)?;
    let shifted = i128::from(value) + i128::from(opts.label_offset);
    let label = u32::try_from(shifted).map_err(|_| TfRecordFault::Label {
        value,
        offset: opts.label_offset,
    })?;
    Ok(ExampleFields {
        image_offset: image_at + off,
        image_len: len,
        label,
    })
}

/// The one value of a `Feature` holding a `BytesList`: its offset in the feature, length.
fn one_bytes(feature: &[u8], name: &str) -> Result<(usize, usize), TfRecordFault> {
    let kind = || TfRecordFault::Kind {
        feature: name.to_string(),
        expected: "bytes",
    };
    let mut found = None;
    let mut count = 0usize;
    let mut list_seen = false;
    for f in Fields::new(feature) {
        match f.map_err(TfRecordFault::Example)? {
            (1, Value::Bytes(list, list_at)) => {
                list_seen = true;
                for v in Fields::new(list) {
                    if let (1, Value::Bytes(b, at)) = v.map_err(TfRecordFault::Example)? {
                        count += 1;
                        found = Some((list_at + at, b.len()));
                    }
                }
            }
            (2 | 3, _) => return Err(kind()),
            _ => {}
        }
    }
    if !list_seen {
        return Err(kind());
    }
    match (found, count) {
        (Some(f), 1) => Ok(f),
        _ => Err(TfRecordFault::Count {
            feature: name.to_string(),
            count,
        }),
    }
}

/// The one value of a `Feature` holding an `Int64List` (packed or not).
fn one_int64(feature: &[u8], name: &str) -> Result<i64, TfRecordFault> {
    let mut values = 0usize;
    let mut first = None;
    let mut list_seen = false;
    for f in Fields::new(feature) {
        match f.map_err(TfRecordFault::Example)? {
            (3, Value::Bytes(list, _)) => {
                list_seen = true;
                for v in Fields::new(list) {
                    match v.map_err(TfRecordFault::Example)? {
                        (1, Value::Varint(x)) => {
                            values += 1;
                            first = first.or(Some(x as i64));
                        }
                        (1, Value::Bytes(packed, _)) => {
                            let mut pos = 0;
                            while pos < packed.len() {
                                let x = varint(packed, &mut pos).map_err(TfRecordFault::Example)?;
                                values += 1;
                                first = first.or(Some(x as i64));
                            }
                        }
                        _ => {}
                    }
                }
            }
            (1 | 2, _) => {
                return Err(TfRecordFault::Kind {
                    feature: name.to_string(),
                    expected: "int64",
                })
            }
            _ => {}
        }
    }
    if !list_seen {
        return Err(TfRecordFault::Kind {
            feature: name.to_string(),
            expected: "int64",
        });
    }
    match (first, values) {
        (Some(x), 1) => Ok(x),
        _ => Err(TfRecordFault::Count {
            feature: name.to_string(),
            count: values,
        }),
    }
}

/// The index of a TFRecord file: every record CRC-checked and its example parsed; the
/// entries locate each image's bytes in the file.
pub fn index(bytes: &[u8], opts: &TfRecordOptions) -> Result<Vec<RecordEntry>, TfRecordError> {
    let mut out = Vec::new();
    let err = |record: u64, offset: u64, fault| TfRecordError {
        record,
        offset,
        fault,
    };
    for (record, f) in frames(bytes).enumerate() {
        let record = record as u64;
        let f = f.map_err(|(offset, fault)| err(record, offset, fault))?;
        let data = &bytes[f.data as usize..(f.data + f.len) as usize];
        let e = parse_example(data, opts).map_err(|fault| err(record, f.start, fault))?;
        let mut labels = [0u32; MAX_LABELS];
        labels[0] = e.label;
        out.push(RecordEntry {
            stored: super::Stored::Plain,
            offset: f.data + e.image_offset as u64,
            len: e.image_len as u64,
            labels,
            key: record.to_string(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::path::{Path, PathBuf};

    fn fixture(name: &str) -> (PathBuf, Vec<u8>) {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(name);
        let b = std::fs::read(&p).unwrap();
        (p, b)
    }

    /// The images make_records.py wrote, in order, with the labels it gave (1-based).
    fn written() -> Vec<Vec<u8>> {
        ["one_pixel.jpg", "one_pixel.png", "gray.jpg"]
            .iter()
            .map(|n| fixture(&format!("edge/{n}")).1)
            .collect()
    }

    #[test]
    fn indexes_the_tfrecord_package_output() {
        let (_, b) = fixture("records/small.tfrecord");
        let opts = TfRecordOptions {
            label_offset: -1,
            ..TfRecordOptions::default()
        };
        let idx = index(&b, &opts).unwrap();
        let images = written();
        assert_eq!(idx.len(), images.len());
        for (i, (e, img)) in idx.iter().zip(&images).enumerate() {
            assert_eq!(&b[e.offset as usize..(e.offset + e.len) as usize], &img[..]);
            assert_eq!(e.labels[0], i as u32);
            assert_eq!(e.key, i.to_string());
        }
        // Without the offset the labels are TensorFlow's.
        let idx = index(&b, &TfRecordOptions::default()).unwrap();
        assert_eq!(
            idx.iter().map(|e| e.labels[0]).collect::<Vec<_>>(),
            [1, 2, 3]
        );
    }

    #[test]
    fn gzip_is_detected_and_decompresses_to_the_plain_file() {
        let (_, gz) = fixture("records/small.tfrecord.gz");
        let (_, plain) = fixture("records/small.tfrecord");
        assert!(is_gzip(&gz) && !is_gzip(&plain));
        let mut out = Vec::new();
        gunzip(&gz[..], &mut out).unwrap();
        assert_eq!(out, plain);
    }

    #[test]
    fn damage_is_a_typed_error_naming_file_and_record() {
        let (_, b) = fixture("records/small.tfrecord");
        let opts = TfRecordOptions::default();
        let idx = index(&b, &opts).unwrap();
        // A flipped byte in the second record's image: its data CRC.
        let mut bad = b.clone();
        bad[idx[1].offset as usize + 3] ^= 0x40;
        let e = index(&bad, &opts).unwrap_err();
        assert!(matches!(e.fault, TfRecordFault::DataCrc));
        assert_eq!(e.record, 1);
        let msg = e.to_string();
        assert!(
            msg.starts_with("record 1 (at byte ") && msg.contains("bad CRC"),
            "{msg}"
        );
        // A flipped length byte: the length's CRC.
        let mut bad = b.clone();
        bad[0] ^= 1;
        let e = index(&bad, &opts).unwrap_err();
        assert!(
            matches!(e.fault, TfRecordFault::LengthCrc) && e.record == 0,
            "{e}"
        );
        // Truncated inside the last record.
        let e = index(&b[..b.len() - 10], &opts).unwrap_err();
        assert!(
            matches!(e.fault, TfRecordFault::Truncated(10)) && e.record == 2,
            "{e}"
        );
        // Features that are not there, or of the wrong kind.
        let e = index(
            &b,
            &TfRecordOptions {
                image_feature: "jpeg".into(),
                ..opts.clone()
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("no feature \"jpeg\""), "{e}");
        let e = index(
            &b,
            &TfRecordOptions {
                label_feature: "image/extra".into(),
                ..opts.clone()
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("not a int64 list"), "{e}");
        let e = index(
            &b,
            &TfRecordOptions {
                label_offset: -2,
                ..opts
            },
        )
        .unwrap_err();
        assert!(
            matches!(
                e.fault,
                TfRecordFault::Label {
                    value: 1,
                    offset: -2
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_lying_length_allocates_nothing() {
        // A length of 2^63 with a correct CRC: truncated, not an allocation.
        let len = (1u64 << 63).to_le_bytes();
        let mut b = len.to_vec();
        b.extend_from_slice(&masked(&len).to_le_bytes());
        b.extend_from_slice(&[0; 8]);
        let e = index(&b, &TfRecordOptions::default()).unwrap_err();
        assert!(matches!(e.fault, TfRecordFault::Truncated(_)), "{e}");
    }
}
