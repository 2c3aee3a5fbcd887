//! Exact-value tests of every op through the public pipeline API, on tiny BMP images
//! written by the test (see `common::Img::to_bmp`).

mod common;

use common::*;
use imgfeed::imgproc::Filter;
use imgfeed::ops::{Resize, Size};
use imgfeed::{Batch, DType, LabelType, Labels, Layout, Pipeline, SourceConfig};
use std::collections::BTreeMap;
use std::path::Path;

/// HWC u8 sample `i` of a batch, as an `Img`.
fn hwc_sample(b: &Batch, i: usize) -> Img {
    let [n, h, w, c] = b.shape();
    assert!(i < n);
    assert_eq!(c, 3, "expected an HWC batch, got shape {:?}", b.shape());
    let imgs = b.images_u8().expect("uint8 images");
    let per = h * w * 3;
    Img {
        w,
        h,
        rgb: imgs[i * per..(i + 1) * per].to_vec(),
    }
}

fn single_batch(p: &Pipeline) -> Batch {
    let mut all = batches(p, 0);
    assert_eq!(all.len(), 1, "expected exactly one batch");
    all.remove(0)
}

// ---- decode + center_crop ------------------------------------------------------------

#[test]
fn decode_of_bmp_is_exact_and_a_same_size_center_crop_is_identity() {
    let a = Img::pattern(5, 3, 10);
    let b = Img::pattern(5, 3, 20);
    let dir = bmp_folder(&[("a/x.bmp", &a), ("b/y.bmp", &b)]);
    let p = build(dir.path(), vec![decode(), center_crop(3, 5)], 2, 2);
    let out = p.output_spec();
    assert_eq!(
        (out.dtype, out.layout, out.fixed_size()),
        (DType::U8, Layout::Hwc, Some((3, 5)))
    );
    let batch = single_batch(&p);
    assert_eq!(batch.shape(), [2, 3, 5, 3]);
    assert_eq!(batch.layout(), Layout::Hwc);
    assert_eq!(hwc_sample(&batch, 0), a);
    assert_eq!(hwc_sample(&batch, 1), b);
    assert_eq!(batch.labels(), Labels::U32(&[0, 1]));
    assert_eq!(batch.indices(), &[0, 1]);
}

#[test]
fn center_crop_offset_is_python_round_half_to_even() {
    // (w, h, expected left, expected top) for a 2x2 crop:
    // offset = round((n - 2) / 2) with half to even.
    let cases = [
        (5, 3, 2, 0),  // 1.5 -> 2, 0.5 -> 0
        (7, 7, 2, 2),  // 2.5 -> 2
        (9, 9, 4, 4),  // 3.5 -> 4
        (6, 6, 2, 2),  // 2 exactly
        (8, 5, 3, 2),  // 3 exactly, 1.5 -> 2
        (2, 11, 0, 4), // 0, 4.5 -> 4
    ];
    let imgs: Vec<Img> = cases
        .iter()
        .enumerate()
        .map(|(i, &(w, h, _, _))| Img::pattern(w, h, i as u8 + 1))
        .collect();
    let names: Vec<String> = (0..cases.len()).map(|i| format!("a/{i:02}.bmp")).collect();
    let files: Vec<(&str, &Img)> = names.iter().map(String::as_str).zip(imgs.iter()).collect();
    let dir = bmp_folder(&files);
    let p = build(
        dir.path(),
        vec![decode(), center_crop(2, 2)],
        cases.len(),
        2,
    );
    let batch = single_batch(&p);
    assert_eq!(batch.shape(), [cases.len(), 2, 2, 3]);
    for (i, &(w, h, left, top)) in cases.iter().enumerate() {
        let expected = Img::from_fn(2, 2, |x, y| imgs[i].get(left + x, top + y));
        assert_eq!(
            hwc_sample(&batch, i),
            expected,
            "image {w}x{h}: crop should start at left {left}, top {top}"
        );
    }
}

