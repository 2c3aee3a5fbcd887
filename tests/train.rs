//! The training side: random_resized_crop, worker-count independence and resume on the
//! training pipeline, the decode-crop fusion, and `on_error = "replace"`.

mod common;

use common::*;
use imgfeed::engine::fingerprint::fingerprint;
use imgfeed::imgproc::Filter;
use imgfeed::ops::{Op, RandomResizedCrop, Size};
use imgfeed::rng::SplitMix64;
use imgfeed::{EngineConfig, Error, OnError, Pipeline, PipelineConfig, State};
use std::path::Path;

fn rrc(size: [usize; 2], scale: [f64; 2], ratio: [f64; 2], attempts: u32) -> RandomResizedCrop {
    RandomResizedCrop::new(Size::Two(size))
        .scale(scale)
        .ratio(ratio)
        .filter(Filter::Bilinear)
        .attempts(attempts)
}

fn default_rrc(size: usize) -> RandomResizedCrop {
    let text = format!("op = \"random_resized_crop\"\nsize = {size}\n");
    match toml::from_str::<Op>(&text).expect("op parses") {
        Op::RandomResizedCrop(r) => r,
        other => panic!("parsed as {other:?}"),
    }
}

/// One image through `ops`, as u8 HWC.
fn through(root: &Path, ops: Vec<Op>) -> Vec<u8> {
    samples_u8(&build(root, ops, 1, 1), 0).remove(0)
}

// ---- the box ------------------------------------------------------------------------------

#[test]
fn defaults_are_torchvisions() {
    let r = default_rrc(224);
    assert_eq!(r.scale, [0.08, 1.0]);
    assert_eq!(r.ratio, [0.75, 4.0 / 3.0]);
    assert_eq!((r.attempts, r.filter), (10, Filter::Bilinear));
}

#[test]
fn boxes_stay_inside_and_follow_the_scale_and_ratio_ranges() {
    let r = default_rrc(224);
    let (h, w) = (375usize, 500usize);
    let mut g = SplitMix64::new(7);
    let mut shares = Vec::new();
    let mut fallbacks = 0;
    for _ in 0..20_000 {
        let b = r.sample_box(h, w, &mut g);
        let (t, l, bh, bw) = (b.top, b.left, b.height, b.width);
        assert!(
            bh >= 1 && bw >= 1 && t + bh <= h && l + bw <= w,
            "{t} {l} {bh} {bw}"
        );
        if (bh, bw) == (h, w) && (t, l) == (0, 0) {
            fallbacks += 1;
            continue;
        }
        let share = (bh * bw) as f64 / (h * w) as f64;
        // rounding each side to whole pixels moves the area and ratio a little
        assert!((0.075..=1.0).contains(&share), "area share {share}");
        let ratio = bw as f64 / bh as f64;
        assert!(
            (0.74..=1.345).contains(&ratio),
            "ratio {ratio} of {bh}x{bw}"
        );
        shares.push(share);
    }
    // uniform in [0.08, 1] minus the boxes too large to fit: the mean sits a bit under 0.54
    let mean = shares.iter().sum::<f64>() / shares.len() as f64;
    assert!((0.40..0.54).contains(&mean), "mean area share {mean}");
    // on a 4:3 image a fit is found within 10 attempts practically always
    assert!(fallbacks < 20, "{fallbacks} fallbacks");
    // every left offset can come up: the placement is uniform, not centred
    let mut lefts = std::collections::BTreeSet::new();
    for _ in 0..2000 {
        lefts.insert(r.sample_box(h, w, &mut g).left);
    }
    assert!(
        lefts.contains(&0) && lefts.len() > 300,
        "{} lefts",
        lefts.len()
    );
}

fn rect(top: usize, left: usize, height: usize, width: usize) -> imgfeed::imgproc::Rect {
    imgfeed::imgproc::Rect {
        top,
        left,
        height,
        width,
    }
}

