//! Layout-agnostic pixel moves shared by the crop and flip ops: copy a window (with
//! constant fill outside the source) and mirror rows. They work on u8 and f32, HWC and CHW.

use crate::spec::Layout;

/// Copy the `oh × ow` window whose top-left corner sits at `(top, left)` in the source
/// (which may be negative or run past the edge: those pixels get `fill`) into `dst`.
#[allow(clippy::too_many_arguments)]
pub fn copy_window<T: Copy>(
    src: &[T],
    h: usize,
    w: usize,
    c: usize,
    layout: Layout,
    top: isize,
    left: isize,
    oh: usize,
    ow: usize,
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
pub fn flip_horizontal<T: Copy>(data: &mut [T], h: usize, w: usize, c: usize, layout: Layout) {
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