#[test]
fn center_crop_larger_than_the_image_pads_with_zeros_before_and_after() {
    // crop 6 (h) x 5 (w); padding before = (crop - n) // 2, the rest after.
    // (w, h, left, top) where negative = padding before; a mixed case crops one axis and
    // pads the other.
    let cases: [(usize, usize, isize, isize); 3] = [(3, 3, -1, -1), (2, 2, -1, -2), (9, 2, 2, -2)];
    let imgs: Vec<Img> = cases
        .iter()
        .enumerate()
        .map(|(i, &(w, h, _, _))| Img::pattern(w, h, 50 + i as u8))
        .collect();
    let names: Vec<String> = (0..cases.len()).map(|i| format!("a/{i}.bmp")).collect();
    let files: Vec<(&str, &Img)> = names.iter().map(String::as_str).zip(imgs.iter()).collect();
    let dir = bmp_folder(&files);
    let p = build(
        dir.path(),
        vec![decode(), center_crop(6, 5)],
        cases.len(),
        1,
    );
    let batch = single_batch(&p);
    for (i, &(w, h, left, top)) in cases.iter().enumerate() {
        let img = &imgs[i];
        let expected = Img::from_fn(5, 6, |x, y| {
            let (sx, sy) = (x as isize + left, y as isize + top);
            if sx >= 0 && sy >= 0 && (sx as usize) < w && (sy as usize) < h {
                img.get(sx as usize, sy as usize)
            } else {
                [0, 0, 0]
            }
        });
        let got = hwc_sample(&batch, i);
        assert_eq!(got, expected, "{w}x{h} image in a 6x5 crop");
        let inside = (w.min(5)) * (h.min(6));
        let zeros = got.rgb.iter().filter(|&&v| v == 0).count();
        assert_eq!(zeros, (30 - inside) * 3, "{w}x{h}: zero padding count");
    }
}

// ---- normalize / rescale ---------------------------------------------------------------

const MEAN: [f32; 3] = [123.675, 116.28, 103.53];
const STD: [f32; 3] = [58.395, 57.12, 57.375];

#[test]
fn normalize_subtracts_mean_and_divides_by_std_in_0_255_units() {
    let img = Img::from_fn(4, 3, |x, y| {
        [(x * 60 + y) as u8, (255 - x * 50) as u8, (y * 120) as u8]
    });
    let dir = bmp_folder(&[("a/x.bmp", &img)]);
    let p = build(
        dir.path(),
        vec![decode(), center_crop(3, 4), normalize(MEAN, STD)],
        1,
        1,
    );
    assert_eq!(p.output_spec().dtype, DType::F32);
    let batch = single_batch(&p);
    assert_eq!(batch.shape(), [1, 3, 4, 3]);
    assert!(batch.images_u8().is_err());
    let v = batch.images_f32().expect("float32 images");
    for y in 0..3 {
        for x in 0..4 {
            let px = img.get(x, y);
            for c in 0..3 {
                let want = (px[c] as f64 - MEAN[c] as f64) / STD[c] as f64;
                let got = v[(y * 4 + x) * 3 + c] as f64;
                assert!(
                    (got - want).abs() <= 1e-5,
                    "({x},{y}) c{c}: {got} vs {want}"
                );
            }
        }
    }
    // the extremes, by hand: 0 and 255 in channel 0
    let lo = (0.0 - 123.675) / 58.395;
    assert!(
        (v[0] as f64 - lo).abs() <= 1e-5,
        "pixel (0,0) R is 0 -> {lo}"
    );
}

#[test]
fn rescale_and_normalize_fold_to_the_same_values_as_applying_them_in_turn() {
    let img = Img::from_fn(4, 2, |x, y| {
        [
            (x * 80) as u8,
            (255 - y * 200) as u8,
            (x * 30 + y * 100) as u8,
        ]
    });
    let dir = bmp_folder(&[("a/x.bmp", &img)]);
    let tv_mean = [0.485f32, 0.456, 0.406];
    let tv_std = [0.229f32, 0.224, 0.225];
    // torchvision style: ToTensor (x / 255) then Normalize.
    let p = build(
        dir.path(),
        vec![
            decode(),
            center_crop(2, 4),
            rescale(1.0 / 255.0, 0.0),
            normalize(tv_mean, tv_std),
        ],
        1,
        1,
    );
    assert!(
        p.fusions()
            .iter()
            .any(|f| f.contains("rescale + normalize")),
        "rescale and normalize should be folded: {:?}",
        p.fusions()
    );
    let v = single_batch(&p).images_f32().expect("float32").to_vec();
    // A longer chain: rescale -> normalize -> rescale.
    let q = build(
        dir.path(),
        vec![
            decode(),
            center_crop(2, 4),
            rescale(2.0, -3.0),
            normalize([1.0, 2.0, 3.0], [2.0, 4.0, 8.0]),
            rescale(0.5, 1.0),
        ],
        1,
        1,
    );
    let u = single_batch(&q).images_f32().expect("float32").to_vec();
    for y in 0..2 {
        for x in 0..4 {
            let px = img.get(x, y);
            for c in 0..3 {
                let i = (y * 4 + x) * 3 + c;
                let xv = px[c] as f64;
                let want = (xv * (1.0f32 / 255.0) as f64 - tv_mean[c] as f64) / tv_std[c] as f64;
                assert!(
                    (v[i] as f64 - want).abs() <= 1e-5,
                    "torchvision chain ({x},{y}) c{c}: {} vs {want}",
                    v[i]
                );
                let m = [1.0, 2.0, 3.0][c];
                let s = [2.0, 4.0, 8.0][c];
                let want2 = ((xv * 2.0 - 3.0) - m) / s * 0.5 + 1.0;
                assert!(
                    (u[i] as f64 - want2).abs() <= 1e-5,
                    "long chain ({x},{y}) c{c}: {} vs {want2}",
                    u[i]
                );
            }
        }
    }
}

