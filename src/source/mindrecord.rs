//! `kind = "mindrecord"`: MindSpore's MindRecord files (as `mindspore.mindrecord.FileWriter`
//! writes them), read in place from each file's own header and page table
//! ([`crate::formats::mindrecord`]; the SQLite `.db` beside each file is not needed).
//! `root` names the files as MindSpore's `MindDataset(dataset_files=…)` does: one file
//! reads its whole group (`name.mindrecord0 … N-1`, in the order its header lists them); a
//! folder reads every group in it (by the first name of each); a list (`a::b`) or a
//! pattern (`train.mindrecord{0..3}`) reads exactly the files it names.
//!
//! ```toml
//! [source]
//! kind = "mindrecord"
//! root = "data/train.mindrecord0"
//! image = "data"    # the bytes column holding the encoded image
//! label = "label"   # the int32/int64 column holding the label
//! ```

use super::kind::SourceDef;
use super::record_files::{self, RecordFiles};
use super::Source;
use crate::error::{Error, Result};
use crate::formats::mindrecord::{
    group, is_mindrecord_name, read_header, MindRecord, MindRecordOptions,
};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `kind = "mindrecord"` (see the module).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct MindRecordConfig {
    /// The files: one file of a group, a folder, a list or a brace pattern.
    #[serde(default)]
    pub root: PathBuf,
    /// The bytes column holding the encoded image (default `data`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The int32/int64 column holding the label (default `label`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::Dataset {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

impl MindRecordConfig {
    /// The files `root` names, the default columns.
    pub fn new(root: impl Into<PathBuf>) -> MindRecordConfig {
        MindRecordConfig {
            root: root.into(),
            image: None,
            label: None,
        }
    }

    /// The format these fields describe.
    pub fn format(&self) -> MindRecord {
        let d = MindRecordOptions::default();
        MindRecord {
            options: MindRecordOptions {
                image_column: self.image.clone().unwrap_or(d.image_column),
                label_column: self.label.clone().unwrap_or(d.label_column),
                name_column: d.name_column,
            },
        }
    }

    /// A `.mindrecord`/`.mindrecordN` file, a list or pattern of them, or a folder holding
    /// them.
    pub fn detect(path: &Path) -> Option<MindRecordConfig> {
        let text = path.to_str()?;
        let base = |n: &str| is_mindrecord_name(n.rsplit('/').next().unwrap_or(n));
        let found = if super::brace::is_pattern(text) {
            super::brace::expand(text)
                .ok()
                .and_then(|names| names.first().map(|n| base(n)))
                .unwrap_or(false)
        } else if path.is_dir() {
            std::fs::read_dir(path).is_ok_and(|d| {
                d.flatten().any(|e| {
                    e.file_name().to_str().is_some_and(is_mindrecord_name) && e.path().is_file()
                })
            })
        } else {
            base(text)
        };
        found.then(|| MindRecordConfig::new(path))
    }
}

/// The group names in the header of the local file `path`.
fn group_of(path: &Path) -> Result<Vec<PathBuf>> {
    let io = |e: std::io::Error| bad(path, e.to_string());
    let mut f = std::fs::File::open(path).map_err(io)?;
    let size = f.metadata().map_err(io)?.len();
    let mut len = [0u8; 8];
    f.read_exact(&mut len)
        .map_err(|_| bad(path, "not a MindRecord file: shorter than 8 bytes"))?;
    let n = u64::from_le_bytes(len);
    if n > size - 8 {
        return Err(bad(
            path,
            format!("not a MindRecord file: header of {n} bytes announced, the file has {size}"),
        ));
    }
    // Bounded by the file's size, checked just above.
    let mut bytes = len.to_vec();
    bytes.resize(8 + n as usize, 0);
    f.read_exact(&mut bytes[8..]).map_err(io)?;
    let header = read_header(&bytes).map_err(|e| bad(path, e.to_string()))?;
    group(&header, path).map_err(|e| bad(path, e.to_string()))
}

/// The files `root` names, in MindSpore's order (see the module).
fn list(root: &Path) -> Result<Vec<(String, PathBuf)>> {
    let named = |p: PathBuf| {
        let n = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        (n, p)
    };
    let text = root.to_str().unwrap_or_default();
    if super::brace::is_pattern(text) {
        return record_files::list_local(root, &[""]);
    }
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    let add_group = |file: &Path, out: &mut Vec<(String, PathBuf)>| -> Result<()> {
        for p in group_of(file)? {
            if !p.is_file() {
                return Err(bad(
                    &p,
                    format!(
                        "no such file (a file of the MindRecord group {} belongs to)",
                        file.display()
                    ),
                ));
            }
            if !out.iter().any(|(_, q)| *q == p) {
                out.push(named(p));
            }
        }
        Ok(())
    };
    if root.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root)
            .map_err(|e| bad(root, e.to_string()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.is_file()
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(is_mindrecord_name)
            })
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(bad(root, "no .mindrecord files in this folder"));
        }
        for f in files {
            add_group(&f, &mut out)?;
        }
        return Ok(out);
    }
    if !root.is_file() {
        return Err(bad(root, "no such file or folder"));
    }
    add_group(root, &mut out)?;
    Ok(out)
}

impl SourceDef for MindRecordConfig {
    fn name(&self) -> &'static str {
        "mindrecord"
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
        let files = list(root)?;
        Ok(Arc::new(RecordFiles::open_listed(
            root,
            files,
            &self.format(),
        )?))
    }
}
