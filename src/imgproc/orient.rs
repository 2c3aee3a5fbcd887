//! The eight EXIF orientations applied to interleaved pixels, as Pillow's
//! `ImageOps.exif_transpose` applies them (`Image.transpose`): 2 mirror left-right, 3 turn
//! 180°, 4 mirror top-bottom, 5 transpose (the main diagonal), 6 turn 90° clockwise
//! (`ROTATE_270`), 7 transverse (the other diagonal), 8 turn 90° anticlockwise
//! (`ROTATE_90`). Whole pixels of `stride` bytes move; their bytes are not touched.

/// Write the `h × w` image `src` (`stride` bytes a pixel, rows packed) shown in EXIF
/// orientation `orientation` into `dst` (grown to fit, never shrunk); returns its
/// `(height, width)`. Orientation 1 and values outside 1–8 copy the image as it is.
pub fn orient(
    src: &[u8],
    stride: usize,
    (h, w): (usize, usize),
    orientation: u8,
    dst: &mut Vec<u8>,
) -> (usize, usize) {
    let n = h * w * stride;
    if dst.len() < n {
        dst.resize(n, 0);
    }
    let swap = matches!(orientation, 5..=8);
    let (oh, ow) = if swap { (w, h) } else { (h, w) };
    // The source pixel shown at (y, x) of the output.
    let at = |y: usize, x: usize| -> (usize, usize) {
        match orientation {
            2 => (y, w - 1 - x),
            3 => (h - 1 - y, w - 1 - x),
            4 => (h - 1 - y, x),
            5 => (x, y),
            6 => (h - 1 - x, y),
            7 => (h - 1 - x, w - 1 - y),
            8 => (x, w - 1 - y),
            _ => (y, x),
        }
    };
    for (y, row) in dst[..n].chunks_exact_mut(ow * stride).enumerate() {
        for (x, px) in row.chunks_exact_mut(stride).enumerate() {
            let (sy, sx) = at(y, x);
            let i = (sy * w + sx) * stride;
            px.copy_from_slice(&src[i..i + stride]);
        }
    }
    (oh, ow)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2 × 3 image of one byte a pixel, shown in each orientation (Pillow's results).
    #[test]
    fn the_eight_orientations() {
        let src = [1, 2, 3, 4, 5, 6]; // rows [1 2 3], [4 5 6]
        let cases: [(u8, (usize, usize), [u8; 6]); 8] = [
            (1, (2, 3), [1, 2, 3, 4, 5, 6]),
            (2, (2, 3), [3, 2, 1, 6, 5, 4]),
            (3, (2, 3), [6, 5, 4, 3, 2, 1]),
            (4, (2, 3), [4, 5, 6, 1, 2, 3]),
            (5, (3, 2), [1, 4, 2, 5, 3, 6]),
            (6, (3, 2), [4, 1, 5, 2, 6, 3]),
            (7, (3, 2), [6, 3, 5, 2, 4, 1]),
            (8, (3, 2), [3, 6, 2, 5, 1, 4]),
        ];
        for (o, size, want) in cases {
            let mut dst = Vec::new();
            assert_eq!(orient(&src, 1, (2, 3), o, &mut dst), size, "{o}");
            assert_eq!(dst[..6], want, "orientation {o}");
        }
    }
}
