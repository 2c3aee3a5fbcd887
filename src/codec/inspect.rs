//! What an encoded image is, from its header alone: format, size, colour model, bit depth,
//! alpha — without decoding a pixel (for `imgfeed validate`'s summary).
//!
//! JPEG, PNG and BMP headers are parsed here (a few dozen bytes, every read bounds-checked);
//! WebP goes through the `image` crate's header parser. The result describes the file as
//! stored: a palette PNG is `Palette` even though `decode` turns it into RGB.

use super::decoder::{sniff, Format};
use crate::error::{Fault, SampleErrorKind as Kind};

/// The colour model of the stored pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ColorModel {
    /// One channel of grey.
    Gray,
    /// Three colour channels (RGB, or YCbCr in a JPEG).
    Rgb,
    /// Four-channel CMYK (or YCCK) JPEG.
    Cmyk,
    /// Indexed colours (PNG colour type 3, BMP with at most 8 bits per pixel).
    Palette,
}

impl ColorModel {
    /// A short lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            ColorModel::Gray => "gray",
            ColorModel::Rgb => "rgb",
            ColorModel::Cmyk => "cmyk",
            ColorModel::Palette => "palette",
        }
    }
}

/// What the header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageInfo {
    /// The format, from the magic bytes.
    pub format: Format,
    /// Columns.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// Colour model as stored.
    pub color: ColorModel,
    /// Whether there is an alpha channel (or PNG transparency, `tRNS`).
    pub alpha: bool,
    /// Bits per channel sample (8 for most files, 16 for 16-bit PNG, 12 for 12-bit JPEG;
    /// for BMP, bits per pixel).
    pub bits: u8,
    /// A progressive JPEG.
    pub progressive: bool,
}

/// The lowercase name of a format.
pub fn format_name(f: Format) -> &'static str {
    match f {
        Format::Jpeg => "jpeg",
        Format::Png => "png",
        Format::Bmp => "bmp",
        Format::WebP => "webp",
    }
}

fn be16(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 2)?;
    Some(u32::from(u16::from_be_bytes([s[0], s[1]])))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 4)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn le16(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 2)?;
    Some(u32::from(u16::from_le_bytes([s[0], s[1]])))
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 4)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Read the header of `bytes`.
pub fn inspect(bytes: &[u8]) -> Result<ImageInfo, Fault> {
    if bytes.is_empty() {
        return Err(Fault::new(Kind::Empty, "empty file (0 bytes)"));
    }
    let short = |what: &str| Fault::new(Kind::Truncated, format!("{what}: header cut short"));
    match sniff(bytes) {
        Some(Format::Jpeg) => jpeg(bytes).ok_or_else(|| short("JPEG")),
        Some(Format::Png) => png(bytes).ok_or_else(|| short("PNG")),
        Some(Format::Bmp) => bmp(bytes).ok_or_else(|| short("BMP")),
        Some(Format::WebP) => webp(bytes),
        None => Err(Fault::new(
            Kind::UnknownFormat,
            "not a JPEG, PNG, BMP or WebP file (unrecognised signature)",
        )),
    }
}

/// Walk the marker segments up to the first SOF.
fn jpeg(b: &[u8]) -> Option<ImageInfo> {
    let mut pos = 2;
    loop {
        // A marker: 0xFF, optional fill 0xFF bytes, the code.
        if *b.get(pos)? != 0xFF {
            return None;
        }
        while *b.get(pos)? == 0xFF {
            pos += 1;
        }
        let m = *b.get(pos)?;
        pos += 1;
        if m == 0x01 || (0xD0..=0xD7).contains(&m) {
            continue; // no length
        }
        if m == 0xD9 || m == 0xDA {
            return None; // EOI or a scan before any frame header
        }
        let len = be16(b, pos)? as usize;
        if len < 2 {
            return None;
        }
        let sof = matches!(m, 0xC0..=0xCF) && !matches!(m, 0xC4 | 0xC8 | 0xCC);
        if sof {
            let bits = *b.get(pos + 2)?;
            let height = be16(b, pos + 3)?;
            let width = be16(b, pos + 5)?;
            let comps = *b.get(pos + 7)?;
            let color = match comps {
                1 => ColorModel::Gray,
                4 => ColorModel::Cmyk,
                _ => ColorModel::Rgb,
            };
            return Some(ImageInfo {
                format: Format::Jpeg,
                width,
                height,
                color,
                alpha: false,
                bits,
                progressive: matches!(m, 0xC2 | 0xC6 | 0xCA | 0xCE),
            });
        }
        pos += len;
    }
}

/// A PNG's chunks before the first `IDAT` (or `IEND`), as `(type, data offset, length)`:
/// at most 64 (a header with more is not worth walking), stopping where the bytes do.
pub fn png_header_chunks(b: &[u8]) -> impl Iterator<Item = (&[u8], usize, usize)> + '_ {
    let mut pos = 8usize;
    (0..64).map_while(move |_| {
        let len = be32(b, pos)? as usize;
        let kind = b.get(pos + 4..pos + 8)?;
        if kind == b"IDAT" || kind == b"IEND" {
            return None;
        }
        let at = pos + 8;
        pos = pos.saturating_add(12).saturating_add(len);
        Some((kind, at, len))
    })
}

/// IHDR, then the chunks before the first IDAT for a `tRNS`.
fn png(b: &[u8]) -> Option<ImageInfo> {
    if b.get(12..16)? != b"IHDR" {
        return None;
    }
    let width = be32(b, 16)?;
    let height = be32(b, 20)?;
    let bits = *b.get(24)?;
    let ctype = *b.get(25)?;
    let trns = png_header_chunks(b).any(|(kind, _, _)| kind == b"tRNS");
    let (color, alpha) = match ctype {
        0 => (ColorModel::Gray, trns),
        2 => (ColorModel::Rgb, trns),
        3 => (ColorModel::Palette, trns),
        4 => (ColorModel::Gray, true),
        _ => (ColorModel::Rgb, true), // 6: RGBA
    };
    Some(ImageInfo {
        format: Format::Png,
        width,
        height,
        color,
        alpha,
        bits,
        progressive: false,
    })
}

fn bmp(b: &[u8]) -> Option<ImageInfo> {
    let header = le32(b, 14)?;
    let (width, height, bpp) = if header == 12 {
        (le16(b, 18)?, le16(b, 20)?, le16(b, 24)?)
    } else {
        let h = le32(b, 22)? as i32;
        (le32(b, 18)?, h.unsigned_abs(), le16(b, 28)?)
    };
    Some(ImageInfo {
        format: Format::Bmp,
        width,
        height,
        color: if bpp <= 8 {
            ColorModel::Palette
        } else {
            ColorModel::Rgb
        },
        alpha: bpp == 32,
        bits: u8::try_from(bpp).unwrap_or(u8::MAX),
        progressive: false,
    })
}

fn webp(b: &[u8]) -> Result<ImageInfo, Fault> {
    use image::ImageDecoder;
    let d = image::codecs::webp::WebPDecoder::new(std::io::Cursor::new(b))
        .map_err(|e| Fault::new(Kind::Corrupt, format!("invalid WEBP: {e}")))?;
    let (width, height) = d.dimensions();
    let ct = d.color_type();
    Ok(ImageInfo {
        format: Format::WebP,
        width,
        height,
        color: ColorModel::Rgb,
        alpha: ct.has_alpha(),
        bits: 8,
        progressive: false,
    })
}
