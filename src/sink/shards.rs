//! `convert --format shards`: run a conversion pipeline's ops on every sample and store
//! the result in shard files ([`crate::shards`]).
//!
//! Samples vary in size after a conversion's ops (`resize` to a shorter side), so they are
//! not batched: `workers` threads each run the compiled ops on one sample at a time, in the
//! engine's `Worker`, and the calling thread appends the results to the shards in source
//! order (a bounded set of reused buffers carries them over, so memory stays flat). The
//! output is the same for any worker count.
//!
//! * `jpeg`: the ops' output (RGB u8 HWC) re-encoded at `store.quality`;
//! * `raw`: the ops' output as `height × width × 3` bytes;
//! * `original`: the source's bytes untouched (the pipeline must have no ops).
//!
//! A split conversion converts source samples `[i·N/K, (i+1)·N/K)` for `--shard-id i` of
//! `--num-shards K` — contiguous, nothing repeated or dropped, unlike the padded sharding of
//! training — and [`merge_index`](crate::shards::merge_index) joins the slices. Shuffle
//! does not apply (samples are stored in source order; reading shuffles).
//!
//! A sample that fails (unreadable, undecodable) is reported through `on_skip` and left
//! out; any other error stops the conversion and leaves no dataset behind.

use crate::engine::ordered::{Ended, Ordered};
use crate::engine::program::Program;
use crate::engine::worker::Worker;
use crate::error::{Error, Fault, Result, SampleErrorKind};
use crate::ops::image::bug;
use crate::rng::sample_rng;
use crate::shards::format::{Manifest, Origin, Slice, Storage};
use crate::shards::writer::{Meta, Names, ShardWriter};
use crate::shards::{slice_range, StoreConfig};
use crate::source::{Raw, Source};
use crate::spec::{DType, Layout, Spec};
use crate::PipelineConfig;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What a conversion wrote.
#[derive(Clone, Debug)]
pub struct ShardsReport {
    /// The manifest written (`manifest.json`, or the slice's).
    pub manifest: Manifest,
    /// Its file name in the output folder.
    pub manifest_name: String,
    /// Samples left out because they failed (each reported through `on_skip`).
    pub skipped: usize,
}

/// Check the pipeline for a conversion; returns the source, the compiled ops and the
/// output spec.
fn plan(config: &PipelineConfig, store: &StoreConfig) -> Result<(Arc<dyn Source>, Program, Spec)> {
    use crate::error::Invalid;
    store.check()?;
    if config.source.sampling.num_samples.is_some() {
        return Err(Invalid::NumSamplesInConversion.into());
    }
    if !config.batch_ops.is_empty() {
        return Err(Invalid::BatchOpsInConversion.into());
    }
    let source = config.source.open()?;
    let stages = config.spec_chain(&source.spec())?;
    let spec = stages
        .last()
        .map_or_else(|| source.spec(), |(_, s)| s.clone());
    match store.mode {
        Storage::Original => {
            if !config.ops.is_empty() || !source.spec().encoded {
                return Err(Invalid::OriginalNeedsFiles {
                    ops: config.ops.len(),
                    yields: source.spec(),
                }
                .into());
            }
        }
        Storage::Jpeg | Storage::Raw => {
            let pixels = !spec.encoded
                && spec.dtype == DType::U8
                && spec.layout == Layout::Hwc
                && spec.channels == 3;
            if !pixels {
                return Err(Invalid::StoreNeedsRgbU8 {
                    mode: store.mode.name(),
                    spec,
                }
                .into());
            }
        }
    }
    let program = config.compile(source.as_ref(), &spec)?;
    Ok((source, program, spec))
}

/// Encode RGB u8 HWC pixels as a baseline JPEG at `quality` into `out`, with 4:2:0 chroma
/// subsampling (what Pillow and libjpeg write by default; 4:4:4 files decode about half as
/// fast). jpeg-encoder's scalar code: the same bytes on every machine.
fn encode_jpeg(
    pixels: &[u8],
    h: usize,
    w: usize,
    quality: u8,
    out: &mut Vec<u8>,
) -> std::result::Result<(), Fault> {
    let too_large = || {
        let why = format!("{h}x{w} is too large for JPEG (65535 at most)");
        Fault::new(SampleErrorKind::Other, why)
    };
    let (hh, ww) = (
        u16::try_from(h).map_err(|_| too_large())?,
        u16::try_from(w).map_err(|_| too_large())?,
    );
    out.clear();
    let mut enc = jpeg_encoder::Encoder::new(&mut *out, quality);
    enc.set_sampling_factor(jpeg_encoder::SamplingFactor::R_4_2_0);
    enc.encode(pixels, ww, hh, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| Fault::new(SampleErrorKind::Other, format!("JPEG encoding failed: {e}")))
}

