//! `kind = "shards"`: a dataset written by `imgfeed convert --format shards` (the format
//! and its reader are [`crate::shards`]). A root holding a shards manifest is read as one
//! whatever the pipeline's kind says, so a pipeline written for the original runs
//! unchanged on its converted copy: opening checks that the copy was converted
//! with the listing options the pipeline gives.

use super::kind::{Listing, SourceDef};
use super::root::StoreRoot;
use super::{Raw, RawSample, Source};
use crate::error::{Invalid, Result};
use crate::plan::Sampling;
use crate::shards::format::Storage;
use crate::shards::Shards;
use crate::spec::Spec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `kind = "shards"`: a dataset written by `imgfeed convert --format shards`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ShardsConfig {
    /// The folder holding `manifest.json`.
    #[serde(default)]
    pub root: PathBuf,
}

impl ShardsConfig {
    /// The dataset at `root`.
    pub fn new(root: impl Into<PathBuf>) -> ShardsConfig {
        ShardsConfig { root: root.into() }
    }

    /// A folder holding a shards manifest.
    pub fn detect(dir: &Path) -> Option<ShardsConfig> {
        Shards::is_dataset(dir).then(|| ShardsConfig::new(dir))
    }
}

impl SourceDef for ShardsConfig {
    fn name(&self) -> &'static str {
        "shards"
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn root_mut(&mut self) -> &mut PathBuf {
        &mut self.root
    }

    fn open_local(&self, root: &Path) -> Result<Arc<dyn Source>> {
        Ok(Arc::new(Shards::open(root)?))
    }
}

/// The converted dataset at a local `root` (any kind's pipeline: see the module).
pub(crate) fn open_local(root: &Path, listing: Listing<'_>) -> Result<Arc<dyn Source>> {
    open_converted(Shards::open(root)?, listing)
}

/// The converted dataset at a store prefix whose manifest is `manifest` (the bytes the
/// request that looked for it brought back).
pub(crate) fn open_store(
    at: StoreRoot,
    manifest: &[u8],
    sampling: &Sampling,
    listing: Listing<'_>,
) -> Result<Arc<dyn Source>> {
    let s = crate::shards::remote::open(
        &at.root,
        at.client,
        manifest,
        &at.options,
        sampling,
    )?;
    open_converted(s, listing)
}

/// `s`, if it was converted with the listing options given. `extensions` is ignored, and
/// `class_indexing`, `usage` and `label` must say what the conversion used (labels are
/// stored), or it is an error.
fn open_converted(s: Shards, listing: Listing<'_>) -> Result<Arc<dyn Source>> {
    let root = s.root().to_path_buf();
    let m = s.manifest();
    let differs = |field: &'static str, want: String, stored: String| {
        Err(Invalid::NotAsConverted {
            field,
            want,
            root: root.clone(),
            stored,
        }
        .into())
    };
    if let Some(map) = listing.class_indexing {
        let stored: BTreeMap<String, u32> = m.classes.iter().cloned().collect();
        if map != &stored {
            return differs("class_indexing", format!("{map:?}"), format!("{stored:?}"));
        }
    }
    let name = |v: serde_json::Result<serde_json::Value>| {
        v.ok().and_then(|v| v.as_str().map(str::to_string))
    };
    if let Some(u) = listing.usage {
        let want = name(serde_json::to_value(u));
        if want != m.source.usage {
            return differs(
                "usage",
                format!("{want:?}"),
                format!("{:?}", m.source.usage),
            );
        }
    }
    if let Some(l) = listing.label {
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

impl Source for Shards {
    fn describe(&self) -> String {
        Shards::describe(self)
    }

    fn root(&self) -> &Path {
        Shards::root(self)
    }

    fn len(&self) -> usize {
        Shards::len(self)
    }

    fn spec(&self) -> Spec {
        Shards::spec(self)
    }

    fn classes(&self) -> &[(String, u32)] {
        Shards::classes(self)
    }

    fn last_epoch(&self, epoch: u64) {
        Shards::last_epoch(self, epoch);
    }

    fn epoch_starts(&self, epoch: u64, order: &[usize]) {
        Shards::epoch_starts(self, epoch, order);
    }

    fn file_of(&self) -> Option<&[u32]> {
        Some(Shards::file_of(self))
    }

    fn sample_name(&self, index: usize) -> String {
        Shards::sample_name(self, index)
    }

    fn read<'a>(&'a self, index: usize, scratch: &'a mut Vec<u8>) -> Result<RawSample<'a>> {
        let (e, bytes) = self.record_into(index, scratch)?;
        let raw = match self.manifest().storage {
            Storage::Raw => Raw::Pixels {
                data: bytes,
                height: e.height as usize,
                width: e.width as usize,
            },
            Storage::Jpeg | Storage::Original => Raw::Encoded(bytes),
        };
        Ok(RawSample {
            raw,
            labels: e.labels,
        })
    }
}
