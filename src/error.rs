//! One error type for the whole library, with the context a user needs to act on it:
//! the file, the sample and the stage.

use std::path::PathBuf;

/// Everything that can go wrong in imgfeed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A pipeline file could not be read or parsed (the message carries line and column).
    #[error("pipeline file {path}: {message}")]
    Config {
        /// The pipeline file.
        path: PathBuf,
        /// What is wrong, with line and column where the parser gives them.
        message: String,
    },
    /// A pipeline that parses but cannot run: ops in an invalid order, a bad parameter.
    #[error("invalid pipeline: {0}")]
    Invalid(String),
    /// A dataset that cannot be opened: missing or empty root, a file that is not a whole
    /// number of records.
    #[error("dataset {path}: {reason}")]
    Dataset {
        /// The dataset root or the offending file.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },
    /// One sample failed in one stage.
    #[error("{file}: {stage}: {reason} (sample {index})")]
    Sample {
        /// The sample's index in the source.
        index: usize,
        /// The file (or `FILE:RECORD`) the sample came from.
        file: String,
        /// The stage that failed: read, decode, resize, ...
        stage: &'static str,
        /// Why.
        reason: String,
    },
    /// Writing output (convert) failed.
    #[error("{path}: {source}")]
    Io {
        /// The file being written or read.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A bug: a worker thread panicked outside the per-sample guard.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// True for errors in the pipeline description or the command line (exit code 2),
    /// false for errors in the data (exit code 1).
    pub fn is_usage(&self) -> bool {
        matches!(self, Error::Config { .. } | Error::Invalid(_))
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
