//! Pillow's antialiased bilinear resampling of 8-bit images, with Pillow's arithmetic:
//! per output pixel a triangle filter widened by the scale factor, weights normalised in
//! double precision and rounded to 22-bit fixed point, a horizontal pass rounded to u8, then
//! a vertical pass. fast_image_resize keeps 16-bit coefficients and left a value 2 grey
//! levels off torchvision; this gives Pillow's bytes.
//!
//! Only a window of the resized image is computed, and the source may be a rectangle of
//! the image (a region decode): coefficients are computed in whole-image coordinates, as a
//! full resize computes them, so the window is exactly the crop of the full resize.

use super::geometry::Rect;
use crate::error::bug;
use crate::error::Fault;

/// Pillow's `PRECISION_BITS` for 8-bit images: 32 - 8 - 2.
const PRECISION_BITS: u32 = 22;

/// The pixels a resize reads: a rectangle of the source image, or a buffer the image lies
/// inside (a crop box read in place).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Source<'a> {
    /// `rect.height × rect.width` pixels of `ch` bytes, row after row.
    pub(crate) data: &'a [u8],
    /// Bytes a pixel: 3, or 4 (the 4th carried).
    pub(crate) ch: usize,
    /// Where `data` lies in the image's coordinates; a negative corner: the image starts
    /// inside `data`, at `(-top, -left)` ([`Rect::around`]).
    pub(crate) rect: Rect<isize>,
}

/// The resize: the whole source image's `(h, w)` to the whole output's `(oh, ow)` (the
/// scale factors; a window of the output may be all that is computed).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    /// Size of the whole source image.
    pub(crate) full: (usize, usize),
    /// Size of the whole resized image.
    pub(crate) out: (usize, usize),
}

/// One axis of a windowed resize: outputs `start .. start + count` of an
/// `in_size → out_size` resize, for a buffer that begins at source index `origin`
/// (negative: the source starts inside the buffer, at `-origin`) and holds `avail` samples.
#[derive(Clone, Copy, Debug)]
struct AxisSpan {
    /// Source samples along the axis, the whole image's.
    in_size: usize,
    /// Output samples along the axis, the whole resized image's.
    out_size: usize,
    /// First output computed.
    start: usize,
    /// Outputs computed.
    count: usize,
    /// Source index of the buffer's first sample.
    origin: isize,
    /// Samples the buffer holds.
    avail: usize,
}

/// An [`Axis`]' taps, borrowed for a horizontal pass: output `x` weighs the `len[x]` source
/// pixels from `first[x]` by `weights[x * ksize ..][.. len[x]]`.
#[derive(Clone, Copy)]
struct Taps<'a> {
    first: &'a [usize],
    len: &'a [usize],
    weights: &'a [i32],
    ksize: usize,
}

/// One axis: for each output index, the first source index (relative to the buffer) and
/// the fixed-point weights of its taps (`ksize` per output, unused ones zero).
#[derive(Default)]
struct Axis {
    first: Vec<usize>,
    len: Vec<usize>,
    weights: Vec<i32>,
    ksize: usize,
    /// Per-output double-precision weights, reused.
    scratch: Vec<f64>,
}

impl Axis {
    /// The outputs `span` asks for; an error where their taps reach outside its buffer.
    fn compute(&mut self, span: AxisSpan) -> Result<(), Fault> {
        self.compute_with(span, avx2())
    }

    /// `compute`, with the AVX2 weights (`simd`, which the caller checked the CPU has) or
    /// the scalar ones.
    fn compute_with(&mut self, span: AxisSpan, simd: bool) -> Result<(), Fault> {
        let AxisSpan {
            in_size,
            out_size,
            start,
            count,
            origin,
            avail,
        } = span;
        let c = Coeffs::new(in_size, out_size);
        let ksize = c.ksize;
        self.first.clear();
        self.len.clear();
        self.weights.clear();
        self.weights.resize(count * ksize, 0);
        self.ksize = ksize;
        for xx in start..start + count {
            let (xmin, n) = c.bounds(xx);
            let at = xmin as isize - origin;
            if at < 0 || at as usize + n > avail {
                return Err(bug(format!(
                    "resize: source samples {xmin}..{} are outside the decoded {origin}..{}",
                    xmin + n,
                    origin + avail as isize
                )));
            }
            self.first.push(xmin);
            self.len.push(n);
        }
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if simd {
            // SAFETY: the CPU supports AVX2 (the caller checked).
            done = unsafe { weights_avx2(&c, start, &self.first, &self.len, &mut self.weights) };
        }
        let mut k = std::mem::take(&mut self.scratch);
        k.resize(ksize, 0.0);
        for j in done..count {
            let (xmin, n) = (self.first[j], self.len[j]);
            c.weights(
                start + j,
                xmin,
                n,
                &mut k,
                &mut self.weights[j * ksize..][..n],
            );
        }
        self.scratch = k;
        #[cfg(not(target_arch = "x86_64"))]
        let _ = simd;
        for f in &mut self.first {
            *f = (*f as isize - origin) as usize; // checked above
        }
        Ok(())
    }

