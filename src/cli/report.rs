//! Bad samples: `--report FILE` (one JSON object per line, written as they are found) and
//! the list printed at the end of a command that skipped samples.

use anyhow::{Context, Result};
use imgfeed::Error;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// A report file that cannot be created or written: an output error (exit code 2), not a
/// bad sample.
fn output_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One bad sample, kept for the end-of-run list.
#[derive(Clone, Debug)]
pub struct BadSample {
    pub file: String,
    pub index: Option<usize>,
    pub stage: &'static str,
    pub kind: &'static str,
    pub reason: String,
}

impl BadSample {
    pub fn from_error(e: &Error) -> BadSample {
        match e {
            Error::Sample {
                index,
                file,
                stage,
                kind,
                reason,
            } => BadSample {
                file: file.clone(),
                index: Some(*index),
                stage,
                kind: kind.name(),
                reason: reason.clone(),
            },
            other => BadSample {
                file: String::new(),
                index: None,
                stage: "",
                kind: "other",
                reason: other.to_string(),
            },
        }
    }

    /// `FILE: STAGE: REASON [KIND, sample INDEX]`, as [`Error::Sample`] displays.
    pub fn line(&self) -> String {
        match self.index {
            Some(i) => format!(
                "{}: {}: {} [{}, sample {i}]",
                self.file, self.stage, self.reason, self.kind
            ),
            None => self.reason.clone(),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "path": self.file,
            "index": self.index,
            "stage": self.stage,
            "kind": self.kind,
            "reason": self.reason,
        })
    }
}

/// Collects bad samples; streams them to the report file when there is one.
pub struct Reporter {
    out: Option<(BufWriter<File>, String)>,
    pub bad: Vec<BadSample>,
}

impl Reporter {
    pub fn new(path: Option<&Path>) -> Result<Reporter> {
        let out = match path {
            Some(p) => Some((
                BufWriter::new(
                    File::create(p)
                        .map_err(|e| output_error(p, e))
                        .with_context(|| format!("--report {}", p.display()))?,
                ),
                p.display().to_string(),
            )),
            None => None,
        };
        Ok(Reporter {
            out,
            bad: Vec::new(),
        })
    }

    pub fn add(&mut self, e: &Error) -> Result<()> {
        let b = BadSample::from_error(e);
        if let Some((w, name)) = &mut self.out {
            writeln!(w, "{}", b.to_json())
                .map_err(|e| output_error(Path::new(name), e))
                .with_context(|| format!("--report {name}"))?;
        }
        self.bad.push(b);
        Ok(())
    }

    /// Flush the report file.
    pub fn finish(&mut self) -> Result<()> {
        if let Some((w, name)) = &mut self.out {
            w.flush()
                .map_err(|e| output_error(Path::new(name), e))
                .with_context(|| format!("--report {name}"))?;
        }
        Ok(())
    }

    /// Print every bad sample (stderr), one line each, in the format of the sample error
    /// itself: `VERB: FILE: STAGE: REASON [KIND, sample INDEX]`.
    pub fn print(&self, verb: &str) {
        for b in &self.bad {
            eprintln!("{verb}: {}", b.line());
        }
    }
}
