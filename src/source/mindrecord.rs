//! `kind = "mindrecord"`: MindSpore's MindRecord files (as `mindspore.mindrecord.FileWriter`
//! writes them), read in place from each file's own header and page table
//! ([`crate::formats::mindrecord`]; the SQLite `.db` beside each file is not needed).
//! `root` names the files as MindSpore's `MindDataset(dataset_files=…)` does: one file
//! reads its whole group (`name.mindrecord0 … N-1`, in the order its header lists them); a
//! folder reads every group in it (by the first name of each); a list (`a::b`) or a
//! pattern (`train.mindrecord{0..3}`) reads exactly the files it names.
//!
//! In object storage (`s3://`, `gs://`, `az://`, `http(s)://`) the root names objects the
//! same ways: one object reads its group (its header's first bytes asked for by a ranged
//! GET, the names it lists found in the prefix's listing), a prefix every group in it, a
//! list or pattern exactly its objects. The objects are then read as WebDataset tars are
//! ([`RecordFiles::open_objects`]): each indexed once (the index kept in the cache, keyed
//! by the object's size and ETag), fetched whole into the cache ahead of the epoch's order.
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
use super::root::StoreRoot;
use super::Source;
use crate::error::{Error, Result};
use crate::formats::mindrecord::{
    group, is_mindrecord_name, read_header, MindRecord, MindRecordOptions,
};
use crate::store::{ObjectInfo, StoreClient, StoreUrl};
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

/// Bytes of an object's start asked for to read its header: MindSpore's JSON header is
/// mostly far shorter (a longer one is asked for in a second request).
const FIRST_READ: u64 = 64 << 10;

/// The longest header read from a store: MindSpore's `header_size` is at most 128 MiB.
const MAX_HEADER: u64 = 128 << 20;

/// The group names in the header of the object `name` (`size` bytes) under `client`'s
/// prefix: its first bytes only (see [`FIRST_READ`]).
fn store_group_of(client: &StoreClient, name: &str, size: u64) -> Result<Vec<String>> {
    let object = client.url().object(name);
    let path = Path::new(&object);
    if size < 8 {
        return Err(bad(path, "not a MindRecord file: shorter than 8 bytes"));
    }
    let mut bytes = client.get_range(name, 0..size.min(FIRST_READ))?;
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap_or([0; 8]));
    if n > size - 8 {
        let reason = format!(
            "not a MindRecord file: header of {n} bytes announced, the object has {size}"
        );
        return Err(bad(path, reason));
    }
    if n > MAX_HEADER {
        let reason = format!("a header of {n} bytes announced: more than MindSpore writes");
        return Err(bad(path, reason));
    }
    let end = 8 + n;
    let have = bytes.len() as u64;
    if end > have {
        bytes.extend(client.get_range(name, have..end)?);
    }
    bytes.truncate(end as usize);
    let header = read_header(&bytes).map_err(|e| bad(path, e.to_string()))?;
    let names = group(&header, Path::new(name)).map_err(|e| bad(path, e.to_string()))?;
    Ok(names
        .into_iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect())
}

/// The objects `at` names, in MindSpore's order, with the client of the prefix they are
/// in (see the module).
fn list_store(at: &StoreRoot) -> Result<(StoreClient, Vec<(String, ObjectInfo)>)> {
    let text = at.root.to_string_lossy().into_owned();
    let trimmed = text.trim_end_matches('/');
    let pattern = super::brace::is_pattern(trimmed);
    let one = !pattern && is_mindrecord_name(trimmed.rsplit('/').next().unwrap_or_default());
    let (parent, wanted) = if pattern || one {
        // Every name is picked ("" ends them all): the pattern's, or the one object.
        record_files::store_selection(trimmed, &[""]).map_err(|reason| bad(&at.root, reason))?
    } else {
        (trimmed.to_string(), None)
    };
    let url = StoreUrl::parse(&parent)?;
    let client = StoreClient::new(&url, at.options.endpoint.as_deref())?;
    let listed = client.list_info(super::store_tree::MAX_OBJECTS)?;
    let by_name: std::collections::HashMap<&str, &ObjectInfo> =
        listed.iter().map(|(k, i)| (k.as_str(), i)).collect();
    let info = |n: &str, why: &dyn Fn() -> String| match by_name.get(n) {
        Some(i) => Ok((n.to_string(), (*i).clone())),
        None => Err(bad(Path::new(&url.object(n)), why())),
    };
    let mut found: Vec<(String, ObjectInfo)> = Vec::new();
    let add_group = |first: &str, found: &mut Vec<(String, ObjectInfo)>| -> Result<()> {
        let (_, first_info) = info(first, &|| "no such object".to_string())?;
        for name in store_group_of(&client, first, first_info.size)? {
            if !found.iter().any(|(n, _)| *n == name) {
                let member = info(&name, &|| {
                    format!(
                        "no such object (a file of the MindRecord group {} belongs to)",
                        url.object(first)
                    )
                })?;
                found.push(member);
            }
        }
        Ok(())
    };
    match wanted {
        Some(names) if pattern => {
            for n in names {
                found.push(info(&n, &|| {
                    "no such object (named by the pattern)".to_string()
                })?);
            }
        }
        Some(names) => {
            for n in names {
                add_group(&n, &mut found)?;
            }
        }
        None => {
            let mut firsts: Vec<&str> = listed
                .iter()
                .map(|(k, _)| k.as_str())
                .filter(|k| !k.contains('/') && is_mindrecord_name(k))
                .collect();
            firsts.sort_unstable();
            if firsts.is_empty() {
                return Err(bad(&at.root, "no .mindrecord objects there"));
            }
            for f in firsts {
                if !found.iter().any(|(n, _)| n == f) {
                    add_group(f, &mut found)?;
                }
            }
        }
    }
    Ok((client, found))
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

    fn open_store(&self, at: StoreRoot) -> Result<Arc<dyn Source>> {
        let (client, found) = list_store(&at)?;
        Ok(Arc::new(RecordFiles::open_objects(
            &at,
            &self.format(),
            client,
            found,
        )?))
    }
}
