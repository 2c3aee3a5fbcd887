//! The system libjpeg-turbo, through imgfeed's C shim over its libjpeg API
//! (`csrc/jpeg_shim.c`, compiled by `build.rs` when the headers are found).
//!
//! The shim keeps libjpeg's `setjmp`/`longjmp` error handling and the layout of
//! `jpeg_decompress_struct` on the C side: this module sees an opaque handle. It decodes a
//! rectangle as the `turbojpeg` feature's path does (`jpeg_crop_scanline` for the columns,
//! `jpeg_skip_scanlines` for the rows outside), reads the rest of the file so that damage
//! anywhere is found, and tolerates the libjpeg warnings about metadata only (junk before
//! a marker, a damaged ICC segment, an unknown Adobe transform or JFIF revision) where the
//! feature's path fails on every warning. CMYK/YCCK files decode whole and are converted
//! to RGB as Pillow converts them (`decode_cmyk`), bit for bit.

use super::decoder::libjpeg_fault;
use crate::error::bug;
use crate::error::{Fault, SampleErrorKind};
use std::ffi::{c_char, c_int, c_uint, CStr};

#[repr(C)]
struct Handle {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Default)]
struct RawHeader {
    width: c_uint,
    height: c_uint,
    components: c_int,
    color: c_int,
    progressive: c_int,
    mcu_width: c_uint,
}

/// The shim's `struct ifj_rect`: the rows `top .. top + height` and columns
/// `left .. left + width` to decode.
#[repr(C)]
struct RawRect {
    top: c_uint,
    left: c_uint,
    height: c_uint,
    width: c_uint,
}

impl RawRect {
    /// `rect` in the shim's integers; an error where a side does not fit.
    fn new(rect: Rect) -> Result<RawRect, Fault> {
        let dim = |v: usize| {
            c_uint::try_from(v).map_err(|_| bug(format!("JPEG dimension {v} too large")))
        };
        Ok(RawRect {
            top: dim(rect.top)?,
            left: dim(rect.left)?,
            height: dim(rect.height)?,
            width: dim(rect.width)?,
        })
    }
}

extern "C" {
    fn ifj_new() -> *mut Handle;
    fn ifj_free(d: *mut Handle);
    fn ifj_message(d: *const Handle) -> *const c_char;
    fn ifj_version() -> c_int;
    fn ifj_header(d: *mut Handle, data: *const u8, len: usize, out: *mut RawHeader) -> c_int;
    fn ifj_decode_cmyk(
        d: *mut Handle,
        data: *const u8,
        len: usize,
        out: *mut u8,
        out_len: usize,
    ) -> c_int;
    fn ifj_decode(
        d: *mut Handle,
        data: *const u8,
        len: usize,
        rect: *const RawRect,
        scale_denom: c_int,
        channels: c_int,
        out: *mut u8,
        out_len: usize,
    ) -> c_int;
}

/// The libjpeg-turbo version the shim was built against, e.g. `2.1.5`.
pub(crate) fn version() -> String {
    // SAFETY: a constant.
    let v = unsafe { ifj_version() };
    format!("{}.{}.{}", v / 1_000_000, (v / 1000) % 1000, v % 1000)
}

/// A libjpeg decompressor (one per worker).
pub(crate) struct Libjpeg {
    handle: *mut Handle,
}

// SAFETY: the handle is used by one thread at a time (each worker owns its decoder).
unsafe impl Send for Libjpeg {}

pub(crate) use super::decoder::JpegHeader as Header;
pub(crate) use crate::imgproc::geometry::Rect;

impl Libjpeg {
    /// A new decompressor.
    pub(crate) fn new() -> Result<Libjpeg, Fault> {
        // SAFETY: plain constructor; null means failure.
        let handle = unsafe { ifj_new() };
        if handle.is_null() {
            return Err(Fault::new(
                SampleErrorKind::Other,
                "libjpeg: cannot create a decompressor",
            ));
        }
        Ok(Libjpeg { handle })
    }

    fn error(&self) -> String {
        // SAFETY: the handle is valid; the message is a NUL-terminated buffer inside it,
        // copied out here.
        unsafe {
            let s = ifj_message(self.handle);
            if s.is_null() {
                "unknown libjpeg error".into()
            } else {
                CStr::from_ptr(s).to_string_lossy().into_owned()
            }
        }
    }

