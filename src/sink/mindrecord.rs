//! `convert --format mindrecord`: a conversion written as a MindRecord group, for
//! MindSpore's own `MindDataset` (and imgfeed: `--data` at any one of its files).
//!
//! The samples go through the conversion's ops as for shards ([`super::shards`]: the same
//! workers, source order, bad samples reported and left out) and are written, in order,
//! with MindSpore's schema for images: `data` (the JPEG, or with `store.mode = "original"`
//! the source's file), `label` (int32) and `file_name` (the sample's name in the source).
//! A file holds about `shard_size` bytes of samples: `data.mindrecord0 … N-1` (one file:
//! `data.mindrecord`, as MindSpore names a group of one), each with the `.db` index
//! `MindDataset` requires. The group's names are in every header, so the files are
//! written under temporary names, given their headers once the last sample is in, and
//! renamed, the `.db` files first: a folder holding a `.mindrecord` file is whole.

use super::shards::{Conversion, Converted};
use crate::error::{Error, Invalid, Result};
use crate::formats::mindrecord::writer::{FileWriter, WriteError, HEADER_SIZE};
use crate::shards::format::{tmp_name, Storage};
use crate::shards::StoreConfig;
use crate::PipelineConfig;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// The group's base name.
pub const NAME: &str = "data.mindrecord";

/// What a MindRecord conversion wrote.
#[derive(Clone, Debug)]
pub struct MindRecordReport {
    /// The files, in the group's order: `(name, bytes, samples)`.
    pub files: Vec<(String, u64, u64)>,
    /// Samples written.
    pub samples: u64,
    /// Samples left out because they failed (each reported through `on_skip`).
    pub skipped: usize,
}

/// The group's files being written (see the module).
struct Group {
    dir: PathBuf,
    shard_size: u64,
    open: Option<FileWriter<BufWriter<File>>>,
    /// Sealed files: writer and temporary path.
    sealed: Vec<(FileWriter<BufWriter<File>>, PathBuf)>,
    open_tmp: PathBuf,
    /// Temporary files to remove when the conversion does not finish.
    tmps: Vec<PathBuf>,
    finished: bool,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn write_err(path: &Path) -> impl Fn(WriteError) -> Error + '_ {
    move |e| match e {
        WriteError::Io(source) => Error::Io {
            path: path.to_path_buf(),
            source,
        },
        other => Error::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(other),
        },
    }
}

impl Group {
    fn create(dir: &Path, shard_size: u64) -> Result<Group> {
        super::create_out_dir(dir)?;
        let taken = std::fs::read_dir(dir).map_err(io(dir))?.flatten().any(|e| {
            e.file_name()
                .to_str()
                .is_some_and(crate::formats::mindrecord::is_mindrecord_name)
        });
        if taken {
            return Err(Error::Dataset {
                path: dir.to_path_buf(),
                reason: "already holds .mindrecord files (remove them or choose another --out)"
                    .into(),
            });
        }
        Ok(Group {
            dir: dir.to_path_buf(),
            shard_size: shard_size.max(1),
            open: None,
            sealed: Vec::new(),
            open_tmp: PathBuf::new(),
            tmps: Vec::new(),
            finished: false,
        })
    }

    fn seal(&mut self) -> Result<()> {
        if let Some(mut w) = self.open.take() {
            let tmp = std::mem::take(&mut self.open_tmp);
            w.seal().map_err(write_err(&tmp))?;
            self.sealed.push((w, tmp));
        }
        Ok(())
    }

    fn append(&mut self, image: &[u8], label: u32, file_name: &str) -> Result<()> {
        let full = self.open.as_ref().is_some_and(|w| {
            w.rows() > 0 && w.size() - HEADER_SIZE + image.len() as u64 > self.shard_size
        });
        if full {
            self.seal()?;
        }
        if self.open.is_none() {
            let k = self.sealed.len();
            let tmp = tmp_name(&self.dir.join(format!("{NAME}{k}")));
            let file = File::create(&tmp).map_err(io(&tmp))?;
            self.tmps.push(tmp.clone());
            self.open = Some(FileWriter::new(
                BufWriter::with_capacity(1 << 20, file),
                k as u64,
            ));
            self.open_tmp = tmp;
        }
        let tmp = self.open_tmp.clone();
        match self.open.as_mut() {
            Some(w) => w.write(image, label, file_name).map_err(write_err(&tmp)),
            None => Err(Error::Internal("MindRecord writer has no open file".into())),
        }
    }

