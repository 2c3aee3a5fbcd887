//! `random_color_adjust`: MindSpore's `RandomColorAdjust(brightness, contrast, saturation,
//! hue)`, torchvision's `ColorJitter`: each sample draws a factor for each of the four
//! adjustments given, uniformly in its range, and applies them in a random order, as
//! torchvision does — each adjustment the Pillow operation torchvision calls on a PIL image
//! (`ops/pil.rs`):
//!
//! * brightness `b`: `ImageEnhance.Brightness` (blend with black by `b`);
//! * contrast `c`: `ImageEnhance.Contrast` (blend with the mean grey by `c`);
//! * saturation `s`: `ImageEnhance.Color` (blend with the greyscale image by `s`);
//! * hue `h`: shift Pillow's 8-bit hue by `h × 255` (truncated, wrapping).
//!
//! A parameter is one number `x` — the range `[max(0, 1 - x), 1 + x]` (hue: `[-x, x]`,
//! `x <= 0.5`) — or a range `[min, max]`; `0` (the default) leaves that adjustment out.
//!
//! Draws, from the sample's stream: the order (a Fisher–Yates shuffle of the four, three
//! draws), then one `unit()` for each adjustment given, in the order brightness, contrast,
//! saturation, hue ([`RandomColorAdjust::draw`]).

use super::image::Sample;
use super::kernel::{Kernel, Lowered, OpDef};
use crate::imgproc::pil::{blend, grey_rgb, mean_grey, shift_hue, Degenerate};
use crate::error::Fault;
use crate::rng::SplitMix64;
use crate::spec::{DType, Layout, Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A jitter amount: one number or a `[min, max]` range.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Jitter {
    /// `x`: the range `[max(0, 1 - x), 1 + x]` (hue: `[-x, x]`).
    One(f64),
    /// `[min, max]`.
    Range([f64; 2]),
}

impl Default for Jitter {
    fn default() -> Jitter {
        Jitter::One(0.0)
    }
}

/// The `random_color_adjust` op.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RandomColorAdjust {
    /// Brightness factor range (default 0: unchanged).
    #[serde(default)]
    pub brightness: Jitter,
    /// Contrast factor range (default 0: unchanged).
    #[serde(default)]
    pub contrast: Jitter,
    /// Saturation factor range (default 0: unchanged).
    #[serde(default)]
    pub saturation: Jitter,
    /// Hue shift range, within `[-0.5, 0.5]` (default 0: unchanged).
    #[serde(default)]
    pub hue: Jitter,
}

impl RandomColorAdjust {
    /// Brightness, contrast, saturation and hue jitter of these amounts (0: left out).
    pub fn new(brightness: f64, contrast: f64, saturation: f64, hue: f64) -> RandomColorAdjust {
        RandomColorAdjust {
            brightness: Jitter::One(brightness),
            contrast: Jitter::One(contrast),
            saturation: Jitter::One(saturation),
            hue: Jitter::One(hue),
        }
    }
}

setters!(RandomColorAdjust {
    brightness: Jitter,
    contrast: Jitter,
    saturation: Jitter,
    hue: Jitter,
});

/// One of the four adjustments, with the factor drawn for it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Adjust {
    /// `ImageEnhance.Brightness(factor)`.
    Brightness(f64),
    /// `ImageEnhance.Contrast(factor)`.
    Contrast(f64),
    /// `ImageEnhance.Color(factor)`.
    Saturation(f64),
    /// Hue shift by `factor` of a turn.
    Hue(f64),
}

/// The ranges checked: `None` where an adjustment is left out.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Ranges([Option<[f64; 2]>; 4]);

/// `name`'s range: `[max(0, centre - x), centre + x]` for one number (`[-x, x]` when the
/// centre is 0), `None` when that is the single value `centre`.
fn range(
    name: &'static str,
    j: Jitter,
    centre: f64,
    bounds: [f64; 2],
) -> Result<Option<[f64; 2]>, SpecError> {
    let r = match j {
        Jitter::One(x) if !(x >= 0.0 && x.is_finite()) => {
            return Err(SpecError::param(name, format!("{x} must be a non-negative number")))
        }
        Jitter::One(x) if centre == 0.0 => [-x, x],
        Jitter::One(x) => [(centre - x).max(0.0), centre + x],
        Jitter::Range(r) => r,
    };
    if !(r[0] <= r[1] && r[0] >= bounds[0] && r[1] <= bounds[1]) {
        return Err(SpecError::param(
            name,
            format!(
                "range [{}, {}] must be ordered and within [{}, {}]",
                r[0], r[1], bounds[0], bounds[1]
            ),
        ));
    }
    Ok((r != [centre, centre]).then_some(r))
}

