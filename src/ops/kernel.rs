//! What an op is to the engine: its spec rule ([`OpDef::output_spec`]) and what it
//! compiles to ([`OpDef::lower`]) — a [`Kernel`] on the working image, a per-channel affine
//! map or a layout change (folded by the engine into one pointwise pass), or a change of
//! the labels only. The engine sequences and fuses what ops lower to; it never names an op.
//!
//! Fusion hints are methods of the kernel with defaults that say "no": a kernel that can
//! take a following `center_crop` into its own pass says so ([`Kernel::with_center_crop`]),
//! one that reads only a rectangle of the image right after a decode says which
//! ([`Kernel::region`]), and the compiler (`engine::program`) does the rest. A kernel may
//! also leave its work to the next reader of the pixels ([`Deferred`]: the flip, done by
//! the final write as it writes).

use super::image::{Held, Sample};
use crate::error::Fault;
use crate::imgproc::{Affine, ColumnOrder, Dst, Rect};
use crate::rng::SplitMix64;
use crate::spec::{DType, Layout, Spec, SpecError};
use std::sync::Arc;

/// An op's spec rule and lowering. Every op type implements it; [`super::Op`] delegates.
pub(crate) trait OpDef {
    /// The spec after the op, or why it cannot take `input`.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError>;
    /// What the op compiles to, given its (checked) input spec.
    fn lower(&self, input: &Spec) -> Lowered;
    /// Whether it may run on encoded bytes (`decode`, and ops that touch only labels).
    fn takes_encoded(&self) -> bool {
        false
    }
    /// How `imgfeed preview` turns what this op wrote back into what it was given, to show
    /// it as a picture (default: what it leaves is a picture, shown as it is).
    fn undo(&self, _input: &Spec) -> Undo {
        Undo::Show
    }
}

/// How an op's output is turned back into its input for people to look at (`imgfeed
/// preview`), given by the op itself ([`super::Op::undo`]): the preview walks the ops
/// backwards from the batch and never names one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Undo {
    /// Nothing to undo: the op draws the picture (a crop, a flip, a colour jitter, an
    /// erased box) and the preview shows it as it is.
    Show,
    /// The values went through a per-channel affine map; this one maps them back.
    Affine(Affine),
    /// The pixels were in this layout before the op.
    Layout(Layout),
    /// The values were of this element type before the op (a cast): rounded back to it.
    DType(DType),
    /// What the op did cannot be undone (a factor of 0), and why: shown as it is.
    Lost(&'static str),
}

/// What an op compiles to.
#[derive(Clone, Debug)]
pub(crate) enum Lowered {
    /// A kernel that runs on the working image.
    Kernel(Arc<dyn Kernel>),
    /// `x * scale + shift` per channel: folded with its neighbours into one pass.
    Affine(Affine),
    /// The pixels in this layout from here on: folded into the pass that writes them.
    Layout(Layout),
    /// Only the labels change (the batch buffer's label type).
    Labels,
    /// Nothing to do, and why (for `imgfeed check`'s list of fusions).
    Nothing(&'static str),
}

/// A per-sample kernel on the working image ([`super::image::Held`]).
pub(crate) trait Kernel: Send + Sync + std::fmt::Debug {
    /// Stage name in timings and error messages.
    fn name(&self) -> &'static str;

    /// Run on one sample.
    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault>;

    /// Reads u8 pixels of 4 bytes (RGBX, from a region decode) as they are; a kernel that
    /// does not gets them packed to RGB first.
    fn reads_rgbx(&self) -> bool {
        false
    }

    /// Needs the pixels interleaved (HWC) in memory: CIFAR's planes are interleaved first.
    fn needs_hwc(&self) -> bool {
        false
    }

    /// Leaves the image holding a rectangle of the whole (`Held::full`, `Held::origin`)
    /// for the next kernel; after any other kernel the held pixels are the whole image.
    fn holds_region(&self) -> bool {
        false
    }

    /// This is a center crop of `(height, width)`: a resize before it may compute only
    /// that window.
    fn center_crop(&self) -> Option<(usize, usize)> {
        None
    }

    /// This kernel followed by a center crop of `crop`, as one kernel, where that pays.
    fn with_center_crop(&self, _crop: (usize, usize)) -> Option<Arc<dyn Kernel>> {
        None
    }

    /// A decode that decodes only what `next` reads ([`Kernel::region`]; with `region`
    /// false, only what changes its pixels on purpose, such as a decode's `draft` before a
    /// resize), as one kernel (`None`: this kernel is no decode, or nothing to serve).
    fn with_region_of(&self, _next: Arc<dyn Kernel>, _region: bool) -> Option<Arc<dyn Kernel>> {
        None
    }

    /// A decode whose decoder decodes regions (libjpeg-turbo), for `imgfeed check`.
    fn decodes_regions(&self) -> bool {
        false
    }

    /// What this kernel resizes an `h × w` image to, where it is a resize (`Some` for
    /// every size then): right after a decode with `draft`, the decode may decode at a DCT
    /// scale down towards it.
    fn resize_target(&self, _h: usize, _w: usize) -> Option<(usize, usize)> {
        None
    }

    /// What this kernel does that `imgfeed check` should say (a decode's opt-in settings).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Right after a decode, whether this kernel reads only a rectangle of the image
    /// ([`Kernel::region`]); the text says which, for `imgfeed check`.
    fn region_note(&self) -> Option<&'static str> {
        None
    }

    /// Right after a decode: the rectangle of an `h × w` image this kernel will read
    /// (the decoder may decode only that), and a box it drew at random to do so, kept on
    /// the working image (`Held::drawn`) for its `run`.
    fn region(&self, _h: usize, _w: usize, _rng: &mut SplitMix64) -> (Option<Rect>, Option<Rect>) {
        (None, None)
    }
}

/// Work a kernel leaves to whoever reads the pixels next, where doing it on the way costs
/// less than a pass of its own — the horizontal flip (`random_horizontal_flip.rs`): a
/// mirror commutes with the pointwise tail, and reading rows backwards costs nothing.
/// The working image holds at most one ([`Held::deferred`], a `static`: no allocation a
/// sample). The worker has it applied in place before the next kernel
/// ([`Deferred::apply`]); the final write reads the pixels in [`Deferred::read_order`]
/// where its writer takes an order, else writes them as they are and then calls
/// [`Deferred::apply_written`].
pub(crate) trait Deferred: Send + Sync + std::fmt::Debug {
    /// The order in which a writer reads each row's pixels to do the work on the way.
    fn read_order(&self) -> ColumnOrder;

    /// Do it on the held pixels, or on `input` (the source's own pixels, copied into the
    /// working image first) when it is set.
    fn apply(&self, img: &mut Held, input: &mut Option<&[u8]>);

    /// Do it on the `h × w` RGB sample already written into `dst` in `layout`.
    fn apply_written(&self, dst: &mut Dst<'_>, h: usize, w: usize, layout: Layout);
}
