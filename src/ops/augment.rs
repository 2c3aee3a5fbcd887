//! The operation set of torchvision's AutoAugment, RandAugment and TrivialAugmentWide
//! (`torchvision.transforms.autoaugment._apply_op`) on RGB u8 HWC images, each computed as
//! torchvision computes it on a PIL image — Pillow's own arithmetic, so the pixels are
//! torchvision's:
//!
//! * ShearX/Y, TranslateX/Y: `F.affine` (torchvision's inverse affine matrix; shear about
//!   the corner, translation by `int(magnitude)`) and Rotate: `F.rotate` (Pillow's
//!   `Image.rotate` about the centre), all through Pillow's nearest-neighbour affine
//!   transform ([`affine_nearest`]: its 16.16 fixed-point loop, its scale-only loop), the
//!   uncovered area filled with `fill`;
//! * Brightness, Color, Contrast, Sharpness: `ImageEnhance` with factor `1 + magnitude`;
//! * Posterize, Solarize, AutoContrast, Equalize, Invert: `ImageOps`, as lookup tables.
//!
//! The magnitude tables are torchvision's, including `torch.linspace`'s float32 values.

use super::image::Sample;
use super::kernel::Kernel;
use crate::error::Fault;
use crate::imgproc::pil::{blend, grey_rgb, mean_grey, Degenerate};
use crate::rng::SplitMix64;
use crate::spec::{DType, Layout, Spec, SpecError};
use serde::{Deserialize, Serialize};

/// The colour of the area a geometric operation uncovers: one grey level or an RGB triple
/// (default 0, black, as torchvision's `fill=None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged, try_from = "FillRepr")]
pub enum Fill {
    /// The same value in every channel.
    Grey(u8),
    /// One value per channel.
    Rgb([u8; 3]),
}

/// What a pipeline file may write for a fill, checked into a [`Fill`].
#[derive(Deserialize)]
#[serde(untagged)]
enum FillRepr {
    Grey(i64),
    Rgb(Vec<i64>),
}

/// A fill that is not a grey level or an RGB triple of them.
#[derive(Debug, thiserror::Error)]
#[error("fill must be a grey level 0-255 or [r, g, b] of them")]
pub struct BadFill;

impl TryFrom<FillRepr> for Fill {
    type Error = BadFill;
    fn try_from(r: FillRepr) -> Result<Fill, BadFill> {
        let level = |v: i64| u8::try_from(v).ok();
        match r {
            FillRepr::Grey(v) => level(v).map(Fill::Grey),
            FillRepr::Rgb(v) => match v[..] {
                [r, g, b] => level(r)
                    .zip(level(g))
                    .zip(level(b))
                    .map(|((r, g), b)| Fill::Rgb([r, g, b])),
                _ => None,
            },
        }
        .ok_or(BadFill)
    }
}

impl Default for Fill {
    fn default() -> Fill {
        Fill::Grey(0)
    }
}

impl Fill {
    /// Per channel.
    pub fn rgb(self) -> [u8; 3] {
        match self {
            Fill::Grey(g) => [g; 3],
            Fill::Rgb(c) => c,
        }
    }
}

/// The input an augmentation op takes: RGB u8 HWC (before normalize).
pub(crate) fn check_input(name: &str, input: &Spec) -> Result<(), SpecError> {
    if input.dtype != DType::U8 || input.channels != 3 || input.layout != Layout::Hwc {
        return Err(SpecError::input(format!(
            "{name} needs RGB u8 HWC pixels: put it before normalize, rescale and hwc_to_chw"
        )));
    }
    Ok(())
}

/// An augmentation policy (AutoAugment, RandAugment, TrivialAugmentWide): what one sample
/// draws, and the fill of what geometric operations uncover.
pub(crate) trait Draws: Send + Sync + std::fmt::Debug {
    /// The op's name.
    const NAME: &'static str;
    /// The operations one sample of `size` (height, width) applies, drawn from `rng`.
    fn steps(&self, rng: &mut SplitMix64, size: (usize, usize)) -> Vec<(AugOp, f64)>;
    /// The fill.
    fn fill(&self) -> Fill;
}

/// The kernel of a policy: draw, then apply what was drawn.
#[derive(Debug)]
pub(crate) struct PolicyKernel<P>(pub(crate) P);

