//! The `[source]` table: which dataset (its `kind` and that kind's own fields) and which of
//! its samples an epoch reads (the [`Sampling`] fields, the same for every kind).
//!
//! ```toml
//! [source]
//! kind = "cifar100"      # image_folder | cifar10 | cifar100 | shards
//! root = "data/cifar-100-binary"   # or torchvision's data/cifar-100-python
//! usage = "test"         # cifar10 and cifar100 only
//! label = "both"         # cifar100 only
//! shuffle = true         # sampling: any kind
//! ```
//!
//! A field that the kind does not take is an error naming the field and the kind.

use super::{Cifar, CifarKind, CifarLabel, ImageFolder, Source, Usage};
use crate::error::{Error, Result};
use crate::plan::{Sampling, SAMPLING_FIELDS};
use crate::remote::{RemoteOptions, REMOTE_FIELDS};
use crate::shards::Shards;
use clap::ValueEnum;
use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// The `[source]` table: a [`Dataset`] and its [`Sampling`], written as one flat table.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SourceConfig {
    /// Which dataset.
    pub dataset: Dataset,
    /// Which of its samples an epoch reads, in what order, and how many epochs.
    pub sampling: Sampling,
    /// How a root in object storage (`s3://...`) is reached and cached.
    pub remote: RemoteOptions,
}

impl From<Dataset> for SourceConfig {
    fn from(dataset: Dataset) -> SourceConfig {
        SourceConfig {
            dataset,
            sampling: Sampling::default(),
            remote: RemoteOptions::default(),
        }
    }
}

impl SourceConfig {
    /// A source of `kind` at `root` with every option at its default.
    pub fn new(kind: SourceKind, root: impl Into<PathBuf>) -> SourceConfig {
        Dataset::new(kind, root).into()
    }

    /// Its kind.
    pub fn kind(&self) -> SourceKind {
        self.dataset.kind()
    }

    /// Its root.
    pub fn root(&self) -> &Path {
        self.dataset.root()
    }

    /// Shuffle every epoch (or not).
    pub fn shuffle(mut self, shuffle: bool) -> Self {
        self.sampling.shuffle = shuffle;
        self
    }

    /// The seed of the shuffle and of the random ops.
    pub fn seed(mut self, seed: u64) -> Self {
        self.sampling.seed = seed;
        self
    }

    /// Keep at most `n` samples an epoch (per shard).
    pub fn num_samples(mut self, n: impl Into<Option<usize>>) -> Self {
        self.sampling.num_samples = n.into();
        self
    }

    /// Read shard `shard_id` of `num_shards` (MindSpore's DistributedSampler).
    pub fn shards(mut self, num_shards: usize, shard_id: usize) -> Self {
        self.sampling.num_shards = num_shards;
        self.sampling.shard_id = shard_id;
        self
    }

    /// What sharding does with the samples left over.
    pub fn uneven(mut self, uneven: crate::plan::Uneven) -> Self {
        self.sampling.uneven = uneven;
        self
    }

    /// Epochs a run makes.
    pub fn num_epochs(mut self, n: u64) -> Self {
        self.sampling.num_epochs = n;
        self
    }

    /// Read the CIFAR split `usage` (the command line's `--usage`); an error for a kind
    /// without splits.
    pub fn set_usage(&mut self, usage: Usage) -> Result<()> {
        let kind = self.kind();
        match self.dataset.usage_mut() {
            Some(u) => {
                *u = Some(usage);
                Ok(())
            }
            None => Err(Error::Invalid(format!(
                "--usage applies to cifar10 and cifar100 sources only, not to {}",
                kind.to_possible_value()
                    .map_or_else(String::new, |v| v.get_name().to_string())
            ))),
        }
    }

