//! `.npy` output (format version 1.0), streamed: the header is written with room to spare
//! and rewritten with the final sample count when the writer finishes, so a whole dataset
//! never has to be in memory.
//!
//! `convert --format npy` writes a folder with `images.npy` (`[N, C, H, W]` float32, or
//! uint8 when the pipeline ends in uint8), `labels.npy` (`[N]`, or `[N, k]` for k label
//! columns), `samples.txt` (one sample name per line, in output order) and `classes.json`
//! (class name → label, as the source names them; `{}` for CIFAR).
//!
//! The files are written under temporary names (`images.npy.partial`, ...) and
//! renamed into place only when all of them are complete (`images.npy` last): a conversion
//! that fails or is stopped leaves no file that looks finished, and removes its partial
//! files when it can.

use crate::engine::Epoch;
use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Bytes reserved for the header (magic + length + dict), a multiple of 64.
const HEADER: usize = 128;

/// Streams one array to a `.npy` file.
pub struct NpyWriter {
    path: PathBuf,
    out: BufWriter<File>,
    descr: &'static str,
    tail: Vec<usize>,
    rows: usize,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl NpyWriter {
    /// A new file holding an array of shape `[rows, tail...]` of numpy type `descr`
    /// (`"<f4"`, `"|u1"`, `"<i4"`, ...); rows are counted as they are written.
    pub fn create(path: &Path, descr: &'static str, tail: &[usize]) -> Result<NpyWriter> {
        let file = File::create(path).map_err(io(path))?;
        let mut w = NpyWriter {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(1 << 20, file),
            descr,
            tail: tail.to_vec(),
            rows: 0,
        };
        let h = w.header();
        w.out.write_all(&h).map_err(io(path))?;
        Ok(w)
    }

    fn header(&self) -> Vec<u8> {
        let mut shape = format!("{}", self.rows);
        for d in &self.tail {
            shape.push_str(&format!(", {d}"));
        }
        if self.tail.is_empty() {
            shape.push(',');
        }
        let dict = format!(
            "{{'descr': '{}', 'fortran_order': False, 'shape': ({shape}), }}",
            self.descr
        );
        let mut h = Vec::with_capacity(HEADER);
        h.extend_from_slice(b"\x93NUMPY\x01\x00");
        let len = (HEADER - 10) as u16;
        h.extend_from_slice(&len.to_le_bytes());
        h.extend_from_slice(dict.as_bytes());
        while h.len() < HEADER - 1 {
            h.push(b' ');
        }
        h.push(b'\n');
        h
    }

    /// Append `rows` rows given as little-endian bytes.
    pub fn append(&mut self, bytes: &[u8], rows: usize) -> Result<()> {
        self.out.write_all(bytes).map_err(io(&self.path))?;
        self.rows += rows;
        Ok(())
    }

    /// Rewrite the header with the final row count and flush.
    pub fn finish(mut self) -> Result<usize> {
        let h = self.header();
        if h.len() != HEADER {
            return Err(Error::Io {
                path: self.path.clone(),
                source: std::io::Error::other("npy header does not fit"),
            });
        }
        let p = self.path.clone();
        self.out.seek(SeekFrom::Start(0)).map_err(io(&p))?;
        self.out.write_all(&h).map_err(io(&p))?;
        self.out.flush().map_err(io(&p))?;
        Ok(self.rows)
    }
}

/// What `write_npy_dir` wrote.
#[derive(Clone, Debug, Default)]
pub struct ConvertReport {
    /// Samples written.
    pub samples: usize,
    /// Samples left out because they failed (each reported through `on_skip`).
    pub skipped: usize,
    /// Stopped by the `stop` flag: nothing was renamed into place.
    pub interrupted: bool,
}

/// The suffix of the files being written.
pub const PARTIAL: &str = ".partial";

const OUTPUTS: [&str; 4] = ["classes.json", "samples.txt", "labels.npy", "images.npy"];

/// Write every batch of `epoch` into `dir` (`images.npy`, `labels.npy`, `samples.txt`,
/// and `classes.json`: class name → label).
/// Failed samples (the epoch should run with `on_error = "skip"`) go to `on_skip`; any
/// other error stops the conversion. `stop` is checked after every batch: when raised, the
/// epoch is dropped (which stops its workers), the partial files are removed and the report
/// says `interrupted`.
pub fn write_npy_dir(
    epoch: Epoch,
    pipeline: &crate::Pipeline,
    dir: &Path,
    stop: &std::sync::atomic::AtomicBool,
    on_batch: impl FnMut(usize),
    on_skip: impl FnMut(&Error),
) -> Result<ConvertReport> {
    if crate::store::url::is_remote(dir) {
        return Err(crate::error::Invalid::NpyNotLocal {
            out: dir.to_path_buf(),
        }
        .into());
    }
    crate::sink::create_out_dir(dir)?;
    // as a shards conversion refuses a folder holding one (ShardWriter::create)
    if let Some(there) = OUTPUTS.iter().map(|n| dir.join(n)).find(|p| p.exists()) {
        return Err(Error::Dataset {
            path: there,
            reason: "already exists: this folder holds a conversion (remove it or choose \
                     another --out)"
                .into(),
        });
    }
    let partial = |name: &str| dir.join(format!("{name}{PARTIAL}"));
    let r = write_partial(epoch, pipeline, dir, stop, on_batch, on_skip);
    let done = matches!(&r, Ok(report) if !report.interrupted);
    if done {
        for name in OUTPUTS {
            let from = partial(name);
            std::fs::rename(&from, dir.join(name)).map_err(io(&from))?;
        }
    } else {
        for name in OUTPUTS {
            let _ = std::fs::remove_file(partial(name));
        }
    }
    r
}

fn write_partial(
    epoch: Epoch,
    pipeline: &crate::Pipeline,
    dir: &Path,
    stop: &std::sync::atomic::AtomicBool,
    mut on_batch: impl FnMut(usize),
    mut on_skip: impl FnMut(&Error),
) -> Result<ConvertReport> {
    let partial = |name: &str| dir.join(format!("{name}{PARTIAL}"));
    let spec = pipeline.output_spec();
    let dims: Vec<usize> = spec.dims().iter().map(|d| d.unwrap_or(0)).collect();
    let img_descr = match spec.dtype {
        crate::DType::U8 => "|u1",
        crate::DType::F32 => "<f4",
        crate::DType::F16 => "<f2",
        crate::DType::BF16 => return Err(crate::error::Invalid::NpyBfloat16.into()),
    };
    let lab_descr = match spec.label {
        crate::LabelType::U32 => "<u4",
        crate::LabelType::I32 => "<i4",
        crate::LabelType::I64 => "<i8",
        crate::LabelType::F32 => "<f4",
    };
    let lab_tail: Vec<usize> = if spec.label_columns > 1 {
        vec![spec.label_columns]
    } else {
        vec![]
    };
    let mut images = NpyWriter::create(&partial("images.npy"), img_descr, &dims)?;
    let mut labels = NpyWriter::create(&partial("labels.npy"), lab_descr, &lab_tail)?;
    // Class name → label, as the shards manifest has it (`{}` for sources without names).
    let classes: std::collections::BTreeMap<&str, u32> = pipeline
        .source()
        .classes()
        .iter()
        .map(|(name, label)| (name.as_str(), *label))
        .collect();
    let classes_path = partial("classes.json");
    let json = serde_json::to_string_pretty(&classes).unwrap_or_else(|_| "{}".into());
    std::fs::write(&classes_path, json + "\n").map_err(io(&classes_path))?;
    let names_path = partial("samples.txt");
    let mut names = BufWriter::new(File::create(&names_path).map_err(io(&names_path))?);
    let mut report = ConvertReport::default();
    for batch in epoch {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            report.interrupted = true;
            return Ok(report); // drops the epoch: its workers stop
        }
        let batch = batch?;
        for e in batch.skipped() {
            on_skip(e);
            report.skipped += 1;
        }
        images.append(batch.image_bytes(), batch.len())?;
        labels.append(batch.label_bytes(), batch.len())?;
        for &i in batch.indices() {
            writeln!(names, "{}", pipeline.source().sample_name(i as usize))
                .map_err(io(&names_path))?;
        }
        report.samples += batch.len();
        on_batch(batch.len() + batch.skipped().len());
    }
    images.finish()?;
    labels.finish()?;
    names.flush().map_err(io(&names_path))?;
    Ok(report)
}
