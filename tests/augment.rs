//! The colour and augmentation ops (issue 15): parity with torchvision's functional ops on
//! a PIL image (references written by `fixtures/augment/make_refs.py` from Pillow calls),
//! and the engine's draws (from the sample's own stream: the same for any worker count).

mod common;

use common::*;
use imgfeed::ops::random_color_adjust::{apply, Adjust, Jitter, RandomColorAdjust};
use imgfeed::ops::Op;
use imgfeed::rng::sample_rng;
use imgfeed::SourceConfig;
use std::path::Path;

fn augment_dir() -> std::path::PathBuf {
    fixtures().join("augment")
}

/// An RGB u8 PNG: `(width, height, pixels)`.
fn png(path: &Path) -> (usize, usize, Vec<u8>) {
    let img = image::open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .to_rgb8();
    (img.width() as usize, img.height() as usize, img.into_raw())
}

#[derive(serde::Deserialize)]
struct Case {
    name: String,
    input: String,
    steps: Vec<(String, f64)>,
    #[serde(rename = "ref")]
    reference: String,
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(augment_dir().join("cases.json")).expect("cases.json");
    serde_json::from_str(&text).expect("cases.json parses")
}

fn adjust(op: &str, v: f64) -> Adjust {
    match op {
        "brightness" => Adjust::Brightness(v),
        "contrast" => Adjust::Contrast(v),
        "saturation" => Adjust::Saturation(v),
        "hue" => Adjust::Hue(v),
        other => panic!("unknown step {other}"),
    }
}

/// Every colour step, alone and in sequence, equals torchvision's (Pillow's) output: the
/// rule is within 1 grey level; the arithmetic is Pillow's, so every pixel is equal.
#[test]
fn color_adjustments_equal_torchvision_on_pil_images() {
    let cases = cases();
    assert!(cases.len() >= 30, "{} cases", cases.len());
    let mut scratch = Vec::new();
    for case in cases {
        let (w, h, mut img) = png(&augment_dir().join("inputs").join(&case.input));
        let (rw, rh, want) = png(&augment_dir().join("refs").join(&case.reference));
        assert_eq!((w, h), (rw, rh), "{}", case.name);
        for (op, v) in &case.steps {
            let mut out = vec![0u8; img.len()];
            apply(adjust(op, *v), &img, &mut out, &mut scratch);
            img = out;
        }
        let (max, _) = diff_u8(&img, &want);
        assert_eq!(max, 0, "{}: off by up to {max} grey levels", case.name);
    }
}

fn jitter(b: f64, c: f64, s: f64, h: f64) -> Op {
    Op::RandomColorAdjust(RandomColorAdjust::new(b, c, s, h))
}

/// What the engine gives for each sample equals the draw from that sample's stream applied
/// to the decoded image, for 1 and 2 workers and two epochs; the draws vary.
#[test]
fn the_engine_applies_the_draw_of_each_samples_stream() {
    let root = fixtures().join("imagefolder");
    let seed = 11;
    let plain = |workers| {
        let mut b = imgfeed::Pipeline::builder(folder_source(&root).seed(seed))
            .batch(3, false)
            .workers(workers);
        for op in [decode(), center_crop(24, 32)] {
            b = b.op(op);
        }
        b.build().expect("builds")
    };
    let op = RandomColorAdjust::new(0.4, 0.4, 0.4, 0.1);
    let jittered = |workers| {
        let mut b = imgfeed::Pipeline::builder(folder_source(&root).seed(seed))
            .batch(3, false)
            .workers(workers);
        for op in [
            decode(),
            center_crop(24, 32),
            Op::RandomColorAdjust(op.clone()),
        ] {
            b = b.op(op);
        }
        b.build().expect("builds")
    };
    let base = samples_u8(&plain(1), 0);
    let mut scratch = Vec::new();
    let mut orders = std::collections::BTreeSet::new();
    for epoch in 0..2 {
        let one = samples_u8(&jittered(1), epoch);
        let two = samples_u8(&jittered(2), epoch);
        assert_eq!(
            one, two,
            "epoch {epoch}: the worker count changed the output"
        );
        for (index, (got, plain)) in one.iter().zip(&base).enumerate() {
            let steps = op.draw(&mut sample_rng(seed, epoch, index));
            assert_eq!(steps.len(), 4, "all four adjustments are drawn");
            orders.insert(format!(
                "{:?}",
                steps.iter().map(std::mem::discriminant).collect::<Vec<_>>()
            ));
            let mut want = plain.clone();
            for s in steps {
                let mut out = vec![0u8; want.len()];
                apply(s, &want, &mut out, &mut scratch);
                want = out;
            }
            assert_eq!(got, &want, "epoch {epoch} sample {index}");
            assert_ne!(got, plain, "epoch {epoch} sample {index} was not adjusted");
        }
    }
    assert!(
        orders.len() > 3,
        "the order is drawn per sample: {orders:?}"
    );
}

