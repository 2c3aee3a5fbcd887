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
    /// The epoch it was met in (`None` for `validate`, which reads every sample once).
    pub epoch: Option<u64>,
    pub file: String,
    pub index: Option<usize>,
    pub stage: &'static str,
    pub kind: &'static str,
    pub reason: String,
}

impl BadSample {
    pub fn from_error(e: &Error, epoch: Option<u64>) -> BadSample {
        match e {
            Error::Sample {
                index,
                file,
                stage,
                kind,
                reason,
            } => BadSample {
                epoch,
                file: file.clone(),
                index: Some(*index),
                stage,
                kind: kind.name(),
                reason: reason.clone(),
            },
            other => BadSample {
                epoch,
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
            "epoch": self.epoch,
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

    /// Bad sample `e`, met in `epoch`.
    pub fn add(&mut self, e: &Error, epoch: Option<u64>) -> Result<()> {
        let b = BadSample::from_error(e, epoch);
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

    /// Print every bad sample (stderr) once, in the format of the sample error itself:
    /// `VERB: FILE: STAGE: REASON [KIND, sample INDEX]`, with how often it was met where a
    /// run of several epochs met it again (the `--report` file has every time).
    pub fn print(&self, verb: &str) {
        for (line, times, epochs) in self.distinct() {
            if times > 1 {
                eprintln!("{verb}: {line} ({times} times, in {epochs} epochs)");
            } else {
                eprintln!("{verb}: {line}");
            }
        }
    }

    /// Each distinct bad-sample line, in the order first met, with how many times and in
    /// how many epochs it was met.
    fn distinct(&self) -> Vec<(String, usize, usize)> {
        let mut at: std::collections::HashMap<String, usize> = Default::default();
        let mut out: Vec<(String, usize, std::collections::BTreeSet<Option<u64>>)> = Vec::new();
        for b in &self.bad {
            let line = b.line();
            let i = *at.entry(line.clone()).or_insert_with(|| {
                out.push((line, 0, Default::default()));
                out.len() - 1
            });
            out[i].1 += 1;
            out[i].2.insert(b.epoch);
        }
        out.into_iter().map(|(l, n, e)| (l, n, e.len())).collect()
    }
}
