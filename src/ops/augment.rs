//! What AutoAugment, RandAugment and TrivialAugmentWide share, on the ops' side: the
//! fill parameter, the input they take, a policy's draw (`Draws`) and the kernel that
//! runs what was drawn on the working image (`PolicyKernel`), and the augmentation
//! spaces with torchvision's magnitude tables (including `torch.linspace`'s float32
//! values). The pixels of each operation are computed in [`crate::imgproc::augment`].

use super::image::Sample;
use super::kernel::Kernel;
use crate::error::Fault;
use crate::rng::SplitMix64;
use crate::spec::{DType, Layout, Spec, SpecError};
use serde::{Deserialize, Serialize};

use crate::imgproc::augment::{apply_op, AugOp};

/// The colour of the area a geometric operation uncovers: one grey level or an RGB triple
/// (default 0, black, as torchvision's `fill=None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged, try_from = "FillRepr")]
pub enum Fill {
    /// The same value in every channel.
    Grey(u8),
    /// One value per channel.
    Rgb([u8; 3]),
}

/// What a pipeline file may write for a fill, checked into a [`Fill`].
#[derive(Deserialize)]
#[serde(untagged)]
enum FillRepr {
    Grey(i64),
    Rgb(Vec<i64>),
}

/// A fill that is not a grey level or an RGB triple of them.
#[derive(Debug, thiserror::Error)]
#[error("fill must be a grey level 0-255 or [r, g, b] of them")]
pub struct BadFill;

impl TryFrom<FillRepr> for Fill {
    type Error = BadFill;
    fn try_from(r: FillRepr) -> Result<Fill, BadFill> {
        let level = |v: i64| u8::try_from(v).ok();
        match r {
            FillRepr::Grey(v) => level(v).map(Fill::Grey),
            FillRepr::Rgb(v) => match v[..] {
                [r, g, b] => level(r)
                    .zip(level(g))
                    .zip(level(b))
                    .map(|((r, g), b)| Fill::Rgb([r, g, b])),
                _ => None,
            },
        }
        .ok_or(BadFill)
    }
}

impl Default for Fill {
    fn default() -> Fill {
        Fill::Grey(0)
    }
}

impl Fill {
    /// Per channel.
    pub fn rgb(self) -> [u8; 3] {
        match self {
            Fill::Grey(g) => [g; 3],
            Fill::Rgb(c) => c,
        }
    }
}

/// The input an augmentation op takes: RGB u8 HWC (before normalize).
pub(crate) fn check_input(name: &str, input: &Spec) -> Result<(), SpecError> {
    if input.dtype != DType::U8 || input.channels != 3 || input.layout != Layout::Hwc {
        return Err(SpecError::input(format!(
            "{name} needs RGB u8 HWC pixels: put it before normalize, rescale and hwc_to_chw"
        )));
    }
    Ok(())
}

/// An augmentation policy (AutoAugment, RandAugment, TrivialAugmentWide): what one sample
/// draws, and the fill of what geometric operations uncover.
pub(crate) trait Draws: Send + Sync + std::fmt::Debug {
    /// The op's name.
    const NAME: &'static str;
    /// The operations one sample of `size` (height, width) applies, drawn from `rng`.
    fn steps(&self, rng: &mut SplitMix64, size: (usize, usize)) -> Vec<(AugOp, f64)>;
    /// The fill.
    fn fill(&self) -> Fill;
}

/// The kernel of a policy: draw, then apply what was drawn.
#[derive(Debug)]
pub(crate) struct PolicyKernel<P>(pub(crate) P);

impl<P: Draws> Kernel for PolicyKernel<P> {
    fn name(&self) -> &'static str {
        P::NAME
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        let steps = self.0.steps(s.rng, (s.img.h, s.img.w));
        run_steps(s, &steps, self.0.fill());
        Ok(())
    }

    fn needs_hwc(&self) -> bool {
        true
    }
}

