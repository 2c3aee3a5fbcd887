//! What a pipeline makes, for people to look at: the first samples of an epoch exactly as
//! the pipeline hands them to the trainer, turned back into pictures ([`unview`]: the ops'
//! own undo steps), captioned with their class and file, laid out on a contact sheet
//! ([`sheet`], a PNG) or a page ([`html`], the tiles inline with what the pipeline did on
//! hover). `imgfeed preview` and Python's `imgfeed.preview` are this code.
//!
//! Deterministic: the samples come from the epoch's plan (any worker count gives the same),
//! the pictures from integer arithmetic, the PNG from fixed encoder settings.

pub mod font;
pub mod html;
pub mod picture;
pub mod sheet;
pub mod unview;

pub use picture::Picture;
pub use unview::Unview;

use crate::codec::decoder::Decoder;
use crate::error::Result;
use crate::ops::Decode;
use crate::source::Raw;
use crate::spec::DType;
use crate::{Batch, Epoch, Pipeline};
use std::collections::BTreeMap;

/// Soft labels: the most class weights a tile lists.
const MAX_WEIGHTS: usize = 4;

/// What to preview.
#[derive(Clone, Debug)]
pub struct PreviewOptions {
    /// Samples to show (the epoch's first ones from where it starts).
    pub count: usize,
    /// Put each sample's decoded original beside it.
    pub with_source: bool,
    /// The longer side of a tile in pixels (`None`: the samples' own size).
    pub tile: Option<usize>,
}

impl Default for PreviewOptions {
    fn default() -> PreviewOptions {
        PreviewOptions {
            count: 16,
            with_source: false,
            tile: None,
        }
    }
}

/// One sample as shown.
#[derive(Clone, Debug)]
pub struct Tile {
    /// Its index in the source.
    pub index: u64,
    /// The batch it came in, and its place there.
    pub batch: usize,
    /// Its place in the batch.
    pub slot: usize,
    /// Its file (or record) name, as the source names it.
    pub file: String,
    /// Its class in words: the class name (or `label N`), or for soft labels (one-hot,
    /// MixUp, CutMix) the weights, largest first.
    pub label: String,
    /// Soft labels: `(class, weight)` of the weights above the floor label smoothing leaves
    /// every class at, largest first, at most four (empty for hard labels).
    pub weights: Vec<(String, f32)>,
    /// The sample as the trainer gets it, undone into a picture.
    pub picture: Picture,
    /// The decoded original (`with_source`).
    pub source: Option<Picture>,
}

/// The samples shown and what was done to show them.
#[derive(Clone, Debug)]
pub struct Preview {
    /// The samples, in epoch order.
    pub tiles: Vec<Tile>,
    /// The pipeline's stages, as `imgfeed check` names them (for the page).
    pub stages: Vec<String>,
    /// What was undone and what could not be, in words.
    pub notes: Vec<String>,
    /// The longer side of a tile (the option, or the largest sample's).
    pub tile: usize,
    /// The bad samples met on the way (skipped or replaced, as `on_error` says).
    pub bad: Vec<String>,
}

