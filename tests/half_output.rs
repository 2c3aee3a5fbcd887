//! 16-bit float output (issue 15): `type_cast` of the image column to float16 or bfloat16
//! gives the float32 result rounded to nearest even, for any layout and worker count;
//! it comes last; mixing a 16-bit batch rounds the float32 mix once; `.npy` keeps float16.

mod common;

use common::*;
use half::{bf16, f16};
use imgfeed::batch_ops::mixup::MixUp;
use imgfeed::batch_ops::{BatchOp, OneHot};
use imgfeed::ops::type_cast::CastType;
use imgfeed::ops::{Op, TypeCast};
use imgfeed::rng::batch_rng;
use imgfeed::{DType, Pipeline};

const SEED: u64 = 5;

fn cast(t: CastType) -> Op {
    Op::TypeCast(TypeCast::image(t))
}

/// The fixture folder through `ops` (then `tail`), batches of 3, shuffled, `workers`.
fn pipeline(ops: &[Op], tail: &[Op], batch_ops: &[BatchOp], workers: usize) -> Pipeline {
    let root = fixtures().join("imagefolder");
    let mut b = Pipeline::builder(folder_source(&root).seed(SEED).shuffle(true))
        .batch(3, false)
        .workers(workers);
    for op in ops.iter().chain(tail) {
        b = b.op(op.clone());
    }
    for op in batch_ops {
        b = b.batch_op(op.clone());
    }
    b.build().unwrap_or_else(|e| panic!("builds: {e}"))
}

fn f32s(p: &Pipeline) -> Vec<f32> {
    batches(p, 1)
        .iter()
        .flat_map(|b| b.images_f32().expect("float32").to_vec())
        .collect()
}

