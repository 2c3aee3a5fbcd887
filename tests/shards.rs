//! Shards: conversion, the shards source, integrity checks, split conversion and merging,
//! and the Python reader.

mod common;

use common::*;
use imgfeed::imgproc::Filter;
use imgfeed::ops::Op;
use imgfeed::rng::SplitMix64;
use imgfeed::shards::format::{crc32, Storage};
use imgfeed::shards::slice_range;
use imgfeed::shards::{merge_index, StoreConfig};
use imgfeed::sink::convert_to_shards;
use imgfeed::source::Shards;
use imgfeed::{LabelType, Pipeline, PipelineConfig, SourceConfig};
use std::path::{Path, PathBuf};

fn folder() -> PathBuf {
    fixtures().join("imagefolder")
}

fn store(mode: Storage, quality: u8) -> StoreConfig {
    StoreConfig::default().mode(mode).quality(quality)
}

/// A conversion pipeline over `source` with `ops`.
fn conversion(source: SourceConfig, ops: Vec<Op>, workers: usize) -> PipelineConfig {
    PipelineConfig::new(source, ops, imgfeed::BatchConfig::default()).engine(engine(workers))
}

/// Convert `source` through `ops` into `out`, failing the test on any error or skip.
fn convert(source: SourceConfig, ops: Vec<Op>, st: StoreConfig, out: &Path) {
    let cfg = conversion(source, ops, 2);
    let r = convert_to_shards(&cfg, &st, out, |_| {}, |_| {}, |e| panic!("skipped: {e}"))
        .unwrap_or_else(|e| panic!("conversion failed: {e}"));
    assert_eq!(r.skipped, 0);
}

/// The ResNet-50 eval ops, ending in uint8 HWC so outputs compare in grey levels.
fn eval_u8() -> Vec<Op> {
    vec![
        decode(),
        resize_short(256, Filter::Bilinear),
        center_crop(224, 224),
    ]
}

/// The ResNet-50 eval ops as shipped (float32 CHW, int32 labels).
fn eval_f32() -> Vec<Op> {
    vec![
        decode(),
        resize_short(256, Filter::Bilinear),
        center_crop(224, 224),
        normalize([123.675, 116.28, 103.53], [58.395, 57.12, 57.375]),
        hwc_to_chw(),
        type_cast(LabelType::I32),
    ]
}

fn pipeline(source: SourceConfig, ops: Vec<Op>, batch: usize) -> Pipeline {
    let mut b = Pipeline::builder(source).batch(batch, false).workers(2);
    for op in ops {
        b = b.op(op);
    }
    b.build()
        .unwrap_or_else(|e| panic!("pipeline should build: {e}"))
}

/// `(sample names, labels)` of an epoch, in output order.
fn names_labels(p: &Pipeline, epoch: u64) -> (Vec<String>, Vec<i64>) {
    let mut names = Vec::new();
    let mut labels = Vec::new();
    for b in batches(p, epoch) {
        names.extend(
            b.indices()
                .iter()
                .map(|&i| p.source().sample_name(i as usize)),
        );
        labels.extend(labels_i64(&b));
    }
    (names, labels)
}

#[test]
fn original_storage_gives_exactly_the_original_output() {
    let out = tempfile::tempdir().expect("tempdir");
    convert(
        folder_source(&folder()),
        vec![],
        store(Storage::Original, 90),
        out.path(),
    );
    let shards = Shards::open(out.path()).expect("open");
    let tree = imgfeed::source::ImageFolder::open(&folder(), None, None).expect("tree");
    assert_eq!(shards.len(), 12);
    for i in 0..12 {
        let (rel, label) = tree.sample(i).expect("sample");
        let (e, bytes) = shards.record(i).expect("record");
        let file = std::fs::read(folder().join(rel)).expect("read");
        assert_eq!(bytes, &file[..], "sample {i} must be the file's bytes");
        assert_eq!(e.labels[0], label);
        assert_eq!(shards.sample_name(i), rel.to_string_lossy());
    }
    assert_eq!(
        shards.manifest().classes,
        vec![
            ("bird".to_string(), 0),
            ("cat".to_string(), 1),
            ("coffee".to_string(), 2)
        ]
    );
    let a = pipeline(folder_source(&folder()), eval_f32(), 5);
    // The same pipeline, pointed at the converted copy (kind still says image_folder).
    let b = pipeline(folder_source(out.path()), eval_f32(), 5);
    assert!(b.source().describe().starts_with("shards "));
    assert_eq!(samples_f32(&a, 0), samples_f32(&b, 0));
    assert_eq!(names_labels(&a, 0), names_labels(&b, 0));
}

