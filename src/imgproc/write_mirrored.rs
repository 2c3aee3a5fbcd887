//! The scalar write of 8-bit interleaved pixels (RGB or RGBX) into float planes, each row
//! read from its last pixel to its first: a mirror of the image costs no pass of its own
//! where the AVX2 plane write ([`super::write_planes`]) does not apply.

use super::affine::Affine;
use super::view::{Dst, Interleaved};
use crate::spec::Layout;

/// Like [`super::write::write()`] for `src`'s pixels (`stride` 3 or 4 bytes) into float
/// planes, mirrored left-right on the way: a mirror costs no pass of its own. Returns
/// false, writing nothing, for any other combination (the caller then writes and mirrors
/// the written sample).
pub fn write_mirrored(
    src: Interleaved<'_>,
    affine: Option<&Affine>,
    layout: Layout,
    dst: &mut Dst<'_>,
) -> bool {
    let Interleaved {
        data: src,
        stride,
        height,
        width,
    } = src;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::imgproc::view::{rgb_and_rgbx, Pixels, View};
    use crate::imgproc::write::write;

    /// A mirrored write is the plain write followed by a flip of the written sample, for
    /// RGB and RGBX pixels.
    #[test]
    fn mirrored_write_is_write_then_flip() {
        use crate::imgproc::geometry::flip_horizontal;
        let (h, w) = (3, 37);
        let (rgb, rgbx) = rgb_and_rgbx(h, w);
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
            let src = Interleaved {
                data: src,
                stride,
                height: h,
                width: w,
            };
            let mut dst = Dst::F32(&mut got);
            assert!(write_mirrored(src, Some(&a), Layout::Chw, &mut dst));
            assert_eq!(got, want, "{stride} bytes a pixel");
        }
        let mut hwc = vec![0f32; h * w * 3];
        let src = Interleaved {
            data: &rgb,
            stride: 3,
            height: h,
            width: w,
        };
        let mut dst = Dst::F32(&mut hwc);
        assert!(!write_mirrored(src, None, Layout::Hwc, &mut dst));
    }
}
