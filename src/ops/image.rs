//! The working image an op's kernel reads and writes: one per worker, its buffers reused
//! from sample to sample, with every fact about the pixels it holds as a field —
//! size, stride, physical layout, element type, where they sit in the whole image (a
//! region decode holds a rectangle), work a kernel deferred to the next reader (the
//! horizontal flip: [`super::kernel::Deferred`]) and a crop box drawn while decoding.
//!
//! It is the engine↔op contract, beside [`super::kernel::Kernel`]: what a kernel's `run`
//! gets and the worker keeps, holding the codec's decoder and imgproc's resizer. Its
//! methods are thin: the pixel arithmetic is `imgproc`'s, which never sees this type.
//!
//! The source's own pixels (CIFAR records, raw shards) are not copied in: a kernel gets
//! them borrowed as [`Sample::input`] and reads them in place, the first kernel that
//! writes pixels makes its result the held image.

use super::kernel::Deferred;
use crate::codec::decoder::Decoder;
use crate::error::Fault;
use crate::imgproc::geometry::{copy_window, copy_window_mode, pack_rgb, PadMode, Rect};
use crate::imgproc::resizer::{ResizeOptions, Resizer};
use crate::imgproc::Filter;
use crate::rng::SplitMix64;
use crate::spec::Layout;

/// The element type of the pixels held between two kernels (the output's 16-bit floats
/// exist only in the batch buffer: see `type_cast`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elem {
    /// 8-bit unsigned.
    U8,
    /// 32-bit float.
    F32,
}

/// The pixels between two kernels, with the facts about them.
#[derive(Debug)]
pub(crate) struct Held {
    /// u8 pixels (when `dtype` is u8) and their ping-pong spare.
    pub(crate) a8: Vec<u8>,
    pub(crate) b8: Vec<u8>,
    /// f32 pixels (when `dtype` is f32) and their spare.
    pub(crate) af: Vec<f32>,
    pub(crate) bf: Vec<f32>,
    /// Rows and columns held.
    pub(crate) h: usize,
    pub(crate) w: usize,
    /// Size of the whole image and where the held pixels sit in it (only a region decode
    /// holds less than the whole image; every other kernel leaves `full = (h, w)`).
    pub(crate) full: (usize, usize),
    pub(crate) origin: (usize, usize),
    /// Bytes per u8 HWC pixel: 4 (RGBX) only between a region decode and the resize that
    /// reads it; every kernel that does not read RGBX gets RGB.
    pub(crate) stride: usize,
    /// How the pixels lie in memory.
    pub(crate) layout: Layout,
    /// u8 or f32.
    pub(crate) elem: Elem,
    /// Work a kernel left to whoever reads the pixels next (see [`Deferred`]): the worker
    /// has it applied before the next kernel, the final write does it on the way.
    pub(crate) deferred: Option<&'static dyn Deferred>,
    /// A crop box drawn from the header's size by the kernel a decode serves (the decode
    /// decodes only around it); that kernel takes it.
    pub(crate) drawn: Option<Rect>,
}

/// The tools a worker keeps for its kernels: the decoder (its library handle), the
/// resizer (its scratch rows) and a scratch image, made on first use.
#[derive(Default)]
pub(crate) struct Tools {
    pub(crate) decoder: Option<Decoder>,
    pub(crate) resizer: Resizer,
    /// A third image for kernels that need one beside the working image's two buffers.
    pub(crate) scratch: Vec<u8>,
}

/// One sample on its way through the kernels.
pub(crate) struct Sample<'w, 'r> {
    /// The working image.
    pub(crate) img: &'w mut Held,
    /// The source's own pixels while no kernel has copied them (they are then what the
    /// image's fields describe).
    pub(crate) input: Option<&'r [u8]>,
    /// The encoded file, for `decode`.
    pub(crate) encoded: Option<&'r [u8]>,
    /// The sample's random stream.
    pub(crate) rng: &'w mut SplitMix64,
    /// Decoder and resizer.
    pub(crate) tools: &'w mut Tools,
}

impl Sample<'_, '_> {
    /// Leave `work` to whoever reads the pixels next (see [`Deferred`]); work deferred
    /// earlier, if any, is done first.
    pub(crate) fn defer(&mut self, work: &'static dyn Deferred) {
        self.img.apply_deferred(&mut self.input);
        self.img.deferred = Some(work);
    }
}

impl Default for Held {
    fn default() -> Held {
        Held {
            a8: Vec::new(),
            b8: Vec::new(),
            af: Vec::new(),
            bf: Vec::new(),
            h: 0,
            w: 0,
            full: (0, 0),
            origin: (0, 0),
            stride: 3,
            layout: Layout::Hwc,
            elem: Elem::U8,
            deferred: None,
            drawn: None,
        }
    }
}

