//! From what the pipeline hands the trainer back to pixels people can look at: the
//! pipeline's ops walked backwards, each undone as it says itself ([`Op::undo`]: normalize
//! and rescale their affine maps, `hwc_to_chw` its layout, an image `type_cast` its type),
//! never by its name. What no op undoes (a crop, a flip, a colour jitter, an erased box, a
//! MixUp blend) is what the trainer sees, and is shown as it is.

use crate::ops::{Op, Undo};
use crate::spec::{DType, Layout, Spec};

use super::Picture;

/// The pipeline's undo steps, last op first.
#[derive(Clone, Debug)]
pub struct Unview {
    steps: Vec<Undo>,
    /// What the ops said cannot be undone, and why.
    pub lost: Vec<(&'static str, &'static str)>,
}

impl Unview {
    /// The undo steps of `ops`, where `stages[i].1` is the spec going into `ops[i]` (as
    /// [`crate::Pipeline::stages`] lists them: the source's first).
    pub fn new(ops: &[Op], stages: &[(String, Spec)]) -> Unview {
        let mut steps = Vec::new();
        let mut lost = Vec::new();
        for (op, (_, input)) in ops.iter().zip(stages).rev() {
            match op.undo(input) {
                Undo::Show => {}
                Undo::Lost(why) => lost.push((op.name(), why)),
                u => steps.push(u),
            }
        }
        Unview { steps, lost }
    }

    /// One sample's values (`dims` in `layout`, as the batch holds them, read as f32)
    /// turned back into a picture: each step undone, then rounded and clamped to 0–255. A
    /// layout step needs no pass: the picture is read in the batch's own layout.
    /// `values` is the caller's buffer, changed in place.
    pub fn picture(&self, values: &mut [f32], dims: [usize; 3], layout: Layout) -> Picture {
        let (h, w, c) = match layout {
            Layout::Hwc => (dims[0], dims[1], dims[2]),
            Layout::Chw => (dims[1], dims[2], dims[0]),
        };
        for step in &self.steps {
            match *step {
                Undo::Affine(a) => {
                    for (i, v) in values.iter_mut().enumerate() {
                        let ch = match layout {
                            Layout::Hwc => i % c,
                            Layout::Chw => i / (h * w),
                        }
                        .min(2);
                        *v = *v * a.scale[ch] + a.shift[ch];
                    }
                }
                // the values stay where the batch has them: read in its layout below
                Undo::Layout(_) => {}
                Undo::DType(DType::U8) => {
                    for v in values.iter_mut() {
                        *v = v.round().clamp(0.0, 255.0);
                    }
                }
                Undo::DType(_) | Undo::Show | Undo::Lost(_) => {}
            }
        }
        let mut pic = Picture::filled(w, h, [0; 3]);
        let at = |y: usize, x: usize, ch: usize| match layout {
            Layout::Hwc => (y * w + x) * c + ch,
            Layout::Chw => (ch * h + y) * w + x,
        };
        let byte = |v: f32| v.round().clamp(0.0, 255.0) as u8;
        for y in 0..h {
            for x in 0..w {
                // a one-channel image is grey
                let px = [0, 1, 2].map(|ch| byte(values[at(y, x, ch.min(c - 1))]));
                pic.set(x, y, px);
            }
        }
        pic
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Decode, HwcToChw, Normalize, Rescale};

    fn chain(ops: &[Op]) -> Vec<(String, Spec)> {
        crate::pipeline::spec_chain(&Spec::encoded(), ops).expect("chain")
    }

    #[test]
    fn normalize_and_layout_undone_within_one_grey_level() {
        let n = Normalize::new([123.675, 116.28, 103.53], [58.395, 57.12, 57.375]);
        let ops = vec![
            Op::Decode(Decode::default()),
            Op::Rescale(Rescale::new(1.0 / 255.0, 0.0)),
            Op::Normalize(Normalize::new([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])),
            Op::Normalize(n),
            Op::HwcToChw(HwcToChw::new()),
        ];
        let u = Unview::new(&ops, &chain(&ops));
        assert!(u.lost.is_empty());
        // every byte value, in each channel, through the ops' own maps
        let (h, w) = (1, 256);
        let a = [&ops[1], &ops[2], &ops[3]]
            .iter()
            .map(|o| match o {
                Op::Rescale(r) => r.affine(),
                Op::Normalize(n) => n.affine(),
                _ => unreachable!(),
            })
            .fold(crate::imgproc::Affine::identity(), |acc, m| acc.then(m));
        let mut chw = vec![0f32; 3 * h * w];
        for ch in 0..3 {
            for x in 0..w {
                chw[ch * w + x] = x as f32 * a.scale[ch] + a.shift[ch];
            }
        }
        let pic = u.picture(&mut chw, [3, h, w], Layout::Chw);
        for x in 0..w {
            for ch in 0..3 {
                let got = i32::from(pic.rgb[x * 3 + ch]);
                assert!((got - x as i32).abs() <= 1, "{x} channel {ch}: {got}");
            }
        }
    }

    #[test]
    fn a_rescale_by_zero_is_lost_and_said() {
        let ops = vec![
            Op::Decode(Decode::default()),
            Op::Rescale(Rescale::new(0.0, 0.5)),
        ];
        let u = Unview::new(&ops, &chain(&ops));
        assert_eq!(u.lost, vec![("rescale", "rescale by 0")]);
    }
}