#[test]
fn raw_storage_is_exact_after_the_stored_resize() {
    let out = tempfile::tempdir().expect("tempdir");
    let stored = vec![decode(), resize_exact(48, 64, Filter::Bilinear)];
    convert(
        folder_source(&folder()),
        stored.clone(),
        store(Storage::Raw, 90),
        out.path(),
    );
    let shards = Shards::open(out.path()).expect("open");
    assert_eq!(shards.manifest().fixed_size, Some([48, 64]));
    // Decoding the stored pixels is a pass-through, and the size is known from the manifest.
    let a = pipeline(folder_source(&folder()), stored, 4);
    let b = pipeline(folder_source(out.path()), vec![decode()], 4);
    assert_eq!(b.output_spec().fixed_size(), Some((48, 64)));
    // Only the stored pixels pass through: a second decode is still an error.
    let e = Pipeline::builder(folder_source(out.path()))
        .op(decode())
        .op(decode())
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ops[1] (decode)") && e.contains("already pixels"),
        "{e}"
    );
    let (sa, sb) = (samples_u8(&a, 0), samples_u8(&b, 0));
    assert_eq!(sa.len(), 12);
    assert_eq!(sa, sb);
    assert_eq!(names_labels(&a, 0), names_labels(&b, 0));
    // Later ops run on the stored pixels as on decoded ones: a crop, a flip and the
    // normalisation give exactly what they give after the same resize of the original.
    let more = |mut ops: Vec<Op>| {
        ops.extend([
            center_crop(40, 40),
            flip(0.5),
            normalize([120.0, 110.0, 100.0], [60.0, 55.0, 50.0]),
            hwc_to_chw(),
        ]);
        ops
    };
    let a = pipeline(
        folder_source(&folder()),
        more(vec![decode(), resize_exact(48, 64, Filter::Bilinear)]),
        4,
    );
    let b = pipeline(folder_source(out.path()), more(vec![decode()]), 4);
    assert_eq!(samples_f32(&a, 3), samples_f32(&b, 3));
}

#[test]
fn training_ops_on_raw_shards_match_the_tree_after_the_stored_resize() {
    // random_resized_crop + flip + normalize, shuffled: the same random draws (seeded by
    // sample index) on the stored pixels as on the tree's pixels after the same resize.
    let out = tempfile::tempdir().expect("tempdir");
    let stored = vec![decode(), resize_exact(48, 64, Filter::Bilinear)];
    convert(
        folder_source(&folder()),
        stored.clone(),
        store(Storage::Raw, 90),
        out.path(),
    );
    let train = |mut ops: Vec<Op>| {
        ops.extend([
            Op::RandomResizedCrop(
                imgfeed::ops::RandomResizedCrop::new(imgfeed::ops::Size::One(24))
                    .scale([0.08, 1.0])
                    .ratio([0.75, 4.0 / 3.0])
                    .filter(Filter::Bilinear)
                    .attempts(10),
            ),
            flip(0.5),
            normalize([123.675, 116.28, 103.53], [58.395, 57.12, 57.375]),
            hwc_to_chw(),
        ]);
        ops
    };
    let shuffled = |root: &Path| {
        let mut s = folder_source(root);
        s.sampling.shuffle = true;
        s.sampling.seed = 3;
        s
    };
    let a = pipeline(shuffled(&folder()), train(stored), 4);
    let b = pipeline(shuffled(out.path()), train(vec![decode()]), 4);
    for epoch in [0, 1] {
        let (x, y) = (samples_f32(&a, epoch), samples_f32(&b, epoch));
        assert_eq!(x.len(), 12);
        assert_eq!(x, y, "epoch {epoch}");
        assert_eq!(names_labels(&a, epoch), names_labels(&b, epoch));
    }
}

