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
    /// `bilinear` only: Pillow's own fixed-point arithmetic (22-bit weights, horizontal
    /// pass rounded to u8, then vertical), bit-identical to torchvision on PIL images —
    /// the default (`None` = on for `bilinear`). `false` picks fast_image_resize's 16-bit
    /// kernels instead: within 2 grey levels of Pillow, no faster (see BENCHMARKS.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact: Option<bool>,
}

/// Largest output a resize may produce (the same bound as decode's default pixel limit).
pub const MAX_OUTPUT_PIXELS: usize = 89_478_485;

impl Resize {
    /// Checks the input is decoded HWC.
    pub fn output_spec(&self, input: &Spec) -> Result<Spec, String> {
        self.size.check("resize")?;
        if self.exact == Some(true) && self.filter != Filter::Bilinear {
            return Err(
                "resize: `exact` is Pillow's bilinear arithmetic; it needs filter = \"bilinear\""
                    .into(),
            );
        }
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

/// Whether a resize with `filter` runs Pillow's arithmetic: `exact` when given, else
/// yes for `bilinear` (u8 images; float images always take fast_image_resize's kernels).
pub fn pillow_arithmetic(filter: Filter, exact: Option<bool>) -> bool {
    filter == Filter::Bilinear && exact.unwrap_or(true)
}

impl Resize {
    /// The crop window that a following `center_crop` of `crop = (h, w)` keeps of the
    /// resized `h × w` image, when it fits inside it.
    pub fn crop_window(&self, h: usize, w: usize, crop: (usize, usize)) -> Option<Window> {
        let (nh, nw) = self.target(h, w);
        let (ch, cw) = crop;
        (ch <= nh && cw <= nw).then(|| Window {
            top: super::center_crop::offset(nh, ch) as usize,
            left: super::center_crop::offset(nw, cw) as usize,
            height: ch,
            width: cw,
        })
    }

    /// The rectangle `(top, left, height, width)` of an `h × w` source that resizing and
    /// keeping `crop` reads: the window mapped back to the source plus the filter's reach
    /// (3 source pixels per output pixel at most, for the widest filter) and a guard of 2.
    pub fn source_rect(
        &self,
        h: usize,
        w: usize,
        crop: (usize, usize),
    ) -> Option<(usize, usize, usize, usize)> {
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
        let (top, rh) = axis(win.top, win.height, nh, h);
        let (left, rw) = axis(win.left, win.width, nw, w);
        Some((top, left, rh, rw))
    }
}

/// `(left, width)` of a crop box axis, kept inside `[0, n]`: `start * scale` and
/// `len * scale` can round one ulp past the image edge when the scale does not round-trip.
fn clamp_axis(start: f64, len: f64, n: usize) -> (f64, f64) {
    let n = n as f64;
    let start = start.clamp(0.0, n);
    (start, len.min(n - start).max(0.0))
}

/// A reusable resizer (its scratch buffers survive from sample to sample).
#[derive(Default)]
pub struct Resizer {
    inner: fir::Resizer,
    /// u8 images come as RGBX (4 bytes a pixel) and go out as RGBX.
    pub rgbx: bool,
    /// Use Pillow's exact arithmetic for bilinear u8 resizes (see `pillow_arithmetic`).
    pub exact: bool,
    pillow: super::pillow_bilinear::PillowBilinear,
    /// The horizontal pass's output (f32 storage keeps it aligned for either pixel type).
    tmp: Vec<f32>,
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

    /// Crop the box `(top, left, height, width)` of the u8 image held in `src` (`size =
    /// (rows, cols)`, `ch` bytes a pixel) and resize it to `out` with Pillow's bilinear
    /// arithmetic, reading the box where it lies (no copy of it first): what
    /// random_resized_crop does, bit for bit the crop-then-resize result.
    pub fn pillow_box(
        &mut self,
        src: &[u8],
        ch: usize,
        size: (usize, usize),
        bx: (usize, usize, usize, usize),
        out: (usize, usize),
        dst: &mut Vec<u8>,
    ) -> Result<(usize, usize), String> {
        let (top, left, bh, bw) = bx;
        let (oh, ow) = out;
        if bh == 0 || bw == 0 || top + bh > size.0 || left + bw > size.1 {
            return Err(format!(
                "resize: box {bh}x{bw} at ({top}, {left}) is outside the {}x{} pixels held",
                size.0, size.1
            ));
        }
        if oh == 0 || ow == 0 || oh * ow > MAX_OUTPUT_PIXELS {
            return Err(format!("resize target {oh}x{ow} is empty or too large"));
        }
        if src.len() < size.0 * size.1 * ch {
            return Err("resize: source buffer too small".into());
        }
        dst.resize(oh * ow * ch, 0); // every element is overwritten
        if (oh, ow) == (bh, bw) {
            // Same size: the box itself.
            let (w, row) = (size.1 * ch, ow * ch);
            for (y, d) in dst.chunks_exact_mut(row).enumerate() {
                let s = (top + y) * w + left * ch;
                d.copy_from_slice(&src[s..s + row]);
            }
            return Ok(out);
        }
        self.pillow.resize(
            &src[..size.0 * size.1 * ch],
            ch,
            (bh, bw),
            (-(top as isize), -(left as isize)),
            size,
            out,
            (0, 0, oh, ow),
            dst,
        )?;
        Ok(out)
    }

    /// Resize an RGB image (`src`, u8 or f32 HWC, see `dtype`) of `full = (h, w)` to
    /// `out = (out_h, out_w)`, keeping only `window` of that result when given. `src` may
    /// hold only a rectangle of the image: `origin` is its top-left corner and `size` its
    /// `(height, width)` (it must contain every pixel the window's filter reaches).
    /// Returns the size written to `dst`.
    #[allow(clippy::too_many_arguments)]
    pub fn resize<T: bytemuck::Pod + Default>(
        &mut self,
        src: &[T],
        full: (usize, usize),
        origin: (usize, usize),
        size: (usize, usize),
        dtype: DType,
        filter: Filter,
        out: (usize, usize),
        window: Option<Window>,
        dst: &mut Vec<T>,
    ) -> Result<(usize, usize), String> {
        let (oh, ow) = out;
        let (fh, fw) = full;
        let (h, w) = size;
        let (oy, ox) = (origin.0 as f64, origin.1 as f64);
        if oh == 0 || ow == 0 {
            return Err(format!("resize target {oh}x{ow} is empty"));
        }
        let win = match window {
            Some(win) => win,
            None if (h, w) == (fh, fw) => Window {
                top: 0,
                left: 0,
                height: oh,
                width: ow,
            },
            None => return Err("resize: a partial image needs a crop window".into()),
        };
        let (dh, dw) = (win.height, win.width);
        if dh * dw > MAX_OUTPUT_PIXELS {
            return Err(format!("resize output {dh}x{dw} is too large"));
        }
        // u8 RGBX (a decoder that can writes it for free) takes fast_image_resize's 4-byte
        // pixel kernels, measured faster than its 3-byte ones; X is carried, never mixed in.
        let (pt, ch) = match (dtype, self.rgbx) {
            (DType::U8, false) => (fir::PixelType::U8x3, 3),
            (DType::U8, true) => (fir::PixelType::U8x4, 4),
            (DType::F32, _) => (fir::PixelType::F32x3, 3),
        };
        let px = ch * std::mem::size_of::<T>();
        if (oh, ow) == full {
            // Same size: a copy (of the window), as Pillow and OpenCV return for every
            // filter — exact, and the whole cost of `resize` on images stored resized
            // (also when a region decode holds only a rectangle around the window).
            let (top, left) = (
                win.top.checked_sub(origin.0),
                win.left.checked_sub(origin.1),
            );
            let (w, row) = (size.1 * ch, dw * ch);
            match (top, left) {
                (Some(top), Some(left))
                    if top + dh <= size.0 && left + dw <= size.1 && src.len() >= size.0 * w =>
                {
                    dst.resize(dh * dw * ch, T::default()); // every element is overwritten
                    for (y, d) in dst.chunks_exact_mut(row).enumerate() {
                        let s = (top + y) * w + left * ch;
                        d.copy_from_slice(&src[s..s + row]);
                    }
                    return Ok((dh, dw));
                }
                _ => {
                    return Err(format!(
                        "resize: window {dh}x{dw} at ({}, {}) outside the {}x{} pixels held \
                         at ({}, {})",
                        win.top, win.left, size.0, size.1, origin.0, origin.1
                    ))
                }
            }
        }
        // The window in source coordinates: the same scale factors as the full resize, so
        // every output pixel samples the same source positions as resize-then-crop.
        let sx = fw as f64 / ow as f64;
        let sy = fh as f64 / oh as f64;
        let err = |e: &dyn std::fmt::Display| format!("resize: {e}");
        // Every element is overwritten: resize without clearing (no memset per sample).
        dst.resize(dh * dw * ch, T::default());
        let src_bytes: &[u8] = bytemuck::cast_slice(&src[..h * w * ch]);
        let alg = filter.alg();
        if self.exact && filter == Filter::Bilinear && dtype == DType::U8 {
            // Pillow's own arithmetic for the filter users compare against torchvision with.
            let src_u8: &[u8] = bytemuck::cast_slice(&src[..h * w * ch]);
            let d: &mut [u8] = bytemuck::cast_slice_mut(&mut dst[..]);
            self.pillow.resize(
                src_u8,
                ch,
                (fh, fw),
                (origin.0 as isize, origin.1 as isize),
                (h, w),
                (oh, ow),
                (win.top, win.left, dh, dw),
                d,
            )?;
            return Ok((dh, dw));
        }
        if !matches!(alg, fir::ResizeAlg::Convolution(_)) {
            let src_img = fir::images::ImageRef::new(w as u32, h as u32, src_bytes, pt)
                .map_err(|e| err(&e))?;
            let dst_bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut dst[..]);
            let mut dst_img =
                fir::images::Image::from_slice_u8(dw as u32, dh as u32, dst_bytes, pt)
                    .map_err(|e| err(&e))?;
            let (left, width) = clamp_axis(win.left as f64 * sx - ox, win.width as f64 * sx, w);
            let (top, height) = clamp_axis(win.top as f64 * sy - oy, win.height as f64 * sy, h);
            let opts = fir::ResizeOptions::new()
                .use_alpha(false)
                .resize_alg(alg)
                .crop(left, top, width, height);
            self.inner
                .resize(&src_img, &mut dst_img, &opts)
                .map_err(|e| err(&e))?;
            return Ok((dh, dw));
        }
        // Convolution filters run as Pillow runs them: the horizontal pass first, rounded
        // to the pixel type, then the vertical one (fast_image_resize alone would go
        // vertical first, which moves a fifth of the values by one grey level). The
        // horizontal pass only covers the rows the vertical pass reads.
        let reach = 3.0 * sy.max(1.0) + 2.0;
        let r0 = ((win.top as f64 * sy - reach).floor() - oy).max(0.0) as usize;
        let r1 =
            ((((win.top + win.height) as f64 * sy + reach).ceil() - oy).max(0.0) as usize).min(h);
        let rows = r1.saturating_sub(r0).max(1).min(h - r0.min(h - 1));
        let r0 = r0.min(h - 1);
        let tmp_len = (dw * rows * px).div_ceil(4);
        self.tmp.resize(tmp_len, 0.0);
        let tmp_bytes: &mut [u8] =
            &mut bytemuck::cast_slice_mut(&mut self.tmp[..])[..dw * rows * px];
        {
            let band = &src_bytes[r0 * w * px..(r0 + rows) * w * px];
            let src_img =
                fir::images::ImageRef::new(w as u32, rows as u32, band, pt).map_err(|e| err(&e))?;
            let mut mid = fir::images::Image::from_slice_u8(dw as u32, rows as u32, tmp_bytes, pt)
                .map_err(|e| err(&e))?;
            let (left, width) = clamp_axis(win.left as f64 * sx - ox, win.width as f64 * sx, w);
            let opts = fir::ResizeOptions::new()
                .use_alpha(false)
                .resize_alg(alg)
                .crop(left, 0.0, width, rows as f64);
            self.inner
                .resize(&src_img, &mut mid, &opts)
                .map_err(|e| err(&e))?;
        }
        let tmp_bytes: &[u8] = &bytemuck::cast_slice(&self.tmp[..])[..dw * rows * px];
        let mid = fir::images::ImageRef::new(dw as u32, rows as u32, tmp_bytes, pt)
            .map_err(|e| err(&e))?;
        let dst_bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut dst[..]);
        let mut dst_img = fir::images::Image::from_slice_u8(dw as u32, dh as u32, dst_bytes, pt)
            .map_err(|e| err(&e))?;
        let (top, height) = clamp_axis(
            win.top as f64 * sy - oy - r0 as f64,
            win.height as f64 * sy,
            rows,
        );
        let opts = fir::ResizeOptions::new()
            .use_alpha(false)
            .resize_alg(alg)
            .crop(0.0, top, dw as f64, height);
        self.inner
            .resize(&mid, &mut dst_img, &opts)
            .map_err(|e| err(&e))?;
        Ok((dh, dw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resize to the image's own size is a copy of the window, also when only a
    /// rectangle around the window is held (a region decode of an image stored resized).
    #[test]
    fn same_size_resize_of_a_held_rectangle_copies_the_window() {
        let (fh, fw) = (20usize, 30usize);
        let img: Vec<u8> = (0..fh * fw * 3).map(|i| (i * 37 % 251) as u8).collect();
        let (oy, ox, rh, rw) = (3usize, 4usize, 12usize, 20usize);
        let rect: Vec<u8> = (0..rh)
            .flat_map(|y| img[((oy + y) * fw + ox) * 3..((oy + y) * fw + ox + rw) * 3].to_vec())
            .collect();
        let win = Window {
            top: 5,
            left: 6,
            height: 8,
            width: 10,
        };
        let mut r = Resizer::new();
        r.exact = true;
        let mut out = Vec::new();
        let got = r
            .resize(
                &rect,
                (fh, fw),
                (oy, ox),
                (rh, rw),
                DType::U8,
                Filter::Bilinear,
                (fh, fw),
                Some(win),
                &mut out,
            )
            .expect("inside");
        assert_eq!(got, (8, 10));
        let want: Vec<u8> = (0..8)
            .flat_map(|y| img[((5 + y) * fw + 6) * 3..((5 + y) * fw + 16) * 3].to_vec())
            .collect();
        assert_eq!(out, want);
        // A window outside the held rectangle is an error, not a wrong copy.
        let outside = Window { top: 0, ..win };
        assert!(r
            .resize(
                &rect,
                (fh, fw),
                (oy, ox),
                (rh, rw),
                DType::U8,
                Filter::Bilinear,
                (fh, fw),
                Some(outside),
                &mut out,
            )
            .is_err());
    }

    /// A box resized where it lies gives the bytes of the box copied out and resized:
    /// 3 and 4 bytes a pixel, boxes at every edge, shrinking, enlarging, same size.
    #[test]
    fn a_box_resized_in_place_is_crop_then_resize() {
        let (h, w) = (61usize, 83usize);
        for ch in [3usize, 4] {
            let img: Vec<u8> = (0..h * w * ch).map(|i| (i * 37 % 251) as u8).collect();
            let boxes = [
                (0, 0, h, w),
                (0, 0, 17, 29),
                (h - 40, w - 50, 40, 50),
                (5, w - 9, h - 5, 9),
                (h - 7, 3, 7, 70),
                (10, 20, 24, 24),
            ];
            for bx in boxes {
                let (top, left, bh, bw) = bx;
                let crop: Vec<u8> = (0..bh)
                    .flat_map(|y| img[((top + y) * w + left) * ch..][..bw * ch].to_vec())
                    .collect();
                for out in [(24usize, 24usize), (9, 40), (bh, bw)] {
                    let mut a = Resizer::new();
                    let mut b = Resizer::new();
                    (a.exact, b.exact, b.rgbx) = (true, true, ch == 4);
                    let (mut got, mut want) = (Vec::new(), Vec::new());
                    a.pillow_box(&img, ch, (h, w), bx, out, &mut got)
                        .expect("inside");
                    b.resize(
                        &crop,
                        (bh, bw),
                        (0, 0),
                        (bh, bw),
                        DType::U8,
                        Filter::Bilinear,
                        out,
                        None,
                        &mut want,
                    )
                    .expect("inside");
                    assert_eq!(got, want, "{ch} channels, box {bx:?} -> {out:?}");
                }
            }
            let mut r = Resizer::new();
            let mut out = Vec::new();
            assert!(r
                .pillow_box(&img, ch, (h, w), (1, 0, h, w), (8, 8), &mut out)
                .is_err());
        }
    }
}