#[test]
fn no_fitting_box_falls_back_to_the_central_crop_clamped_to_the_ratio() {
    // torchvision: in_ratio = 10/1000 < 3/4, so w = 10, h = round(10 / 0.75) = 13,
    // i = (1000 - 13) // 2, j = 0
    let r = default_rrc(224);
    let mut g = SplitMix64::new(1);
    assert_eq!(r.sample_box(1000, 10, &mut g), rect(493, 0, 13, 10));
    // wide: h = 10, w = round(10 * 4/3) = 13, j = (1000 - 13) // 2
    assert_eq!(r.sample_box(10, 1000, &mut g), rect(0, 493, 10, 13));
    // inside the ratio range: the whole image
    let none = rrc([4, 4], [0.08, 1.0], [0.75, 4.0 / 3.0], 0);
    assert_eq!(none.sample_box(30, 35, &mut g), rect(0, 0, 30, 35));
}

#[test]
fn bad_parameters_are_refused_before_reading() {
    let dir = bmp_folder(&[("a/x.bmp", &Img::pattern(8, 8, 1))]);
    for (op, want) in [
        (rrc([4, 4], [0.0, 1.0], [0.75, 1.33], 10), "scale"),
        (rrc([4, 4], [0.9, 0.5], [0.75, 1.33], 10), "scale"),
        (rrc([4, 4], [0.1, 1.0], [2.0, 1.0], 10), "ratio"),
        (rrc([0, 4], [0.1, 1.0], [0.75, 1.33], 10), "size"),
    ] {
        let e = Pipeline::builder(folder_source(dir.path()))
            .op(decode())
            .op(Op::RandomResizedCrop(op))
            .build()
            .expect_err("refused");
        assert!(e.to_string().contains(want), "{e}");
        assert!(e.is_usage());
    }
}

// ---- parity: a fixed box is a crop and a resize ------------------------------------------------

#[test]
fn a_fixed_box_equals_center_crop_then_resize_of_that_box() {
    // 16 wide, 8 high: ratio [1, 1] and no attempts leave the central 8x8 box at left 4
    let img = Img::pattern(16, 8, 3);
    let dir = bmp_folder(&[("a/x.bmp", &img)]);
    for filter in [Filter::Bilinear, Filter::Linear, Filter::Bicubic] {
        let op = rrc([5, 5], [0.5, 0.5], [1.0, 1.0], 0).filter(filter);
        let got = through(dir.path(), vec![decode(), Op::RandomResizedCrop(op)]);
        let want = through(
            dir.path(),
            vec![decode(), center_crop(8, 8), resize_exact(5, 5, filter)],
        );
        assert_eq!(got, want, "{filter:?}");
    }
    // scale 1 and the image's own ratio: the box is the whole image, an exact resize
    let op = rrc([3, 7], [1.0, 1.0], [2.0, 2.0], 10);
    let got = through(dir.path(), vec![decode(), Op::RandomResizedCrop(op)]);
    let want = through(
        dir.path(),
        vec![decode(), resize_exact(3, 7, Filter::Bilinear)],
    );
    assert_eq!(got, want);
}

#[test]
fn the_box_is_read_from_the_right_place() {
    // Every pixel names its column: a crop of width 1 (ratio tiny) keeps one column, and
    // which one is the box's left edge.
    let img = Img::from_fn(40, 1, |x, _| [x as u8 * 6, 0, 0]);
    let dir = bmp_folder(&[("a/x.bmp", &img)]);
    let op = rrc([1, 1], [0.025, 0.025], [1.0, 1.0], 10);
    let p = Pipeline::builder(folder_source(dir.path()).shuffle(false).seed(5))
        .op(decode())
        .op(Op::RandomResizedCrop(op.clone()))
        .build()
        .expect("builds");
    for epoch in 0..6 {
        let got = samples_u8(&p, epoch).remove(0);
        // the same draw the engine makes: the sample's stream for (seed, epoch, index)
        let mut g = imgfeed::rng::sample_rng(5, epoch, 0);
        let b = op.sample_box(1, 40, &mut g);
        let (left, bh, bw) = (b.left, b.height, b.width);
        assert_eq!((bh, bw), (1, 1));
        assert_eq!(got, vec![left as u8 * 6, 0, 0], "epoch {epoch}");
    }
}

// ---- the training pipeline ------------------------------------------------------------------------

