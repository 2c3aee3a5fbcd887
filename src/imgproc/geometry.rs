//! Layout-agnostic pixel moves shared by the crop and flip ops: copy a window (with
//! constant fill outside the source) and mirror rows. They work on u8 and f32, HWC and CHW.

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
/// rectangle type of the crate: a region to decode, a crop box, a resize's output window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    /// First row.
    pub top: usize,
    /// First column.
    pub left: usize,
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

/// Mirror an image left-right in place.
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
}
