//! libjpeg-turbo through its TurboJPEG 3 C API (feature `turbojpeg`), used directly
//! because the safe wrapper crate does not expose partial decoding.
//!
//! What it adds over zune-jpeg: **region decoding**. When `decode` is followed by a fused
//! resize+center_crop, only the source rectangle the crop window samples (plus the
//! filter's reach) is run through IDCT, upsampling and colour conversion; rows above it are
//! skipped and columns outside it are not converted. The pixels inside the rectangle are
//! the ones a full decode gives, so the output does not change.
//!
//! libjpeg warnings that mean damaged pixels (a truncated file, corrupt data) are errors
//! here, like zune-jpeg's strict mode; those about metadata only are tolerated, as by the
//! system library's shim. CMYK/YCCK files are left to zune-jpeg, which converts them to RGB.

use super::decoder::libjpeg_fault;
use crate::error::{Fault, SampleErrorKind};
use std::ffi::CStr;
use turbojpeg_sys as tj;

/// A TurboJPEG decompressor handle.
pub(crate) struct Turbo {
    handle: tj::tjhandle,
}

// SAFETY: a TurboJPEG handle is used by one thread at a time (each worker owns one).
unsafe impl Send for Turbo {}

pub(crate) use super::decoder::JpegHeader as Header;
pub(crate) use crate::imgproc::geometry::Rect;

