//! Per-sample fingerprints: a 64-bit digest of a sample's output bytes, computed by the
//! worker right after it wrote the sample into its batch slot, while those bytes are
//! still in its cache (`[engine] fingerprint = true`; `imgfeed run` turns it on and folds
//! them into the digest it prints).
//!
//! Hashing on the consumer thread instead read every output byte back from memory: on the
//! raw-shards training pipeline (602 KB of floats a sample) that was 15% of an epoch's
//! CPU time, on the thread that competes with the workers for the same two cores.
//!
//! The function, stable across versions and machines (tests re-derive it):
//! * the bytes are read as little-endian `u32` words, 256 bytes a step, into 64 lanes;
//!   lane `k` starts at `0x811c9dc5 ^ k` and takes its word `w` as
//!   `x = (lane ^ w) * 0x01000193 (mod 2^32); lane = x ^ (x >> 15)`: every step is a
//!   bijection of the lane, so changing any one word always changes the result;
//! * then FNV-1a 64 (offset `0xcbf29ce484222325`, prime `0x100000001b3`) over the byte
//!   length (as one `u64`), the 64 lanes (each as one `u64`), and the trailing
//!   `len % 256` bytes one at a time.
//!
//! The lanes map onto 32-bit SIMD multiplies: compiled for AVX2 when the CPU has it, eight
//! independent vectors a step (with four, the multiply's latency bound it: 15% slower).

const LANES: usize = 64;
const STEP: usize = LANES * 4;
const P32: u32 = 0x0100_0193;
const OFFSET32: u32 = 0x811c_9dc5;
const P64: u64 = 0x100_0000_01b3;
/// FNV-1a 64's offset basis: where a fold of fingerprints starts.
pub const OFFSET64: u64 = 0xcbf2_9ce4_8422_2325;

/// One FNV-1a 64 step over a whole `u64`.
#[inline]
pub fn fold(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(P64)
}

#[inline(always)]
fn lanes_generic(bytes: &[u8]) -> [u32; LANES] {
    let mut lanes = [0u32; LANES];
    for (k, l) in lanes.iter_mut().enumerate() {
        *l = OFFSET32 ^ k as u32;
    }
    for c in bytes.chunks_exact(STEP) {
        for (k, l) in lanes.iter_mut().enumerate() {
            let w = u32::from_le_bytes([c[4 * k], c[4 * k + 1], c[4 * k + 2], c[4 * k + 3]]);
            let x = (*l ^ w).wrapping_mul(P32);
            *l = x ^ (x >> 15);
        }
    }
    lanes
}

fn lanes(bytes: &[u8]) -> [u32; LANES] {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2(bytes: &[u8]) -> [u32; LANES] {
            lanes_generic(bytes)
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { avx2(bytes) };
        }
    }
    lanes_generic(bytes)
}

/// The fingerprint of `bytes` (see the module docs for the exact function).
pub fn fingerprint(bytes: &[u8]) -> u64 {
    let mut h = fold(OFFSET64, bytes.len() as u64);
    for l in lanes(bytes) {
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
        let mut lanes: Vec<u32> = (0..64u32).map(|k| OFFSET32 ^ k).collect();
        let whole = bytes.len() / 256 * 256;
        for (i, w) in bytes[..whole].chunks_exact(4).enumerate() {
            let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            let l = &mut lanes[i % 64];
            let x = (*l ^ w).wrapping_mul(0x0100_0193);
            *l = x ^ (x >> 15);
        }
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        let mut step = |v: u64| h = (h ^ v).wrapping_mul(0x100_0000_01b3);
        step(bytes.len() as u64);
        for l in lanes {
            step(l as u64);
        }
        for &b in &bytes[whole..] {
            step(b as u64);
        }
        h
    }

    #[test]
    fn matches_the_documented_function_and_sees_every_byte() {
        let bytes: Vec<u8> = (0..1000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for n in [0, 1, 255, 256, 257, 640, 1000] {
            let b = &bytes[..n];
            assert_eq!(fingerprint(b), reference(b), "{n} bytes");
            for i in 0..n {
                let mut c = b.to_vec();
                c[i] ^= 0x80;
                assert_ne!(fingerprint(&c), fingerprint(b), "byte {i} of {n}");
            }
        }
        // Length counts: zero padding is not the same data.
        assert_ne!(fingerprint(&[0; 256]), fingerprint(&[0; 512]));
        // Two flips of the top bit in one lane do not cancel.
        let mut c = bytes[..512].to_vec();
        c[3] ^= 0x80;
        c[259] ^= 0x80;
        assert_ne!(fingerprint(&c), fingerprint(&bytes[..512]));
    }
}