    /// The computed taps, for a horizontal pass.
    fn taps(&self) -> Taps<'_> {
        Taps {
            first: &self.first,
            len: &self.len,
            weights: &self.weights,
            ksize: self.ksize,
        }
    }
}

/// Pillow's `precompute_coeffs` for the bilinear (triangle) filter, one axis.
struct Coeffs {
    in_size: usize,
    scale: f64,
    support: f64,
    /// `1 / filterscale`.
    ss: f64,
    ksize: usize,
}

impl Coeffs {
    fn new(in_size: usize, out_size: usize) -> Coeffs {
        let scale = in_size as f64 / out_size as f64;
        let filterscale = scale.max(1.0);
        let support = filterscale; // bilinear support is 1
        Coeffs {
            in_size,
            scale,
            support,
            ss: 1.0 / filterscale,
            ksize: support.ceil() as usize * 2 + 1,
        }
    }

    fn center(&self, xx: usize) -> f64 {
        (xx as f64 + 0.5) * self.scale
    }

    /// First source index and number of taps of output `xx`.
    fn bounds(&self, xx: usize) -> (usize, usize) {
        let center = self.center(xx);
        let xmin = ((center - self.support + 0.5) as i64).max(0) as usize;
        let xmax = ((center + self.support + 0.5) as i64)
            .min(self.in_size as i64)
            .max(xmin as i64) as usize;
        (xmin, (xmax - xmin).min(self.ksize))
    }

    /// The fixed-point weights of output `xx` (taps `xmin .. xmin + n`), one at a time.
    fn weights(&self, xx: usize, xmin: usize, n: usize, k: &mut [f64], out: &mut [i32]) {
        let center = self.center(xx);
        let mut ww = 0.0;
        for (x, kx) in k.iter_mut().enumerate().take(n) {
            let d = ((x + xmin) as f64 - center + 0.5) * self.ss;
            let w = if d.abs() < 1.0 { 1.0 - d.abs() } else { 0.0 };
            *kx = w;
            ww += w;
        }
        for (kx, o) in k.iter_mut().zip(out.iter_mut()).take(n) {
            if ww != 0.0 {
                *kx /= ww;
            }
            let v = *kx * (1u32 << PRECISION_BITS) as f64;
            *o = if v < 0.0 {
                (v - 0.5) as i32
            } else {
                (v + 0.5) as i32
            };
        }
    }
}

/// The weights of four outputs at a time, in double-precision vectors: the same
/// operations in the same order as [`Coeffs::weights`] (IEEE division and all), so the
/// same fixed-point weights; taps past an output's count are masked to zero, and adding
/// zero leaves its sum as it was. Returns how many outputs it did (a multiple of 4).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn weights_avx2(
    c: &Coeffs,
    start: usize,
    first: &[usize],
    len: &[usize],
    weights: &mut [i32],
) -> usize {
    // SAFETY: the caller upholds this function's contract (its doc and `# Safety`).
    unsafe {
        use std::arch::x86_64::*;
        let count = first.len().min(len.len());
        let ks = c.ksize;
        if ks > 64 || weights.len() < count * ks {
            return 0;
        }
        let mut tmp = [_mm256_setzero_pd(); 64];
        let zero = _mm256_setzero_pd();
        let one = _mm256_set1_pd(1.0);
        let half = _mm256_set1_pd(0.5);
        let abs = _mm256_castsi256_pd(_mm256_set1_epi64x(i64::MAX));
        let ss = _mm256_set1_pd(c.ss);
        let fixed = _mm256_set1_pd((1u32 << PRECISION_BITS) as f64);
        let quads = count / 4;
        for q in 0..quads {
            let j = 4 * q;
            let lane = |i: usize| {
                (
                    first[j + i] as f64,
                    len[j + i] as f64,
                    c.center(start + j + i),
                )
            };
            let (l0, l1, l2, l3) = (lane(0), lane(1), lane(2), lane(3));
            let xmin = _mm256_setr_pd(l0.0, l1.0, l2.0, l3.0);
            let n = _mm256_setr_pd(l0.1, l1.1, l2.1, l3.1);
            let center = _mm256_setr_pd(l0.2, l1.2, l2.2, l3.2);
            let mut ww = zero;
            for (x, t) in tmp.iter_mut().enumerate().take(ks) {
                let xf = _mm256_set1_pd(x as f64);
                // ((x + xmin) - center + 0.5) * ss; x + xmin is exact in a double.
                let d = _mm256_mul_pd(
                    _mm256_add_pd(_mm256_sub_pd(_mm256_add_pd(xf, xmin), center), half),
                    ss,
                );
                // |d| < 1 ? 1 - |d| : 0, as max(1 - |d|, +0) (1 - |d| <= 0 exactly when |d| >= 1).
                let w = _mm256_max_pd(_mm256_sub_pd(one, _mm256_and_pd(d, abs)), zero);
                let w = _mm256_and_pd(w, _mm256_cmp_pd::<_CMP_LT_OQ>(xf, n));
                ww = _mm256_add_pd(ww, w);
                *t = w;
            }
            let nonzero = _mm256_cmp_pd::<_CMP_NEQ_OQ>(ww, zero);
            for (x, &t) in tmp.iter().enumerate().take(ks) {
                let k = _mm256_blendv_pd(t, _mm256_div_pd(t, ww), nonzero);
                let v = _mm256_cvttpd_epi32(_mm256_add_pd(_mm256_mul_pd(k, fixed), half));
                let mut o = [0i32; 4];
                _mm_storeu_si128(o.as_mut_ptr() as *mut __m128i, v);
                for (i, &oi) in o.iter().enumerate() {
                    // Taps past the count stay zero (masked weights give 0 here too).
                    weights[(j + i) * ks + x] = oi;
                }
            }
        }
        4 * quads
    }
}