// ---- hwc_to_chw -------------------------------------------------------------------------

#[test]
fn hwc_to_chw_puts_channel_planes_first_for_u8_and_f32() {
    let img = Img::pattern(5, 4, 77);
    let dir = bmp_folder(&[("a/x.bmp", &img)]);
    // uint8: no normalize, just the layout change.
    let p = build(
        dir.path(),
        vec![decode(), center_crop(4, 5), hwc_to_chw()],
        1,
        1,
    );
    assert_eq!(p.output_spec().layout, Layout::Chw);
    let b = single_batch(&p);
    assert_eq!(b.shape(), [1, 3, 4, 5]);
    assert_eq!(b.layout(), Layout::Chw);
    let v = b.images_u8().expect("uint8");
    // float32: normalize with mean 0, std 1 is the identity on values.
    let q = build(
        dir.path(),
        vec![
            decode(),
            center_crop(4, 5),
            normalize([0.0; 3], [1.0; 3]),
            hwc_to_chw(),
        ],
        1,
        1,
    );
    let fb = single_batch(&q);
    assert_eq!(fb.shape(), [1, 3, 4, 5]);
    let f = fb.images_f32().expect("float32");
    for c in 0..3 {
        for y in 0..4 {
            for x in 0..5 {
                let want = img.get(x, y)[c];
                let i = (c * 4 + y) * 5 + x;
                assert_eq!(v[i], want, "u8 [c{c}][y{y}][x{x}]");
                assert_eq!(f[i], want as f32, "f32 [c{c}][y{y}][x{x}]");
            }
        }
    }
}

// ---- type_cast ----------------------------------------------------------------------------

#[test]
fn type_cast_sets_the_label_type_and_keeps_the_values() {
    let dir = bmp_folder(&[
        ("a/x.bmp", &Img::uniform(2, 2, [1, 2, 3])),
        ("b/y.bmp", &Img::uniform(2, 2, [4, 5, 6])),
        ("b/z.bmp", &Img::uniform(2, 2, [7, 8, 9])),
    ]);
    let mut classes = BTreeMap::new();
    classes.insert("a".to_string(), 3u32);
    classes.insert("b".to_string(), 70_000u32);
    let run = |cast: Option<LabelType>| {
        let mut src = SourceConfig::from(imgfeed::Dataset::ImageFolder(
            imgfeed::source::ImageFolderConfig::new(dir.path()).class_indexing(classes.clone()),
        ));
        src.sampling.seed = 1;
        let mut b = Pipeline::builder(src)
            .batch(3, false)
            .workers(2)
            .op(decode())
            .op(center_crop(2, 2));
        if let Some(t) = cast {
            b = b.op(type_cast(t));
        }
        let p = b.build().expect("pipeline builds");
        if let Some(t) = cast {
            assert_eq!(p.output_spec().label, t);
        }
        single_batch(&p)
    };
    let b = run(None);
    assert_eq!(b.labels(), Labels::U32(&[3, 70_000, 70_000]));
    assert!(b.labels_i32().is_err());
    let b = run(Some(LabelType::U32));
    assert_eq!(b.labels(), Labels::U32(&[3, 70_000, 70_000]));
    let b = run(Some(LabelType::I32));
    assert_eq!(b.labels(), Labels::I32(&[3, 70_000, 70_000]));
    assert_eq!(b.labels_i32(), Ok(&[3, 70_000, 70_000][..]));
    assert_eq!(
        b.label_bytes(),
        &[3u8, 0, 0, 0, 0x70, 0x11, 1, 0, 0x70, 0x11, 1, 0][..]
    );
    let b = run(Some(LabelType::I64));
    assert_eq!(b.labels(), Labels::I64(&[3, 70_000, 70_000]));
    assert_eq!(b.label_bytes().len(), 3 * 8);
    let b = run(Some(LabelType::F32));
    assert_eq!(b.labels(), Labels::F32(&[3.0, 70_000.0, 70_000.0]));
    assert_eq!(b.labels().get(1), Some(70_000));
    // images untouched by a label cast
    assert_eq!(b.images_u8().expect("uint8")[..3], [1, 2, 3]);
}

// ---- resize -------------------------------------------------------------------------------

