//! imgfeed turns image datasets into training batches.
//!
//! The nouns, in the order data flows through them:
//!
//! * a [`Source`](source::Source) gives random access to samples: an
//!   [`ImageFolder`](source::ImageFolder) tree, [CIFAR](source::Cifar) binary files, or
//!   container files read in place ([`RecordFiles`](source::record_files::RecordFiles) over
//!   the [`formats`]: WebDataset tars);
//! * [`ops`] are the per-sample stages (decode, resize, center_crop, normalize, ...), each
//!   checked against the [`Spec`] of its input before any pixel is read;
//! * the [`plan`] orders an epoch: shuffle, shard, limit, cut into batches;
//! * the [`engine`] runs it on worker threads, fusing ops where it pays, and yields ordered
//!   [`Batch`]es through a bounded queue — an [`Epoch`] is that iterator;
//! * a [`Pipeline`] ties them together, from a TOML file in `pipelines/` or a builder;
//! * [`sink`] writes epochs out (`.npy` files) and converts datasets to [`shards`]: packed,
//!   memory-mapped files that later epochs read several times faster (or to WebDataset
//!   tars, for other tools).
//!
//! ```no_run
//! let pipeline = imgfeed::Pipeline::from_file("pipelines/resnet50_eval.toml")?;
//! for batch in pipeline.epoch(0) {
//!     let batch = batch?;
//!     let images: &[f32] = batch.images_f32()?; // [32, 3, 224, 224]
//!     let labels: &[i32] = batch.labels_i32()?; // [32]
//!     assert_eq!(images.len(), batch.len() * 3 * 224 * 224);
//!     assert_eq!(labels.len(), batch.len());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Or in code, every config built from a constructor and setters (the config structs are
//! `#[non_exhaustive]`, so fields added later break no caller):
//!
//! ```no_run
//! use imgfeed::ops::{CenterCrop, Decode, HwcToChw, Normalize, Op, Resize, TypeCast};
//! use imgfeed::{BatchConfig, LabelType, Pipeline, PipelineConfig, SourceConfig, SourceKind};
//! let source = SourceConfig::new(SourceKind::ImageFolder, "data/val").shuffle(false);
//! let ops = vec![
//!     Op::Decode(Decode::default()),
//!     Op::Resize(Resize::new(256)),
//!     Op::CenterCrop(CenterCrop::new(224)),
//!     Op::Normalize(Normalize::new([123.675, 116.28, 103.53], [58.395, 57.12, 57.375])),
//!     Op::HwcToChw(HwcToChw::new()),
//!     Op::TypeCast(TypeCast::new(LabelType::I32)),
//! ];
//! let config = PipelineConfig::new(source, ops, BatchConfig::new(32).drop_remainder(true));
//! let pipeline = Pipeline::new(config)?;
//! # Ok::<(), imgfeed::Error>(())
//! ```
//!
//! The public API is what these modules export: the configs, [`Pipeline`], [`Batch`], the
//! sources, the error types, and the per-image kernels that stand on their own
//! ([`codec::Decoder`], [`imgproc::Resizer`], [`imgproc::write::write`]: for a
//! loop of one's own, and for the benchmarks). How ops run inside the engine (kernels,
//! the working image, the compiled program) is crate-private.

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unreachable_pub)]

// The command line (src/cli) names the library as its users do (`imgfeed::...`).
extern crate self as imgfeed;

#[macro_use]
mod setters;
mod value_name;

// The `imgfeed` command (clap, progress bars, anyhow at its edge): library code so that the
// binary (src/main.rs) and the Python wheel's `imgfeed` run the same thing. It builds the
// library's `#[non_exhaustive]` configs as any outside caller must (a default, then fields
// set), which clippy would have written as a struct literal inside the crate.
#[allow(unreachable_pub, clippy::field_reassign_with_default)]
mod cli;

pub mod batch_ops;
pub mod codec;
pub mod engine;
pub mod error;
pub mod formats;
#[macro_use]
pub mod imgproc;
pub mod ops;
pub mod pipeline;
pub mod plan;
pub mod preview;
pub mod resume;
pub mod rng;
pub mod shards;
pub mod sink;
pub mod size;
pub mod source;
pub mod spec;
pub mod store;
pub mod validate;

pub use cli::main_with_args;
pub use engine::{Batch, Epoch, Labels, StageTimes, State, TimedOut, WrongType};
pub use error::{Error, Fault, OnError, Place, Result, SampleErrorKind};
/// The 16-bit float types of [`Batch::images_f16`] and [`Batch::images_bf16`].
pub use half;
pub use pipeline::{
    spec_chain, BatchConfig, EngineConfig, Pipeline, PipelineBuilder, PipelineConfig,
};
pub use plan::{Sampling, ShardFrom, Uneven};
pub use source::{Dataset, SourceConfig, SourceKind};
pub use spec::{DType, LabelType, Layout, Spec, SpecError};
