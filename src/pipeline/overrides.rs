//! The settings a command line (`imgfeed run --batch-size 4 …`) or the Python package
//! (`Pipeline.replace(batch_size=4)`, `Loader(…)`) changes on a pipeline: one table,
//! [`SETTINGS`], that the command line's flags, the Python keywords and [`Overrides`] are all
//! made from, and each setting's check, run here once, so that a flag and a keyword of the
//! same name do the same.
//!
//! A new setting is one row of `settings!` below: its type, the pipeline key it replaces,
//! its flag (if the command line has one), its words and how it is applied and checked.

use super::check;
use super::config::PipelineConfig;
use super::setting::{flag, SettingValue};
pub use super::setting::{Flag, FlagGroup, Kind, Setting};
use crate::error::{Invalid, OnError, Result};
use crate::plan::{ShardFrom, Uneven};
use crate::source::Usage;
use clap::builder::{EnumValueParser, ValueParser};
use clap::ArgMatches;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

macro_rules! choice {
    ($($ty:ty),*) => {$(
        impl SettingValue for $ty {
            const KIND: Kind = Kind::Choice;
            fn parser() -> ValueParser {
                EnumValueParser::<$ty>::new().into()
            }
        }
    )*};
}
choice!(Usage, Uneven, OnError, crate::store::Fetch);

/// Declares the settings: for each, its [`Overrides`] field (doc and type), the pipeline
/// key it replaces, its flag, its default in words and its application to a config (the
/// value bound to a name, the config to another), where its check runs.
macro_rules! settings {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident: $ty:ty => $table:literal . $key:literal,
        flag: $flag:expr,
        default: $default:expr,
        apply: |$v:ident, $cfg:ident| $apply:block
    )*) => {
        /// Settings that replace a pipeline's own: each `None` leaves the pipeline's value.
        /// The command line's flags of the same names (`--batch-size`, `--no-shuffle` as
        /// `shuffle = false`, ...) and the keywords of the Python package's
        /// `Pipeline.replace` fill one; [`SETTINGS`] describes each field.
        ///
        /// ```
        /// # fn main() -> imgfeed::Result<()> {
        /// let mut config = imgfeed::PipelineConfig::from_file("pipelines/resnet50_eval.toml")?;
        /// let mut o = imgfeed::pipeline::Overrides::default();
        /// o.batch_size = Some(4);
        /// o.seed = Some(7);
        /// o.apply(&mut config)?;
        /// assert_eq!((config.batch.size, config.source.sampling.seed), (4, 7));
        /// # Ok(())
        /// # }
        /// ```
        #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[non_exhaustive]
        pub struct Overrides {
            $(
                $(#[doc = $doc])*
                pub $name: Option<$ty>,
            )*
        }

        /// Every setting, in the order they are applied.
        pub static SETTINGS: &[Setting] = &[$(
            Setting {
                name: stringify!($name),
                table: $table,
                key: $key,
                kind: <$ty as SettingValue>::KIND,
                flag: $flag,
                text: concat!($($doc, "\n"),*),
                default: $default,
                parser: <$ty as SettingValue>::parser,
            },
        )*];

        impl Overrides {
            /// The settings of the rows `keep` keeps given on a parsed command line (the
            /// flags [`Setting::args`] declared; the ones its subcommand does not take are
            /// left `None`).
            pub fn from_flags(m: &ArgMatches, keep: impl Fn(&Setting) -> bool) -> Overrides {
                let mut o = Overrides::default();
                let mut rows = SETTINGS.iter();
                $(
                    if let Some(row) = rows.next().filter(|r| keep(r)) {
                        o.$name = <$ty as SettingValue>::read(m, row);
                    }
                )*
                o
            }

            /// Each setting given here, else `other`'s.
            pub fn or(self, other: Overrides) -> Overrides {
                Overrides {
                    $($name: self.$name.or(other.$name),)*
                }
            }

            /// The names of the settings given (not `None`), in [`SETTINGS`]' order.
            pub fn given(&self) -> Vec<&'static str> {
                let mut names = Vec::new();
                $(
                    if self.$name.is_some() {
                        names.push(stringify!($name));
                    }
                )*
                names
            }

            /// Each given setting applied to `config` and checked, in [`SETTINGS`]' order.
            fn apply_each(&self, config: &mut PipelineConfig) -> Result<()> {
                $(
                    if let Some($v) = &self.$name {
                        let $cfg = &mut *config;
                        $apply
                    }
                )*
                Ok(())
            }
        }
    };
}

