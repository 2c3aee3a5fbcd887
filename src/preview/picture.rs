//! An 8-bit RGB picture: what the preview draws tiles, captions and sheets on, and how it is
//! scaled to a tile's size and encoded as PNG (the same bytes for the same picture: the
//! encoder's settings are fixed, and it writes no time or text chunk).

use crate::error::{Error, Result};

/// `height × width` RGB pixels, interleaved, row by row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Picture {
    /// Columns.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// `height × width × 3` bytes.
    pub rgb: Vec<u8>,
}

impl Picture {
    /// A `width × height` picture filled with `color`.
    pub fn filled(width: usize, height: usize, color: [u8; 3]) -> Picture {
        Picture {
            width,
            height,
            rgb: color.repeat(width * height),
        }
    }

    /// Set the pixel at `(x, y)`; outside the picture, nothing.
    pub fn set(&mut self, x: usize, y: usize, color: [u8; 3]) {
        if x < self.width && y < self.height {
            let i = (y * self.width + x) * 3;
            self.rgb[i..i + 3].copy_from_slice(&color);
        }
    }

    /// Copy `other` in with its top-left corner at `(x, y)`, clipped.
    pub fn paste(&mut self, other: &Picture, x: usize, y: usize) {
        for row in 0..other.height.min(self.height.saturating_sub(y)) {
            let n = other.width.min(self.width.saturating_sub(x)) * 3;
            let s = row * other.width * 3;
            let d = ((y + row) * self.width + x) * 3;
            self.rgb[d..d + n].copy_from_slice(&other.rgb[s..s + n]);
        }
    }

    /// Scaled so that its longer side is `side` (aspect kept, at least one pixel each
    /// way): each output pixel the mean of the source pixels it covers when shrinking, the
    /// nearest one when growing — integer arithmetic, the same bytes everywhere.
    pub fn fit(&self, side: usize) -> Picture {
        let (w, h) = (self.width.max(1), self.height.max(1));
        let long = w.max(h);
        let ow = (w * side / long).max(1);
        let oh = (h * side / long).max(1);
        if (ow, oh) == (self.width, self.height) {
            return self.clone();
        }
        let mut out = Picture::filled(ow, oh, [0; 3]);
        for oy in 0..oh {
            let (y0, y1) = (oy * h / oh, ((oy + 1) * h / oh).max(oy * h / oh + 1));
            for ox in 0..ow {
                let (x0, x1) = (ox * w / ow, ((ox + 1) * w / ow).max(ox * w / ow + 1));
                let mut sum = [0u64; 3];
                for y in y0..y1.min(self.height) {
                    for x in x0..x1.min(self.width) {
                        let i = (y * self.width + x) * 3;
                        for (s, &v) in sum.iter_mut().zip(&self.rgb[i..i + 3]) {
                            *s += u64::from(v);
                        }
                    }
                }
                let n = ((y1.min(self.height) - y0) * (x1.min(self.width) - x0)).max(1) as u64;
                let px = sum.map(|s| ((s + n / 2) / n) as u8);
                out.set(ox, oy, px);
            }
        }
        out
    }

    /// The picture as a PNG file: 8-bit RGB, no interlacing, fixed compression and filter,
    /// no chunk but the image's — the same picture gives the same bytes.
    pub fn png(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let bug = |e: png::EncodingError| Error::Internal(format!("PNG encoding: {e}"));
        let mut enc = png::Encoder::new(&mut out, self.width as u32, self.height as u32);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Balanced);
        let mut w = enc.write_header().map_err(bug)?;
        w.write_image_data(&self.rgb).map_err(bug)?;
        w.finish().map_err(bug)?;
        Ok(out)
    }

    /// The PNG as a `data:` URI, for a page that carries its pictures inline.
    pub fn data_uri(&self) -> Result<String> {
        use base64::Engine;
        let png = self.png()?;
        Ok(format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(png)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_keeps_the_aspect_and_averages() {
        let mut p = Picture::filled(4, 2, [0; 3]);
        p.set(0, 0, [200, 100, 40]);
        let small = p.fit(2);
        assert_eq!((small.width, small.height), (2, 1));
        assert_eq!(&small.rgb[..3], &[50, 25, 10]);
        let big = p.fit(8);
        assert_eq!((big.width, big.height), (8, 4));
        assert_eq!(&big.rgb[..3], &[200, 100, 40]);
    }

    #[test]
    fn png_is_deterministic_and_decodes_back() {
        let mut p = Picture::filled(5, 3, [10, 20, 30]);
        p.set(4, 2, [255, 0, 0]);
        let a = p.png().expect("png");
        assert_eq!(a, p.png().expect("png"));
        let img = image::load_from_memory(&a).expect("decodes").to_rgb8();
        assert_eq!(img.as_raw(), &p.rgb);
    }
}
