//! The CIFAR-10 and CIFAR-100 *binary* files, memory-mapped, read the way MindSpore's
//! `Cifar10Dataset` / `Cifar100Dataset` read them.
//!
//! * CIFAR-10: `data_batch_1.bin` … `data_batch_5.bin` (train, in that order) and
//!   `test_batch.bin`; a record is 1 label byte + 1024 R + 1024 G + 1024 B bytes.
//! * CIFAR-100: `train.bin`, `test.bin`; a record is a coarse label byte, a fine label byte
//!   and 3072 pixel bytes. The pipeline keeps the `fine` label, the `coarse` one, or `both`
//!   (two label columns, coarse then fine, MindSpore's column order).
//! * `usage = "all"` is train then test.
//!
//! Opening maps the files and checks their sizes; it reads no record. Label bytes are
//! checked when a record is read, so a bad one fails that sample, naming `FILE:RECORD`.

use super::{Raw, RawSample, Source};
use crate::error::{Error, Fault, Result, SampleErrorKind};
use crate::spec::Spec;
use memmap2::Mmap;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};

/// Side of a CIFAR image.
pub const SIDE: usize = 32;
/// Pixel bytes in one record.
pub const PIXELS: usize = 3 * SIDE * SIDE;

/// Which CIFAR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CifarKind {
    /// 10 classes, one label byte.
    Cifar10,
    /// 20 coarse and 100 fine classes, two label bytes.
    Cifar100,
}

/// Which split to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum Usage {
    /// The training files.
    #[default]
    Train,
    /// The test file.
    Test,
    /// Train then test.
    All,
}

/// Which CIFAR-100 label(s) to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum CifarLabel {
    /// The 100-class label.
    #[default]
    Fine,
    /// The 20-class label.
    Coarse,
    /// Both, as two label columns: coarse, fine.
    Both,
}

impl CifarKind {
    fn label_bytes(self) -> usize {
        match self {
            CifarKind::Cifar10 => 1,
            CifarKind::Cifar100 => 2,
        }
    }
    /// Bytes in one record.
    pub fn record_size(self) -> usize {
        self.label_bytes() + PIXELS
    }
    fn files(self, usage: Usage) -> Vec<String> {
        let (train, test): (Vec<String>, Vec<String>) = match self {
            CifarKind::Cifar10 => (
                (1..=5).map(|i| format!("data_batch_{i}.bin")).collect(),
                vec!["test_batch.bin".into()],
            ),
            CifarKind::Cifar100 => (vec!["train.bin".into()], vec!["test.bin".into()]),
        };
        match usage {
            Usage::Train => train,
            Usage::Test => test,
            Usage::All => train.into_iter().chain(test).collect(),
        }
    }
    fn name(self) -> &'static str {
        match self {
            CifarKind::Cifar10 => "cifar10",
            CifarKind::Cifar100 => "cifar100",
        }
    }
}

/// Split one record into its labels (the ones `label` keeps; unused columns 0) and its
/// `3 × 32 × 32` pixel bytes, checking the label bytes' range. A record of the wrong size is
/// an error too.
#[inline]
pub fn parse_record(
    kind: CifarKind,
    label: CifarLabel,
    rec: &[u8],
) -> std::result::Result<([u32; 2], &[u8]), Fault> {
    let bad = |what: &str, v: u8, n: u32| {
        Fault::new(
            SampleErrorKind::BadLabel,
            format!("{what} label byte {v} out of range (0..{})", n - 1),
        )
    };
    if rec.len() != kind.record_size() {
        return Err(Fault::new(
            SampleErrorKind::Truncated,
            format!("record is {} bytes, not {}", rec.len(), kind.record_size()),
        ));
    }
    let (head, pixels) = rec.split_at(kind.label_bytes());
    let labels = match (kind, head) {
        (CifarKind::Cifar10, &[l]) => {
            if l >= 10 {
                return Err(bad("CIFAR-10", l, 10));
            }
            [u32::from(l), 0]
        }
        (CifarKind::Cifar100, &[coarse, fine]) => {
            if coarse >= 20 {
                return Err(bad("CIFAR-100 coarse", coarse, 20));
            }
            if fine >= 100 {
                return Err(bad("CIFAR-100 fine", fine, 100));
            }
            match label {
                CifarLabel::Fine => [u32::from(fine), 0],
                CifarLabel::Coarse => [u32::from(coarse), 0],
                CifarLabel::Both => [u32::from(coarse), u32::from(fine)],
            }
        }
        _ => return Err(Fault::new(SampleErrorKind::Corrupt, "bad record header")),
    };
    Ok((labels, pixels))
}

struct RecordFile {
    name: String,
    map: Mmap,
    /// Index of this file's first record in the dataset.
    first: usize,
}

