//! Resampling: a worker's resizer over fast_image_resize's kernels and Pillow's own
//! fixed-point bilinear (`pillow_bilinear`), horizontal pass then vertical, as
//! Pillow runs them; the part of the output to compute can be a window (a resize fused
//! with a centre crop), and the input a rectangle of the source (a region decode).
//! The `resize` op ([`crate::ops::resize`]) and the crops that resize call it; it knows
//! nothing of specs, ops or the engine.

use super::geometry::Rect;
use super::pillow_bilinear::{Geometry, Source};
use crate::error::{bug, Fault, SampleErrorKind};
use crate::spec::DType;
use fast_image_resize as fir;
use serde::{Deserialize, Serialize};

/// Largest output a resize may produce (the same bound as decode's default pixel limit).
pub const MAX_OUTPUT_PIXELS: usize = 89_478_485;

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

/// `(left, width)` of a crop box axis, kept inside `[0, n]`: `start * scale` and
/// `len * scale` can round one ulp past the image edge when the scale does not round-trip.
fn clamp_axis(start: f64, len: f64, n: usize) -> (f64, f64) {
    let n = n as f64;
    let start = start.clamp(0.0, n);
    (start, len.min(n - start).max(0.0))
}

/// An element type a resize reads and writes: u8 or f32.
pub trait Pixel: bytemuck::Pod + Default {
    /// Its [`DType`].
    const DTYPE: DType;
}

impl Pixel for u8 {
    const DTYPE: DType = DType::U8;
}

impl Pixel for f32 {
    const DTYPE: DType = DType::F32;
}

/// A worker's resizer: fast_image_resize's, Pillow's arithmetic and the scratch rows of
/// the two passes, reused from sample to sample.
#[derive(Default)]
pub struct Resizer {
    inner: fir::Resizer,
    pillow: super::pillow_bilinear::PillowBilinear,
    tmp: Vec<f32>,
}

/// What one [`Resizer::resize`] call does.
#[derive(Clone, Copy, Debug)]
pub struct ResizeOptions {
    /// Size of the whole source image.
    pub full: (usize, usize),
    /// The rectangle of it that the pixels given are (the whole image, or what a region
    /// decode decoded).
    pub held: Rect,
    /// The filter.
    pub filter: Filter,
    /// Pillow's fixed-point arithmetic (u8 `bilinear`).
    pub exact: bool,
    /// u8 pixels of 4 bytes (RGBX, X ignored) rather than 3.
    pub rgbx: bool,
    /// Size of the whole output image.
    pub out: (usize, usize),
    /// The part of the output to compute (`None`: all of it; required when the pixels
    /// given are a rectangle of the source).
    pub window: Option<Rect>,
}

