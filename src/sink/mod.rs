//! Sinks: where `imgfeed convert --format npy` writes an epoch (shards conversion is in
//! [`crate::shards`], beside the format it writes).

pub mod npy;

pub use npy::{write_npy_dir, NpyWriter};