#[test]
fn resize_exact_nearest_replicates_each_pixel() {
    let img = Img::pattern(2, 2, 9);
    let dir = bmp_folder(&[("a/x.bmp", &img)]);
    let p = build(
        dir.path(),
        vec![decode(), resize_exact(4, 4, Filter::Nearest)],
        1,
        1,
    );
    assert_eq!(p.output_spec().fixed_size(), Some((4, 4)));
    let got = hwc_sample(&single_batch(&p), 0);
    assert_eq!(got, Img::from_fn(4, 4, |x, y| img.get(x / 2, y / 2)));
    // non-square factors: 2x2 -> 4 rows x 6 columns
    let p = build(
        dir.path(),
        vec![decode(), resize_exact(4, 6, Filter::Nearest)],
        1,
        1,
    );
    let got = hwc_sample(&single_batch(&p), 0);
    assert_eq!(got, Img::from_fn(6, 4, |x, y| img.get(x / 3, y / 2)));
    // the float path (resize after normalize) does the same on floats
    let p = build(
        dir.path(),
        vec![
            decode(),
            normalize([0.0; 3], [1.0; 3]),
            resize_exact(4, 4, Filter::Nearest),
        ],
        1,
        1,
    );
    let f = single_batch(&p).images_f32().expect("float32").to_vec();
    let want: Vec<f32> = Img::from_fn(4, 4, |x, y| img.get(x / 2, y / 2))
        .rgb
        .iter()
        .map(|&v| v as f32)
        .collect();
    assert_eq!(f, want);
}

#[test]
fn resize_keeps_a_uniform_image_uniform_with_every_filter() {
    let c = [37u8, 140, 250];
    let dir = bmp_folder(&[("a/x.bmp", &Img::uniform(7, 5, c))]);
    for filter in [
        Filter::Bilinear,
        Filter::Linear,
        Filter::Nearest,
        Filter::Bicubic,
        Filter::Area,
    ] {
        for (h, w) in [(3, 4), (11, 13)] {
            let p = build(dir.path(), vec![decode(), resize_exact(h, w, filter)], 1, 1);
            let got = hwc_sample(&single_batch(&p), 0);
            assert_eq!(got, Img::uniform(w, h, c), "{filter:?} to {h}x{w}");
        }
    }
}

#[test]
fn resize_shorter_side_keeps_aspect_with_truncation() {
    // Resize::target, the rule itself: shorter side = s, longer = int(s * long / short).
    let r = Resize::new(Size::One(5)).filter(Filter::Nearest);
    assert_eq!(r.target(10, 20), (5, 10));
    assert_eq!(r.target(7, 10), (5, 7)); // 50/7 = 7.14
    assert_eq!(r.target(20, 10), (10, 5));
    assert_eq!(r.target(9, 9), (5, 5));
    assert_eq!(r.target(3, 8), (5, 13)); // upscaling: 40/3 = 13.3
    let r256 = Resize::new(Size::One(256)).filter(Filter::Bilinear);
    assert_eq!(r256.target(375, 500), (256, 341));
    assert_eq!(r256.target(520, 260), (512, 256));

    // Through the pipeline: a uniform image resized with `nearest` stays uniform, and a
    // 12x14 center crop pads it with zeros, so the non-zero box is the resized size.
    let c = [200u8, 150, 100];
    // (w, h) -> (resized h, resized w)
    let cases = [
        ((20, 10), (5, 10)),
        ((10, 7), (5, 7)),
        ((10, 20), (10, 5)),
        ((9, 9), (5, 5)),
        ((8, 3), (5, 13)),
    ];
    let imgs: Vec<Img> = cases
        .iter()
        .map(|&((w, h), _)| Img::uniform(w, h, c))
        .collect();
    let names: Vec<String> = (0..cases.len()).map(|i| format!("a/{i}.bmp")).collect();
    let files: Vec<(&str, &Img)> = names.iter().map(String::as_str).zip(imgs.iter()).collect();
    let dir = bmp_folder(&files);
    let (ch, cw) = (12, 14);
    // fused (resize directly before center_crop) and unfused (a no-op flip in between)
    for ops in [
        vec![
            decode(),
            resize_short(5, Filter::Nearest),
            center_crop(ch, cw),
        ],
        vec![
            decode(),
            resize_short(5, Filter::Nearest),
            flip(0.0),
            center_crop(ch, cw),
        ],
    ] {
        let fused = ops.len() == 3;
        let p = build(dir.path(), ops, cases.len(), 2);
        let b = single_batch(&p);
        for (i, &((w, h), (rh, rw))) in cases.iter().enumerate() {
            let got = hwc_sample(&b, i);
            // expected: the resized image placed by the center-crop rule (all fit: pad
            // (crop - n) // 2 before)
            assert!(rh <= ch && rw <= cw);
            let (top, left) = ((ch - rh) / 2, (cw - rw) / 2);
            let expected = Img::from_fn(cw, ch, |x, y| {
                if (top..top + rh).contains(&y) && (left..left + rw).contains(&x) {
                    c
                } else {
                    [0, 0, 0]
                }
            });
            assert_eq!(
                got, expected,
                "{w}x{h} image resized (size 5) to {rh}x{rw}, fused={fused}"
            );
        }
    }
}

