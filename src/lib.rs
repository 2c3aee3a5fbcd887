//! imgfeed turns image datasets into training batches.
//!
//! The nouns, in the order data flows through them:
//!
//! * a [`Source`](source::Source) gives random access to samples: an
//!   [`ImageFolder`](source::ImageFolder) tree or [CIFAR](source::Cifar) binary files;
//! * [`ops`] are the per-sample stages (decode, resize, center_crop, normalize, ...), each
//!   checked against the [`Spec`] of its input before any pixel is read;
//! * the [`plan`] orders an epoch: shuffle, shard, limit, cut into batches;
//! * the [`engine`] runs it on worker threads, fusing ops where it pays, and yields ordered
//!   [`Batch`]es through a bounded queue — an [`Epoch`] is that iterator;
//! * a [`Pipeline`] ties them together, from a TOML file in `pipelines/` or a builder;
//! * [`sink`] writes epochs out (`.npy` files) and converts datasets to [`shards`]: packed,
//!   memory-mapped files that later epochs read several times faster.
//!
//! ```no_run
//! let pipeline = imgfeed::Pipeline::from_file("pipelines/resnet50_eval.toml")?;
//! for batch in pipeline.epoch(0) {
//!     let batch = batch?;
//!     let images: &[f32] = batch.images_f32().unwrap_or_default(); // [32, 3, 224, 224]
//!     let labels: &[i32] = batch.labels_i32().unwrap_or_default(); // [32]
//!     assert_eq!(images.len(), batch.len() * 3 * 224 * 224);
//!     assert_eq!(labels.len(), batch.len());
//! }
//! # Ok::<(), imgfeed::Error>(())
//! ```

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod engine;
pub mod error;
pub mod inspect;
pub mod ops;
pub mod pipeline;
pub mod plan;
pub mod rng;
pub mod shards;
pub mod sink;
pub mod source;
pub mod spec;
pub mod validate;

pub use engine::{Batch, Epoch, Labels, OnError, StageTimes, State, TimedOut};
pub use error::{Error, Fault, Result, SampleErrorKind};
pub use pipeline::{
    spec_chain, BatchConfig, EngineConfig, Pipeline, PipelineBuilder, PipelineConfig, ShardFrom,
    SourceConfig, SourceKind,
};
pub use plan::Uneven;
pub use spec::{DType, LabelType, Layout, Spec};
