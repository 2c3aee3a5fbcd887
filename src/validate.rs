//! The dataset doctor behind `imgfeed validate`: read and decode every sample of a source
//! once, in parallel, and summarise what was found — bad samples with their error kinds,
//! samples per class, image sizes, formats, colour models, and the entries the source
//! ignored while listing.
//!
//! It uses the source and the `decode` settings of a pipeline but not the batching engine:
//! images of any size are fine. Every sample of the source is checked, whatever the
//! pipeline's sampling (`num_samples`, shards) would read. Workers claim samples from an
//! atomic counter and keep their own tallies (merged at the end); memory is one decode
//! buffer per worker plus 8 bytes per sample for the size statistics.

use crate::error::{Error, SampleErrorKind};
use crate::inspect::{format_name, inspect, ColorModel};
use crate::ops::decode::{Decode, Decoder};
use crate::source::{Ignored, Raw, Source};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
}

impl Tally {
    fn merge(&mut self, o: Tally) {
        self.bad.extend(o.bad);
        for (l, (n, b)) in o.labels {
            let e = self.labels.entry(l).or_default();
            e.0 += n;
            e.1 += b;
        }
        self.sizes.extend(o.sizes);
        for (f, n) in o.formats {
            *self.formats.entry(f).or_default() += n;
        }
        let (c, d) = (&mut self.colors, o.colors);
        c.gray += d.gray;
        c.cmyk += d.cmyk;
        c.alpha += d.alpha;
        c.palette += d.palette;
        c.sixteen_bit += d.sixteen_bit;
        c.progressive += d.progressive;
    }
}

struct Checker<'a> {
    source: &'a dyn Source,
    decoder: Decoder,
    scratch: Vec<u8>,
    out: Vec<u8>,
}

impl Checker<'_> {
    fn sample_error(&self, index: usize, kind: SampleErrorKind, reason: String) -> Error {
        Error::Sample {
            index,
            file: self.source.sample_name(index),
            stage: "decode",
            kind,
            reason,
        }
    }

    /// Check sample `index` into `t`.
    fn check(&mut self, index: usize, t: &mut Tally) {
        let source = self.source;
        let sample = match source.read(index, &mut self.scratch) {
            Ok(s) => s,
            Err(e) => {
                t.bad.push((index, e));
                return;
            }
        };
        let label = t.labels.entry(sample.labels[0]).or_default();
        label.0 += 1;
        match sample.raw {
            Raw::Planar { height, width, .. } => {
                *t.formats.entry("cifar_record").or_default() += 1;
                t.sizes.push((width as u32, height as u32));
            }
            Raw::Pixels { height, width, .. } => {
                *t.formats.entry("raw_pixels").or_default() += 1;
                t.sizes.push((width as u32, height as u32));
            }
            Raw::Encoded(bytes) => {
                let info = inspect(bytes).ok();
                if let Some(i) = &info {
                    *t.formats.entry(format_name(i.format)).or_default() += 1;
                    let c = &mut t.colors;
                    c.gray += usize::from(i.color == ColorModel::Gray);
                    c.cmyk += usize::from(i.color == ColorModel::Cmyk);
                    c.palette += usize::from(i.color == ColorModel::Palette);
                    c.alpha += usize::from(i.alpha);
                    c.sixteen_bit +=
                        usize::from(i.bits == 16 && i.format != crate::ops::decode::Format::Bmp);
                    c.progressive += usize::from(i.progressive);
                }
                match self.decoder.decode(bytes, &mut self.out) {
                    Ok((h, w)) => t.sizes.push((w as u32, h as u32)),
                    Err(f) => {
                        label.1 += 1;
                        let e = Error::at(index, source.sample_name(index), "decode", f);
                        t.bad.push((index, e));
                    }
                }
            }
        }
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
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let workers = opts.workers.clamp(1, 1024);
    let mut total = Tally::default();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut c = Checker {
                        source,
                        decoder: Decoder::new(&opts.decode),
                        scratch: Vec::new(),
                        out: Vec::new(),
                    };
                    let mut t = Tally::default();
                    while !stop.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        // A panic in a decoder fails this sample, not the check.
                        let r = catch_unwind(AssertUnwindSafe(|| c.check(i, &mut t)));
                        if r.is_err() {
                            let e = c.sample_error(
                                i,
                                SampleErrorKind::Panic,
                                "decoding panicked on this sample (a bug: please report it)".into(),
                            );
                            t.bad.push((i, e));
                            c.decoder = Decoder::new(&opts.decode);
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    t
                })
            })
            .collect();
        while !handles.iter().all(|h| h.is_finished()) {
            progress(done.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(100));
        }
        for h in handles {
            if let Ok(t) = h.join() {
                total.merge(t);
            }
        }
    });
    let checked = done.load(Ordering::Relaxed);
    progress(checked);
    total.bad.sort_by_key(|(i, _)| *i);
    let names: BTreeMap<u32, &str> = source
        .classes()
        .iter()
        .map(|(name, l)| (*l, name.as_str()))
        .collect();
    let mut shorter_side = [0usize; SIDE_BUCKETS.len() + 1];
    for &(w, h) in &total.sizes {
        let side = w.min(h);
        let b = SIDE_BUCKETS.partition_point(|&ub| ub <= side);
        if let Some(slot) = shorter_side.get_mut(b) {
            *slot += 1;
        }
    }
    ValidateReport {
        source: source.describe(),
        samples: n,
        checked,
        interrupted: checked < n,
        bad: total.bad.into_iter().map(|(_, e)| e).collect(),
        classes: total
            .labels
            .iter()
            .map(|(l, (n, b))| (*l, names.get(l).map(|s| s.to_string()), *n, *b))
            .collect(),
        width: spread(total.sizes.iter().map(|s| s.0).collect()),
        height: spread(total.sizes.iter().map(|s| s.1).collect()),
        shorter_side,
        formats: total.formats,
        colors: total.colors,
        ignored: source.ignored().to_vec(),
        seconds: t0.elapsed().as_secs_f64(),
    }
}