#[inline(always)]
fn clip8(v: i32) -> u8 {
    (v >> PRECISION_BITS).clamp(0, 255) as u8
}

/// Reusable coefficient and intermediate buffers.
#[derive(Default)]
pub(crate) struct PillowBilinear {
    horiz: Axis,
    vert: Axis,
    hv: HorizVectors,
    mid: Vec<u8>,
    acc: Vec<i32>,
}

impl PillowBilinear {
    /// Resize the `geo.full = (h, w)` image to `geo.out = (oh, ow)` and write the `window`
    /// of the result into `dst` (`src.ch` bytes a pixel, 3 or 4, the 4th carried), reading
    /// the pixels `src` holds.
    pub(crate) fn resize(
        &mut self,
        src: Source<'_>,
        geo: Geometry,
        window: Rect,
        dst: &mut [u8],
    ) -> Result<(), Fault> {
        self.resize_with(src, geo, window, dst, true)
    }

    /// `resize`, with the SIMD kernels (`simd`, where the CPU has AVX2) or the plain ones.
    fn resize_with(
        &mut self,
        src: Source<'_>,
        geo: Geometry,
        window: Rect,
        dst: &mut [u8],
        simd: bool,
    ) -> Result<(), Fault> {
        let simd = simd && avx2();
        let Source {
            data: src,
            ch,
            rect: held,
        } = src;
        let (rows, cols) = held.size();
        let ((fh, fw), (oh, ow)) = (geo.full, geo.out);
        let (top, left, wh, ww) = (window.top, window.left, window.height, window.width);
        self.horiz.compute(AxisSpan {
            in_size: fw,
            out_size: ow,
            start: left,
            count: ww,
            origin: held.left,
            avail: cols,
        })?;
        self.vert.compute(AxisSpan {
            in_size: fh,
            out_size: oh,
            start: top,
            count: wh,
            origin: held.top,
            avail: rows,
        })?;
        // Source rows the vertical pass reads: the horizontal pass covers only those.
        let r0 = self.vert.first.iter().copied().min().unwrap_or(0);
        let r1 = self
            .vert
            .first
            .iter()
            .zip(&self.vert.len)
            .map(|(f, l)| f + l)
            .max()
            .unwrap_or(0);
        let band = r1.saturating_sub(r0);
        let row_bytes = ww * ch;
        // 4 bytes of slack for the AVX2 horizontal pass's RGB stores.
        if self.mid.len() < band * row_bytes + 4 {
            self.mid.resize(band * row_bytes + 4, 0);
        }
        let h = &self.horiz;
        let taps = h.taps();
        let src_band = &src[r0 * cols * ch..(r0 + band) * cols * ch];
        let mid = &mut self.mid[..band * row_bytes + 4];
        #[cfg(target_arch = "x86_64")]
        if simd {
            self.hv.build(h, cols, ch);
            let hv = &self.hv;
            // SAFETY: the CPU supports AVX2 (`avx2()` above).
            unsafe {
                match (ch, hv.two_taps) {
                    // Enlarging (at most 2 taps an output) skips the empty tap pair.
                    (4, true) => horizontal_avx2::<4, true>(src_band, cols, taps, hv, mid, ww),
                    (4, false) => horizontal_avx2::<4, false>(src_band, cols, taps, hv, mid, ww),
                    (_, true) => horizontal_avx2::<3, true>(src_band, cols, taps, hv, mid, ww),
                    (_, false) => horizontal_avx2::<3, false>(src_band, cols, taps, hv, mid, ww),
                }
            }
        }
        if !simd {
            match ch {
                4 => horizontal4(src_band, cols, taps, mid, ww),
                _ => horizontal_generic::<3>(src_band, cols, taps, mid, ww),
            }
        }
        if dst.len() < wh * row_bytes {
            return Err(bug("resize: output buffer too small"));
        }
        let vk = self.vert.ksize;
        self.acc.resize(row_bytes, 0);
        for y in 0..wh {
            let f = self.vert.first[y] - r0;
            let n = self.vert.len[y];
            let k = &self.vert.weights[y * vk..y * vk + n];
            let rows = &self.mid[f * row_bytes..(f + n) * row_bytes];
            let d = &mut dst[y * row_bytes..(y + 1) * row_bytes];
            #[cfg(target_arch = "x86_64")]
            if simd {
                // SAFETY: the CPU supports AVX2 (`avx2()` above).
                unsafe { vertical_row_avx2(rows, row_bytes, k, d) };
                continue;
            }
            vertical_row_generic(rows, row_bytes, k, &mut self.acc, d);
        }
        Ok(())
    }
}

