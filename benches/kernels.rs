//! Per-kernel costs on fixture data: JPEG decode (whole and region), resize + center crop,
//! the fused normalize + HWC→CHW write, the CIFAR plane kernel, a plain copy of the same
//! output bytes for scale, and the training augmentations on a 176×176 crop (the v2
//! recipe's size): each colour adjustment and each AutoAugment operation, beside the decode.
//!
//!   cargo bench --bench kernels                      (zune-jpeg build)
//!   cargo bench --bench kernels --features turbojpeg (adds libjpeg-turbo)

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use imgfeed::codec::{Decoder, JpegBackend};
use imgfeed::imgproc::resizer::{Filter, ResizeOptions, Resizer};
use imgfeed::imgproc::write::write;
use imgfeed::imgproc::write_planes::{write_planes_narrow, write_planes_streaming};
use imgfeed::imgproc::{Affine, ColumnOrder, Dst, Interleaved, Pixels, Rect, View};
use imgfeed::ops::Decode;
use imgfeed::ops::Resize;
use imgfeed::ops::Size;
use imgfeed::{DType, Layout};
use std::path::Path;

fn fixture(rel: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn imagenet_affine() -> Affine {
    let (m, s) = ([123.675f32, 116.28, 103.53], [58.395f32, 57.12, 57.375]);
    Affine {
        scale: [1.0 / s[0], 1.0 / s[1], 1.0 / s[2]],
        shift: [-m[0] / s[0], -m[1] / s[1], -m[2] / s[2]],
    }
}

fn kernels(c: &mut Criterion) {
    let jpeg = fixture("parity/images/jpeg/kodim05_500x375.jpg");
    let resize = Resize::new(Size::One(256)).filter(Filter::Bilinear);
    let mut g = c.benchmark_group("decode_500x375");
    g.throughput(Throughput::Elements(1));
    for backend in [JpegBackend::Zune, JpegBackend::Auto] {
        let cfg = Decode::default().decoder(backend);
        let mut d = Decoder::new(&cfg);
        let mut out = Vec::new();
        g.bench_function(format!("{backend:?}/whole"), |b| {
            b.iter(|| d.decode(black_box(&jpeg), &mut out).expect("decodes"))
        });
        if cfg.decodes_regions() {
            g.bench_function(format!("{backend:?}/region_for_resize256_crop224"), |b| {
                b.iter(|| {
                    d.decode_region(
                        black_box(&jpeg),
                        |_, _| 1,
                        |h, w| resize.source_rect(h, w, (224, 224)),
                        false,
                        &mut out,
                    )
                    .expect("decodes")
                })
            });
        }
    }
    g.finish();

    let mut d = Decoder::new(&Decode::default());
    let mut rgb = Vec::new();
    let (h, w) = d.decode(&jpeg, &mut rgb).expect("decodes");
    let (nh, nw) = resize.target(h, w);
    let win = resize.crop_window(h, w, (224, 224));
    let opts = |exact: bool, window| ResizeOptions {
        full: (h, w),
        held: Rect::whole(h, w),
        filter: Filter::Bilinear,
        exact,
        rgbx: false,
        out: (nh, nw),
        window,
    };
    let mut r = Resizer::default();
    let mut dst: Vec<u8> = Vec::new();
    let mut g = c.benchmark_group("resize_500x375_to_256_crop224");
    g.throughput(Throughput::Elements(1));
    // fast_image_resize's kernels (`exact = false`)
    let fast = opts(false, win);
    g.bench_function("fused_window", |b| {
        b.iter(|| r.resize(&rgb, &fast, &mut dst).expect("resizes"))
    });
    // Pillow's arithmetic (the default for `bilinear`)
    let pillow = opts(true, win);
    let mut rp = Resizer::default();
    g.bench_function("pillow_fused_window", |b| {
        b.iter(|| rp.resize(&rgb, &pillow, &mut dst).expect("resizes"))
    });
    let full = opts(false, None);
    g.bench_function("full_resize", |b| {
        b.iter(|| r.resize(&rgb, &full, &mut dst).expect("resizes"))
    });
    g.finish();

    let crop: Vec<u8> = (0..224 * 224 * 3).map(|i| (i * 31 % 251) as u8).collect();
    let mut out = vec![0f32; crop.len()];
    let a = imagenet_affine();
    let mut g = c.benchmark_group("write_224");
    g.throughput(Throughput::Bytes((out.len() * 4) as u64));
    g.bench_function("normalize_hwc_to_chw_f32", |b| {
        b.iter(|| {
            let v = View {
                pixels: Pixels::U8(black_box(&crop)),
                height: 224,
                width: 224,
                layout: Layout::Hwc,
            };
            write(&v, Some(&a), Layout::Chw, Dst::F32(&mut out)).expect("writes")
        })
    });
    // The engine's own write for the ImageNet pipelines (AVX2), and the same pass rounding
    // to 16-bit floats (`type_cast` of the image to float16 / bfloat16).
    let interleaved = Interleaved {
        data: &crop,
        stride: 3,
        height: 224,
        width: 224,
    };
    g.bench_function("planes_avx2_f32", |b| {
        b.iter(|| {
            write_planes_streaming(
                black_box(interleaved),
                Some(&a),
                ColumnOrder::LeftToRight,
                &mut out,
                false,
            )
        })
    });
    let mut out16 = vec![0u16; crop.len()];
    for (name, dtype) in [
        ("planes_avx2_f16", DType::F16),
        ("planes_avx2_bf16", DType::BF16),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                write_planes_narrow(
                    black_box(interleaved),
                    Some(&a),
                    ColumnOrder::LeftToRight,
                    &mut out16,
                    dtype,
                )
            })
        });
    }
    let src_f32 = out.clone();
    g.bench_function("memcpy_same_bytes", |b| {
        b.iter(|| out.copy_from_slice(black_box(&src_f32)))
    });
    g.finish();

    // One CIFAR batch: 128 records of 3072 planar bytes → float planes.
    let planes: Vec<u8> = (0..128 * 3072).map(|i| (i * 7 % 253) as u8).collect();
    let mut batch = vec![0f32; planes.len()];
    let mut g = c.benchmark_group("cifar_batch_128");
    g.throughput(Throughput::Elements(128));
    g.bench_function("rescale_normalize_planes", |b| {
        b.iter(|| {
            for (s, d) in planes.chunks_exact(3072).zip(batch.chunks_exact_mut(3072)) {
                let v = View {
                    pixels: Pixels::U8(s),
                    height: 32,
                    width: 32,
                    layout: Layout::Chw,
                };
                write(&v, Some(&a), Layout::Chw, Dst::F32(d)).expect("writes");
            }
        })
    });
    let batch_src = batch.clone();
    g.bench_function("memcpy_same_output_bytes", |b| {
        b.iter(|| batch.copy_from_slice(black_box(&batch_src)))
    });
    g.finish();
}