#[test]
fn resize_then_type_cast_then_center_crop_is_still_fused_and_equal() {
    let root = fixtures().join("imagefolder");
    let mut classes = BTreeMap::new();
    classes.insert("bird".to_string(), 0u32);
    let src = SourceConfig::from(imgfeed::Dataset::ImageFolder(
        imgfeed::source::ImageFolderConfig::new(&root).class_indexing(classes),
    ));
    let plain = Pipeline::builder(src.clone())
        .batch(4, false)
        .workers(2)
        .op(decode())
        .op(resize_short(40, Filter::Bilinear))
        .op(center_crop(33, 35))
        .build()
        .expect("plain pipeline");
    let cast = Pipeline::builder(src)
        .batch(4, false)
        .workers(2)
        .op(decode())
        .op(resize_short(40, Filter::Bilinear))
        .op(type_cast(LabelType::I64))
        .op(center_crop(33, 35))
        .build()
        .expect("pipeline with a cast in the middle");
    assert!(
        plain
            .fusions()
            .iter()
            .any(|f| f.starts_with("resize + center_crop")),
        "{:?}",
        plain.fusions()
    );
    assert_eq!(plain.fusions(), cast.fusions());
    let a = single_batch(&plain);
    let b = single_batch(&cast);
    assert_eq!(a.images_u8(), b.images_u8());
    assert_eq!(a.labels(), Labels::U32(&[0, 0, 0, 0]));
    assert_eq!(b.labels(), Labels::I64(&[0, 0, 0, 0]));
}

// ---- random_horizontal_flip ---------------------------------------------------------------

#[test]
fn flip_with_prob_one_mirrors_and_prob_zero_is_identity() {
    let imgs: Vec<Img> = (0..6)
        .map(|i| Img::pattern(5, 3, 10 * i as u8 + 1))
        .collect();
    let names: Vec<String> = (0..6).map(|i| format!("a/{i}.bmp")).collect();
    let files: Vec<(&str, &Img)> = names.iter().map(String::as_str).zip(imgs.iter()).collect();
    let dir = bmp_folder(&files);
    let always = build(
        dir.path(),
        vec![decode(), center_crop(3, 5), flip(1.0)],
        6,
        2,
    );
    let never = build(
        dir.path(),
        vec![decode(), center_crop(3, 5), flip(0.0)],
        6,
        2,
    );
    for epoch in [0, 1] {
        let a = single_batch_of(&always, epoch);
        let n = single_batch_of(&never, epoch);
        for (i, img) in imgs.iter().enumerate() {
            assert_eq!(
                hwc_sample(&a, i),
                img.mirrored(),
                "prob 1.0 sample {i} epoch {epoch}"
            );
            assert_eq!(hwc_sample(&n, i), *img, "prob 0.0 sample {i} epoch {epoch}");
        }
    }
    // Flip before a crop: the crop window is taken from the mirrored image.
    // 5 wide, crop 2: left = round(1.5) = 2, so columns 2,3 of the mirror = 2,1 of the source.
    let p = build(
        dir.path(),
        vec![decode(), flip(1.0), center_crop(3, 2)],
        6,
        1,
    );
    let b = single_batch(&p);
    for (i, img) in imgs.iter().enumerate() {
        assert_eq!(
            hwc_sample(&b, i),
            Img::from_fn(2, 3, |x, y| img.get(2 - x, y)),
            "flip then crop, sample {i}"
        );
    }
    // On float CHW planes (normalize + hwc_to_chw before the flip).
    let p = build(
        dir.path(),
        vec![
            decode(),
            center_crop(3, 5),
            normalize([0.0; 3], [1.0; 3]),
            hwc_to_chw(),
            flip(1.0),
        ],
        6,
        2,
    );
    let b = single_batch(&p);
    assert_eq!(b.shape(), [6, 3, 3, 5]);
    let f = b.images_f32().expect("float32");
    for (i, img) in imgs.iter().enumerate() {
        for c in 0..3 {
            for y in 0..3 {
                for x in 0..5 {
                    let got = f[i * 45 + (c * 3 + y) * 5 + x];
                    assert_eq!(
                        got,
                        img.get(4 - x, y)[c] as f32,
                        "CHW flip sample {i} c{c} ({x},{y})"
                    );
                }
            }
        }
    }
    // Two flips cancel (a flip is held until the next step or the final write).
    let p = build(
        dir.path(),
        vec![decode(), center_crop(3, 5), flip(1.0), flip(1.0)],
        6,
        2,
    );
    let b = single_batch(&p);
    for (i, img) in imgs.iter().enumerate() {
        assert_eq!(hwc_sample(&b, i), *img, "two flips, sample {i}");
    }
}

fn single_batch_of(p: &Pipeline, epoch: u64) -> Batch {
    let mut all = batches(p, epoch);
    assert_eq!(all.len(), 1, "expected exactly one batch");
    all.remove(0)
}

