//! `convert --format webdataset`: a conversion written as WebDataset tars, for the tools
//! that read them (the `webdataset` package, DALI, Ray Data) and for imgfeed itself.
//!
//! The samples go through the conversion's ops as for shards ([`super::shards`]: the same
//! workers, source order, bad samples reported and left out) and are written, in order,
//! as `KEY.jpg` (`store.mode = "jpeg"`; `"original"` keeps the source's file and its
//! format's extension) and `KEY.cls` (the label as ASCII digits), `KEY` the sample's
//! number in the source, zero-padded (`000000012`), so names sort in order. A tar holds
//! at most `shard_size` bytes (`shard-000000.tar`, …; plain ustar headers, mode 0644,
//! mtime 0: the same bytes on every machine). `webdataset.json` is written last (the
//! tars' names, sizes, CRC-32s and sample counts, the classes, the source and ops): a
//! folder holding it is whole. Written under temporary names and renamed at the end
//! (uploaded as finished, the manifest last, to a store), as shards are.

use super::shards::{origin, Conversion, Converted};
use crate::error::{Error, Invalid, Result};
use crate::formats::tar::{padding, ustar_header, END_OF_ARCHIVE};
use crate::shards::format::{tmp_name, FileEntry, Origin, Storage};
use crate::shards::publish::Publish;
use crate::shards::StoreConfig;
use crate::PipelineConfig;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// The manifest's name.
pub const MANIFEST: &str = "webdataset.json";

/// `webdataset.json`: what a WebDataset conversion wrote.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WebDatasetManifest {
    /// `"webdataset"`.
    pub format: String,
    /// Samples written.
    pub samples: u64,
    /// How the images are stored: `jpeg` or `original`.
    pub storage: Storage,
    /// `(class name, label)` of the source, when it names its classes.
    pub classes: Vec<(String, u32)>,
    /// The source converted.
    pub source: Origin,
    /// The conversion's ops.
    pub ops: serde_json::Value,
    /// The tars, in order.
    pub shards: Vec<FileEntry>,
}

/// What a WebDataset conversion wrote.
#[derive(Clone, Debug)]
pub struct WebDatasetReport {
    /// The manifest written.
    pub manifest: WebDatasetManifest,
    /// Samples left out because they failed (each reported through `on_skip`).
    pub skipped: usize,
}

struct OpenTar {
    out: BufWriter<File>,
    tmp: PathBuf,
    name: String,
    size: u64,
    crc: crc32fast::Hasher,
    samples: u64,
}

/// Writes tars into a folder (see the module).
struct TarShards {
    dir: PathBuf,
    shard_size: u64,
    cur: Option<OpenTar>,
    shards: Vec<FileEntry>,
    done: Vec<(PathBuf, PathBuf)>,
    publish: Option<Box<dyn Publish>>,
    count: u64,
    finished: bool,
    /// The member name being written (reused).
    name: String,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A tar member's bytes in all: header, data, padding.
fn member_len(size: u64) -> u64 {
    512 + size + padding(size) as u64
}

impl TarShards {
    fn create(dir: &Path, shard_size: u64, publish: Option<Box<dyn Publish>>) -> Result<Self> {
        super::create_out_dir(dir)?;
        let manifest = dir.join(MANIFEST);
        if publish.is_none() && manifest.exists() {
            return Err(Error::Dataset {
                path: manifest,
                reason: "already exists: this folder holds a converted dataset (remove it or \
                         choose another --out)"
                    .into(),
            });
        }
        Ok(TarShards {
            dir: dir.to_path_buf(),
            shard_size: shard_size.max(1),
            cur: None,
            shards: Vec::new(),
            done: Vec::new(),
            publish,
            count: 0,
            finished: false,
            name: String::new(),
        })
    }

    fn write(s: &mut OpenTar, bytes: &[u8]) -> Result<()> {
        s.out.write_all(bytes).map_err(io(&s.tmp))?;
        s.crc.update(bytes);
        s.size += bytes.len() as u64;
        Ok(())
    }

    fn member(s: &mut OpenTar, name: &str, data: &[u8]) -> Result<()> {
        let header = ustar_header(name, data.len() as u64).ok_or_else(|| {
            Error::Internal(format!(
                "tar member {name} ({} bytes) does not fit",
                data.len()
            ))
        })?;
        TarShards::write(s, &header)?;
        TarShards::write(s, data)?;
        TarShards::write(s, &[0u8; 512][..padding(data.len() as u64)])
    }

    fn close(&mut self) -> Result<()> {
        if let Some(mut s) = self.cur.take() {
            TarShards::write(&mut s, &END_OF_ARCHIVE)?;
            s.out.flush().map_err(io(&s.tmp))?;
            self.shards.push(FileEntry {
                file: s.name.clone(),
                size: s.size,
                crc32: s.crc.finalize(),
                samples: Some(s.samples),
            });
            drop(s.out);
            match self.publish.as_mut() {
                Some(p) => p.file(s.tmp, &s.name)?,
                None => self.done.push((s.tmp, self.dir.join(&s.name))),
            }
        }
        Ok(())
    }

