//! Sinks: what `imgfeed convert` writes: an epoch as npy files ([`npy`]) and how the slices
//! of a split npy conversion are joined ([`merge`]), or the whole source through its ops into
//! the shards format ([`shards`]; the format itself, its writer and reader, is
//! [`crate::shards`]), or into WebDataset tars ([`webdataset`]).
pub mod merge;
pub mod mindrecord;
pub mod npy;
pub mod shards;
pub mod webdataset;

pub use merge::{merge_npy, NpyMerge};
pub use mindrecord::{convert_to_mindrecord_until, MindRecordReport};
pub use npy::{write_npy_dir, NpyWriter};
pub use shards::{convert_to_shards, convert_to_shards_until, ShardsReport};
pub use webdataset::{convert_to_webdataset_until, WebDatasetManifest, WebDatasetReport};

pub(crate) use crate::shards::writer::create_out_dir;