impl<P: Draws> Kernel for PolicyKernel<P> {
    fn name(&self) -> &'static str {
        P::NAME
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        let steps = self.0.steps(s.rng, (s.img.h, s.img.w));
        run_steps(s, &steps, self.0.fill());
        Ok(())
    }

    fn needs_hwc(&self) -> bool {
        true
    }
}

/// Run the drawn `steps` on the sample's image, one pass each, ping-ponging between the
/// working image's two buffers.
fn run_steps(s: &mut Sample<'_, '_>, steps: &[(AugOp, f64)], fill: Fill) {
    let img = &mut *s.img;
    let n = img.h * img.w * 3;
    for &(op, magnitude) in steps {
        let src = match s.input.take() {
            Some(input) => input,
            None => &img.a8[..n],
        };
        img.b8.resize(n, 0);
        let size = (img.h, img.w);
        apply_op(
            op,
            magnitude,
            src,
            size,
            fill.rgb(),
            &mut img.b8[..n],
            &mut s.tools.scratch,
        );
        img.swap();
    }
}

/// One operation of the set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum AugOp {
    Identity,
    ShearX,
    ShearY,
    TranslateX,
    TranslateY,
    Rotate,
    Brightness,
    Color,
    Contrast,
    Sharpness,
    Posterize,
    Solarize,
    AutoContrast,
    Equalize,
    Invert,
}

/// Entry `i` of `torch.linspace(start, end, steps)` in float32, as ATen computes it (from
/// both ends).
fn linspace_at(start: f64, end: f64, steps: usize, i: usize) -> f32 {
    let (s, e) = (start as f32, end as f32);
    if steps == 1 {
        return s;
    }
    let step = (e - s) / (steps - 1) as f32;
    if i < steps / 2 {
        s + step * i as f32
    } else {
        e - step * (steps - i - 1) as f32
    }
}

/// `torch.linspace(start, end, steps)` in float32, as ATen computes it (from both ends).
pub fn linspace(start: f64, end: f64, steps: usize) -> Vec<f32> {
    (0..steps)
        .map(|i| linspace_at(start, end, steps, i))
        .collect()
}

/// Entry `i` of `8 - (torch.arange(bins) / ((bins - 1) / div)).round().int()`.
fn posterize_bits_at(bins: usize, div: f64, i: usize) -> f32 {
    let d = ((bins as f64 - 1.0) / div) as f32;
    8.0 - (i as f32 / d).round_ties_even()
}

/// `8 - (torch.arange(bins) / ((bins - 1) / div)).round().int()`: posterize bits per bin.
pub fn posterize_bits(bins: usize, div: f64) -> Vec<f32> {
    (0..bins).map(|i| posterize_bits_at(bins, div, i)).collect()
}

/// How an operation's magnitudes are tabulated.
#[derive(Clone, Copy, Debug)]
enum Table {
    /// No magnitude (AutoContrast, Equalize, Invert, Identity).
    None,
    /// `torch.linspace(start, end, bins)`.
    Lin(f64, f64),
    /// Posterize's bits, `8 - round(i / ((bins - 1) / div))`.
    Bits(f64),
}

/// An operation of a policy's space: its magnitude table and whether the sign is drawn.
/// Entries are computed when drawn, so a sample's draw builds no table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Space {
    pub(crate) op: AugOp,
    table: Table,
    pub(crate) signed: bool,
}

impl Space {
    /// Whether the operation has magnitudes at all.
    pub(crate) fn has_magnitudes(&self) -> bool {
        !matches!(self.table, Table::None)
    }

    /// Entry `bin` of its table of `bins` (`None` without magnitudes or past the end).
    pub(crate) fn magnitude(&self, bins: usize, bin: usize) -> Option<f32> {
        if bin >= bins {
            return None;
        }
        match self.table {
            Table::None => None,
            Table::Lin(start, end) => Some(linspace_at(start, end, bins, bin)),
            Table::Bits(div) => Some(posterize_bits_at(bins, div, bin)),
        }
    }
}

fn space(op: AugOp, table: Table, signed: bool) -> Space {
    Space { op, table, signed }
}

