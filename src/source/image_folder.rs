//! `root/<class>/<image>` trees, read the way MindSpore's `ImageFolderDataset` reads them.
//!
//! * A class is an immediate subfolder of the root; classes are sorted by name and labelled
//!   0, 1, ... — or labelled by `class_indexing`, in which case only the folders it names
//!   are read (a name with no folder is an error rather than a silent empty class).
//! * Images are the files under a class folder (nested folders included, like torchvision),
//!   whose extension is in `extensions` (case-insensitive; default jpg, jpeg, png, bmp,
//!   webp). Hidden files and folders (a leading `.`) and other files are ignored.
//! * Samples are ordered by class folder name, then by path (with `class_indexing` too, as
//!   MindSpore does): the same order for every run.
//! * An empty root, or a root with no image, is an error.
//! * The same rules apply to a prefix in object storage ([`ImageFolder::from_keys`]: keys
//!   `class/image.jpg`; a folder is a key's `/`-separated segment), so both give the same
//!   classes, labels and order.
//! * What was left out while listing, and why, is kept ([`ImageFolder::ignored`]): hidden
//!   entries, files with other extensions, files outside any class folder, folders
//!   `class_indexing` does not name (`imgfeed validate` prints them).
//! * A file larger than `max_file_bytes` (default [`DEFAULT_MAX_FILE_BYTES`]) fails its
//!   sample on its size, before a byte of it is read: with `max_pixels` on decode, the memory
//!   a worker holds is bounded whatever the files claim.

use super::kind::{Listing, SourceDef};
use super::root::StoreRoot;
use super::{Raw, RawSample, Source};
use crate::error::{Error, Invalid, Result, SampleErrorKind};
use crate::spec::Spec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

    /// `max_file_bytes` checked: at least one byte.
    fn file_limit(&self) -> Result<Option<u64>> {
        match self.max_file_bytes {
            Some(0) => {
                let setting = "source.max_file_bytes";
                Err(Invalid::TooSmall { setting, min: 1 }.into())
            }
            n => Ok(n),
        }
    }

    /// Any folder is read as a tree (the kind `imgfeed validate` falls back to).
    pub fn detect(dir: &Path) -> Option<ImageFolderConfig> {
        Some(ImageFolderConfig::new(dir))
    }
}

impl SourceDef for ImageFolderConfig {
    fn name(&self) -> &'static str {
        "image_folder"
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn root_mut(&mut self) -> &mut PathBuf {
        &mut self.root
    }

    fn listing(&self) -> Listing<'_> {
        Listing {
            class_indexing: self.class_indexing.as_ref(),
            ..Listing::default()
        }
    }

    fn open_local(&self, root: &Path) -> Result<Arc<dyn Source>> {
        let f = ImageFolder::open(
            root,
            self.extensions.as_deref(),
            self.class_indexing.as_ref(),
        )?;
        let f = match self.file_limit()? {
            Some(n) => f.with_max_file_bytes(n),
            None => f,
        };
        Ok(Arc::new(f))
    }

    /// An image tree in object storage, read as it is ([`super::store_tree`]); a plain HTTP
    /// server has no listing: shards only.
    fn open_store(&self, at: StoreRoot) -> Result<Arc<dyn Source>> {
        if at.url.store().read_only() {
            return Err(super::kind::not_converted(self.name(), &at));
        }
        let tree = super::store_tree::open_tree(
            at,
            self.extensions.as_deref(),
            self.class_indexing.as_ref(),
            self.max_file_bytes,
        )?;
        Ok(Arc::new(tree))
    }
}

thread_local! {
    static PATH: std::cell::RefCell<PathBuf> = std::cell::RefCell::new(PathBuf::new());
}

/// Extensions read when none are given.
pub const DEFAULT_EXTENSIONS: [&str; 5] = ["jpg", "jpeg", "png", "bmp", "webp"];

/// Largest image file read by default (256 MiB): far above any real photograph, well
/// below what would strain a worker's memory.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 256 << 20;

