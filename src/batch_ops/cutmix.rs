//! `cutmix`: torchvision v2's `CutMix(alpha)`: with probability `prob` (default 1), a box of
//! every sample is replaced by the same box of the previous sample (the first takes the
//! last's), and the soft labels are mixed by the share of the image each keeps. As
//! torchvision: `lam ~ Beta(alpha, alpha)`, a centre `(r_x, r_y)` uniform over the image, half
//! sides `int(r · W)`, `int(r · H)` with `r = sqrt(1 - lam) / 2`, clipped to the image; the
//! labels use `1 - box area / image area`.
//!
//! Draws, from the batch's stream ([`CutMix::draw`]): `unit()` for the probability, `lam`,
//! then `r_x = below(W)`, `r_y = below(H)`.

use super::mixup_cutmix::{Choice, Mixed, Mixer};
use super::{
    check_alpha, mix_rolled, mixable, one, BatchContext, BatchLowered, BatchOpDef, BatchView,
};
use crate::imgproc::Rect;
use crate::rng::SplitMix64;
use crate::spec::{check_prob, Layout, Spec, SpecError};
use std::sync::Arc;
use serde::{Deserialize, Serialize};

/// The `cutmix` batch op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CutMix {
    /// The Beta distribution's parameter (default 1).
    #[serde(default = "one")]
    pub alpha: f64,
    /// Probability of mixing a batch (default 1).
    #[serde(default = "one")]
    pub prob: f64,
}

/// What one batch draws: the box pasted and the label weight of each sample's own label.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cut {
    /// The box (rows and columns of the image).
    pub rect: Rect,
    /// `1 - box area / image area`.
    pub lam: f64,
}

impl CutMix {
    /// CutMix with `alpha`, every batch.
    pub fn new(alpha: f64) -> CutMix {
        CutMix { alpha, prob: 1.0 }
    }

    /// The cut for one batch of `h × w` images (`None`: this batch is not mixed).
    pub fn draw(&self, rng: &mut SplitMix64, h: usize, w: usize) -> Option<Cut> {
        match self.mixer().draw(rng, h, w) {
            Some(Mixed::CutMix(cut)) => Some(cut),
            _ => None,
        }
    }

    /// The kernel: `mixup_cutmix`'s, always CutMix.
    fn mixer(&self) -> Mixer {
        Mixer {
            mixup_alpha: self.alpha,
            cutmix_alpha: self.alpha,
            choice: Choice::CutMix,
            prob: self.prob,
        }
    }
}

impl BatchOpDef for CutMix {
    fn output_spec(&self, input: &Spec, at: &BatchContext) -> Result<Spec, SpecError> {
        check_alpha("alpha", self.alpha)?;
        check_prob("prob", self.prob)?;
        mixable(input, at)
    }

    fn lower(&self) -> BatchLowered {
        BatchLowered::Batch(Arc::new(self.mixer()))
    }
}

setters!(CutMix { prob: f64 });

/// torchvision v2's box for `lam` (the centre drawn from `rng`).
pub(crate) fn cut(lam: f64, rng: &mut SplitMix64, h: usize, w: usize) -> Cut {
    let rx = rng.below(w.max(1) as u64) as i64;
    let ry = rng.below(h.max(1) as u64) as i64;
    let r = 0.5 * (1.0 - lam).sqrt();
    let rw = (r * w as f64) as i64;
    let rh = (r * h as f64) as i64;
    let x1 = (rx - rw).max(0) as usize;
    let y1 = (ry - rh).max(0) as usize;
    let x2 = ((rx + rw) as usize).min(w);
    let y2 = ((ry + rh) as usize).min(h);
    let area = ((x2 - x1) * (y2 - y1)) as f64;
    Cut {
        rect: Rect {
            top: y1,
            left: x1,
            height: y2 - y1,
            width: x2 - x1,
        },
        lam: 1.0 - area / (w * h) as f64,
    }
}

/// Paste every sample's box from the previous sample, and mix the labels.
pub(crate) fn paste(b: &mut BatchView<'_>, cut: Cut, scratch: &mut Vec<f32>) {
    let (n, len) = (b.n, b.sample_len());
    let r = cut.rect;
    if n >= 2 && r.height > 0 && r.width > 0 {
        // Row runs of the box within one sample: (offset, length).
        let (h, w) = (b.height(), b.width());
        let runs: Vec<(usize, usize)> = match b.layout {
            Layout::Chw => (0..b.dims[0])
                .flat_map(|c| {
                    (r.top..r.top + r.height).map(move |y| (c * h * w + y * w + r.left, r.width))
                })
                .collect(),
            Layout::Hwc => {
                let c = b.dims[2];
                (r.top..r.top + r.height)
                    .map(|y| ((y * w + r.left) * c, r.width * c))
                    .collect()
            }
        };
        // The last sample's box, before it is overwritten.
        scratch.clear();
        for &(o, l) in &runs {
            scratch.extend_from_slice(&b.images[(n - 1) * len + o..][..l]);
        }
        for i in (1..n).rev() {
            for &(o, l) in &runs {
                let from = (i - 1) * len + o;
                b.images.copy_within(from..from + l, i * len + o);
            }
        }
        let mut at = 0;
        for &(o, l) in &runs {
            b.images[o..o + l].copy_from_slice(&scratch[at..at + l]);
            at += l;
        }
    }
    mix_rolled(b.labels, b.classes, n, cut.lam, scratch);
}