    /// With `shard = "env"`, fill `num_shards`/`shard_id` from the variables `get` reads.
    pub fn resolve_shard(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<()> {
        self.sampling
            .resolve_shard(get)
            .map_err(|e| Error::Invalid(format!("source: {e}")))
    }

    /// Open the dataset (lists or maps files; reads no sample).
    pub fn open(&self) -> Result<Arc<dyn Source>> {
        if crate::remote::is_remote(self.root()) {
            if let Dataset::ImageFolder(c) = &self.dataset {
                let (exts, classes) = (c.extensions.as_deref(), c.class_indexing.as_ref());
                let tree = crate::remote::open_tree(
                    &c.root,
                    exts,
                    classes,
                    c.max_file_bytes,
                    &self.remote,
                )?;
                if let Some(tree) = tree {
                    return Ok(Arc::new(tree));
                }
            }
            let s =
                crate::remote::open_remote(self.root(), self.kind(), &self.remote, &self.sampling)?;
            return self.check_listing(s);
        }
        if self.kind() == SourceKind::Shards || Shards::is_dataset(self.root()) {
            return self.open_shards();
        }
        match &self.dataset {
            Dataset::ImageFolder(c) => {
                let f =
                    ImageFolder::open(&c.root, c.extensions.as_deref(), c.class_indexing.as_ref())?;
                let f = match c.max_file_bytes {
                    Some(0) => {
                        return Err(Error::Invalid(
                            "source: max_file_bytes must be positive".into(),
                        ))
                    }
                    Some(n) => f.with_max_file_bytes(n),
                    None => f,
                };
                Ok(Arc::new(f))
            }
            Dataset::Cifar10(c) => Ok(Arc::new(Cifar::open(
                &c.root,
                CifarKind::Cifar10,
                c.usage.unwrap_or_default(),
                CifarLabel::default(),
            )?)),
            Dataset::Cifar100(c) => Ok(Arc::new(Cifar::open(
                &c.root,
                CifarKind::Cifar100,
                c.usage.unwrap_or_default(),
                c.label.unwrap_or_default(),
            )?)),
            Dataset::Shards(_) => self.open_shards(),
        }
    }

    /// A converted dataset. The listing options of the original source applied when it
    /// was converted: `extensions` is ignored, and `class_indexing`, `usage` and `label`
    /// must say what the conversion used (labels are stored), or it is an error.
    fn open_shards(&self) -> Result<Arc<dyn Source>> {
        self.check_listing(Shards::open(self.root())?)
    }

    /// `s` if it was converted with the listing options given.
    fn check_listing(&self, s: Shards) -> Result<Arc<dyn Source>> {
        let root = self.root();
        let m = s.manifest();
        let differs = |field: &str, want: String, stored: String| {
            Err(Error::Invalid(format!(
                "source: `{field}` is {want}, but {} was converted with {stored}",
                root.display()
            )))
        };
        let (class_indexing, usage, label) = self.dataset.listing();
        if let Some(map) = class_indexing {
            let stored: BTreeMap<String, u32> = m.classes.iter().cloned().collect();
            if map != &stored {
                return differs("class_indexing", format!("{map:?}"), format!("{stored:?}"));
            }
        }
        let name = |v: serde_json::Result<serde_json::Value>| {
            v.ok().and_then(|v| v.as_str().map(str::to_string))
        };
        if let Some(u) = usage {
            let want = name(serde_json::to_value(u));
            if want != m.source.usage {
                return differs(
                    "usage",
                    format!("{want:?}"),
                    format!("{:?}", m.source.usage),
                );
            }
        }
        if let Some(l) = label {
            let want = name(serde_json::to_value(l));
            if want != m.source.label {
                return differs(
                    "label",
                    format!("{want:?}"),
                    format!("{:?}", m.source.label),
                );
            }
        }
        Ok(Arc::new(s))
    }
}

/// The table splits into the sampling fields and the rest, which must be one kind's fields.
/// (A JSON `null`, as the Python package may send, is a field left out.)
impl<'de> Deserialize<'de> for SourceConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<SourceConfig, D::Error> {
        let mut rest = serde_json::Map::deserialize(d)?;
        rest.retain(|_, v| !v.is_null());
        let mut sampling = serde_json::Map::new();
        for key in SAMPLING_FIELDS {
            if let Some(v) = rest.remove(key) {
                sampling.insert(key.to_string(), v);
            }
        }
        let mut remote = serde_json::Map::new();
        for key in REMOTE_FIELDS {
            if let Some(v) = rest.remove(*key) {
                remote.insert(key.to_string(), v);
            }
        }
        let kind = rest
            .get("kind")
            .and_then(|k| k.as_str())
            .map(str::to_string);
        let dataset = Dataset::deserialize(serde_json::Value::Object(rest)).map_err(|e| {
            let e = e.to_string();
            match kind {
                Some(k) if e.starts_with("unknown field") => D::Error::custom(format!(
                    "{e} for kind = \"{k}\" (and the sampling fields: {})",
                    SAMPLING_FIELDS.join(", ")
                )),
                _ => D::Error::custom(e),
            }
        })?;
        let sampling =
            Sampling::deserialize(serde_json::Value::Object(sampling)).map_err(D::Error::custom)?;
        let remote = RemoteOptions::deserialize(serde_json::Value::Object(remote))
            .map_err(D::Error::custom)?;
        Ok(SourceConfig {
            dataset,
            sampling,
            remote,
        })
    }
}

