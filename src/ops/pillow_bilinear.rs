//! Pillow's antialiased bilinear resampling of 8-bit images, with Pillow's arithmetic:
//! per output pixel a triangle filter widened by the scale factor, weights normalised in
//! double precision and rounded to 22-bit fixed point, a horizontal pass rounded to u8, then
//! a vertical pass. fast_image_resize keeps 16-bit coefficients and left a value 2 grey
//! levels off torchvision; this gives Pillow's bytes.
//!
//! Only a window of the resized image is computed, and the source may be a rectangle of
//! the image (a region decode): coefficients are computed in whole-image coordinates, as a
//! full resize computes them, so the window is exactly the crop of the full resize.

/// Pillow's `PRECISION_BITS` for 8-bit images: 32 - 8 - 2.
const PRECISION_BITS: u32 = 22;

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
    /// Outputs `start .. start + count` of an `in_size → out_size` resize, for a buffer that
    /// begins at source index `origin` and holds `avail` samples.
    fn compute(
        &mut self,
        in_size: usize,
        out_size: usize,
        start: usize,
        count: usize,
        origin: usize,
        avail: usize,
    ) -> Result<(), String> {
        let scale = in_size as f64 / out_size as f64;
        let filterscale = scale.max(1.0);
        let support = filterscale; // bilinear support is 1
        let ksize = support.ceil() as usize * 2 + 1;
        self.first.clear();
        self.len.clear();
        self.weights.clear();
        self.weights.resize(count * ksize, 0);
        self.ksize = ksize;
        let ss = 1.0 / filterscale;
        let mut k = std::mem::take(&mut self.scratch);
        k.clear();
        k.resize(ksize, 0.0);
        for (j, xx) in (start..start + count).enumerate() {
            let center = (xx as f64 + 0.5) * scale;
            let xmin = ((center - support + 0.5) as i64).max(0) as usize;
            let xmax = ((center + support + 0.5) as i64)
                .min(in_size as i64)
                .max(xmin as i64) as usize;
            let n = (xmax - xmin).min(ksize);
            let mut ww = 0.0;
            for (x, kx) in k.iter_mut().enumerate().take(n) {
                let d = ((x + xmin) as f64 - center + 0.5) * ss;
                let w = if d.abs() < 1.0 { 1.0 - d.abs() } else { 0.0 };
                *kx = w;
                ww += w;
            }
            for (x, kx) in k.iter_mut().enumerate().take(n) {
                if ww != 0.0 {
                    *kx /= ww;
                }
                let v = *kx * (1u32 << PRECISION_BITS) as f64;
                self.weights[j * ksize + x] = if v < 0.0 {
                    (v - 0.5) as i32
                } else {
                    (v + 0.5) as i32
                };
            }
            if xmin < origin || xmin + n > origin + avail {
                return Err(format!(
                    "resize: source samples {xmin}..{} are outside the decoded {origin}..{}",
                    xmin + n,
                    origin + avail
                ));
            }
            self.first.push(xmin - origin);
            self.len.push(n);
        }
        self.scratch = k;
        Ok(())
    }
}

#[inline(always)]
fn clip8(v: i32) -> u8 {
    (v >> PRECISION_BITS).clamp(0, 255) as u8
}

/// Reusable coefficient and intermediate buffers.
#[derive(Default)]
pub struct PillowBilinear {
    horiz: Axis,
    vert: Axis,
    mid: Vec<u8>,
    acc: Vec<i32>,
}

