//! The shards format: a dataset converted once (`imgfeed convert --format shards`) into a
//! few large files that later epochs read by memory map, like FFCV's `.beton` or
//! MindSpore's MindRecord. `docs/shards.md` is the full description, enough to write a
//! reader in another language (`examples/read_shards.py` is one, numpy only).
//!
//! A dataset is a folder:
//!
//! * `manifest.json` — version, storage mode, classes, label columns, where the data came
//!   from, and every other file with its size and CRC-32. Its presence marks the folder as
//!   a dataset: `--data DIR` on any pipeline reads it through the
//!   [`Shards`] source.
//! * `shard-NNNNN.bin` — a 32-byte header (`IMGFSHRD`, version, storage code), then the
//!   records back to back: a JPEG file (`jpeg`), the source's file (`original`) or
//!   `height × width × 3` bytes of RGB (`raw`).
//! * `index.bin` — a 32-byte header (`IMGFINDX`, version, entry size, count), then one
//!   56-byte entry per sample: shard, offset, length, CRC-32 of the record, height, width,
//!   labels, and where its name lies in `names.bin`.
//! * `names.bin` — the samples' root-relative paths, UTF-8, concatenated.
//!
//! The flow, one file each: a conversion ([`crate::sink::shards`]) is configured by the
//! `[store]` pipeline table ([`store`]), [`writer`] appends samples to shards in the layout of
//! [`format`](mod@format), [`publish`] hands finished files on ([`upload`]: to object
//! storage, the manifest last), [`merge`] joins the slices of a split conversion (in a
//! [`folder`], local or a store's prefix), and [`source`] reads a dataset back,
//! memory-mapped; from object storage, [`remote`] opens it (the manifest, then the index
//! and the names into the cache) and [`fetch`] brings its shard files into the cache ahead
//! of the epoch's order.

pub mod fetch;
pub mod folder;
pub mod format;
pub mod merge;
pub mod publish;
pub mod remote;
pub mod source;
pub mod store;
pub mod upload;
pub mod writer;

pub use fetch::RemoteFiles;
pub use folder::StoreFolder;
pub use format::{Manifest, Storage, VERSION};
pub use merge::{merge_index, merge_index_with};
pub use source::Shards;
pub use store::{slice_range, StoreConfig};
pub use upload::Uploader;
pub use writer::ShardWriter;
