//! The working image an op's kernel reads and writes: one per worker, its buffers reused
//! from sample to sample, with every fact about the pixels it holds as a field —
//! size, stride, physical layout, element type, where they sit in the whole image (a
//! region decode holds a rectangle), a horizontal flip drawn but not applied yet and a
//! crop box drawn while decoding.
//!
//! The source's own pixels (CIFAR records, raw shards) are not copied in: a kernel gets
//! them borrowed as [`Sample::input`] and reads them in place, the first kernel that
//! writes pixels makes its result the held image.

use super::decode::Decoder;
use super::resize::{ResizeOptions, Resizer};
use super::Filter;
use crate::error::Fault;
use crate::imgproc::geometry::Rect;
use crate::imgproc::geometry::{copy_window, copy_window_mode, flip_horizontal, PadMode};
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
    /// A horizontal flip drawn but not applied: the next kernel applies it first or, when
    /// none follows, the final write mirrors the sample's rows as it writes them (a flip
    /// commutes with the pointwise tail; reversing rows on the way costs no pass).
    pub(crate) mirror: bool,
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
            mirror: false,
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
        self.mirror = false;
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

    /// Apply a flip drawn earlier (`mirror`) to the held pixels.
    pub(crate) fn flip_pending(&mut self, input: &mut Option<&[u8]>) {
        if !std::mem::take(&mut self.mirror) {
            return;
        }
        if let Some(data) = input.take() {
            // Flipping is in place: the source's pixels are copied first.
            self.a8.clear();
            self.a8.extend_from_slice(data);
        }
        match self.elem {
            // constant channel counts: each call is compiled for its own (a run-time count
            // made the RGB flip 3x slower)
            Elem::U8 if self.stride == 4 => {
                flip_horizontal(&mut self.a8, self.h, self.w, 4, self.layout)
            }
            Elem::U8 => flip_horizontal(&mut self.a8, self.h, self.w, 3, self.layout),
            Elem::F32 => flip_horizontal(&mut self.af, self.h, self.w, 3, self.layout),
        }
    }

    /// RGBX → RGB (u8 HWC), through the spare buffer.
    pub(crate) fn pack_rgb(&mut self) {
        let n = self.h * self.w;
        self.b8.resize(n * 3, 0);
        for (s, d) in self.a8[..n * 4]
            .chunks_exact(4)
            .zip(self.b8[..n * 3].chunks_exact_mut(3))
        {
            d.copy_from_slice(&s[..3]);
        }
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
    /// held pixels are the rectangle at `self.origin` of a `self.full` image; `window`
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
            origin: self.origin,
            size: (self.h, self.w),
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
