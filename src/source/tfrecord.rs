//! `kind = "tfrecord"`: TFRecord files of `tf.train.Example`s (as TensorFlow's
//! `TFRecordWriter` and the TPU ImageNet scripts write them), read in place through their
//! index ([`crate::formats::tfrecord`] builds it, CRCs checked; [`super::record_files`]
//! keeps it and reads the samples). `root` names the files: one file, a folder of
//! `.tfrecord`/`.tfrecords` files, or a pattern (`train-{00000..01023}-of-01024`). A gzip'd
//! file (`.gz`, or recognised by its first bytes) is decompressed once into the cache and
//! that copy read. In object storage (an object, a pattern, or a prefix with
//! `kind = "tfrecord"`) the files are fetched whole into the cache ahead of the epoch, as
//! tars are; gzip'd ones are fetched whole once and unpacked into the cache, as local ones.
//!
//! ```toml
//! [source]
//! kind = "tfrecord"
//! root = "data/train-{00000..01023}-of-01024"
//! image = "image/encoded"       # the bytes feature holding the encoded image
//! label = "image/class/label"   # the int64 feature holding the label
//! label_offset = -1             # added to the label: TensorFlow's ImageNet labels are 1-based
//! ```

use super::kind::SourceDef;
use super::root::StoreRoot;
use super::record_files::{self, RecordFiles};
use super::Source;
use crate::error::Result;
use crate::formats::tfrecord::{TfRecord, TfRecordOptions};
use crate::formats::RecordFormat;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `kind = "tfrecord"` (see the module).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TfRecordConfig {
    /// The files: a file, a folder of them, or a brace pattern.
    #[serde(default)]
    pub root: PathBuf,
    /// The bytes feature holding the encoded image (default `image/encoded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The int64 feature holding the label (default `image/class/label`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Added to every label (default 0; `-1` for 1-based labels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_offset: Option<i64>,
}

impl TfRecordConfig {
    /// The files `root` names, the default features.
    pub fn new(root: impl Into<PathBuf>) -> TfRecordConfig {
        TfRecordConfig {
            root: root.into(),
            image: None,
            label: None,
            label_offset: None,
        }
    }

    /// The format these fields describe.
    pub fn format(&self) -> TfRecord {
        let d = TfRecordOptions::default();
        TfRecord {
            options: TfRecordOptions {
                image_feature: self.image.clone().unwrap_or(d.image_feature),
                label_feature: self.label.clone().unwrap_or(d.label_feature),
                label_offset: self.label_offset.unwrap_or(0),
            },
        }
    }

    /// A `.tfrecord`/`.tfrecords` file (gzip'd too), a pattern of them, or a folder
    /// holding them.
    pub fn detect(path: &Path) -> Option<TfRecordConfig> {
        record_files::names_files(path, TfRecord::default().extensions())
            .then(|| TfRecordConfig::new(path))
    }
}

impl SourceDef for TfRecordConfig {
    fn name(&self) -> &'static str {
        "tfrecord"
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