#[test]
fn flip_with_prob_half_flips_some_and_repeats_per_seed_and_epoch() {
    let img = Img::pattern(4, 2, 3);
    let names: Vec<String> = (0..40).map(|i| format!("a/{i:02}.bmp")).collect();
    let files: Vec<(&str, &Img)> = names.iter().map(|n| (n.as_str(), &img)).collect();
    let dir = bmp_folder(&files);
    let p = build(
        dir.path(),
        vec![decode(), center_crop(2, 4), flip(0.5)],
        8,
        2,
    );
    let pattern = |epoch| -> Vec<bool> {
        samples_u8(&p, epoch)
            .iter()
            .map(|s| {
                if *s == img.rgb {
                    false
                } else {
                    assert_eq!(
                        *s,
                        img.mirrored().rgb,
                        "a sample is neither the image nor its mirror"
                    );
                    true
                }
            })
            .collect()
    };
    let e0 = pattern(0);
    assert_eq!(e0.len(), 40);
    let flipped = e0.iter().filter(|&&f| f).count();
    assert!(
        (5..=35).contains(&flipped),
        "prob 0.5 flipped {flipped} of 40"
    );
    assert_eq!(
        pattern(0),
        e0,
        "same seed and epoch must flip the same samples"
    );
    assert_ne!(pattern(1), e0, "another epoch should flip other samples");
}

// ---- random_crop ---------------------------------------------------------------------------

/// Find the (left, top) in `[-pad, pad]` that explains a random-crop output of `img`;
/// returns it with the number of fill pixels.
fn explain_crop(
    img: &Img,
    out_w: usize,
    out_h: usize,
    pad: isize,
    fill: [u8; 3],
    get: impl Fn(usize, usize) -> [u8; 3],
) -> Option<((isize, isize), usize)> {
    let mut found = None;
    for top in -pad..=(img.h as isize + pad - out_h as isize) {
        for left in -pad..=(img.w as isize + pad - out_w as isize) {
            let mut ok = true;
            let mut fills = 0;
            'px: for y in 0..out_h {
                for x in 0..out_w {
                    let (sx, sy) = (left + x as isize, top + y as isize);
                    let want =
                        if sx >= 0 && sy >= 0 && (sx as usize) < img.w && (sy as usize) < img.h {
                            img.get(sx as usize, sy as usize)
                        } else {
                            fills += 1;
                            fill
                        };
                    if get(x, y) != want {
                        ok = false;
                        break 'px;
                    }
                }
            }
            if ok {
                assert!(found.is_none(), "two offsets explain the same crop");
                found = Some(((left, top), fills));
            }
        }
    }
    found
}

#[test]
fn random_crop_pads_with_fill_and_stays_inside_the_padded_image() {
    let img = Img::pattern(4, 4, 99);
    let n = 24;
    let names: Vec<String> = (0..n).map(|i| format!("a/{i:02}.bmp")).collect();
    let files: Vec<(&str, &Img)> = names.iter().map(|s| (s.as_str(), &img)).collect();
    let dir = bmp_folder(&files);
    let fill = 7u8;
    let p = build(dir.path(), vec![decode(), random_crop(4, 4, 2, fill)], 6, 2);
    assert_eq!(p.output_spec().fixed_size(), Some((4, 4)));
    let run = |epoch| -> Vec<(isize, isize)> {
        samples_u8(&p, epoch)
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let out = Img { w: 4, h: 4, rgb: s.clone() };
                let ((left, top), fills) = explain_crop(&img, 4, 4, 2, [fill; 3], |x, y| out.get(x, y))
                    .unwrap_or_else(|| panic!("sample {i} of epoch {epoch} is not a 4x4 window of the image padded by 2 with {fill}: {:?}", out.rgb));
                let fill_px = (0..16).filter(|k| out.get(k % 4, k / 4) == [fill; 3]).count();
                assert_eq!(fill_px, fills, "fill pixel count for offset ({left},{top})");
                let overlap = (4 - left.unsigned_abs()) * (4 - top.unsigned_abs());
                assert_eq!(fills, 16 - overlap);
                (left, top)
            })
            .collect()
    };
    let e0 = run(0);
    assert_eq!(e0.len(), n);
    let mut distinct = e0.clone();
    distinct.sort();
    distinct.dedup();
    assert!(
        distinct.len() >= 3,
        "24 random crops gave only offsets {distinct:?}"
    );
    assert!(
        e0.iter().any(|&(l, t)| l != 0 || t != 0),
        "some crop must include padding"
    );
    assert_eq!(run(0), e0, "same seed and epoch must give the same crops");
    assert!(
        (1..=5).any(|e| run(e) != e0),
        "other epochs should give other crops"
    );
}

