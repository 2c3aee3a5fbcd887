//! The pointwise ops (`rescale`, `normalize`, `hwc_to_chw`, folded by the compiler into one
//! [`Affine`] map and a layout) run into the working image, where a kernel follows them (a
//! crop after a normalize); the last run of them is instead written straight into the
//! batch slot by the worker's final write.

use crate::error::Fault;
use crate::imgproc::write::write;
use crate::imgproc::{Affine, Dst, Pixels, View};
use crate::ops::image::{Elem, Sample};
use crate::ops::kernel::Kernel;
use crate::spec::Layout;

/// The pending pointwise ops applied into a working image of their own, where a kernel
/// follows them (a crop after a normalize): the affine map, if any, makes it float; the
/// layout is the one the pixels are in from here on.
#[derive(Debug)]
pub(crate) struct Pointwise {
    pub(crate) affine: Option<Affine>,
    pub(crate) layout: Layout,
}

impl Kernel for Pointwise {
    fn name(&self) -> &'static str {
        "pointwise"
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        let img = &mut *s.img;
        let n = img.h * img.w * 3;
        let to_f32 = self.affine.is_some() || img.elem == Elem::F32;
        let pixels = match (img.elem, s.input.take()) {
            (Elem::U8, Some(data)) => Pixels::U8(data),
            (Elem::U8, None) => Pixels::U8(&img.a8),
            (Elem::F32, _) => Pixels::F32(&img.af),
        };
        let view = View {
            pixels,
            height: img.h,
            width: img.w,
            layout: img.layout,
        };
        if to_f32 {
            img.bf.resize(n, 0.0); // fully overwritten by `write`
            write(
                &view,
                self.affine.as_ref(),
                self.layout,
                Dst::F32(&mut img.bf),
            )?;
            std::mem::swap(&mut img.af, &mut img.bf);
            img.elem = Elem::F32;
        } else {
            img.b8.resize(n, 0); // fully overwritten by `write`
            write(&view, None, self.layout, Dst::U8(&mut img.b8))?;
            std::mem::swap(&mut img.a8, &mut img.b8);
        }
        img.layout = self.layout;
        Ok(())
    }
}