/// Ranges: one number `x` is `[max(0, 1 - x), 1 + x]` (hue `[-x, x]`); a range is kept;
/// every factor drawn lies in its range, and a zero leaves its adjustment out.
#[test]
fn draws_stay_in_their_ranges_and_zero_leaves_an_adjustment_out() {
    let op = RandomColorAdjust::new(0.4, 0.0, 2.0, 0.25).contrast(Jitter::Range([0.5, 0.6]));
    let mut seen = [0usize; 4];
    for i in 0..2000 {
        for s in op.draw(&mut sample_rng(1, 0, i)) {
            match s {
                Adjust::Brightness(f) => {
                    assert!((0.6..=1.4).contains(&f), "{f}");
                    seen[0] += 1
                }
                Adjust::Contrast(f) => {
                    assert!((0.5..=0.6).contains(&f), "{f}");
                    seen[1] += 1
                }
                Adjust::Saturation(f) => {
                    assert!((0.0..=3.0).contains(&f), "max(0, 1 - 2) = 0: {f}");
                    seen[2] += 1
                }
                Adjust::Hue(f) => {
                    assert!((-0.25..=0.25).contains(&f), "{f}");
                    seen[3] += 1
                }
            }
        }
    }
    assert_eq!(seen, [2000; 4]);
    let none = RandomColorAdjust::new(0.0, 0.3, 0.0, 0.0);
    let steps = none.draw(&mut sample_rng(1, 0, 0));
    assert!(matches!(steps[..], [Adjust::Contrast(_)]), "{steps:?}");
}

/// Bad parameters are errors naming the op and the parameter, at its line in a file.
#[test]
fn bad_parameters_are_refused_at_their_line() {
    let root = fixtures().join("imagefolder");
    for (field, value, why) in [
        ("hue", "0.6", "within [-0.5, 0.5]"),
        ("brightness", "-0.1", "non-negative"),
        ("saturation", "[1.5, 0.5]", "ordered"),
    ] {
        let text = format!(
            "[source]\nkind = \"image_folder\"\nroot = {root:?}\n\n[[ops]]\nop = \"decode\"\n\n\
             [[ops]]\nop = \"random_color_adjust\"\ncontrast = 0.2\n{field} = {value}\n\n[batch]\nsize = 1\n"
        );
        let cfg = imgfeed::PipelineConfig::parse(&text, Path::new("/p/c.toml")).expect("parses");
        let e = imgfeed::Pipeline::new(cfg).expect_err(field).to_string();
        assert!(
            e.contains("/p/c.toml:11:1: ops[1] (random_color_adjust)")
                && e.contains(field)
                && e.contains(why),
            "{e}"
        );
    }
    // and on data that is no longer u8 RGB
    let e = imgfeed::Pipeline::builder(SourceConfig::new(imgfeed::SourceKind::ImageFolder, &root))
        .op(decode())
        .op(rescale(1.0 / 255.0, 0.0))
        .op(jitter(0.1, 0.0, 0.0, 0.0))
        .build()
        .expect_err("after rescale");
    assert!(e.to_string().contains("before normalize"), "{e}");
}