#[test]
fn raw256_under_the_eval_pipeline_is_within_one_grey_level_of_the_tree() {
    // The tree's pipeline fuses resize and crop (computing only the window); the shards
    // were resized whole at conversion and the eval resize to 256 is then a copy. The two
    // orders of arithmetic may round one grey level apart, no more.
    let out = tempfile::tempdir().expect("tempdir");
    convert(
        folder_source(&folder()),
        vec![decode(), resize_short(256, Filter::Bilinear)],
        store(Storage::Raw, 90),
        out.path(),
    );
    let shards = Shards::open(out.path()).expect("open");
    for i in 0..shards.len() {
        let e = shards.entry(i).expect("entry");
        assert_eq!(e.height.min(e.width), 256, "sample {i} stored at 256");
        assert_eq!(e.length, (e.height * e.width * 3) as u64);
    }
    let a = samples_u8(&pipeline(folder_source(&folder()), eval_u8(), 4), 0);
    let b = samples_u8(&pipeline(folder_source(out.path()), eval_u8(), 4), 0);
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let (max, mean) = diff_u8(x, y);
        assert!(
            max <= 1 && mean < 0.05,
            "sample {i}: max {max}, mean {mean}"
        );
    }
}

#[test]
fn jpeg_storage_is_within_the_reencoding_error() {
    let q90 = tempfile::tempdir().expect("tempdir");
    let q30 = tempfile::tempdir().expect("tempdir");
    let ops = vec![decode(), resize_short(256, Filter::Bilinear)];
    convert(
        folder_source(&folder()),
        ops.clone(),
        store(Storage::Jpeg, 90),
        q90.path(),
    );
    convert(
        folder_source(&folder()),
        ops,
        store(Storage::Jpeg, 30),
        q30.path(),
    );
    let shards = Shards::open(q90.path()).expect("open");
    assert_eq!(shards.manifest().quality, Some(90));
    for i in 0..shards.len() {
        let (e, bytes) = shards.record(i).expect("record");
        assert!(
            bytes.starts_with(&[0xFF, 0xD8, 0xFF]),
            "sample {i} is a JPEG"
        );
        // Baseline, 4:2:0: the SOF0 frame header gives luma 2x2, chroma 1x1 sampling.
        let sof = bytes
            .windows(2)
            .position(|w| w == [0xFF, 0xC0])
            .expect("SOF0");
        let comps = &bytes[sof + 10..sof + 19];
        assert_eq!(
            [comps[1], comps[4], comps[7]],
            [0x22, 0x11, 0x11],
            "sample {i}"
        );
        assert_eq!(e.height.min(e.width), 256);
    }
    let tree = samples_u8(&pipeline(folder_source(&folder()), eval_u8(), 4), 0);
    // Worst per-sample (max, mean) absolute error in grey levels.
    let error = |dir: &Path| {
        let got = samples_u8(&pipeline(folder_source(dir), eval_u8(), 4), 0);
        assert_eq!(got.len(), tree.len());
        let (mut worst_max, mut worst_mean) = (0u8, 0.0f64);
        for (x, y) in tree.iter().zip(&got) {
            let (max, mean) = diff_u8(x, y);
            worst_max = worst_max.max(max);
            worst_mean = worst_mean.max(mean);
        }
        (worst_max, worst_mean)
    };
    let ((m90, e90), (_, e30)) = (error(q90.path()), error(q30.path()));
    println!("quality 90: max {m90}, mean {e90:.3}; quality 30: mean {e30:.3}");
    // Measured on the fixtures (quality 90, 4:2:0 chroma as Pillow writes it): worst max
    // 43, worst mean 2.54 grey levels.
    assert!(
        e90 > 0.0 && e90 < 3.5 && m90 < 64,
        "quality 90: max {m90}, mean {e90}"
    );
    assert!(
        e30 > e90 * 1.5,
        "quality 30 ({e30}) should be worse than 90 ({e90})"
    );
}

