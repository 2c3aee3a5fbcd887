//! The dataset doctor behind `imgfeed validate`: read and decode every sample of a source
//! once, in parallel, and summarise what was found — bad samples with their error kinds,
//! samples per class, image sizes, formats, colour models, and the entries the source
//! ignored while listing.
//!
//! It uses the source and the `decode` settings of a pipeline but not the batching engine:
//! images of any size are fine. Every sample of the source is checked, whatever the
//! pipeline's sampling (`num_samples`, shards) would read. Workers claim samples from an
//! atomic counter (the ordered executor, `engine::ordered`) and the calling thread tallies
//! what each found; memory is one decode buffer per worker plus 8 bytes per sample for the
//! size statistics, 24 for the duplicate search ([`duplicates`]: the same bytes or the
//! same decoded pixels, within a class, across classes, and between two datasets).

pub mod duplicates;

use crate::codec::decoder::Decoder;
use crate::codec::exif::orientation;
use crate::codec::inspect::{format_name, inspect, ColorModel};
use crate::engine::ordered::{Ended, Ordered};
use crate::error::{Error, SampleErrorKind};
use crate::imgproc::fingerprint::fingerprint;
use crate::ops::decode::Decode;
use crate::source::{Ignored, Raw, Source};
use duplicates::{pixels_digest, Digest, Group};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// How to validate.
#[derive(Clone, Debug, Default)]
pub struct ValidateOptions {
    /// Decoder settings (the pipeline's `decode` op, or the defaults).
    pub decode: Decode,
    /// Worker threads (at least 1).
    pub workers: usize,
}

/// Colour and depth counts over the samples that decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ColorCounts {
    /// Greyscale files.
    pub gray: usize,
    /// CMYK (or YCCK) JPEGs.
    pub cmyk: usize,
    /// Files with alpha (or PNG `tRNS` transparency).
    pub alpha: usize,
    /// Palette (indexed) files.
    pub palette: usize,
    /// 16-bit-per-channel files.
    pub sixteen_bit: usize,
    /// Progressive JPEGs.
    pub progressive: usize,
    /// JPEGs and PNGs whose EXIF orientation is not 1: stored turned or mirrored, shown
    /// upright only with `decode`'s `exif_transpose = true`.
    pub exif_oriented: usize,
}

/// `min`, `median`, `max` of one dimension.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spread {
    /// Smallest.
    pub min: u32,
    /// Median (the lower one for an even count).
    pub median: u32,
    /// Largest.
    pub max: u32,
}

/// Upper bounds (exclusive) of the shorter-side buckets; the last bucket is open.
pub const SIDE_BUCKETS: [u32; 7] = [32, 64, 128, 256, 512, 1024, 2048];

/// Upper bounds (exclusive) of the aspect-ratio (width / height) buckets; the last bucket is
/// open.
pub const ASPECT_BUCKETS: [f64; 6] = [0.5, 0.75, 0.9, 1.12, 1.34, 2.0];

/// What `validate` found.
#[derive(Debug, Default)]
pub struct ValidateReport {
    /// The source, in one line.
    pub source: String,
    /// Samples in the source.
    pub samples: usize,
    /// Samples checked (fewer than `samples` when stopped).
    pub checked: usize,
    /// Stopped before the end (the stop flag was raised).
    pub interrupted: bool,
    /// Every bad sample ([`Error::Sample`]), in sample order.
    pub bad: Vec<Error>,
    /// `(label, class name if known, samples read, of which bad)`, by label.
    pub classes: Vec<(u32, Option<String>, usize, usize)>,
    /// Width of the decoded images.
    pub width: Spread,
    /// Height of the decoded images.
    pub height: Spread,
    /// Decoded images per shorter-side bucket (see [`SIDE_BUCKETS`]; one more bucket for
    /// the rest).
    pub shorter_side: [usize; SIDE_BUCKETS.len() + 1],
    /// Decoded images per aspect-ratio bucket (see [`ASPECT_BUCKETS`]; one more bucket for
    /// the rest).
    pub aspect: [usize; ASPECT_BUCKETS.len() + 1],
    /// `(width, height)` of each decoded image, in the order they were checked.
    pub sizes: Vec<(u32, u32)>,
    /// What each readable sample left for the duplicate search, by index.
    pub digests: Vec<Digest>,
    /// The samples that are the same picture ([`duplicates::groups`]).
    pub duplicates: Vec<Group>,
    /// Samples per format (`jpeg`, `png`, `bmp`, `webp`, `cifar_record`), decoded or not.
    pub formats: BTreeMap<&'static str, usize>,
    /// Colour models and depths of the samples whose header could be read.
    pub colors: ColorCounts,
    /// What the source left out while listing, with why.
    pub ignored: Vec<(PathBuf, Ignored)>,
    /// Wall time.
    pub seconds: f64,
}

