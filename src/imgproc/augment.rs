//! torchvision's augmentation operations (`torchvision.transforms.autoaugment._apply_op`)
//! on RGB u8 HWC images, each computed as torchvision computes it on a PIL image — Pillow's
//! own arithmetic, so the pixels are torchvision's:
//!
//! * ShearX/Y, TranslateX/Y: `F.affine` (torchvision's inverse affine matrix; shear about
//!   the corner, translation by `int(magnitude)`) and Rotate: `F.rotate` (Pillow's
//!   `Image.rotate` about the centre), all through Pillow's nearest-neighbour affine
//!   transform ([`super::pil_transform`]), the uncovered area filled with `fill`;
//! * Brightness, Color, Contrast, Sharpness: `ImageEnhance` with factor `1 + magnitude`
//!   (`pil`'s blends);
//! * Posterize, Solarize, AutoContrast, Equalize, Invert: `ImageOps`, as lookup tables
//!   (`pil_lut`).
//!
//! What a policy draws (AutoAugment, RandAugment, TrivialAugmentWide: the ops in
//! `crate::ops`) is not here: only the pixels of one operation at one magnitude.

use super::pil::{blend, grey_rgb, mean_grey, smooth, Degenerate};
use super::pil_lut::{autocontrast_tables, equalize_tables, lut};
use super::pil_transform::{affine_nearest, inverse_affine, quarter_turns, rotate_matrix};
use serde::{Deserialize, Serialize};

/// One operation of the set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum AugOp {
    Identity,
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
}

/// torchvision's `_apply_op(img, op, magnitude, NEAREST, fill)` on the `h × w` RGB image
/// `src`, into `dst` (same size); `scratch` holds an intermediate image.
pub fn apply_op(
    op: AugOp,
    magnitude: f64,
    src: &[u8],
    size: (usize, usize),
    fill: [u8; 3],
    dst: &mut [u8],
    scratch: &mut Vec<u8>,
) {
    let (h, w) = size;
    let centre = [w as f64 * 0.5, h as f64 * 0.5];
    let factor = (1.0 + magnitude) as f32;
    match op {
        AugOp::Identity => dst.copy_from_slice(src),
        AugOp::ShearX | AugOp::ShearY => {
            let shear = magnitude.atan().to_degrees();
            let shear = if op == AugOp::ShearX {
                [shear, 0.0]
            } else {
                [0.0, shear]
            };
            let m = inverse_affine([0.0, 0.0], 0.0, [0.0, 0.0], 1.0, shear);
            affine_nearest(src, size, m, fill, dst)
        }
        AugOp::TranslateX | AugOp::TranslateY => {
            let t = magnitude.trunc();
            let t = if op == AugOp::TranslateX {
                [t, 0.0]
            } else {
                [0.0, t]
            };
            let m = inverse_affine(centre, 0.0, t, 1.0, [0.0, 0.0]);
            affine_nearest(src, size, m, fill, dst)
        }
        AugOp::Rotate => match rotate_matrix(magnitude, size) {
            Ok(m) => affine_nearest(src, size, m, fill, dst),
            Err(turns) => quarter_turns(src, size, turns, dst),
        },
        AugOp::Brightness => blend(Degenerate::Grey(0), src, factor, dst),
        AugOp::Color => {
            scratch.resize(src.len(), 0);
            grey_rgb(src, scratch);
            blend(Degenerate::Image(scratch), src, factor, dst)
        }
        AugOp::Contrast => blend(Degenerate::Grey(mean_grey(src)), src, factor, dst),
        AugOp::Sharpness => {
            scratch.resize(src.len(), 0);
            smooth(src, size, scratch);
            blend(Degenerate::Image(scratch), src, factor, dst)
        }
        AugOp::Posterize => {
            let bits = magnitude as i64;
            let mask = !((1u32 << (8 - bits.clamp(0, 8))) - 1) as u8;
            let t: [u8; 256] = std::array::from_fn(|i| i as u8 & mask);
            lut(src, &[t; 3], dst)
        }
        AugOp::Solarize => {
            let t: [u8; 256] = std::array::from_fn(|i| {
                if (i as f64) < magnitude {
                    i as u8
                } else {
                    255 - i as u8
                }
            });
            lut(src, &[t; 3], dst)
        }
        AugOp::AutoContrast => lut(src, &autocontrast_tables(src), dst),
        AugOp::Equalize => lut(src, &equalize_tables(src), dst),
        AugOp::Invert => {
            for (o, &i) in dst.iter_mut().zip(src) {
                *o = 255 - i;
            }
        }
    }
}
