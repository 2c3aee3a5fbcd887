//! The write of the ImageNet pipelines into the batch buffer: 8-bit interleaved pixels
//! (RGB or RGBX) into float CHW planes through an [`Affine`] map, read left to right or
//! mirrored, with AVX2: float32 with non-temporal stores and the sample's fingerprint
//! computed from the registers on the way ([`write_planes_streaming`]), or float16 /
//! bfloat16 rounded in the same pass ([`write_planes_narrow`]).

use super::affine::Affine;
use super::geometry::ColumnOrder;
use super::view::Interleaved;
use crate::spec::DType;

/// `src`'s pixels (`stride` 3 or 4 bytes) into float CHW planes through `affine`, each
/// row read in `order` (right to left: the image mirrored): the write of the ImageNet
/// pipelines into the batch buffer, with AVX2 and non-temporal stores (the 602 KB a
/// sample go straight to memory, not read in first and not left to evict the worker's
/// cache). With `hash`, it also computes the fingerprint of the bytes it writes from its
/// registers, one fingerprint part per plane ([`super::fingerprint`]).
///
/// Returns `None`, writing nothing, where it does not apply (no AVX2, a width that is not
/// a multiple of 32, a destination not 16-byte aligned); else `Some(fingerprint)`, the
/// fingerprint being `None` unless `hash`.
pub fn write_planes_streaming(
    src: Interleaved<'_>,
    affine: Option<&Affine>,
    order: ColumnOrder,
    dst: &mut [f32],
    hash: bool,
) -> Option<Option<u64>> {
    #[cfg(target_arch = "x86_64")]
    {
        use super::fingerprint::{from_parts, start_lanes};
        let a = affine.copied().unwrap_or_else(Affine::identity);
        if !(dst.as_ptr() as usize).is_multiple_of(16) {
            return None;
        }
        let k = PlaneArgs::checked(src, &a, dst.as_mut_ptr().cast(), dst.len())?;
        let (stride, hw) = (src.stride, k.h * k.w);
        let mut parts = [start_lanes(0), start_lanes(1), start_lanes(2)];
        // SAFETY: the CPU supports AVX2 (checked above); the kernel's preconditions
        // (lengths, width a multiple of 32, 16-byte aligned destination) are checked above.
        unsafe {
            if hash {
                planes::<OUT_F32, true>(k, stride, order, &mut parts)
            } else {
                planes::<OUT_F32, false>(k, stride, order, &mut parts)
            }
        }
        Some(hash.then(|| from_parts(hw * 12, &parts)))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (src, affine, order, dst, hash);
        None
    }
}

