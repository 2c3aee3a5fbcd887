//! The general pixel write: an image of u8 or f32 pixels into a destination slice in a
//! layout, through an optional [`Affine`] map — one pass over the pixels, whatever the
//! number of pointwise ops folded into the map. The ImageNet hot path (interleaved u8 into
//! float planes) and the CIFAR one (u8 planes into float planes) are compiled for AVX2
//! where the CPU has it; RGBX pixels (4 bytes, X ignored) are written without a pass of
//! their own ([`write_rgbx`]).

use super::affine::Affine;
use super::view::{Dst, Pixels, View};
use crate::error::{bug, Fault};
use crate::spec::Layout;

/// Write `src` into `dst` in `layout`, applying `affine` (`None`: a plain copy / layout
/// change). Returns an error when the types cannot meet (a bug in the plan, not in data).
pub fn write(
    src: &View<'_>,
    affine: Option<&Affine>,
    layout: Layout,
    dst: Dst<'_>,
) -> Result<(), Fault> {
    let (h, w) = (src.height, src.width);
    let n = h * w * 3;
    match (src.pixels, dst) {
        (Pixels::U8(s), Dst::F32(d)) => {
            let a = affine.copied().unwrap_or_else(Affine::identity);
            let (s, d) = (&s[..n], &mut d[..n]);
            match (src.layout, layout) {
                (Layout::Hwc, Layout::Chw) => u8_hwc_to_f32_chw(s, h * w, &a, d),
                (Layout::Chw, Layout::Chw) => u8_planes_to_f32_planes(s, h * w, &a, d),
                (Layout::Hwc, Layout::Hwc) => u8_hwc_to_f32_hwc(s, &a, d),
                (Layout::Chw, Layout::Hwc) => {
                    general(|i| s[i] as f32, h, w, src.layout, layout, &a, d)
                }
            }
        }
        (Pixels::F32(s), Dst::F32(d)) => {
            let a = affine.copied().unwrap_or_else(Affine::identity);
            general(|i| s[i], h, w, src.layout, layout, &a, &mut d[..n]);
        }
        (Pixels::U8(s), Dst::U8(d)) if affine.is_none() => {
            if src.layout == layout {
                d[..n].copy_from_slice(&s[..n]);
            } else {
                for c in 0..3 {
                    for y in 0..h {
                        for x in 0..w {
                            d[index(layout, h, w, c, y, x)] = s[index(src.layout, h, w, c, y, x)];
                        }
                    }
                }
            }
        }
        _ => return Err(bug("pointwise: cannot write these element types")),
    }
    Ok(())
}

/// Like [`write()`] for 8-bit RGBX pixels (4 bytes each, X ignored) into floats — what a
/// region decode and the fused resize produce on the ImageNet path, so the 4th byte never
/// needs a pass of its own. Returns false (writing nothing) for a combination it does not
/// handle: the caller then packs the pixels to RGB and uses [`write()`].
pub fn write_rgbx(
    src: &[u8],
    height: usize,
    width: usize,
    affine: Option<&Affine>,
    layout: Layout,
    dst: &mut Dst<'_>,
) -> bool {
    let hw = height * width;
    let Dst::F32(d) = dst else { return false };
    if src.len() < hw * 4 || d.len() < hw * 3 {
        return false;
    }
    let a = affine.copied().unwrap_or_else(Affine::identity);
    match layout {
        Layout::Chw => u8_rgbx_to_f32_chw(&src[..hw * 4], hw, &a, &mut d[..hw * 3]),
        Layout::Hwc => {
            for (px, o) in src[..hw * 4]
                .chunks_exact(4)
                .zip(d[..hw * 3].chunks_exact_mut(3))
            {
                for c in 0..3 {
                    o[c] = px[c] as f32 * a.scale[c] + a.shift[c];
                }
            }
        }
    }
    true
}

#[inline(always)]
fn u8_rgbx_to_f32_chw_generic(s: &[u8], hw: usize, a: &Affine, d: &mut [f32]) {
    let (r, rest) = d.split_at_mut(hw);
    let (g, b) = rest.split_at_mut(hw);
    let [s0, s1, s2] = a.scale;
    let [o0, o1, o2] = a.shift;
    for (((px, r), g), b) in s.chunks_exact(4).zip(r).zip(g).zip(b) {
        *r = px[0] as f32 * s0 + o0;
        *g = px[1] as f32 * s1 + o1;
        *b = px[2] as f32 * s2 + o2;
    }
}

