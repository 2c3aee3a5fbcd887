//! Sources: random access to the samples of a dataset, by index.
//!
//! A source only knows where sample `i` lives and what its labels are; it never decodes.
//! Opening one does not read any sample (ImageFolder lists directories, CIFAR and shards map
//! files).

use crate::error::Result;
use crate::spec::{Layout, Spec};
use std::path::Path;

pub mod cifar;
pub mod cifar_pickle;
pub mod config;
mod dataset;
pub mod image_folder;

pub use crate::shards::Shards;
pub use cifar::{parse_record, Cifar, CifarKind, CifarLabel, Usage, PIXELS as PIXELS_PER_RECORD};
pub use cifar_pickle::{parse_cifar_pickle, CifarPickle, PickleError, Pixels};
pub use config::{
    Cifar100Config, CifarConfig, Dataset, ImageFolderConfig, ShardsConfig, SourceConfig, SourceKind,
};
pub use image_folder::{Ignored, ImageFolder};

/// Most label columns a source can produce (CIFAR-100: coarse and fine).
pub const MAX_LABELS: usize = 2;

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
}
