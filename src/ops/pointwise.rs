//! The pointwise tail of a pipeline, fused: `rescale` and `normalize` fold into one
//! multiply-add per channel ([`Affine`]), `hwc_to_chw` into the order the result is written
//! in, and the result goes straight into the sample's slot of the batch buffer — one pass
//! over the pixels, whatever the number of pointwise ops.

use super::image::{bug, Elem, Sample};
use super::kernel::Kernel;
use crate::error::Fault;
use crate::spec::{DType, Layout};

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

/// 8-bit pixels row after row, `stride` bytes a pixel (RGB: 3; RGBX: 4, the X byte
/// ignored): what a decode or a resize leaves for the final write.
#[derive(Clone, Copy, Debug)]
pub struct Interleaved<'a> {
    /// The pixels (at least `height × width × stride` bytes).
    pub data: &'a [u8],
    /// Bytes a pixel.
    pub stride: usize,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
}

/// Where to write: a u8 or f32 slice of exactly `3 × h × w` elements.
#[derive(Debug)]
pub enum Dst<'a> {
    /// 8-bit (only when no affine map applies and the source is u8).
    U8(&'a mut [u8]),
    /// float.
    F32(&'a mut [f32]),
}

/// Round float32 values to the 16-bit float `dtype` (F16 or BF16, to nearest even), as
/// their bits: the last step of a `type_cast` of the image to float16 or bfloat16.
pub(crate) fn narrow(src: &[f32], dtype: DType, dst: &mut [u16]) -> Result<(), Fault> {
    use half::slice::HalfFloatSliceExt;
    let n = src.len();
    if dst.len() < n {
        return Err(bug("the 16-bit output is smaller than the sample"));
    }
    match dtype {
        DType::F16 => {
            bytemuck::cast_slice_mut::<u16, half::f16>(&mut dst[..n]).convert_from_f32_slice(src)
        }
        DType::BF16 => to_bf16(src, &mut dst[..n]),
        DType::U8 | DType::F32 => return Err(bug("narrow needs a 16-bit float type")),
    }
    Ok(())
}

#[inline(always)]
fn to_bf16_generic(src: &[f32], dst: &mut [u16]) {
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = to_bf16_bits(x);
    }
}

multiversion!(to_bf16, to_bf16_generic, (src: &[f32], dst: &mut [u16]));

/// `x` as bfloat16 bits, rounded to nearest even (a NaN stays a quiet NaN): what
/// `half::bf16::from_f32` gives, branch-free so that the loop above vectorizes (AVX2: it
/// needs 32-bit lanes packed to 16).
#[inline]
fn to_bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let rounded = (b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16) as u16;
    let quiet = (b >> 16) as u16 | 0x0040;
    if x.is_nan() {
        quiet
    } else {
        rounded
    }
}

/// The 16-bit floats `src` (bits of `dtype`, F16 or BF16) as float32 values, into `dst`
/// (cleared first); exact.
pub(crate) fn widen(src: &[u16], dtype: DType, dst: &mut Vec<f32>) {
    use half::slice::HalfFloatSliceExt;
    dst.clear();
    dst.resize(src.len(), 0.0);
    match dtype {
        DType::BF16 => bytemuck::cast_slice::<u16, half::bf16>(src).convert_to_f32_slice(dst),
        _ => bytemuck::cast_slice::<u16, half::f16>(src).convert_to_f32_slice(dst),
    }
}

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

/// The pending pointwise ops applied into a working image of their own, where a kernel
/// follows them (a crop after a normalize): the affine map, if any, makes it float; the
/// layout is the one the pixels are in from here on.
#[derive(Debug)]
pub(crate) struct Pointwise {
    pub(crate) affine: Option<Affine>,
    pub(crate) layout: Layout,
}

impl Kernel for Pointwise {
    fn name(&self) -> &'static str {
        "pointwise"
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        let img = &mut *s.img;
        let n = img.h * img.w * 3;
        let to_f32 = self.affine.is_some() || img.elem == Elem::F32;
        let pixels = match (img.elem, s.input.take()) {
            (Elem::U8, Some(data)) => Pixels::U8(data),
            (Elem::U8, None) => Pixels::U8(&img.a8),
            (Elem::F32, _) => Pixels::F32(&img.af),
        };
        let view = View {
            pixels,
            height: img.h,
            width: img.w,
            layout: img.layout,
        };
        if to_f32 {
            img.bf.resize(n, 0.0); // fully overwritten by `write`
            write(
                &view,
                self.affine.as_ref(),
                self.layout,
                Dst::F32(&mut img.bf),
            )?;
            std::mem::swap(&mut img.af, &mut img.bf);
            img.elem = Elem::F32;
        } else {
            img.b8.resize(n, 0); // fully overwritten by `write`
            write(&view, None, self.layout, Dst::U8(&mut img.b8))?;
            std::mem::swap(&mut img.a8, &mut img.b8);
        }
        img.layout = self.layout;
        Ok(())
    }
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