/// AutoAugment's `_augmentation_space(bins, (height, width))`: ShearX .. Equalize, then
/// Invert; with `rand`, RandAugment's: Identity, then ShearX .. Equalize.
pub(crate) fn classic_space((h, w): (usize, usize), rand: bool) -> [Space; 14] {
    use AugOp::*;
    let lin = |end: f64| Table::Lin(0.0, end);
    let common = [
        space(ShearX, lin(0.3), true),
        space(ShearY, lin(0.3), true),
        space(TranslateX, lin(150.0 / 331.0 * w as f64), true),
        space(TranslateY, lin(150.0 / 331.0 * h as f64), true),
        space(Rotate, lin(30.0), true),
        space(Brightness, lin(0.9), true),
        space(Color, lin(0.9), true),
        space(Contrast, lin(0.9), true),
        space(Sharpness, lin(0.9), true),
        space(Posterize, Table::Bits(4.0), false),
        space(Solarize, Table::Lin(255.0, 0.0), false),
        space(AutoContrast, Table::None, false),
        space(Equalize, Table::None, false),
    ];
    let extra = space(if rand { Identity } else { Invert }, Table::None, false);
    let mut v = [extra; 14];
    let at = usize::from(rand);
    v[at..at + 13].copy_from_slice(&common);
    v
}

/// TrivialAugmentWide's `_augmentation_space(bins)`.
pub(crate) fn wide_space() -> [Space; 14] {
    use AugOp::*;
    let lin = |end: f64| Table::Lin(0.0, end);
    [
        space(Identity, Table::None, false),
        space(ShearX, lin(0.99), true),
        space(ShearY, lin(0.99), true),
        space(TranslateX, lin(32.0), true),
        space(TranslateY, lin(32.0), true),
        space(Rotate, lin(135.0), true),
        space(Brightness, lin(0.99), true),
        space(Color, lin(0.99), true),
        space(Contrast, lin(0.99), true),
        space(Sharpness, lin(0.99), true),
        space(Posterize, Table::Bits(6.0), false),
        space(Solarize, Table::Lin(255.0, 0.0), false),
        space(AutoContrast, Table::None, false),
        space(Equalize, Table::None, false),
    ]
}

/// torchvision's `_get_inverse_affine_matrix(center, angle, translate, scale, shear)`.
fn inverse_affine(
    center: [f64; 2],
    angle: f64,
    translate: [f64; 2],
    scale: f64,
    shear: [f64; 2],
) -> [f64; 6] {
    let rot = angle.to_radians();
    let sx = shear[0].to_radians();
    let sy = shear[1].to_radians();
    let [cx, cy] = center;
    let [tx, ty] = translate;
    let a = (rot - sy).cos() / sy.cos();
    let b = -(rot - sy).cos() * sx.tan() / sy.cos() - rot.sin();
    let c = (rot - sy).sin() / sy.cos();
    let d = -(rot - sy).sin() * sx.tan() / sy.cos() + rot.cos();
    let mut m = [d, -b, 0.0, -c, a, 0.0].map(|x| x / scale);
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
    m
}

/// Python's `round(x, 15)`.
fn round15(x: f64) -> f64 {
    format!("{x:.15}").parse().unwrap_or(x)
}

/// Pillow's `Image.rotate(angle)` (no expand, about the centre) as the affine matrix of its
/// transform; `None` for the angles it turns by transposing instead (0 and 180 degrees, 90
/// and 270 on square images), with the quarter turns it makes.
fn rotate_matrix(angle: f64, (h, w): (usize, usize)) -> Result<[f64; 6], u8> {
    let angle = angle.rem_euclid(360.0);
    if angle == 0.0 {
        return Err(0);
    }
    if angle == 180.0 {
        return Err(2);
    }
    if (angle == 90.0 || angle == 270.0) && w == h {
        return Err(if angle == 90.0 { 1 } else { 3 });
    }
    let (cx, cy) = (w as f64 / 2.0, h as f64 / 2.0);
    let r = -angle.to_radians();
    let mut m = [
        round15(r.cos()),
        round15(r.sin()),
        0.0,
        round15(-r.sin()),
        round15(r.cos()),
        0.0,
    ];
    let (x, y) = (-cx, -cy);
    // Pillow: `a * x + b * y + c` with c = 0 (adding it changes no bit but a -0.0).
    m[2] = m[0] * x + m[1] * y;
    m[5] = m[3] * x + m[4] * y;
    m[2] += cx;
    m[5] += cy;
    Ok(m)
}

