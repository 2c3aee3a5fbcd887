//! Pillow's `ImageOps` point operations on RGB u8 HWC images as per-channel lookup
//! tables: the tables of `autocontrast` (no cutoff) and `equalize`, computed from the
//! image's histograms, and the pass that applies a table.

/// Apply a per-channel lookup table.
pub(crate) fn lut(src: &[u8], tables: &[[u8; 256]; 3], dst: &mut [u8]) {
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
pub(crate) fn autocontrast_tables(src: &[u8]) -> [[u8; 256]; 3] {
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
pub(crate) fn equalize_tables(src: &[u8]) -> [[u8; 256]; 3] {
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