#[test]
fn random_crop_on_float_planes_uses_the_fill_value_too() {
    let img = Img::pattern(5, 3, 42);
    let names: Vec<String> = (0..8).map(|i| format!("a/{i}.bmp")).collect();
    let files: Vec<(&str, &Img)> = names.iter().map(|s| (s.as_str(), &img)).collect();
    let dir = bmp_folder(&files);
    let p = build(
        dir.path(),
        vec![
            decode(),
            normalize([0.0; 3], [1.0; 3]),
            hwc_to_chw(),
            random_crop(3, 4, 1, 250),
        ],
        8,
        2,
    );
    let b = single_batch(&p);
    assert_eq!(b.shape(), [8, 3, 3, 4]);
    let f = b.images_f32().expect("float32");
    for i in 0..8 {
        let s = &f[i * 36..(i + 1) * 36];
        let get = |x: usize, y: usize| -> [u8; 3] {
            let mut px = [0u8; 3];
            for (c, v) in px.iter_mut().enumerate() {
                let val = s[(c * 3 + y) * 4 + x];
                assert_eq!(val.fract(), 0.0, "values stay whole numbers");
                *v = val as u8;
            }
            px
        };
        assert!(
            explain_crop(&img, 4, 3, 1, [250; 3], get).is_some(),
            "float CHW sample {i} is not a window of the padded image: {s:?}"
        );
    }
}

#[test]
fn random_crop_without_padding_of_the_full_size_is_identity() {
    let img = Img::pattern(6, 5, 12);
    let dir = bmp_folder(&[("a/x.bmp", &img), ("a/y.bmp", &img)]);
    let p = build(dir.path(), vec![decode(), random_crop(5, 6, 0, 0)], 2, 1);
    let s = samples_u8(&p, 3);
    assert_eq!(s, vec![img.rgb.clone(), img.rgb.clone()]);
}

// ---- fused resize + center_crop vs resize then crop ----------------------------------------
//
// Pipeline A = resize + center_crop (fused into one resize computing only the window);
// pipeline B = resize + random_horizontal_flip(prob 0) + center_crop (the no-op flip in
// between prevents the fusion: a full resize, then a crop). On fixture photos: bird and
// coffee are 408x282, 240x352, 256x256, 224x200, 410x380, 250x320, 210x210, 300x200 —
// landscape, portrait, square, JPEG and PNG (8 of the 12, to keep debug builds fast).

/// `(file, max abs diff, share of identical values)` of fused vs unfused, per sample.
fn fused_vs_unfused(
    filter: Filter,
    size: usize,
    crop: usize,
    classes: &[&str],
) -> Vec<(String, u8, f64)> {
    let map: BTreeMap<String, u32> = classes
        .iter()
        .enumerate()
        .map(|(i, c)| (c.to_string(), i as u32))
        .collect();
    let src = SourceConfig::from(imgfeed::Dataset::ImageFolder(
        imgfeed::source::ImageFolderConfig::new(fixtures().join("imagefolder")).class_indexing(map),
    ));
    let n = 4 * classes.len();
    let make = |fused: bool| {
        let mut b = Pipeline::builder(src.clone())
            .batch(n, false)
            .workers(2)
            .op(decode())
            .op(resize_short(size, filter));
        if !fused {
            b = b.op(flip(0.0));
        }
        b.op(center_crop(crop, crop))
            .build()
            .expect("pipeline builds")
    };
    let (fused, plain) = (make(true), make(false));
    // Only continuous kernels fuse; the others resize the whole image, then crop.
    let fuses = matches!(filter, Filter::Bilinear | Filter::Linear);
    assert_eq!(
        fused
            .fusions()
            .iter()
            .any(|f| f.starts_with("resize + center_crop")),
        fuses,
        "{filter:?}: {:?}",
        fused.fusions()
    );
    assert!(
        plain
            .fusions()
            .iter()
            .all(|f| !f.starts_with("resize + center_crop")),
        "{:?}",
        plain.fusions()
    );
    let a = samples_u8(&fused, 0);
    let b = samples_u8(&plain, 0);
    assert_eq!((a.len(), b.len()), (n, n));
    a.iter()
        .zip(&b)
        .enumerate()
        .map(|(i, (x, y))| {
            assert_eq!(x.len(), crop * crop * 3);
            let (max, _) = diff_u8(x, y);
            let same = x.iter().zip(y).filter(|(p, q)| p == q).count();
            (
                fused.source().sample_name(i),
                max,
                same as f64 / x.len() as f64,
            )
        })
        .collect()
}