/// The kernel of [`write_planes_streaming`]: 8 pixels a step, loaded once (RGB as two
/// overlapping 16-byte loads, so nothing past the row's last pixel is read; mirrored, the
/// two halves swap lanes), then per channel one shuffle puts the channel's bytes in
/// zero-extended dwords (in reverse pixel order when mirroring), which are converted,
/// `* scale + shift` (no FMA: the bits of the plain path), stored with `movntps`, and
/// (`HASH`) folded into that plane's 32 fingerprint lanes, vector `v` of a 128-byte step
/// into lanes `8v .. 8v + 8`.
///
/// `OUT` says what is stored: float32 with `movntps` ([`OUT_F32`]), or the values rounded
/// to nearest even to float16 (F16C's `vcvtps2ph`, [`OUT_F16`]) or bfloat16 (integer
/// rounding, [`OUT_BF16`]) with plain stores: the 16-bit outputs fused into the same pass.
///
/// # Safety
/// AVX2 and F16C; `k.src` holds `h × w` pixels of `S` bytes; `k.dst` points to `3 × h × w`
/// writable elements of the output type, 16-byte aligned for [`OUT_F32`]; `w` is a
/// multiple of 32; `HASH` only with [`OUT_F32`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
#[allow(clippy::needless_range_loop)] // `v` and `c` index the 3 x 4 lane vectors
unsafe fn planes_avx2<const S: usize, const MIRROR: bool, const HASH: bool, const OUT: u8>(
    k: PlaneArgs<'_>,
    parts: &mut [[u32; 32]; 3],
) {
    // SAFETY: the caller upholds this function's contract (its doc and `# Safety`).
    unsafe {
        use super::fingerprint::P32;
        use std::arch::x86_64::*;
        let PlaneArgs {
            src,
            h,
            w,
            a,
            dst: dp,
        } = k;
        let hw = h * w;
        debug_assert!(src.len() >= hw * S && w.is_multiple_of(32));
        let (one, bias, quiet) = (
            _mm256_set1_epi32(1),
            _mm256_set1_epi32(0x7FFF),
            _mm256_set1_epi32(0x0040),
        );
        // Per channel, per lane, per output dword: the byte to take (-1: zero). A lane holds
        // 4 pixels: RGB at bytes 0, 3, 6, 9 of the low lane (bytes 0-15 of the 8 pixels) and
        // 4, 7, 10, 13 of the high lane (bytes 8-23); RGBX at 0, 4, 8, 12 of each. Mirrored,
        // the lanes are loaded swapped and each takes its pixels in reverse.
        let mut masks = [_mm256_setzero_si256(); 3];
        for (c, m) in masks.iter_mut().enumerate() {
            let mut b = [-1i8; 32];
            for lane in 0..2 {
                // Which half of the 8 pixels this lane holds once loaded.
                let half = if MIRROR { 1 - lane } else { lane };
                for k in 0..4 {
                    let i = if MIRROR { 3 - k } else { k };
                    let at = if S == 3 { 3 * i + 4 * half } else { 4 * i };
                    b[lane * 16 + 4 * k] = (at + c) as i8;
                }
            }
            *m = _mm256_loadu_si256(b.as_ptr() as *const __m256i);
        }
        let p32 = _mm256_set1_epi32(P32 as i32);
        let scale = [0, 1, 2].map(|c| _mm256_set1_ps(a.scale[c]));
        let shift = [0, 1, 2].map(|c| _mm256_set1_ps(a.shift[c]));
        let sp = src.as_ptr();
        let mut state = [[_mm256_setzero_si256(); 4]; 3];
        for (c, st) in state.iter_mut().enumerate() {
            for (v, s) in st.iter_mut().enumerate() {
                *s = _mm256_loadu_si256(parts[c][8 * v..].as_ptr() as *const __m256i);
            }
        }
        for y in 0..h {
            let srow = sp.add(y * w * S);
            for x32 in (0..w).step_by(32) {
                for v in 0..4 {
                    let x = x32 + 8 * v;
                    // Source pixels of output pixels x .. x + 8 (mirrored: the same 8 from
                    // the other end, reversed by the masks).
                    let sx = if MIRROR { w - 8 - x } else { x };
                    let p = srow.add(sx * S);
                    let (lo, hi) = if S == 3 {
                        (p, p.add(8))
                    } else {
                        (p, p.add(16))
                    };
                    let (first, second) = if MIRROR { (hi, lo) } else { (lo, hi) };
                    let px = _mm256_inserti128_si256::<1>(
                        _mm256_castsi128_si256(_mm_loadu_si128(first as *const __m128i)),
                        _mm_loadu_si128(second as *const __m128i),
                    );
                    for c in 0..3 {
                        let v8 = _mm256_shuffle_epi8(px, masks[c]);
                        let f = _mm256_add_ps(
                            _mm256_mul_ps(_mm256_cvtepi32_ps(v8), scale[c]),
                            shift[c],
                        );
                        let at = c * hw + y * w + x;
                        match OUT {
                            OUT_F32 => {
                                let d = (dp as *mut f32).add(at);
                                _mm_stream_ps(d, _mm256_castps256_ps128(f));
                                _mm_stream_ps(d.add(4), _mm256_extractf128_ps::<1>(f));
                            }
                            OUT_F16 => {
                                let h16 = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f);
                                _mm_storeu_si128((dp as *mut u16).add(at) as *mut __m128i, h16);
                            }
                            _ => {
                                // bfloat16: (bits + 0x7FFF + lsb) >> 16; a NaN quiet
                                let b = _mm256_castps_si256(f);
                                let top = _mm256_srli_epi32::<16>(b);
                                let lsb = _mm256_and_si256(top, one);
                                let r = _mm256_srli_epi32::<16>(_mm256_add_epi32(
                                    b,
                                    _mm256_add_epi32(bias, lsb),
                                ));
                                let nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(f, f));
                                let r = _mm256_blendv_epi8(r, _mm256_or_si256(top, quiet), nan);
                                // 8 dwords below 65536 to 8 words: pack within the lanes,
                                // then take the low quadword of each lane.
                                let p =
                                    _mm256_permute4x64_epi64::<0b1000>(_mm256_packus_epi32(r, r));
                                _mm_storeu_si128(
                                    (dp as *mut u16).add(at) as *mut __m128i,
                                    _mm256_castsi256_si128(p),
                                );
                            }
                        }
                        if HASH {
                            let s = &mut state[c][v];
                            let t = _mm256_mullo_epi32(
                                _mm256_xor_si256(*s, _mm256_castps_si256(f)),
                                p32,
                            );
                            *s = _mm256_xor_si256(t, _mm256_srli_epi32::<15>(t));
                        }
                    }
                }
            }
        }
        // Non-temporal stores are weakly ordered: fence them before the batch is handed on.
        _mm_sfence();
        for (c, st) in state.iter().enumerate() {
            for (v, s) in st.iter().enumerate() {
                _mm256_storeu_si256(parts[c][8 * v..].as_mut_ptr() as *mut __m256i, *s);
            }
        }
    }
}