#[inline(always)]
fn index(layout: Layout, h: usize, w: usize, c: usize, y: usize, x: usize) -> usize {
    match layout {
        Layout::Hwc => (y * w + x) * 3 + c,
        Layout::Chw => (c * h + y) * w + x,
    }
}

multiversion!(u8_hwc_to_f32_chw, u8_hwc_to_f32_chw_generic, (s: &[u8], hw: usize, a: &Affine, d: &mut [f32]));
multiversion!(u8_planes_to_f32_planes, u8_planes_to_f32_planes_generic, (s: &[u8], hw: usize, a: &Affine, d: &mut [f32]));
multiversion!(u8_rgbx_to_f32_chw, u8_rgbx_to_f32_chw_generic, (s: &[u8], hw: usize, a: &Affine, d: &mut [f32]));

/// The ImageNet hot path: interleaved u8 → float planes, one multiply-add per value.
#[inline(always)]
fn u8_hwc_to_f32_chw_generic(s: &[u8], hw: usize, a: &Affine, d: &mut [f32]) {
    let (r, rest) = d.split_at_mut(hw);
    let (g, b) = rest.split_at_mut(hw);
    let [s0, s1, s2] = a.scale;
    let [o0, o1, o2] = a.shift;
    for (((px, r), g), b) in s.chunks_exact(3).zip(r).zip(g).zip(b) {
        *r = px[0] as f32 * s0 + o0;
        *g = px[1] as f32 * s1 + o1;
        *b = px[2] as f32 * s2 + o2;
    }
}

/// The CIFAR hot path: u8 planes → float planes, contiguous runs that vectorize fully.
#[inline(always)]
fn u8_planes_to_f32_planes_generic(s: &[u8], hw: usize, a: &Affine, d: &mut [f32]) {
    for c in 0..3 {
        let (sc, oc) = (a.scale[c], a.shift[c]);
        for (o, &v) in d[c * hw..(c + 1) * hw]
            .iter_mut()
            .zip(&s[c * hw..(c + 1) * hw])
        {
            *o = v as f32 * sc + oc;
        }
    }
}

fn u8_hwc_to_f32_hwc(s: &[u8], a: &Affine, d: &mut [f32]) {
    for (px, o) in s.chunks_exact(3).zip(d.chunks_exact_mut(3)) {
        for c in 0..3 {
            o[c] = px[c] as f32 * a.scale[c] + a.shift[c];
        }
    }
}

fn general(
    get: impl Fn(usize) -> f32,
    h: usize,
    w: usize,
    from: Layout,
    to: Layout,
    a: &Affine,
    d: &mut [f32],
) {
    for c in 0..3 {
        for y in 0..h {
            for x in 0..w {
                d[index(to, h, w, c, y, x)] =
                    get(index(from, h, w, c, y, x)) * a.scale[c] + a.shift[c];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layout_pair_agrees_with_the_general_loop() {
        let (h, w) = (3, 5);
        let hwc: Vec<u8> = (0..h * w * 3).map(|i| (i * 7 % 251) as u8).collect();
        let mut chw = vec![0u8; hwc.len()];
        write(
            &View {
                pixels: Pixels::U8(&hwc),
                height: h,
                width: w,
                layout: Layout::Hwc,
            },
            None,
            Layout::Chw,
            Dst::U8(&mut chw),
        )
        .unwrap();
        // pixel (y=1, x=2), channel 2
        assert_eq!(chw[2 * h * w + w + 2], hwc[(w + 2) * 3 + 2]);
        let a = Affine {
            scale: [0.5, 2.0, -1.0],
            shift: [1.0, 2.0, 3.0],
        };
        for (src, sl) in [(&hwc, Layout::Hwc), (&chw, Layout::Chw)] {
            for dl in [Layout::Hwc, Layout::Chw] {
                let mut out = vec![0f32; hwc.len()];
                write(
                    &View {
                        pixels: Pixels::U8(src),
                        height: h,
                        width: w,
                        layout: sl,
                    },
                    Some(&a),
                    dl,
                    Dst::F32(&mut out),
                )
                .unwrap();
                for c in 0..3 {
                    for y in 0..h {
                        for x in 0..w {
                            let v = hwc[(y * w + x) * 3 + c] as f32 * a.scale[c] + a.shift[c];
                            assert_eq!(out[index(dl, h, w, c, y, x)], v, "{sl:?}->{dl:?}");
                        }
                    }
                }
            }
        }
    }
}