struct Ctx<'a> {
    source: &'a dyn Source,
    program: &'a Program,
    store: &'a StoreConfig,
    seed: u64,
}

impl Ctx<'_> {
    /// Convert source sample `index` into `buf`.
    fn one(
        &self,
        index: usize,
        worker: &mut Worker,
        scratch: &mut Vec<u8>,
        pixels: &mut Vec<u8>,
        buf: &mut Vec<u8>,
    ) -> Result<((usize, usize), [u32; 2])> {
        let sample = self.source.read(index, scratch)?;
        let fail = |stage: &'static str, fault: Fault| {
            Error::at(index, self.source.sample_name(index), stage, fault)
        };
        let mut rng = sample_rng(self.seed, 0, index);
        let size = match self.store.mode {
            Storage::Original => {
                let Raw::Encoded(bytes) = sample.raw else {
                    // `plan` accepts store.mode = "original" for encoded sources only.
                    return Err(fail("read", bug("the source holds no encoded file")));
                };
                buf.clear();
                buf.extend_from_slice(bytes);
                (0, 0)
            }
            Storage::Raw => worker
                .run_image(self.program, sample.raw, &mut rng, buf)
                .map_err(|(stage, reason)| fail(stage, reason))?,
            Storage::Jpeg => {
                let (h, w) = worker
                    .run_image(self.program, sample.raw, &mut rng, pixels)
                    .map_err(|(stage, reason)| fail(stage, reason))?;
                encode_jpeg(pixels, h, w, self.store.quality, buf)
                    .map_err(|e| fail("encode", e))?;
                (h, w)
            }
        };
        Ok((size, sample.labels))
    }
}

/// What a conversion records of its source.
pub(crate) fn origin(config: &PipelineConfig, source: &dyn Source) -> Origin {
    let name = |v: serde_json::Value| v.as_str().map(str::to_string);
    let s = &config.source;
    let listing = s.dataset.listing();
    let (usage, label) = (listing.usage, listing.label);
    Origin {
        kind: s.kind().name().to_string(),
        root: s.root().to_string_lossy().into_owned(),
        usage: usage.and_then(|u| serde_json::to_value(u).ok().and_then(name)),
        label: label.and_then(|l| serde_json::to_value(l).ok().and_then(name)),
        samples: source.len() as u64,
    }
}

/// Convert the source of `config` through its ops into shards in `out`, as `store` says;
/// `store.slice` picks a slice (default: the whole dataset). The sampler's settings
/// (shuffle, `num_shards`/`shard_id`) do not apply: a shards dataset holds every sample in
/// source order, and training samples and shards it as it would the original.
/// `on_start(n)`: n samples to convert; `on_progress(n)`: n more done; `on_skip`: a
/// sample that failed and was left out.
pub fn convert_to_shards(
    config: &PipelineConfig,
    store: &StoreConfig,
    out: &Path,
    on_start: impl FnOnce(usize),
    on_progress: impl FnMut(usize),
    on_skip: impl FnMut(&Error),
) -> Result<ShardsReport> {
    let never = AtomicBool::new(false);
    convert_to_shards_until(config, store, out, on_start, on_progress, on_skip, &never)?
        .ok_or_else(|| Error::Internal("conversion stopped without a stop request".into()))
}

/// [`convert_to_shards`], checking `stop` after every sample: when it is raised, the
/// workers finish the sample they are on, every temporary file is removed, nothing is
/// renamed into place, and the result is `None`.
pub fn convert_to_shards_until(
    config: &PipelineConfig,
    store: &StoreConfig,
    out: &Path,
    on_start: impl FnOnce(usize),
    on_progress: impl FnMut(usize),
    on_skip: impl FnMut(&Error),
    stop: &AtomicBool,
) -> Result<Option<ShardsReport>> {
    let c = Conversion::new(config, store)?;
    let names = Names::new((c.count > 1).then_some((c.id, c.count)));
    let manifest_name = names.manifest();
    let mut writer = if crate::store::url::is_remote(out) {
        // Object storage: files are written in a staging folder and uploaded as they are
        // finished, the manifest last.
        let up = crate::shards::upload::Uploader::new(out, &config.source.remote, &manifest_name)?;
        let staging = up.staging().to_path_buf();
        ShardWriter::create_with(
            &staging,
            names,
            store.mode,
            c.shard_size,
            Some(Box::new(up)),
        )?
    } else {
        ShardWriter::create(out, names, store.mode, c.shard_size)?
    };
    let source = c.source.as_ref();
    let Some(skipped) = c.run(on_start, on_progress, on_skip, stop, |index, d| {
        writer.append(&d.buf, d.size, d.labels, &source.sample_name(index))
    })?
    else {
        return Ok(None); // dropping the writer removes its temporary files
    };
    let meta = Meta {
        quality: (store.mode == Storage::Jpeg).then_some(store.quality),
        label_columns: c.spec.label_columns,
        classes: source.classes().to_vec(),
        source: origin(config, source),
        ops: serde_json::to_value(&config.ops).unwrap_or_default(),
        slice: (c.count > 1).then_some(Slice {
            id: c.id,
            count: c.count,
            first: c.first as u64,
            end: c.end as u64,
        }),
    };
    let manifest = writer.finish(meta)?;
    Ok(Some(ShardsReport {
        manifest,
        manifest_name,
        skipped,
    }))
}