    fn finish(mut self) -> Result<Vec<(String, u64, u64)>> {
        self.seal()?;
        let n = self.sealed.len();
        let names: Vec<String> = if n == 1 {
            vec![NAME.to_string()]
        } else {
            (0..n).map(|k| format!("{NAME}{k}")).collect()
        };
        let mut renames = Vec::new();
        let mut files = Vec::new();
        for ((w, tmp), name) in std::mem::take(&mut self.sealed).into_iter().zip(&names) {
            let rows = w.rows();
            let (out, db) = w.finish(&names).map_err(write_err(&tmp))?;
            let file = out.into_inner().map_err(|e| io(&tmp)(e.into_error()))?;
            file.sync_all().map_err(io(&tmp))?;
            let size = file.metadata().map_err(io(&tmp))?.len();
            let path = self.dir.join(name);
            let db_path = self.dir.join(format!("{name}.db"));
            let db_tmp = tmp_name(&db_path);
            self.tmps.push(db_tmp.clone());
            std::fs::write(&db_tmp, db).map_err(io(&db_tmp))?;
            renames.push((db_tmp, db_path));
            renames.push((tmp, path));
            files.push((name.clone(), size, rows));
        }
        // The .db files first: a .mindrecord file that is there has its index.
        renames.sort_by_key(|(_, p)| !p.to_string_lossy().ends_with(".db"));
        for (tmp, path) in &renames {
            std::fs::rename(tmp, path).map_err(io(path))?;
        }
        self.finished = true;
        Ok(files)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // Unfinished: remove what was written (best effort), leaving no partial group.
        self.open = None;
        self.sealed.clear();
        for tmp in &self.tmps {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Convert the source of `config` through its ops into a MindRecord group in the local
/// folder `out`, as `store` says (`mode` jpeg or original, `shard_size`: the bytes of
/// samples a file holds); checking `stop` after every sample as
/// [`convert_to_shards_until`](super::convert_to_shards_until) does. The sampler's
/// settings do not apply: every sample is written, in source order.
pub fn convert_to_mindrecord_until(
    config: &PipelineConfig,
    store: &StoreConfig,
    out: &Path,
    on_start: impl FnOnce(usize),
    on_progress: impl FnMut(usize),
    on_skip: impl FnMut(&Error),
    stop: &AtomicBool,
) -> Result<Option<MindRecordReport>> {
    let refuse = |why: &'static str| Err(Invalid::MindRecordOutput { why }.into());
    if store.mode == Storage::Raw {
        return refuse(
            "store.mode = \"raw\": MindRecord's data column holds an encoded image: use \
             \"jpeg\" or \"original\" (the source's files)",
        );
    }
    if store.slice.is_some_and(|(_, count)| count > 1) {
        return refuse("--slice: a MindRecord group is written whole (no merge step)");
    }
    if crate::store::url::is_remote(out) {
        return refuse(
            "a MindRecord group is written to a local folder (copy it to a store after)",
        );
    }
    let c = Conversion::new(config, store)?;
    if c.spec.label_columns != 1 {
        return refuse(
            "two label columns (CIFAR-100 label = \"both\"): MindRecord's label column holds one",
        );
    }
    let mut group = Group::create(out, c.shard_size)?;
    let source = c.source.clone();
    let Some(skipped) = c.run(
        on_start,
        on_progress,
        on_skip,
        stop,
        |index, d: &Converted| group.append(&d.buf, d.labels[0], &source.sample_name(index)),
    )?
    else {
        return Ok(None); // dropping the group removes its temporary files
    };
    let files = group.finish()?;
    let samples = files.iter().map(|f| f.2).sum();
    Ok(Some(MindRecordReport {
        files,
        samples,
        skipped,
    }))
}