impl Turbo {
    /// A new handle.
    pub(crate) fn new() -> Result<Turbo, Fault> {
        #[allow(clippy::unnecessary_cast)]
        // SAFETY: plain constructor; null means failure.
        let handle = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_DECOMPRESS as i32) };
        if handle.is_null() {
            return Err(Fault::new(
                SampleErrorKind::Other,
                "libjpeg-turbo: cannot create a decompressor",
            ));
        }
        // A small progressive file with thousands of scans is a CPU bomb: refuse it
        // (libjpeg-turbo's own tools use this limit too).
        // SAFETY: valid handle, valid parameter.
        unsafe { tj::tj3Set(handle, tj::TJPARAM_TJPARAM_SCANLIMIT as i32, 500) };
        Ok(Turbo { handle })
    }

    fn error(&self) -> String {
        // SAFETY: the handle is valid; the string is owned by it and copied out here.
        unsafe {
            let s = tj::tj3GetErrorStr(self.handle);
            if s.is_null() {
                "unknown libjpeg-turbo error".into()
            } else {
                CStr::from_ptr(s).to_string_lossy().into_owned()
            }
        }
    }

    /// The last call failed on a libjpeg warning about metadata only (the decode went on
    /// and the pixels are whole): junk bytes before a marker, a damaged ICC segment, an
    /// unknown Adobe transform or JFIF revision — the warnings the system library's shim
    /// (`csrc/jpeg_shim.c`) tolerates, recognised here by their text.
    fn tolerated_warning(&self) -> bool {
        // SAFETY: valid handle.
        let code = unsafe { tj::tj3GetErrorCode(self.handle) };
        #[allow(clippy::unnecessary_cast)]
        let warning = code == tj::TJERR_TJERR_WARNING as i32;
        let m = self.error().to_ascii_lowercase();
        let metadata = [
            "extraneous bytes before marker",
            "bad icc marker",
            "unknown adobe color transform",
            "unknown jfif revision",
        ];
        warning && metadata.iter().any(|w| m.contains(w))
    }

    fn get(&self, p: tj::TJPARAM) -> i32 {
        // SAFETY: valid handle, valid parameter id.
        unsafe { tj::tj3Get(self.handle, p as i32) }
    }

    /// Read the header of `bytes`.
    pub(crate) fn header(&mut self, bytes: &[u8]) -> Result<Header, Fault> {
        // SAFETY: `bytes` outlives the call; the library reads at most `len` bytes.
        let r = unsafe { tj::tj3DecompressHeader(self.handle, bytes.as_ptr(), bytes.len() as _) };
        if r != 0 && !self.tolerated_warning() {
            return Err(libjpeg_fault(format!("invalid JPEG: {}", self.error())));
        }
        let width = self.get(tj::TJPARAM_TJPARAM_JPEGWIDTH);
        let height = self.get(tj::TJPARAM_TJPARAM_JPEGHEIGHT);
        let subsamp = self.get(tj::TJPARAM_TJPARAM_SUBSAMP);
        let cs = self.get(tj::TJPARAM_TJPARAM_COLORSPACE);
        if width <= 0 || height <= 0 {
            return Err(libjpeg_fault(format!(
                "invalid JPEG: size {width}x{height}"
            )));
        }
        // turbojpeg.h's `tjMCUWidth` (a static in the header, not an exported symbol),
        // indexed by TJSAMP: 444, 422, 420, GRAY, 440, 411, 441. Unknown subsampling
        // (-1) gets the image width: no region decode, only whole images.
        const MCU_WIDTH: [usize; 7] = [8, 16, 16, 8, 8, 32, 8];
        let mcu_width = usize::try_from(subsamp)
            .ok()
            .and_then(|i| MCU_WIDTH.get(i).copied());
        Ok(Header {
            width: width as usize,
            height: height as usize,
            cmyk: cs == tj::TJCS_TJCS_CMYK as i32 || cs == tj::TJCS_TJCS_YCCK as i32,
            mcu_width,
            progressive: self.get(tj::TJPARAM_TJPARAM_PROGRESSIVE) == 1,
            scale: 1,
        })
    }

    // The bindings' enum constants are c_int on some targets and c_uint on others.
    #[allow(clippy::unnecessary_cast)]
    /// Decode `rect` (after `header` on the same bytes, [`Header::scaled`] for a DCT-scaled
    /// decode: `rect` is then in the scaled image) into `out` as RGB (`channels` 3) or
    /// RGBX (4, the X byte unspecified); the rectangle's
    /// left edge is moved down to an iMCU boundary first. Returns the rectangle decoded.
    pub(crate) fn decode(
        &mut self,
        bytes: &[u8],
        h: &Header,
        rect: Rect,
        channels: usize,
        out: &mut Vec<u8>,
    ) -> Result<Rect, Fault> {
        let aligned = h.region_out(rect, channels, out);
        let (top, left_aligned, rh, rw) =
            (aligned.top, aligned.left, aligned.height, aligned.width);
        let full = top == 0 && left_aligned == 0 && rh == h.height && rw == h.width;
        let region = if full {
            tj::tjregion {
                x: 0,
                y: 0,
                w: 0,
                h: 0,
            }
        } else {
            tj::tjregion {
                x: left_aligned as i32,
                y: top as i32,
                w: rw as i32,
                h: rh as i32,
            }
        };
        let factor = tj::tjscalingfactor {
            num: 1,
            denom: h.scale as i32,
        };
        // SAFETY: valid handle; 1/1, 1/2, 1/4 and 1/8 are scaling factors libjpeg-turbo
        // supports (it returns an error otherwise).
        if unsafe { tj::tj3SetScalingFactor(self.handle, factor) } != 0 {
            return Err(libjpeg_fault(format!("libjpeg-turbo: {}", self.error())));
        }
        // SAFETY: valid handle; the region lies inside the (scaled) image (checked by the
        // caller and by the library, which returns an error otherwise).
        if unsafe { tj::tj3SetCroppingRegion(self.handle, region) } != 0 {
            return Err(libjpeg_fault(format!("libjpeg-turbo: {}", self.error())));
        }
        // SAFETY: `out` holds at least rh * rw * channels bytes, the pitch is rw * channels, the library writes
        // exactly the cropping region (or the whole rh x rw image).
        let r = unsafe {
            tj::tj3Decompress8(
                self.handle,
                bytes.as_ptr(),
                bytes.len() as _,
                out.as_mut_ptr(),
                (rw * channels) as i32,
                if channels == 4 {
                    tj::TJPF_TJPF_RGBX as i32
                } else {
                    tj::TJPF_TJPF_RGB as i32
                },
            )
        };
        if r != 0 && !self.tolerated_warning() {
            return Err(libjpeg_fault(format!("invalid JPEG: {}", self.error())));
        }
        Ok(aligned)
    }
}

impl Drop for Turbo {
    fn drop(&mut self) {
        // SAFETY: the handle came from tj3Init and is destroyed once.
        unsafe { tj::tj3Destroy(self.handle) }
    }
}
