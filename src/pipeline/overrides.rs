//! The settings a command line (`imgfeed run --batch-size 4 …`) or the Python package
//! (`Pipeline.replace(batch_size=4)`, `Loader(…)`) changes on a pipeline: one typed list,
//! applied and checked here, so that a flag and a keyword of the same name do the same.

use super::check;
use super::config::PipelineConfig;
use crate::engine::OnError;
use crate::error::{Invalid, Result};
use crate::plan::{ShardFrom, Uneven};
use crate::source::Usage;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Settings that replace a pipeline's own: each `None` leaves the pipeline's value. The
/// command line's flags of the same names (`--batch-size`, `--no-shuffle` as `shuffle =
/// false`, ...) and the keywords of the Python package's `Pipeline.replace` fill one.
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
    /// The dataset root (`source.root`): a folder, taken as given (a relative one is
    /// relative to the working directory, not to the pipeline file), or a shards dataset in
    /// object storage (`s3://bucket/prefix`).
    pub data: Option<PathBuf>,
    /// The CIFAR split (`source.usage`); an error for a source without splits.
    pub usage: Option<Usage>,
    /// The S3-compatible endpoint of an `s3://` root (`source.endpoint`).
    pub endpoint: Option<String>,
    /// The cache root of an `s3://` root (`source.cache_dir`).
    pub cache_dir: Option<PathBuf>,
    /// The byte limit of a remote dataset's cache folder (`source.cache_size`: `"20GB"`).
    pub cache_size: Option<String>,
    /// Samples per batch (`batch.size`), at least 1.
    pub batch_size: Option<usize>,
    /// Drop the last, incomplete batch (`batch.drop_remainder`).
    pub drop_remainder: Option<bool>,
    /// Worker threads (`engine.workers`), 1 to [`check::MAX_WORKERS`].
    pub workers: Option<usize>,
    /// Samples a worker claims at once (`engine.work_unit`), at least 1.
    pub work_unit: Option<usize>,
    /// Shuffle every epoch (`source.shuffle`).
    pub shuffle: Option<bool>,
    /// The seed of the shuffle and the random ops (`source.seed`).
    pub seed: Option<u64>,
    /// Data-parallel ranks (`source.num_shards`); with `shard_id`, the shard is then the
    /// one given here, not one read from the environment.
    pub num_shards: Option<usize>,
    /// This process's rank (`source.shard_id`), below `num_shards`.
    pub shard_id: Option<usize>,
    /// What sharding does with the samples left over (`source.uneven`).
    pub uneven: Option<Uneven>,
    /// What a bad sample does (`engine.on_error`).
    pub on_error: Option<OnError>,
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
                    let table = Overrides::table(key)?;
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

    /// The table the override `key` changes; `None` for a key that is not an override.
    fn table(key: &str) -> Option<&'static str> {
        Some(match key {
            "data" | "usage" | "endpoint" | "cache_dir" | "cache_size" | "shuffle" | "seed"
            | "num_shards" | "shard_id" | "uneven" => "source",
            "batch_size" | "drop_remainder" => "batch",
            "workers" | "work_unit" | "on_error" => "engine",
            _ => return None,
        })
    }

    /// Replace `config`'s settings with the ones given, each checked as it is applied (the
    /// error names the setting, as [`crate::Pipeline::new`] would); `config` may be left
    /// part-changed when one is refused.
    pub fn apply(&self, config: &mut PipelineConfig) -> Result<()> {
        let source = &mut config.source;
        if let Some(d) = &self.data {
            d.clone_into(source.dataset.root_mut());
        }
        if let Some(u) = self.usage {
            source.set_usage(u)?;
        }
        let remote = &mut source.remote;
        if let Some(e) = &self.endpoint {
            remote.endpoint = Some(e.clone());
        }
        if let Some(d) = &self.cache_dir {
            remote.cache_dir = Some(d.clone());
        }
        if let Some(n) = &self.cache_size {
            remote.cache_size = Some(n.clone());
            remote.cache_limit()?;
        }
        let sampling = &mut source.sampling;
        if let Some(shuffle) = self.shuffle {
            sampling.shuffle = shuffle;
        }
        if let Some(seed) = self.seed {
            sampling.seed = seed;
        }
        if self.num_shards.is_some() || self.shard_id.is_some() {
            sampling.shard = ShardFrom::Config;
            if let Some(n) = self.num_shards {
                sampling.num_shards = n;
            }
            if let Some(id) = self.shard_id {
                sampling.shard_id = id;
            }
            sampling.validate().map_err(Invalid::from)?;
        }
        if let Some(u) = self.uneven {
            sampling.uneven = u;
        }
        if let Some(b) = self.batch_size {
            check::batch_size(b)?;
            config.batch.size = b;
        }
        if let Some(d) = self.drop_remainder {
            config.batch.drop_remainder = d;
        }
        let engine = &mut config.engine;
        if let Some(w) = self.workers {
            check::workers(w)?;
            engine.workers = w;
        }
        if let Some(u) = self.work_unit {
            check::work_unit(u)?;
            engine.work_unit = Some(u);
        }
        if let Some(o) = self.on_error {
            engine.on_error = o;
        }
        Ok(())
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
            "uneven": "drop", "on_error": "skip", "endpoint": "http://127.0.0.1:9",
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
        let e = Overrides::from_json(r#"{"num_shards": 0}"#)
            .and_then(|o| o.apply(&mut eval()))
            .expect_err("0 shards");
        let invalid = std::error::Error::source(&e);
        let source = invalid.and_then(std::error::Error::source);
        assert!(
            source.is_some_and(|s| s.downcast_ref::<crate::plan::SamplingError>().is_some()),
            "{e:?}"
        );
    }
}
