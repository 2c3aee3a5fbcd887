//! `random_horizontal_flip`: mirror the image left-right with probability `prob`, drawn
//! from the sample's own random stream.
//!
//! The kernel draws; the mirror is deferred (`Mirror`, a `Deferred` of the op contract):
//! a mirror commutes with the pointwise tail, so the final write reads each row from its
//! last pixel to its first as it writes it ([`ColumnOrder::RightToLeft`]: the AVX2 plane
//! writes and the scalar mirrored write), and where its writer takes no order it mirrors
//! the sample it just wrote, still in cache. A kernel after the flip gets the pixels
//! mirrored in place first. No pass of its own on the training pipelines.

use super::image::{Elem, Held, Sample};
use super::kernel::{Deferred, Kernel, Lowered, OpDef};
use crate::error::Fault;
use crate::imgproc::geometry::flip_horizontal;
use crate::imgproc::{ColumnOrder, Dst};
use crate::spec::{Layout, Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The `random_horizontal_flip` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RandomHorizontalFlip {
    /// Probability of a flip (default 0.5).
    #[serde(default = "crate::spec::half")]
    pub prob: f64,
}

impl RandomHorizontalFlip {
    /// Flip with probability `prob`.
    pub fn new(prob: f64) -> RandomHorizontalFlip {
        RandomHorizontalFlip { prob }
    }
}

impl Default for RandomHorizontalFlip {
    /// Probability 0.5, as MindSpore and torchvision default.
    fn default() -> RandomHorizontalFlip {
        RandomHorizontalFlip::new(crate::spec::half())
    }
}

impl OpDef for RandomHorizontalFlip {
    /// Same spec out.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        crate::spec::check_prob("prob", self.prob)?;
        Ok(input.clone())
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Kernel(Arc::new(self.clone()))
    }
}

/// The kernel draws; the flip itself is deferred ([`Mirror`]).
impl Kernel for RandomHorizontalFlip {
    fn name(&self) -> &'static str {
        "flip"
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        if s.rng.unit() < self.prob {
            s.defer(&MIRROR);
        }
        Ok(())
    }

    /// RGBX pixels (a region decode's) are mirrored as they are, whole 4-byte pixels: no
    /// pack to RGB before the final write, which reads them.
    fn reads_rgbx(&self) -> bool {
        true
    }
}

/// A drawn flip, not applied yet: what the kernel asks of the next reader of the pixels.
#[derive(Debug)]
struct Mirror;

static MIRROR: Mirror = Mirror;

impl Deferred for Mirror {
    fn read_order(&self) -> ColumnOrder {
        ColumnOrder::RightToLeft
    }

    fn apply(&self, img: &mut Held, input: &mut Option<&[u8]>) {
        if let Some(data) = input.take() {
            // Flipping is in place: the source's pixels are copied first.
            img.a8.clear();
            img.a8.extend_from_slice(data);
        }
        let (h, w, layout) = (img.h, img.w, img.layout);
        match img.elem {
            // constant channel counts: each call is compiled for its own (a run-time count
            // made the RGB flip 3x slower)
            Elem::U8 if img.stride == 4 => flip_horizontal(&mut img.a8, h, w, 4, layout),
            Elem::U8 => flip_horizontal(&mut img.a8, h, w, 3, layout),
            Elem::F32 => flip_horizontal(&mut img.af, h, w, 3, layout),
        }
    }

    fn apply_written(&self, dst: &mut Dst<'_>, h: usize, w: usize, layout: Layout) {
        let n = h * w * 3;
        match dst {
            Dst::U8(d) => flip_horizontal(&mut d[..n], h, w, 3, layout),
            Dst::F32(d) => flip_horizontal(&mut d[..n], h, w, 3, layout),
        }
    }
}
