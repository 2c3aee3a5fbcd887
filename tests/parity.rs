//! Parity with torchvision: the canonical ResNet-50 eval pipeline against
//! `Resize(256), CenterCrop(224), ToTensor, Normalize` computed by Pillow + numpy
//! (fixtures/parity/make_reference.py wrote the 224×224 uint8 crops; the float tensor
//! torchvision makes from them is a pure function of those bytes).
//!
//! Rule (in 0–255 units): the issue asks for PNG sources within 1 grey level and JPEG
//! sources mean ≤ 0.5, max ≤ 10. The default resize runs Pillow's own arithmetic, so PNG
//! sources (and JPEG sources decoded by libjpeg-turbo, as Pillow decodes them) come out
//! bit-identical; zune-jpeg's JPEGs are held to the JPEG rule. `exact = false`
//! (fast_image_resize's 16-bit kernels) is held to 2 grey levels.

use imgfeed::ops::{CenterCrop, Decode, Op, Size};
use imgfeed::{Pipeline, PipelineConfig, SourceConfig, SourceKind};
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/parity")
}

const MEAN: [f32; 3] = [123.675, 116.28, 103.53];
const STD: [f32; 3] = [58.395, 57.12, 57.375];

/// The canonical pipeline's output for every parity image, back in 0–255 units, CHW.
fn canonical(edit: impl Fn(&mut PipelineConfig)) -> Vec<(String, Vec<f32>)> {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("pipelines/resnet50_eval.toml");
    let mut cfg = PipelineConfig::from_file(&file).expect("canonical pipeline parses");
    cfg.source
        .dataset
        .root_mut()
        .clone_from(&fixtures().join("images"));
    cfg.batch.size = 1;
    cfg.batch.drop_remainder = false;
    edit(&mut cfg);
    let p = Pipeline::new(cfg).expect("canonical pipeline builds");
    let mut out = Vec::new();
    for b in p.epoch(0) {
        let b = b.expect("parity images decode");
        let x = b.images_f32().expect("float output");
        let hw = 224 * 224;
        let v: Vec<f32> = x
            .iter()
            .enumerate()
            .map(|(i, &v)| v * STD[i / hw] + MEAN[i / hw])
            .collect();
        let name = p.source().sample_name(b.indices()[0] as usize);
        out.push((name, v));
    }
    out
}

/// The reference crops, decoded by imgfeed's PNG path (lossless), as CHW.
fn references() -> Vec<(String, Vec<f32>)> {
    let src = SourceConfig::new(SourceKind::ImageFolder, fixtures().join("reference"));
    let p = Pipeline::builder(src)
        .op(Op::Decode(Decode::default()))
        .op(Op::CenterCrop(CenterCrop::new(Size::One(224))))
        .op(Op::HwcToChw(Default::default()))
        .build()
        .expect("reference pipeline");
    let mut out = Vec::new();
    for b in p.epoch(0) {
        let b = b.expect("reference PNGs decode");
        let v = b
            .images_u8()
            .expect("u8")
            .iter()
            .map(|&x| x as f32)
            .collect();
        out.push((p.source().sample_name(b.indices()[0] as usize), v));
    }
    out
}

/// How close a run must come to torchvision.
#[derive(Clone, Copy)]
enum Rule {
    /// Every value equal (within the float round trip of normalize).
    Exact,
    /// fast_image_resize's 16-bit kernels: 99.9% of values within 1 grey level, none
    /// beyond 2, mean ≤ 0.05 (Pillow's pass order kept).
    Within2,
}

