//! The CIFAR-10 and CIFAR-100 files, memory-mapped, read the way MindSpore's
//! `Cifar10Dataset` / `Cifar100Dataset` read them, in either of the two layouts the
//! datasets are published in:
//!
//! * the *binary* layout. CIFAR-10: `data_batch_1.bin` … `data_batch_5.bin` (train, in that
//!   order) and `test_batch.bin`; a record is 1 label byte + 1024 R + 1024 G + 1024 B bytes.
//!   CIFAR-100: `train.bin`, `test.bin`; a record is a coarse label byte, a fine label byte
//!   and 3072 pixel bytes.
//! * torchvision's *pickle* layout (`cifar-10-batches-py/`, `cifar-100-python/`): the same
//!   files without `.bin` (`data_batch_1` … `data_batch_5`, `test_batch`; `train`, `test`),
//!   each a pickled dict of a `uint8 [N, 3072]` numpy array (the same pixel bytes as the
//!   records) and label lists. They are parsed, never unpickled, by a reader that executes
//!   nothing (`super::cifar_pickle`); the pixels are read from the memory map where
//!   the array's bytes lie. The same records give the same samples, in the same order.
//!
//! The layout is told by the files in the root: any binary file of the kind means the
//! binary layout; else any pickle file means the pickle layout; else the first missing
//! binary file is the error, which names both layouts' files.
//!
//! The pipeline keeps CIFAR-100's `fine` label, the `coarse` one, or `both` (two label
//! columns, coarse then fine, MindSpore's column order). `usage = "all"` is train then test.
//!
//! Opening maps the files and checks their sizes (binary) or parses their structure
//! (pickle); it reads no record. Labels are checked when a record is read, so a bad one
//! fails that sample, naming `FILE:RECORD`.

