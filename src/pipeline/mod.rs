//! A pipeline: a source, its sampling, the ops and the batching, from a TOML file or built
//! in code; checked as a whole before any pixel is read.
//!
//! ```toml
//! [source]
//! kind = "image_folder"          # or "cifar10", "cifar100"
//! root = "../fixtures/imagefolder"  # relative to this file
//! shuffle = false
//!
//! [[ops]]
//! op = "decode"
//!
//! [batch]
//! size = 32
//! drop_remainder = true
//!
//! [engine]
//! workers = 2
//! ```
//!
//! Every table rejects unknown fields, and an unknown op is an error, with line and column.
//!
//! The rooms: [`config`] (the tables, parsed from TOML or JSON), `places` (where a mistake
//! is in a pipeline file or its JSON tables), [`check`] (what is checked before a pixel is
//! read), [`overrides`] (the settings a command line or the Python package changes on a
//! pipeline, applied and checked in one place) and `runtime` (the checked [`Pipeline`],
//! starting epochs).

pub mod check;
pub mod config;
mod job_state;
pub mod overrides;
mod places;
mod runtime;
mod setting;

pub use crate::source::{Dataset, SourceConfig, SourceKind};
pub use check::spec_chain;
pub use config::{default_workers, BatchConfig, EngineConfig, PipelineConfig};
pub use job_state::{Fingerprint, JobState};
pub use overrides::Overrides;
pub use runtime::{Pipeline, PipelineBuilder};