#[test]
fn cifar_records_convert_to_raw_and_read_back_identically() {
    let out = tempfile::tempdir().expect("tempdir");
    let c100 = |root: &Path, label| {
        SourceConfig::from(imgfeed::Dataset::Cifar100(
            imgfeed::source::Cifar100Config::new(root).label(label),
        ))
    };
    let src = c100(
        &fixtures().join("cifar100"),
        imgfeed::source::CifarLabel::Both,
    );
    convert(src.clone(), vec![], store(Storage::Raw, 90), out.path());
    let shards = Shards::open(out.path()).expect("open");
    assert_eq!(shards.manifest().label_columns, 2);
    assert_eq!(shards.manifest().fixed_size, Some([32, 32]));
    let ops = || {
        vec![
            rescale(1.0 / 255.0, 0.0),
            normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3]),
            hwc_to_chw(),
        ]
    };
    let a = pipeline(src.clone(), ops(), 7);
    let conv = c100(out.path(), imgfeed::source::CifarLabel::Both);
    let b = pipeline(conv, ops(), 7);
    assert_eq!(samples_f32(&a, 0), samples_f32(&b, 0));
    assert_eq!(names_labels(&a, 0), names_labels(&b, 0));
    // The CIFAR options must say what the conversion used.
    let conv = c100(out.path(), imgfeed::source::CifarLabel::Fine);
    let e = Pipeline::builder(conv).op(decode()).build().unwrap_err();
    assert!(e.to_string().contains("`label`"), "{e}");
}

#[test]
fn shuffle_and_shard_read_the_same_samples_as_on_the_original() {
    let out = tempfile::tempdir().expect("tempdir");
    convert(
        folder_source(&folder()),
        vec![decode(), resize_exact(20, 24, Filter::Bilinear)],
        store(Storage::Raw, 90),
        out.path(),
    );
    for (shards, id) in [(1, 0), (3, 1), (5, 4)] {
        let sampled = |root: &Path| {
            let mut s = folder_source(root);
            s.sampling.shuffle = true;
            s.sampling.seed = 11;
            s.sampling.num_shards = shards;
            s.sampling.shard_id = id;
            s
        };
        let ops = || vec![decode(), resize_exact(20, 24, Filter::Bilinear)];
        let a = pipeline(sampled(&folder()), ops(), 2);
        let b = pipeline(sampled(out.path()), vec![decode()], 2);
        for epoch in [0, 1] {
            let (na, la) = names_labels(&a, epoch);
            assert_eq!(na.len(), 12usize.div_ceil(shards));
            assert_eq!((na.clone(), la), names_labels(&b, epoch));
            assert_eq!(samples_u8(&a, epoch), samples_u8(&b, epoch));
        }
    }
}

#[test]
fn slices_cover_the_source_exactly() {
    for n in 0..40 {
        for k in 1..8 {
            let mut next = 0;
            for i in 0..k {
                let (a, b) = slice_range(n, i, k);
                assert_eq!(a, next, "n {n} k {k} slice {i}");
                assert!(b >= a && b - a <= n.div_ceil(k));
                next = b;
            }
            assert_eq!(next, n);
        }
    }
}

#[test]
fn split_conversion_merged_equals_a_single_conversion() {
    let single = tempfile::tempdir().expect("tempdir");
    let split = tempfile::tempdir().expect("tempdir");
    let ops = vec![decode(), resize_short(64, Filter::Bilinear)];
    convert(
        folder_source(&folder()),
        ops.clone(),
        store(Storage::Jpeg, 85),
        single.path(),
    );
    for id in [2, 0, 1] {
        let src = folder_source(&folder());
        let st = store(Storage::Jpeg, 85).slice((id, 3));
        convert(src, ops.clone(), st, split.path());
        assert!(!split.path().join("manifest.json").exists());
    }
    let merged = merge_index(split.path()).expect("merge");
    assert_eq!(merged.samples, 12);
    assert_eq!(merged.shards.len(), 3);
    let (a, b) = (
        Shards::open(single.path()).expect("single"),
        Shards::open(split.path()).expect("merged"),
    );
    assert_eq!(a.manifest().classes, b.manifest().classes);
    for i in 0..12 {
        let ((ea, ra), (eb, rb)) = (a.record(i).expect("a"), b.record(i).expect("b"));
        assert_eq!(ra, rb, "sample {i}: same stored bytes");
        assert_eq!(
            (ea.labels, ea.height, ea.width),
            (eb.labels, eb.height, eb.width)
        );
        assert_eq!(a.sample_name(i), b.sample_name(i));
    }
    let eval = |dir: &Path| samples_u8(&pipeline(folder_source(dir), eval_u8(), 4), 0);
    assert_eq!(eval(single.path()), eval(split.path()));
    // Merging again is refused; a missing slice is named.
    assert!(merge_index(split.path()).is_err());
    std::fs::remove_file(split.path().join("manifest.json")).expect("rm");
    std::fs::remove_file(split.path().join("slice-00001-of-00003.json")).expect("rm");
    let e = merge_index(split.path()).unwrap_err().to_string();
    assert!(
        e.contains("missing slice manifest(s): slice-00001-of-00003.json"),
        "{e}"
    );
}

