//! Image decoding: the format from the magic bytes, JPEG through libjpeg-turbo when the
//! build has it — the system library through the shim of `libjpeg` (what a plain `cargo
//! build` gets where its headers are installed), or the copy the `turbojpeg` feature
//! builds from source (`turbo`) — and through zune-jpeg (strict mode, so a truncated file
//! is an error) otherwise or when asked. libjpeg-turbo can decode just a rectangle. CMYK
//! and YCCK files become RGB as Pillow's `convert("RGB")` makes it with the system library
//! (bit for bit); the `turbojpeg` feature leaves them to zune-jpeg. Warnings that mean
//! damaged pixels are errors with both (the system library's shim tolerates the ones about
//! metadata only). PNG, BMP and WebP go through `image`. Grayscale, CMYK, palette, 16-bit
//! and alpha all become RGB u8: alpha is dropped (not composited, as Pillow's
//! `convert("RGB")` does) and 16-bit samples are scaled by 255/65535.
//!
//! `max_pixels` is checked on the header before any pixel buffer is allocated: a
//! decompression bomb is an error, not an OOM. zune-jpeg has open panic reports on hostile
//! input; a panic is caught and becomes this image's error.
//!
//! This is a library the `decode` op calls: it knows nothing of specs, ops or the engine.

use crate::error::{Fault, SampleErrorKind as Kind};
use crate::imgproc::geometry::Rect;
use serde::{Deserialize, Serialize};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Pillow's `Image.MAX_IMAGE_PIXELS`.
pub const DEFAULT_MAX_PIXELS: u64 = 89_478_485;

/// Which JPEG decoder to use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JpegBackend {
    /// libjpeg-turbo when the build has it (the system library, or the `turbojpeg`
    /// feature's), zune-jpeg otherwise.
    #[default]
    Auto,
    /// zune-jpeg (pure Rust).
    Zune,
    /// The system libjpeg-turbo (needs its headers at build time).
    Libjpeg,
    /// libjpeg-turbo built from source (needs the `turbojpeg` feature).
    Turbo,
}

/// The JPEG decoder `auto` picks in this build, with its version: for example
/// `libjpeg-turbo 2.1.5 (system)` or `zune-jpeg 0.5 (pure Rust)`.
pub fn jpeg_decoder() -> String {
    JpegBackend::Auto.describe()
}

impl JpegBackend {
    /// The decoder this choice runs in this build, with its version.
    pub fn describe(self) -> String {
        const ZUNE: &str = "zune-jpeg 0.5 (pure Rust)";
        if self == JpegBackend::Zune {
            return ZUNE.into();
        }
        #[cfg(imgfeed_libjpeg)]
        return format!("libjpeg-turbo {} (system)", super::libjpeg::version());
        #[cfg(feature = "turbojpeg")]
        return "libjpeg-turbo 3 (built from source, feature turbojpeg)".into();
        #[cfg(not(imgfeed_turbo))]
        return ZUNE.into();
    }
}

/// The libjpeg-turbo decoder this build has.
#[cfg(imgfeed_libjpeg)]
type Lib = super::libjpeg::Libjpeg;
#[cfg(feature = "turbojpeg")]
type Lib = super::turbo::Turbo;

/// What a [`Decoder`] is asked to do: which JPEG decoder, and the largest image accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecoderConfig {
    /// The JPEG decoder.
    pub backend: JpegBackend,
    /// Largest `width × height` accepted (checked on the header).
    pub max_pixels: u64,
}

impl Default for DecoderConfig {
    fn default() -> DecoderConfig {
        DecoderConfig {
            backend: JpegBackend::Auto,
            max_pixels: DEFAULT_MAX_PIXELS,
        }
    }
}

/// The formats `decode` understands, by magic bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `FF D8 FF`.
    Jpeg,
    /// `89 P N G`.
    Png,
    /// `B M`.
    Bmp,
    /// `RIFF....WEBP`.
    WebP,
}

/// Sniff the format from the first bytes.
pub fn sniff(bytes: &[u8]) -> Option<Format> {
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(Format::Jpeg)
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(Format::Png)
    } else if bytes.starts_with(b"BM") {
        Some(Format::Bmp)
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some(Format::WebP)
    } else {
        None
    }
}

