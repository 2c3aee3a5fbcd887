//! Sources: random access to the samples of a dataset, by index.
//!
//! A source only knows where sample `i` lives and what its labels are; it never decodes.
//! Opening one does not read any sample (ImageFolder lists directories, CIFAR and shards map
//! files).
//!
//! The kinds are a table: one file per kind (its `[source]` fields, implementing
//! [`SourceDef`]: how it opens locally and from a store prefix, what `imgfeed validate`
//! recognises of it) and one line of `sources!` below, which makes [`SourceKind`] and
//! [`Dataset`]. Nothing above this room names a kind. [`config`] is the `[source]` table
//! and its `open`, which parses the root once ([`root`]).

use crate::error::Result;
use crate::spec::{Layout, Spec};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub mod brace;
pub mod cifar;
pub mod cifar_pickle;
pub mod config;
pub mod kind;
pub mod record_files;
pub mod record_index;
pub mod root;
pub mod store_tree;
pub mod tree_packs;

pub use crate::shards::Shards;
pub use cifar::{parse_record, Cifar, CifarKind, CifarLabel, Usage, PIXELS as PIXELS_PER_RECORD};
pub use cifar_pickle::{parse_cifar_pickle, CifarPickle, PickleError, Pixels};
pub use config::SourceConfig;
pub use image_folder::{Ignored, ImageFolder};
pub use kind::{Listing, SourceDef};
pub use root::{DatasetRoot, StoreRoot};