    /// Read the header of `bytes`.
    pub(crate) fn header(&mut self, bytes: &[u8]) -> Result<Header, Fault> {
        let mut h = RawHeader::default();
        // SAFETY: valid handle; the shim reads at most `len` bytes of `bytes` and writes `h`.
        let r = unsafe { ifj_header(self.handle, bytes.as_ptr(), bytes.len(), &mut h) };
        if r != 0 {
            return Err(libjpeg_fault(format!("invalid JPEG: {}", self.error())));
        }
        if h.width == 0 || h.height == 0 {
            return Err(libjpeg_fault(format!(
                "invalid JPEG: size {}x{}",
                h.width, h.height
            )));
        }
        Ok(Header {
            width: h.width as usize,
            height: h.height as usize,
            cmyk: h.color == 2,
            mcu_width: Some(h.mcu_width as usize).filter(|&m| m > 0),
            progressive: h.progressive != 0,
            scale: 1,
        })
    }

    /// Decode `rect` (after `header` on the same bytes, [`Header::scaled`] for a DCT-scaled
    /// decode: `rect` is then in the scaled image) into `out` as RGB (`channels` 3) or
    /// RGBX (4, the X byte unspecified); the rectangle's left edge is moved down to an iMCU
    /// boundary first. Returns the rectangle decoded.
    pub(crate) fn decode(
        &mut self,
        bytes: &[u8],
        h: &Header,
        rect: Rect,
        channels: usize,
        out: &mut Vec<u8>,
    ) -> Result<Rect, Fault> {
        let aligned = h.region_out(rect, channels, out);
        let raw = RawRect::new(aligned)?;
        // SAFETY: valid handle; `raw` lives through the call (the shim reads it, keeps no
        // pointer to it); `out` holds the rectangle (passed as its length, which the shim
        // checks before writing rows of `width * channels` bytes).
        let r = unsafe {
            ifj_decode(
                self.handle,
                bytes.as_ptr(),
                bytes.len(),
                &raw,
                h.scale as c_int,
                channels as c_int,
                out.as_mut_ptr(),
                out.len(),
            )
        };
        if r != 0 {
            return Err(libjpeg_fault(format!("invalid JPEG: {}", self.error())));
        }
        Ok(aligned)
    }
}

impl Libjpeg {
    /// Decode a CMYK or YCCK file (after `header` on the same bytes) whole, to RGB
    /// (`channels` 3) or RGBX (4) in `out`, as Pillow's `convert("RGB")` does: libjpeg's
    /// CMYK read as Adobe-inverted, then `r = nk - c·nk/255` per channel with `nk = 255 - k`
    /// in Pillow's integer arithmetic. `scratch` holds the CMYK rows.
    pub(crate) fn decode_cmyk(
        &mut self,
        bytes: &[u8],
        h: &Header,
        channels: usize,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> Result<Rect, Fault> {
        let n = h.width * h.height;
        scratch.resize(n * 4, 0);
        // SAFETY: valid handle; `scratch` holds `n * 4` bytes, passed as its length, which
        // the shim checks against the image before writing rows of `width * 4` bytes.
        let r = unsafe {
            ifj_decode_cmyk(
                self.handle,
                bytes.as_ptr(),
                bytes.len(),
                scratch.as_mut_ptr(),
                scratch.len(),
            )
        };
        if r != 0 {
            return Err(libjpeg_fault(format!("invalid JPEG: {}", self.error())));
        }
        if out.len() < n * channels {
            out.resize(n * channels, 0);
        }
        for (px, o) in scratch[..n * 4]
            .chunks_exact(4)
            .zip(out.chunks_exact_mut(channels))
        {
            let nk = u32::from(px[3]);
            for c in 0..3 {
                // Pillow's CMYK is libjpeg's inverted ("CMYK;I"); MULDIV255 rounds.
                let t = (255 - u32::from(px[c])) * nk + 128;
                let mul = ((t >> 8) + t) >> 8;
                o[c] = nk.saturating_sub(mul) as u8;
            }
        }
        Ok(Rect::whole(h.height, h.width))
    }
}

impl Drop for Libjpeg {
    fn drop(&mut self) {
        // SAFETY: the handle came from ifj_new and is freed once.
        unsafe { ifj_free(self.handle) }
    }
}
