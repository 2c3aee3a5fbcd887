//! Sinks: where `imgfeed convert --format npy` writes an epoch, and how the slices of a
//! split npy conversion are joined (`merge.rs`; shards conversion is in [`crate::shards`],
//! beside the format it writes).

pub mod merge;
pub mod npy;

pub use merge::{merge_npy, NpyMerge};
pub use npy::{write_npy_dir, NpyWriter};

/// Create the output folder `dir` (and its parents), or say in one message why it cannot
/// be: a file already there, or the system's reason (permissions, a read-only disk).
pub(crate) fn create_out_dir(dir: &std::path::Path) -> crate::Result<()> {
    let refuse = |source: std::io::Error| crate::Error::Io {
        path: dir.to_path_buf(),
        source,
    };
    if dir.exists() && !dir.is_dir() {
        return Err(refuse(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "the output folder cannot be created: a file of that name is there",
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        refuse(std::io::Error::new(
            e.kind(),
            format!("the output folder cannot be created: {e}"),
        ))
    })
}
