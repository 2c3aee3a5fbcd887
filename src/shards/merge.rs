//! Joining the slices of a split conversion (`convert --num-shards K --shard-id I`, one job
//! per slice, all writing into one folder) into one dataset: `merge-index` reads the K slice
//! manifests, checks that they come from the same source and conversion and cover it
//! exactly (slices `0..K`, contiguous, nothing missing or repeated), and writes one index,
//! one names file and `manifest.json` that list every slice's shards. Shard files are not
//! copied or renamed. The folder may be a prefix in object storage ([`Folder`]): the
//! merged manifest is written last there too.

use super::folder::{Folder, LocalFolder};
use super::format::{
    header, parse_header, Entry, FileEntry, Manifest, ENTRY_LEN, HEADER_LEN, INDEX_MAGIC, MANIFEST,
    MAX_MANIFEST_BYTES,
};
use super::writer::Names;
use crate::error::{Error, Result};
use crate::ops::resize::pillow_arithmetic;
use crate::ops::Op;
use std::path::Path;

/// Whether two manifests' conversion ops do the same thing: equal once parsed, with
/// `exact` spelled out (unset means Pillow's arithmetic for `bilinear` and nothing for
/// other filters), so slices converted from pipeline files that differ only in how they
/// say it still merge. Ops this version cannot parse must be equal as written.
fn same_ops(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    fn parse(v: &serde_json::Value) -> Option<Vec<Op>> {
        let mut ops: Vec<Op> = serde_json::from_value(v.clone()).ok()?;
        for op in &mut ops {
            match op {
                Op::Resize(r) => {
                    r.exact = pillow_arithmetic(r.filter, r.exact).then_some(true);
                }
                Op::RandomResizedCrop(r) => {
                    r.exact = pillow_arithmetic(r.filter, r.exact).then_some(true);
                }
                _ => {}
            }
        }
        Some(ops)
    }
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::Dataset {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Read a slice file listed by `entry`, checking size and checksum.
fn read_checked(dir: &dyn Folder, entry: &FileEntry) -> Result<Vec<u8>> {
    let path = dir.path(&entry.file);
    let bytes = dir.read(&entry.file, entry.size)?;
    if bytes.len() as u64 != entry.size {
        return Err(bad(
            &path,
            format!(
                "{} bytes, but its manifest says {} (truncated?)",
                bytes.len(),
                entry.size
            ),
        ));
    }
    if super::format::crc32(&bytes) != entry.crc32 {
        return Err(bad(&path, "checksum mismatch: the file is corrupted"));
    }
    Ok(bytes)
}

/// Merge the slice manifests in `dir` into `dir/manifest.json`; returns the manifest.
/// `dir` may be `s3://bucket/prefix` (reached through `AWS_ENDPOINT_URL` or the store's
/// default endpoint; [`merge_index_with`] takes the options).
pub fn merge_index(dir: &Path) -> Result<Manifest> {
    merge_index_with(dir, &crate::store::StoreOptions::default())
}

/// [`merge_index`], reaching a dataset in object storage as `options` say.
pub fn merge_index_with(dir: &Path, options: &crate::store::StoreOptions) -> Result<Manifest> {
    if crate::store::url::is_remote(dir) {
        merge_in(&super::folder::StoreFolder::open(dir, options)?)
    } else {
        merge_in(&LocalFolder(dir.to_path_buf()))
    }
}

/// Merge the slice manifests in `folder` into its `manifest.json`.
pub fn merge_in(folder: &dyn Folder) -> Result<Manifest> {
    let target = folder.path(MANIFEST);
    let dir = folder.root();
    let dir = dir.as_path();
    if folder.exists(MANIFEST)? {
        return Err(bad(
            &target,
            "already exists: the slices were merged before",
        ));
    }
    let found: Vec<String> = folder
        .names_starting("slice-")?
        .into_iter()
        .filter(|n| n.ends_with(".json"))
        .collect();
    let Some(first_name) = found.first() else {
        return Err(bad(
            dir,
            "no slice manifests (slice-I-of-K.json): convert with --num-shards K --shard-id I \
             --out this folder first",
        ));
    };
    let read_manifest =
        |name: &str| Manifest::parse(&folder.path(name), &folder.read(name, MAX_MANIFEST_BYTES)?);
    let first = read_manifest(first_name)?;
    let Some(s0) = first.slice else {
        return Err(bad(&folder.path(first_name), "not a slice manifest"));
    };
    let count = s0.count;
    let mut slices: Vec<Option<Manifest>> = vec![None; count];
    for name in &found {
        let path = folder.path(name);
        let m = read_manifest(name)?;
        let s = m
            .slice
            .ok_or_else(|| bad(&path, "not a slice manifest (no `slice`)"))?;
        if s.count != count || name != &Names::new(Some((s.id, s.count))).manifest() {
            return Err(bad(
                &path,
                format!(
                    "slice {} of {}, but {first_name} is one of {count}",
                    s.id, s.count
                ),
            ));
        }
        let same = m.storage == first.storage
            && m.quality == first.quality
            && m.label_columns == first.label_columns
            && m.classes == first.classes
            && m.source == first.source
            && same_ops(&m.ops, &first.ops);
        if !same {
            return Err(bad(
                &path,
                format!(
                    "converted from a different source or with different settings than \
                     {first_name}"
                ),
            ));
        }
        match slices.get_mut(s.id) {
            Some(slot) => *slot = Some(m),
            None => return Err(bad(&path, format!("slice id {} >= {count}", s.id))),
        }
    }
    let missing: Vec<String> = (0..count)
        .filter(|&i| slices[i].is_none())
        .map(|i| Names::new(Some((i, count))).manifest())
        .collect();
    if !missing.is_empty() {
        return Err(bad(
            dir,
            format!("missing slice manifest(s): {}", missing.join(", ")),
        ));
    }
    let slices: Vec<Manifest> = slices.into_iter().flatten().collect();
    let mut next = 0u64;
    for m in &slices {
        if let Some(s) = m.slice {
            if s.first != next {
                return Err(bad(
                    dir,
                    format!(
                        "slice {} starts at source sample {}, expected {next}",
                        s.id, s.first
                    ),
                ));
            }
            next = s.end;
        }
    }
    if next != first.source.samples {
        return Err(bad(
            dir,
            format!(
                "the slices cover {next} of the source's {} samples",
                first.source.samples
            ),
        ));
    }

    let mut index = Vec::new();
    let mut names = Vec::new();
    let mut shards = Vec::new();
    let mut fixed = slices.first().and_then(|m| m.fixed_size);
    let mut samples = 0u64;
    for m in &slices {
        let ipath = folder.path(&m.index.file);
        let idx = read_checked(folder, &m.index)?;
        let (_, n) = parse_header(&ipath, &idx, INDEX_MAGIC, "index")?;
        let nm = read_checked(folder, &m.names)?;
        let body = idx.get(HEADER_LEN..).unwrap_or_default();
        if n != m.samples || body.len() as u64 != n * ENTRY_LEN as u64 {
            return Err(bad(&ipath, "entry count does not match its manifest"));
        }
        for i in 0..n as usize {
            let mut e = Entry::at(body, i).ok_or_else(|| bad(&ipath, "index ends early"))?;
            e.shard = e
                .shard
                .checked_add(shards.len() as u32)
                .ok_or_else(|| bad(&ipath, "too many shards"))?;
            e.name_offset += names.len() as u64;
            index.extend_from_slice(&e.to_bytes());
        }
        names.extend_from_slice(&nm);
        shards.extend(m.shards.iter().cloned());
        if m.fixed_size != fixed {
            fixed = None;
        }
        samples += n;
    }
    let whole = Names::new(None);
    let mut head = header(INDEX_MAGIC, ENTRY_LEN as u32, samples).to_vec();
    head.extend_from_slice(&index);
    let index_entry = FileEntry {
        file: whole.index(),
        size: head.len() as u64,
        crc32: super::format::crc32(&head),
        samples: None,
    };
    let names_entry = FileEntry {
        file: whole.names(),
        size: names.len() as u64,
        crc32: super::format::crc32(&names),
        samples: None,
    };
    folder.write(&index_entry.file, head)?;
    folder.write(&names_entry.file, names)?;
    let manifest = Manifest {
        samples,
        fixed_size: fixed,
        index: index_entry,
        names: names_entry,
        shards,
        slice: None,
        ..first
    };
    let text = serde_json::to_vec_pretty(&manifest).map_err(|e| Error::Io {
        path: target.clone(),
        source: std::io::Error::other(e),
    })?;
    folder.write(MANIFEST, text)?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::same_ops;
    use serde_json::json;

    #[test]
    fn ops_compare_by_meaning() {
        let rrc = |exact: Option<bool>| {
            let mut op = json!({"op": "random_resized_crop", "size": 224});
            if let Some(e) = exact {
                op["exact"] = json!(e);
            }
            json!([{"op": "decode"}, op])
        };
        assert!(same_ops(&rrc(None), &rrc(Some(true))));
        assert!(!same_ops(&rrc(None), &rrc(Some(false))));
        // Not bilinear: `exact` does nothing either way.
        let cubic = |exact: bool| json!([{"op": "resize", "size": 64, "filter": "bicubic", "exact": exact}]);
        assert!(same_ops(&cubic(true), &cubic(false)));
        // Ops this version cannot parse compare as written.
        let future = json!([{"op": "sharpen", "amount": 1}]);
        assert!(same_ops(&future, &future.clone()));
        assert!(!same_ops(&future, &json!([{"op": "sharpen", "amount": 2}])));
    }
}