/// Pillow's `transform((w, h), AFFINE, a, NEAREST, fillcolor=fill)` of an `h × w` RGB
/// image: output pixel `(x, y)` reads source pixel `a · (x + ½, y + ½)`, rounded down,
/// or is `fill` when that lies outside (libImaging's `ImagingTransformAffine`).
pub fn affine_nearest(
    src: &[u8],
    (h, w): (usize, usize),
    a: [f64; 6],
    fill: [u8; 3],
    dst: &mut [u8],
) {
    for px in dst.chunks_exact_mut(3) {
        px.copy_from_slice(&fill);
    }
    let copy = |dst: &mut [u8], x: usize, y: usize, xin: i64, yin: i64| {
        if xin >= 0 && (xin as usize) < w && yin >= 0 && (yin as usize) < h {
            let s = (yin as usize * w + xin as usize) * 3;
            let d = (y * w + x) * 3;
            dst[d..d + 3].copy_from_slice(&src[s..s + 3]);
        }
    };
    // COORD: -1 below zero, else truncated.
    let coord = |v: f64| if v < 0.0 { -1 } else { v as i64 };
    if a[1] == 0.0 && a[3] == 0.0 {
        // ImagingScaleAffine
        let mut yo = a[5] + a[4] * 0.5;
        for y in 0..h {
            let mut xo = a[2] + a[0] * 0.5;
            let yin = coord(yo);
            for x in 0..w {
                copy(dst, x, y, coord(xo), yin);
                xo += a[0];
            }
            yo += a[4];
        }
        return;
    }
    let fits = |x: f64, y: f64| {
        (x * a[0] + y * a[1] + a[2]).abs() < 32768.0 && (x * a[3] + y * a[4] + a[5]).abs() < 32768.0
    };
    let (wf, hf) = (w as f64, h as f64);
    if fits(0.0, 0.0) && fits(wf, hf) && fits(0.0, hf) && fits(wf, 0.0) {
        // affine_fixed: 16.16 fixed point
        let fix = |v: f64| {
            let v = v * 65536.0 + 0.5;
            (if v < 0.0 { v.floor() } else { v }) as i32
        };
        let (a0, a1, a3, a4) = (fix(a[0]), fix(a[1]), fix(a[3]), fix(a[4]));
        let mut a2 = fix(a[2] + a[0] * 0.5 + a[1] * 0.5);
        let mut a5 = fix(a[5] + a[3] * 0.5 + a[4] * 0.5);
        for y in 0..h {
            let (mut xx, mut yy) = (a2, a5);
            for x in 0..w {
                copy(dst, x, y, i64::from(xx >> 16), i64::from(yy >> 16));
                xx = xx.wrapping_add(a0);
                yy = yy.wrapping_add(a3);
            }
            a2 = a2.wrapping_add(a1);
            a5 = a5.wrapping_add(a4);
        }
        return;
    }
    let mut xo = a[2] + a[1] * 0.5 + a[0] * 0.5;
    let mut yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
    for y in 0..h {
        let (mut xx, mut yy) = (xo, yo);
        for x in 0..w {
            copy(dst, x, y, coord(xx), coord(yy));
            xx += a[0];
            yy += a[3];
        }
        xo += a[1];
        yo += a[4];
    }
}

/// Quarter turns counter-clockwise (Pillow's `ROTATE_90` … transposes) of an `h × w`
/// RGB image.
fn quarter_turns(src: &[u8], (h, w): (usize, usize), turns: u8, dst: &mut [u8]) {
    for y in 0..h {
        for x in 0..w {
            // the source pixel that lands at (x, y)
            let (sx, sy) = match turns {
                1 => (w - 1 - y, x),
                2 => (w - 1 - x, h - 1 - y),
                3 => (y, h - 1 - x),
                _ => (x, y),
            };
            let (s, d) = ((sy * w + sx) * 3, (y * w + x) * 3);
            dst[d..d + 3].copy_from_slice(&src[s..s + 3]);
        }
    }
}

/// Apply a per-channel lookup table.
fn lut(src: &[u8], tables: &[[u8; 256]; 3], dst: &mut [u8]) {
    for (o, p) in dst.chunks_exact_mut(3).zip(src.chunks_exact(3)) {
        for c in 0..3 {
            o[c] = tables[c][p[c] as usize];
        }
    }
}

/// The three channels' histograms.
fn histograms(src: &[u8]) -> [[u64; 256]; 3] {
    let mut h = [[0u64; 256]; 3];
    for p in src.chunks_exact(3) {
        for c in 0..3 {
            h[c][p[c] as usize] += 1;
        }
    }
    h
}

