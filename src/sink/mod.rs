//! Sinks: where `imgfeed convert` writes an epoch.

pub mod npy;

pub use npy::{write_npy_dir, NpyWriter};