/// Slices whose pipeline files spell the same arithmetic differently (`exact` unset or
/// `true` on a bilinear resize) merge; `exact = false` is a different conversion.
#[test]
fn slices_merge_when_their_ops_mean_the_same() {
    let with_exact = |exact: Option<bool>| {
        let mut op = resize_short(64, Filter::Bilinear);
        if let Op::Resize(r) = &mut op {
            r.exact = exact;
        }
        vec![decode(), op]
    };
    for (second, merges) in [(Some(true), true), (None, true), (Some(false), false)] {
        let split = tempfile::tempdir().expect("tempdir");
        for (id, exact) in [(0, None), (1, second)] {
            convert(
                folder_source(&folder()),
                with_exact(exact),
                store(Storage::Raw, 90).slice((id, 2)),
                split.path(),
            );
        }
        let r = merge_index(split.path());
        assert_eq!(r.is_ok(), merges, "second slice exact = {second:?}: {r:?}");
        if let Err(e) = r {
            assert!(e.to_string().contains("different settings"), "{e}");
        }
    }
}

/// A small original-storage dataset of BMPs (records are plain pixels with a header, so a
/// flipped byte is never caught by a decoder first: only the checksum finds it).
fn small_dataset() -> (tempfile::TempDir, tempfile::TempDir) {
    let a = Img::pattern(10, 8, 1);
    let b = Img::pattern(12, 6, 2);
    let c = Img::pattern(9, 9, 3);
    let tree = bmp_folder(&[("a/0.bmp", &a), ("a/1.bmp", &b), ("b/2.bmp", &c)]);
    let out = tempfile::tempdir().expect("tempdir");
    let st = store(Storage::Original, 90).shard_size("500".into());
    convert(folder_source(tree.path()), vec![], st, out.path());
    (tree, out)
}

fn read_all(dir: &Path) -> imgfeed::Result<Vec<Vec<u8>>> {
    let p = Pipeline::builder(folder_source(dir))
        .op(decode())
        .op(resize_exact(4, 4, Filter::Nearest))
        .batch(1, false)
        .workers(1)
        .build()?;
    let mut out = Vec::new();
    for b in p.epoch(0) {
        out.push(b?.images_u8().unwrap_or_default().to_vec());
    }
    Ok(out)
}

#[test]
fn a_flipped_byte_fails_the_sample_that_reads_it_naming_the_shard() {
    let (_tree, out) = small_dataset();
    let s = Shards::open(out.path()).expect("open");
    assert_eq!(s.manifest().shards.len(), 3, "one BMP per 500-byte shard");
    let e = s.entry(1).expect("entry");
    let shard = out.path().join(&s.manifest().shards[e.shard as usize].file);
    drop(s);
    let mut bytes = std::fs::read(&shard).expect("read");
    bytes[(e.offset + e.length / 2) as usize] ^= 0x40;
    std::fs::write(&shard, &bytes).expect("write");
    // Sizes are unchanged: opening succeeds, sample 0 reads, sample 1 fails.
    let s = Shards::open(out.path()).expect("open");
    assert!(s.record(0).is_ok());
    let err = s.record(1).unwrap_err().to_string();
    assert!(
        err.contains("shard-00001.bin") && err.contains("checksum mismatch"),
        "{err}"
    );
    assert!(err.starts_with("a/1.bmp: read:"), "{err}");
    let err = read_all(out.path()).unwrap_err().to_string();
    assert!(err.contains("shard-00001.bin"), "{err}");
    // The whole-file check finds it too.
    let err = s.verify().unwrap_err().to_string();
    assert!(
        err.contains("shard-00001.bin") && err.contains("corrupted"),
        "{err}"
    );
}