/// `ImageOps.autocontrast(img)` (no cutoff): each channel stretched from its lowest to its
/// highest value.
fn autocontrast_tables(src: &[u8]) -> [[u8; 256]; 3] {
    histograms(src).map(|h| {
        let lo = h.iter().position(|&n| n > 0);
        let hi = h.iter().rposition(|&n| n > 0);
        match (lo, hi) {
            (Some(lo), Some(hi)) if hi > lo => {
                let scale = 255.0 / (hi - lo) as f64;
                let offset = -(lo as f64) * scale;
                std::array::from_fn(|i| ((i as f64 * scale + offset) as i64).clamp(0, 255) as u8)
            }
            _ => std::array::from_fn(|i| i as u8),
        }
    })
}

/// `ImageOps.equalize(img)`: each channel through its cumulative histogram.
fn equalize_tables(src: &[u8]) -> [[u8; 256]; 3] {
    histograms(src).map(|h| {
        let identity = std::array::from_fn(|i| i as u8);
        let used = h.iter().filter(|&&n| n > 0).count();
        let last = h.iter().rev().find(|&&n| n > 0).copied().unwrap_or(0);
        if used <= 1 {
            return identity;
        }
        let step = (h.iter().sum::<u64>() - last) / 255;
        if step == 0 {
            return identity;
        }
        let mut n = step / 2;
        std::array::from_fn(|i| {
            let v = (n / step).min(255) as u8;
            n += h[i];
            v
        })
    })
}

/// torchvision's `_apply_op(img, op, magnitude, NEAREST, fill)` on the `h × w` RGB image
/// `src`, into `dst` (same size); `scratch` holds an intermediate image.
pub fn apply_op(
    op: AugOp,
    magnitude: f64,
    src: &[u8],
    size: (usize, usize),
    fill: [u8; 3],
    dst: &mut [u8],
    scratch: &mut Vec<u8>,
) {
    let (h, w) = size;
    let centre = [w as f64 * 0.5, h as f64 * 0.5];
    let factor = (1.0 + magnitude) as f32;
    match op {
        AugOp::Identity => dst.copy_from_slice(src),
        AugOp::ShearX | AugOp::ShearY => {
            let shear = magnitude.atan().to_degrees();
            let shear = if op == AugOp::ShearX {
                [shear, 0.0]
            } else {
                [0.0, shear]
            };
            let m = inverse_affine([0.0, 0.0], 0.0, [0.0, 0.0], 1.0, shear);
            affine_nearest(src, size, m, fill, dst)
        }
        AugOp::TranslateX | AugOp::TranslateY => {
            let t = magnitude.trunc();
            let t = if op == AugOp::TranslateX {
                [t, 0.0]
            } else {
                [0.0, t]
            };
            let m = inverse_affine(centre, 0.0, t, 1.0, [0.0, 0.0]);
            affine_nearest(src, size, m, fill, dst)
        }
        AugOp::Rotate => match rotate_matrix(magnitude, size) {
            Ok(m) => affine_nearest(src, size, m, fill, dst),
            Err(turns) => quarter_turns(src, size, turns, dst),
        },
        AugOp::Brightness => blend(Degenerate::Grey(0), src, factor, dst),
        AugOp::Color => {
            scratch.resize(src.len(), 0);
            grey_rgb(src, scratch);
            blend(Degenerate::Image(scratch), src, factor, dst)
        }
        AugOp::Contrast => blend(Degenerate::Grey(mean_grey(src)), src, factor, dst),
        AugOp::Sharpness => {
            scratch.resize(src.len(), 0);
            smooth(src, size, scratch);
            blend(Degenerate::Image(scratch), src, factor, dst)
        }
        AugOp::Posterize => {
            let bits = magnitude as i64;
            let mask = !((1u32 << (8 - bits.clamp(0, 8))) - 1) as u8;
            let t: [u8; 256] = std::array::from_fn(|i| i as u8 & mask);
            lut(src, &[t; 3], dst)
        }
        AugOp::Solarize => {
            let t: [u8; 256] = std::array::from_fn(|i| {
                if (i as f64) < magnitude {
                    i as u8
                } else {
                    255 - i as u8
                }
            });
            lut(src, &[t; 3], dst)
        }
        AugOp::AutoContrast => lut(src, &autocontrast_tables(src), dst),
        AugOp::Equalize => lut(src, &equalize_tables(src), dst),
        AugOp::Invert => {
            for (o, &i) in dst.iter_mut().zip(src) {
                *o = 255 - i;
            }
        }
    }
}

