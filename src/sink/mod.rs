//! Sinks: where `imgfeed convert` writes an epoch.

pub mod npy;
pub mod shards;

pub use npy::{write_npy_dir, NpyWriter};