#[derive(serde::Deserialize)]
struct AugCase {
    name: String,
    input: String,
    op: imgfeed::imgproc::augment::AugOp,
    magnitude: f64,
    fill: u8,
    #[serde(rename = "ref")]
    reference: String,
}

/// Every operation of AutoAugment / RandAugment / TrivialAugmentWide equals torchvision's
/// `_apply_op` on the PIL image (nearest, with fill), for every pixel.
#[test]
fn augmentation_operations_equal_torchvision_on_pil_images() {
    let text = std::fs::read_to_string(augment_dir().join("aug_cases.json")).expect("aug_cases");
    let cases: Vec<AugCase> = serde_json::from_str(&text).expect("aug_cases.json parses");
    assert!(cases.len() >= 100, "{} cases", cases.len());
    let mut scratch = Vec::new();
    let mut failed = Vec::new();
    for case in &cases {
        let (w, h, img) = png(&augment_dir().join("inputs").join(&case.input));
        let (_, _, want) = png(&augment_dir().join("refs").join(&case.reference));
        let mut out = vec![0u8; img.len()];
        imgfeed::imgproc::augment::apply_op(
            case.op,
            case.magnitude,
            &img,
            (h, w),
            [case.fill; 3],
            &mut out,
            &mut scratch,
        );
        let (max, _) = diff_u8(&out, &want);
        if max != 0 {
            let n = out.iter().zip(&want).filter(|(a, b)| a != b).count();
            failed.push(format!("{}: {n} values differ, by up to {max}", case.name));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {}:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}

/// For each of the three policies: what the engine gives for each sample equals the
/// operations drawn from that sample's stream applied to the (decoded, cropped) image, for
/// 1 and 2 workers; different samples draw different operations.
#[test]
fn the_engine_applies_each_samples_drawn_augmentations() {
    use imgfeed::imgproc::augment::AugOp;
    use imgfeed::ops::auto_augment::{AutoAugment, Policy};
    use imgfeed::ops::rand_augment::RandAugment;
    use imgfeed::ops::trivial_augment_wide::TrivialAugmentWide;
    type Draw = Box<dyn Fn(&mut imgfeed::rng::SplitMix64) -> Vec<(AugOp, f64)>>;
    let size = (40, 48);
    let auto = AutoAugment::new(Policy::Cifar10);
    let rand = RandAugment::new(3, 14);
    let wide = TrivialAugmentWide::default();
    let cases: Vec<(Op, Draw)> = vec![
        (
            Op::AutoAugment(auto.clone()),
            Box::new(move |r| auto.draw(r, size)),
        ),
        (
            Op::RandAugment(rand.clone()),
            Box::new(move |r| rand.draw(r, size)),
        ),
        (
            Op::TrivialAugmentWide(wide.clone()),
            Box::new(move |r| wide.draw(r)),
        ),
    ];
    let root = fixtures().join("imagefolder");
    let seed = 5;
    let pipeline = |ops: Vec<Op>, workers| {
        let mut b = imgfeed::Pipeline::builder(folder_source(&root).seed(seed))
            .batch(4, false)
            .workers(workers);
        for op in [decode(), center_crop(size.0, size.1)]
            .into_iter()
            .chain(ops)
        {
            b = b.op(op);
        }
        b.build().expect("builds")
    };
    let base = samples_u8(&pipeline(vec![], 1), 0);
    let mut scratch = Vec::new();
    for (op, draw) in cases {
        let name = format!("{op:?}");
        let mut seen = std::collections::BTreeSet::new();
        for epoch in 0..2 {
            let one = samples_u8(&pipeline(vec![op.clone()], 1), epoch);
            let two = samples_u8(&pipeline(vec![op.clone()], 2), epoch);
            assert_eq!(
                one, two,
                "{name} epoch {epoch}: the worker count changed the output"
            );
            for (index, (got, plain)) in one.iter().zip(&base).enumerate() {
                let steps = draw(&mut sample_rng(seed, epoch, index));
                let mut want = plain.clone();
                for &(aug, magnitude) in &steps {
                    seen.insert(format!("{aug:?}"));
                    let mut out = vec![0u8; want.len()];
                    imgfeed::imgproc::augment::apply_op(
                        aug,
                        magnitude,
                        &want,
                        size,
                        [0; 3],
                        &mut out,
                        &mut scratch,
                    );
                    want = out;
                }
                assert_eq!(got, &want, "{name} epoch {epoch} sample {index}: {steps:?}");
            }
        }
        assert!(seen.len() >= 5, "{name}: only {seen:?} were drawn");
    }
}

/// Parameters out of range are refused, naming the op and the parameter.
#[test]
fn augmentation_parameters_are_checked() {
    let root = fixtures().join("imagefolder");
    for (table, field) in [
        ("op = \"rand_augment\"\nmagnitude = 31", "magnitude"),
        (
            "op = \"rand_augment\"\nnum_magnitude_bins = 1",
            "num_magnitude_bins",
        ),
        (
            "op = \"trivial_augment_wide\"\nnum_magnitude_bins = 0",
            "num_magnitude_bins",
        ),
        ("op = \"auto_augment\"\npolicy = \"coco\"", "coco"),
        ("op = \"auto_augment\"\nfill = 300", "fill"),
    ] {
        let text = format!(
            "[source]\nkind = \"image_folder\"\nroot = {root:?}\n\n[[ops]]\nop = \"decode\"\n\n\
             [[ops]]\n{table}\n\n[batch]\nsize = 1\n"
        );
        let e = match imgfeed::PipelineConfig::parse(&text, Path::new("/p/a.toml")) {
            Ok(cfg) => imgfeed::Pipeline::new(cfg).expect_err(table).to_string(),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("ops[1]") && e.contains(field), "{table}: {e}");
    }
}

#[derive(serde::Deserialize)]
struct PadCase {
    name: String,
    input: String,
    padding: [usize; 4],
    fill: u8,
    mode: imgfeed::imgproc::PadMode,
    #[serde(rename = "ref")]
    reference: String,
}

/// `pad` through the engine (decode, pad) equals torchvision's `F.pad` on the PIL image
/// for every mode, including pads wider than the image (repeated mirroring, as np.pad).
#[test]
fn pad_equals_torchvision_for_every_mode() {
    use imgfeed::ops::pad::{Pad, Padding};
    let text = std::fs::read_to_string(augment_dir().join("pad_cases.json")).expect("pad_cases");
    let cases: Vec<PadCase> = serde_json::from_str(&text).expect("pad_cases.json parses");
    assert!(cases.len() >= 20, "{} cases", cases.len());
    for case in &cases {
        let dir = tempfile::tempdir().expect("tempdir");
        copy_into(
            dir.path(),
            "a/x.png",
            &augment_dir().join("inputs").join(&case.input),
        );
        let (rw, rh, want) = png(&augment_dir().join("refs").join(&case.reference));
        let op = Pad::new(0)
            .padding(Padding::Sides(case.padding))
            .fill(case.fill)
            .padding_mode(case.mode);
        let (w, h, _) = png(&augment_dir().join("inputs").join(&case.input));
        // the crop to its own size fixes the size the batch needs, changing nothing
        let p = build(
            dir.path(),
            vec![decode(), center_crop(h, w), Op::Pad(op)],
            1,
            1,
        );
        let got = samples_u8(&p, 0);
        assert_eq!(got[0].len(), rw * rh * 3, "{}", case.name);
        let (max, _) = diff_u8(&got[0], &want);
        assert_eq!(max, 0, "{}", case.name);
    }
}

/// `random_crop` with a padding mode crops the padded image (as `pad` makes it) at the
/// offset drawn from the sample's stream.
#[test]
fn random_crop_pads_by_its_mode_then_crops_at_the_drawn_offset() {
    use imgfeed::imgproc::PadMode;
    use imgfeed::ops::pad::Pad;
    use imgfeed::ops::RandomCrop;
    let root = fixtures().join("imagefolder");
    let seed = 3;
    let run = |ops: Vec<Op>| {
        let mut b = imgfeed::Pipeline::builder(folder_source(&root).seed(seed))
            .batch(1, false)
            .workers(2);
        for op in [decode(), center_crop(20, 24)].into_iter().chain(ops) {
            b = b.op(op);
        }
        samples_u8(&b.build().expect("builds"), 0)
    };
    for mode in [PadMode::Edge, PadMode::Reflect, PadMode::Symmetric] {
        let crop = RandomCrop::new([20, 24]).padding(6).padding_mode(mode);
        let got = run(vec![Op::RandomCrop(crop.clone())]);
        let padded = run(vec![Op::Pad(Pad::new(6).padding_mode(mode))]);
        let (ph, pw) = (32, 36);
        for (index, (g, full)) in got.iter().zip(&padded).enumerate() {
            let mut rng = sample_rng(seed, 0, index);
            let (top, left) = crop.place(20, 24, |b| rng.below(b)).expect("fits");
            let (top, left) = ((top + 6) as usize, (left + 6) as usize);
            let mut want = Vec::new();
            for y in top..top + 20 {
                want.extend_from_slice(&full[(y * pw + left) * 3..(y * pw + left + 24) * 3]);
            }
            assert!(ph >= top + 20);
            assert_eq!(g, &want, "{mode:?} sample {index}");
        }
    }
}

/// `random_erasing` after normalize overwrites exactly the box drawn from the sample's
/// stream with the value (per channel, or normal draws in channel, row, column order), and
/// leaves every other value as normalize wrote it; the box sizes vary; p = 0 erases nothing.
#[test]
fn random_erasing_overwrites_the_drawn_box_after_normalize() {
    use imgfeed::ops::random_erasing::{EraseValue, RandomErasing};
    let root = fixtures().join("imagefolder");
    let seed = 21;
    let (h, w) = (24, 32);
    let run = |tail: Vec<Op>| {
        let mut b = imgfeed::Pipeline::builder(folder_source(&root).seed(seed))
            .batch(2, false)
            .workers(2);
        let head = [
            decode(),
            center_crop(h, w),
            normalize([120.0, 110.0, 100.0], [60.0, 55.0, 50.0]),
            hwc_to_chw(),
        ];
        for op in head.into_iter().chain(tail) {
            b = b.op(op);
        }
        samples_f32(&b.build().expect("builds"), 0)
    };
    let plain = run(vec![]);
    let random = serde_json::from_str::<EraseValue>("\"random\"").expect("random");
    for value in [EraseValue::PerChannel([1.5, -2.0, 0.25]), random] {
        let op = RandomErasing::new(0.8)
            .value(value.clone())
            .scale([0.05, 0.4]);
        let got = run(vec![Op::RandomErasing(op.clone())]);
        let mut erased = 0;
        let mut sizes = std::collections::BTreeSet::new();
        for (index, (g, p)) in got.iter().zip(&plain).enumerate() {
            let mut rng = sample_rng(seed, 0, index);
            let Some(b) = op.draw(&mut rng, h, w) else {
                assert_eq!(g, p, "sample {index}: nothing erased");
                continue;
            };
            erased += 1;
            sizes.insert((b.height, b.width));
            let mut want = p.clone();
            for c in 0..3 {
                for y in b.top..b.top + b.height {
                    for x in b.left..b.left + b.width {
                        want[c * h * w + y * w + x] = match &value {
                            EraseValue::PerChannel(v) => v[c],
                            _ => rng.normal() as f32,
                        };
                    }
                }
            }
            assert_eq!(g, &want, "sample {index}, box {b:?}");
        }
        assert!(
            erased >= 6 && sizes.len() >= 4,
            "{erased} erased, sizes {sizes:?}"
        );
    }
    let none = run(vec![Op::RandomErasing(RandomErasing::new(0.0))]);
    assert_eq!(none, plain);
}