/// A conversion, planned and checked: the source, its compiled ops, what they yield, and
/// the slice of the source to convert. Any container writer takes its samples from
/// [`Conversion::run`].
pub(crate) struct Conversion<'a> {
    /// The source.
    pub(crate) source: Arc<dyn Source>,
    program: Program,
    /// What the ops yield.
    pub(crate) spec: Spec,
    /// The store settings.
    pub(crate) store: &'a StoreConfig,
    /// Bytes a shard file may hold.
    pub(crate) shard_size: u64,
    /// The slice: `id` of `count`, source samples `first..end`.
    pub(crate) id: usize,
    /// Slices in all.
    pub(crate) count: usize,
    /// First source sample converted.
    pub(crate) first: usize,
    /// One past the last.
    pub(crate) end: usize,
    seed: u64,
    workers: usize,
}

/// One converted sample, as a container writer takes it.
pub(crate) struct Converted {
    /// The stored bytes (JPEG, raw pixels, or the source's file).
    pub(crate) buf: Vec<u8>,
    /// Height and width (0 × 0 when not decoded).
    pub(crate) size: (usize, usize),
    /// The labels.
    pub(crate) labels: [u32; 2],
}

impl<'a> Conversion<'a> {
    /// Plan the conversion of `config`'s source as `store` says.
    pub(crate) fn new(config: &PipelineConfig, store: &'a StoreConfig) -> Result<Conversion<'a>> {
        let (source, program, spec) = plan(config, store)?;
        let shard_size = store.check()?;
        let (id, count) = store.slice.unwrap_or((0, 1));
        if count == 0 || id >= count {
            return Err(crate::error::Invalid::Slice { id, count }.into());
        }
        let (first, end) = slice_range(source.len(), id, count);
        Ok(Conversion {
            source,
            program,
            spec,
            store,
            shard_size,
            id,
            count,
            first,
            end,
            seed: config.source.sampling.seed,
            workers: config.engine.workers.clamp(1, 1024),
        })
    }

    /// Convert every sample of the slice on the workers, handing each to `append` in
    /// source order (with its source index); a failed sample goes to `on_skip` instead.
    /// Returns the samples skipped, or `None` when `stop` was raised.
    pub(crate) fn run(
        &self,
        on_start: impl FnOnce(usize),
        mut on_progress: impl FnMut(usize),
        mut on_skip: impl FnMut(&Error),
        stop: &AtomicBool,
        mut append: impl FnMut(usize, &Converted) -> Result<()>,
    ) -> Result<Option<usize>> {
        let ctx = Ctx {
            source: self.source.as_ref(),
            program: &self.program,
            store: self.store,
            seed: self.seed,
        };
        let first = self.first;
        let total = self.end - first;
        on_start(total);
        let mut skipped = 0usize;
        let run = Ordered {
            workers: self.workers,
            window: self.workers * 4,
            stop,
        };
        let ended = run.run(
            total,
            || (Worker::new(false), Vec::new(), Vec::new()),
            Vec::new,
            |(worker, scratch, pixels), p, mut buf| {
                let index = first + p;
                let r = ctx.one(index, worker, scratch, pixels, &mut buf);
                r.map(|(size, labels)| Converted { buf, size, labels })
            },
            |p| {
                let index = first + p;
                Err(Error::panicked(index, ctx.source.sample_name(index)))
            },
            |p, r| {
                let buf = match r {
                    Ok(d) => {
                        append(first + p, &d)?;
                        d.buf
                    }
                    Err(e @ Error::Sample { .. }) => {
                        skipped += 1;
                        on_skip(&e);
                        Vec::new()
                    }
                    Err(e) => return Err(e),
                };
                on_progress(1);
                Ok(buf)
            },
        );
        match ended {
            Ok(()) => Ok(Some(skipped)),
            Err(Ended::Stopped) => Ok(None),
            Err(Ended::Failed(e)) => Err(e),
        }
    }
}