/// The horizontal pass over a band of rows of `cols` pixels, `CH` bytes a pixel, into
/// rows of `ww` pixels in `mid`.
#[inline(always)]
fn horizontal_generic<const CH: usize>(
    src: &[u8],
    cols: usize,
    taps: Taps<'_>,
    mid: &mut [u8],
    ww: usize,
) {
    let Taps {
        first,
        len,
        weights,
        ksize,
    } = taps;
    for (srow, drow) in src
        .chunks_exact(cols * CH)
        .zip(mid.chunks_exact_mut(ww * CH))
    {
        for (x, out) in drow.chunks_exact_mut(CH).enumerate() {
            out.copy_from_slice(&plain_pixel::<CH>(
                srow,
                first[x],
                &weights[x * ksize..][..len[x]],
            ));
        }
    }
}

/// One output pixel of the horizontal pass: taps `first ..` of `srow` weighted by `k`.
#[inline(always)]
fn plain_pixel<const CH: usize>(srow: &[u8], first: usize, k: &[i32]) -> [u8; CH] {
    let mut acc = [1i32 << (PRECISION_BITS - 1); CH];
    for (p, &kt) in srow[first * CH..(first + k.len()) * CH]
        .chunks_exact(CH)
        .zip(k)
    {
        for c in 0..CH {
            acc[c] += p[c] as i32 * kt;
        }
    }
    acc.map(clip8)
}

fn horizontal4(src: &[u8], cols: usize, taps: Taps<'_>, mid: &mut [u8], ww: usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.1") {
        // SAFETY: the CPU supports SSE4.1 (checked just above).
        return unsafe { horizontal4_sse41(src, cols, taps, mid, ww) };
    }
    horizontal_generic::<4>(src, cols, taps, mid, ww)
}

/// Bounds every index the unchecked RGBX kernels use (once per call and per column;
/// `Axis::compute` already keeps taps inside the row) and returns the number of rows.
fn check_taps(src: &[u8], cols: usize, taps: Taps<'_>, mid: &[u8], ww: usize) -> usize {
    let Taps {
        first,
        len,
        weights,
        ksize,
    } = taps;
    let rows = src.len() / (cols * 4);
    assert!(mid.len() >= rows * ww * 4 && first.len() >= ww && len.len() >= ww);
    for x in 0..ww {
        assert!((first[x] + len[x]) <= cols && x * ksize + len[x] <= weights.len());
    }
    rows
}

/// The RGBX horizontal pass with the four channels of a pixel in one vector: widen the
/// pixel to 4 × i32, multiply by the tap's weight, add; shift, saturate to u8 at the end.
/// The same integer arithmetic as `horizontal_generic`, so the same bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.1")]
unsafe fn horizontal4_sse41(src: &[u8], cols: usize, taps: Taps<'_>, mid: &mut [u8], ww: usize) {
    // SAFETY: the caller upholds this function's contract (its doc and `# Safety`).
    unsafe {
        use std::arch::x86_64::*;
        let half = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
        let rows = check_taps(src, cols, taps, mid, ww);
        let Taps {
            first,
            len,
            weights,
            ksize,
        } = taps;
        let sp = src.as_ptr();
        let mp = mid.as_mut_ptr();
        let wp = weights.as_ptr();
        for y in 0..rows {
            let srow = sp.add(y * cols * 4);
            let drow = mp.add(y * ww * 4);
            for x in 0..ww {
                let (f, n) = (*first.get_unchecked(x), *len.get_unchecked(x));
                let k = wp.add(x * ksize);
                let mut acc = half;
                let mut p = srow.add(f * 4);
                for t in 0..n {
                    // SAFETY (all pointer reads/writes here): `check_taps` bounds every
                    // index: f + n <= cols, x * ksize + n <= weights.len(), rows * ww * 4 <= mid.
                    let v = std::ptr::read_unaligned(p as *const i32);
                    let wide = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(v));
                    acc = _mm_add_epi32(acc, _mm_mullo_epi32(wide, _mm_set1_epi32(*k.add(t))));
                    p = p.add(4);
                }
                let q = _mm_srai_epi32::<{ PRECISION_BITS as i32 }>(acc);
                let packed = _mm_packus_epi16(_mm_packs_epi32(q, q), _mm_setzero_si128());
                std::ptr::write_unaligned(drow.add(x * 4) as *mut i32, _mm_cvtsi128_si32(packed));
            }
        }
    }
}