use super::cifar_pickle::{parse_cifar_pickle, CifarPickle};
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
    /// The files of `usage` in `layout`, in dataset order.
    fn files(self, usage: Usage, layout: Layout) -> Vec<String> {
        let ext = match layout {
            Layout::Binary => ".bin",
            Layout::Pickle => "",
        };
        let (train, test): (Vec<String>, Vec<String>) = match self {
            CifarKind::Cifar10 => (
                (1..=5).map(|i| format!("data_batch_{i}{ext}")).collect(),
                vec![format!("test_batch{ext}")],
            ),
            CifarKind::Cifar100 => (vec![format!("train{ext}")], vec![format!("test{ext}")]),
        };
        match usage {
            Usage::Train => train,
            Usage::Test => test,
            Usage::All => train.into_iter().chain(test).collect(),
        }
    }
    /// The layout's file names, for messages.
    fn listed(self, layout: Layout) -> String {
        let f = self.files(Usage::All, layout);
        match self {
            CifarKind::Cifar10 => format!("{} … {}, {}", f[0], f[4], f[5]),
            CifarKind::Cifar100 => f.join(", "),
        }
    }
    /// The folder names the datasets' archives unpack to, in each layout.
    fn folder(self, layout: Layout) -> &'static str {
        match (self, layout) {
            (CifarKind::Cifar10, Layout::Binary) => "cifar-10-batches-bin",
            (CifarKind::Cifar10, Layout::Pickle) => "cifar-10-batches-py",
            (CifarKind::Cifar100, Layout::Binary) => "cifar-100-binary",
            (CifarKind::Cifar100, Layout::Pickle) => "cifar-100-python",
        }
    }
    fn other(self) -> CifarKind {
        match self {
            CifarKind::Cifar10 => CifarKind::Cifar100,
            CifarKind::Cifar100 => CifarKind::Cifar10,
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

/// How a dataset's files store the records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// `*.bin` files of fixed-size records.
    Binary,
    /// torchvision's pickled dicts of a numpy array and label lists.
    Pickle,
}

impl Layout {
    /// The layout of `root`'s files: binary when any binary file of `kind` is there, else
    /// pickle when any pickle file is, else `None`.
    fn detect(root: &Path, kind: CifarKind) -> Option<Layout> {
        [Layout::Binary, Layout::Pickle].into_iter().find(|&l| {
            kind.files(Usage::All, l)
                .iter()
                .any(|f| root.join(f).is_file())
        })
    }
}

/// The labels of a pickled record (CIFAR-10 `[label, 0]`, CIFAR-100 `[coarse, fine]`),
/// checked and chosen as [`parse_record`] does for the binary label bytes.
fn pickle_labels(
    kind: CifarKind,
    label: CifarLabel,
    l: [i64; 2],
) -> std::result::Result<[u32; 2], Fault> {
    let check = |what: &str, v: i64, n: u32| {
        u32::try_from(v).ok().filter(|&v| v < n).ok_or_else(|| {
            Fault::new(
                SampleErrorKind::BadLabel,
                format!("{what} label {v} out of range (0..{})", n - 1),
            )
        })
    };
    Ok(match kind {
        CifarKind::Cifar10 => [check("CIFAR-10", l[0], 10)?, 0],
        CifarKind::Cifar100 => {
            let coarse = check("CIFAR-100 coarse", l[0], 20)?;
            let fine = check("CIFAR-100 fine", l[1], 100)?;
            match label {
                CifarLabel::Fine => [fine, 0],
                CifarLabel::Coarse => [coarse, 0],
                CifarLabel::Both => [coarse, fine],
            }
        }
    })
}

/// Record `r` of a pickled file: its labels and pixel bytes.
#[inline]
fn pickle_record<'a>(
    kind: CifarKind,
    label: CifarLabel,
    p: &'a CifarPickle,
    map: &'a [u8],
    r: usize,
) -> std::result::Result<([u32; 2], &'a [u8]), Fault> {
    let labels = p.labels.get(r).copied().unwrap_or_default();
    let pixels = p
        .record(map, r)
        .ok_or_else(|| Fault::new(SampleErrorKind::Truncated, "record past the pixel array"))?;
    Ok((pickle_labels(kind, label, labels)?, pixels))
}

struct RecordFile {
    name: String,
    map: Mmap,
    /// Index of this file's first record in the dataset.
    first: usize,
    /// The pickle layout's labels and where its pixels lie; `None`: binary records.
    pickle: Option<CifarPickle>,
}

/// A CIFAR-10 or CIFAR-100 dataset, in the binary or the pickle layout.
pub struct Cifar {
    root: PathBuf,
    kind: CifarKind,
    usage: Usage,
    label: CifarLabel,
    layout: Layout,
    files: Vec<RecordFile>,
    len: usize,
    /// `(class name, label)` from the names file beside the records, where there is one.
    classes: Vec<(String, u32)>,
}

/// The class names the binary distributions ship beside the records (one per line, in
/// label order): `batches.meta.txt` (CIFAR-10), `fine_label_names.txt` and
/// `coarse_label_names.txt` (CIFAR-100, for the label kept in column 0). Names are
/// optional: none where the file is absent or unreadable.
fn class_names(root: &Path, kind: CifarKind, label: CifarLabel) -> Vec<(String, u32)> {
    let file = match (kind, label) {
        (CifarKind::Cifar10, _) => "batches.meta.txt",
        (CifarKind::Cifar100, CifarLabel::Fine) => "fine_label_names.txt",
        (CifarKind::Cifar100, _) => "coarse_label_names.txt",
    };
    let Ok(text) = std::fs::read_to_string(root.join(file)) else {
        return Vec::new();
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .zip(0u32..)
        .map(|(name, label)| (name.to_string(), label))
        .collect()
}

impl std::fmt::Debug for Cifar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cifar")
            .field("root", &self.root)
            .field("kind", &self.kind)
            .field("usage", &self.usage)
            .field("layout", &self.layout)
            .field("len", &self.len)
            .finish()
    }
}

