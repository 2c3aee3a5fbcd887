//! One error type for the whole library, with the context a user needs to act on it:
//! the file, the sample and the stage.

use std::path::PathBuf;

mod invalid;
mod on_error;

pub use invalid::Invalid;
pub use on_error::OnError;

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
    /// A pipeline that parses but cannot run (a setting out of range, a sampling that
    /// does not fit the dataset), or a command's settings that cannot: [`Invalid`] says
    /// which rule, with the error behind it as the source where there is one.
    #[error("invalid pipeline: {0}")]
    Invalid(#[from] Invalid),
    /// An op that cannot take its input or has a bad parameter, before any pixel is read.
    #[error("invalid pipeline: {}ops[{index}] ({op}): {reason}", at.as_ref().map(|p| format!("{p}: ")).unwrap_or_default())]
    Op {
        /// Its place in the pipeline's ops, from 0.
        index: usize,
        /// Its name (`resize`, ...).
        op: &'static str,
        /// Why.
        reason: crate::spec::SpecError,
        /// Where the op (or the parameter at fault) is written, for a pipeline read from a
        /// file.
        at: Option<Place>,
    },
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
    #[error("{file}: {stage}: {reason} [{kind}, sample {index}]")]
    Sample {
        /// The sample's index in the source.
        index: usize,
        /// The file (or `FILE:RECORD`) the sample came from.
        file: String,
        /// The stage that failed: read, decode, resize, ...
        stage: &'static str,
        /// What kind of failure, for programs (the reason is for people).
        kind: SampleErrorKind,
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
    /// A bug in imgfeed (a worker thread panicked outside the per-sample guard, a kernel
    /// found its own state inconsistent): never reported as a bad sample; the command
    /// exits with 70.
    #[error("internal error: {0}")]
    Internal(String),
}

/// A place in a pipeline file: `FILE:LINE:COLUMN`, counted from 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// The pipeline file.
    pub file: PathBuf,
    /// Line, from 1.
    pub line: usize,
    /// Column (in characters), from 1.
    pub column: usize,
}