impl Resizer {
    /// Crop the box `bx` of the u8 image held in `src` (`size = (rows, cols)`, `ch` bytes a
    /// pixel) and resize it to `out` with Pillow's bilinear arithmetic, reading the box
    /// where it lies (no copy of it first), the filter reaching no pixel outside the box:
    /// what random_resized_crop does, bit for bit the crop-then-resize result.
    pub fn pillow_box(
        &mut self,
        src: &[u8],
        ch: usize,
        size: (usize, usize),
        bx: Rect,
        out: (usize, usize),
        dst: &mut Vec<u8>,
    ) -> Result<(usize, usize), Fault> {
        let (top, left, bh, bw) = (bx.top, bx.left, bx.height, bx.width);
        let (oh, ow) = out;
        if bh == 0 || bw == 0 || top + bh > size.0 || left + bw > size.1 {
            return Err(bug(format!(
                "resize: box {bh}x{bw} at ({top}, {left}) is outside the {}x{} pixels held",
                size.0, size.1
            )));
        }
        if oh == 0 || ow == 0 || oh * ow > MAX_OUTPUT_PIXELS {
            return Err(Fault::new(
                SampleErrorKind::Other,
                format!("resize target {oh}x{ow} is empty or too large"),
            ));
        }
        if src.len() < size.0 * size.1 * ch {
            return Err(bug("resize: source buffer too small"));
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
        let src = Source {
            data: &src[..size.0 * size.1 * ch],
            ch,
            rect: Rect::around(bx, size),
        };
        let geo = Geometry {
            full: (bh, bw),
            out,
        };
        self.pillow.resize(src, geo, Rect::whole(oh, ow), dst)?;
        Ok(out)
    }

    /// Resize an RGB image (`src`, u8 or f32 HWC) of `opts.full = (h, w)` to `opts.out`,
    /// keeping only `opts.window` of that result when given, into `dst`. `src` may hold
    /// only a rectangle of the image, `opts.held` (it must contain every pixel the
    /// window's filter reaches). Returns the size written (the window's).
    pub fn resize<T: Pixel>(
        &mut self,
        src: &[T],
        opts: &ResizeOptions,
        dst: &mut Vec<T>,
    ) -> Result<(usize, usize), Fault> {
        let ResizeOptions {
            full,
            held,
            filter,
            exact,
            rgbx,
            out,
            window,
        } = *opts;
        let dtype = T::DTYPE;
        let (oh, ow) = out;
        let (fh, fw) = full;
        let (h, w) = held.size();
        let (oy, ox) = (held.top as f64, held.left as f64);
        if oh == 0 || ow == 0 {
            return Err(Fault::new(
                SampleErrorKind::Other,
                format!("resize target {oh}x{ow} is empty"),
            ));
        }
        let win = match window {
            Some(win) => win,
            None if (h, w) == (fh, fw) => Rect {
                top: 0,
                left: 0,
                height: oh,
                width: ow,
            },
            None => return Err(bug("resize: a partial image needs a crop window")),
        };
        let (dh, dw) = (win.height, win.width);
        if dh * dw > MAX_OUTPUT_PIXELS {
            return Err(Fault::new(
                SampleErrorKind::Other,
                format!("resize output {dh}x{dw} is too large"),
            ));
        }
        // u8 RGBX (a decoder that can writes it for free) takes fast_image_resize's 4-byte
        // pixel kernels, measured faster than its 3-byte ones; X is carried, never mixed in.
        let (pt, ch) = match (dtype, rgbx) {
            (DType::U8, false) => (fir::PixelType::U8x3, 3),
            (DType::U8, true) => (fir::PixelType::U8x4, 4),
            (DType::F32, _) => (fir::PixelType::F32x3, 3),
            (DType::F16 | DType::BF16, _) => {
                return Err(bug(
                    "resize works on u8 or float32 pixels, not 16-bit floats",
                ))
            }
        };
        let px = ch * std::mem::size_of::<T>();
        if (oh, ow) == full {
            // Same size: a copy (of the window), as Pillow and OpenCV return for every
            // filter — exact, and the whole cost of `resize` on images stored resized
            // (also when a region decode holds only a rectangle around the window).
            let (top, left) = (
                win.top.checked_sub(held.top),
                win.left.checked_sub(held.left),
            );
            let (w, row) = (held.width * ch, dw * ch);
            match (top, left) {
                (Some(top), Some(left))
                    if top + dh <= held.height
                        && left + dw <= held.width
                        && src.len() >= held.height * w =>
                {
                    dst.resize(dh * dw * ch, T::default()); // every element is overwritten
                    for (y, d) in dst.chunks_exact_mut(row).enumerate() {
                        let s = (top + y) * w + left * ch;
                        d.copy_from_slice(&src[s..s + row]);
                    }
                    return Ok((dh, dw));
                }
                _ => {
                    return Err(bug(format!(
                        "resize: window {dh}x{dw} at ({}, {}) outside the {}x{} pixels held \
                         at ({}, {})",
                        win.top, win.left, held.height, held.width, held.top, held.left
                    )))
                }
            }
        }
        // The window in source coordinates: the same scale factors as the full resize, so
        // every output pixel samples the same source positions as resize-then-crop.
        let sx = fw as f64 / ow as f64;
        let sy = fh as f64 / oh as f64;
        let err = |e: &dyn std::fmt::Display| bug(format!("resize: {e}"));
        // Every element is overwritten: resize without clearing (no memset per sample).
        dst.resize(dh * dw * ch, T::default());
        let src_bytes: &[u8] = bytemuck::cast_slice(&src[..h * w * ch]);
        let alg = filter.alg();
        if exact && filter == Filter::Bilinear && dtype == DType::U8 {
            // Pillow's own arithmetic for the filter users compare against torchvision with.
            let src_u8: &[u8] = bytemuck::cast_slice(&src[..h * w * ch]);
            let d: &mut [u8] = bytemuck::cast_slice_mut(&mut dst[..]);
            let src = Source {
                data: src_u8,
                ch,
                rect: held.signed(),
            };
            self.pillow.resize(src, Geometry { full, out }, win, d)?;
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
        let win = Rect {
            top: 5,
            left: 6,
            height: 8,
            width: 10,
        };
        let mut r = Resizer::default();
        let opts = ResizeOptions {
            full: (fh, fw),
            held: Rect {
                top: oy,
                left: ox,
                height: rh,
                width: rw,
            },
            filter: Filter::Bilinear,
            exact: true,
            rgbx: false,
            out: (fh, fw),
            window: Some(win),
        };
        let mut out = Vec::new();
        let got = r.resize(&rect, &opts, &mut out).expect("inside");
        assert_eq!(got, (8, 10));
        let want: Vec<u8> = (0..8)
            .flat_map(|y| img[((5 + y) * fw + 6) * 3..((5 + y) * fw + 16) * 3].to_vec())
            .collect();
        assert_eq!(out, want);
        // A window outside the held rectangle is an error, not a wrong copy.
        let outside = Rect { top: 0, ..win };
        let opts = ResizeOptions {
            window: Some(outside),
            ..opts
        };
        assert!(r.resize(&rect, &opts, &mut out).is_err());
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
            for (top, left, bh, bw) in boxes {
                let bx = Rect {
                    top,
                    left,
                    height: bh,
                    width: bw,
                };
                let crop: Vec<u8> = (0..bh)
                    .flat_map(|y| img[((top + y) * w + left) * ch..][..bw * ch].to_vec())
                    .collect();
                for out in [(24usize, 24usize), (9, 40), (bh, bw)] {
                    let mut a = Resizer::default();
                    let mut b = Resizer::default();
                    let (mut got, mut want) = (Vec::new(), Vec::new());
                    a.pillow_box(&img, ch, (h, w), bx, out, &mut got)
                        .expect("inside");
                    let opts = ResizeOptions {
                        full: (bh, bw),
                        held: Rect::whole(bh, bw),
                        filter: Filter::Bilinear,
                        exact: true,
                        rgbx: ch == 4,
                        out,
                        window: None,
                    };
                    b.resize(&crop, &opts, &mut want).expect("inside");
                    assert_eq!(got, want, "{ch} channels, box {bx:?} -> {out:?}");
                }
            }
            let mut r = Resizer::default();
            let mut out = Vec::new();
            let too_low = Rect {
                top: 1,
                ..Rect::whole(h, w)
            };
            assert!(r
                .pillow_box(&img, ch, (h, w), too_low, (8, 8), &mut out)
                .is_err());
        }
    }
}
