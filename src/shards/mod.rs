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
//! The flow, one file each: [`convert`] runs a conversion (the `[store]` pipeline table is
//! [`store`]), [`writer`] appends samples to shards in the layout of
//! [`format`](mod@format), [`publish`] hands finished files to object storage, [`merge`]
//! joins the slices of a split conversion, and [`source`] reads a dataset back,
//! memory-mapped.

pub mod convert;
pub mod folder;
pub mod format;
pub mod merge;
pub mod publish;
pub mod source;
pub mod store;
pub mod writer;

pub use convert::{convert_to_shards, convert_to_shards_until, slice_range};
pub use format::{Manifest, Storage, VERSION};
pub use merge::{merge_index, merge_index_with};
pub use source::Shards;
pub use store::StoreConfig;
pub use writer::ShardWriter;
