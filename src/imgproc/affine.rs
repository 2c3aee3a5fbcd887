//! The per-channel affine map `x * scale + shift` that `rescale` and `normalize` lower to:
//! a run of them composes into one ([`Affine::then`]), applied by the pixel writers as they
//! write.

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

    /// The map that undoes this one (`None` when a factor is 0 or the inverse is not
    /// finite: the values cannot be told apart any more).
    pub fn inverse(self) -> Option<Affine> {
        let mut out = Affine::identity();
        for c in 0..3 {
            let s = 1.0 / self.scale[c];
            if self.scale[c] == 0.0 || !s.is_finite() {
                return None;
            }
            out.scale[c] = s;
            out.shift[c] = -self.shift[c] * s;
        }
        Some(out)
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
}
