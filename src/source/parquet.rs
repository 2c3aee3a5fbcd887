//! `kind = "parquet"`: Parquet files with an image column, as the Hugging Face Hub stores
//! datasets (`image` a struct {`bytes`, `path`} or binary, `label` an integer, the class
//! names in the `huggingface` metadata). A Parquet file's images lie in compressed pages,
//! so each file is unpacked once into the cache ([`crate::formats::parquet`], row group by
//! row group) and that copy indexed and read ([`super::record_files`]): random access,
//! shuffle, sharding and resume as for any source. `root` names the files: one file, a
//! folder of `.parquet` files, or a pattern (`train-{00000..00146}-of-00147.parquet`);
//! in object storage (an object, a pattern, or a prefix with `kind = "parquet"`) each is
//! fetched whole into the cache and unpacked there.
//!
//! ```toml
//! [source]
//! kind = "parquet"
//! root = "data/train-{00000..00146}-of-00147.parquet"
//! image = "image"   # the image column: a struct with a binary `bytes` field, or binary
//! label = "label"   # the integer label column
//! ```

use super::kind::SourceDef;
use super::root::StoreRoot;
use super::record_files::{self, RecordFiles};
use super::Source;
use crate::error::Result;
use crate::formats::parquet::{Parquet, ParquetOptions};
use crate::formats::RecordFormat;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `kind = "parquet"` (see the module).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ParquetConfig {
    /// The files: a file, a folder of them, or a brace pattern.
    #[serde(default)]
    pub root: PathBuf,
    /// The image column (default `image`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The integer label column (default `label`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl ParquetConfig {
    /// The files `root` names, the default columns.
    pub fn new(root: impl Into<PathBuf>) -> ParquetConfig {
        ParquetConfig {
            root: root.into(),
            image: None,
            label: None,
        }
    }

    /// The format these fields describe.
    pub fn format(&self) -> Parquet {
        let d = ParquetOptions::default();
        Parquet {
            options: ParquetOptions {
                image_column: self.image.clone().unwrap_or(d.image_column),
                label_column: self.label.clone().unwrap_or(d.label_column),
            },
        }
    }

    /// A `.parquet` file, a pattern of them, or a folder holding them.
    pub fn detect(path: &Path) -> Option<ParquetConfig> {
        record_files::names_files(path, Parquet::default().extensions())
            .then(|| ParquetConfig::new(path))
    }
}

impl SourceDef for ParquetConfig {
    fn name(&self) -> &'static str {
        "parquet"
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