/// Run the drawn `steps` on the sample's image, one pass each, ping-ponging between the
/// working image's two buffers.
fn run_steps(s: &mut Sample<'_, '_>, steps: &[(AugOp, f64)], fill: Fill) {
    let img = &mut *s.img;
    let n = img.h * img.w * 3;
    for &(op, magnitude) in steps {
        let src = match s.input.take() {
            Some(input) => input,
            None => &img.a8[..n],
        };
        img.b8.resize(n, 0);
        let size = (img.h, img.w);
        apply_op(
            op,
            magnitude,
            src,
            size,
            fill.rgb(),
            &mut img.b8[..n],
            &mut s.tools.scratch,
        );
        img.swap();
    }
}

/// Entry `i` of `torch.linspace(start, end, steps)` in float32, as ATen computes it (from
/// both ends).
fn linspace_at(start: f64, end: f64, steps: usize, i: usize) -> f32 {
    let (s, e) = (start as f32, end as f32);
    if steps == 1 {
        return s;
    }
    let step = (e - s) / (steps - 1) as f32;
    if i < steps / 2 {
        s + step * i as f32
    } else {
        e - step * (steps - i - 1) as f32
    }
}

/// `torch.linspace(start, end, steps)` in float32, as ATen computes it (from both ends).
pub fn linspace(start: f64, end: f64, steps: usize) -> Vec<f32> {
    (0..steps)
        .map(|i| linspace_at(start, end, steps, i))
        .collect()
}

/// Entry `i` of `8 - (torch.arange(bins) / ((bins - 1) / div)).round().int()`.
fn posterize_bits_at(bins: usize, div: f64, i: usize) -> f32 {
    let d = ((bins as f64 - 1.0) / div) as f32;
    8.0 - (i as f32 / d).round_ties_even()
}

/// `8 - (torch.arange(bins) / ((bins - 1) / div)).round().int()`: posterize bits per bin.
pub fn posterize_bits(bins: usize, div: f64) -> Vec<f32> {
    (0..bins).map(|i| posterize_bits_at(bins, div, i)).collect()
}

/// How an operation's magnitudes are tabulated.
#[derive(Clone, Copy, Debug)]
enum Table {
    /// No magnitude (AutoContrast, Equalize, Invert, Identity).
    None,
    /// `torch.linspace(start, end, bins)`.
    Lin(f64, f64),
    /// Posterize's bits, `8 - round(i / ((bins - 1) / div))`.
    Bits(f64),
}

/// An operation of a policy's space: its magnitude table and whether the sign is drawn.
/// Entries are computed when drawn, so a sample's draw builds no table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Space {
    pub(crate) op: AugOp,
    table: Table,
    pub(crate) signed: bool,
}

impl Space {
    /// Whether the operation has magnitudes at all.
    pub(crate) fn has_magnitudes(&self) -> bool {
        !matches!(self.table, Table::None)
    }

    /// Entry `bin` of its table of `bins` (`None` without magnitudes or past the end).
    pub(crate) fn magnitude(&self, bins: usize, bin: usize) -> Option<f32> {
        if bin >= bins {
            return None;
        }
        match self.table {
            Table::None => None,
            Table::Lin(start, end) => Some(linspace_at(start, end, bins, bin)),
            Table::Bits(div) => Some(posterize_bits_at(bins, div, bin)),
        }
    }
}

fn space(op: AugOp, table: Table, signed: bool) -> Space {
    Space { op, table, signed }
}

