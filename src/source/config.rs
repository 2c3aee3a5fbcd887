//! The `[source]` table: which dataset (its `kind` and that kind's own fields) and which of
//! its samples an epoch reads (the [`Sampling`] fields, the same for every kind).
//!
//! ```toml
//! [source]
//! kind = "cifar100"      # image_folder | cifar10 | cifar100 | webdataset | tfrecord | mindrecord | parquet | shards
//! root = "data/cifar-100-binary"   # or torchvision's data/cifar-100-python
//! usage = "test"         # cifar10 and cifar100 only
//! label = "both"         # cifar100 only
//! shuffle = true         # sampling: any kind
//! ```
//!
//! A field that the kind does not take is an error naming the field and the kind.

use super::root::DatasetRoot;
use super::{Dataset, Source, SourceKind, Usage};
use crate::error::{Invalid, Result};
use crate::plan::{Sampling, SAMPLING_FIELDS};
use crate::shards::Shards;
use crate::store::{StoreOptions, STORE_FIELDS};
use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The `[source]` table: a [`Dataset`] and its [`Sampling`], written as one flat table.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SourceConfig {
    /// Which dataset.
    pub dataset: Dataset,
    /// Which of its samples an epoch reads, in what order, and how many epochs.
    pub sampling: Sampling,
    /// How a root in object storage (`s3://...`) is reached and cached.
    pub remote: StoreOptions,
}

impl From<Dataset> for SourceConfig {
    fn from(dataset: Dataset) -> SourceConfig {
        SourceConfig {
            dataset,
            sampling: Sampling::default(),
            remote: StoreOptions::default(),
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
            None => Err(Invalid::Usage {
                kind: kind.name().to_string(),
            }
            .into()),
        }
    }

    /// With `shard = "env"`, fill `num_shards`/`shard_id` from the variables `get` reads.
    pub fn resolve_shard(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<()> {
        Ok(self.sampling.resolve_shard(get).map_err(Invalid::from)?)
    }

    /// Open the dataset (lists or maps files; reads no sample). The root is parsed once
    /// ([`DatasetRoot`]); a root holding a shards manifest (one request to a store) is read
    /// as shards whatever the kind, when its listing options are the ones it was converted
    /// with; any other opens as its kind says.
    pub fn open(&self) -> Result<Arc<dyn Source>> {
        if self.root().as_os_str().is_empty() {
            return Err(Invalid::NoRoot.into());
        }
        let def = self.dataset.def();
        let root = DatasetRoot::parse(self.root(), &self.remote)?;
        let root = match root {
            DatasetRoot::Store(mut at) => {
                at.sampling = self.sampling;
                DatasetRoot::Store(at)
            }
            local => local,
        };
        match root {
            DatasetRoot::Local(root) => {
                if self.kind() == SourceKind::Shards || Shards::is_dataset(&root) {
                    super::shards::open_local(&root, def.listing())
                } else {
                    def.open_local(&root)
                }
            }
            DatasetRoot::Store(mut at) => match at.manifest()? {
                Some(manifest) => {
                    super::shards::open_store(*at, &manifest, &self.sampling, def.listing())
                }
                None => {
                    at.sampling = self.sampling;
                    def.open_store(*at)
                }
            },
        }
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
        for key in STORE_FIELDS {
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
        let remote = StoreOptions::deserialize(serde_json::Value::Object(remote))
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
        use clap::ValueEnum;
        assert_eq!(SourceKind::value_variants(), SourceKind::ALL);
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
            assert_eq!(cli.as_deref(), Some(kind.name()), "{kind:?}");
            assert_eq!(Dataset::new(*kind, "r").def().name(), kind.name());
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
                super::super::Cifar100Config::new("r")
                    .usage(Usage::Test)
                    .label(super::super::CifarLabel::Both)
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
            shuffle_window: Some(2),
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
