//! The pointwise tail of a pipeline, fused: `rescale` and `normalize` fold into one
//! multiply-add per channel ([`Affine`]), `hwc_to_chw` into the order the result is written
//! in, and the result goes straight into the sample's slot of the batch buffer — one pass
//! over the pixels, whatever the number of pointwise ops.

use crate::spec::Layout;

/// `out[c] = x[c] * scale[c] + shift[c]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Affine {
    /// Per-channel factor.
    pub scale: [f32; 3],
    /// Per-channel offset.
    pub shift: [f32; 3],
}

impl Affine {
    /// `x`.
    pub fn identity() -> Affine {
        Affine {
            scale: [1.0; 3],
            shift: [0.0; 3],
        }
    }

    /// `next(self(x))` as one map.
    pub fn then(self, next: Affine) -> Affine {
        let mut out = self;
        for c in 0..3 {
            out.scale[c] = self.scale[c] * next.scale[c];
            out.shift[c] = self.shift[c] * next.scale[c] + next.shift[c];
        }
        out
    }
}

/// Pixels to read: u8 or f32.
#[derive(Clone, Copy, Debug)]
pub enum Pixels<'a> {
    /// 8-bit.
    U8(&'a [u8]),
    /// float.
    F32(&'a [f32]),
}

/// An image to read: pixels, size, physical layout, 3 channels.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    /// The pixels.
    pub pixels: Pixels<'a>,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// How the pixels are laid out in memory.
    pub layout: Layout,
}

/// Where to write: a u8 or f32 slice of exactly `3 × h × w` elements.
#[derive(Debug)]
pub enum Dst<'a> {
    /// 8-bit (only when no affine map applies and the source is u8).
    U8(&'a mut [u8]),
    /// float.
    F32(&'a mut [f32]),
}

/// Write `src` into `dst` in `layout`, applying `affine` (`None`: a plain copy / layout
/// change). Returns an error when the types cannot meet (a bug in the plan, not in data).
pub fn write(
    src: &View<'_>,
    affine: Option<&Affine>,
    layout: Layout,
    dst: Dst<'_>,
) -> Result<(), String> {
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
        _ => return Err("pointwise: cannot write these element types (plan bug)".into()),
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

/// Like [`write()`] for `stride`-byte u8 pixels (RGB: 3, RGBX: 4, X ignored) into float
/// planes, mirrored left-right on the way: a pending flip costs no pass of its own.
/// Returns false, writing nothing, for any other combination (the caller then writes and
/// flips the written sample).
pub fn write_mirrored(
    src: &[u8],
    stride: usize,
    height: usize,
    width: usize,
    affine: Option<&Affine>,
    layout: Layout,
    dst: &mut Dst<'_>,
) -> bool {
    let hw = height * width;
    let Dst::F32(d) = dst else { return false };
    if layout != Layout::Chw || src.len() < hw * stride || d.len() < hw * 3 || width == 0 {
        return false;
    }
    let a = affine.copied().unwrap_or_else(Affine::identity);
    let (s, d) = (&src[..hw * stride], &mut d[..hw * 3]);
    match stride {
        3 => rgb_to_f32_chw_mirrored(s, width, &a, d),
        4 => rgbx_to_f32_chw_mirrored(s, width, &a, d),
        _ => return false,
    }
    true
}

/// Row by row, each plane row written from the source row's last pixel to its first.
#[inline(always)]
fn u8_to_f32_chw_mirrored_generic<const S: usize>(s: &[u8], w: usize, a: &Affine, d: &mut [f32]) {
    let hw = s.len() / S;
    let (r, rest) = d.split_at_mut(hw);
    let (g, b) = rest.split_at_mut(hw);
    let [s0, s1, s2] = a.scale;
    let [o0, o1, o2] = a.shift;
    for (((srow, r), g), b) in s
        .chunks_exact(w * S)
        .zip(r.chunks_exact_mut(w))
        .zip(g.chunks_exact_mut(w))
        .zip(b.chunks_exact_mut(w))
    {
        // Read from the right end, write forwards: the stores stay an ascending stream
        // (written right to left, the rows' stores ran at half the speed).
        for (((px, r), g), b) in srow
            .chunks_exact(S)
            .rev()
            .zip(r.iter_mut())
            .zip(g.iter_mut())
            .zip(b.iter_mut())
        {
            *r = px[0] as f32 * s0 + o0;
            *g = px[1] as f32 * s1 + o1;
            *b = px[2] as f32 * s2 + o2;
        }
    }
}

#[inline(always)]
fn rgb_to_f32_chw_mirrored_generic(s: &[u8], w: usize, a: &Affine, d: &mut [f32]) {
    u8_to_f32_chw_mirrored_generic::<3>(s, w, a, d)
}

#[inline(always)]
fn rgbx_to_f32_chw_mirrored_generic(s: &[u8], w: usize, a: &Affine, d: &mut [f32]) {
    u8_to_f32_chw_mirrored_generic::<4>(s, w, a, d)
}

multiversion!(rgb_to_f32_chw_mirrored, rgb_to_f32_chw_mirrored_generic, (s: &[u8], w: usize, a: &Affine, d: &mut [f32]));
multiversion!(rgbx_to_f32_chw_mirrored, rgbx_to_f32_chw_mirrored_generic, (s: &[u8], w: usize, a: &Affine, d: &mut [f32]));

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
    fn affine_composition_is_sequential_application() {
        let a = Affine {
            scale: [2.0, 3.0, 4.0],
            shift: [1.0, 0.0, -1.0],
        };
        let b = Affine {
            scale: [0.5, 0.25, 1.0],
            shift: [10.0, 20.0, 30.0],
        };
        let ab = a.then(b);
        for c in 0..3 {
            let x = 7.0f32;
            let seq = (x * a.scale[c] + a.shift[c]) * b.scale[c] + b.shift[c];
            assert_eq!(x * ab.scale[c] + ab.shift[c], seq);
        }
    }

    /// A mirrored write is the plain write followed by a flip of the written sample, for
    /// RGB and RGBX pixels.
    #[test]
    fn mirrored_write_is_write_then_flip() {
        use crate::ops::geometry::flip_horizontal;
        let (h, w) = (3, 37);
        let rgb: Vec<u8> = (0..h * w * 3).map(|i| (i * 7 % 251) as u8).collect();
        let rgbx: Vec<u8> = rgb
            .chunks_exact(3)
            .flat_map(|p| [p[0], p[1], p[2], 99])
            .collect();
        let a = Affine {
            scale: [0.5, 2.0, -1.0],
            shift: [1.0, 2.0, 3.0],
        };
        let mut want = vec![0f32; h * w * 3];
        let view = View {
            pixels: Pixels::U8(&rgb),
            height: h,
            width: w,
            layout: Layout::Hwc,
        };
        write(&view, Some(&a), Layout::Chw, Dst::F32(&mut want)).unwrap();
        flip_horizontal(&mut want, h, w, 3, Layout::Chw);
        for (src, stride) in [(&rgb, 3), (&rgbx, 4)] {
            let mut got = vec![0f32; h * w * 3];
            assert!(write_mirrored(
                src,
                stride,
                h,
                w,
                Some(&a),
                Layout::Chw,
                &mut Dst::F32(&mut got)
            ));
            assert_eq!(got, want, "{stride} bytes a pixel");
        }
        let mut hwc = vec![0f32; h * w * 3];
        assert!(!write_mirrored(
            &rgb,
            3,
            h,
            w,
            None,
            Layout::Hwc,
            &mut Dst::F32(&mut hwc)
        ));
    }

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