    /// Append sample `key`: its image as `KEY.ext`, its label as `KEY.cls`.
    fn append(&mut self, key: &str, ext: &str, image: &[u8], label: u32) -> Result<()> {
        let mut digits = [0u8; 10];
        let label_text = ascii_digits(label, &mut digits);
        let len = member_len(image.len() as u64) + member_len(label_text.len() as u64);
        let full = self.cur.as_ref().is_some_and(|s| {
            s.samples > 0 && s.size + len + END_OF_ARCHIVE.len() as u64 > self.shard_size
        });
        if full {
            self.close()?;
        }
        if self.cur.is_none() {
            let name = format!("shard-{:06}.tar", self.shards.len());
            let tmp = tmp_name(&self.dir.join(&name));
            let file = File::create(&tmp).map_err(io(&tmp))?;
            self.cur = Some(OpenTar {
                out: BufWriter::with_capacity(1 << 20, file),
                tmp,
                name,
                size: 0,
                crc: crc32fast::Hasher::new(),
                samples: 0,
            });
        }
        let Some(s) = self.cur.as_mut() else {
            return Err(Error::Internal("tar writer has no open tar".into()));
        };
        use std::fmt::Write as _;
        self.name.clear();
        let _ = write!(self.name, "{key}.{ext}");
        TarShards::member(s, &self.name, image)?;
        self.name.clear();
        let _ = write!(self.name, "{key}.cls");
        TarShards::member(s, &self.name, label_text)?;
        s.samples += 1;
        self.count += 1;
        Ok(())
    }

    fn finish(mut self, mut manifest: WebDatasetManifest) -> Result<WebDatasetManifest> {
        self.close()?;
        for (tmp, path) in &self.done {
            std::fs::rename(tmp, path).map_err(io(path))?;
        }
        manifest.samples = self.count;
        manifest.shards = std::mem::take(&mut self.shards);
        let path = self.dir.join(MANIFEST);
        let text = serde_json::to_vec_pretty(&manifest).map_err(|e| Error::Io {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        match self.publish.as_mut() {
            Some(p) => p.finish(MANIFEST, text)?,
            None => {
                let tmp = tmp_name(&path);
                std::fs::write(&tmp, &text).map_err(io(&tmp))?;
                std::fs::rename(&tmp, &path).map_err(io(&path))?;
            }
        }
        self.finished = true;
        Ok(manifest)
    }
}

/// `n`'s ASCII digits, written at the end of `buf`.
fn ascii_digits(mut n: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

impl Drop for TarShards {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // Unfinished: remove what was written (best effort), leaving no partial dataset.
        if let Some(s) = self.cur.take() {
            drop(s.out);
            let _ = std::fs::remove_file(&s.tmp);
        }
        for (tmp, _) in &self.done {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// The extension of an encoded image's member.
fn extension(bytes: &[u8]) -> &'static str {
    use crate::codec::decoder::{sniff, Format};
    match sniff(bytes) {
        Some(Format::Png) => "png",
        Some(Format::Bmp) => "bmp",
        Some(Format::WebP) => "webp",
        _ => "jpg",
    }
}

/// Convert the source of `config` through its ops into WebDataset tars in `out` (a
/// folder, or a prefix in object storage), as `store` says (`mode` jpeg or original,
/// `shard_size`); checking `stop` after every sample as
/// [`convert_to_shards_until`](super::convert_to_shards_until) does. The sampler's
/// settings do not apply: every sample is written, in source order.
pub fn convert_to_webdataset_until(
    config: &PipelineConfig,
    store: &StoreConfig,
    out: &Path,
    on_start: impl FnOnce(usize),
    on_progress: impl FnMut(usize),
    on_skip: impl FnMut(&Error),
    stop: &AtomicBool,
) -> Result<Option<WebDatasetReport>> {
    let refuse = |why: &'static str| Err(Invalid::WebDatasetOutput { why }.into());
    if store.mode == Storage::Raw {
        return refuse(
            "store.mode = \"raw\" has no WebDataset member type: use \"jpeg\" (KEY.jpg) or \
             \"original\" (the source's files)",
        );
    }
    if store.slice.is_some_and(|(_, count)| count > 1) {
        return refuse("--slice: a WebDataset conversion is written whole (no merge step)");
    }
    let c = Conversion::new(config, store)?;
    if c.spec.label_columns != 1 {
        return refuse("two label columns (CIFAR-100 label = \"both\"): KEY.cls holds one");
    }
    let mut writer = if crate::store::url::is_remote(out) {
        let up = crate::shards::upload::Uploader::new(out, &config.source.remote, MANIFEST)?;
        let staging = up.staging().to_path_buf();
        TarShards::create(&staging, c.shard_size, Some(Box::new(up)))?
    } else {
        TarShards::create(out, c.shard_size, None)?
    };
    let width = c.source.len().to_string().len().max(6);
    let mut key = String::new();
    let Some(skipped) = c.run(
        on_start,
        on_progress,
        on_skip,
        stop,
        |index, d: &Converted| {
            use std::fmt::Write as _;
            key.clear();
            let _ = write!(key, "{index:0width$}");
            let ext = match store.mode {
                Storage::Original => extension(&d.buf),
                _ => "jpg",
            };
            writer.append(&key, ext, &d.buf, d.labels[0])
        },
    )?
    else {
        return Ok(None); // dropping the writer removes its temporary files
    };
    let source = c.source.as_ref();
    let manifest = writer.finish(WebDatasetManifest {
        format: "webdataset".into(),
        samples: 0,
        storage: store.mode,
        classes: source.classes().to_vec(),
        source: origin(config, source),
        ops: serde_json::to_value(&config.ops).unwrap_or_default(),
        shards: Vec::new(),
    })?;
    Ok(Some(WebDatasetReport { manifest, skipped }))
}