/// Why a directory entry is not a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ignored {
    /// Its name starts with `.`.
    Hidden,
    /// Its extension is not one of `extensions`.
    Extension,
    /// A file directly under the root, outside any class folder.
    OutsideClass,
    /// A class folder that `class_indexing` does not name.
    UnlistedClass,
    /// Neither a regular file nor a folder (a socket, a broken link, ...).
    NotAFile,
}

impl Ignored {
    /// A short snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Ignored::Hidden => "hidden",
            Ignored::Extension => "extension",
            Ignored::OutsideClass => "outside_class",
            Ignored::UnlistedClass => "unlisted_class",
            Ignored::NotAFile => "not_a_file",
        }
    }
}

/// An ImageFolder dataset: a sorted list of `(relative path, label)`.
#[derive(Debug)]
pub struct ImageFolder {
    root: PathBuf,
    classes: Vec<(String, u32)>,
    /// The classes whose folder holds no sample (they keep their label).
    empty: Vec<(String, u32)>,
    samples: Vec<(PathBuf, u32)>,
    ignored: Vec<(PathBuf, Ignored)>,
    max_file_bytes: u64,
}

fn is_hidden(name: &std::ffi::OsStr) -> bool {
    name.to_string_lossy().starts_with('.')
}

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Dataset {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

impl ImageFolder {
    /// List the dataset under `root`.
    ///
    /// `extensions`: with or without the dot, any case; `None` = [`DEFAULT_EXTENSIONS`].
    /// `class_indexing`: folder name → label.
    pub fn open(
        root: &Path,
        extensions: Option<&[String]>,
        class_indexing: Option<&BTreeMap<String, u32>>,
    ) -> Result<ImageFolder> {
        let exts = parse_extensions(extensions)?;
        let meta = fs::metadata(root).map_err(|e| io_err(root, e))?;
        if !meta.is_dir() {
            return Err(Error::Dataset {
                path: root.to_path_buf(),
                reason: "not a directory".into(),
            });
        }
        let mut folders = Vec::new();
        let mut ignored = Vec::new();
        for entry in fs::read_dir(root).map_err(|e| io_err(root, e))? {
            let entry = entry.map_err(|e| io_err(root, e))?;
            let name = entry.file_name();
            if is_hidden(&name) {
                ignored.push((PathBuf::from(&name), Ignored::Hidden));
                continue;
            }
            let path = entry.path();
            // Follows symlinks: a linked class folder is a class folder.
            match fs::metadata(&path) {
                Ok(m) if m.is_dir() => folders.push(name.to_string_lossy().into_owned()),
                Ok(m) if m.is_file() => ignored.push((PathBuf::from(&name), Ignored::OutsideClass)),
                _ => ignored.push((PathBuf::from(&name), Ignored::NotAFile)),
            }
        }
        folders.sort();
        let collect = |name: &str, files: &mut Vec<PathBuf>, ignored: &mut Vec<_>| {
            collect_files(root, Path::new(name), &exts, files, ignored)
        };
        ImageFolder::assemble(root, folders, class_indexing, &exts, ignored, collect)
    }

    /// The dataset whose files are `keys` (`/`-separated paths relative to `root`, a
    /// prefix in object storage), by the rules of a local tree: a class is a key's first
    /// segment, its images the keys under it with one of `extensions`, hidden segments
    /// left out. A key ending in `/` (a folder marker) makes a folder without a file.
    pub fn from_keys<'k>(
        root: &Path,
        keys: impl IntoIterator<Item = &'k str>,
        extensions: Option<&[String]>,
        class_indexing: Option<&BTreeMap<String, u32>>,
    ) -> Result<ImageFolder> {
        let exts = parse_extensions(extensions)?;
        let mut ignored = Vec::new();
        // A class's images, and what was left out inside it (reported only for the
        // classes read, as a local tree's unread folders are not walked).
        type Class = (Vec<PathBuf>, Vec<(PathBuf, Ignored)>);
        let mut by_class: BTreeMap<String, Class> = BTreeMap::new();
        let mut hidden = std::collections::BTreeSet::new();
        for key in keys {
            let parts: Vec<&str> = key.split('/').collect();
            let Some((last, folders)) = parts.split_last() else {
                continue;
            };
            // The first hidden segment hides what is under it, reported once.
            if let Some(h) = parts.iter().position(|p| p.starts_with('.')) {
                hidden.insert((parts[0].to_string(), h, parts[..=h].join("/")));
                continue;
            }
            let Some((class, _)) = folders.split_first() else {
                if !last.is_empty() {
                    ignored.push((PathBuf::from(last), Ignored::OutsideClass));
                }
                continue;
            };
            let (files, left_out) = by_class.entry((*class).to_string()).or_default();
            if last.is_empty() {
                continue; // a folder marker
            }
            let rel: PathBuf = parts.iter().collect();
            let ext_ok = Path::new(last)
                .extension()
                .map(|e| e.to_string_lossy().to_ascii_lowercase())
                .is_some_and(|e| exts.contains(&e));
            if ext_ok {
                files.push(rel);
            } else {
                left_out.push((rel, Ignored::Extension));
            }
        }
        for (class, at, path) in hidden {
            let entry = (PathBuf::from(path), Ignored::Hidden);
            match by_class.get_mut(&class) {
                Some((_, left_out)) if at > 0 => left_out.push(entry),
                None if at > 0 => {
                    // Only hidden entries under it: still a class folder.
                    by_class.insert(class, (Vec::new(), vec![entry]));
                }
                _ => ignored.push(entry),
            }
        }
        let folders: Vec<String> = by_class.keys().cloned().collect();
        let collect = |name: &str, files: &mut Vec<PathBuf>, left: &mut Vec<_>| {
            if let Some((f, l)) = by_class.get(name) {
                files.extend(f.iter().cloned());
                left.extend(l.iter().cloned());
            }
            Ok(())
        };
        ImageFolder::assemble(root, folders, class_indexing, &exts, ignored, collect)
    }

    /// Label the class `folders` (sorted) and list their images (`collect` gives a class
    /// folder's files, root-relative): MindSpore's order, shared by local trees and
    /// object storage.
    fn assemble(
        root: &Path,
        folders: Vec<String>,
        class_indexing: Option<&BTreeMap<String, u32>>,
        exts: &[String],
        mut ignored: Vec<(PathBuf, Ignored)>,
        mut collect: impl FnMut(&str, &mut Vec<PathBuf>, &mut Vec<(PathBuf, Ignored)>) -> Result<()>,
    ) -> Result<ImageFolder> {
        if folders.is_empty() {
            return Err(Error::Dataset {
                path: root.to_path_buf(),
                reason: "no class folders (expected root/<class>/<image>)".into(),
            });
        }
        let classes: Vec<(String, u32)> = match class_indexing {
            None => folders
                .iter()
                .enumerate()
                .map(|(i, name)| (name.clone(), i as u32))
                .collect(),
            Some(map) => {
                for name in map.keys() {
                    if !folders.contains(name) {
                        return Err(Error::Dataset {
                            path: root.join(name),
                            reason: "class_indexing names a class folder that does not exist"
                                .into(),
                        });
                    }
                }
                for f in &folders {
                    if !map.contains_key(f) {
                        ignored.push((PathBuf::from(f), Ignored::UnlistedClass));
                    }
                }
                let mut v: Vec<(String, u32)> =
                    map.iter().map(|(k, &label)| (k.clone(), label)).collect();
                // MindSpore sorts the folders by name and then looks their labels up,
                // so samples come in folder-name order whatever the labels are.
                v.sort_by(|a, b| a.0.cmp(&b.0));
                v
            }
        };
        let mut samples = Vec::new();
        let mut empty = Vec::new();
        for (name, label) in &classes {
            let mut files = Vec::new();
            collect(name, &mut files, &mut ignored)?;
            if files.is_empty() {
                empty.push((name.clone(), *label));
            }
            files.sort();
            samples.extend(files.into_iter().map(|p| (p, *label)));
        }
        if samples.is_empty() {
            return Err(Error::Dataset {
                path: root.to_path_buf(),
                reason: format!(
                    "no images with extensions [{}] in {} class folder(s)",
                    exts.join(", "),
                    classes.len()
                ),
            });
        }
        ignored.sort();
        Ok(ImageFolder {
            root: root.to_path_buf(),
            classes,
            empty,
            samples,
            ignored,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
        })
    }

    /// Refuse files larger than `bytes` (checked on the file's metadata before reading).
    pub fn with_max_file_bytes(mut self, bytes: u64) -> ImageFolder {
        self.max_file_bytes = bytes;
        self
    }

    /// Root-relative path and label of sample `index`.
    pub fn sample(&self, index: usize) -> Option<(&Path, u32)> {
        self.samples.get(index).map(|(p, l)| (p.as_path(), *l))
    }
}

