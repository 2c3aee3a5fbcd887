//! Rectangles and layout-agnostic pixel moves shared by the crop, pad and flip ops: the
//! one [`Rect`] type, copy a window (with a constant or mirrored outside), mirror rows
//! ([`ColumnOrder`]), pack RGBX to RGB. They work on u8 and f32, HWC and CHW.

use crate::spec::Layout;
use serde::{Deserialize, Serialize};

/// What lies outside an image when a crop or a pad reaches past its edge: MindSpore's
/// `Border`, torchvision's `padding_mode` (numpy's `np.pad` modes: `reflect` mirrors
/// without repeating the edge pixel, `symmetric` repeats it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PadMode {
    /// The `fill` value.
    #[default]
    Constant,
    /// The nearest edge pixel.
    Edge,
    /// Mirrored about the edge pixel: `d c b | a b c d | c b a`.
    Reflect,
    /// Mirrored including the edge pixel: `c b a | a b c d | d c b`.
    Symmetric,
}

impl PadMode {
    /// The index in `0..n` that position `i` (anywhere) reads, as `np.pad` (repeated
    /// mirroring for pads wider than the image); `None` for a constant outside `0..n`.
    pub(crate) fn source(self, i: isize, n: usize) -> Option<usize> {
        let n = n as isize;
        if (0..n).contains(&i) {
            return Some(i as usize);
        }
        let j = match self {
            PadMode::Constant => return None,
            PadMode::Edge => i.clamp(0, n - 1),
            PadMode::Reflect if n == 1 => 0,
            PadMode::Reflect => {
                let period = 2 * (n - 1);
                let m = i.rem_euclid(period);
                if m < n {
                    m
                } else {
                    period - m
                }
            }
            PadMode::Symmetric => {
                let m = i.rem_euclid(2 * n);
                if m < n {
                    m
                } else {
                    2 * n - 1 - m
                }
            }
        };
        Some(j as usize)
    }
}

/// A rectangle of an image: its top-left corner and its size, in pixels. The one
/// rectangle type of the crate: a region to decode, a crop box, a resize's output window,
/// the pixels a decode or a working image holds.
///
/// The corner is unsigned (`Rect`, the default) for a rectangle inside an image. A buffer
/// that begins before the image it holds — a crop box read in place, where the box is the
/// image being resized and the buffer around it is not — has a negative corner in that
/// image's coordinates: `Rect<isize>` ([`Rect::signed`]). Pillow's resampling reads both
/// kinds through this one type; a float source box would have meant Pillow's `box=`
/// semantics, whose filter reaches past the box, which the crop ops must not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect<T = usize> {
    /// First row.
    pub top: T,
    /// First column.
    pub left: T,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
}

impl Rect {
    /// The whole of an `h × w` image.
    pub fn whole(h: usize, w: usize) -> Rect {
        Rect {
            top: 0,
            left: 0,
            height: h,
            width: w,
        }
    }

    /// Whether it is non-empty and lies inside an `h × w` image.
    pub fn fits(&self, h: usize, w: usize) -> bool {
        self.height > 0
            && self.width > 0
            && self.top + self.height <= h
            && self.left + self.width <= w
    }

    /// Grown by `by` pixels on every side, kept inside an `h × w` image.
    pub fn grow(self, by: usize, h: usize, w: usize) -> Rect {
        let (t0, l0) = (self.top.saturating_sub(by), self.left.saturating_sub(by));
        let t1 = (self.top + self.height + by).min(h);
        let l1 = (self.left + self.width + by).min(w);
        Rect {
            top: t0,
            left: l0,
            height: t1 - t0,
            width: l1 - l0,
        }
    }

    /// The same rectangle with a signed corner.
    pub fn signed(self) -> Rect<isize> {
        Rect {
            top: self.top as isize,
            left: self.left as isize,
            height: self.height,
            width: self.width,
        }
    }
}

impl<T> Rect<T> {
    /// `(height, width)`.
    pub fn size(&self) -> (usize, usize) {
        (self.height, self.width)
    }
}

impl Rect<isize> {
    /// The `size` pixels of a buffer in whose coordinates the image is the box `bx`: the
    /// buffer as a rectangle of the image (its corner at `-bx`'s, negative or zero).
    pub fn around(bx: Rect, size: (usize, usize)) -> Rect<isize> {
        Rect {
            top: -(bx.top as isize),
            left: -(bx.left as isize),
            height: size.0,
            width: size.1,
        }
    }
}

/// The order in which the pixels of a row are read: as they lie, or from the last to the
/// first (the image mirrored left-right). A writer that takes an order mirrors for free.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ColumnOrder {
    /// First pixel first.
    #[default]
    LeftToRight,
    /// Last pixel first: the image mirrored left-right.
    RightToLeft,
}

/// RGBX pixels (4 bytes, X ignored) packed to RGB: the first `n` pixels of `src` into
/// `dst` (resized to `3n`).
pub(crate) fn pack_rgb(src: &[u8], n: usize, dst: &mut Vec<u8>) {
    dst.resize(n * 3, 0);
    for (s, d) in src[..n * 4]
        .chunks_exact(4)
        .zip(dst[..n * 3].chunks_exact_mut(3))
    {
        d.copy_from_slice(&s[..3]);
    }
}

