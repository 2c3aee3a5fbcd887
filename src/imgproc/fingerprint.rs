//! Per-sample fingerprints: a 64-bit digest of a sample's output bytes, computed by the
//! worker that wrote the sample (`[engine] fingerprint = true`; `imgfeed run` turns it on
//! and folds them into the digest it prints).
//!
//! Hashing on the consumer thread instead read every output byte back from memory: on the
//! raw-shards training pipeline (602 KB of floats a sample) that was 15% of an epoch's
//! CPU time, on the thread that competes with the workers for the same two cores. The
//! function splits the bytes into three parts so that the float CHW write can compute it
//! from its registers, one part per plane, as it streams the planes out
//! ([`super::write_planes::write_planes_streaming`]); other outputs are hashed after
//! the write, while they are in cache.
//!
//! The function, stable across versions and machines (tests re-derive it):
//! * the bytes are split into three equal consecutive parts when their length is a
//!   nonzero multiple of 384 (three planes of whole 128-byte steps), and are one part
//!   otherwise;
//! * each part is read as little-endian `u32` words, 128 bytes a step, into its own 32
//!   lanes; lane `k` of part `q` starts at `0x811c9dc5 ^ (32q + k)` and takes its word `w`
//!   as `x = (lane ^ w) * 0x01000193 (mod 2^32); lane = x ^ (x >> 15)`: every step is a
//!   bijection of the lane, so changing any one word always changes the result;
//! * then FNV-1a 64 (offset `0xcbf29ce484222325`, prime `0x100000001b3`) over the byte
//!   length (as one `u64`), the parts' lanes in order (each as one `u64`), and, for a
//!   single part, its trailing `len % 128` bytes one at a time.
//!
//! The lanes map onto 32-bit SIMD multiplies (compiled for AVX2 when the CPU has it); the
//! three parts advance together, twelve independent vectors a step (four alone were
//! bound by the multiply's latency).

/// Lanes of one part.
pub const LANES: usize = 32;
const STEP: usize = LANES * 4;
/// A length this divides splits into three parts.
pub const THREE_PARTS: usize = 3 * STEP;
/// The fingerprint's lane multiplier.
pub const P32: u32 = 0x0100_0193;
const OFFSET32: u32 = 0x811c_9dc5;
const P64: u64 = 0x100_0000_01b3;
/// FNV-1a 64's offset basis: where a fold of fingerprints starts.
pub const OFFSET64: u64 = 0xcbf2_9ce4_8422_2325;

/// One FNV-1a 64 step over a whole `u64`.
#[inline]
pub fn fold(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(P64)
}

/// The starting lanes of part `q`.
pub fn start_lanes(q: usize) -> [u32; LANES] {
    let mut l = [0u32; LANES];
    for (k, x) in l.iter_mut().enumerate() {
        *x = OFFSET32 ^ (LANES * q + k) as u32;
    }
    l
}

#[inline(always)]
fn step(lanes: &mut [u32; LANES], c: &[u8]) {
    for (k, l) in lanes.iter_mut().enumerate() {
        let w = u32::from_le_bytes([c[4 * k], c[4 * k + 1], c[4 * k + 2], c[4 * k + 3]]);
        let x = (*l ^ w).wrapping_mul(P32);
        *l = x ^ (x >> 15);
    }
}

#[inline(always)]
fn three_generic(bytes: &[u8], lanes: &mut [[u32; LANES]; 3]) {
    let part = bytes.len() / 3;
    let (a, rest) = bytes.split_at(part);
    let (b, c) = rest.split_at(part);
    let [la, lb, lc] = lanes;
    for ((sa, sb), sc) in a
        .chunks_exact(STEP)
        .zip(b.chunks_exact(STEP))
        .zip(c.chunks_exact(STEP))
    {
        step(la, sa);
        step(lb, sb);
        step(lc, sc);
    }
}

#[inline(always)]
fn one_generic(bytes: &[u8], lanes: &mut [u32; LANES]) {
    for c in bytes.chunks_exact(STEP) {
        step(lanes, c);
    }
}