/// `extensions` lowercased without their dots; `None` = [`DEFAULT_EXTENSIONS`].
fn parse_extensions(extensions: Option<&[String]>) -> Result<Vec<String>> {
    let exts: Vec<String> = match extensions {
        Some(list) => list
            .iter()
            .map(|e| e.trim_start_matches('.').to_ascii_lowercase())
            .collect(),
        None => DEFAULT_EXTENSIONS.iter().map(|s| s.to_string()).collect(),
    };
    if exts.is_empty() || exts.iter().any(|e| e.is_empty()) {
        return Err(crate::error::Invalid::Extensions.into());
    }
    Ok(exts)
}

fn collect_files(
    root: &Path,
    rel: &Path,
    exts: &[String],
    out: &mut Vec<PathBuf>,
    ignored: &mut Vec<(PathBuf, Ignored)>,
) -> Result<()> {
    let dir = root.join(rel);
    for entry in fs::read_dir(&dir).map_err(|e| io_err(&dir, e))? {
        let entry = entry.map_err(|e| io_err(&dir, e))?;
        let name = entry.file_name();
        if is_hidden(&name) {
            ignored.push((rel.join(&name), Ignored::Hidden));
            continue;
        }
        let child = rel.join(&name);
        let ft = entry.file_type().map_err(|e| io_err(&entry.path(), e))?;
        if ft.is_dir() {
            // Real folders only: a symlinked folder inside a class could loop.
            collect_files(root, &child, exts, out, ignored)?;
            continue;
        }
        let is_file = ft.is_file() || fs::metadata(entry.path()).is_ok_and(|m| m.is_file());
        let ext_ok = Path::new(&name)
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .is_some_and(|e| exts.contains(&e));
        match (is_file, ext_ok) {
            (true, true) => out.push(child),
            (true, false) => ignored.push((child, Ignored::Extension)),
            (false, _) => ignored.push((child, Ignored::NotAFile)),
        }
    }
    Ok(())
}