/// A CIFAR-10 or CIFAR-100 binary dataset.
pub struct Cifar {
    root: PathBuf,
    kind: CifarKind,
    usage: Usage,
    label: CifarLabel,
    files: Vec<RecordFile>,
    len: usize,
}

impl std::fmt::Debug for Cifar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cifar")
            .field("root", &self.root)
            .field("kind", &self.kind)
            .field("usage", &self.usage)
            .field("len", &self.len)
            .finish()
    }
}

impl Cifar {
    /// Map the files of `usage` under `root`. `label` matters for CIFAR-100 only.
    pub fn open(root: &Path, kind: CifarKind, usage: Usage, label: CifarLabel) -> Result<Cifar> {
        if !root.is_dir() {
            return Err(Error::Dataset {
                path: root.to_path_buf(),
                reason: "not a directory".into(),
            });
        }
        let mut files = Vec::new();
        let mut len = 0usize;
        for name in kind.files(usage) {
            let path = root.join(&name);
            if !path.is_file() {
                let other = match kind {
                    CifarKind::Cifar10 => (CifarKind::Cifar100, "train.bin"),
                    CifarKind::Cifar100 => (CifarKind::Cifar10, "data_batch_1.bin"),
                };
                let hint = if root.join(other.1).is_file() {
                    format!(
                        "; the folder holds {} instead: is this a {} dataset (kind = \"{}\")?",
                        other.1,
                        other.0.name(),
                        other.0.name()
                    )
                } else {
                    String::new()
                };
                return Err(Error::Dataset {
                    path,
                    reason: format!(
                        "missing: {} usage {:?} needs this file{hint}",
                        kind.name(),
                        usage
                    ),
                });
            }
            let file = File::open(&path).map_err(|e| Error::Dataset {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            // SAFETY: the map is read-only; like every reader of a memory-mapped dataset we
            // rely on nobody truncating the file while it is open (that would fault, not
            // corrupt memory safety of other data).
            let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::Dataset {
                path: path.clone(),
                reason: format!("cannot memory-map: {e}"),
            })?;
            let rs = kind.record_size();
            if map.len() % rs != 0 || map.is_empty() {
                return Err(Error::Dataset {
                    path,
                    reason: format!(
                        "size {} bytes is not a whole, non-zero number of {rs}-byte {} records",
                        map.len(),
                        kind.name()
                    ),
                });
            }
            let n = map.len() / rs;
            files.push(RecordFile {
                name,
                map,
                first: len,
            });
            len += n;
        }
        Ok(Cifar {
            root: root.to_path_buf(),
            kind,
            usage,
            label,
            files,
            len,
        })
    }

    fn locate(&self, index: usize) -> Option<(&RecordFile, usize)> {
        if index >= self.len {
            return None;
        }
        let k = self.files.partition_point(|f| f.first <= index) - 1;
        let f = &self.files[k];
        Some((f, index - f.first))
    }

    /// Which CIFAR this is.
    pub fn kind(&self) -> CifarKind {
        self.kind
    }
}

impl Source for Cifar {
    fn describe(&self) -> String {
        format!(
            "{} {} (usage {:?}): {} samples in {} file(s)",
            self.kind.name(),
            self.root.display(),
            self.usage,
            self.len,
            self.files.len()
        )
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn len(&self) -> usize {
        self.len
    }

    fn spec(&self) -> Spec {
        Spec {
            encoded: false,
            height: Some(SIDE),
            width: Some(SIDE),
            label_columns: if self.kind == CifarKind::Cifar100 && self.label == CifarLabel::Both {
                2
            } else {
                1
            },
            ..Spec::encoded()
        }
    }

    fn sample_name(&self, index: usize) -> String {
        match self.locate(index) {
            Some((f, r)) => format!("{}:{r}", f.name),
            None => format!("<sample {index} out of range>"),
        }
    }

    fn read<'a>(&'a self, index: usize, _scratch: &'a mut Vec<u8>) -> Result<RawSample<'a>> {
        let (f, r) = self
            .locate(index)
            .ok_or_else(|| Error::out_of_range(index, self.sample_name(index)))?;
        let rs = self.kind.record_size();
        let rec = f.map.get(r * rs..(r + 1) * rs).unwrap_or_default();
        let (labels, pixels) =
            parse_record(self.kind, self.label, rec).map_err(|fault| Error::Sample {
                index,
                file: format!("{}:{r}", f.name),
                stage: "read",
                kind: fault.kind,
                reason: fault.reason,
            })?;
        Ok(RawSample {
            raw: Raw::Planar {
                data: pixels,
                height: SIDE,
                width: SIDE,
            },
            labels,
        })
    }

    fn stored_layout(&self) -> crate::spec::Layout {
        crate::spec::Layout::Chw
    }

    fn work_unit(&self) -> usize {
        // Measured with `imgfeed bench pipelines/cifar10_eval.toml` (see the module docs of
        // engine): 64 samples per claim keeps claim overhead under 1%.
        64
    }
}
