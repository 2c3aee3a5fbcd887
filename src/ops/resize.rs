//! `resize`: to a shorter side keeping the aspect ratio (`size = 256`), or to an exact
//! `[h, w]`.
//!
//! The shorter side becomes `size` and the longer one `int(size * long / short)`
//! (truncated), as torchvision's `Resize(256)` and MindSpore's `Resize(256)` compute it.
//!
//! Filters, named for what users compare against:
//! * `bilinear` — Pillow's (and so torchvision's) antialiased bilinear: a triangle filter
//!   widened by the scale factor when shrinking, computed with Pillow's own fixed-point
//!   arithmetic on u8 images (`pillow_bilinear`: bit-identical to torchvision); with
//!   `exact = false`, fast_image_resize's `Convolution(Bilinear)`, within 2 grey levels.
//! * `linear` — MindSpore `Inter.LINEAR` / OpenCV `INTER_LINEAR`: plain 2×2 interpolation,
//!   not antialiased.
//! * `nearest`, `bicubic` (Pillow's, Catmull-Rom), `area` (box filter, OpenCV `INTER_AREA`
//!   for shrinking).
//!
//! Followed by `center_crop`, a `bilinear` or `linear` resize computes only the crop window
//! (the window is handed to the resizer in source coordinates): the output is that of
//! resizing everything and cropping, for a fraction of the work — identical but for values
//! one grey level apart where the two orders of floating-point arithmetic round apart.
//! Filters with discontinuous kernels (`nearest`, `area`) or negative lobes (`bicubic`)
//! would move whole source pixels at exact ties, so they resize the whole image first.
//!
//! A resize to the size the image already has is a copy (Pillow and OpenCV do the same for
//! every filter): images stored resized, as `raw` shards hold them, cost nothing to resize.
//!
//! Convolution filters run as Pillow runs them: horizontal pass, rounded to the pixel
//! type, then vertical pass (fast_image_resize alone goes vertical first, which moved a
//! fifth of the values by one grey level against Pillow).

use super::center_crop::offset;
use super::image::Sample;
use super::kernel::{Kernel, Lowered, OpDef};
use super::Size;
use crate::error::Fault;
use crate::imgproc::geometry::Rect;
use crate::rng::SplitMix64;
use crate::spec::{Layout, Spec, SpecError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use crate::imgproc::resizer::Filter;

/// The `resize` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Resize {
    /// One number: the shorter side; `[h, w]`: exact size.
    pub size: Size,
    /// Resampling filter (default `bilinear`).
    #[serde(default)]
    pub filter: Filter,
    /// `bilinear` only: Pillow's own fixed-point arithmetic (22-bit weights, horizontal
    /// pass rounded to u8, then vertical), bit-identical to torchvision on PIL images —
    /// the default (`None` = on for `bilinear`). `false` picks fast_image_resize's 16-bit
    /// kernels instead: within 2 grey levels of Pillow, no faster (see BENCHMARKS.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact: Option<bool>,
}

impl Resize {
    /// Resize to `size`: one number, the shorter side (aspect kept), or `[h, w]`; bilinear.
    pub fn new(size: impl Into<Size>) -> Resize {
        Resize {
            size: size.into(),
            filter: Filter::default(),
            exact: None,
        }
    }
}

setters!(Resize {
    filter: Filter,
} optional {
    exact: bool,
});


impl OpDef for Resize {
    /// Checks the input is decoded HWC.
    fn output_spec(&self, input: &Spec) -> Result<Spec, SpecError> {
        self.size.check()?;
        if self.exact == Some(true) && self.filter != Filter::Bilinear {
            return Err(SpecError::param(
                "exact",
                "is Pillow's bilinear arithmetic; it needs filter = \"bilinear\"",
            ));
        }
        if input.layout != Layout::Hwc {
            return Err(SpecError::input(
                "resize needs HWC images: put hwc_to_chw after it",
            ));
        }
        let (height, width) = match (self.size, input.fixed_size()) {
            (Size::Two([h, w]), _) => (Some(h), Some(w)),
            (Size::One(s), Some((h, w))) => {
                let (nh, nw) = self.target(h, w);
                let _ = s;
                (Some(nh), Some(nw))
            }
            (Size::One(_), None) => (None, None),
        };
        Ok(Spec {
            height,
            width,
            ..input.clone()
        })
    }

    fn lower(&self, _: &Spec) -> Lowered {
        Lowered::Kernel(Arc::new(ResizeKernel {
            op: self.clone(),
            crop: None,
        }))
    }
}

/// The kernel: a resize, and with `crop` the center crop after it computed in the same
/// pass (only the crop window is resized).
#[derive(Debug)]
struct ResizeKernel {
    op: Resize,
    crop: Option<(usize, usize)>,
}