/// The augmentations on one 176×176 RGB image (a crop of the decoded fixture photo).
fn augmentations(c: &mut Criterion) {
    use imgfeed::imgproc::augment::{apply_op, AugOp};
    use imgfeed::ops::random_color_adjust::{apply, Adjust};
    let jpeg = fixture("parity/images/jpeg/kodim05_500x375.jpg");
    let mut d = Decoder::new(&Decode::default());
    let mut full = Vec::new();
    let dec = d.decode(&jpeg, &mut full).expect("decodes");
    let (h, w) = (176, 176);
    let row = dec.1 * 3; // decode returns (height, width)
    let img: Vec<u8> = (0..h)
        .flat_map(|y| full[y * row..y * row + w * 3].to_vec())
        .collect();
    let mut out = vec![0u8; img.len()];
    let mut scratch = Vec::new();
    let mut g = c.benchmark_group("augment_176");
    g.throughput(Throughput::Elements(1));
    for (name, adjust) in [
        ("color/brightness", Adjust::Brightness(1.3)),
        ("color/contrast", Adjust::Contrast(0.7)),
        ("color/saturation", Adjust::Saturation(1.4)),
        ("color/hue", Adjust::Hue(0.1)),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| apply(adjust, black_box(&img), &mut out, &mut scratch))
        });
    }
    for (op, magnitude) in [
        (AugOp::ShearX, 0.3),
        (AugOp::TranslateY, 20.0),
        (AugOp::Rotate, 30.0),
        (AugOp::Sharpness, 0.5),
        (AugOp::Posterize, 4.0),
        (AugOp::Solarize, 128.0),
        (AugOp::AutoContrast, 0.0),
        (AugOp::Equalize, 0.0),
    ] {
        g.bench_function(format!("op/{op:?}"), |b| {
            b.iter(|| {
                apply_op(
                    op,
                    magnitude,
                    black_box(&img),
                    (h, w),
                    [0; 3],
                    &mut out,
                    &mut scratch,
                )
            })
        });
    }
    g.finish();
}

criterion_group!(benches, kernels, augmentations);
criterion_main!(benches);