/// AutoAugment's `_augmentation_space(bins, (height, width))`: ShearX .. Equalize, then
/// Invert; with `rand`, RandAugment's: Identity, then ShearX .. Equalize.
pub(crate) fn classic_space((h, w): (usize, usize), rand: bool) -> [Space; 14] {
    use AugOp::*;
    let lin = |end: f64| Table::Lin(0.0, end);
    let common = [
        space(ShearX, lin(0.3), true),
        space(ShearY, lin(0.3), true),
        space(TranslateX, lin(150.0 / 331.0 * w as f64), true),
        space(TranslateY, lin(150.0 / 331.0 * h as f64), true),
        space(Rotate, lin(30.0), true),
        space(Brightness, lin(0.9), true),
        space(Color, lin(0.9), true),
        space(Contrast, lin(0.9), true),
        space(Sharpness, lin(0.9), true),
        space(Posterize, Table::Bits(4.0), false),
        space(Solarize, Table::Lin(255.0, 0.0), false),
        space(AutoContrast, Table::None, false),
        space(Equalize, Table::None, false),
    ];
    let extra = space(if rand { Identity } else { Invert }, Table::None, false);
    let mut v = [extra; 14];
    let at = usize::from(rand);
    v[at..at + 13].copy_from_slice(&common);
    v
}

/// TrivialAugmentWide's `_augmentation_space(bins)`.
pub(crate) fn wide_space() -> [Space; 14] {
    use AugOp::*;
    let lin = |end: f64| Table::Lin(0.0, end);
    [
        space(Identity, Table::None, false),
        space(ShearX, lin(0.99), true),
        space(ShearY, lin(0.99), true),
        space(TranslateX, lin(32.0), true),
        space(TranslateY, lin(32.0), true),
        space(Rotate, lin(135.0), true),
        space(Brightness, lin(0.99), true),
        space(Color, lin(0.99), true),
        space(Contrast, lin(0.99), true),
        space(Sharpness, lin(0.99), true),
        space(Posterize, Table::Bits(6.0), false),
        space(Solarize, Table::Lin(255.0, 0.0), false),
        space(AutoContrast, Table::None, false),
        space(Equalize, Table::None, false),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linspace_is_torchs_float32_from_both_ends() {
        let v = linspace(0.0, 0.3, 10);
        assert_eq!(v[0], 0.0);
        assert_eq!(v[9], 0.3f32);
        assert_eq!(v[3], 0.3f32 / 9.0 * 3.0);
        assert_eq!(v[6], 0.3f32 - 0.3f32 / 9.0 * 3.0);
        assert_eq!(
            posterize_bits(10, 4.0),
            [8., 8., 7., 7., 6., 6., 5., 5., 4., 4.]
        );
        assert_eq!(
            posterize_bits(31, 4.0)[..9],
            [8., 8., 8., 8., 7., 7., 7., 7., 7.]
        );
    }

    #[test]
    fn spaces_list_torchvisions_operations_in_order_with_their_tables() {
        use AugOp::*;
        let ops = |v: [Space; 14]| v.map(|s| s.op);
        let auto = [
            ShearX,
            ShearY,
            TranslateX,
            TranslateY,
            Rotate,
            Brightness,
            Color,
            Contrast,
            Sharpness,
            Posterize,
            Solarize,
            AutoContrast,
            Equalize,
            Invert,
        ];
        assert_eq!(ops(classic_space((40, 48), false)), auto);
        let mut rand = [Identity; 14];
        rand[1..].copy_from_slice(&auto[..13]);
        assert_eq!(ops(classic_space((40, 48), true)), rand);
        assert_eq!(ops(wide_space()), rand);
        // entries equal the whole tables torch builds
        let auto_space = classic_space((40, 48), false);
        let tx = linspace(0.0, 150.0 / 331.0 * 48.0, 10);
        let bits = posterize_bits(31, 6.0);
        for (i, t) in tx.iter().enumerate() {
            assert_eq!(auto_space[2].magnitude(10, i), Some(*t));
        }
        for (i, b) in bits.iter().enumerate() {
            assert_eq!(wide_space()[10].magnitude(31, i), Some(*b));
        }
        assert_eq!(auto_space[2].magnitude(10, 10), None);
        assert_eq!(auto_space[11].magnitude(10, 0), None);
    }
}
