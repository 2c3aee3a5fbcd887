//! 16-bit floats (float16, bfloat16) as their bits: float32 values rounded to them to
//! nearest even (the last step of a `type_cast` of the image), and widened back exactly
//! (batch ops that mix 16-bit samples).

use crate::error::{bug, Fault};
use crate::spec::DType;

/// Round float32 values to the 16-bit float `dtype` (F16 or BF16, to nearest even), as
/// their bits: the last step of a `type_cast` of the image to float16 or bfloat16.
pub(crate) fn narrow(src: &[f32], dtype: DType, dst: &mut [u16]) -> Result<(), Fault> {
    use half::slice::HalfFloatSliceExt;
    let n = src.len();
    if dst.len() < n {
        return Err(bug("the 16-bit output is smaller than the sample"));
    }
    match dtype {
        DType::F16 => {
            bytemuck::cast_slice_mut::<u16, half::f16>(&mut dst[..n]).convert_from_f32_slice(src)
        }
        DType::BF16 => to_bf16(src, &mut dst[..n]),
        DType::U8 | DType::F32 => return Err(bug("narrow needs a 16-bit float type")),
    }
    Ok(())
}

#[inline(always)]
fn to_bf16_generic(src: &[f32], dst: &mut [u16]) {
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = to_bf16_bits(x);
    }
}

multiversion!(to_bf16, to_bf16_generic, (src: &[f32], dst: &mut [u16]));

/// `x` as bfloat16 bits, rounded to nearest even (a NaN stays a quiet NaN): what
/// `half::bf16::from_f32` gives, branch-free so that the loop above vectorizes (AVX2: it
/// needs 32-bit lanes packed to 16).
#[inline]
fn to_bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let rounded = (b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16) as u16;
    let quiet = (b >> 16) as u16 | 0x0040;
    if x.is_nan() {
        quiet
    } else {
        rounded
    }
}

/// The 16-bit floats `src` (bits of `dtype`, F16 or BF16) as float32 values, into `dst`
/// (cleared first); exact.
pub(crate) fn widen(src: &[u16], dtype: DType, dst: &mut Vec<f32>) {
    use half::slice::HalfFloatSliceExt;
    dst.clear();
    dst.resize(src.len(), 0.0);
    match dtype {
        DType::BF16 => bytemuck::cast_slice::<u16, half::bf16>(src).convert_to_f32_slice(dst),
        _ => bytemuck::cast_slice::<u16, half::f16>(src).convert_to_f32_slice(dst),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bfloat16_bits_are_halfs_rounding_for_every_kind_of_value() {
        let mut xs = vec![
            0.0f32,
            -0.0,
            1.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::MAX,
            f32::MIN_POSITIVE,
            1e-45,
            f32::from_bits(0x3F80_8000), // a tie, rounded to even (down)
            f32::from_bits(0x3F81_8000), // a tie, rounded to even (up)
            f32::from_bits(0x7F7F_FFFF), // rounds up to infinity
        ];
        let mut state = 0x9E37_79B9u32;
        for _ in 0..100_000 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            xs.push(f32::from_bits(state));
        }
        let mut got = vec![0u16; xs.len()];
        narrow(&xs, DType::BF16, &mut got).expect("bf16");
        for (x, g) in xs.iter().zip(&got) {
            let want = half::bf16::from_f32(*x);
            if x.is_nan() {
                assert!(half::bf16::from_bits(*g).is_nan(), "{x:?}");
            } else {
                assert_eq!(*g, want.to_bits(), "{x:?} ({:#x})", x.to_bits());
            }
        }
    }
}