impl ValidateReport {
    /// Bad samples per kind, most frequent first (ties by kind).
    pub fn bad_by_kind(&self) -> Vec<(SampleErrorKind, usize)> {
        let mut m: BTreeMap<SampleErrorKind, usize> = BTreeMap::new();
        for e in &self.bad {
            *m.entry(e.sample_kind().unwrap_or(SampleErrorKind::Other))
                .or_default() += 1;
        }
        let mut v: Vec<_> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// Ignored entries per reason.
    pub fn ignored_by_reason(&self) -> BTreeMap<Ignored, usize> {
        let mut m = BTreeMap::new();
        for (_, r) in &self.ignored {
            *m.entry(*r).or_default() += 1;
        }
        m
    }
}

#[derive(Default)]
struct Tally {
    bad: Vec<(usize, Error)>,
    labels: BTreeMap<u32, (usize, usize)>,
    sizes: Vec<(u32, u32)>,
    formats: BTreeMap<&'static str, usize>,
    colors: ColorCounts,
    digests: Vec<Digest>,
}

/// What checking one sample found.
#[derive(Default)]
struct Seen {
    label: Option<u32>,
    format: Option<&'static str>,
    size: Option<(u32, u32)>,
    colors: ColorCounts,
    bad: Option<Error>,
    /// Fingerprints of the bytes and of the decoded pixels.
    digest: Option<(u64, Option<u64>)>,
}

impl Tally {
    fn add(&mut self, index: usize, s: Seen) {
        if let Some(l) = s.label {
            let e = self.labels.entry(l).or_default();
            e.0 += 1;
            e.1 += usize::from(s.bad.is_some());
        }
        if let Some(f) = s.format {
            *self.formats.entry(f).or_default() += 1;
        }
        self.sizes.extend(s.size);
        let (c, d) = (&mut self.colors, s.colors);
        c.gray += d.gray;
        c.cmyk += d.cmyk;
        c.alpha += d.alpha;
        c.palette += d.palette;
        c.sixteen_bit += d.sixteen_bit;
        c.progressive += d.progressive;
        c.exif_oriented += d.exif_oriented;
        if let (Some((bytes, pixels)), Some(label)) = (s.digest, s.label) {
            self.digests.push(Digest {
                index,
                label,
                bytes,
                pixels,
            });
        }
        if let Some(e) = s.bad {
            self.bad.push((index, e));
        }
    }
}

/// A worker's decoder and buffers.
struct Checker {
    decoder: Decoder,
    scratch: Vec<u8>,
    out: Vec<u8>,
}

impl Checker {
    fn new(decode: &Decode) -> Checker {
        Checker {
            decoder: Decoder::new(decode),
            scratch: Vec::new(),
            out: Vec::new(),
        }
    }

