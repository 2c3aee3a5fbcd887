//! `kind = "webdataset"`: WebDataset tar files (`KEY.jpg` + `KEY.cls` per sample), read in
//! place through their index ([`crate::formats::tar`] builds it, [`super::record_files`]
//! keeps it and reads the samples). `root` names the tars: one file, a folder of them, or
//! a pattern (`train-{0000..0146}.tar`), locally or in object storage (`s3://…`; there a
//! prefix holding them too).
//!
//! ```toml
//! [source]
//! kind = "webdataset"
//! root = "data/train-{0000..0146}.tar"
//! image = "jpg;jpeg;png;webp"   # the image member's extensions, in order of preference
//! label = "cls"                 # the label member's extension (an ASCII integer)
//! ```

use super::kind::SourceDef;
use super::root::StoreRoot;
use super::record_files::{self, RecordFiles};
use super::Source;
use crate::error::Result;
use crate::formats::tar::{WebDataset, DEFAULT_IMAGE, DEFAULT_LABEL};
use crate::formats::RecordFormat;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `kind = "webdataset"` (see the module).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct WebDatasetConfig {
    /// The tars: a file, a folder of them, or a brace pattern.
    #[serde(default)]
    pub root: PathBuf,
    /// The image member's extensions, `;`-separated, in order of preference (default
    /// `jpg;jpeg;png;webp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The label member's extension (default `cls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl WebDatasetConfig {
    /// The tars `root` names, the default members.
    pub fn new(root: impl Into<PathBuf>) -> WebDatasetConfig {
        WebDatasetConfig {
            root: root.into(),
            image: None,
            label: None,
        }
    }

    /// The format these fields describe.
    pub fn format(&self) -> WebDataset {
        WebDataset::new(
            self.image.as_deref().unwrap_or(DEFAULT_IMAGE),
            self.label.as_deref().unwrap_or(DEFAULT_LABEL),
        )
    }

    /// A `.tar` file, a pattern of them, or a folder holding `.tar` files.
    pub fn detect(path: &Path) -> Option<WebDatasetConfig> {
        record_files::names_files(path, WebDataset::default().extensions())
            .then(|| WebDatasetConfig::new(path))
    }
}

impl SourceDef for WebDatasetConfig {
    fn name(&self) -> &'static str {
        "webdataset"
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn root_mut(&mut self) -> &mut PathBuf {
        &mut self.root
    }

    fn by_extension(&self) -> bool {
        true
    }

    fn open_local(&self, root: &Path) -> Result<Arc<dyn Source>> {
        Ok(Arc::new(RecordFiles::open_local(root, &self.format())?))
    }

    fn open_store(&self, at: StoreRoot) -> Result<Arc<dyn Source>> {
        Ok(Arc::new(RecordFiles::open_store(&at, &self.format())?))
    }
}