/// The first `opts.count` samples of `epoch` (an epoch of `p`, started where the caller
/// wants), as pictures.
pub fn preview(p: &Pipeline, mut epoch: Epoch, opts: &PreviewOptions) -> Result<Preview> {
    let unview = Unview::new(&p.config().ops, p.stages());
    let names: BTreeMap<u32, &str> = p
        .source()
        .classes()
        .iter()
        .map(|(n, l)| (*l, n.as_str()))
        .collect();
    let class = |l: i64| {
        u32::try_from(l)
            .ok()
            .and_then(|l| names.get(&l))
            .map_or(format!("label {l}"), |n| n.to_string())
    };
    // the labels the per-sample ops leave (the stages list the batch ops after them)
    let ops = p.config().ops.len();
    let per_sample_cols = p.stages().get(ops).map_or(1, |s| s.1.label_columns);
    let soft = p.output_spec().label_columns != per_sample_cols;
    let mut tiles = Vec::new();
    let mut values = Vec::new();
    let mut decoder = opts.with_source.then(|| Decoder::new(&Decode::default()));
    let mut scratch = Vec::new();
    let mut bad = Vec::new();
    while tiles.len() < opts.count {
        let Some(batch) = epoch.next() else { break };
        let batch = batch?;
        bad.extend(batch.skipped().iter().map(|e| e.to_string()));
        let [_, d0, d1, d2] = batch.shape();
        let per = d0 * d1 * d2;
        for k in 0..batch.len() {
            if tiles.len() == opts.count {
                break;
            }
            sample_values(&batch, k, per, &mut values);
            let picture = unview.picture(&mut values, [d0, d1, d2], batch.layout());
            let index = batch.indices()[k];
            let cols = batch.label_columns();
            let labels = batch.labels();
            let row: Vec<f64> = (0..cols)
                .map(|c| labels.value(k * cols + c).unwrap_or(0.0))
                .collect();
            let (label, weights) = if soft {
                // above the floor label smoothing leaves every class at, largest first
                let floor = row.iter().copied().fold(f64::INFINITY, f64::min);
                let mut w: Vec<(String, f32)> = row
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| **v > floor + 1e-4)
                    .map(|(c, v)| (class(c as i64), *v as f32))
                    .collect();
                w.sort_by(|a, b| b.1.total_cmp(&a.1));
                w.truncate(MAX_WEIGHTS);
                let text: Vec<String> = w.iter().map(|(n, v)| format!("{n} {v:.2}")).collect();
                (text.join(" + "), w)
            } else {
                let text: Vec<String> = row.iter().map(|v| class(*v as i64)).collect();
                (text.join(", "), Vec::new())
            };
            let source = match decoder.as_mut() {
                Some(d) => Some(original(p, index as usize, d, &mut scratch)?),
                None => None,
            };
            tiles.push(Tile {
                index,
                batch: batch.number(),
                slot: k,
                file: p.source().sample_name(index as usize),
                label,
                weights,
                picture,
                source,
            });
        }
    }
    let mut notes = Vec::new();
    for (op, why) in &unview.lost {
        notes.push(format!("{op} cannot be undone ({why}): shown as it is"));
    }
    if soft {
        notes.push(
            "the labels are soft (one-hot or mixed by a batch op): each caption gives the \
             class weights"
                .into(),
        );
    }
    let tile = opts.tile.unwrap_or_else(|| {
        tiles
            .iter()
            .map(|t| t.picture.width.max(t.picture.height))
            .max()
            .unwrap_or(64)
    });
    Ok(Preview {
        tiles,
        stages: p.stages().iter().skip(1).map(|s| s.0.clone()).collect(),
        notes,
        tile,
        bad,
    })
}

/// Sample `k` of `batch` (`per` elements) as f32 in `out`, whatever the batch's type.
fn sample_values(batch: &Batch, k: usize, per: usize, out: &mut Vec<f32>) {
    let r = k * per..(k + 1) * per;
    out.clear();
    match batch.dtype() {
        DType::U8 => out.extend(
            batch
                .images_u8()
                .map_or(&[][..], |v| &v[r])
                .iter()
                .map(|&b| f32::from(b)),
        ),
        DType::F32 => out.extend_from_slice(batch.images_f32().map_or(&[][..], |v| &v[r])),
        DType::F16 => out.extend(
            batch
                .images_f16()
                .map_or(&[][..], |v| &v[r])
                .iter()
                .map(|h| h.to_f32()),
        ),
        DType::BF16 => out.extend(
            batch
                .images_bf16()
                .map_or(&[][..], |v| &v[r])
                .iter()
                .map(|h| h.to_f32()),
        ),
    }
    out.resize(per, 0.0);
}

/// Sample `index` of `p`'s source, decoded as it is stored.
fn original(p: &Pipeline, index: usize, d: &mut Decoder, scratch: &mut Vec<u8>) -> Result<Picture> {
    let src = p.source();
    let sample = src.read(index, scratch)?;
    let (width, height, rgb) = match sample.raw {
        Raw::Pixels {
            data,
            height,
            width,
        } => (width, height, data.to_vec()),
        Raw::Planar {
            data,
            height,
            width,
        } => {
            let n = height * width;
            let rgb = (0..n * 3).map(|i| data[(i % 3) * n + i / 3]).collect();
            (width, height, rgb)
        }
        Raw::Encoded(bytes) => {
            let mut out = Vec::new();
            let (h, w) = d
                .decode(bytes, &mut out)
                .map_err(|f| crate::Error::at(index, src.sample_name(index), "decode", f))?;
            out.truncate(h * w * 3);
            (w, h, out)
        }
    };
    Ok(Picture { width, height, rgb })
}