/// The source kinds, one line each: `module::Config as Variant`. The module's name is the
/// kind's name in pipeline files (`kind = "cifar10"`) and on the command line; the config
/// is the kind's `[source]` fields and implements [`SourceDef`].
macro_rules! sources {
    ($($(#[$doc:meta])* $module:ident :: $config:ident as $name:ident,)*) => {
        $(pub mod $module;)*
        $(pub use $module::$config;)*

        /// Kind of source: the `kind` field of `[source]` (and the names the command line
        /// takes).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
        #[serde(rename_all = "snake_case")]
        #[value(rename_all = "snake_case")]
        pub enum SourceKind {
            $($(#[$doc])* $name,)*
        }

        /// Which dataset: a kind and that kind's fields only.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind", rename_all = "snake_case")]
        #[non_exhaustive]
        pub enum Dataset {
            $($(#[$doc])* $name($config),)*
        }

        impl SourceKind {
            /// Every kind, in the registry's order.
            pub const ALL: &'static [SourceKind] = &[$(SourceKind::$name),*];
            /// Every kind's name in pipeline files.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($module)),*];

            /// The kind's name in pipeline files.
            pub fn name(self) -> &'static str {
                match self {
                    $(SourceKind::$name => stringify!($module),)*
                }
            }
        }

        impl Dataset {
            /// A `kind` dataset at `root`, every option at its default.
            pub fn new(kind: SourceKind, root: impl Into<PathBuf>) -> Dataset {
                match kind {
                    $(SourceKind::$name => Dataset::$name($config::new(root)),)*
                }
            }

            /// Its kind.
            pub fn kind(&self) -> SourceKind {
                match self {
                    $(Dataset::$name(_) => SourceKind::$name,)*
                }
            }

            /// The config of a bare folder (`imgfeed validate DIR`): the first kind, in the
            /// registry's order, that recognises its files (`None`: none does).
            pub fn detect(dir: &Path) -> Option<Dataset> {
                $(if let Some(c) = $config::detect(dir) {
                    return Some(Dataset::$name(c));
                })*
                None
            }

            /// What every kind has: its [`SourceDef`].
            pub fn def(&self) -> &dyn SourceDef {
                match self {
                    $(Dataset::$name(c) => c,)*
                }
            }

            fn def_mut(&mut self) -> &mut dyn SourceDef {
                match self {
                    $(Dataset::$name(c) => c,)*
                }
            }
        }
    };
}

sources! {
    /// A dataset written by `imgfeed convert --format shards` (a folder with a
    /// `manifest.json`). A root holding such a manifest is read as shards whatever the
    /// kind says, so a pipeline written for the original runs unchanged on its copy.
    shards::ShardsConfig as Shards,
    /// CIFAR-10: the binary files or torchvision's pickle files.
    cifar10::CifarConfig as Cifar10,
    /// CIFAR-100: the binary files or torchvision's pickle files.
    cifar100::Cifar100Config as Cifar100,
    /// WebDataset tars (`KEY.jpg` + `KEY.cls`): a file, a folder of them, or a pattern
    /// (`train-{0000..0146}.tar`), read in place through an index built once.
    webdataset::WebDatasetConfig as Webdataset,
    /// TFRecord files of `tf.train.Example`s (plain or gzip'd): a file, a folder of them,
    /// or a pattern, read in place through an index built once.
    tfrecord::TfRecordConfig as Tfrecord,
    /// MindSpore's MindRecord files: one file reads its group, as `MindDataset` does.
    mindrecord::MindRecordConfig as Mindrecord,
    /// Parquet files with an image column (the Hugging Face Hub's): a file, a folder of
    /// them, or a pattern, each unpacked once into the cache and read through its index.
    parquet::ParquetConfig as Parquet,
    /// `root/<class>/<image>` (any folder: the kind a bare folder falls back to).
    image_folder::ImageFolderConfig as ImageFolder,
}

impl Dataset {
    /// A dataset in object storage named by its root alone (`imgfeed validate s3://…`):
    /// opened, a shards manifest there is read as shards, anything else as the kind that
    /// lists a store's objects (an image tree).
    pub fn in_store(root: impl Into<PathBuf>) -> Dataset {
        Dataset::new(SourceKind::ImageFolder, root)
    }

    /// Its root.
    pub fn root(&self) -> &Path {
        self.def().root()
    }

    /// Its root, to change (the command line's `--data`, a file's relative root).
    pub fn root_mut(&mut self) -> &mut PathBuf {
        self.def_mut().root_mut()
    }

    /// Read `data` (the command line's `--data`, Python's `data=`): the root becomes
    /// `data`, and a path that a kind recognises by its files' names (`.tar` files, a
    /// folder or a pattern of them) is read as that kind whatever the pipeline's kind
    /// (with that kind's defaults, unless the pipeline already names it).
    pub fn set_data(&mut self, data: &Path) {
        match Dataset::by_extension(data) {
            Some(d) if d.kind() != self.kind() => *self = d,
            _ => data.clone_into(self.root_mut()),
        }
    }

    /// The kind that recognises `path` by its files' names, if any (see [`Dataset::set_data`]).
    pub fn by_extension(path: &Path) -> Option<Dataset> {
        Dataset::detect(path).filter(|d| d.def().by_extension())
    }

    /// The CIFAR split as given (`None`: not given, or a kind without splits).
    pub fn usage(&self) -> Option<Usage> {
        self.def().listing().usage
    }

    /// The split, to change; `None` for kinds without one.
    pub fn usage_mut(&mut self) -> Option<&mut Option<Usage>> {
        self.def_mut().usage_mut()
    }

    /// The listing options as given: what a converted copy of this dataset must have been
    /// converted with.
    pub fn listing(&self) -> Listing<'_> {
        self.def().listing()
    }
}

/// Most label columns a source can produce (CIFAR-100: coarse and fine).
pub use crate::spec::MAX_LABELS;

/// The bytes of one sample, as the source holds them.
#[derive(Clone, Copy, Debug)]
pub enum Raw<'a> {
    /// An encoded image file (JPEG, PNG, BMP, WebP).
    Encoded(&'a [u8]),
    /// Decoded 8-bit RGB as three planes (R, G, B), each `height × width` row-major: the
    /// CIFAR record layout. Logically the sample is HWC like MindSpore's; the planes let a
    /// pipeline that asks for CHW skip the HWC detour.
    Planar {
        /// `3 × height × width` bytes.
        data: &'a [u8],
        /// Rows.
        height: usize,
        /// Columns.
        width: usize,
    },
    /// Decoded 8-bit RGB, interleaved (`height × width × 3`, HWC): pixels stored already
    /// decoded, as `raw` shards hold them. `decode` passes them through.
    Pixels {
        /// `height × width × 3` bytes.
        data: &'a [u8],
        /// Rows.
        height: usize,
        /// Columns.
        width: usize,
    },
}

/// One sample as read: its bytes and its label(s).
#[derive(Clone, Copy, Debug)]
pub struct RawSample<'a> {
    /// The pixels or the encoded file.
    pub raw: Raw<'a>,
    /// Labels; only the first `Spec::label_columns` are meaningful.
    pub labels: [u32; MAX_LABELS],
}

/// Random access to a dataset's samples.
pub trait Source: Send + Sync {
    /// One line saying what this is (kind, root, sample and class counts).
    fn describe(&self) -> String;
    /// The dataset root: sample names are relative to it.
    fn root(&self) -> &Path;
    /// Number of samples.
    fn len(&self) -> usize;
    /// True when there are no samples (sources refuse to open empty, so normally false).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// What `read` produces.
    fn spec(&self) -> Spec;
    /// The sample's name in error messages and `samples.txt`: a root-relative path, or
    /// `FILE:RECORD` for record files.
    fn sample_name(&self, index: usize) -> String;
    /// Read sample `index`, using `scratch` as the buffer where bytes must be copied.
    fn read<'a>(&'a self, index: usize, scratch: &'a mut Vec<u8>) -> Result<RawSample<'a>>;
    /// Samples a worker should claim at once so that scheduling does not dominate.
    fn work_unit(&self) -> usize {
        1
    }
    /// How decoded samples lie in memory: HWC (interleaved, the default) or CHW (planes,
    /// CIFAR records). `Spec::layout` is the logical layout; this is the physical one, which
    /// the engine needs to plan layout changes.
    fn stored_layout(&self) -> Layout {
        Layout::Hwc
    }
    /// `(class name, label)` when the source names its classes (ImageFolder, shards).
    fn classes(&self) -> &[(String, u32)] {
        &[]
    }
    /// Entries found while listing that are not samples, with why (ImageFolder).
    fn ignored(&self) -> &[(std::path::PathBuf, Ignored)] {
        &[]
    }
    /// What about the dataset looks like a mistake but is read as it is (an ImageFolder
    /// class folder without samples, which still takes a label), one line each; every
    /// command prints them.
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
    /// An epoch starts: it reads the samples `order` (indices in the order workers claim
    /// them; a resumed epoch's from where it resumes). A hint for sources that fetch ahead
    /// (object storage); the default ignores it.
    fn epoch_starts(&self, epoch: u64, order: &[usize]) {
        let _ = (epoch, order);
    }
    /// The run reads no epoch after `epoch`. A hint for sources that keep samples in the
    /// cache for the next epoch (object storage through a cache smaller than the data):
    /// they keep none for an epoch that never comes. An epoch read after it anyway is
    /// read as usual. The default ignores it.
    fn last_epoch(&self, epoch: u64) {
        let _ = epoch;
    }
    /// Whether every sample is one request to object storage (an image tree there): slower
    /// by nature than a few large files, which `bench` says.
    fn per_object(&self) -> bool {
        false
    }
    /// The file each sample is in, for a source made of multi-sample files (shards,
    /// container files): what the shard-aware shuffle (`shuffle_window`) windows. `None`
    /// (the default) for sources of one sample per file or record (ImageFolder, CIFAR),
    /// which refuse a window.
    fn file_of(&self) -> Option<&[u32]> {
        None
    }
}