#[test]
fn a_truncated_shard_is_an_error_on_open() {
    let (_tree, out) = small_dataset();
    let shard = out.path().join("shard-00002.bin");
    let len = std::fs::metadata(&shard).expect("meta").len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&shard)
        .expect("open");
    f.set_len(len - 1).expect("truncate");
    let err = Shards::open(out.path()).unwrap_err().to_string();
    assert!(
        err.contains("shard-00002.bin") && err.contains("truncated"),
        "{err}"
    );
    std::fs::remove_file(&shard).expect("rm");
    let err = Shards::open(out.path()).unwrap_err().to_string();
    assert!(err.contains("shard-00002.bin"), "{err}");
}

#[test]
fn other_versions_and_bad_magic_are_clear_errors() {
    let (_tree, out) = small_dataset();
    let manifest = out.path().join("manifest.json");
    let text = std::fs::read_to_string(&manifest).expect("read");
    for (v, who) in [("2", "newer"), ("0", "older")] {
        std::fs::write(
            &manifest,
            text.replace("\"version\": 1", &format!("\"version\": {v}")),
        )
        .expect("write");
        let err = Shards::open(out.path()).unwrap_err().to_string();
        assert!(
            err.contains("manifest.json")
                && err.contains(&format!("format version {v}, written by a {who} imgfeed")),
            "{err}"
        );
    }
    std::fs::write(&manifest, &text).expect("restore");
    // A shard whose header says version 2 (its checksum in the manifest is not checked on
    // open, but its header is).
    let shard = out.path().join("shard-00000.bin");
    let orig = std::fs::read(&shard).expect("read");
    let mut b = orig.clone();
    b[8] = 2;
    std::fs::write(&shard, &b).expect("write");
    let err = Shards::open(out.path()).unwrap_err().to_string();
    assert!(
        err.contains("shard-00000.bin") && err.contains("version 2, written by a newer"),
        "{err}"
    );
    b = orig.clone();
    b[0] = b'X';
    std::fs::write(&shard, &b).expect("write");
    let err = Shards::open(out.path()).unwrap_err().to_string();
    assert!(
        err.contains("shard-00000.bin") && err.contains("bad magic"),
        "{err}"
    );
    std::fs::write(&shard, &orig).expect("restore");
    // The index is checksummed as a whole.
    let index = out.path().join("index.bin");
    let mut b = std::fs::read(&index).expect("read");
    b[40] ^= 1;
    std::fs::write(&index, &b).expect("write");
    let err = Shards::open(out.path()).unwrap_err().to_string();
    assert!(
        err.contains("index.bin") && err.contains("checksum mismatch"),
        "{err}"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
    }
}

#[test]
fn random_damage_never_panics_and_never_yields_wrong_pixels() {
    let (_tree, good) = small_dataset();
    let expected = read_all(good.path()).expect("clean read");
    let files: Vec<PathBuf> = std::fs::read_dir(good.path())
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().into())
        .collect();
    let mut g = SplitMix64::new(6);
    let mut failures = 0;
    for round in 0..150 {
        let dir = tempfile::tempdir().expect("tempdir");
        copy_dir(good.path(), dir.path());
        let victim = dir
            .path()
            .join(&files[g.below(files.len() as u64) as usize]);
        let mut b = std::fs::read(&victim).expect("read");
        match g.below(3) {
            0 if !b.is_empty() => {
                let n = g.below(b.len() as u64) as usize;
                b.truncate(n);
            }
            _ => {
                for _ in 0..1 + g.below(4) {
                    if !b.is_empty() {
                        let at = g.below(b.len() as u64) as usize;
                        b[at] ^= 1 << g.below(8);
                    }
                }
            }
        }
        std::fs::write(&victim, &b).expect("write");
        let got = std::panic::catch_unwind(|| read_all(dir.path()))
            .unwrap_or_else(|_| panic!("round {round}: panicked on damaged {victim:?}"));
        match got {
            // Damage the checks cannot see (pretty-printing whitespace in the manifest,
            // a flipped bit that JSON reads the same) must leave the data intact.
            Ok(images) => assert_eq!(images, expected, "round {round}: {victim:?}"),
            Err(_) => failures += 1,
        }
    }
    assert!(
        failures > 100,
        "only {failures} of 150 damaged copies failed"
    );
}

