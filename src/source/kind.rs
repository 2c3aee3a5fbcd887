//! What a source kind is: [`SourceDef`], implemented by each kind's config (one file per
//! kind, registered by one line of `sources!` in `mod.rs`): its root, the listing options
//! a converted copy must have been made with, how it opens from a local folder and from a
//! prefix in object storage, and how `imgfeed validate` recognises a bare folder of it.

use super::root::StoreRoot;
use super::{CifarLabel, Source, Usage};
use crate::error::Result;
use crate::store::StoreError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The listing options as given: what a converted copy of the dataset must have been
/// converted with (labels are stored), and what a conversion records of its origin.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Listing<'a> {
    /// Folder name → label (ImageFolder's `class_indexing`).
    pub class_indexing: Option<&'a BTreeMap<String, u32>>,
    /// The split (CIFAR's `usage`).
    pub usage: Option<Usage>,
    /// Which label(s) (CIFAR-100's `label`).
    pub label: Option<CifarLabel>,
}

/// A source kind's `[source]` fields and how it opens (see the module).
pub trait SourceDef {
    /// The kind's name in pipeline files (`kind = "..."`).
    fn name(&self) -> &'static str;
    /// The dataset root.
    fn root(&self) -> &Path;
    /// The dataset root, to change (the command line's `--data`, a file's relative root).
    fn root_mut(&mut self) -> &mut PathBuf;
    /// The split, to change; `None` for a kind without splits.
    fn usage_mut(&mut self) -> Option<&mut Option<Usage>> {
        None
    }
    /// Whether the kind is recognised by its files' names (`.tar`, `.tfrecord`): a path
    /// given as `--data` that its `detect` recognises is read as this kind whatever the
    /// pipeline's kind says.
    fn by_extension(&self) -> bool {
        false
    }
    /// The listing options as given.
    fn listing(&self) -> Listing<'_> {
        Listing::default()
    }
    /// Open the dataset at the local folder `root` (which holds no shards manifest).
    fn open_local(&self, root: &Path) -> Result<Arc<dyn Source>>;
    /// Open the dataset at a prefix in object storage that holds no shards manifest (the
    /// request that looked for one found none). By default an error: the kind is read
    /// from a store once converted to shards.
    fn open_store(&self, at: StoreRoot) -> Result<Arc<dyn Source>> {
        Err(not_converted(self.name(), &at))
    }
}

/// A prefix without a shards manifest, for a kind that is read from object storage only
/// once converted: the error says what is and is not read there.
pub(crate) fn not_converted(kind: &str, at: &StoreRoot) -> crate::Error {
    let hint = if kind == "shards" {
        ": not a shards dataset (write one with `imgfeed convert PIPELINE --format shards --out \
         DIR` and upload DIR)"
            .to_string()
    } else {
        format!(
            ": {kind} datasets are read from object storage once converted to shards: \
             `imgfeed convert PIPELINE --format shards --out s3://...`, and point --data at \
             that prefix (image trees are read as they are)"
        )
    };
    StoreError::NotFound {
        object: at.manifest_object(),
        hint,
    }
    .into()
}
