//! Which dataset a `[source]` table names: its [`SourceKind`] and that kind's own fields
//! (`root`, CIFAR's `usage` and `label`, an image folder's `extensions`, ...), as one
//! [`Dataset`] value per kind.

use super::{CifarLabel, Usage};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Kind of source: the `kind` field of `[source]` (and the names the command line takes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum SourceKind {
    /// `root/<class>/<image>`.
    ImageFolder,
    /// CIFAR-10: the binary files or torchvision's pickle files.
    Cifar10,
    /// CIFAR-100: the binary files or torchvision's pickle files.
    Cifar100,
    /// A dataset converted by `imgfeed convert --format shards` (a folder with a
    /// `manifest.json`). A root holding such a manifest is read as shards whatever the
    /// kind says, so a pipeline written for the original runs unchanged on its copy.
    Shards,
}

/// `kind = "image_folder"`: `root/<class>/<image>`, classes sorted, labels from 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ImageFolderConfig {
    /// Dataset root (relative paths in a file are relative to the file's folder).
    #[serde(default)]
    pub root: PathBuf,
    /// Extensions to read (default jpg, jpeg, png, bmp, webp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<String>>,
    /// Folder name → label; only these folders are read (MindSpore's `class_indexing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_indexing: Option<BTreeMap<String, u32>>,
    /// Largest file read, in bytes (default 256 MiB); a larger file fails its sample (kind
    /// `file_too_large`) before it is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_bytes: Option<u64>,
}

impl ImageFolderConfig {
    /// The tree at `root`, every option at its default.
    pub fn new(root: impl Into<PathBuf>) -> ImageFolderConfig {
        ImageFolderConfig {
            root: root.into(),
            extensions: None,
            class_indexing: None,
            max_file_bytes: None,
        }
    }

    /// Read only files with these extensions.
    pub fn extensions<S: Into<String>>(mut self, list: impl IntoIterator<Item = S>) -> Self {
        self.extensions = Some(list.into_iter().map(Into::into).collect());
        self
    }

    /// Read only these folders, with these labels.
    pub fn class_indexing(mut self, map: BTreeMap<String, u32>) -> Self {
        self.class_indexing = Some(map);
        self
    }

    /// Fail files larger than `bytes` without reading them.
    pub fn max_file_bytes(mut self, bytes: u64) -> Self {
        self.max_file_bytes = Some(bytes);
        self
    }
}

/// `kind = "cifar10"` and `kind = "cifar100"`: the batch files, memory-mapped, in the
/// binary layout (`*.bin`) or torchvision's pickle layout (the same names without `.bin`),
/// told apart by the files present.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CifarConfig {
    /// The folder holding `data_batch_1.bin` … `test_batch.bin` (binary layout) or
    /// `data_batch_1` … `test_batch` (torchvision's `cifar-10-batches-py`).
    #[serde(default)]
    pub root: PathBuf,
    /// train, test or all (default train).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

impl CifarConfig {
    /// The files under `root`, the training split.
    pub fn new(root: impl Into<PathBuf>) -> CifarConfig {
        CifarConfig {
            root: root.into(),
            usage: None,
        }
    }

    /// Which split.
    pub fn usage(mut self, usage: impl Into<Option<Usage>>) -> Self {
        self.usage = usage.into();
        self
    }
}

/// `kind = "cifar100"`: [`CifarConfig`]'s fields and which label(s) to keep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Cifar100Config {
    /// The folder holding `train.bin` and `test.bin` (binary layout) or `train` and `test`
    /// (torchvision's `cifar-100-python`).
    #[serde(default)]
    pub root: PathBuf,
    /// train, test or all (default train).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// fine, coarse or both (default fine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<CifarLabel>,
}

impl Cifar100Config {
    /// The files under `root`, the training split, fine labels.
    pub fn new(root: impl Into<PathBuf>) -> Cifar100Config {
        Cifar100Config {
            root: root.into(),
            usage: None,
            label: None,
        }
    }