/// One output row of the vertical pass: a weighted sum of whole rows (vectorises fully).
#[inline(always)]
fn vertical_row_generic(rows: &[u8], row_bytes: usize, k: &[i32], acc: &mut [i32], dst: &mut [u8]) {
    acc.fill(1 << (PRECISION_BITS - 1));
    for (row, &kt) in rows.chunks_exact(row_bytes).zip(k) {
        for (a, &p) in acc.iter_mut().zip(row) {
            *a += p as i32 * kt;
        }
    }
    for (d, &a) in dst.iter_mut().zip(acc.iter()) {
        *d = clip8(a);
    }
}

/// Splits a 22-bit weight into `(hi, lo)` with `w = hi * 2^11 + lo`, both fitting i16, so
/// that 16-bit multiply-adds (`pmaddwd`, two taps a lane) compute Pillow's 32-bit sums
/// exactly: `Σ p·w = 2^11 · Σ p·hi + Σ p·lo`, every partial sum well inside i32.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const SPLIT: u32 = 11;

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline(always)]
fn split(w: i32) -> (i16, i16) {
    ((w >> SPLIT) as i16, (w & ((1 << SPLIT) - 1)) as i16)
}

/// The horizontal weights laid out for the AVX2 kernel: per pair of outputs and per group
/// of 4 taps, four 256-bit vectors (taps 0-1 hi, taps 2-3 hi, taps 0-1 lo, taps 2-3 lo),
/// the low 128 bits for the pair's first output, the high for its second; each 128-bit
/// half repeats the tap pair's `(w_t, w_t+1)` for the 4 channel slots. `first` is each
/// output's first source pixel moved left where a 16-byte load would run past the row
/// (its weights move right with it). Outputs from `simd_outputs` on run the plain way.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[derive(Default)]
struct HorizVectors {
    first: Vec<usize>,
    w: Vec<i16>,
    groups: usize,
    simd_outputs: usize,
    /// Every output has at most 2 taps, after realignment (enlarging): slots 2-3 of the
    /// single group are zero and the kernel skips them.
    two_taps: bool,
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
impl HorizVectors {
    /// Lays out `axis` for rows of `cols` pixels of `ch` bytes.
    fn build(&mut self, axis: &Axis, cols: usize, ch: usize) {
        let ww = axis.first.len();
        let maxn = axis.len.iter().copied().max().unwrap_or(0);
        let g = maxn.div_ceil(4).max(1);
        self.groups = g;
        self.two_taps = maxn <= 2;
        // Taps an output may hold after realignment; enlarging keeps to the first pair
        // (the right-edge outputs that would not are left to the plain loop).
        let cap = if self.two_taps { 2 } else { 4 * g };
        self.first.clear();
        // The last 16-byte load of an output starts at pixel `first + 4(g-1)`.
        let last_ok = |f: usize| (f + 4 * (g - 1)) * ch + 16 <= cols * ch;
        let mut simd = 0;
        for x in 0..ww {
            let (f, n) = (axis.first[x], axis.len[x]);
            // Move the window left (zero weights in front) when the load would overrun.
            let limit = (cols * ch).saturating_sub(16) / ch;
            let f2 = f.min(limit.saturating_sub(4 * (g - 1)));
            if !last_ok(f2) || f - f2 + n > cap {
                break;
            }
            self.first.push(f2);
            simd = x + 1;
        }
        let pairs = simd / 2;
        self.simd_outputs = pairs * 2;
        self.w.clear();
        self.w.resize(pairs * g * 4 * 16, 0);
        // Enlarging leaves the second tap pair's vectors zero (the kernel skips them).
        let vectors = if self.two_taps { 1 } else { 2 };
        for (pg, block) in self.w.chunks_exact_mut(64).enumerate() {
            let (p, gi) = (pg / g, pg % g);
            for half in 0..2 {
                let x = 2 * p + half;
                // Slot t of this output's 4g slots holds tap t - shift.
                let shift = axis.first[x] - self.first[x];
                let k = &axis.weights[x * axis.ksize..][..axis.len[x]];
                let mut slots = [0i32; 4];
                for (t, s) in slots.iter_mut().enumerate() {
                    if let Some(&w) = k.get((4 * gi + t).wrapping_sub(shift)) {
                        *s = w;
                    }
                }
                for v in 0..vectors {
                    let (h0, l0) = split(slots[2 * v]);
                    let (h1, l1) = split(slots[2 * v + 1]);
                    let at = v * 16 + half * 8;
                    block[at..at + 8].copy_from_slice(&[h0, h1, h0, h1, h0, h1, h0, h1]);
                    block[at + 32..at + 40].copy_from_slice(&[l0, l1, l0, l1, l0, l1, l0, l1]);
                }
            }
        }
    }
}

/// Whether the AVX2 kernels can run here.
fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The horizontal pass, two outputs at a time (one per 128-bit lane), four taps a group:
/// a 16-byte load per output, two shuffles widen taps 0-1 and 2-3 to `(p_t, p_t+1)` i16
/// pairs per channel, and four `pmaddwd` against the split weights. The outputs past
/// `hv.simd_outputs` (the right edge, where a load would overrun) run the plain way. Same
/// integer sums as `horizontal_generic`, so the same bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn horizontal_avx2<const CH: usize, const TWO_TAPS: bool>(
    src: &[u8],
    cols: usize,
    taps: Taps<'_>,
    hv: &HorizVectors,
    mid: &mut [u8],
    ww: usize,
) {
    // SAFETY: the caller upholds this function's contract (its doc and `# Safety`).
    unsafe {
        use std::arch::x86_64::*;
        let row = cols * CH;
        let rows = src.len() / row;
        let (g, simd) = (hv.groups, hv.simd_outputs);
        // Every index the unchecked loads and stores use, checked once per call.
        // The RGB stores of 8 outputs write 28 bytes for 24: 4 bytes of slack past the band.
        assert!(mid.len() >= rows * ww * CH + 4 && taps.first.len() >= ww && taps.len.len() >= ww);
        assert!(simd <= ww && hv.first.len() >= simd && hv.w.len() >= (simd / 2) * g * 64);
        for &f in &hv.first[..simd] {
            assert!((f + 4 * (g - 1)) * CH + 16 <= row);
        }
        let mut m01 = [-128i8; 32];
        let mut m23 = [-128i8; 32];
        for lane in 0..2 {
            for c in 0..CH {
                m01[lane * 16 + c * 4] = c as i8;
                m01[lane * 16 + c * 4 + 2] = (CH + c) as i8;
                m23[lane * 16 + c * 4] = (2 * CH + c) as i8;
                m23[lane * 16 + c * 4 + 2] = (3 * CH + c) as i8;
            }
        }
        // SAFETY (all pointer reads/writes below): the asserts above bound every index.
        let m01 = _mm256_loadu_si256(m01.as_ptr() as *const __m256i);
        let m23 = _mm256_loadu_si256(m23.as_ptr() as *const __m256i);
        let half = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
        let (sp, mp) = (src.as_ptr(), mid.as_mut_ptr());
        let wbase = hv.w.as_ptr() as *const __m256i;
        // Output pair `p` of row `srow`: channel sums of its two outputs (low lane: the
        // first), shifted down to `PRECISION_BITS`, not yet saturated. The rounding half
        // starts in the low accumulator: `(hi << 11) + lo + half` is the plain kernel's sum.
        let pair = |srow: *const u8, p: usize| -> __m256i {
            let x = 2 * p;
            let (f0, f1) = (*hv.first.get_unchecked(x), *hv.first.get_unchecked(x + 1));
            let mut ah = _mm256_setzero_si256();
            let mut al = half;
            let wp = wbase.add(p * g * 4);
            for gi in 0..g {
                let a = _mm_loadu_si128(srow.add((f0 + 4 * gi) * CH) as *const __m128i);
                let b = _mm_loadu_si128(srow.add((f1 + 4 * gi) * CH) as *const __m128i);
                let v = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(a), b);
                let s01 = _mm256_shuffle_epi8(v, m01);
                let w = wp.add(gi * 4);
                ah = _mm256_add_epi32(ah, _mm256_madd_epi16(s01, _mm256_loadu_si256(w)));
                al = _mm256_add_epi32(al, _mm256_madd_epi16(s01, _mm256_loadu_si256(w.add(2))));
                if !TWO_TAPS {
                    let s23 = _mm256_shuffle_epi8(v, m23);
                    ah = _mm256_add_epi32(ah, _mm256_madd_epi16(s23, _mm256_loadu_si256(w.add(1))));
                    al = _mm256_add_epi32(al, _mm256_madd_epi16(s23, _mm256_loadu_si256(w.add(3))));
                }
            }
            _mm256_srai_epi32::<{ PRECISION_BITS as i32 }>(_mm256_add_epi32(
                _mm256_slli_epi32::<{ SPLIT as i32 }>(ah),
                al,
            ))
        };
        // Four pairs saturate and store together: the two packs leave the eight outputs'
        // dwords in the order 0 2 4 6 | 1 3 5 7, one permute restores it, and for RGB a
        // shuffle drops each X byte (12 bytes a lane, stored 16 wide: `mid` has slack).
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let mut drop_x = [-128i8; 32];
        for lane in 0..2 {
            for i in 0..12 {
                drop_x[lane * 16 + i] = (i / 3 * 4 + i % 3) as i8;
            }
        }
        let drop_x = _mm256_loadu_si256(drop_x.as_ptr() as *const __m256i);
        let quads = simd / 8;
        for y in 0..rows {
            let srow = sp.add(y * row);
            let drow = mp.add(y * ww * CH);
            for q in 0..quads {
                let p = 4 * q;
                let a = _mm256_packs_epi32(pair(srow, p), pair(srow, p + 1));
                let b = _mm256_packs_epi32(pair(srow, p + 2), pair(srow, p + 3));
                let t = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(a, b), order);
                let d = drow.add(8 * q * CH);
                if CH == 4 {
                    _mm256_storeu_si256(d as *mut __m256i, t);
                } else {
                    let t = _mm256_shuffle_epi8(t, drop_x);
                    _mm_storeu_si128(d as *mut __m128i, _mm256_castsi256_si128(t));
                    _mm_storeu_si128(d.add(12) as *mut __m128i, _mm256_extracti128_si256::<1>(t));
                }
            }
            for p in 4 * quads..simd / 2 {
                let x = 2 * p;
                let t = pair(srow, p);
                let t = _mm256_packs_epi32(t, t);
                let t = _mm256_packus_epi16(t, t);
                let lo = _mm_cvtsi128_si32(_mm256_castsi256_si128(t)).to_le_bytes();
                let hi = _mm_cvtsi128_si32(_mm256_extracti128_si256::<1>(t)).to_le_bytes();
                std::ptr::copy_nonoverlapping(lo.as_ptr(), drow.add(x * CH), CH);
                std::ptr::copy_nonoverlapping(hi.as_ptr(), drow.add((x + 1) * CH), CH);
            }
        }
        // The right-edge outputs the vectors left, the plain way (checked indexing).
        for (srow, drow) in src.chunks_exact(row).zip(mid.chunks_exact_mut(ww * CH)) {
            for x in simd..ww {
                let k = &taps.weights[x * taps.ksize..][..taps.len[x]];
                drow[x * CH..(x + 1) * CH].copy_from_slice(&plain_pixel::<CH>(
                    srow,
                    taps.first[x],
                    k,
                ));
            }
        }
    }
}

