//! Sinks: what `imgfeed convert` writes: an epoch as npy files ([`npy`]), or the whole
//! source through its ops into the shards format ([`shards`]; the format itself, its
//! writer and reader, is [`crate::shards`]).

pub mod npy;
pub mod shards;

pub use npy::{write_npy_dir, NpyWriter};
pub use shards::{convert_to_shards, convert_to_shards_until, ShardsReport};

pub(crate) use crate::shards::writer::create_out_dir;