impl JpegHeader {
    /// The header of the image decoded at `1 / denom` of its size (libjpeg's DCT scaling):
    /// sides `ceil(side / denom)` and iMCUs `denom` times narrower. `denom` is 1, 2, 4 or 8
    /// on a full-size header.
    pub fn scaled(self, denom: usize) -> JpegHeader {
        let d = denom.max(1);
        JpegHeader {
            width: self.width.div_ceil(d),
            height: self.height.div_ceil(d),
            mcu_width: self.mcu_width.map(|m| (m / d).max(1)),
            scale: self.scale * d,
            ..self
        }
    }

    /// `rect` with its left edge moved down to an iMCU boundary (libjpeg-turbo decodes
    /// whole iMCUs across), widened to keep its right edge.
    pub fn mcu_aligned(&self, r: Rect) -> Rect {
        let aligned = r.left - r.left % self.mcu_width.unwrap_or(1).max(1);
        Rect {
            left: aligned,
            width: r.width + (r.left - aligned),
            ..r
        }
    }

    /// The prologue of a region decode, the same for both libjpeg-turbo backends: the
    /// rectangle decoded for `rect` ([`JpegHeader::mcu_aligned`]), with `out` grown to hold
    /// it at `channels` bytes a pixel — grown only, never zeroed: the decode writes every
    /// byte of the rectangle (zeroing per image was a measured 2% of the instructions).
    #[cfg(any(imgfeed_libjpeg, feature = "turbojpeg"))]
    pub(crate) fn region_out(&self, rect: Rect, channels: usize, out: &mut Vec<u8>) -> Rect {
        let aligned = self.mcu_aligned(rect);
        let need = aligned.height * aligned.width * channels;
        if out.len() < need {
            out.resize(need, 0);
        }
        aligned
    }
}

/// What a JPEG header says, as libjpeg-turbo reads it (both of its backends).
#[derive(Clone, Copy, Debug)]
pub struct JpegHeader {
    /// Columns.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// Whether libjpeg cannot produce RGB itself (CMYK, YCCK).
    pub cmyk: bool,
    /// Width of an iMCU in pixels (a region's left edge must be a multiple of it); `None`
    /// for unknown subsampling, which libjpeg-turbo cannot decode by region.
    pub mcu_width: Option<usize>,
    /// Progressive coding.
    pub progressive: bool,
    /// The DCT scale the decode is asked for (1, 2, 4 or 8): the sizes above are then
    /// already the scaled ones ([`JpegHeader::scaled`]).
    pub scale: usize,
}

/// What a decode produced: the whole image, or a rectangle of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// `(height, width)` of the whole image.
    pub full: (usize, usize),
    /// The rectangle of the whole image that the decoded pixels are.
    pub region: Rect,
    /// Bytes per pixel: 3 (RGB) or 4 (RGBX, when asked for and the decoder can).
    pub channels: usize,
    /// The DCT scale decoded at: 1 (full size), 2, 4 or 8 (`full` is then the scaled size).
    pub scale: usize,
}

/// A decoder with its reusable state; one per worker.
pub struct Decoder {
    cfg: DecoderConfig,
    #[cfg(imgfeed_turbo)]
    turbo: Option<Lib>,
    /// CMYK rows before their conversion to RGB (system libjpeg-turbo).
    #[cfg(imgfeed_libjpeg)]
    scratch: Vec<u8>,
}

impl Decoder {
    /// A decoder for `cfg` (a [`DecoderConfig`], or a `decode` op's settings).
    pub fn new(cfg: impl Into<DecoderConfig>) -> Decoder {
        Decoder {
            cfg: cfg.into(),
            #[cfg(imgfeed_turbo)]
            turbo: None,
            #[cfg(imgfeed_libjpeg)]
            scratch: Vec::new(),
        }
    }