    /// Check sample `index` of `source`.
    fn check(&mut self, source: &dyn Source, index: usize) -> Seen {
        let sample = match source.read(index, &mut self.scratch) {
            Ok(s) => s,
            Err(e) => {
                return Seen {
                    bad: Some(e),
                    ..Seen::default()
                }
            }
        };
        let mut seen = Seen {
            label: Some(sample.labels[0]),
            ..Seen::default()
        };
        match sample.raw {
            Raw::Planar {
                data,
                height,
                width,
            } => {
                seen.format = Some("cifar_record");
                seen.size = Some((width as u32, height as u32));
                // the pixels as HWC, so that a record and a file of the same picture match
                self.out.clear();
                let n = height * width;
                self.out
                    .extend((0..n * 3).map(|i| data[(i % 3) * n + i / 3]));
                seen.digest = Some((
                    fingerprint(data),
                    Some(pixels_digest(height, width, &self.out)),
                ));
            }
            Raw::Pixels {
                data,
                height,
                width,
            } => {
                seen.format = Some("raw_pixels");
                seen.size = Some((width as u32, height as u32));
                let pixels = pixels_digest(height, width, data);
                seen.digest = Some((pixels, Some(pixels)));
            }
            Raw::Encoded(bytes) => {
                if let Ok(i) = inspect(bytes) {
                    seen.format = Some(format_name(i.format));
                    let c = &mut seen.colors;
                    c.gray = usize::from(i.color == ColorModel::Gray);
                    c.cmyk = usize::from(i.color == ColorModel::Cmyk);
                    c.palette = usize::from(i.color == ColorModel::Palette);
                    c.alpha = usize::from(i.alpha);
                    c.sixteen_bit =
                        usize::from(i.bits == 16 && i.format != crate::codec::decoder::Format::Bmp);
                    c.progressive = usize::from(i.progressive);
                    c.exif_oriented = usize::from(!orientation(bytes).is_normal());
                }
                match self.decoder.decode(bytes, &mut self.out) {
                    Ok((h, w)) => {
                        seen.size = Some((w as u32, h as u32));
                        let px = &self.out[..(h * w * 3).min(self.out.len())];
                        seen.digest = Some((fingerprint(bytes), Some(pixels_digest(h, w, px))));
                    }
                    Err(f) => {
                        seen.digest = Some((fingerprint(bytes), None));
                        seen.bad = Some(Error::at(index, source.sample_name(index), "decode", f))
                    }
                }
            }
        }
        seen
    }
}

fn spread(mut v: Vec<u32>) -> Spread {
    v.sort_unstable();
    match (v.first(), v.last()) {
        (Some(&min), Some(&max)) => Spread {
            min,
            median: v.get((v.len() - 1) / 2).copied().unwrap_or(min),
            max,
        },
        _ => Spread::default(),
    }
}

/// Check every sample of `source`. `progress(checked)` is called on the calling thread
/// about ten times a second; raising `stop` ends the check early (`interrupted`).
pub fn validate(
    source: &dyn Source,
    opts: &ValidateOptions,
    stop: &AtomicBool,
    mut progress: impl FnMut(usize),
) -> ValidateReport {
    let t0 = Instant::now();
    let n = source.len();
    let workers = opts.workers.clamp(1, 1024);
    let mut total = Tally::default();
    let mut checked = 0;
    let mut shown = Instant::now();
    let run = Ordered {
        workers,
        window: workers * 16,
        stop,
    };
    let ended: Result<(), Ended<()>> = run.run(
        n,
        || Checker::new(&opts.decode),
        || (),
        |c, i, ()| c.check(source, i),
        |i| Seen {
            bad: Some(Error::Sample {
                index: i,
                file: source.sample_name(i),
                stage: "decode",
                kind: SampleErrorKind::Panic,
                reason: "decoding panicked on this sample (a bug: please report it)".into(),
            }),
            ..Seen::default()
        },
        |i, seen| {
            total.add(i, seen);
            checked += 1;
            if shown.elapsed() >= Duration::from_millis(100) {
                progress(checked);
                shown = Instant::now();
            }
            Ok(())
        },
    );
    progress(checked);
    let interrupted = ended.is_err() || checked < n;
    total.bad.sort_by_key(|(i, _)| *i);
    let names: BTreeMap<u32, &str> = source
        .classes()
        .iter()
        .map(|(name, l)| (*l, name.as_str()))
        .collect();
    let mut shorter_side = [0usize; SIDE_BUCKETS.len() + 1];
    let mut aspect = [0usize; ASPECT_BUCKETS.len() + 1];
    for &(w, h) in &total.sizes {
        let side = w.min(h);
        let b = SIDE_BUCKETS.partition_point(|&ub| ub <= side);
        if let Some(slot) = shorter_side.get_mut(b) {
            *slot += 1;
        }
        let r = f64::from(w) / f64::from(h.max(1));
        let b = ASPECT_BUCKETS.partition_point(|&ub| ub <= r);
        if let Some(slot) = aspect.get_mut(b) {
            *slot += 1;
        }
    }
    total.digests.sort_unstable_by_key(|d| d.index);
    let duplicates = duplicates::groups(&total.digests);
    ValidateReport {
        source: source.describe(),
        samples: n,
        checked,
        interrupted,
        bad: total.bad.into_iter().map(|(_, e)| e).collect(),
        classes: {
            // A named class without samples (an empty class folder still takes its label)
            // is listed too, with 0.
            let mut counts = total.labels;
            if !interrupted {
                for l in names.keys() {
                    counts.entry(*l).or_default();
                }
            }
            counts
                .iter()
                .map(|(l, (n, b))| (*l, names.get(l).map(|s| s.to_string()), *n, *b))
                .collect()
        },
        width: spread(total.sizes.iter().map(|s| s.0).collect()),
        height: spread(total.sizes.iter().map(|s| s.1).collect()),
        shorter_side,
        aspect,
        sizes: total.sizes,
        digests: total.digests,
        duplicates,
        formats: total.formats,
        colors: total.colors,
        ignored: source.ignored().to_vec(),
        seconds: t0.elapsed().as_secs_f64(),
    }
}