/// `pipelines/resnet50_train.toml` on the JPEG fixtures, smaller so tests stay quick.
fn train(workers: usize, batch: usize, fuse: bool) -> Pipeline {
    let mut cfg =
        PipelineConfig::from_file(repo().join("pipelines/resnet50_train.toml")).expect("parses");
    cfg.engine = EngineConfig::default().workers(workers).fuse(fuse);
    cfg.batch.size = batch;
    cfg.batch.drop_remainder = false;
    for op in &mut cfg.ops {
        if let Op::RandomResizedCrop(r) = op {
            r.size = Size::One(56);
        }
    }
    Pipeline::new(cfg).expect("builds")
}

fn epoch_bytes(p: &Pipeline, epoch: u64) -> Vec<(Vec<u8>, Vec<u8>, Vec<u64>)> {
    batches(p, epoch)
        .into_iter()
        .map(|b| {
            (
                b.image_bytes().to_vec(),
                b.label_bytes().to_vec(),
                b.indices().to_vec(),
            )
        })
        .collect()
}

#[test]
fn the_training_pipeline_is_identical_for_1_2_and_8_workers() {
    let one = epoch_bytes(&train(1, 5, true), 1);
    assert_eq!(one.len(), 3);
    assert_eq!(epoch_bytes(&train(2, 5, true), 1), one);
    assert_eq!(epoch_bytes(&train(8, 5, true), 1), one);
    // another epoch: another order and other crops
    let next = epoch_bytes(&train(2, 5, true), 2);
    assert_ne!(next[0].2, one[0].2, "the order is reshuffled");
    let mut a: Vec<u64> = one.iter().flat_map(|b| b.2.clone()).collect();
    let mut b: Vec<u64> = next.iter().flat_map(|b| b.2.clone()).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b, "the same samples");
}

#[test]
fn resuming_at_any_batch_yields_exactly_the_rest_of_the_epoch() {
    let full = epoch_bytes(&train(2, 5, true), 3);
    let p = train(3, 5, true);
    for k in 0..=full.len() {
        let rest: Vec<_> = p
            .resume(State {
                epoch: 3,
                batch: k,
                sample: None,
            })
            .expect("resume")
            .map(|b| {
                let b = b.expect("batch");
                (
                    b.image_bytes().to_vec(),
                    b.label_bytes().to_vec(),
                    b.indices().to_vec(),
                )
            })
            .collect();
        assert_eq!(rest, full[k..], "resume at batch {k}");
    }
    // the state an interrupted epoch reports is where the resumed one starts
    let mut e = p.epoch(3);
    let first = e.next().expect("batch").expect("ok");
    assert_eq!(first.number(), 0);
    let state = e.state();
    assert_eq!(
        state,
        State {
            epoch: 3,
            batch: 1,
            sample: Some(5)
        }
    );
    drop(e);
    let again: Vec<usize> = train(1, 5, true)
        .resume(state)
        .expect("resume")
        .map(|b| b.expect("batch").number())
        .collect();
    assert_eq!(again, vec![1, 2]);
    let e = p
        .resume(State {
            epoch: 3,
            batch: 4,
            sample: None,
        })
        .expect_err("past the end");
    assert!(e.to_string().contains("3 batches"), "{e}");
}

#[test]
fn decoding_only_the_box_matches_decoding_everything() {
    let fused = train(2, 4, true);
    let plain = train(2, 4, false);
    if cfg!(imgfeed_turbo) {
        assert!(
            fused
                .fusions()
                .iter()
                .any(|f| f.contains("random_resized_crop")),
            "{:?}",
            fused.fusions()
        );
    }
    assert!(plain.fusions().iter().all(|f| !f.contains("region")));
    // libjpeg-turbo decodes the same pixels inside a region (with its 2-pixel margin) as
    // in the whole image, and the 4-byte and 3-byte resize kernels agree: bit-identical,
    // over 8 epochs of boxes (with no margin, boxes whose edge falls inside an upsampled
    // chroma pair differ by a grey level or two)
    for epoch in 0..8 {
        let (a, b) = (samples_f32(&fused, epoch), samples_f32(&plain, epoch));
        assert_eq!(a.len(), 12);
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(
                x == y,
                "epoch {epoch} sample {i} differs between region and whole decode"
            );
        }
    }
}

