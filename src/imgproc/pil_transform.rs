//! Pillow's geometric transforms of RGB u8 HWC images as torchvision's functional ops
//! call them: the nearest-neighbour affine transform ([`affine_nearest`], libImaging's
//! fixed-point and scale-only loops), the matrices torchvision and `Image.rotate` give it,
//! and the quarter turns `Image.rotate` makes by transposing.

/// torchvision's `_get_inverse_affine_matrix(center, angle, translate, scale, shear)`.
pub(crate) fn inverse_affine(
    center: [f64; 2],
    angle: f64,
    translate: [f64; 2],
    scale: f64,
    shear: [f64; 2],
) -> [f64; 6] {
    let rot = angle.to_radians();
    let sx = shear[0].to_radians();
    let sy = shear[1].to_radians();
    let [cx, cy] = center;
    let [tx, ty] = translate;
    let a = (rot - sy).cos() / sy.cos();
    let b = -(rot - sy).cos() * sx.tan() / sy.cos() - rot.sin();
    let c = (rot - sy).sin() / sy.cos();
    let d = -(rot - sy).sin() * sx.tan() / sy.cos() + rot.cos();
    let mut m = [d, -b, 0.0, -c, a, 0.0].map(|x| x / scale);
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
    m
}

/// Python's `round(x, 15)`.
fn round15(x: f64) -> f64 {
    format!("{x:.15}").parse().unwrap_or(x)
}

/// Pillow's `Image.rotate(angle)` (no expand, about the centre) as the affine matrix of its
/// transform; `None` for the angles it turns by transposing instead (0 and 180 degrees, 90
/// and 270 on square images), with the quarter turns it makes.
pub(crate) fn rotate_matrix(angle: f64, (h, w): (usize, usize)) -> Result<[f64; 6], u8> {
    let angle = angle.rem_euclid(360.0);
    if angle == 0.0 {
        return Err(0);
    }
    if angle == 180.0 {
        return Err(2);
    }
    if (angle == 90.0 || angle == 270.0) && w == h {
        return Err(if angle == 90.0 { 1 } else { 3 });
    }
    let (cx, cy) = (w as f64 / 2.0, h as f64 / 2.0);
    let r = -angle.to_radians();
    let mut m = [
        round15(r.cos()),
        round15(r.sin()),
        0.0,
        round15(-r.sin()),
        round15(r.cos()),
        0.0,
    ];
    let (x, y) = (-cx, -cy);
    // Pillow: `a * x + b * y + c` with c = 0 (adding it changes no bit but a -0.0).
    m[2] = m[0] * x + m[1] * y;
    m[5] = m[3] * x + m[4] * y;
    m[2] += cx;
    m[5] += cy;
    Ok(m)
}

/// Pillow's `transform((w, h), AFFINE, a, NEAREST, fillcolor=fill)` of an `h × w` RGB
/// image: output pixel `(x, y)` reads source pixel `a · (x + ½, y + ½)`, rounded down,
/// or is `fill` when that lies outside (libImaging's `ImagingTransformAffine`).
pub fn affine_nearest(
    src: &[u8],
    (h, w): (usize, usize),
    a: [f64; 6],
    fill: [u8; 3],
    dst: &mut [u8],
) {
    for px in dst.chunks_exact_mut(3) {
        px.copy_from_slice(&fill);
    }
    let copy = |dst: &mut [u8], x: usize, y: usize, xin: i64, yin: i64| {
        if xin >= 0 && (xin as usize) < w && yin >= 0 && (yin as usize) < h {
            let s = (yin as usize * w + xin as usize) * 3;
            let d = (y * w + x) * 3;
            dst[d..d + 3].copy_from_slice(&src[s..s + 3]);
        }
    };
    // COORD: -1 below zero, else truncated.
    let coord = |v: f64| if v < 0.0 { -1 } else { v as i64 };
    if a[1] == 0.0 && a[3] == 0.0 {
        // ImagingScaleAffine
        let mut yo = a[5] + a[4] * 0.5;
        for y in 0..h {
            let mut xo = a[2] + a[0] * 0.5;
            let yin = coord(yo);
            for x in 0..w {
                copy(dst, x, y, coord(xo), yin);
                xo += a[0];
            }
            yo += a[4];
        }
        return;
    }
    let fits = |x: f64, y: f64| {
        (x * a[0] + y * a[1] + a[2]).abs() < 32768.0 && (x * a[3] + y * a[4] + a[5]).abs() < 32768.0
    };
    let (wf, hf) = (w as f64, h as f64);
    if fits(0.0, 0.0) && fits(wf, hf) && fits(0.0, hf) && fits(wf, 0.0) {
        // affine_fixed: 16.16 fixed point
        let fix = |v: f64| {
            let v = v * 65536.0 + 0.5;
            (if v < 0.0 { v.floor() } else { v }) as i32
        };
        let (a0, a1, a3, a4) = (fix(a[0]), fix(a[1]), fix(a[3]), fix(a[4]));
        let mut a2 = fix(a[2] + a[0] * 0.5 + a[1] * 0.5);
        let mut a5 = fix(a[5] + a[3] * 0.5 + a[4] * 0.5);
        for y in 0..h {
            let (mut xx, mut yy) = (a2, a5);
            for x in 0..w {
                copy(dst, x, y, i64::from(xx >> 16), i64::from(yy >> 16));
                xx = xx.wrapping_add(a0);
                yy = yy.wrapping_add(a3);
            }
            a2 = a2.wrapping_add(a1);
            a5 = a5.wrapping_add(a4);
        }
        return;
    }
    let mut xo = a[2] + a[1] * 0.5 + a[0] * 0.5;
    let mut yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
    for y in 0..h {
        let (mut xx, mut yy) = (xo, yo);
        for x in 0..w {
            copy(dst, x, y, coord(xx), coord(yy));
            xx += a[0];
            yy += a[3];
        }
        xo += a[1];
        yo += a[4];
    }
}

/// Quarter turns counter-clockwise (Pillow's `ROTATE_90` … transposes) of an `h × w`
/// RGB image.
pub(crate) fn quarter_turns(src: &[u8], (h, w): (usize, usize), turns: u8, dst: &mut [u8]) {
    for y in 0..h {
        for x in 0..w {
            // the source pixel that lands at (x, y)
            let (sx, sy) = match turns {
                1 => (w - 1 - y, x),
                2 => (w - 1 - x, h - 1 - y),
                3 => (y, h - 1 - x),
                _ => (x, y),
            };
            let (s, d) = ((sy * w + sx) * 3, (y * w + x) * 3);
            dst[d..d + 3].copy_from_slice(&src[s..s + 3]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarter_turns_match_a_full_rotation_by_steps() {
        let src: Vec<u8> = (0..2 * 2 * 3).map(|i| i as u8).collect();
        let mut once = vec![0; 12];
        quarter_turns(&src, (2, 2), 1, &mut once);
        let mut twice = vec![0; 12];
        quarter_turns(&once, (2, 2), 1, &mut twice);
        let mut half = vec![0; 12];
        quarter_turns(&src, (2, 2), 2, &mut half);
        assert_eq!(twice, half);
    }
}