/// [`copy_window`] with the outside filled by `mode` (not [`PadMode::Constant`]): every
/// output pixel reads the source pixel its row and column map to.
pub(crate) fn copy_window_mode<T: Copy + Default>(
    src: &[T],
    (h, w, c): (usize, usize, usize),
    layout: Layout,
    (top, left): (isize, isize),
    (oh, ow): (usize, usize),
    mode: PadMode,
    dst: &mut Vec<T>,
) {
    dst.resize(oh * ow * c, T::default()); // every element is written below
    let at = |i: isize, n: usize| mode.source(i, n).unwrap_or(0);
    for y in 0..oh {
        let sy = at(top + y as isize, h);
        for x in 0..ow {
            let sx = at(left + x as isize, w);
            match layout {
                Layout::Hwc => {
                    let (s, d) = ((sy * w + sx) * c, (y * ow + x) * c);
                    dst[d..d + c].copy_from_slice(&src[s..s + c]);
                }
                Layout::Chw => {
                    for ch in 0..c {
                        dst[ch * oh * ow + y * ow + x] = src[ch * h * w + sy * w + sx];
                    }
                }
            }
        }
    }
}

/// Copy the `oh × ow` window whose top-left corner sits at `(top, left)` in the `h × w`
/// source of `c` channels (the corner may be negative or the window run past the edge:
/// those pixels get `fill`) into `dst`.
pub(crate) fn copy_window<T: Copy>(
    src: &[T],
    (h, w, c): (usize, usize, usize),
    layout: Layout,
    (top, left): (isize, isize),
    (oh, ow): (usize, usize),
    fill: T,
    dst: &mut Vec<T>,
) {
    let inside = top >= 0 && left >= 0 && top as usize + oh <= h && left as usize + ow <= w;
    if !inside {
        dst.clear(); // every pixel outside the source gets `fill`
    }
    // Inside, every element is overwritten below: no fill pass (no memset per sample).
    dst.resize(oh * ow * c, fill);
    // Output columns that land inside the source.
    let x0 = (-left).clamp(0, ow as isize) as usize;
    let x1 = (w as isize - left).clamp(0, ow as isize) as usize;
    if x0 >= x1 {
        return;
    }
    let sx0 = (left + x0 as isize) as usize;
    let run = x1 - x0;
    for y in 0..oh {
        let sy = top + y as isize;
        if sy < 0 || sy >= h as isize {
            continue;
        }
        let sy = sy as usize;
        match layout {
            Layout::Hwc => {
                let s = (sy * w + sx0) * c;
                let d = (y * ow + x0) * c;
                dst[d..d + run * c].copy_from_slice(&src[s..s + run * c]);
            }
            Layout::Chw => {
                for ch in 0..c {
                    let s = ch * h * w + sy * w + sx0;
                    let d = ch * oh * ow + y * ow + x0;
                    dst[d..d + run].copy_from_slice(&src[s..s + run]);
                }
            }
        }
    }
}

/// Mirror an image left-right in place (`c` elements a pixel in HWC: RGB or RGBX).
pub(crate) fn flip_horizontal<T: Copy>(
    data: &mut [T],
    h: usize,
    w: usize,
    c: usize,
    layout: Layout,
) {
    match layout {
        Layout::Hwc if c == 4 => {
            // RGBX: whole 4-byte pixels reversed (vectorised as one shuffle a vector).
            for row in data[..h * w * c].chunks_exact_mut(w * c) {
                row.as_chunks_mut::<4>().0.reverse();
            }
        }
        Layout::Hwc => {
            // Reverse the row's elements (vectorised), then put each pixel's channels
            // back in order.
            for row in data[..h * w * c].chunks_exact_mut(w * c) {
                row.reverse();
                for px in row.chunks_exact_mut(c) {
                    px.reverse();
                }
            }
        }
        Layout::Chw => {
            for row in data[..h * w * c].chunks_exact_mut(w) {
                row.reverse();
            }
        }
    }
}

/// Mirror an image top-bottom into `dst`: `planes` planes (HWC: 1; CHW: 3) of `h` rows of
/// `row` elements each, every plane's rows in reverse order.
pub(crate) fn flip_vertical<T: Copy + Default>(
    src: &[T],
    planes: usize,
    h: usize,
    row: usize,
    dst: &mut Vec<T>,
) {
    let plane = h * row;
    dst.resize(planes * plane, T::default()); // every element is overwritten below
    if plane == 0 {
        return;
    }
    for (s, d) in src[..planes * plane]
        .chunks_exact(plane)
        .zip(dst.chunks_exact_mut(plane))
    {
        for (sr, dr) in s.chunks_exact(row).rev().zip(d.chunks_exact_mut(row)) {
            dr.copy_from_slice(sr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RGBX rows mirror whole 4-byte pixels (the 4th byte travels with its pixel), RGB
    /// rows whole 3-byte pixels.
    #[test]
    fn flips_move_whole_pixels() {
        let (h, w) = (2usize, 5usize);
        for c in [3usize, 4] {
            let img: Vec<u8> = (0..h * w * c).map(|i| i as u8).collect();
            let mut f = img.clone();
            flip_horizontal(&mut f, h, w, c, Layout::Hwc);
            for y in 0..h {
                for x in 0..w {
                    let got = &f[(y * w + x) * c..(y * w + x + 1) * c];
                    let want = &img[(y * w + w - 1 - x) * c..(y * w + w - x) * c];
                    assert_eq!(got, want, "{c} channels ({x}, {y})");
                }
            }
        }
    }

    #[test]
    fn rows_reverse_within_each_plane() {
        // 2 planes of 3 rows of 2 elements
        let src: Vec<u8> = (0..12).collect();
        let mut dst = Vec::new();
        flip_vertical(&src, 2, 3, 2, &mut dst);
        assert_eq!(dst, [4, 5, 2, 3, 0, 1, 10, 11, 8, 9, 6, 7]);
        // twice is the identity
        let mut back = Vec::new();
        flip_vertical(&dst, 2, 3, 2, &mut back);
        assert_eq!(back, src);
    }
}