/// One flat table: `kind`, the kind's fields, the sampling fields.
impl Serialize for SourceConfig {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let table = |v: serde_json::Result<serde_json::Value>| match v {
            Ok(serde_json::Value::Object(t)) => Ok(t),
            Ok(_) => Err(S::Error::custom("not a table")),
            Err(e) => Err(S::Error::custom(e)),
        };
        let mut all = table(serde_json::to_value(&self.dataset))?;
        all.extend(table(serde_json::to_value(self.sampling))?);
        all.extend(table(serde_json::to_value(&self.remote))?);
        all.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_are_one_list_for_serde_and_the_command_line() {
        for kind in SourceKind::value_variants() {
            let cli = kind.to_possible_value().map(|v| v.get_name().to_string());
            let tag = toml::Value::try_from(Dataset::new(*kind, "r"))
                .ok()
                .and_then(|v| v.get("kind").and_then(|k| k.as_str().map(str::to_string)));
            let serde_name = serde_json::to_value(kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string));
            assert_eq!(cli, tag, "{kind:?}");
            assert_eq!(cli, serde_name, "{kind:?}");
        }
    }

    #[test]
    fn a_source_table_round_trips_and_keeps_each_field_in_its_part() {
        let text = "kind = \"cifar100\"\nroot = \"r\"\nusage = \"test\"\nlabel = \"both\"\n\
                    shuffle = true\nseed = 9\nnum_shards = 2\nshard_id = 1\n";
        let s: SourceConfig = toml::from_str(text).expect("parses");
        assert_eq!(
            s.dataset,
            Dataset::Cifar100(
                Cifar100Config::new("r")
                    .usage(Usage::Test)
                    .label(CifarLabel::Both)
            )
        );
        assert!(s.sampling.shuffle);
        assert_eq!(
            (s.sampling.seed, s.sampling.num_shards, s.sampling.shard_id),
            (9, 2, 1)
        );
        let back: SourceConfig =
            toml::from_str(&toml::to_string(&s).expect("serializes")).expect("parses back");
        assert_eq!(back, s);
    }

    #[test]
    fn a_field_of_another_kind_is_refused_naming_field_and_kind() {
        for (text, field, kind) in [
            (
                "kind = \"image_folder\"\nroot = \"r\"\nusage = \"test\"",
                "usage",
                "image_folder",
            ),
            (
                "kind = \"cifar10\"\nroot = \"r\"\nlabel = \"fine\"",
                "label",
                "cifar10",
            ),
            (
                "kind = \"cifar10\"\nroot = \"r\"\nmax_file_bytes = 3",
                "max_file_bytes",
                "cifar10",
            ),
            (
                "kind = \"shards\"\nroot = \"r\"\nextensions = [\"jpg\"]",
                "extensions",
                "shards",
            ),
        ] {
            let e = toml::from_str::<SourceConfig>(text)
                .expect_err(text)
                .to_string();
            assert!(
                e.contains(&format!("unknown field `{field}`"))
                    && e.contains(&format!("kind = \"{kind}\"")),
                "{e}"
            );
        }
    }

    #[test]
    fn remote_fields_are_taken_by_any_kind_and_round_trip() {
        let text =
            "kind = \"image_folder\"\nroot = \"s3://b/ds\"\nendpoint = \"http://127.0.0.1:9000\"\n\
                    cache_dir = \"/tmp/c\"\ncache_size = \"2GB\"\nshuffle = true\n";
        let s: SourceConfig = toml::from_str(text).expect("parses");
        assert_eq!(s.remote.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(s.remote.cache_dir.as_deref(), Some(Path::new("/tmp/c")));
        assert_eq!(s.remote.cache_limit().ok(), Some(2_000_000_000));
        assert!(s.sampling.shuffle);
        let back: SourceConfig =
            toml::from_str(&toml::to_string(&s).expect("serializes")).expect("parses back");
        assert_eq!(back, s);
        // Left out, nothing is written.
        let plain: SourceConfig =
            toml::from_str("kind = \"shards\"\nroot = \"d\"").expect("parses");
        let t = toml::to_string(&plain).expect("serializes");
        assert!(!t.contains("endpoint") && !t.contains("cache"), "{t}");
        let bad: SourceConfig =
            toml::from_str("kind = \"shards\"\nroot = \"d\"\ncache_size = \"lots\"")
                .expect("parses");
        let e = bad
            .remote
            .cache_limit()
            .expect_err("not a size")
            .to_string();
        assert!(e.contains("source.cache_size"), "{e}");
    }

    #[test]
    fn sampling_fields_are_the_fields_of_sampling() {
        let s = Sampling {
            num_samples: Some(3),
            num_epochs: 2,
            ..Sampling::default()
        };
        let v = toml::Value::try_from(s).expect("serializes");
        let mut keys: Vec<&str> = v
            .as_table()
            .map(|t| t.keys().map(String::as_str).collect())
            .unwrap_or_default();
        keys.sort_unstable();
        let mut want = SAMPLING_FIELDS.to_vec();
        want.sort_unstable();
        assert_eq!(keys, want);
    }
}