impl Source for ImageFolder {
    fn describe(&self) -> String {
        format!(
            "image_folder {}: {}, {}",
            self.root.display(),
            crate::spec::count(self.samples.len() as u64, "sample", "samples"),
            crate::spec::count(self.classes.len() as u64, "class", "classes")
        )
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn len(&self) -> usize {
        self.samples.len()
    }

    fn spec(&self) -> Spec {
        Spec::encoded()
    }

    /// `(class name, label)`, in folder-name order.
    fn classes(&self) -> &[(String, u32)] {
        &self.classes
    }

    /// Entries under the root that are not samples, with why (root-relative, sorted).
    /// A class folder without samples still takes a label (as in MindSpore's
    /// `ImageFolderDataset`): every class after it is labelled one higher than without it.
    fn warnings(&self) -> Vec<String> {
        self.empty
            .iter()
            .map(|(name, label)| {
                format!(
                    "class folder {} holds no samples but takes label {label} (as MindSpore \
                     labels it): the classes after it are labelled one higher than without it; \
                     remove the folder, or name the classes to read in class_indexing",
                    self.root.join(name).display()
                )
            })
            .collect()
    }

    fn ignored(&self) -> &[(PathBuf, Ignored)] {
        &self.ignored
    }

    fn sample_name(&self, index: usize) -> String {
        match self.samples.get(index) {
            Some((p, _)) => p.to_string_lossy().into_owned(),
            None => format!("<sample {index} out of range>"),
        }
    }

    fn read<'a>(&'a self, index: usize, scratch: &'a mut Vec<u8>) -> Result<RawSample<'a>> {
        let (rel, label) = self
            .samples
            .get(index)
            .ok_or_else(|| Error::out_of_range(index, self.sample_name(index)))?;
        let fail = |kind: SampleErrorKind, reason: String| Error::Sample {
            index,
            file: rel.to_string_lossy().into_owned(),
            stage: "read",
            kind,
            reason,
        };
        let io = |e: std::io::Error| fail(SampleErrorKind::Io, e.to_string());
        // The full path is built in a per-thread buffer: no allocation per sample.
        let file = PATH.with_borrow_mut(|path| {
            path.clear();
            path.push(&self.root);
            path.push(rel);
            fs::File::open(&*path)
        });
        let file = file.map_err(io)?;
        // One fstat on the open file: the size is known before a byte is read.
        let len = file.metadata().map_err(io)?.len();
        let max = self.max_file_bytes;
        if len > max {
            return Err(fail(
                SampleErrorKind::FileTooLarge,
                format!("file is {len} bytes, over the limit of {max} (max_file_bytes)"),
            ));
        }
        scratch.clear();
        scratch.reserve(len as usize);
        // `take`: a file that grows after the check still stops at the limit.
        let n = file
            .take(max.saturating_add(1))
            .read_to_end(scratch)
            .map_err(io)?;
        if n as u64 > max {
            return Err(fail(
                SampleErrorKind::FileTooLarge,
                format!("file grew past the limit of {max} bytes (max_file_bytes) while read"),
            ));
        }
        Ok(RawSample {
            raw: Raw::Encoded(scratch),
            labels: [*label, 0],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file under `dir` as a `/`-separated key relative to it.
    fn keys_under(dir: &Path, rel: &str, out: &mut Vec<String>) {
        for e in fs::read_dir(dir).expect("dir").flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let key = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if e.path().is_dir() {
                keys_under(&e.path(), &key, out);
            } else {
                out.push(key);
            }
        }
    }

    #[test]
    fn keys_give_the_local_trees_classes_order_and_ignored_entries() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/imagefolder");
        let mut keys = Vec::new();
        keys_under(&root, "", &mut keys);
        keys.push("README.txt".into()); // outside any class
        keys.push("dog/".into()); // a folder marker: a class without images
        keys.push("cat/.thumbs/x.jpg".into()); // under a hidden folder
        let indexing: BTreeMap<String, u32> = [("bird".to_string(), 7), ("cat".to_string(), 3)]
            .into_iter()
            .collect();
        for classes in [None, Some(&indexing)] {
            let local = ImageFolder::open(&root, None, classes).expect("opens");
            let remote =
                ImageFolder::from_keys(&root, keys.iter().map(String::as_str), None, classes)
                    .expect("lists");
            let extra = |f: &ImageFolder| {
                f.classes
                    .iter()
                    .filter(|c| c.0 != "dog")
                    .cloned()
                    .collect::<Vec<_>>()
            };
            assert_eq!(extra(&remote), local.classes);
            assert_eq!(remote.samples, local.samples);
            let added = [
                (PathBuf::from("README.txt"), Ignored::OutsideClass),
                (PathBuf::from("cat/.thumbs"), Ignored::Hidden),
                (PathBuf::from("dog"), Ignored::UnlistedClass),
            ];
            let mut want = local.ignored.clone();
            for a in &added {
                if a.1 != Ignored::UnlistedClass || classes.is_some() {
                    want.push(a.clone());
                }
            }
            want.sort();
            assert_eq!(remote.ignored, want, "{classes:?}");
        }
    }
}