impl PillowBilinear {
    /// Resize the `full = (h, w)` image to `out = (oh, ow)` and write rows
    /// `win.0 .. win.0 + win.2`, columns `win.1 .. win.1 + win.3` of the result into `dst`
    /// (`ch` bytes a pixel, 3 or 4, the 4th carried). `src` holds the source rectangle at
    /// `origin = (top, left)` of size `size = (rows, cols)`.
    #[allow(clippy::too_many_arguments)]
    pub fn resize(
        &mut self,
        src: &[u8],
        ch: usize,
        full: (usize, usize),
        origin: (usize, usize),
        size: (usize, usize),
        out: (usize, usize),
        win: (usize, usize, usize, usize),
        dst: &mut [u8],
    ) -> Result<(), String> {
        let (fh, fw) = full;
        let (rows, cols) = size;
        let (top, left, wh, ww) = win;
        self.horiz.compute(fw, out.1, left, ww, origin.1, cols)?;
        self.vert.compute(fh, out.0, top, wh, origin.0, rows)?;
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
        if self.mid.len() < band * row_bytes {
            self.mid.resize(band * row_bytes, 0);
        }
        let hk = self.horiz.ksize;
        let h = &self.horiz;
        let src_band = &src[r0 * cols * ch..(r0 + band) * cols * ch];
        let mid = &mut self.mid[..band * row_bytes];
        match ch {
            4 => horizontal4(src_band, cols, &h.first, &h.len, &h.weights, hk, mid, ww),
            _ => horizontal3(src_band, cols, &h.first, &h.len, &h.weights, hk, mid, ww),
        }
        if dst.len() < wh * row_bytes {
            return Err("resize: output buffer too small".into());
        }
        let vk = self.vert.ksize;
        self.acc.resize(row_bytes, 0);
        for y in 0..wh {
            let f = self.vert.first[y] - r0;
            let n = self.vert.len[y];
            let k = &self.vert.weights[y * vk..y * vk + n];
            vertical_row(
                &self.mid[f * row_bytes..(f + n) * row_bytes],
                row_bytes,
                k,
                &mut self.acc,
                &mut dst[y * row_bytes..(y + 1) * row_bytes],
            );
        }
        Ok(())
    }
}