    /// Which split.
    pub fn usage(mut self, usage: impl Into<Option<Usage>>) -> Self {
        self.usage = usage.into();
        self
    }

    /// Which label(s).
    pub fn label(mut self, label: impl Into<Option<CifarLabel>>) -> Self {
        self.label = label.into();
        self
    }
}

/// `kind = "shards"`: a dataset written by `imgfeed convert --format shards`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ShardsConfig {
    /// The folder holding `manifest.json`.
    #[serde(default)]
    pub root: PathBuf,
}

impl ShardsConfig {
    /// The dataset at `root`.
    pub fn new(root: impl Into<PathBuf>) -> ShardsConfig {
        ShardsConfig { root: root.into() }
    }
}

/// Which dataset: a kind and that kind's fields only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Dataset {
    /// `root/<class>/<image>`.
    ImageFolder(ImageFolderConfig),
    /// CIFAR-10: binary or torchvision pickle files.
    Cifar10(CifarConfig),
    /// CIFAR-100: binary or torchvision pickle files.
    Cifar100(Cifar100Config),
    /// A converted dataset.
    Shards(ShardsConfig),
}

impl Dataset {
    /// A `kind` dataset at `root`, every option at its default.
    pub fn new(kind: SourceKind, root: impl Into<PathBuf>) -> Dataset {
        match kind {
            SourceKind::ImageFolder => Dataset::ImageFolder(ImageFolderConfig::new(root)),
            SourceKind::Cifar10 => Dataset::Cifar10(CifarConfig::new(root)),
            SourceKind::Cifar100 => Dataset::Cifar100(Cifar100Config::new(root)),
            SourceKind::Shards => Dataset::Shards(ShardsConfig::new(root)),
        }
    }

    /// Its kind.
    pub fn kind(&self) -> SourceKind {
        match self {
            Dataset::ImageFolder(_) => SourceKind::ImageFolder,
            Dataset::Cifar10(_) => SourceKind::Cifar10,
            Dataset::Cifar100(_) => SourceKind::Cifar100,
            Dataset::Shards(_) => SourceKind::Shards,
        }
    }

    /// Its root.
    pub fn root(&self) -> &Path {
        match self {
            Dataset::ImageFolder(c) => &c.root,
            Dataset::Cifar10(c) => &c.root,
            Dataset::Cifar100(c) => &c.root,
            Dataset::Shards(c) => &c.root,
        }
    }

    /// Its root, to change (the command line's `--data`, a file's relative root).
    pub fn root_mut(&mut self) -> &mut PathBuf {
        match self {
            Dataset::ImageFolder(c) => &mut c.root,
            Dataset::Cifar10(c) => &mut c.root,
            Dataset::Cifar100(c) => &mut c.root,
            Dataset::Shards(c) => &mut c.root,
        }
    }

    /// The CIFAR split as given (`None`: not given, or a kind without splits).
    pub fn usage(&self) -> Option<Usage> {
        self.listing().1
    }

    /// The CIFAR split, to change; `None` for kinds without one.
    pub fn usage_mut(&mut self) -> Option<&mut Option<Usage>> {
        match self {
            Dataset::Cifar10(c) => Some(&mut c.usage),
            Dataset::Cifar100(c) => Some(&mut c.usage),
            _ => None,
        }
    }

    /// `(class_indexing, usage, label)` as given: what a converted copy of this dataset
    /// must have been converted with.
    pub(crate) fn listing(
        &self,
    ) -> (
        Option<&BTreeMap<String, u32>>,
        Option<Usage>,
        Option<CifarLabel>,
    ) {
        match self {
            Dataset::ImageFolder(c) => (c.class_indexing.as_ref(), None, None),
            Dataset::Cifar10(c) => (None, c.usage, None),
            Dataset::Cifar100(c) => (None, c.usage, c.label),
            Dataset::Shards(_) => (None, None, None),
        }
    }
}