    /// Decode `bytes` into `out` (resized to `h × w × 3`); returns `(height, width)`.
    pub fn decode(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(usize, usize), Fault> {
        self.decode_region(bytes, |_, _| 1, |_, _| None, false, out)
            .map(|d| d.region.size())
    }

    /// Decode `bytes` into `out`. `scale(height, width)` may ask for the image at 1/2, 1/4
    /// or 1/8 of its size (DCT scaling, Pillow's `draft`), which a decoder that can
    /// (libjpeg-turbo, not on CMYK) does: the result's `full` is then the scaled size
    /// (`ceil(side / scale)`) and `scale` the denominator; any other answer is 1.
    /// `want(height, width)`, given the (scaled) size, may name the only rectangle the
    /// caller needs, which a decoder that can is free to decode alone (it may decode more:
    /// the result says what it did). With `rgbx`, a decoder that can writes 4 bytes a
    /// pixel (`Decoded::channels` says which it did). A decoder that cannot scale or decode
    /// a region calls neither.
    pub fn decode_region(
        &mut self,
        bytes: &[u8],
        mut scale: impl FnMut(usize, usize) -> usize,
        mut want: impl FnMut(usize, usize) -> Option<Rect>,
        rgbx: bool,
        out: &mut Vec<u8>,
    ) -> Result<Decoded, Fault> {
        if bytes.is_empty() {
            return Err(Fault::new(Kind::Empty, "empty file (0 bytes)"));
        }
        let whole = |(h, w): (usize, usize)| Decoded {
            full: (h, w),
            region: Rect::whole(h, w),
            channels: 3,
            scale: 1,
        };
        match sniff(bytes) {
            Some(Format::Jpeg) => {
                #[cfg(imgfeed_turbo)]
                if self.cfg.backend != JpegBackend::Zune {
                    if let Some(r) = self.decode_turbo(bytes, &mut scale, &mut want, rgbx, out) {
                        return r;
                    }
                }
                let _ = (&mut scale, &mut want, rgbx);
                decode_zune(bytes, self.cfg.max_pixels, out).map(whole)
            }
            Some(f) => decode_with_image(bytes, f, self.cfg.max_pixels, out).map(whole),
            None => Err(Fault::new(
                Kind::UnknownFormat,
                "not a JPEG, PNG, BMP or WebP file (unrecognised signature)",
            )),
        }
    }

    /// `None` when libjpeg-turbo cannot do this file and zune-jpeg should (CMYK with the
    /// `turbojpeg` feature; the system library's shim converts CMYK as Pillow does).
    #[cfg(imgfeed_turbo)]
    fn decode_turbo(
        &mut self,
        bytes: &[u8],
        scale: &mut dyn FnMut(usize, usize) -> usize,
        want: &mut dyn FnMut(usize, usize) -> Option<Rect>,
        rgbx: bool,
        out: &mut Vec<u8>,
    ) -> Option<Result<Decoded, Fault>> {
        if self.turbo.is_none() {
            match Lib::new() {
                Ok(t) => self.turbo = Some(t),
                Err(e) => return Some(Err(e)),
            }
        }
        let t = self.turbo.as_mut()?;
        let header = match t.header(bytes) {
            Ok(h) => h,
            Err(e) => {
                self.turbo = None;
                return Some(Err(e));
            }
        };
        #[cfg(not(imgfeed_libjpeg))]
        if header.cmyk {
            return None;
        }
        let (h, w) = (header.height, header.width);
        if let Err(e) = check_pixels(w, h, self.cfg.max_pixels) {
            return Some(Err(e));
        }
        // CMYK decodes whole at full size (its conversion is Pillow's, on full rows).
        let denom = match scale(h, w) {
            d @ (2 | 4 | 8) if !header.cmyk => d,
            _ => 1,
        };
        let header = header.scaled(denom);
        let (h, w) = (header.height, header.width);
        let whole = Rect::whole(h, w);
        let rect = want(h, w)
            .filter(|r| r.fits(h, w))
            .filter(|_| header.mcu_width.is_some())
            .map(|r| {
                if header.progressive {
                    r.grow(PROGRESSIVE_MARGIN, h, w)
                } else {
                    r
                }
            })
            .unwrap_or(whole);
        let channels = if rgbx { 4 } else { 3 };
        #[cfg(imgfeed_libjpeg)]
        let cmyk = header.cmyk;
        #[cfg(not(imgfeed_libjpeg))]
        let cmyk = false;
        let mut r = match () {
            // Whole, converted as Pillow converts CMYK (without the system library, CMYK
            // went to zune-jpeg above).
            #[cfg(imgfeed_libjpeg)]
            () if cmyk => t.decode_cmyk(bytes, &header, channels, out, &mut self.scratch),
            () => t.decode(bytes, &header, rect, channels, out),
        };
        if r.is_err() && rect != whole && !cmyk {
            // Some valid files cannot be decoded by region (odd sampling factors, lossless
            // JPEG): decode them whole, with a fresh handle.
            let fresh = match Lib::new() {
                Ok(f) => f,
                Err(e) => return Some(Err(e)),
            };
            let t = self.turbo.insert(fresh);
            r = t
                .header(bytes)
                .and_then(|hd| t.decode(bytes, &hd.scaled(denom), whole, channels, out));
        }
        let r = r.map(|region| Decoded {
            full: (h, w),
            region,
            channels,
            scale: denom,
        });
        if r.is_err() {
            // A decompressor that failed mid-image can misread the next header: start over.
            self.turbo = None;
        }
        Some(r)
    }
}

/// A progressive file whose scans leave coefficients unrefined is block-smoothed by
/// libjpeg-turbo, from neighbouring blocks up to two away (32 pixels for subsampled
/// chroma), which a region's edge cuts off: such files get 32 more pixels on every side,
/// so the wanted rectangle stays bit-identical to a whole decode.
#[cfg(imgfeed_turbo)]
const PROGRESSIVE_MARGIN: usize = 32;

/// libjpeg-turbo reports errors as text: a premature end is a truncated file (so is a
/// missing SOS: at the end of the data libjpeg inserts an EOI, then finds no scan), an
/// unsupported process is unsupported, everything else is damaged data.
#[cfg(imgfeed_turbo)]
pub(crate) fn libjpeg_fault(msg: String) -> Fault {
    let m = msg.to_ascii_lowercase();
    let short = ["premature end", "input file ended", "missing sos marker"];
    let kind = if short.iter().any(|w| m.contains(w)) {
        Kind::Truncated
    } else if m.contains("unsupported") || m.contains("not supported") {
        Kind::Unsupported
    } else {
        Kind::Corrupt
    };
    Fault::new(kind, msg)
}

/// Refuse zero-sized images and images over `max` pixels (from the header, before any
/// pixel buffer exists).
pub fn check_pixels(w: usize, h: usize, max: u64) -> Result<(), Fault> {
    if w == 0 || h == 0 {
        return Err(Fault::new(
            Kind::Corrupt,
            format!("image has a zero dimension ({w}x{h})"),
        ));
    }
    if (w as u64).saturating_mul(h as u64) > max {
        return Err(Fault::new(
            Kind::TooManyPixels,
            format!(
                "{w}x{h} image exceeds the pixel limit of {max} (max_pixels; a decompression bomb?)"
            ),
        ));
    }
    Ok(())
}

fn zune_fault(e: zune_jpeg::errors::DecodeErrors) -> Fault {
    use zune_jpeg::errors::DecodeErrors as E;
    let kind = match &e {
        E::ExhaustedData | E::IoErrors(_) => Kind::Truncated,
        E::Unsupported(_) => Kind::Unsupported,
        E::LargeDimensions(_) => Kind::TooManyPixels,
        _ => Kind::Corrupt,
    };
    let text = e.to_string();
    Fault::new(
        kind,
        format!("invalid JPEG: {}", text.trim().trim_matches('"')),
    )
}

fn decode_zune(bytes: &[u8], max_pixels: u64, out: &mut Vec<u8>) -> Result<(usize, usize), Fault> {
    use zune_core::bytestream::ZCursor;
    use zune_core::colorspace::ColorSpace;
    use zune_core::options::DecoderOptions;
    let opts = DecoderOptions::new_fast()
        .set_strict_mode(true)
        .set_max_width(1 << 16)
        .set_max_height(1 << 16)
        .jpeg_set_out_colorspace(ColorSpace::RGB);
    let run = || -> Result<(usize, usize), Fault> {
        let mut d = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(bytes), opts);
        d.decode_headers().map_err(zune_fault)?;
        let info = d
            .info()
            .ok_or_else(|| Fault::new(Kind::Truncated, "invalid JPEG: no frame header"))?;
        let (w, h) = (info.width as usize, info.height as usize);
        check_pixels(w, h, max_pixels)?;
        let n = d
            .output_buffer_size()
            .ok_or_else(|| Fault::new(Kind::Corrupt, "invalid JPEG: image size overflows"))?;
        if n != w * h * 3 {
            return Err(Fault::new(
                Kind::Unsupported,
                format!("JPEG decoder would produce {n} bytes, not RGB {w}x{h}"),
            ));
        }
        if out.len() < n {
            out.resize(n, 0); // grow only: decode_into overwrites the first n bytes
        }
        d.decode_into(&mut out[..n]).map_err(zune_fault)?;
        Ok((h, w))
    };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            Err(Fault::new(
                Kind::Panic,
                format!("JPEG decoder panicked: {msg}"),
            ))
        }
    }
}

