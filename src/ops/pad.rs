//! `pad`: add `padding` pixels around the image — MindSpore's `Pad(padding, fill_value,
//! padding_mode)`, torchvision's `Pad(padding, fill, padding_mode)`. `padding` is one number
//! (every side), `[left/right, top/bottom]` or `[left, top, right, bottom]`; the new pixels
//! are `fill` (`constant`, the default) or copied from the image (`edge`, `reflect`,
//! `symmetric`, as `np.pad`, which torchvision uses for those modes).

use crate::imgproc::geometry::PadMode;
use super::image::Sample;
use super::kernel::{Kernel, Lowered, OpDef};
use crate::error::Fault;
use crate::spec::{Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Padding of each side: one number, `[left/right, top/bottom]` or `[left, top, right,
/// bottom]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Padding {
    /// Every side.
    All(usize),
    /// Left and right, top and bottom.
    Pair([usize; 2]),
    /// Left, top, right, bottom.
    Sides([usize; 4]),
}

impl Padding {
    /// `[left, top, right, bottom]`.
    pub fn sides(&self) -> [usize; 4] {
        match *self {
            Padding::All(p) => [p; 4],
            Padding::Pair([lr, tb]) => [lr, tb, lr, tb],
            Padding::Sides(s) => s,
        }
    }
}

/// The `pad` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Pad {
    /// Pixels added on each side.
    pub padding: Padding,
    /// Value of the new pixels for `constant` (0–255 units).
    #[serde(default)]
    pub fill: u8,
    /// `constant` (default), `edge`, `reflect` or `symmetric`.
    #[serde(default)]
    pub padding_mode: PadMode,
}

impl Pad {
    /// `padding` pixels on every side, black.
    pub fn new(padding: usize) -> Pad {
        Pad {
            padding: Padding::All(padding),
            fill: 0,
            padding_mode: PadMode::Constant,
        }
    }
}

setters!(Pad {
    padding: Padding,
    fill: u8,
    padding_mode: PadMode,
});

impl OpDef for Pad {
    /// The size grows by the padding.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        let [l, t, r, b] = self.padding.sides();
        if [l, t, r, b].iter().any(|&p| p > 4096) {
            return Err(SpecError::param("padding", "must be at most 4096 a side"));
        }
        Ok(Spec {
            height: input.height.map(|h| h + t + b),
            width: input.width.map(|w| w + l + r),
            ..input.clone()
        })
    }

    fn lower(&self, _: &Spec) -> Lowered {
        if self.padding.sides() == [0; 4] {
            return Lowered::Nothing("pad of 0");
        }
        Lowered::Kernel(Arc::new(self.clone()))
    }
}

impl Kernel for Pad {
    fn name(&self) -> &'static str {
        "pad"
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        let [l, t, r, b] = self.padding.sides();
        let size = (s.img.h + t + b, s.img.w + l + r);
        let at = (-(t as isize), -(l as isize));
        s.img
            .crop_mode(&mut s.input, at, size, self.padding_mode, self.fill);
        Ok(())
    }
}