impl Kernel for ResizeKernel {
    fn name(&self) -> &'static str {
        match self.crop {
            Some(_) => "resize+crop",
            None => "resize",
        }
    }

    fn run(&self, s: &mut Sample<'_, '_>) -> Result<(), Fault> {
        let r = &self.op;
        let img = &mut *s.img;
        let (fh, fw) = img.full;
        let window = self.crop.and_then(|c| r.crop_window(fh, fw, c));
        // RGBX stays RGBX: the final write reads it, any other kernel gets it packed.
        let arithmetic = (r.filter, pillow_arithmetic(r.filter, r.exact));
        let (oh, ow) = img.resize(
            &mut s.tools.resizer,
            s.input.take(),
            arithmetic,
            r.target(fh, fw),
            window,
        )?;
        if let (Some((ch, cw)), None) = (self.crop, window) {
            // The crop is larger than the resized image: crop (pad) separately.
            let at = (offset(oh, ch), offset(ow, cw));
            img.crop(&mut None, at, (ch, cw), 0);
        }
        Ok(())
    }

    fn reads_rgbx(&self) -> bool {
        true
    }

    fn needs_hwc(&self) -> bool {
        true
    }

    /// Only continuous filters: `nearest`, `area` and `bicubic` would move whole source
    /// pixels at exact ties (see the module's doc).
    fn with_center_crop(&self, crop: (usize, usize)) -> Option<Arc<dyn Kernel>> {
        let continuous = matches!(self.op.filter, Filter::Bilinear | Filter::Linear);
        (continuous && self.crop.is_none()).then(|| {
            Arc::new(ResizeKernel {
                op: self.op.clone(),
                crop: Some(crop),
            }) as Arc<dyn Kernel>
        })
    }

    fn region_note(&self) -> Option<&'static str> {
        self.crop.map(|_| "decode: JPEGs decode only the rectangle resize + center_crop read (libjpeg-turbo region decode)")
    }

    fn resize_target(&self, h: usize, w: usize) -> Option<(usize, usize)> {
        Some(self.op.target(h, w))
    }

    fn region(&self, h: usize, w: usize, _: &mut SplitMix64) -> (Option<Rect>, Option<Rect>) {
        let rect = self.crop.and_then(|c| self.op.source_rect(h, w, c));
        (rect, None)
    }
}

impl Resize {
    /// Output `(height, width)` for an `h × w` input.
    pub fn target(&self, h: usize, w: usize) -> (usize, usize) {
        match self.size {
            Size::Two([th, tw]) => (th, tw),
            Size::One(s) => {
                if w <= h {
                    (s * h / w.max(1), s)
                } else {
                    (s, s * w / h.max(1))
                }
            }
        }
    }
}

/// Whether a resize with `filter` runs Pillow's arithmetic: `exact` when given, else
/// yes for `bilinear` (u8 images; float images always take fast_image_resize's kernels).
pub fn pillow_arithmetic(filter: Filter, exact: Option<bool>) -> bool {
    filter == Filter::Bilinear && exact.unwrap_or(true)
}

impl Resize {
    /// The crop window that a following `center_crop` of `crop = (h, w)` keeps of the
    /// resized `h × w` image, when it fits inside it.
    pub fn crop_window(&self, h: usize, w: usize, crop: (usize, usize)) -> Option<Rect> {
        let (nh, nw) = self.target(h, w);
        let (ch, cw) = crop;
        (ch <= nh && cw <= nw).then(|| Rect {
            top: offset(nh, ch) as usize,
            left: offset(nw, cw) as usize,
            height: ch,
            width: cw,
        })
    }

    /// The rectangle `(top, left, height, width)` of an `h × w` source that resizing and
    /// keeping `crop` reads: the window mapped back to the source plus the filter's reach
    /// (3 source pixels per output pixel at most, for the widest filter) and a guard of 2.
    /// The rectangle of an `h × w` image that the crop window of [`Resize::crop_window`]
    /// reads (the filter's reach included, with a margin): a decoder that can decodes
    /// only that.
    pub fn source_rect(&self, h: usize, w: usize, crop: (usize, usize)) -> Option<Rect> {
        let win = self.crop_window(h, w, crop)?;
        let (nh, nw) = self.target(h, w);
        // The filter's reach in source pixels (its support widened when shrinking), plus
        // 2 for libjpeg-turbo's chroma upsampling at a region's edges and rounding.
        let support = match self.filter {
            Filter::Bicubic => 2.0,
            Filter::Bilinear | Filter::Linear | Filter::Nearest | Filter::Area => 1.0,
        };
        let axis = |start: usize, len: usize, n: usize, src: usize| {
            let s = src as f64 / n as f64;
            let reach = support * s.max(1.0) + 2.0;
            let a = (start as f64 * s - reach).floor().max(0.0) as usize;
            let b = (((start + len) as f64 * s + reach).ceil() as usize).min(src);
            (a, b.saturating_sub(a))
        };
        let (top, height) = axis(win.top, win.height, nh, h);
        let (left, width) = axis(win.left, win.width, nw, w);
        Some(Rect {
            top,
            left,
            height,
            width,
        })
    }
}
