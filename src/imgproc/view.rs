//! The buffers the pixel writers read and write: an image of u8 or f32 pixels in a layout
//! ([`View`]), 8-bit interleaved pixels of 3 or 4 bytes ([`Interleaved`]), and a
//! destination slice of either type ([`Dst`]).

use crate::spec::Layout;

/// Pixels to read: u8 or f32.
#[derive(Clone, Copy, Debug)]
pub enum Pixels<'a> {
    /// 8-bit.
    U8(&'a [u8]),
    /// float.
    F32(&'a [f32]),
}

/// An image to read: pixels, size, physical layout, 3 channels.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    /// The pixels.
    pub pixels: Pixels<'a>,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// How the pixels are laid out in memory.
    pub layout: Layout,
}

/// 8-bit pixels row after row, `stride` bytes a pixel (RGB: 3; RGBX: 4, the X byte
/// ignored): what a decode or a resize leaves for the final write.
#[derive(Clone, Copy, Debug)]
pub struct Interleaved<'a> {
    /// The pixels (at least `height × width × stride` bytes).
    pub data: &'a [u8],
    /// Bytes a pixel.
    pub stride: usize,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
}

/// Where to write: a u8 or f32 slice of exactly `3 × h × w` elements.
#[derive(Debug)]
pub enum Dst<'a> {
    /// 8-bit (only when no affine map applies and the source is u8).
    U8(&'a mut [u8]),
    /// float.
    F32(&'a mut [f32]),
}

/// An `h × w` test image as RGB and as RGBX (X = 99).
#[cfg(test)]
pub(crate) fn rgb_and_rgbx(h: usize, w: usize) -> (Vec<u8>, Vec<u8>) {
    let rgb: Vec<u8> = (0..h * w * 3).map(|i| (i * 7 % 251) as u8).collect();
    let rgbx = rgb
        .chunks_exact(3)
        .flat_map(|p| [p[0], p[1], p[2], 99])
        .collect();
    (rgb, rgbx)
}