/// The horizontal pass over a band of rows, `CH` bytes a pixel.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn horizontal_generic<const CH: usize>(
    src: &[u8],
    cols: usize,
    first: &[usize],
    len: &[usize],
    weights: &[i32],
    ksize: usize,
    mid: &mut [u8],
    ww: usize,
) {
    for (srow, drow) in src
        .chunks_exact(cols * CH)
        .zip(mid.chunks_exact_mut(ww * CH))
    {
        for (x, out) in drow.chunks_exact_mut(CH).enumerate() {
            let (f, n) = (first[x], len[x]);
            let k = &weights[x * ksize..x * ksize + n];
            let mut acc = [1i32 << (PRECISION_BITS - 1); CH];
            for (p, &kt) in srow[f * CH..(f + n) * CH].chunks_exact(CH).zip(k) {
                for c in 0..CH {
                    acc[c] += p[c] as i32 * kt;
                }
            }
            for c in 0..CH {
                out[c] = clip8(acc[c]);
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn horizontal4(
    src: &[u8],
    cols: usize,
    first: &[usize],
    len: &[usize],
    weights: &[i32],
    ksize: usize,
    mid: &mut [u8],
    ww: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { horizontal4_avx2(src, cols, first, len, weights, ksize, mid, ww) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.1") {
        // SAFETY: the CPU supports SSE4.1 (checked just above).
        return unsafe { horizontal4_sse41(src, cols, first, len, weights, ksize, mid, ww) };
    }
    horizontal_generic::<4>(src, cols, first, len, weights, ksize, mid, ww)
}

/// Bounds every index the unchecked RGBX kernels use (once per call and per column;
/// `Axis::compute` already keeps taps inside the row) and returns the number of rows.
#[allow(clippy::too_many_arguments)]
fn check_taps(
    src: &[u8],
    cols: usize,
    first: &[usize],
    len: &[usize],
    weights: &[i32],
    ksize: usize,
    mid: &[u8],
    ww: usize,
) -> usize {
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
#[allow(clippy::too_many_arguments)]
unsafe fn horizontal4_sse41(
    src: &[u8],
    cols: usize,
    first: &[usize],
    len: &[usize],
    weights: &[i32],
    ksize: usize,
    mid: &mut [u8],
    ww: usize,
) {
    use std::arch::x86_64::*;
    let half = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
    let rows = check_taps(src, cols, first, len, weights, ksize, mid, ww);
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

/// The RGBX horizontal pass two taps at a time: two pixels widen to 8 × i32 in one AVX2
/// vector, multiplied by their two weights; the halves are added at the end. Integer sums
/// do not depend on their order, so the bytes are `horizontal_generic`'s.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn horizontal4_avx2(
    src: &[u8],
    cols: usize,
    first: &[usize],
    len: &[usize],
    weights: &[i32],
    ksize: usize,
    mid: &mut [u8],
    ww: usize,
) {
    use std::arch::x86_64::*;
    let half = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
    let rows = check_taps(src, cols, first, len, weights, ksize, mid, ww);
    let sp = src.as_ptr();
    let mp = mid.as_mut_ptr();
    let wp = weights.as_ptr();
    for y in 0..rows {
        let srow = sp.add(y * cols * 4);
        let drow = mp.add(y * ww * 4);
        for x in 0..ww {
            let (f, n) = (*first.get_unchecked(x), *len.get_unchecked(x));
            let k = wp.add(x * ksize);
            let mut acc8 = _mm256_setzero_si256();
            let mut p = srow.add(f * 4);
            let mut t = 0;
            // SAFETY (all pointer reads/writes here): `check_taps` bounds every index:
            // f + n <= cols, x * ksize + n <= weights.len(), rows * ww * 4 <= mid.len().
            while t + 2 <= n {
                let v = std::ptr::read_unaligned(p as *const i64);
                let wide = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(v));
                let w = _mm256_set_m128i(_mm_set1_epi32(*k.add(t + 1)), _mm_set1_epi32(*k.add(t)));
                acc8 = _mm256_add_epi32(acc8, _mm256_mullo_epi32(wide, w));
                p = p.add(8);
                t += 2;
            }
            let mut acc = _mm_add_epi32(
                _mm_add_epi32(
                    _mm256_castsi256_si128(acc8),
                    _mm256_extracti128_si256::<1>(acc8),
                ),
                half,
            );
            if t < n {
                let v = std::ptr::read_unaligned(p as *const i32);
                let wide = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(v));
                acc = _mm_add_epi32(acc, _mm_mullo_epi32(wide, _mm_set1_epi32(*k.add(t))));
            }
            let q = _mm_srai_epi32::<{ PRECISION_BITS as i32 }>(acc);
            let packed = _mm_packus_epi16(_mm_packs_epi32(q, q), _mm_setzero_si128());
            std::ptr::write_unaligned(drow.add(x * 4) as *mut i32, _mm_cvtsi128_si32(packed));
        }
    }
}

multiversion!(horizontal3, horizontal_generic::<3>, (src: &[u8], cols: usize, first: &[usize], len: &[usize], weights: &[i32], ksize: usize, mid: &mut [u8], ww: usize));

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

multiversion!(vertical_row, vertical_row_generic, (rows: &[u8], row_bytes: usize, k: &[i32], acc: &mut [i32], dst: &mut [u8]));

#[cfg(test)]
mod tests {
    use super::*;

    /// The dispatched RGBX kernel (AVX2 or SSE4.1 where the CPU has them) gives the bytes of
    /// the plain one, for shrinking and enlarging (odd and even tap counts).
    #[test]
    fn simd_horizontal_pass_matches_the_plain_one() {
        let (rows, cols) = (3usize, 97usize);
        let mut g = crate::plan::SplitMix64::new(11);
        let src: Vec<u8> = (0..rows * cols * 4).map(|_| g.next_u64() as u8).collect();
        for out in [5usize, 24, 31, 48, 96, 150, 300] {
            let mut axis = Axis::default();
            axis.compute(cols, out, 0, out, 0, cols).expect("inside");
            let mut a = vec![0u8; rows * out * 4];
            let mut b = vec![0u8; rows * out * 4];
            horizontal4(
                &src,
                cols,
                &axis.first,
                &axis.len,
                &axis.weights,
                axis.ksize,
                &mut a,
                out,
            );
            horizontal_generic::<4>(
                &src,
                cols,
                &axis.first,
                &axis.len,
                &axis.weights,
                axis.ksize,
                &mut b,
                out,
            );
            assert_eq!(a, b, "{cols} -> {out}");
        }
    }
}
