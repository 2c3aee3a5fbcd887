//! The random streams: one SplitMix64 generator per sample and epoch, derived from the
//! seed, the epoch and the sample's index alone, so what an op draws never depends on the
//! worker count or the order samples are claimed in. The plan (shuffle, replacements) and
//! the random ops draw from here.

/// SplitMix64: tiny, fast, and its output for a seed never changes.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, bound)` (`bound > 0`), by widening multiplication (Lemire), with
    /// rejection so there is no bias.
    pub fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0);
        let threshold = bound.wrapping_neg() % bound;
        loop {
            let m = (self.next_u64() as u128) * (bound as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Gamma(`shape`, 1), by Marsaglia and Tsang's method (shape below 1 boosted by
    /// `U^(1/shape)`).
    pub fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            let u = 1.0 - self.unit();
            return self.gamma(shape + 1.0) * u.powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u = 1.0 - self.unit();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }

    /// The log of a Gamma(`shape`, 1) draw: for shapes well below 1 the draw itself
    /// underflows to 0, its log does not.
    fn ln_gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            let u = 1.0 - self.unit();
            return self.ln_gamma(shape + 1.0) + u.ln() / shape;
        }
        self.gamma(shape).ln()
    }

    /// Beta(`a`, `b`), as `X / (X + Y)` of two gamma draws (from their logs, so tiny
    /// parameters give draws near 0 and 1, as they should, not 0/0).
    pub fn beta(&mut self, a: f64, b: f64) -> f64 {
        let lx = self.ln_gamma(a);
        let ly = self.ln_gamma(b);
        1.0 / (1.0 + (ly - lx).exp())
    }

    /// Standard normal, by Box–Muller from two `unit()` draws (one value per call).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]: the log is finite
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

pub(crate) fn mix(parts: &[u64]) -> u64 {
    let mut g = SplitMix64::new(0x6A09_E667_F3BC_C908);
    let mut h = 0u64;
    for &p in parts {
        g.0 ^= p;
        h = g.next_u64() ^ h.rotate_left(17);
    }
    h
}

/// The random stream of one sample in one epoch: the same for any worker count.
pub fn sample_rng(seed: u64, epoch: u64, index: usize) -> SplitMix64 {
    SplitMix64::new(mix(&[seed, epoch, index as u64, 0x5A4D]))
}

/// The random stream of batch `batch` in one epoch (MixUp, CutMix): the same for any worker
/// count.
pub fn batch_rng(seed: u64, epoch: u64, batch: usize) -> SplitMix64 {
    SplitMix64::new(mix(&[seed, epoch, batch as u64, 0x4241_5443]))
}

/// The stream that picks replacements for bad sample `index` (`on_error = "replace"`).
pub fn replacement_rng(seed: u64, epoch: u64, index: usize) -> SplitMix64 {
    SplitMix64::new(mix(&[seed, epoch, index as u64, 0x5245_504C]))
}