#[test]
fn cli_converts_runs_unchanged_pipelines_and_merges_slices() {
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().join("raw");
    let d = dir.to_str().expect("utf-8");
    let o = imgfeed(&[
        "convert",
        "pipelines/convert_raw256.toml",
        "--format",
        "shards",
        "--out",
        d,
        "--workers",
        "2",
    ]);
    let (so, se) = text(&o);
    assert_eq!(code(&o), 0, "{so}{se}");
    assert!(
        so.contains("wrote 12 samples (raw storage) in 1 shard(s)"),
        "{so}"
    );
    // The same eval pipeline, unchanged, on the tree and on the converted copy.
    let run = |data: &str| {
        let o = imgfeed(&[
            "run",
            "pipelines/resnet50_eval.toml",
            "--data",
            data,
            "--batch-size",
            "4",
        ]);
        let (so, se) = text(&o);
        assert_eq!(code(&o), 0, "{so}{se}");
        so
    };
    let r = run(d);
    assert!(
        r.starts_with(&format!("shards {d}: 12 samples, raw storage")),
        "{r}"
    );
    assert!(r.contains("3 batches, 12 samples"), "{r}");
    // Converting into a folder that holds a dataset is refused.
    let o = imgfeed(&[
        "convert",
        "pipelines/convert_raw256.toml",
        "--format",
        "shards",
        "--out",
        d,
    ]);
    assert_eq!(
        code(&o),
        2,
        "an output folder in use is the command's mistake"
    );
    assert!(text(&o).1.contains("already exists"), "{}", text(&o).1);

    // Split into two slices with the usual flags, then merge; original storage makes the
    // merged copy's eval output equal the tree's digest.
    let split = out.path().join("split");
    let s = split.to_str().expect("utf-8");
    std::fs::write(
        out.path().join("orig.toml"),
        format!(
            "[source]\nkind = \"image_folder\"\nroot = {:?}\n[store]\nmode = \"original\"\n",
            folder().to_str().expect("utf-8")
        ),
    )
    .expect("write");
    let conv = out.path().join("orig.toml");
    for id in ["0", "1"] {
        let o = imgfeed(&[
            "convert",
            conv.to_str().expect("utf-8"),
            "--format",
            "shards",
            "--out",
            s,
            "--slice",
            &format!("{id}/2"),
        ]);
        let (so, se) = text(&o);
        assert_eq!(code(&o), 0, "{so}{se}");
        assert!(so.contains("wrote 6 samples"), "{so}");
    }
    let o = imgfeed(&["merge-index", s]);
    let (so, se) = text(&o);
    assert_eq!(code(&o), 0, "{so}{se}");
    assert!(so.contains("merged 12 samples in 2 shard(s)"), "{so}");
    let digest = |r: &str| r.split("digest ").nth(1).map(|t| t[..16].to_string());
    let tree = run(folder().to_str().expect("utf-8"));
    assert_eq!(digest(&run(s)), digest(&tree));
    assert!(digest(&tree).is_some());
}

#[test]
fn bad_samples_are_skipped_and_reported_by_the_conversion() {
    let tree = bmp_folder(&[
        ("a/0.bmp", &Img::pattern(10, 8, 1)),
        ("b/1.bmp", &Img::pattern(8, 8, 2)),
    ]);
    std::fs::write(tree.path().join("a/bad.jpg"), b"\xFF\xD8\xFFnot a jpeg").expect("write");
    let out = tempfile::tempdir().expect("tempdir");
    let cfg = conversion(folder_source(tree.path()), vec![decode()], 2);
    let mut skipped = Vec::new();
    let r = convert_to_shards(
        &cfg,
        &store(Storage::Raw, 90),
        out.path(),
        |n| assert_eq!(n, 3),
        |_| {},
        |e| skipped.push(e.to_string()),
    )
    .expect("conversion");
    assert_eq!(r.skipped, 1);
    assert_eq!(skipped.len(), 1);
    assert!(
        skipped[0].starts_with("a/bad.jpg: decode:"),
        "{}",
        skipped[0]
    );
    let s = Shards::open(out.path()).expect("open");
    assert_eq!(s.len(), 2);
    assert_eq!(s.sample_name(0), "a/0.bmp");
    assert_eq!(s.sample_name(1), "b/1.bmp");
    let (e, px) = s.record(1).expect("record");
    assert_eq!((e.height, e.width, e.labels[0]), (8, 8, 1));
    assert_eq!(px, &Img::pattern(8, 8, 2).rgb[..]);
    assert_eq!(e.crc32, crc32(px));
}