/// The region margin holds for every chroma subsampling libjpeg-turbo decodes by region
/// (and for greyscale, restart markers and progressive files): the fused training path
/// gives the whole-decode bytes, box after box.
#[test]
fn decoding_only_the_box_matches_for_every_subsampling() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = [
        "sampling_411.jpg",
        "sampling_420.jpg",
        "sampling_422.jpg",
        "sampling_440.jpg",
        "sampling_444.jpg",
        "gray.jpg",
        "restart.jpg",
        "progressive.jpg",
    ];
    for f in files {
        copy_into(
            dir.path(),
            &format!("a/{f}"),
            &fixtures().join("edge").join(f),
        );
    }
    let make = |fuse| {
        let mut src = folder_source(dir.path());
        src.sampling.shuffle = true;
        Pipeline::builder(src)
            .op(decode())
            .op(Op::RandomResizedCrop(default_rrc(56)))
            .batch(1, false)
            .engine(EngineConfig::default().workers(2).fuse(fuse))
            .build()
            .expect("builds")
    };
    let (fused, plain) = (make(true), make(false));
    for epoch in 0..16 {
        let (a, b) = (samples_u8(&fused, epoch), samples_u8(&plain, epoch));
        assert_eq!(a.len(), files.len());
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(
                x == y,
                "epoch {epoch} sample {i} differs between region and whole decode"
            );
        }
    }
}

/// The float CHW write of the training pipeline (a width that is a multiple of 32 takes the
/// streaming kernel): a flip drawn last gives the mirror of the unflipped sample, and the
/// fingerprints the workers report are those of the bytes in the batch.
#[test]
fn streamed_samples_flip_and_fingerprint_as_written() {
    let make = |flipped: bool| {
        let mut b = Pipeline::builder(folder_source(&fixtures().join("imagefolder")))
            .op(decode())
            .op(Op::RandomResizedCrop(default_rrc(64)));
        if flipped {
            b = b.op(flip(1.0));
        }
        b.op(normalize(
            [123.675, 116.28, 103.53],
            [58.395, 57.12, 57.375],
        ))
        .op(hwc_to_chw())
        .batch(4, false)
        .engine(EngineConfig::default().workers(2).fingerprint(true))
        .build()
        .expect("builds")
    };
    let (plain, flipped) = (make(false), make(true));
    let per = 3 * 64 * 64;
    for epoch in 0..2 {
        let (a, b) = (batches(&plain, epoch), batches(&flipped, epoch));
        assert_eq!(a.len(), 3);
        for (x, y) in a.iter().zip(&b) {
            for batch in [x, y] {
                let imgs = batch.images_f32().expect("float");
                let fps = batch.fingerprints().expect("fingerprints on");
                for (i, &fp) in fps.iter().enumerate() {
                    let bytes: &[u8] = bytemuck::cast_slice(&imgs[i * per..(i + 1) * per]);
                    assert_eq!(fp, fingerprint(bytes), "epoch {epoch} sample {i}");
                }
            }
            let (xi, yi) = (
                x.images_f32().expect("float"),
                y.images_f32().expect("float"),
            );
            for (rx, ry) in xi.chunks_exact(64).zip(yi.chunks_exact(64)) {
                let mirrored: Vec<f32> = rx.iter().rev().copied().collect();
                assert_eq!(
                    ry,
                    &mirrored[..],
                    "epoch {epoch}: a flipped row is the row mirrored"
                );
            }
        }
    }
}

// ---- on_error = "replace" ---------------------------------------------------------------------------

/// 12 good BMPs (two classes) with 4 bad files among them.
fn tree_with_bad_files() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..12 {
        let class = if i < 6 { "a" } else { "b" };
        Img::uniform(4, 4, [i as u8 * 10, 0, 0])
            .write_bmp(&dir.path().join(format!("{class}/{i:02}.bmp")));
    }
    for (rel, bad) in [
        ("a/02_bad.jpg", "truncated.jpg"),
        ("a/04_bad.jpg", "garbage.jpg"),
        ("b/07_bad.png", "truncated.png"),
        ("b/10_bad.jpg", "empty.jpg"),
    ] {
        copy_into(dir.path(), rel, &fixtures().join("bad").join(bad));
    }
    dir
}

