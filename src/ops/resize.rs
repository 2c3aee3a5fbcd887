//! `resize`: to a shorter side keeping the aspect ratio (`size = 256`), or to an exact
//! `[h, w]`.
//!
//! The shorter side becomes `size` and the longer one `int(size * long / short)`
//! (truncated), as torchvision's `Resize(256)` and MindSpore's `Resize(256)` compute it.
//!
//! Filters, named for what users compare against:
//! * `bilinear` — Pillow's (and so torchvision's) antialiased bilinear: a triangle filter
//!   widened by the scale factor when shrinking. fast_image_resize's
//!   `Convolution(Bilinear)`, within 1 grey level of Pillow.
//! * `linear` — MindSpore `Inter.LINEAR` / OpenCV `INTER_LINEAR`: plain 2×2 interpolation,
//!   not antialiased.
//! * `nearest`, `bicubic` (Pillow's, Catmull-Rom), `area` (box filter, OpenCV `INTER_AREA`
//!   for shrinking).
//!
//! Followed by `center_crop`, the engine runs one resize call that computes only the crop
//! window (the crop box is handed to the resizer in source coordinates): the output is the
//! same as resizing everything and cropping, for a fraction of the work.

use super::Size;
use crate::spec::{DType, Layout, Spec};
use fast_image_resize as fir;
use serde::{Deserialize, Serialize};

/// Resampling filter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Filter {
    /// Pillow/torchvision antialiased bilinear.
    #[default]
    Bilinear,
    /// MindSpore/OpenCV `Inter.LINEAR` (not antialiased).
    Linear,
    /// Nearest neighbour.
    Nearest,
    /// Pillow's bicubic (antialiased).
    Bicubic,
    /// Box filter (OpenCV `INTER_AREA` when shrinking).
    Area,
}

impl Filter {
    fn alg(self) -> fir::ResizeAlg {
        use fir::{FilterType, ResizeAlg};
        match self {
            Filter::Bilinear => ResizeAlg::Convolution(FilterType::Bilinear),
            Filter::Linear => ResizeAlg::Interpolation(FilterType::Bilinear),
            Filter::Nearest => ResizeAlg::Nearest,
            Filter::Bicubic => ResizeAlg::Convolution(FilterType::CatmullRom),
            Filter::Area => ResizeAlg::Convolution(FilterType::Box),
        }
    }
}

/// The `resize` op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resize {
    /// One number: the shorter side; `[h, w]`: exact size.
    pub size: Size,
    /// Resampling filter (default `bilinear`).
    #[serde(default)]
    pub filter: Filter,
}

/// Largest output a resize may produce (the same bound as decode's default pixel limit).
pub const MAX_OUTPUT_PIXELS: usize = 89_478_485;

impl Resize {
    /// Checks the input is decoded HWC.
    pub fn output_spec(&self, input: &Spec) -> Result<Spec, String> {
        self.size.check("resize")?;
        if input.layout != Layout::Hwc {
            return Err("resize needs HWC images: put hwc_to_chw after it".into());
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

/// A reusable resizer (its scratch buffers survive from sample to sample).
#[derive(Default)]
pub struct Resizer {
    inner: fir::Resizer,
}

/// Where the crop window of a fused resize+crop sits in the resized image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// First row of the resized image kept.
    pub top: usize,
    /// First column kept.
    pub left: usize,
    /// Rows kept.
    pub height: usize,
    /// Columns kept.
    pub width: usize,
}

impl Resizer {
    /// A resizer with empty scratch buffers.
    pub fn new() -> Resizer {
        Resizer::default()
    }

    /// Resize an `h × w` RGB image (`src`, u8 or f32 HWC, see `dtype`) to `out_h × out_w`,
    /// keeping only `window` of that result when given. Returns the size written to `dst`.
    #[allow(clippy::too_many_arguments)]
    pub fn resize<T: bytemuck::Pod + Default>(
        &mut self,
        src: &[T],
        h: usize,
        w: usize,
        dtype: DType,
        filter: Filter,
        out: (usize, usize),
        window: Option<Window>,
        dst: &mut Vec<T>,
    ) -> Result<(usize, usize), String> {
        let (oh, ow) = out;
        if oh == 0 || ow == 0 {
            return Err(format!("resize target {oh}x{ow} is empty"));
        }
        let (dh, dw) = window.map_or((oh, ow), |win| (win.height, win.width));
        if dh * dw > MAX_OUTPUT_PIXELS {
            return Err(format!("resize output {dh}x{dw} is too large"));
        }
        let pt = match dtype {
            DType::U8 => fir::PixelType::U8x3,
            DType::F32 => fir::PixelType::F32x3,
        };
        dst.clear();
        dst.resize(dh * dw * 3, T::default());
        let src_bytes: &[u8] = bytemuck::cast_slice(&src[..h * w * 3]);
        let src_img = fir::images::ImageRef::new(w as u32, h as u32, src_bytes, pt)
            .map_err(|e| format!("resize: {e}"))?;
        let dst_bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut dst[..]);
        let mut dst_img = fir::images::Image::from_slice_u8(dw as u32, dh as u32, dst_bytes, pt)
            .map_err(|e| format!("resize: {e}"))?;
        let mut opts = fir::ResizeOptions::new().resize_alg(filter.alg());
        if let Some(win) = window {
            // The window in source coordinates: the same scale factors as the full resize,
            // so every output pixel samples the same source positions.
            let sx = w as f64 / ow as f64;
            let sy = h as f64 / oh as f64;
            opts = opts.crop(
                win.left as f64 * sx,
                win.top as f64 * sy,
                win.width as f64 * sx,
                win.height as f64 * sy,
            );
        } else {
            opts = opts.crop(0.0, 0.0, w as f64, h as f64);
        }
        self.inner
            .resize(&src_img, &mut dst_img, &opts)
            .map_err(|e| format!("resize: {e}"))?;
        Ok((dh, dw))
    }
}
