//! Image processing kernels on plain buffers: resampling, geometry (crops, pads, flips,
//! rectangles), the pixel writers (the pointwise tail written into a batch slot), Pillow's
//! arithmetic for the colour and affine operations, and the SIMD helpers. A library the
//! ops call; it never sees a spec, an op, the working image or the engine.
//!
//! * [`resizer`] — the worker's resizer (fast_image_resize and Pillow's bilinear).
//! * `pillow_bilinear` — Pillow's fixed-point antialiased bilinear, bit for bit.
//! * [`geometry`] — [`Rect`], windows copied with padding, flips, [`ColumnOrder`].
//! * [`orient`] — the eight EXIF orientations (Pillow's `exif_transpose`).
//! * [`affine`] — the per-channel map `rescale` and `normalize` fold into.
//! * [`view`] — the buffers the writers read and write.
//! * [`mod@write`] — the general write (any layout pair, u8 or f32, RGBX).
//! * [`write_mirrored`] — the scalar float-plane write, rows read right to left.
//! * [`write_planes`] — the AVX2 float-plane write (float32 streamed and fingerprinted,
//!   float16 / bfloat16 rounded on the way).
//! * [`half_float`] — rounding to 16-bit floats and widening back.
//! * [`fingerprint`] — the per-sample digest the plane write computes from its registers.
//! * [`augment`] — torchvision's augmentation operations (`_apply_op`), dispatching to
//!   `pil_transform` (Pillow's affine transform and rotations), `pil_lut` (ImageOps'
//!   tables) and `pil` (ImageEnhance's blends, grey conversions, the smoothing filter).

#[macro_use]
mod simd;

pub mod affine;
pub mod augment;
pub mod fingerprint;
pub mod geometry;
pub mod half_float;
pub mod orient;
pub(crate) mod pil;
pub(crate) mod pil_lut;
pub mod pil_transform;
pub(crate) mod pillow_bilinear;
pub mod resizer;
pub mod view;
pub mod write;
pub mod write_mirrored;
pub mod write_planes;

pub use affine::Affine;
pub use geometry::{ColumnOrder, PadMode, Rect};
pub use resizer::{Filter, Resizer};
pub use view::{Dst, Interleaved, Pixels, View};
