//! `kind = "cifar100"`: CIFAR-100's files, in the binary layout (`train.bin`, `test.bin`)
//! or torchvision's pickle layout (`cifar-100-python`: `train`, `test` beside `meta`), told
//! apart by the files present ([`super::cifar`] reads both), with the fine label, the
//! coarse one or both. Read from object storage once converted to shards.

use super::cifar10::detect_split;
use super::kind::{Listing, SourceDef};
use super::{Cifar, CifarKind, CifarLabel, Source, Usage};
use crate::error::Result;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `kind = "cifar100"`: the files, the split and which label(s) to keep.
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

    /// A folder of CIFAR-100 files (the pickle layout's `train`/`test` only beside its
    /// `meta`), with the split the files present make.
    pub fn detect(dir: &Path) -> Option<Cifar100Config> {
        let split = detect_split(dir, ["train.bin", "test.bin"]).or_else(|| {
            dir.join("meta")
                .is_file()
                .then(|| detect_split(dir, ["train", "test"]))
                .flatten()
        })?;
        Some(Cifar100Config::new(dir).usage(split))
    }
}

impl SourceDef for Cifar100Config {
    fn name(&self) -> &'static str {
        "cifar100"
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn root_mut(&mut self) -> &mut PathBuf {
        &mut self.root
    }

    fn usage_mut(&mut self) -> Option<&mut Option<Usage>> {
        Some(&mut self.usage)
    }

    fn listing(&self) -> Listing<'_> {
        Listing {
            usage: self.usage,
            label: self.label,
            ..Listing::default()
        }
    }

    fn open_local(&self, root: &Path) -> Result<Arc<dyn Source>> {
        Ok(Arc::new(Cifar::open(
            root,
            CifarKind::Cifar100,
            self.usage.unwrap_or_default(),
            self.label.unwrap_or_default(),
        )?))
    }
}