fn three(bytes: &[u8], lanes: &mut [[u32; LANES]; 3]) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2(bytes: &[u8], lanes: &mut [[u32; LANES]; 3]) {
            three_generic(bytes, lanes)
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { avx2(bytes, lanes) };
        }
    }
    three_generic(bytes, lanes)
}

fn one(bytes: &[u8], lanes: &mut [u32; LANES]) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2(bytes: &[u8], lanes: &mut [u32; LANES]) {
            one_generic(bytes, lanes)
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { avx2(bytes, lanes) };
        }
    }
    one_generic(bytes, lanes)
}

/// The fingerprint of `len` bytes split in three parts (`len` a multiple of
/// [`THREE_PARTS`]) whose lanes are `parts`.
pub fn from_parts(len: usize, parts: &[[u32; LANES]; 3]) -> u64 {
    let mut h = fold(OFFSET64, len as u64);
    for l in parts.iter().flatten() {
        h = fold(h, *l as u64);
    }
    h
}

/// The fingerprint of `bytes` (see the module docs for the exact function).
pub fn fingerprint(bytes: &[u8]) -> u64 {
    if !bytes.is_empty() && bytes.len().is_multiple_of(THREE_PARTS) {
        let mut parts = [start_lanes(0), start_lanes(1), start_lanes(2)];
        three(bytes, &mut parts);
        return from_parts(bytes.len(), &parts);
    }
    let mut lanes = start_lanes(0);
    one(bytes, &mut lanes);
    let mut h = fold(OFFSET64, bytes.len() as u64);
    for l in lanes {
        h = fold(h, l as u64);
    }
    for &b in bytes.chunks_exact(STEP).remainder() {
        h = fold(h, b as u64);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same function, one word at a time, as the module docs state it.
    fn reference(bytes: &[u8]) -> u64 {
        let n = bytes.len();
        let parts = if n > 0 && n.is_multiple_of(384) { 3 } else { 1 };
        let part = if parts == 3 { n / 3 } else { n / 128 * 128 };
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        let mut step = |v: u64| h = (h ^ v).wrapping_mul(0x100_0000_01b3);
        step(n as u64);
        for q in 0..parts {
            let mut lanes: Vec<u32> = (0..32u32)
                .map(|k| 0x811c_9dc5 ^ (32 * q as u32 + k))
                .collect();
            for (i, w) in bytes[q * part..(q + 1) * part].chunks_exact(4).enumerate() {
                let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                let l = &mut lanes[i % 32];
                let x = (*l ^ w).wrapping_mul(0x0100_0193);
                *l = x ^ (x >> 15);
            }
            for l in lanes {
                step(l as u64);
            }
        }
        if parts == 1 {
            for &b in &bytes[part..] {
                step(b as u64);
            }
        }
        h
    }

    #[test]
    fn matches_the_documented_function_and_sees_every_byte() {
        let bytes: Vec<u8> = (0..1200u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for n in [0, 1, 127, 128, 129, 384, 640, 768, 1152, 1200] {
            let b = &bytes[..n];
            assert_eq!(fingerprint(b), reference(b), "{n} bytes");
            for i in 0..n {
                let mut c = b.to_vec();
                c[i] ^= 0x80;
                assert_ne!(fingerprint(&c), fingerprint(b), "byte {i} of {n}");
            }
        }
        // Length counts: zero padding is not the same data.
        assert_ne!(fingerprint(&[0; 128]), fingerprint(&[0; 256]));
        assert_ne!(fingerprint(&[0; 384]), fingerprint(&[0; 768]));
        // Two flips of the top bit in one lane do not cancel.
        let mut c = bytes[..768].to_vec();
        c[3] ^= 0x80;
        c[131] ^= 0x80;
        assert_ne!(fingerprint(&c), fingerprint(&bytes[..768]));
        // The parts do not commute: swapping two equal-length parts changes the result.
        let mut s = bytes[..384].to_vec();
        s.rotate_left(128);
        assert_ne!(fingerprint(&s), fingerprint(&bytes[..384]));
    }
}