impl Held {
    /// Start a sample whose pixels are `height × width` RGB u8 in `layout` (the source's,
    /// borrowed; `0 × 0` for an encoded file).
    pub(crate) fn begin(&mut self, height: usize, width: usize, layout: Layout) {
        self.h = height;
        self.w = width;
        self.full = (height, width);
        self.origin = (0, 0);
        self.stride = 3;
        self.layout = layout;
        self.elem = Elem::U8;
        self.deferred = None;
        self.drawn = None;
    }

    /// After a kernel: the held pixels are the whole image.
    pub(crate) fn settle(&mut self) {
        self.full = (self.h, self.w);
        self.origin = (0, 0);
    }

    /// Make the spare buffer (just written) the held one.
    pub(crate) fn swap(&mut self) {
        match self.elem {
            Elem::U8 => std::mem::swap(&mut self.a8, &mut self.b8),
            Elem::F32 => std::mem::swap(&mut self.af, &mut self.bf),
        }
    }

    /// Do the deferred work, if any, on the held pixels (the source's own, `input`, are
    /// copied in first where it needs to).
    pub(crate) fn apply_deferred(&mut self, input: &mut Option<&[u8]>) {
        if let Some(d) = self.deferred.take() {
            d.apply(self, input);
        }
    }

    /// The rectangle of the whole image (`full`) that the held pixels are.
    pub(crate) fn region(&self) -> Rect {
        Rect {
            top: self.origin.0,
            left: self.origin.1,
            height: self.h,
            width: self.w,
        }
    }

    /// RGBX → RGB (u8 HWC), through the spare buffer.
    pub(crate) fn pack_rgb(&mut self) {
        pack_rgb(&self.a8, self.h * self.w, &mut self.b8);
        std::mem::swap(&mut self.a8, &mut self.b8);
        self.stride = 3;
    }

    /// Crop the `size` window whose corner is at `at` (it may lie outside: those pixels
    /// get `fill`) out of the held pixels, or out of `input` (the source's) when it is set.
    pub(crate) fn crop(
        &mut self,
        input: &mut Option<&[u8]>,
        at: (isize, isize),
        size: (usize, usize),
        fill: u8,
    ) {
        if at == (0, 0) && size == (self.h, self.w) {
            return;
        }
        let (h, w, layout) = (self.h, self.w, self.layout);
        match self.elem {
            Elem::U8 => {
                let src = input.take().unwrap_or(&self.a8);
                copy_window(
                    src,
                    (h, w, self.stride),
                    layout,
                    at,
                    size,
                    fill,
                    &mut self.b8,
                )
            }
            Elem::F32 => {
                let fill = fill as f32;
                copy_window(&self.af, (h, w, 3), layout, at, size, fill, &mut self.bf)
            }
        }
        self.swap();
        (self.h, self.w) = size;
    }

    /// [`Held::crop`] with the outside filled by `mode` (`fill` for a constant).
    pub(crate) fn crop_mode(
        &mut self,
        input: &mut Option<&[u8]>,
        at: (isize, isize),
        size: (usize, usize),
        mode: PadMode,
        fill: u8,
    ) {
        if mode == PadMode::Constant {
            return self.crop(input, at, size, fill);
        }
        let (h, w, layout) = (self.h, self.w, self.layout);
        match self.elem {
            Elem::U8 => {
                let src = input.take().unwrap_or(&self.a8);
                let dims = (h, w, self.stride);
                copy_window_mode(src, dims, layout, at, size, mode, &mut self.b8)
            }
            Elem::F32 => {
                copy_window_mode(&self.af, (h, w, 3), layout, at, size, mode, &mut self.bf)
            }
        }
        self.swap();
        (self.h, self.w) = size;
    }

    /// Resize the held pixels, or `input` (the source's) when it is set, to `out`: the
    /// held pixels are the rectangle [`Held::region`] of a `self.full` image; `window`
    /// (in output coordinates) is the part of the output to compute. Returns the new size.
    pub(crate) fn resize(
        &mut self,
        resizer: &mut Resizer,
        input: Option<&[u8]>,
        (filter, exact): (Filter, bool),
        out: (usize, usize),
        window: Option<Rect>,
    ) -> Result<(usize, usize), Fault> {
        let opts = ResizeOptions {
            full: self.full,
            held: self.region(),
            filter,
            exact,
            rgbx: self.stride == 4 && self.elem == Elem::U8,
            out,
            window,
        };
        let (oh, ow) = match self.elem {
            Elem::U8 => resizer.resize(input.unwrap_or(&self.a8), &opts, &mut self.b8)?,
            Elem::F32 => resizer.resize(&self.af, &opts, &mut self.bf)?,
        };
        self.swap();
        self.h = oh;
        self.w = ow;
        Ok((oh, ow))
    }
}

pub(crate) use crate::error::bug;