/// `src`'s pixels (`stride` 3 or 4 bytes) into float CHW planes through `affine`,
/// mirrored left-right when `mirror`: the write of the ImageNet pipelines into the batch
/// buffer, with AVX2 and non-temporal stores (the 602 KB a sample go straight to memory,
/// not read in first and not left to evict the worker's cache). With `hash`, it also
/// computes the fingerprint of the bytes it writes from its registers, one fingerprint
/// part per plane ([`crate::engine::fingerprint`]).
///
/// Returns `None`, writing nothing, where it does not apply (no AVX2, a width that is not
/// a multiple of 32, a destination not 16-byte aligned); else `Some(fingerprint)`, the
/// fingerprint being `None` unless `hash`.
pub fn write_planes_streaming(
    src: Interleaved<'_>,
    affine: Option<&Affine>,
    mirror: bool,
    dst: &mut [f32],
    hash: bool,
) -> Option<Option<u64>> {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::engine::fingerprint::{from_parts, start_lanes};
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
                planes::<OUT_F32, true>(k, stride, mirror, &mut parts)
            } else {
                planes::<OUT_F32, false>(k, stride, mirror, &mut parts)
            }
        }
        Some(hash.then(|| from_parts(hw * 12, &parts)))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (src, affine, mirror, dst, hash);
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
        use crate::engine::fingerprint::P32;
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

/// [`planes_avx2`] for the run-time `stride` (3 or 4) and `mirror`.
///
/// # Safety
/// As [`planes_avx2`].
#[cfg(target_arch = "x86_64")]
unsafe fn planes<const OUT: u8, const HASH: bool>(
    k: PlaneArgs<'_>,
    stride: usize,
    mirror: bool,
    parts: &mut [[u32; 32]; 3],
) {
    // SAFETY: the caller upholds `planes_avx2`'s contract.
    unsafe {
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
    mirror: bool,
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
                planes::<OUT_F16, false>(k, stride, mirror, &mut parts)
            } else {
                planes::<OUT_BF16, false>(k, stride, mirror, &mut parts)
            }
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (src, affine, mirror, dst, dtype);
        false
    }
}

/// Like [`write()`] for `src`'s pixels (`stride` 3 or 4 bytes) into float planes, mirrored
/// left-right on the way: a pending flip costs no pass of its own. Returns false, writing
/// nothing, for any other combination (the caller then writes and flips the written
/// sample).
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

    /// An `h × w` test image as RGB and as RGBX (X = 99).
    pub(super) fn rgb_and_rgbx(h: usize, w: usize) -> (Vec<u8>, Vec<u8>) {
        let rgb: Vec<u8> = (0..h * w * 3).map(|i| (i * 7 % 251) as u8).collect();
        let rgbx = rgb
            .chunks_exact(3)
            .flat_map(|p| [p[0], p[1], p[2], 99])
            .collect();
        (rgb, rgbx)
    }

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

    /// The streaming write gives the plain write's bits (mirrored or not, RGB and RGBX),
    /// and the fingerprint it computes on the way is the fingerprint of those bytes.
    #[test]
    fn streaming_write_matches_the_plain_one_and_fingerprints_it() {
        use crate::engine::fingerprint::fingerprint;
        use crate::imgproc::geometry::flip_horizontal;
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
            for (mirror, want) in [(false, &plain), (true, &mirrored)] {
                for hash in [false, true] {
                    let mut got = vec![0f32; h * w * 3];
                    let Some(fp) = write_planes_streaming(src, Some(&a), mirror, &mut got, hash)
                    else {
                        assert!(!std::arch::is_x86_feature_detected!("avx2"));
                        assert!(
                            std::env::var_os("CI").is_none(),
                            "CI needs AVX2 for this test"
                        );
                        eprintln!("skipped: this CPU has no AVX2");
                        return;
                    };
                    let at = format!("{stride} bytes a pixel, mirror {mirror}, hash {hash}");
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
            write_planes_streaming(src, None, false, &mut buf[off..], true),
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
            write_planes_streaming(src, None, false, &mut out, true),
            None
        );
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

#[cfg(test)]
mod narrow_tests {
    use super::*;

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
            for mirror in [false, true] {
                let mut wide = vec![0f32; h * w * 3];
                if write_planes_streaming(src, Some(&a), mirror, &mut wide, false).is_none() {
                    assert!(std::env::var_os("CI").is_none(), "CI needs AVX2 and F16C");
                    eprintln!("skipped: this CPU has no AVX2 or F16C");
                    return;
                }
                for dtype in [DType::F16, DType::BF16] {
                    let mut want = vec![0u16; wide.len()];
                    narrow(&wide, dtype, &mut want).expect("narrow");
                    let mut got = vec![0u16; wide.len()];
                    assert!(write_planes_narrow(src, Some(&a), mirror, &mut got, dtype));
                    assert_eq!(
                        got, want,
                        "{dtype:?}, {stride} bytes a pixel, mirror {mirror}"
                    );
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
            !write_planes_narrow(src, None, false, &mut odd, DType::F16),
            "width 40"
        );
    }

    #[test]
    fn bfloat16_bits_are_halfs_rounding_for_every_kind_of_value() {
        let mut xs = vec![
            0.0f32,
            -0.0,
            1.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::MAX,
            f32::MIN_POSITIVE,
            1e-45,
            f32::from_bits(0x3F80_8000), // a tie, rounded to even (down)
            f32::from_bits(0x3F81_8000), // a tie, rounded to even (up)
            f32::from_bits(0x7F7F_FFFF), // rounds up to infinity
        ];
        let mut state = 0x9E37_79B9u32;
        for _ in 0..100_000 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            xs.push(f32::from_bits(state));
        }
        let mut got = vec![0u16; xs.len()];
        narrow(&xs, DType::BF16, &mut got).expect("bf16");
        for (x, g) in xs.iter().zip(&got) {
            let want = half::bf16::from_f32(*x);
            if x.is_nan() {
                assert!(half::bf16::from_bits(*g).is_nan(), "{x:?}");
            } else {
                assert_eq!(*g, want.to_bits(), "{x:?} ({:#x})", x.to_bits());
            }
        }
    }
}