/// Why no layout was found: what the folder holds instead, if anything recognisable.
fn missing_hint(root: &Path, kind: CifarKind) -> String {
    let other = kind.other();
    for layout in [Layout::Binary, Layout::Pickle] {
        let first = other.files(Usage::Train, layout).swap_remove(0);
        if root.join(&first).is_file() {
            return format!(
                "; the folder holds {first} instead: is this a {} dataset (kind = \"{}\")?",
                other.name(),
                other.name()
            );
        }
    }
    for layout in [Layout::Binary, Layout::Pickle] {
        let sub = kind.folder(layout);
        if root.join(sub).is_dir() {
            return format!("; the folder holds {sub}/: point root there");
        }
    }
    String::new()
}

impl Cifar {
    /// Map the files of `usage` under `root`, in the layout its files show (binary or
    /// pickle, see the module docs). `label` matters for CIFAR-100 only.
    pub fn open(root: &Path, kind: CifarKind, usage: Usage, label: CifarLabel) -> Result<Cifar> {
        if !root.is_dir() {
            return Err(Error::Dataset {
                path: root.to_path_buf(),
                reason: "not a directory".into(),
            });
        }
        let found = Layout::detect(root, kind);
        let layout = found.unwrap_or(Layout::Binary);
        let mut files = Vec::new();
        let mut len = 0usize;
        for name in kind.files(usage, layout) {
            let path = root.join(&name);
            if !path.is_file() {
                let what = match found {
                    Some(Layout::Binary) => String::new(),
                    Some(Layout::Pickle) => {
                        " (the folder holds torchvision's pickle layout)".into()
                    }
                    None => format!(
                        "; found neither the binary layout ({}) nor torchvision's pickle \
                         layout ({})",
                        kind.listed(Layout::Binary),
                        kind.listed(Layout::Pickle)
                    ),
                };
                let hint = if found.is_none() {
                    missing_hint(root, kind)
                } else {
                    String::new()
                };
                return Err(Error::Dataset {
                    path,
                    reason: format!(
                        "missing: {} usage {} needs this file{what}{hint}",
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
            let (n, pickle) = match layout {
                Layout::Binary => {
                    let rs = kind.record_size();
                    if map.len() % rs != 0 || map.is_empty() {
                        return Err(Error::Dataset {
                            path,
                            reason: format!(
                                "size {} bytes is not a whole, non-zero number of {rs}-byte {} \
                                 records",
                                map.len(),
                                kind.name()
                            ),
                        });
                    }
                    (map.len() / rs, None)
                }
                Layout::Pickle => {
                    let p = parse_cifar_pickle(&map, kind).map_err(|e| Error::Dataset {
                        path: path.clone(),
                        reason: format!("not a readable {} pickle: {e}", kind.name()),
                    })?;
                    (p.len(), Some(p))
                }
            };
            files.push(RecordFile {
                name,
                map,
                first: len,
                pickle,
            });
            len += n;
        }
        Ok(Cifar {
            root: root.to_path_buf(),
            kind,
            usage,
            label,
            layout,
            files,
            len,
            classes: class_names(root, kind, label),
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
            "{} {} (usage {}{}): {} samples in {} file(s)",
            self.kind.name(),
            self.root.display(),
            self.usage,
            match self.layout {
                Layout::Binary => "",
                Layout::Pickle => ", pickle layout",
            },
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

    fn classes(&self) -> &[(String, u32)] {
        &self.classes
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
        let parsed = match &f.pickle {
            None => {
                let rs = self.kind.record_size();
                let rec = f.map.get(r * rs..(r + 1) * rs).unwrap_or_default();
                parse_record(self.kind, self.label, rec)
            }
            Some(p) => pickle_record(self.kind, self.label, p, &f.map, r),
        };
        let (labels, pixels) = parsed.map_err(|fault| Error::Sample {
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