/// Compares against the references. PNG sources follow `png`; JPEG sources follow `png`
/// too when libjpeg-turbo decodes them (it decodes as Pillow does), else mean ≤ 0.5 and
/// max ≤ 10 (the rule for other decoders).
fn compare(ours: &[(String, Vec<f32>)], png: Rule) {
    let refs = references();
    assert_eq!(ours.len(), 6);
    assert_eq!(refs.len(), 6);
    for ((name, a), (rname, r)) in ours.iter().zip(&refs) {
        let stem = |s: &str| {
            s.rsplit_once('.')
                .map_or(s.to_string(), |x| x.0.to_string())
        };
        assert_eq!(stem(name), stem(rname), "same image order");
        let diffs: Vec<f32> = a.iter().zip(r).map(|(x, y)| (x - y).abs()).collect();
        let max = diffs.iter().cloned().fold(0.0, f32::max);
        let mean = diffs.iter().sum::<f32>() / diffs.len() as f32;
        eprintln!("{name}: mean {mean:.3} max {max:.2}");
        let turbo_jpeg = cfg!(imgfeed_turbo) && !ZUNE.with(|z| z.get());
        if name.ends_with(".png") || turbo_jpeg {
            match png {
                // float round trip of normalize: (x - m) / s * s + m is within 1e-3 of x
                Rule::Exact => assert!(max < 1e-3, "{name}: {max} grey levels off"),
                Rule::Within2 => {
                    let over1 = diffs.iter().filter(|&&d| d > 1.0 + 1e-3).count();
                    assert!(
                        over1 * 1000 <= diffs.len(),
                        "{name}: {over1} values more than 1 grey level off"
                    );
                    assert!(max <= 2.0 + 1e-3, "{name}: max diff {max} > 2 grey levels");
                    assert!(
                        mean <= 0.05,
                        "{name}: mean diff {mean}: resize no longer follows Pillow's pass order"
                    );
                }
            }
        } else {
            assert!(mean <= 0.5, "{name}: mean diff {mean} > 0.5");
            assert!(max <= 10.0 + 1e-3, "{name}: max diff {max} > 10");
        }
    }
}

thread_local! {
    /// Set while a test decodes JPEGs with zune-jpeg.
    static ZUNE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The canonical pipeline as shipped: Pillow's arithmetic, every PNG value (and, with
/// libjpeg-turbo, every JPEG value) equal to torchvision's.
#[test]
fn canonical_pipeline_matches_torchvision() {
    compare(&canonical(|_| {}), Rule::Exact);
}

#[test]
fn zune_jpeg_matches_torchvision() {
    ZUNE.with(|z| z.set(true));
    compare(
        &canonical(|cfg| {
            if let Some(Op::Decode(d)) = cfg.ops.first_mut() {
                d.decoder = imgfeed::codec::JpegBackend::Zune;
            }
        }),
        Rule::Exact,
    );
}

/// `exact = false`: fast_image_resize's kernels, within 2 grey levels (measured: 1 value
/// of 903 168 is 2 off, kodim09 on a 206→82 edge, from its 16-bit coefficients).
#[test]
fn fast_image_resize_kernels_stay_within_two_grey_levels() {
    compare(
        &canonical(|cfg| {
            for op in &mut cfg.ops {
                if let Op::Resize(r) = op {
                    r.exact = Some(false);
                }
            }
        }),
        Rule::Within2,
    );
}

/// Region decoding (libjpeg-turbo) and the resize of only the crop window must not change
/// a value: compare with the same pipeline run op by op (`[engine] fuse = false`), and check
/// that the fused run did fuse and the other did not.
#[test]
fn region_decode_equals_full_decode() {
    let fusions = |fuse: bool| {
        let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("pipelines/resnet50_eval.toml");
        let mut cfg = PipelineConfig::from_file(&file).expect("canonical pipeline parses");
        cfg.source
            .dataset
            .root_mut()
            .clone_from(&fixtures().join("images"));
        cfg.engine.fuse = fuse;
        Pipeline::new(cfg).expect("builds").fusions().to_vec()
    };
    let claimed = fusions(true);
    assert!(
        claimed.iter().any(|f| f.contains("center_crop")),
        "{claimed:?}"
    );
    if cfg!(imgfeed_turbo) {
        assert!(
            claimed.iter().any(|f| f.contains("libjpeg-turbo")),
            "a libjpeg-turbo build decodes the region: {claimed:?}"
        );
    }
    // `fuse = false` turns the geometric fusions off (normalize + hwc_to_chw stays one pass).
    let plain = fusions(false);
    assert!(
        plain
            .iter()
            .all(|f| !f.contains("center_crop") && !f.contains("libjpeg-turbo")),
        "{plain:?}"
    );
    let fused = canonical(|_| {});
    let full = canonical(|cfg| cfg.engine.fuse = false);
    assert_eq!(fused.len(), 6);
    assert_eq!(fused.len(), full.len());
    for ((n, a), (m, b)) in fused.iter().zip(&full) {
        assert_eq!((n, a.len()), (m, b.len()));
        let max = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max);
        assert!(max < 1e-3, "{n}: the fused run differs by {max}");
    }
}