/// [`planes_avx2`]'s output: float32 (non-temporal stores).
const OUT_F32: u8 = 0;
/// [`planes_avx2`]'s output: float16 bits.
const OUT_F16: u8 = 1;
/// [`planes_avx2`]'s output: bfloat16 bits.
const OUT_BF16: u8 = 2;

/// The arguments of [`planes_avx2`] but the fingerprint state.
#[derive(Clone, Copy)]
struct PlaneArgs<'a> {
    src: &'a [u8],
    h: usize,
    w: usize,
    a: &'a Affine,
    dst: *mut u8,
}

impl<'a> PlaneArgs<'a> {
    /// The kernel's arguments for `src` into `dst` (`dst_len` elements), or `None` where
    /// the kernel does not apply: no AVX2 or F16C, an empty image, a width that is not a
    /// multiple of 32, a stride other than 3 or 4, or buffers too short.
    #[cfg(target_arch = "x86_64")]
    fn checked(
        src: Interleaved<'a>,
        a: &'a Affine,
        dst: *mut u8,
        dst_len: usize,
    ) -> Option<PlaneArgs<'a>> {
        let hw = src.height * src.width;
        let applies = std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("f16c")
            && hw > 0
            && src.width.is_multiple_of(32)
            && (src.stride == 3 || src.stride == 4)
            && src.data.len() >= hw * src.stride
            && dst_len >= hw * 3;
        applies.then(|| PlaneArgs {
            src: &src.data[..hw * src.stride],
            h: src.height,
            w: src.width,
            a,
            dst,
        })
    }
}

/// [`planes_avx2`] for the run-time `stride` (3 or 4) and column `order`.
///
/// # Safety
/// As [`planes_avx2`].
#[cfg(target_arch = "x86_64")]
unsafe fn planes<const OUT: u8, const HASH: bool>(
    k: PlaneArgs<'_>,
    stride: usize,
    order: ColumnOrder,
    parts: &mut [[u32; 32]; 3],
) {
    // SAFETY: the caller upholds `planes_avx2`'s contract.
    unsafe {
        let mirror = order == ColumnOrder::RightToLeft;
        match (stride, mirror) {
            (3, false) => planes_avx2::<3, false, HASH, OUT>(k, parts),
            (3, true) => planes_avx2::<3, true, HASH, OUT>(k, parts),
            (_, false) => planes_avx2::<4, false, HASH, OUT>(k, parts),
            (_, true) => planes_avx2::<4, true, HASH, OUT>(k, parts),
        }
    }
}

