//! Image processing kernels on plain buffers: resampling, geometry (crops, pads, flips,
//! rectangles), Pillow's arithmetic for the colour and affine operations, and the SIMD
//! helpers. A library the ops call; it never sees a spec, an op or the engine.
//!
//! * [`resizer`] — the worker's resizer (fast_image_resize and Pillow's bilinear).
//! * `pillow_bilinear` — Pillow's fixed-point antialiased bilinear, bit for bit.
//! * [`geometry`] — [`Rect`], windows copied with padding, flips.
//! * `pil` — Pillow's blends and grey conversions (the colour augmentations).

#[macro_use]
mod simd;

pub mod geometry;
pub(crate) mod pil;
pub(crate) mod pillow_bilinear;
pub mod resizer;

pub use geometry::{PadMode, Rect};
pub use resizer::{Filter, Resizer};