settings! {
    /// Dataset root: a folder, or a dataset in object storage (s3://bucket/prefix, gs://,
    /// az://); record files — WebDataset tars (a `.tar` file, a folder of them, a pattern
    /// `train-{0000..0146}.tar`), TFRecord (`.tfrecord`, `.tfrecords`, gzip'd too),
    /// MindRecord (`x.mindrecord0`: its group) — are read as such whatever the pipeline's
    /// kind.
    ///
    /// A relative folder is relative to the working directory, not to the pipeline file.
    data: PathBuf => "source"."root",
    flag: flag("data", "DATA", FlagGroup::Input),
    default: None,
    apply: |d, c| {
        c.source.dataset.set_data(d);
    }

    /// CIFAR split (train, test, all); refused for a source without splits.
    usage: Usage => "source"."usage",
    flag: flag("usage", "USAGE", FlagGroup::Input),
    default: Some("default: train for cifar10/cifar100"),
    apply: |u, c| {
        c.source.set_usage(*u)?;
    }

    /// Where the store of a URL root is reached: an S3-compatible server for s3://
    /// (overriding AWS_ENDPOINT_URL), the base URL for gs:// (an emulator's), the blob
    /// service URL for az:// (Azurite's http://127.0.0.1:10000/devstoreaccount1); http://
    /// for a loopback address only.
    endpoint: String => "source"."endpoint",
    flag: flag("endpoint", "ENDPOINT", FlagGroup::Input),
    default: None,
    apply: |e, c| {
        c.source.remote.endpoint = Some(e.clone());
    }

    /// Cache root for a URL root.
    cache_dir: PathBuf => "source"."cache_dir",
    flag: flag("cache-dir", "CACHE_DIR", FlagGroup::Input),
    default: Some("default $XDG_CACHE_HOME/imgfeed, else ~/.cache/imgfeed"),
    apply: |d, c| {
        c.source.remote.cache_dir = Some(d.clone());
    }

    /// Byte limit of a remote dataset's cache folder (20GB, 512MiB).
    cache_size: String => "source"."cache_size",
    flag: flag("cache-size", "CACHE_SIZE", FlagGroup::Input),
    default: Some("default 100GB"),
    apply: |n, c| {
        c.source.remote.cache_size = Some(n.clone());
        c.source.remote.cache_limit()?;
    }

    /// How a store's shard or container files are read: whole through the cache, or
    /// samples' byte ranges (the global shuffle kept with a small cache).
    fetch: crate::store::Fetch => "source"."fetch",
    flag: flag("fetch", "FETCH", FlagGroup::Input),
    default: Some(
        "default auto: ranges for a global shuffle over files larger than the cache, else \
         files"
    ),
    apply: |f, c| {
        c.source.remote.fetch = *f;
    }

    /// Shuffle every epoch.
    shuffle: bool => "source"."shuffle",
    flag: Some(Flag {
        long: "shuffle",
        value_name: "",
        group: FlagGroup::Sampling,
        negation: Some((
            "no-shuffle",
            "Keep the source order, overriding `source.shuffle`",
        )),
    }),
    default: Some(
        "default false: the file's order; the Python dataset API shuffles by default, as \
         MindSpore",
    ),
    apply: |s, c| {
        c.source.sampling.shuffle = *s;
    }

    /// Seed of the shuffle and the random ops.
    seed: u64 => "source"."seed",
    flag: flag("seed", "SEED", FlagGroup::Sampling),
    default: Some("default 0"),
    apply: |s, c| {
        c.source.sampling.seed = *s;
    }

    /// Data-parallel ranks sharing each epoch, given with shard_id: this process sees
    /// rank shard_id's samples (not a rank read from the environment).
    num_shards: usize => "source"."num_shards",
    flag: flag("num-shards", "NUM_SHARDS", FlagGroup::Sampling),
    default: Some("default 1, and `shard = \"env\"` reads both from the launcher's variables"),
    apply: |n, c| {
        c.source.sampling.shard = ShardFrom::Config;
        c.source.sampling.num_shards = *n;
    }

    /// This process's rank, below num_shards, given with it.
    shard_id: usize => "source"."shard_id",
    flag: flag("shard-id", "SHARD_ID", FlagGroup::Sampling),
    default: Some("default 0"),
    apply: |id, c| {
        // with num_shards: the pair is checked by `Overrides::check`
        c.source.sampling.shard_id = *id;
    }

    /// When the ranks do not divide the dataset: pad, drop or exact.
    uneven: Uneven => "source"."uneven",
    flag: flag("uneven", "UNEVEN", FlagGroup::Sampling),
    default: Some(
        "default pad: repeat samples from the start so every rank gets ceil(N/K), as \
         MindSpore",
    ),
    apply: |u, c| {
        c.source.sampling.uneven = *u;
    }

    /// The shard-aware shuffle: read the dataset's files this many at a time (a window of
    /// files shuffled together), so a cache of that many files keeps reads local; needs
    /// shuffle and a dataset of multi-sample files (shards, webdataset, tfrecord,
    /// mindrecord, parquet).
    shuffle_window: usize => "source"."shuffle_window",
    flag: flag("shuffle-window", "FILES", FlagGroup::Sampling),
    default: Some("default none: the global shuffle"),
    apply: |w, c| {
        c.source.sampling.shuffle_window = Some(*w);
    }

    /// Samples per batch, at least 1.
    batch_size: usize => "batch"."size",
    flag: flag("batch-size", "BATCH_SIZE", FlagGroup::Engine),
    default: None,
    apply: |b, c| {
        check::batch_size(*b)?;
        c.batch.size = *b;
    }

    /// Drop the last, incomplete batch.
    drop_remainder: bool => "batch"."drop_remainder",
    flag: None,
    default: Some("default false"),
    apply: |d, c| {
        c.batch.drop_remainder = *d;
    }

    /// Worker threads, 1 to 1024.
    workers: usize => "engine"."workers",
    flag: flag("workers", "WORKERS", FlagGroup::Engine),
    default: Some("default: one per core"),
    apply: |w, c| {
        check::workers(*w)?;
        c.engine.workers = *w;
    }

    /// Samples a worker claims at once, at least 1.
    work_unit: usize => "engine"."work_unit",
    flag: flag("work-unit", "WORK_UNIT", FlagGroup::Engine),
    default: Some("default: 1 for image files, 64 for CIFAR records"),
    apply: |u, c| {
        check::work_unit(*u)?;
        c.engine.work_unit = Some(*u);
    }

    /// Bad samples: error (stop), skip (leave out, report) or replace (fill from the same
    /// shard, report).
    on_error: OnError => "engine"."on_error",
    flag: flag("on-error", "ON_ERROR", FlagGroup::Errors),
    default: Some("default error"),
    apply: |o, c| {
        c.engine.on_error = *o;
    }
}

