//! Sinks: what `imgfeed convert` writes: an epoch as npy files ([`npy`]) and how the slices
//! of a split npy conversion are joined ([`merge`]), or the whole source through its ops into
//! the shards format ([`shards`]; the format itself, its writer and reader, is
//! [`crate::shards`]).
pub mod merge;
pub mod npy;
pub mod shards;

pub use merge::{merge_npy, NpyMerge};
pub use npy::{write_npy_dir, NpyWriter};
pub use shards::{convert_to_shards, convert_to_shards_until, ShardsReport};

pub(crate) use crate::shards::writer::create_out_dir;