/// [`write_planes_streaming`] for a 16-bit float output (`dtype` F16 or BF16, as bits):
/// the values rounded to nearest even in the same pass, with plain stores. False, writing
/// nothing, where it does not apply (no AVX2 or F16C, a width not a multiple of 32).
pub fn write_planes_narrow(
    src: Interleaved<'_>,
    affine: Option<&Affine>,
    order: ColumnOrder,
    dst: &mut [u16],
    dtype: DType,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if !dtype.is_half() {
            return false;
        }
        let a = affine.copied().unwrap_or_else(Affine::identity);
        let Some(k) = PlaneArgs::checked(src, &a, dst.as_mut_ptr().cast(), dst.len()) else {
            return false;
        };
        let stride = src.stride;
        let mut parts = [[0u32; 32]; 3];
        // SAFETY: AVX2 and F16C (checked above); `dst` holds `3 × h × w` u16s and `src`
        // `h × w` pixels of `stride` bytes; the width is a multiple of 32; no hash.
        unsafe {
            if dtype == DType::F16 {
                planes::<OUT_F16, false>(k, stride, order, &mut parts)
            } else {
                planes::<OUT_BF16, false>(k, stride, order, &mut parts)
            }
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (src, affine, order, dst, dtype);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::imgproc::geometry::flip_horizontal;
    use crate::imgproc::half_float::narrow;
    use crate::imgproc::view::{rgb_and_rgbx, Dst, Pixels, View};
    use crate::imgproc::write::write;
    use crate::spec::Layout;

    /// The streaming write gives the plain write's bits (mirrored or not, RGB and RGBX),
    /// and the fingerprint it computes on the way is the fingerprint of those bytes.
    #[test]
    fn streaming_write_matches_the_plain_one_and_fingerprints_it() {
        use crate::imgproc::fingerprint::fingerprint;
        let (h, w) = (5, 64);
        let (rgb, rgbx) = rgb_and_rgbx(h, w);
        let a = Affine {
            scale: [0.017, 0.0175, -0.0174],
            shift: [-2.1, -2.03, 1.8],
        };
        let view = View {
            pixels: Pixels::U8(&rgb),
            height: h,
            width: w,
            layout: Layout::Hwc,
        };
        let mut plain = vec![0f32; h * w * 3];
        write(&view, Some(&a), Layout::Chw, Dst::F32(&mut plain)).unwrap();
        let mut mirrored = plain.clone();
        flip_horizontal(&mut mirrored, h, w, 3, Layout::Chw);
        for (src, stride) in [(&rgb, 3), (&rgbx, 4)] {
            let src = Interleaved {
                data: src,
                stride,
                height: h,
                width: w,
            };
            let orders = [
                (ColumnOrder::LeftToRight, &plain),
                (ColumnOrder::RightToLeft, &mirrored),
            ];
            for (order, want) in orders {
                for hash in [false, true] {
                    let mut got = vec![0f32; h * w * 3];
                    let Some(fp) = write_planes_streaming(src, Some(&a), order, &mut got, hash)
                    else {
                        assert!(!std::arch::is_x86_feature_detected!("avx2"));
                        assert!(
                            std::env::var_os("CI").is_none(),
                            "CI needs AVX2 for this test"
                        );
                        eprintln!("skipped: this CPU has no AVX2");
                        return;
                    };
                    let at = format!("{stride} bytes a pixel, {order:?}, hash {hash}");
                    assert_eq!(&got, want, "{at}");
                    let bytes: &[u8] = bytemuck::cast_slice(&got);
                    assert_eq!(fp, hash.then(|| fingerprint(bytes)), "{at}");
                }
            }
        }
        // A destination that is not 16-byte aligned, and widths that are not a multiple of
        // 32, are left to the other kernels.
        let mut buf = vec![0f32; h * w * 3 + 8];
        let off = buf.as_ptr().align_offset(16) + 1;
        let src = Interleaved {
            data: &rgb,
            stride: 3,
            height: h,
            width: w,
        };
        assert_eq!(
            write_planes_streaming(src, None, ColumnOrder::LeftToRight, &mut buf[off..], true),
            None
        );
        let mut out = vec![0f32; 3 * 2 * 40];
        let src = Interleaved {
            data: &rgb[..2 * 40 * 3],
            stride: 3,
            height: 2,
            width: 40,
        };
        assert_eq!(
            write_planes_streaming(src, None, ColumnOrder::LeftToRight, &mut out, true),
            None
        );
    }

    #[test]
    fn the_fused_16_bit_plane_write_is_the_float32_one_rounded() {
        let (h, w) = (5, 64);
        let (rgb, rgbx) = super::tests::rgb_and_rgbx(h, w);
        let a = Affine {
            scale: [0.017, 0.0175, -0.0174],
            shift: [-2.1, -2.03, 1.8],
        };
        for (src, stride) in [(&rgb, 3), (&rgbx, 4)] {
            let src = Interleaved {
                data: src,
                stride,
                height: h,
                width: w,
            };
            for order in [ColumnOrder::LeftToRight, ColumnOrder::RightToLeft] {
                let mut wide = vec![0f32; h * w * 3];
                if write_planes_streaming(src, Some(&a), order, &mut wide, false).is_none() {
                    assert!(std::env::var_os("CI").is_none(), "CI needs AVX2 and F16C");
                    eprintln!("skipped: this CPU has no AVX2 or F16C");
                    return;
                }
                for dtype in [DType::F16, DType::BF16] {
                    let mut want = vec![0u16; wide.len()];
                    narrow(&wide, dtype, &mut want).expect("narrow");
                    let mut got = vec![0u16; wide.len()];
                    assert!(write_planes_narrow(src, Some(&a), order, &mut got, dtype));
                    assert_eq!(got, want, "{dtype:?}, {stride} bytes a pixel, {order:?}");
                }
            }
        }
        let mut odd = vec![0u16; 3 * 5 * 40];
        let src = Interleaved {
            data: &rgb,
            stride: 3,
            height: 5,
            width: 40,
        };
        assert!(
            !write_planes_narrow(src, None, ColumnOrder::LeftToRight, &mut odd, DType::F16),
            "width 40"
        );
    }
}