impl Overrides {
    /// The overrides as JSON (an object of the fields above; a `null` is a field not
    /// given): what the Python package passes. A value that does not parse is named by
    /// the table it overrides and its key (`source: uneven: unknown variant ...`).
    pub fn from_json(text: &str) -> Result<Overrides> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|source| Invalid::Table {
                table: Some("overrides".into()),
                source,
            })?;
        serde_json::from_value::<Overrides>(value.clone()).map_err(|whole| {
            let culprit = value.as_object().and_then(|fields| {
                fields.iter().find_map(|(key, v)| {
                    let one =
                        serde_json::Value::Object([(key.clone(), v.clone())].into_iter().collect());
                    let table = Setting::named(key)?.table;
                    let source = serde_json::from_value::<Overrides>(one).err()?;
                    Some(Invalid::Override {
                        table,
                        key: key.clone(),
                        source,
                    })
                })
            });
            culprit
                .unwrap_or(Invalid::Table {
                    table: Some("overrides".into()),
                    source: whole,
                })
                .into()
        })
    }

    /// The rules between settings, which need no pipeline: `num_shards` and `shard_id` are
    /// given together or not at all, and the rank is one of the ranks. (The MindSpore-shaped
    /// datasets of the Python package check their `num_shards`/`shard_id` by this too.)
    pub fn check(&self) -> Result<()> {
        match (self.num_shards, self.shard_id) {
            (Some(num_shards), Some(shard_id)) => {
                let sampling = crate::plan::Sampling {
                    num_shards,
                    shard_id,
                    ..crate::plan::Sampling::default()
                };
                sampling.validate().map_err(Invalid::from)?;
                Ok(())
            }
            (None, None) => Ok(()),
            _ => Err(Invalid::ShardsApart.into()),
        }
    }

    /// Replace `config`'s settings with the ones given, [`Overrides::check`]ed, then each
    /// checked as it is applied (the error names the setting, as [`crate::Pipeline::new`]
    /// would); `config` may be left part-changed when one is refused.
    pub fn apply(&self, config: &mut PipelineConfig) -> Result<()> {
        self.check()?;
        self.apply_each(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    fn eval() -> PipelineConfig {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/pipelines/resnet50_eval.toml");
        PipelineConfig::from_file(path).expect("the eval pipeline parses")
    }

    /// Every override lands in its table; nothing else changes.
    #[test]
    fn each_override_replaces_its_setting_and_nothing_else() {
        let before = eval();
        let json = r#"{"data": "/d", "batch_size": 4, "drop_remainder": false, "workers": 3,
            "work_unit": 2, "shuffle": true, "seed": 9, "num_shards": 2, "shard_id": 1,
            "uneven": "drop", "shuffle_window": 3, "on_error": "skip", "endpoint": "http://127.0.0.1:9",
            "cache_dir": "/c", "cache_size": "2GB", "usage": null}"#;
        let o = Overrides::from_json(json).expect("parses");
        let mut cfg = before.clone();
        o.apply(&mut cfg).expect("applies");
        assert_eq!(cfg.source.root(), std::path::Path::new("/d"));
        assert_eq!((cfg.batch.size, cfg.batch.drop_remainder), (4, false));
        assert_eq!((cfg.engine.workers, cfg.engine.work_unit), (3, Some(2)));
        assert_eq!(cfg.engine.on_error, OnError::Skip);
        let s = &cfg.source.sampling;
        assert_eq!(
            (s.shuffle, s.seed, s.num_shards, s.shard_id),
            (true, 9, 2, 1)
        );
        assert_eq!((s.shard, s.uneven), (ShardFrom::Config, Uneven::Drop));
        assert_eq!(s.shuffle_window, Some(3));
        let r = &cfg.source.remote;
        assert_eq!(r.endpoint.as_deref(), Some("http://127.0.0.1:9"));
        assert_eq!(r.cache_dir.as_deref(), Some(std::path::Path::new("/c")));
        assert_eq!(r.cache_limit().ok(), Some(2_000_000_000));
        // the rest is the file's
        assert_eq!(cfg.ops, before.ops);
        assert_eq!(cfg.engine.queue, before.engine.queue);
        // no override, no change
        let mut same = before.clone();
        Overrides::default().apply(&mut same).expect("applies");
        assert_eq!(same, before);
    }

    /// Each row changes the pipeline key it names, in the table it names (the JSON of the
    /// config before and after differs there and nowhere else).
    #[test]
    fn every_row_replaces_the_key_it_names() {
        let values = serde_json::json!({
            "data": "/d", "usage": null, "endpoint": "http://127.0.0.1:9", "cache_dir": "/c",
            "cache_size": "2GB", "shuffle": true, "seed": 9, "num_shards": 2, "shard_id": 1,
            "uneven": "drop", "shuffle_window": 3, "batch_size": 4, "drop_remainder": false,
            "workers": 3,
            "work_unit": 2, "on_error": "skip"
        });
        let fields = values.as_object().expect("an object");
        // the table has a row for every field of Overrides, and no other
        let mut names: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
        let mut serialized: Vec<String> = serde_json::to_value(Overrides::default())
            .expect("serializes")
            .as_object()
            .expect("an object")
            .keys()
            .cloned()
            .collect();
        names.sort_unstable();
        serialized.sort_unstable();
        assert_eq!(names, serialized);
        for row in SETTINGS {
            let Some(v) = fields.get(row.name).filter(|v| !v.is_null()) else {
                continue;
            };
            let mut one = serde_json::Map::new();
            one.insert(row.name.into(), v.clone());
            if row.name == "num_shards" || row.name == "shard_id" {
                one.insert("num_shards".into(), 2.into());
                one.insert("shard_id".into(), 1.into());
            }
            let o: Overrides = serde_json::from_value(one.into()).expect(row.name);
            let mut cfg = eval();
            o.apply(&mut cfg).expect(row.name);
            let after = serde_json::to_value(&cfg).expect("serializes");
            let before = serde_json::to_value(eval()).expect("serializes");
            let changed = |t: &str, k: &str| before[t][k] != after[t][k];
            assert!(changed(row.table, row.key), "{}", row.name);
            for table in ["source", "batch", "engine", "ops", "batch_ops"] {
                if table != row.table {
                    assert_eq!(before[table], after[table], "{}", row.name);
                }
            }
        }
    }

    /// A choice's names are the ones the pipeline file (serde) reads.
    #[test]
    fn choices_are_the_pipeline_files_words() {
        for row in SETTINGS.iter().filter(|s| s.kind == Kind::Choice) {
            let choices = row.choices();
            assert!(choices.len() >= 2, "{}", row.name);
            for c in choices {
                let json = serde_json::json!({ row.name: c });
                assert!(
                    serde_json::from_value::<Overrides>(json).is_ok(),
                    "{}: {c}",
                    row.name
                );
            }
        }
        assert!(Setting::named("batch_size").is_some_and(|s| s.choices().is_empty()));
    }

    /// A refused value is a typed usage error naming the setting.
    #[test]
    fn bad_overrides_are_refused_by_name() {
        let refused = |json: &str| -> String {
            let e = Overrides::from_json(json)
                .and_then(|o| o.apply(&mut eval()))
                .expect_err(json);
            assert!(matches!(e, Error::Invalid(_)) && e.is_usage(), "{e:?}");
            e.to_string()
        };
        assert_eq!(
            refused(r#"{"batch_size": 0}"#),
            "invalid pipeline: batch.size must be at least 1"
        );
        assert!(refused(r#"{"workers": 0}"#).contains("engine.workers must be between 1 and"));
        assert!(refused(r#"{"work_unit": 0}"#).contains("engine.work_unit"));
        let m = refused(r#"{"num_shards": 2, "shard_id": 2}"#);
        assert!(
            m.contains("source: shard_id 2 must be below num_shards 2"),
            "{m}"
        );
        for apart in [r#"{"num_shards": 2}"#, r#"{"shard_id": 0}"#] {
            let m = refused(apart);
            assert!(m.contains("num_shards and shard_id"), "{m}");
            assert!(m.contains("--num-shards and --shard-id"), "{m}");
        }
        let m = refused(r#"{"uneven": "evenly"}"#);
        assert!(
            m.starts_with("invalid pipeline: source: uneven: unknown variant `evenly`"),
            "{m}"
        );
        let m = refused(r#"{"batch_size": -1}"#);
        assert!(
            m.starts_with("invalid pipeline: batch: batch_size: "),
            "{m}"
        );
        assert!(refused(r#"{"batchsize": 4}"#).contains("unknown field `batchsize`"));
        assert!(refused(r#"{"usage": "test"}"#).contains("cifar10 and cifar100 sources only"));
        assert!(refused(r#"{"cache_size": "lots"}"#)
            .starts_with("invalid pipeline: source.cache_size:"));
        // the sampling error is the source, not a string
        let e = Overrides::from_json(r#"{"num_shards": 0, "shard_id": 0}"#)
            .and_then(|o| o.apply(&mut eval()))
            .expect_err("0 shards");
        let invalid = std::error::Error::source(&e);
        let source = invalid.and_then(std::error::Error::source);
        assert!(
            source.is_some_and(|s| s.downcast_ref::<crate::plan::SamplingError>().is_some()),
            "{e:?}"
        );
    }

    /// The flags read back into the overrides they declare (a switch's negation as `false`).
    #[test]
    fn flags_read_back_as_overrides() {
        let mut cmd = clap::Command::new("t").no_binary_name(true);
        for row in SETTINGS {
            cmd = cmd.args(row.args());
        }
        let m = cmd
            .clone()
            .try_get_matches_from([
                "--batch-size",
                "4",
                "--shuffle",
                "--no-shuffle",
                "--uneven",
                "drop",
                "--data",
                "d",
            ])
            .expect("parses");
        let o = Overrides::from_flags(&m, |_| true);
        assert_eq!(o.batch_size, Some(4));
        assert_eq!(o.shuffle, Some(false));
        assert_eq!(o.uneven, Some(Uneven::Drop));
        assert_eq!(o.data.as_deref(), Some(std::path::Path::new("d")));
        assert_eq!(o.given(), ["data", "shuffle", "uneven", "batch_size"]);
        let m = cmd.try_get_matches_from(["--shuffle"]).expect("parses");
        assert_eq!(Overrides::from_flags(&m, |_| true).shuffle, Some(true));
        assert_eq!(
            Overrides::from_flags(&m, |r| r.name != "shuffle").shuffle,
            None
        );
        // a subcommand without the flags reads none
        let bare = clap::Command::new("t").no_binary_name(true);
        let m = bare
            .try_get_matches_from(Vec::<&str>::new())
            .expect("parses");
        assert_eq!(Overrides::from_flags(&m, |_| true), Overrides::default());
    }
}