/// `filter(ImageFilter.SMOOTH)` of an `h × w` RGB image into `dst`: the 3×3 kernel
/// `[1 1 1; 1 5 1; 1 1 1] / 13` summed in f32 row by row (below, centre, above) and
/// rounded; the border rows and columns copied.
fn smooth(src: &[u8], (h, w): (usize, usize), dst: &mut [u8]) {
    dst[..src.len()].copy_from_slice(src);
    if h < 3 || w < 3 {
        return;
    }
    let (k1, k5) = (1.0f32 / 13.0, 5.0f32 / 13.0);
    let row = w * 3;
    for y in 1..h - 1 {
        let above = &src[(y - 1) * row..y * row];
        let here = &src[y * row..(y + 1) * row];
        let below = &src[(y + 1) * row..(y + 2) * row];
        let out = &mut dst[y * row..(y + 1) * row];
        for x in 3..row - 3 {
            let line = |r: &[u8], centre: f32| {
                r[x - 3] as f32 * k1 + r[x] as f32 * centre + r[x + 3] as f32 * k1
            };
            let mut ss = 0.0f32;
            ss += line(below, k1);
            ss += line(here, k5);
            ss += line(above, k1);
            out[x] = if ss <= 0.0 {
                0
            } else if ss >= 255.0 {
                255
            } else {
                (ss + 0.5) as u8
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linspace_is_torchs_float32_from_both_ends() {
        let v = linspace(0.0, 0.3, 10);
        assert_eq!(v[0], 0.0);
        assert_eq!(v[9], 0.3f32);
        assert_eq!(v[3], 0.3f32 / 9.0 * 3.0);
        assert_eq!(v[6], 0.3f32 - 0.3f32 / 9.0 * 3.0);
        assert_eq!(
            posterize_bits(10, 4.0),
            [8., 8., 7., 7., 6., 6., 5., 5., 4., 4.]
        );
        assert_eq!(
            posterize_bits(31, 4.0)[..9],
            [8., 8., 8., 8., 7., 7., 7., 7., 7.]
        );
    }

    #[test]
    fn spaces_list_torchvisions_operations_in_order_with_their_tables() {
        use AugOp::*;
        let ops = |v: [Space; 14]| v.map(|s| s.op);
        let auto = [
            ShearX,
            ShearY,
            TranslateX,
            TranslateY,
            Rotate,
            Brightness,
            Color,
            Contrast,
            Sharpness,
            Posterize,
            Solarize,
            AutoContrast,
            Equalize,
            Invert,
        ];
        assert_eq!(ops(classic_space((40, 48), false)), auto);
        let mut rand = [Identity; 14];
        rand[1..].copy_from_slice(&auto[..13]);
        assert_eq!(ops(classic_space((40, 48), true)), rand);
        assert_eq!(ops(wide_space()), rand);
        // entries equal the whole tables torch builds
        let auto_space = classic_space((40, 48), false);
        let tx = linspace(0.0, 150.0 / 331.0 * 48.0, 10);
        let bits = posterize_bits(31, 6.0);
        for (i, t) in tx.iter().enumerate() {
            assert_eq!(auto_space[2].magnitude(10, i), Some(*t));
        }
        for (i, b) in bits.iter().enumerate() {
            assert_eq!(wide_space()[10].magnitude(31, i), Some(*b));
        }
        assert_eq!(auto_space[2].magnitude(10, 10), None);
        assert_eq!(auto_space[11].magnitude(10, 0), None);
    }

    #[test]
    fn quarter_turns_match_a_full_rotation_by_steps() {
        let src: Vec<u8> = (0..2 * 2 * 3).map(|i| i as u8).collect();
        let mut once = vec![0; 12];
        quarter_turns(&src, (2, 2), 1, &mut once);
        let mut twice = vec![0; 12];
        quarter_turns(&once, (2, 2), 1, &mut twice);
        let mut half = vec![0; 12];
        quarter_turns(&src, (2, 2), 2, &mut half);
        assert_eq!(twice, half);
    }
}