fn assert_fused_close(
    filter: Filter,
    size: usize,
    crop: usize,
    classes: &[&str],
    max_diff: u8,
    min_identical: f64,
) {
    let bad: Vec<String> = fused_vs_unfused(filter, size, crop, classes)
        .into_iter()
        .filter(|(_, max, share)| *max > max_diff || *share < min_identical)
        .map(|(name, max, share)| {
            format!("{name}: max diff {max}, {:.2}% identical", share * 100.0)
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{filter:?} resize {size} + center_crop {crop}, fused vs resize then crop (allowed max {max_diff}, >= {:.0}% identical): {bad:?}",
        min_identical * 100.0
    );
}

// The canonical sizes (256 then 224): offsets like 341 -> 58.5 -> 58 exercise the rounding.

#[test]
fn fused_resize_center_crop_matches_unfused_bilinear() {
    assert_fused_close(Filter::Bilinear, 256, 224, &["bird", "coffee"], 1, 0.99);
}

#[test]
fn fused_resize_center_crop_matches_unfused_linear() {
    assert_fused_close(Filter::Linear, 256, 224, &["bird", "coffee"], 1, 0.99);
}

#[test]
fn fused_resize_center_crop_is_within_two_levels_of_unfused_bicubic() {
    assert_fused_close(Filter::Bicubic, 256, 224, &["bird", "coffee"], 2, 0.99);
}

#[test]
fn fused_resize_center_crop_matches_unfused_bicubic() {
    assert_fused_close(Filter::Bicubic, 256, 224, &["bird", "coffee"], 1, 0.99);
}

#[test]
fn fused_resize_center_crop_matches_unfused_nearest() {
    assert_fused_close(Filter::Nearest, 160, 147, &["bird"], 1, 0.99);
}

#[test]
fn fused_resize_center_crop_matches_unfused_area() {
    assert_fused_close(Filter::Area, 160, 147, &["bird"], 1, 0.99);
}

/// The smallest reproduction: 16x8 -> [7, 14] has scale 8/7 on both axes, so resized
/// column 3 samples source x = 3.5 * 8/7 = 4.0 exactly (a tie); fused and unfused round it
/// apart.
#[test]
fn fused_nearest_matches_unfused_on_an_exact_tie() {
    let img = Img::pattern(16, 8, 5);
    let dir = bmp_folder(&[("a/x.bmp", &img)]);
    let fused = samples_u8(
        &build(
            dir.path(),
            vec![
                decode(),
                resize_exact(7, 14, Filter::Nearest),
                center_crop(5, 11),
            ],
            1,
            1,
        ),
        0,
    );
    let plain = samples_u8(
        &build(
            dir.path(),
            vec![
                decode(),
                resize_exact(7, 14, Filter::Nearest),
                flip(0.0),
                center_crop(5, 11),
            ],
            1,
            1,
        ),
        0,
    );
    let red = |s: &[u8]| s.chunks(3).map(|p| p[0]).collect::<Vec<u8>>();
    assert_eq!(
        red(&fused[0]),
        red(&plain[0]),
        "red channel (R = 1 + 16y + x of the source pixel picked)"
    );
}

// ---- resize to sizes whose scale factor does not round-trip in f64 --------------------------

/// `(fw / ow) * ow` exceeds `fw` by one ulp for about 5% of size pairs (5 -> 147, 3 -> 187,
/// 420 -> 313, ...). A resize must not turn that into a crop box "out of the image".
#[test]
fn resize_works_when_the_scale_factor_does_not_round_trip() {
    let c = [90u8, 160, 230];
    let dir = bmp_folder(&[("a/x.bmp", &Img::uniform(5, 3, c))]);
    let wide = bmp_folder(&[("a/x.bmp", &Img::uniform(420, 300, c))]);
    let square = bmp_folder(&[("a/x.bmp", &Img::uniform(420, 420, c))]);
    let mut failures = Vec::new();
    let mut check = |what: String, root: &Path, ops: Vec<imgfeed::ops::Op>, w: usize, h: usize| {
        let p = build(root, ops, 1, 1);
        match p.epoch(0).next() {
            Some(Ok(b)) if hwc_sample(&b, 0) == Img::uniform(w, h, c) => {}
            Some(Ok(_)) => failures.push(format!("{what}: not uniform")),
            Some(Err(e)) => failures.push(format!("{what}: {e}")),
            None => failures.push(format!("{what}: no batch")),
        }
    };
    for filter in [
        Filter::Bilinear,
        Filter::Linear,
        Filter::Nearest,
        Filter::Bicubic,
        Filter::Area,
    ] {
        check(
            format!("5x3 -> [187, 147] {filter:?}"),
            dir.path(),
            vec![decode(), resize_exact(187, 147, filter)],
            147,
            187,
        );
    }
    check(
        "420x300 -> resize 224, flip, crop 211".into(),
        wide.path(),
        vec![
            decode(),
            resize_short(224, Filter::Bilinear),
            flip(0.0),
            center_crop(211, 211),
        ],
        211,
        211,
    );
    check(
        "420x420 -> resize 313 + crop 313 (fused)".into(),
        square.path(),
        vec![
            decode(),
            resize_short(313, Filter::Bilinear),
            center_crop(313, 313),
        ],
        313,
        313,
    );
    assert!(failures.is_empty(), "{failures:#?}");
}
