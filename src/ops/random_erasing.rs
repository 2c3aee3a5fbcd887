//! `random_erasing`: torchvision's `RandomErasing(p, scale, ratio, value)` (MindSpore's
//! `RandomErasing`), applied where torchvision applies it, to the normalized tensor: with
//! probability `prob`, a box of random area (`scale` of the image) and aspect ratio (`ratio`,
//! drawn log-uniformly) is overwritten with `value` — a number, one per channel, or
//! `"random"` (standard normal values). Like torchvision, up to 10 attempts at a box that
//! fits, else the image is left as it is; the box's sides are rounded half to even.
//!
//! Draws, from the sample's stream ([`RandomErasing::draw`]): `unit()` for the probability,
//! then per attempt the area (`uniform(scale)`) and the log ratio (`uniform(log ratio)`),
//! then the box's top and left (`below`), then, for `"random"`, one `normal()` per erased
//! value (channel by channel, row by row).

use super::image::{Elem, Sample};
use super::kernel::{Kernel, Lowered, OpDef};
use crate::imgproc::Rect;
use crate::error::Fault;
use crate::rng::SplitMix64;
use crate::spec::{DType, Layout, Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What the erased box holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EraseValue {
    /// One value for every channel (default 0).
    One(f32),
    /// One value per channel.
    PerChannel([f32; 3]),
    /// `"random"`: standard normal values.
    Random(RandomWord),
}

/// The word `"random"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RandomWord {
    /// `"random"`.
    Random,
}

impl Default for EraseValue {
    fn default() -> EraseValue {
        EraseValue::One(0.0)
    }
}


fn default_scale() -> [f64; 2] {
    [0.02, 0.33]
}

fn default_ratio() -> [f64; 2] {
    [0.3, 3.3]
}

/// The `random_erasing` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RandomErasing {
    /// Probability of erasing (default 0.5).
    #[serde(default = "crate::spec::half")]
    pub prob: f64,
    /// Range of the box's area, as a fraction of the image (default [0.02, 0.33]).
    #[serde(default = "default_scale")]
    pub scale: [f64; 2],
    /// Range of the box's aspect ratio (default [0.3, 3.3]).
    #[serde(default = "default_ratio")]
    pub ratio: [f64; 2],
    /// What the box holds (default 0).
    #[serde(default)]
    pub value: EraseValue,
}

impl Default for RandomErasing {
    fn default() -> RandomErasing {
        RandomErasing {
            prob: crate::spec::half(),
            scale: default_scale(),
            ratio: default_ratio(),
            value: EraseValue::default(),
        }
    }
}

impl RandomErasing {
    /// Erase with probability `prob`, torchvision's other defaults.
    pub fn new(prob: f64) -> RandomErasing {
        RandomErasing {
            prob,
            ..RandomErasing::default()
        }
    }

    /// The box one `h × w` sample erases, from the draws of `rng` (`None`: no erasing).
    pub fn draw(&self, rng: &mut SplitMix64, h: usize, w: usize) -> Option<Rect> {
        if rng.unit() >= self.prob {
            return None;
        }
        let area = (h * w) as f64;
        let (l0, l1) = (self.ratio[0].ln(), self.ratio[1].ln());
        for _ in 0..10 {
            let erase = area * rng.uniform(self.scale[0], self.scale[1]);
            let aspect = rng.uniform(l0, l1).exp();
            let eh = (erase * aspect).sqrt().round_ties_even() as usize;
            let ew = (erase / aspect).sqrt().round_ties_even() as usize;
            if !(eh < h && ew < w) {
                continue;
            }
            let top = rng.below((h - eh + 1) as u64) as usize;
            let left = rng.below((w - ew + 1) as u64) as usize;
            return Some(Rect {
                top,
                left,
                height: eh,
                width: ew,
            });
        }
        None
    }
}

setters!(RandomErasing {
    scale: [f64; 2],
    ratio: [f64; 2],
    value: EraseValue,
});

impl OpDef for RandomErasing {
    /// The same spec out.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        crate::spec::check_prob("prob", self.prob)?;
        let [s0, s1] = self.scale;
        if !(0.0 <= s0 && s0 <= s1 && s1 <= 1.0) {
            return Err(SpecError::param(
                "scale",
                format!("must be 0 <= min <= max <= 1, got [{s0}, {s1}]"),
            ));
        }
        let [r0, r1] = self.ratio;
        if !(r0 > 0.0 && r0 <= r1 && r1.is_finite()) {
            return Err(SpecError::param(
                "ratio",
                format!("must be 0 < min <= max, got [{r0}, {r1}]"),
            ));
        }
        if input.channels != 3 {
            return Err(SpecError::input("random_erasing needs 3-channel images"));
        }
        if input.dtype == DType::U8 {
            match &self.value {
                EraseValue::Random(_) => {
                    return Err(SpecError::param(
                        "value",
                        "\"random\" needs float images: put random_erasing after normalize",
                    ))
                }
                EraseValue::One(v) if !(0.0..=255.0).contains(v) => {
                    return Err(SpecError::param("value", "must be 0-255 on u8 images"))
                }
                EraseValue::PerChannel(v) if v.iter().any(|v| !(0.0..=255.0).contains(v)) => {
                    return Err(SpecError::param("value", "must be 0-255 on u8 images"))
                }
                _ => {}
            }
        }
        Ok(input.clone())
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Kernel(Arc::new(self.clone()))
    }
}

impl Kernel for RandomErasing {
    fn name(&self) -> &'static str {
        "random_erasing"
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        let (h, w) = (s.img.h, s.img.w);
        let Some(b) = self.draw(s.rng, h, w) else {
            return Ok(());
        };
        let img = &mut *s.img;
        if let Some(input) = s.input.take() {
            // The source's own pixels are borrowed: erase a copy.
            img.a8.clear();
            img.a8.extend_from_slice(input);
        }
        let rng = &mut *s.rng;
        let mut value = |c: usize| -> f64 {
            match &self.value {
                EraseValue::One(v) => f64::from(*v),
                EraseValue::PerChannel(v) => f64::from(v[c]),
                EraseValue::Random(_) => rng.normal(),
            }
        };
        // Channel by channel, row by row: the order the random values are drawn in.
        for c in 0..3 {
            for y in b.top..b.top + b.height {
                for x in b.left..b.left + b.width {
                    let i = match img.layout {
                        Layout::Hwc => (y * w + x) * img.stride + c,
                        Layout::Chw => c * h * w + y * w + x,
                    };
                    let v = value(c);
                    match img.elem {
                        Elem::U8 => img.a8[i] = v as u8,
                        Elem::F32 => img.af[i] = v as f32,
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes whole pixels: 4-byte ones stay as they are.
    fn reads_rgbx(&self) -> bool {
        true
    }
}