fn replacing(root: &Path, shards: usize, id: usize, workers: usize) -> Pipeline {
    Pipeline::builder(folder_source(root).shuffle(true).seed(3).shards(shards, id))
        .op(decode())
        .op(center_crop(4, 4))
        .batch(2, false)
        .engine(
            EngineConfig::default()
                .workers(workers)
                .on_error(OnError::Replace),
        )
        .build()
        .expect("builds")
}

#[test]
fn replace_keeps_every_shard_at_its_announced_batch_count() {
    let dir = tree_with_bad_files();
    let names: Vec<String> = {
        let p = replacing(dir.path(), 1, 0, 1);
        (0..p.source().len())
            .map(|i| p.source().sample_name(i))
            .collect()
    };
    let bad: Vec<usize> = (0..names.len())
        .filter(|&i| names[i].contains("bad"))
        .collect();
    assert_eq!(bad.len(), 4);
    let mut reported = Vec::new();
    for id in 0..4 {
        let p = replacing(dir.path(), 4, id, 2);
        let announced = p.batches_per_epoch();
        let shard_order: Vec<u64> = folder_source(dir.path())
            .shuffle(true)
            .seed(3)
            .shards(4, id)
            .sampling
            .order(names.len(), 0, None)
            .into_iter()
            .map(|i| i as u64)
            .collect();
        let got = batches(&p, 0);
        assert_eq!(got.len(), announced, "shard {id}");
        let mut filled = 0;
        for b in &got {
            filled += b.len();
            for &i in b.indices() {
                assert!(!bad.contains(&(i as usize)), "shard {id} delivered bad {i}");
                assert!(
                    shard_order.contains(&i),
                    "replacement {i} is from shard {id}"
                );
            }
            for e in b.skipped() {
                match e {
                    Error::Sample { index, .. } => reported.push(*index),
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(filled, shard_order.len(), "every slot of shard {id} filled");
        // the same replacements for another worker count
        let again: Vec<Vec<u64>> = batches(&replacing(dir.path(), 4, id, 1), 0)
            .iter()
            .map(|b| b.indices().to_vec())
            .collect();
        let first: Vec<Vec<u64>> = got.iter().map(|b| b.indices().to_vec()).collect();
        assert_eq!(again, first, "shard {id}");
    }
    reported.sort();
    assert_eq!(
        reported, bad,
        "each bad file reported by the shard that met it"
    );
}

#[test]
fn replace_fails_the_batch_when_no_replacement_decodes() {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_into(dir.path(), "a/x.jpg", &fixtures().join("bad/truncated.jpg"));
    copy_into(dir.path(), "a/y.jpg", &fixtures().join("bad/garbage.jpg"));
    let mut e = replacing(dir.path(), 1, 0, 1).epoch(0);
    match e.next() {
        Some(Err(Error::Sample { stage, .. })) => assert_eq!(stage, "decode"),
        other => panic!("expected the batch to fail, got {other:?}"),
    }
    assert!(e.next().is_none());
}

// ---- random_vertical_flip ---------------------------------------------------------------------------

fn vflip(prob: f64) -> Op {
    let text = format!("op = \"random_vertical_flip\"\nprob = {prob}\n");
    toml::from_str::<Op>(&text).expect("op parses")
}

/// `h × w` samples of `c`-element pixels (any layout whose rows are whole), rows reversed.
fn rows_reversed<T: Clone>(sample: &[T], planes: usize, h: usize) -> Vec<T> {
    let plane = sample.len() / planes;
    let row = plane / h;
    sample
        .chunks_exact(plane)
        .flat_map(|p| {
            p.chunks_exact(row)
                .rev()
                .flatten()
                .cloned()
                .collect::<Vec<_>>()
        })
        .collect()
}

/// prob 1 reverses the rows: of decoded JPEGs (u8 HWC), of float CHW after normalize, and
/// of the source's own pixels (CIFAR planes, read in place); prob 0 changes nothing; with a
/// horizontal flip too, the sample is turned half a circle.
#[test]
fn random_vertical_flip_reverses_rows_in_every_layout_and_type() {
    let tree = fixtures().join("imagefolder");
    let crop = || center_crop(24, 40);
    let plain = samples_u8(&build(&tree, vec![decode(), crop()], 4, 2), 0);
    let flipped = samples_u8(&build(&tree, vec![decode(), crop(), vflip(1.0)], 4, 2), 0);
    let kept = samples_u8(&build(&tree, vec![decode(), crop(), vflip(0.0)], 4, 2), 0);
    assert_eq!(plain.len(), flipped.len());
    assert_eq!(kept, plain);
    for (a, b) in plain.iter().zip(&flipped) {
        assert_ne!(a, b, "a photo is not symmetric top-bottom");
        assert_eq!(*b, rows_reversed(a, 1, 24));
    }
    // both flips: every pixel at (h-1-y, w-1-x)
    let turned = samples_u8(
        &build(&tree, vec![decode(), crop(), flip(1.0), vflip(1.0)], 4, 2),
        0,
    );
    for (a, t) in plain.iter().zip(&turned) {
        let px: Vec<&[u8]> = a.chunks_exact(3).rev().collect();
        assert_eq!(t.chunks_exact(3).collect::<Vec<_>>(), px);
    }
    // float CHW: the flip after normalize + hwc_to_chw runs on float planes
    let norm = || normalize([10.0, 20.0, 30.0], [2.0, 4.0, 8.0]);
    let f_plain = samples_f32(
        &build(&tree, vec![decode(), crop(), norm(), hwc_to_chw()], 4, 1),
        0,
    );
    let f_flip = samples_f32(
        &build(
            &tree,
            vec![
                decode(),
                crop(),
                norm(),
                hwc_to_chw(),
                vflip(1.0),
                center_crop(24, 40),
            ],
            4,
            1,
        ),
        0,
    );
    for (a, b) in f_plain.iter().zip(&f_flip) {
        assert_eq!(*b, rows_reversed(a, 3, 24));
    }
    // CIFAR: the records' own pixels
    let cifar = |ops: Vec<Op>| {
        let text = format!(
            "[source]\nkind = \"cifar10\"\nroot = \"{}\"\nusage = \"test\"\n[batch]\nsize = 4\n",
            fixtures().join("cifar10").display()
        );
        let mut cfg = PipelineConfig::parse(&text, Path::new("cifar.toml")).expect("parses");
        cfg.ops = ops;
        samples_u8(&Pipeline::new(cfg).expect("builds"), 0)
    };
    let (c_plain, c_flip) = (cifar(vec![]), cifar(vec![vflip(1.0)]));
    assert!(!c_plain.is_empty());
    for (a, b) in c_plain.iter().zip(&c_flip) {
        assert_eq!(*b, rows_reversed(a, 1, 32));
    }
}

/// Each sample's flip is its own stream's first draw, `unit() < prob`: the same for any
/// worker count and epoch after epoch, and about half of the samples at 0.5.
#[test]
fn random_vertical_flip_draws_from_the_sample_stream() {
    let tree = fixtures().join("imagefolder");
    let ops = |p: f64| vec![decode(), center_crop(24, 40), vflip(p)];
    let plain = samples_u8(&build(&tree, ops(0.0), 4, 1), 0);
    let mut flips = 0;
    for epoch in 0..3 {
        let one = samples_u8(&build(&tree, ops(0.5), 4, 1), epoch);
        let two = samples_u8(&build(&tree, ops(0.5), 4, 2), epoch);
        assert_eq!(one, two, "epoch {epoch}: the same for 1 and 2 workers");
        for (i, (a, got)) in plain.iter().zip(&one).enumerate() {
            let drawn = imgfeed::rng::sample_rng(0, epoch, i).unit() < 0.5;
            let want = if drawn {
                rows_reversed(a, 1, 24)
            } else {
                a.clone()
            };
            assert_eq!(*got, want, "epoch {epoch} sample {i}");
            flips += usize::from(drawn);
        }
    }
    let n = 3 * plain.len();
    assert!(flips > n / 5 && flips < n * 4 / 5, "{flips} of {n}");
}

#[test]
fn random_vertical_flip_checks_prob() {
    let tree = fixtures().join("imagefolder");
    let err = Pipeline::builder(folder_source(&tree))
        .op(decode())
        .op(vflip(1.5))
        .build()
        .expect_err("prob 1.5");
    assert!(
        err.to_string()
            .contains("ops[1] (random_vertical_flip): prob: 1.5 is not in [0, 1]"),
        "{err}"
    );
}