fn decode_with_image(
    bytes: &[u8],
    format: Format,
    max_pixels: u64,
    out: &mut Vec<u8>,
) -> Result<(usize, usize), Fault> {
    use image::{ImageFormat, ImageReader};
    use std::io::Cursor;
    let fmt = match format {
        Format::Png => ImageFormat::Png,
        Format::Bmp => ImageFormat::Bmp,
        Format::WebP => ImageFormat::WebP,
        Format::Jpeg => ImageFormat::Jpeg,
    };
    let name = format!("{format:?}").to_uppercase();
    if format == Format::Png {
        check_png_palette(bytes)?;
    }
    let (w, h) = ImageReader::with_format(Cursor::new(bytes), fmt)
        .into_dimensions()
        .map_err(|e| image_fault(&name, e))?;
    check_pixels(w as usize, h as usize, max_pixels)?;
    let mut reader = ImageReader::with_format(Cursor::new(bytes), fmt);
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(w);
    limits.max_image_height = Some(h);
    // Room for the widest layout (16-bit RGBA) plus the decoder's own buffers.
    limits.max_alloc = Some((w as u64 * h as u64).saturating_mul(8 * 2) + (1 << 20));
    reader.limits(limits);
    let img = reader.decode().map_err(|e| image_fault(&name, e))?;
    let rgb = img.into_rgb8();
    let (w, h) = rgb.dimensions();
    *out = rgb.into_raw();
    Ok((h as usize, w as usize))
}