impl Place {
    /// The place of byte `offset` of `text`, the contents of `file`.
    pub fn of(file: &std::path::Path, text: &str, offset: usize) -> Place {
        let before = text.get(..offset).unwrap_or(text);
        let line_start = before.rfind('\n').map_or(0, |n| n + 1);
        Place {
            file: file.to_path_buf(),
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

impl Error {
    /// Sample `index` (`file`) made a stage panic: caught, it fails that sample only.
    pub fn panicked(index: usize, file: String) -> Error {
        Error::Sample {
            index,
            file,
            stage: "panic",
            kind: SampleErrorKind::Panic,
            reason: "a stage panicked on this sample (a bug: please report it)".into(),
        }
    }

    /// Sample `index` (`file`) is not in the source: a read past its end.
    pub fn out_of_range(index: usize, file: String) -> Error {
        Error::Sample {
            index,
            file,
            stage: "read",
            kind: SampleErrorKind::Other,
            reason: "index out of range".into(),
        }
    }

    /// What `fault` in `stage` of sample `index` (`file`) means: a bad sample, or, for an
    /// [`SampleErrorKind::Internal`] fault, a bug.
    pub fn at(index: usize, file: String, stage: &'static str, fault: Fault) -> Error {
        if fault.kind == SampleErrorKind::Internal {
            return Error::Internal(format!(
                "{file}: {stage}: {} [sample {index}]",
                fault.reason
            ));
        }
        Error::Sample {
            index,
            file,
            stage,
            kind: fault.kind,
            reason: fault.reason,
        }
    }

    /// The kind of a sample failure; `None` for every other error.
    pub fn sample_kind(&self) -> Option<SampleErrorKind> {
        match self {
            Error::Sample { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// True for errors in the pipeline description, the command line or the dataset as a
    /// whole (a missing or unreadable root, no samples: exit code 2); false for errors in
    /// samples and in writing output (exit code 1).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Error::Config { .. } | Error::Invalid(_) | Error::Op { .. } | Error::Dataset { .. }
        )
    }
}

/// Why one sample failed, as a closed set a program can match on (tests, `--report`,
/// `imgfeed validate`'s table). The `reason` string next to it says the same for people.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SampleErrorKind {
    /// The file could not be read (missing, permissions, an I/O error).
    Io,
    /// The file is empty (0 bytes).
    Empty,
    /// The file is larger than `max_file_bytes`; it was not read.
    FileTooLarge,
    /// The bytes are not a JPEG, PNG, BMP or WebP file (unrecognised signature).
    UnknownFormat,
    /// A recognised format using a feature the decoder does not support.
    Unsupported,
    /// The header declares more than `max_pixels` pixels; nothing was allocated.
    TooManyPixels,
    /// The data ends before the image does (a cut download).
    Truncated,
    /// The data is damaged: bad markers, bad Huffman codes, bad CRC, bad zlib stream.
    Corrupt,
    /// A record's label is outside the dataset's range (CIFAR).
    BadLabel,
    /// The decoded image does not fit the pipeline (its size is not the batch's).
    Shape,
    /// A stage panicked on the sample (a bug in imgfeed or a dependency), caught.
    Panic,
    /// Any other failure of an op.
    Other,
    /// An internal inconsistency met on this sample: a bug in imgfeed, not a fault of the
    /// data. The engine ends the run with [`Error::Internal`] instead of counting it as a
    /// bad sample.
    Internal,
}

impl SampleErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [SampleErrorKind; 13] = [
        SampleErrorKind::Io,
        SampleErrorKind::Empty,
        SampleErrorKind::FileTooLarge,
        SampleErrorKind::UnknownFormat,
        SampleErrorKind::Unsupported,
        SampleErrorKind::TooManyPixels,
        SampleErrorKind::Truncated,
        SampleErrorKind::Corrupt,
        SampleErrorKind::BadLabel,
        SampleErrorKind::Shape,
        SampleErrorKind::Panic,
        SampleErrorKind::Other,
        SampleErrorKind::Internal,
    ];

    /// A stable snake_case name (JSON reports, tables).
    pub fn name(self) -> &'static str {
        match self {
            SampleErrorKind::Io => "io",
            SampleErrorKind::Empty => "empty",
            SampleErrorKind::FileTooLarge => "file_too_large",
            SampleErrorKind::UnknownFormat => "unknown_format",
            SampleErrorKind::Unsupported => "unsupported",
            SampleErrorKind::TooManyPixels => "too_many_pixels",
            SampleErrorKind::Truncated => "truncated",
            SampleErrorKind::Corrupt => "corrupt",
            SampleErrorKind::BadLabel => "bad_label",
            SampleErrorKind::Shape => "shape",
            SampleErrorKind::Panic => "panic",
            SampleErrorKind::Other => "other",
            SampleErrorKind::Internal => "internal",
        }
    }
}

impl std::fmt::Display for SampleErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A sample's failure before the engine knows which sample it is: what a decoder or an op
/// returns. The engine turns it into [`Error::Sample`] with the file, index and stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What kind of failure.
    pub kind: SampleErrorKind,
    /// Why, for people.
    pub reason: String,
}

impl Fault {
    /// A fault of `kind`.
    pub fn new(kind: SampleErrorKind, reason: impl Into<String>) -> Fault {
        Fault {
            kind,
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for Fault {}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A kernel's internal inconsistency (a bug, not the sample's fault).
pub(crate) fn bug(what: impl Into<String>) -> Fault {
    Fault::new(SampleErrorKind::Internal, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An internal fault is a bug, never a bad sample; any other fault is the sample's.
    #[test]
    fn internal_faults_are_bugs_not_bad_samples() {
        let bug = Error::at(
            3,
            "a/x.jpg".into(),
            "resize",
            Fault::new(SampleErrorKind::Internal, "window outside"),
        );
        assert!(
            matches!(&bug, Error::Internal(m) if m.contains("a/x.jpg: resize: window outside")),
            "{bug:?}"
        );
        assert_eq!(bug.sample_kind(), None);
        assert!(!bug.is_usage());
        let bad = Error::at(
            3,
            "a/x.jpg".into(),
            "decode",
            Fault::new(SampleErrorKind::Truncated, "cut"),
        );
        assert_eq!(bad.sample_kind(), Some(SampleErrorKind::Truncated));
    }
}