/// One output row of the vertical pass, 32 bytes of the row at a time: per tap, four
/// 8-byte loads widened to i32 and multiplied by the tap's weight, four accumulators held
/// in registers across the taps (a 32-bit multiply is one cheap instruction on the CPUs
/// measured; splitting weights for `pmaddwd` took more instructions here). Same sums as
/// `vertical_row_generic`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn vertical_row_avx2(rows: &[u8], row_bytes: usize, k: &[i32], dst: &mut [u8]) {
    // SAFETY: the caller upholds this function's contract (its doc and `# Safety`).
    unsafe {
        use std::arch::x86_64::*;
        let n = k.len();
        assert!(rows.len() >= n * row_bytes && dst.len() >= row_bytes);
        let half = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
        // packs/packus interleave the four accumulators' lanes; this puts the dwords back.
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let rp = rows.as_ptr();
        let chunks = row_bytes / 32;
        for c in 0..chunks {
            let off = c * 32;
            let mut acc = [half; 4];
            for (t, &kt) in k.iter().enumerate() {
                let w = _mm256_set1_epi32(kt);
                for (i, a) in acc.iter_mut().enumerate() {
                    // SAFETY: t < n and off + 32 <= row_bytes, inside `rows` (asserted above).
                    let p = _mm_loadl_epi64(rp.add(t * row_bytes + off + 8 * i) as *const __m128i);
                    *a = _mm256_add_epi32(*a, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(p), w));
                }
            }
            let q = |i: usize| _mm256_srai_epi32::<{ PRECISION_BITS as i32 }>(acc[i]);
            let packed = _mm256_packus_epi16(
                _mm256_packs_epi32(q(0), q(1)),
                _mm256_packs_epi32(q(2), q(3)),
            );
            let out = _mm256_permutevar8x32_epi32(packed, order);
            // SAFETY: off + 32 <= row_bytes <= dst.len().
            _mm256_storeu_si256(dst.as_mut_ptr().add(off) as *mut __m256i, out);
        }
        for i in chunks * 32..row_bytes {
            let mut acc = 1i32 << (PRECISION_BITS - 1);
            for (t, &kt) in k.iter().enumerate() {
                acc += rows[t * row_bytes + i] as i32 * kt;
            }
            dst[i] = clip8(acc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dispatched RGBX kernel (AVX2 or SSE4.1 where the CPU has them) gives the bytes of
    /// the plain one, for shrinking and enlarging (odd and even tap counts).
    #[test]
    fn simd_horizontal_pass_matches_the_plain_one() {
        let (rows, cols) = (3usize, 97usize);
        let mut g = crate::rng::SplitMix64::new(11);
        let src: Vec<u8> = (0..rows * cols * 4).map(|_| g.next_u64() as u8).collect();
        for out in [5usize, 24, 31, 48, 96, 150, 300] {
            let mut axis = Axis::default();
            axis.compute(AxisSpan {
                in_size: cols,
                out_size: out,
                start: 0,
                count: out,
                origin: 0,
                avail: cols,
            })
            .expect("inside");
            let mut a = vec![0u8; rows * out * 4];
            let mut b = vec![0u8; rows * out * 4];
            horizontal4(&src, cols, axis.taps(), &mut a, out);
            horizontal_generic::<4>(&src, cols, axis.taps(), &mut b, out);
            assert_eq!(a, b, "{cols} -> {out}");
        }
    }

    /// The vectorised weights are the scalar ones, bit for bit: shrinking and enlarging,
    /// whole axes and windows, sizes that are not multiples of 4.
    #[test]
    fn simd_weights_match_the_scalar_ones() {
        if !avx2() {
            // CI's machines have AVX2: there, a skip would hide the kernel under test.
            assert!(
                std::env::var_os("CI").is_none(),
                "CI needs AVX2 for this test"
            );
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        let (mut a, mut b) = (Axis::default(), Axis::default());
        for in_size in (1..700).step_by(7).chain([224, 256, 341, 375, 500]) {
            for out_size in [1usize, 3, 31, 224, 256, 341] {
                for (start, count) in [(0, out_size), (out_size / 4, out_size / 2 + 1)] {
                    let span = AxisSpan {
                        in_size,
                        out_size,
                        start,
                        count: count.min(out_size - start),
                        origin: 0,
                        avail: in_size,
                    };
                    a.compute_with(span, true).expect("inside");
                    b.compute_with(span, false).expect("inside");
                    let at = format!("{in_size} -> {out_size} from {start}");
                    assert_eq!(a.weights, b.weights, "{at}");
                    assert_eq!((&a.first, &a.len), (&b.first, &b.len), "{at}");
                }
            }
        }
    }

    /// The AVX2 path (split-weight `pmaddwd` kernels, realigned right edge, plain tail)
    /// gives the plain kernels' bytes: 3 and 4 bytes a pixel, shrinking (1 to 9 taps) and
    /// enlarging, whole images and windows of region decodes, extreme and random pixels.
    #[test]
    fn simd_resize_matches_the_plain_kernels() {
        let mut g = crate::rng::SplitMix64::new(5);
        let mut a = PillowBilinear::default();
        let mut b = PillowBilinear::default();
        let cases = [
            ((37, 53), (20, 31)),
            ((375, 500), (256, 341)),
            ((40, 97), (13, 22)),
            ((12, 9), (31, 40)),
            ((5, 6), (5, 6)),
            ((333, 500), (33, 50)),
            ((2, 3), (1, 1)),
            ((64, 64), (224, 224)),
        ];
        for ch in [3usize, 4] {
            for &((h, w), (oh, ow)) in &cases {
                for pattern in 0..3 {
                    let src: Vec<u8> = (0..h * w * ch)
                        .map(|i| match pattern {
                            0 => g.next_u64() as u8,
                            1 => {
                                if (i / ch) % 2 == 0 {
                                    255
                                } else {
                                    0
                                }
                            }
                            _ => 255,
                        })
                        .collect();
                    // The whole image, then a window of the output.
                    let mut wins = vec![Rect::whole(oh, ow)];
                    if oh > 4 && ow > 4 {
                        wins.push(Rect {
                            top: oh / 4,
                            left: ow / 3,
                            height: oh / 2,
                            width: ow / 2,
                        });
                    }
                    let source = Source {
                        data: &src,
                        ch,
                        rect: Rect::whole(h, w).signed(),
                    };
                    let geo = Geometry {
                        full: (h, w),
                        out: (oh, ow),
                    };
                    for win in wins {
                        let n = win.height * win.width * ch;
                        let (mut da, mut db) = (vec![1u8; n], vec![2u8; n]);
                        a.resize_with(source, geo, win, &mut da, true)
                            .expect("inside");
                        b.resize_with(source, geo, win, &mut db, false)
                            .expect("inside");
                        assert_eq!(
                            da, db,
                            "{ch} channels, {h}x{w} -> {oh}x{ow}, window {win:?}"
                        );
                    }
                }
            }
        }
        // Region decodes: the source holds only a rectangle of the image.
        let (h, w, ch) = (300usize, 400usize, 4usize);
        let full: Vec<u8> = (0..h * w * ch).map(|_| g.next_u64() as u8).collect();
        let (top, left, rh, rw) = (40usize, 57usize, 220usize, 300usize);
        let rect: Vec<u8> = (0..rh)
            .flat_map(|y| {
                full[((top + y) * w + left) * ch..((top + y) * w + left + rw) * ch].to_vec()
            })
            .collect();
        let win = Rect {
            top: 40,
            left: 60,
            height: 100,
            width: 120,
        };
        let geo = Geometry {
            full: (h, w),
            out: (256, 341),
        };
        let (mut da, mut db) = (vec![0u8; 100 * 120 * 4], vec![0u8; 100 * 120 * 4]);
        let part = Source {
            data: &rect,
            ch,
            rect: Rect {
                top,
                left,
                height: rh,
                width: rw,
            }
            .signed(),
        };
        a.resize_with(part, geo, win, &mut da, true)
            .expect("inside");
        let whole = Source {
            data: &full,
            ch,
            rect: Rect::whole(h, w).signed(),
        };
        b.resize_with(whole, geo, win, &mut db, false)
            .expect("inside");
        assert_eq!(da, db);
    }
}