/// A `PLTE` chunk must hold 1 to 256 entries of 3 bytes (PNG spec, 11.2.3): the `png`
/// crate panics on a length that is not a multiple of 3 (found by fuzzing), so a bad one is
/// refused here as damaged data.
fn check_png_palette(bytes: &[u8]) -> Result<(), Fault> {
    match super::inspect::png_header_chunks(bytes).find(|(kind, _, _)| *kind == b"PLTE") {
        Some((_, _, len)) if len == 0 || len % 3 != 0 || len > 768 => Err(Fault::new(
            Kind::Corrupt,
            format!("invalid PNG: PLTE chunk of {len} bytes (1 to 256 RGB entries of 3 bytes)"),
        )),
        _ => Ok(()),
    }
}

/// Classify an `image` crate error.
fn image_fault(format: &str, e: image::ImageError) -> Fault {
    use image::ImageError as E;
    let text = e.to_string();
    let kind = match &e {
        E::Limits(_) => Kind::TooManyPixels,
        E::Unsupported(_) => Kind::Unsupported,
        E::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => Kind::Truncated,
        _ => {
            let t = text.to_ascii_lowercase();
            // The png crate's words for data that ends early: a cut file, a zlib stream
            // without its end, a complete stream with too few rows.
            let short = [
                "eof",
                "end of",
                "no more data",
                "insufficientinput",
                "not have enough data",
            ];
            if short.iter().any(|w| t.contains(w)) {
                Kind::Truncated
            } else if t.contains("too large") {
                Kind::TooManyPixels // the format's own size limit (BMP: 65535 a side)
            } else {
                Kind::Corrupt
            }
        }
    };
    Fault::new(kind, format!("invalid {format}: {text}"))
}

#[cfg(all(test, imgfeed_turbo))]
mod tests {
    use super::*;

    fn edge(name: &str) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/edge")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// A progressive file's region grows by 32 pixels a side (block smoothing reaches that
    /// far); a baseline file's is the rectangle asked for, its left edge on an iMCU.
    #[test]
    fn progressive_files_decode_a_wider_region() {
        let mut d = Decoder::new(DecoderConfig::default());
        let mut out = Vec::new();
        let want = |_: usize, _: usize| {
            Some(Rect {
                top: 20,
                left: 17,
                height: 8,
                width: 8,
            })
        };
        let p = d
            .decode_region(&edge("progressive.jpg"), |_, _| 1, want, false, &mut out)
            .expect("decodes");
        let region = |top, left, height, width| Rect {
            top,
            left,
            height,
            width,
        };
        assert_eq!((p.full, p.region), ((43, 61), region(0, 0, 43, 57)));
        let b = d
            .decode_region(&edge("sampling_420.jpg"), |_, _| 1, want, false, &mut out)
            .expect("decodes");
        assert_eq!((b.full, b.region), ((43, 61), region(20, 16, 8, 9)));
    }
}