impl RandomColorAdjust {
    fn ranges(&self) -> Result<Ranges, SpecError> {
        let factor = [0.0, f64::MAX];
        Ok(Ranges([
            range("brightness", self.brightness, 1.0, factor)?,
            range("contrast", self.contrast, 1.0, factor)?,
            range("saturation", self.saturation, 1.0, factor)?,
            range("hue", self.hue, 0.0, [-0.5, 0.5])?,
        ]))
    }

    /// What one sample draws from `rng`: the adjustments in the order they apply (those
    /// left out are not drawn). The op's own checks are assumed (an unchecked op draws
    /// nothing).
    pub fn draw(&self, rng: &mut SplitMix64) -> Vec<Adjust> {
        let Ok(ranges) = self.ranges() else {
            return Vec::new();
        };
        draw(&ranges, rng)
    }
}

fn draw(ranges: &Ranges, rng: &mut SplitMix64) -> Vec<Adjust> {
    let mut order = [0usize, 1, 2, 3];
    for i in (1..4).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut factor = [0.0f64; 4];
    for (f, r) in factor.iter_mut().zip(&ranges.0) {
        if let Some([lo, hi]) = r {
            *f = lo + (hi - lo) * rng.unit();
        }
    }
    order
        .iter()
        .filter(|&&i| ranges.0[i].is_some())
        .map(|&i| match i {
            0 => Adjust::Brightness(factor[0]),
            1 => Adjust::Contrast(factor[1]),
            2 => Adjust::Saturation(factor[2]),
            _ => Adjust::Hue(factor[3]),
        })
        .collect()
}

/// Apply `adjust` to the `height × width` RGB u8 HWC image `src`, into `dst` (its size;
/// `scratch` holds the greyscale image a saturation blends with).
pub fn apply(adjust: Adjust, src: &[u8], dst: &mut [u8], scratch: &mut Vec<u8>) {
    match adjust {
        Adjust::Brightness(f) => blend(Degenerate::Grey(0), src, f as f32, dst),
        Adjust::Contrast(f) => blend(Degenerate::Grey(mean_grey(src)), src, f as f32, dst),
        Adjust::Saturation(f) => {
            scratch.resize(src.len(), 0);
            grey_rgb(src, scratch);
            blend(Degenerate::Image(scratch), src, f as f32, dst)
        }
        // torchvision: `np.uint8(hue_factor * 255)` added to the u8 hue, wrapping.
        Adjust::Hue(f) => shift_hue(src, (f * 255.0) as i64 as u8, dst),
    }
}

impl OpDef for RandomColorAdjust {
    /// RGB u8 in, the same out.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        self.ranges()?;
        if input.dtype != DType::U8 || input.channels != 3 || input.layout != Layout::Hwc {
            return Err(SpecError::input(
                "random_color_adjust needs RGB u8 HWC pixels: put it before normalize, \
                 rescale and hwc_to_chw",
            ));
        }
        Ok(input.clone())
    }

    fn lower(&self, _: &Spec) -> Lowered {
        match self.ranges() {
            Ok(Ranges([None, None, None, None])) | Err(_) => {
                Lowered::Nothing("random_color_adjust with nothing to adjust")
            }
            Ok(ranges) => Lowered::Kernel(Arc::new(ColorKernel { ranges })),
        }
    }
}

/// The kernel: the drawn adjustments, one pass each, ping-ponging between the working
/// image's two buffers (a saturation's greyscale image in the worker's scratch buffer).
#[derive(Debug)]
struct ColorKernel {
    ranges: Ranges,
}

impl Kernel for ColorKernel {
    fn name(&self) -> &'static str {
        "random_color_adjust"
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        let steps = draw(&self.ranges, s.rng);
        let img = &mut *s.img;
        let n = img.h * img.w * 3;
        let scratch = &mut s.tools.scratch;
        for adjust in steps {
            let src = match s.input.take() {
                Some(input) => input,
                None => &img.a8[..n],
            };
            img.b8.resize(n, 0);
            apply(adjust, src, &mut img.b8[..n], scratch);
            img.swap();
        }
        Ok(())
    }

    fn needs_hwc(&self) -> bool {
        true
    }
}
