//! Codecs: decoding images from their bytes, and reading their headers without decoding.
//! A library the ops call (`decode`) and `imgfeed validate` uses; it never sees a spec, an
//! op or the engine.
//!
//! * [`decoder`] — the format from the magic bytes, the JPEG decoder a build has (the
//!   system libjpeg-turbo through the C shim, libjpeg-turbo built from source, or
//!   zune-jpeg), PNG/BMP/WebP through `image`, size limits before any allocation.
//! * [`inspect`] — what a file's header says (size, colour type, progressive, ...).
//! * [`exif`] — the EXIF orientation tag, read as Pillow reads it.
//! * `libjpeg` — the shim over the system libjpeg-turbo (`csrc/jpeg_shim.c`).
//! * `turbo` — libjpeg-turbo built from source (the `turbojpeg` feature).
//! * `pickle` — a restricted pickle reader (never executes anything): the format parser
//!   under the torchvision CIFAR files (`source::cifar_pickle` reads their dicts).

pub mod decoder;
pub mod exif;
pub mod inspect;
#[cfg(imgfeed_libjpeg)]
pub(crate) mod libjpeg;
pub(crate) mod pickle;
#[cfg(feature = "turbojpeg")]
pub(crate) mod turbo;

pub use decoder::{jpeg_decoder, Decoder, DecoderConfig, JpegBackend};