#[test]
fn conversions_that_cannot_store_are_refused_before_reading() {
    let out = tempfile::tempdir().expect("tempdir");
    let cases: Vec<(Vec<Op>, Storage, &str)> = vec![
        (vec![decode()], Storage::Original, "no ops"),
        (vec![], Storage::Raw, "stores RGB u8 HWC images"),
        (
            vec![decode(), hwc_to_chw()],
            Storage::Jpeg,
            "stores RGB u8 HWC images",
        ),
    ];
    for (ops, mode, want) in cases {
        let cfg = conversion(folder_source(&folder()), ops, 1);
        let e = convert_to_shards(&cfg, &store(mode, 90), out.path(), |_| {}, |_| {}, |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{e}");
    }
    let e = convert_to_shards(
        &conversion(folder_source(&folder()), vec![decode()], 1),
        &store(Storage::Jpeg, 0),
        out.path(),
        |_| {},
        |_| {},
        |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("quality 0"), "{e}");
    assert_eq!(std::fs::read_dir(out.path()).expect("dir").count(), 0);
}

#[test]
fn the_python_reader_reads_what_was_written() {
    let python = std::process::Command::new("python3")
        .args(["-c", "import numpy"])
        .output();
    if !python.is_ok_and(|o| o.status.success()) {
        // .ci/run installs numpy: there, a skip would hide the reader under test.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs python3 with numpy for this test"
        );
        eprintln!("skipped: python3 with numpy is not available");
        return;
    }
    for (mode, ops) in [
        (
            Storage::Raw,
            vec![decode(), resize_short(40, Filter::Bilinear)],
        ),
        (Storage::Jpeg, vec![decode()]),
    ] {
        let out = tempfile::tempdir().expect("tempdir");
        convert(folder_source(&folder()), ops, store(mode, 90), out.path());
        let o = std::process::Command::new("python3")
            .arg(repo().join("examples/read_shards.py"))
            .arg(out.path())
            .output()
            .expect("run python3");
        let (so, se) = text(&o);
        assert!(o.status.success(), "{so}{se}");
        // One line per sample: name, label, then the shape (raw) or the byte count.
        let s = Shards::open(out.path()).expect("open");
        let lines: Vec<&str> = so.lines().collect();
        assert_eq!(lines.len(), s.len() + 1, "{so}");
        for (i, line) in lines.iter().skip(1).enumerate() {
            let (e, bytes) = s.record(i).expect("record");
            let want = match mode {
                Storage::Raw => format!(
                    "{} {} ({}, {}, 3) {}",
                    s.sample_name(i),
                    e.labels[0],
                    e.height,
                    e.width,
                    bytes.iter().map(|&b| b as u64).sum::<u64>()
                ),
                _ => format!("{} {} {} bytes", s.sample_name(i), e.labels[0], bytes.len()),
            };
            assert_eq!(*line, want);
        }
    }
}

#[test]
fn a_stopped_conversion_leaves_nothing_behind() {
    let out = tempfile::tempdir().expect("tempdir");
    let cfg = conversion(folder_source(&folder()), vec![decode()], 2);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut done = 0;
    let r = imgfeed::sink::convert_to_shards_until(
        &cfg,
        &store(Storage::Raw, 90),
        out.path(),
        |_| {},
        |_| {
            done += 1;
            if done == 5 {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        },
        |e| panic!("skipped: {e}"),
        &stop,
    )
    .expect("no error");
    assert!(r.is_none(), "stopped conversions return None");
    assert_eq!(done, 5);
    let left: Vec<_> = std::fs::read_dir(out.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
