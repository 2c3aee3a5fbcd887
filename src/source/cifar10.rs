//! `kind = "cifar10"`: CIFAR-10's batch files, in the binary layout (`data_batch_1.bin` …
//! `test_batch.bin`) or torchvision's pickle layout (`cifar-10-batches-py`), told apart by
//! the files present ([`super::cifar`] reads both). Read from object storage once converted
//! to shards.

use super::kind::{Listing, SourceDef};
use super::{Cifar, CifarKind, CifarLabel, Source, Usage};
use crate::error::Result;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `kind = "cifar10"` (see the module).
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

    /// A folder of CIFAR-10 files (either layout), with the split the files present make.
    pub fn detect(dir: &Path) -> Option<CifarConfig> {
        let split = detect_split(dir, ["data_batch_1.bin", "test_batch.bin"])
            .or_else(|| detect_split(dir, ["data_batch_1", "test_batch"]))?;
        Some(CifarConfig::new(dir).usage(split))
    }
}

/// The split a folder holds when it has the training file `train` or the test file `test`
/// (both: all).
pub(crate) fn detect_split(dir: &Path, [train, test]: [&str; 2]) -> Option<Usage> {
    let has = |f: &str| dir.join(f).is_file();
    match (has(train), has(test)) {
        (false, false) => None,
        (true, true) => Some(Usage::All),
        (false, true) => Some(Usage::Test),
        (true, false) => Some(Usage::Train),
    }
}

impl SourceDef for CifarConfig {
    fn name(&self) -> &'static str {
        "cifar10"
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
            ..Listing::default()
        }
    }

    fn open_local(&self, root: &Path) -> Result<Arc<dyn Source>> {
        Ok(Arc::new(Cifar::open(
            root,
            CifarKind::Cifar10,
            self.usage.unwrap_or_default(),
            CifarLabel::default(),
        )?))
    }
}