fn f16s(p: &Pipeline) -> Vec<u16> {
    batches(p, 1)
        .iter()
        .flat_map(|b| {
            assert!(b.images_f32().is_err() && b.images_bf16().is_err());
            b.images_f16()
                .expect("float16")
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn bf16s(p: &Pipeline) -> Vec<u16> {
    batches(p, 1)
        .iter()
        .flat_map(|b| {
            b.images_bf16()
                .expect("bfloat16")
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Training-like ops (random crop and flip, so the draws matter) ending in float32.
fn train_ops(chw: bool) -> Vec<Op> {
    let mut ops = vec![
        decode(),
        resize_short(40, imgfeed::imgproc::Filter::Bilinear),
        random_crop(32, 32, 2, 0),
        flip(0.5),
        normalize([123.675, 116.28, 103.53], [58.395, 57.12, 57.375]),
    ];
    if chw {
        ops.push(hwc_to_chw());
    }
    ops
}

#[test]
fn half_outputs_are_the_float32_result_rounded_to_nearest_even() {
    for chw in [true, false] {
        let ops = train_ops(chw);
        let wide = f32s(&pipeline(&ops, &[], &[], 2));
        assert!(wide.len() > 1000);
        let want16: Vec<u16> = wide.iter().map(|&x| f16::from_f32(x).to_bits()).collect();
        let want_b: Vec<u16> = wide.iter().map(|&x| bf16::from_f32(x).to_bits()).collect();
        for workers in [1, 2] {
            let p = pipeline(&ops, &[cast(CastType::F16)], &[], workers);
            assert_eq!(p.output_spec().dtype, DType::F16);
            assert_eq!(f16s(&p), want16, "float16, chw {chw}, {workers} workers");
            let p = pipeline(&ops, &[cast(CastType::BF16)], &[], workers);
            assert_eq!(bf16s(&p), want_b, "bfloat16, chw {chw}, {workers} workers");
        }
        // rounding, not truncation: some values differ from their truncated bits
        assert!(wide
            .iter()
            .zip(&want_b)
            .any(|(&x, &b)| (x.to_bits() >> 16) as u16 != b));
    }
    // hwc_to_chw may follow the cast (a layout, not a pixel change)
    let mut ops = train_ops(false);
    ops.push(cast(CastType::F16));
    let after = f16s(&pipeline(&ops, &[hwc_to_chw()], &[], 2));
    let wide = f32s(&pipeline(&train_ops(true), &[], &[], 1));
    assert_eq!(
        after,
        wide.iter()
            .map(|&x| f16::from_f32(x).to_bits())
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_u8_image_cast_to_float_keeps_its_values() {
    let ops = [decode(), center_crop(20, 24)];
    let bytes: Vec<u8> = batches(&pipeline(&ops, &[], &[], 2), 1)
        .iter()
        .flat_map(|b| b.images_u8().expect("u8").to_vec())
        .collect();
    let as_f32 = f32s(&pipeline(&ops, &[cast(CastType::F32)], &[], 2));
    assert_eq!(
        as_f32,
        bytes.iter().map(|&v| f32::from(v)).collect::<Vec<_>>()
    );
    let as_f16 = f16s(&pipeline(&ops, &[cast(CastType::F16)], &[], 2));
    assert_eq!(
        as_f16,
        bytes
            .iter()
            .map(|&v| f16::from_f32(f32::from(v)).to_bits())
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_16_bit_cast_comes_last_and_types_fit_their_column() {
    let root = fixtures().join("imagefolder");
    let fails = |ops: Vec<Op>| {
        let mut b = Pipeline::builder(folder_source(&root));
        for op in ops {
            b = b.op(op);
        }
        b.build().expect_err("refused").to_string()
    };
    let m = fails(vec![
        decode(),
        center_crop(8, 8),
        cast(CastType::F16),
        normalize([0.0; 3], [1.0; 3]),
    ]);
    assert!(
        m.contains("ops[3] (normalize)") && m.contains("cast it last"),
        "{m}"
    );
    let m = fails(vec![decode(), cast(CastType::BF16), center_crop(8, 8)]);
    assert!(
        m.contains("ops[2] (center_crop)") && m.contains("bfloat16"),
        "{m}"
    );
    let m = fails(vec![cast(CastType::F16), decode()]);
    assert!(
        m.contains("ops[0] (type_cast)") && m.contains("decode"),
        "{m}"
    );
    let m = fails(vec![decode(), Op::TypeCast(TypeCast::new(CastType::F16))]);
    assert!(m.contains("labels are cast to"), "{m}");
    let m = fails(vec![decode(), cast(CastType::I32)]);
    assert!(
        m.contains("images are cast to float32, float16 or bfloat16"),
        "{m}"
    );
    let m = fails(vec![decode(), cast(CastType::F16), cast(CastType::F16)]);
    assert!(m.contains("already float16"), "{m}");
}

#[test]
fn mixing_a_half_batch_rounds_the_float32_mix_once() {
    let ops = train_ops(true);
    let hot = BatchOp::OneHot(OneHot::new(3));
    let op = MixUp::new(0.4);
    let base = pipeline(&ops, &[cast(CastType::F16)], std::slice::from_ref(&hot), 1);
    let mixed = pipeline(
        &ops,
        &[cast(CastType::F16)],
        &[hot, BatchOp::Mixup(op.clone())],
        2,
    );
    let (base, mixed) = (batches(&base, 1), batches(&mixed, 1));
    assert_eq!(base.len(), mixed.len());
    let len = 3 * 32 * 32;
    for (b, (x, m)) in base.iter().zip(&mixed).enumerate() {
        let lam = op.draw(&mut batch_rng(SEED, 1, b)).expect("prob 1");
        let x: Vec<f32> = x
            .images_f16()
            .expect("f16")
            .iter()
            .map(|v| v.to_f32())
            .collect();
        let n = x.len() / len;
        let (keep, take) = (lam as f32, (1.0 - lam) as f32);
        let want: Vec<u16> = (0..n * len)
            .map(|k| {
                let (i, j) = (k / len, k % len);
                let prev = (i + n - 1) % n;
                f16::from_f32(x[prev * len + j] * take + x[i * len + j] * keep).to_bits()
            })
            .collect();
        let got: Vec<u16> = m
            .images_f16()
            .expect("f16")
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(got, want, "batch {b}");
    }
}

#[test]
fn npy_conversions_keep_float16_and_refuse_bfloat16() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = |t: &str| {
        let text = format!(
            "[source]\nkind = \"image_folder\"\nroot = \"{}\"\n\n[[ops]]\nop = \"decode\"\n\n\
             [[ops]]\nop = \"center_crop\"\nsize = 8\n\n[[ops]]\nop = \"type_cast\"\n\
             column = \"image\"\ndtype = \"{t}\"\n\n[batch]\nsize = 4\n",
            fixtures().join("imagefolder").display()
        );
        let path = dir.path().join(format!("{t}.toml"));
        std::fs::write(&path, text).expect("write pipeline");
        path
    };
    let out = dir.path().join("f16");
    let o = imgfeed(&[
        "convert",
        file("float16").to_str().expect("utf-8"),
        "--format",
        "npy",
        "--out",
        out.to_str().expect("utf-8"),
    ]);
    assert_eq!(code(&o), 0, "{:?}", text(&o));
    let (header, data) = read_npy(&out.join("images.npy"));
    assert!(header.contains("'descr': '<f2'"), "{header}");
    let u8_out = dir.path().join("u8");
    let o = imgfeed(&[
        "convert",
        file("float32").to_str().expect("utf-8"),
        "--format",
        "npy",
        "--out",
        u8_out.to_str().expect("utf-8"),
    ]);
    assert_eq!(code(&o), 0, "{:?}", text(&o));
    let (_, wide) = read_npy(&u8_out.join("images.npy"));
    let want: Vec<u8> = wide
        .chunks_exact(4)
        .flat_map(|c| {
            let x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            f16::from_f32(x).to_bits().to_le_bytes()
        })
        .collect();
    assert_eq!(data, want);
    let o = imgfeed(&[
        "convert",
        file("bfloat16").to_str().expect("utf-8"),
        "--format",
        "npy",
        "--out",
        dir.path().join("bf16").to_str().expect("utf-8"),
    ]);
    let (_, err) = text(&o);
    assert_ne!(code(&o), 0);
    assert!(err.contains("bfloat16") && err.contains(".npy"), "{err}");
}
