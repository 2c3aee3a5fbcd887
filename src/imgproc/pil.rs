//! Pillow's image arithmetic, bit for bit, on RGB u8 HWC buffers: what torchvision's
//! functional ops compute on a PIL image, so that the colour and augmentation ops give the
//! numbers users compare against.
//!
//! * [`blend`]: `Image.blend(degenerate, image, alpha)` (libImaging's `ImagingBlend`):
//!   `d + alpha * (i - d)` in f32, truncated toward zero, clipped to 0..=255 — the core of
//!   `ImageEnhance` (brightness: blend with black; contrast: with the mean grey; colour:
//!   with the greyscale image; sharpness: with the smoothed image);
//! * [`luma`]: `convert("L")`, `(19595 R + 38470 G + 7471 B + 2^15) >> 16`;
//! * [`rgb_to_hsv`] / [`hsv_to_rgb`]: `convert("HSV")` and back (libImaging's `Convert.c`:
//!   hue and saturation scaled to 0..=255 and truncated, back through `round`);
//! * [`smooth`]: `filter(ImageFilter.SMOOTH)`, the degenerate image of sharpness;
//!
//! Each was checked against Pillow 13 on photographs (`fixtures/augment/make_refs.py`
//! writes the references the tests compare with).

/// Where the `degenerate` image of a blend comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Degenerate<'a> {
    /// One grey level everywhere (black for brightness, the mean grey for contrast).
    Grey(u8),
    /// Another image of the same size.
    Image(&'a [u8]),
}

/// One channel of `Image.blend(d, i, alpha)`.
#[inline(always)]
fn blend1(d: u8, i: u8, alpha: f32) -> u8 {
    let t = d as f32 + alpha * (i as f32 - d as f32);
    if t <= 0.0 {
        0
    } else if t >= 255.0 {
        255
    } else {
        t as u8
    }
}

/// `Image.blend(degenerate, src, alpha)` into `dst` (same length as `src`).
pub(crate) fn blend(degenerate: Degenerate<'_>, src: &[u8], alpha: f32, dst: &mut [u8]) {
    match degenerate {
        Degenerate::Grey(g) => {
            // One grey: a table of the 256 results.
            let table: [u8; 256] = std::array::from_fn(|v| blend1(g, v as u8, alpha));
            for (o, &i) in dst.iter_mut().zip(src) {
                *o = table[i as usize];
            }
        }
        Degenerate::Image(d) => {
            for ((o, &i), &d) in dst.iter_mut().zip(src).zip(d) {
                *o = blend1(d, i, alpha);
            }
        }
    }
}

/// Pillow's RGB → L.
#[inline(always)]
pub(crate) fn luma(r: u8, g: u8, b: u8) -> u8 {
    ((r as u32 * 19595 + g as u32 * 38470 + b as u32 * 7471 + 0x8000) >> 16) as u8
}

/// The greyscale image of `src` (RGB), as RGB (`convert("L").convert("RGB")`).
pub(crate) fn grey_rgb(src: &[u8], dst: &mut [u8]) {
    for (o, p) in dst.chunks_exact_mut(3).zip(src.chunks_exact(3)) {
        let l = luma(p[0], p[1], p[2]);
        o.copy_from_slice(&[l, l, l]);
    }
}

/// `int(mean of convert("L") + 0.5)`: the grey `ImageEnhance.Contrast` blends with.
pub(crate) fn mean_grey(src: &[u8]) -> u8 {
    let n = src.len() / 3;
    if n == 0 {
        return 0;
    }
    let sum: u64 = src
        .chunks_exact(3)
        .map(|p| u64::from(luma(p[0], p[1], p[2])))
        .sum();
    (sum as f64 / n as f64 + 0.5) as u8
}

/// One pixel RGB → HSV, as libImaging's `rgb2hsv_row`.
#[inline(always)]
pub(crate) fn rgb_to_hsv(r: u8, g: u8, b: u8) -> [u8; 3] {
    let maxc = r.max(g).max(b);
    let minc = r.min(g).min(b);
    if maxc == minc {
        return [0, 0, maxc];
    }
    let cr = (maxc - minc) as f32;
    let s = cr / maxc as f32;
    let rc = (maxc - r) as f32 / cr;
    let gc = (maxc - g) as f32 / cr;
    let bc = (maxc - b) as f32 / cr;
    // C promotes to double where a literal is double: `2.0 + rc - bc` is computed in double
    // and stored back to float.
    let h: f32 = if r == maxc {
        bc - gc
    } else if g == maxc {
        (2.0 + rc as f64 - bc as f64) as f32
    } else {
        (4.0 + gc as f64 - rc as f64) as f32
    };
    // fmod(h / 6 + 1, 1): h is in (-1, 5], so the sum is in [0, 2) and subtracting 1 is
    // exact (what fmod computes, without its cost).
    let t = h as f64 / 6.0 + 1.0;
    let h = (if t >= 1.0 { t - 1.0 } else { t }) as f32;
    let clip = |v: f64| (v as i32).clamp(0, 255) as u8;
    [clip(h as f64 * 255.0), clip(s as f64 * 255.0), maxc]
}

/// One pixel HSV → RGB, as libImaging's `hsv2rgb`.
#[inline(always)]
pub(crate) fn hsv_to_rgb(h: u8, s: u8, v: u8) -> [u8; 3] {
    if s == 0 {
        return [v, v, v];
    }
    let hf = h as f32 as f64 * 6.0 / 255.0;
    let i = hf.floor() as i32;
    let f = (hf - i as f64) as f32 as f64;
    let fs = (s as f64 / 255.0) as f32 as f64;
    let v64 = v as f32 as f64;
    let clip = |x: f64| (x.round() as i32).clamp(0, 255) as u8;
    let p = clip(v64 * (1.0 - fs));
    let q = clip(v64 * (1.0 - fs * f));
    let t = clip(v64 * (1.0 - fs * (1.0 - f)));
    match i % 6 {
        0 => [v, t, p],
        1 => [q, v, p],
        2 => [p, v, t],
        3 => [p, q, v],
        4 => [t, p, v],
        _ => [v, p, q],
    }
}

/// Shift every pixel's hue by `shift` (mod 256) in Pillow's HSV: torchvision's
/// `adjust_hue` on a PIL image, whose shift is `hue_factor * 255` truncated to an integer
/// and wrapped to u8.
pub(crate) fn shift_hue(src: &[u8], shift: u8, dst: &mut [u8]) {
    for (o, p) in dst.chunks_exact_mut(3).zip(src.chunks_exact(3)) {
        let [h, s, v] = rgb_to_hsv(p[0], p[1], p[2]);
        o.copy_from_slice(&hsv_to_rgb(h.wrapping_add(shift), s, v));
    }
}

/// `filter(ImageFilter.SMOOTH)` of an `h × w` RGB image into `dst`: the 3×3 kernel
/// `[1 1 1; 1 5 1; 1 1 1] / 13` summed in f32 row by row (below, centre, above) and
/// rounded; the border rows and columns copied.
pub(crate) fn smooth(src: &[u8], (h, w): (usize, usize), dst: &mut [u8]) {
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
