//! The streaming engine: ordering for any worker count, shuffle / shard / limit, early
//! shutdown, bad files (fail and skip), and every decode format.

mod common;

use common::*;
use imgfeed::engine::fingerprint::fingerprint;
use imgfeed::imgproc::Filter;
use imgfeed::{EngineConfig, Error, LabelType, Labels, OnError, Pipeline, SourceConfig};
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Everything observable about one epoch: per batch (image bytes, labels, indices, len).
#[derive(Debug, PartialEq)]
struct EpochOut {
    images: Vec<Vec<u8>>,
    labels: Vec<Vec<i64>>,
    indices: Vec<Vec<u64>>,
    lens: Vec<usize>,
    numbers: Vec<usize>,
}

fn observe(p: &Pipeline, epoch: u64) -> EpochOut {
    let mut o = EpochOut {
        images: vec![],
        labels: vec![],
        indices: vec![],
        lens: vec![],
        numbers: vec![],
    };
    for b in batches(p, epoch) {
        o.images.push(b.image_bytes().to_vec());
        o.labels.push(labels_i64(&b));
        o.indices.push(b.indices().to_vec());
        o.lens.push(b.len());
        o.numbers.push(b.number());
    }
    o
}

fn all_indices(o: &EpochOut) -> Vec<u64> {
    o.indices.iter().flatten().copied().collect()
}

/// decode → resize 64 (bilinear) → center_crop 56 → normalize → hwc_to_chw → label int32:
/// the canonical ResNet-50 eval pipeline at a size that keeps debug builds fast.
fn canonical_like(src: SourceConfig, batch: usize, drop: bool, engine: EngineConfig) -> Pipeline {
    Pipeline::builder(src)
        .op(decode())
        .op(resize_short(64, Filter::Bilinear))
        .op(center_crop(56, 56))
        .op(normalize(
            [123.675, 116.28, 103.53],
            [58.395, 57.12, 57.375],
        ))
        .op(hwc_to_chw())
        .op(type_cast(LabelType::I32))
        .batch(batch, drop)
        .engine(engine)
        .build()
        .expect("canonical-like pipeline builds")
}

fn imagefolder() -> SourceConfig {
    folder_source(&fixtures().join("imagefolder"))
}

const CLASS_OF: [i64; 12] = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2];

// ---- ordering ---------------------------------------------------------------------------

/// The canonical-like epoch with 1 worker, no shuffle, batch 5: computed once, shared.
fn reference() -> &'static EpochOut {
    static REF: OnceLock<EpochOut> = OnceLock::new();
    REF.get_or_init(|| observe(&canonical_like(imagefolder(), 5, false, engine(1)), 0))
}

const PER_SAMPLE: usize = 3 * 56 * 56 * 4;

/// Bytes of sample `i` of the unshuffled reference.
fn reference_sample(i: usize) -> &'static [u8] {
    &reference().images[i / 5][(i % 5) * PER_SAMPLE..(i % 5 + 1) * PER_SAMPLE]
}

#[test]
fn output_is_identical_for_any_worker_count_in_order() {
    let reference = reference();
    assert_eq!(reference.lens, vec![5, 5, 2]);
    assert_eq!(reference.numbers, vec![0, 1, 2]);
    assert_eq!(all_indices(reference), (0..12).collect::<Vec<u64>>());
    assert_eq!(reference.labels.concat(), CLASS_OF.to_vec());
    assert_eq!(reference.images[0].len(), 5 * PER_SAMPLE);
    assert_eq!(reference.images[2].len(), 2 * PER_SAMPLE);
    // samples differ from each other (the bytes really are per image)
    assert_ne!(reference_sample(0), reference_sample(1));
    for workers in [2, 3, 8] {
        let got = observe(&canonical_like(imagefolder(), 5, false, engine(workers)), 0);
        assert!(
            got == *reference,
            "{workers} workers give other bytes, labels or order than 1 worker"
        );
    }
}

#[test]
fn shuffled_output_is_identical_for_any_worker_count_and_follows_the_index() {
    let src = imagefolder().shuffle(true).seed(7);
    let shuffled = observe(&canonical_like(src.clone(), 5, false, engine(1)), 0);
    let order = all_indices(&shuffled);
    assert_ne!(
        order,
        (0..12).collect::<Vec<u64>>(),
        "shuffle=true kept the file order"
    );
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        (0..12).collect::<Vec<u64>>(),
        "shuffled order is not a permutation"
    );
    let labels = shuffled.labels.concat();
    for (pos, &i) in order.iter().enumerate() {
        assert_eq!(labels[pos], CLASS_OF[i as usize], "label of sample {i}");
        let (b, k) = (pos / 5, pos % 5);
        assert!(
            shuffled.images[b][k * PER_SAMPLE..(k + 1) * PER_SAMPLE]
                == *reference_sample(i as usize),
            "shuffled position {pos} (sample {i}) does not hold sample {i}'s image"
        );
    }
    for workers in [2, 3, 8] {
        let got = observe(&canonical_like(src.clone(), 5, false, engine(workers)), 0);
        assert!(
            got == shuffled,
            "shuffled epoch with {workers} workers differs from 1 worker"
        );
    }
}

// Structural tests on 12 tiny BMPs (fast): 3 classes of 4, each image a distinct colour.
fn tiny_folder() -> tempfile::TempDir {
    let imgs: Vec<Img> = (0..12)
        .map(|i| Img::uniform(3, 2, [i as u8 * 10 + 5, 100, 200 - i as u8]))
        .collect();
    let names: Vec<String> = (0..12)
        .map(|i| format!("{}/{i:02}.bmp", ["a", "b", "c"][i / 4]))
        .collect();
    let files: Vec<(&str, &Img)> = names.iter().map(String::as_str).zip(imgs.iter()).collect();
    bmp_folder(&files)
}

fn tiny(src: SourceConfig, batch: usize, drop: bool, workers: usize) -> Pipeline {
    Pipeline::builder(src)
        .op(decode())
        .op(center_crop(2, 3))
        .batch(batch, drop)
        .workers(workers)
        .build()
        .expect("tiny pipeline builds")
}

#[test]
fn images_follow_their_index_and_labels_their_class() {
    let dir = tiny_folder();
    let o = observe(&tiny(folder_source(dir.path()), 12, false, 3), 0);
    assert_eq!(all_indices(&o), (0..12).collect::<Vec<u64>>());
    assert_eq!(o.labels[0], CLASS_OF.to_vec());
    for i in 0..12 {
        assert_eq!(
            o.images[0][i * 18..i * 18 + 3],
            [i as u8 * 10 + 5, 100, 200 - i as u8],
            "sample {i}"
        );
    }
    // batch size, prefetch and queue depth change the cut, never the sample stream
    let src = folder_source(dir.path()).shuffle(true).seed(21);
    let stream = |batch: usize, engine: EngineConfig| {
        let p = Pipeline::builder(src.clone())
            .op(decode())
            .op(center_crop(2, 3))
            .batch(batch, false)
            .engine(engine)
            .build()
            .expect("builds");
        let o = observe(&p, 1);
        (o.images.concat(), all_indices(&o))
    };
    let base = stream(12, engine(1));
    for (batch, prefetch, queue, workers) in [
        (1, 1, 1, 2),
        (5, 1, 1, 3),
        (5, 6, 5, 3),
        (7, 3, 1, 8),
        (2, 8, 8, 4),
    ] {
        let e = engine_with(workers, prefetch, queue);
        assert!(stream(batch, e) == base, "batch {batch}, prefetch {prefetch}, queue {queue}, {workers} workers changed the stream");
    }
}

#[test]
fn drop_remainder_drops_only_the_short_last_batch() {
    let dir = tiny_folder();
    let kept = tiny(folder_source(dir.path()), 5, false, 2);
    assert_eq!(
        (kept.samples_per_epoch(), kept.batches_per_epoch()),
        (12, 3)
    );
    let o = observe(&kept, 0);
    assert_eq!(o.lens, vec![5, 5, 2]);
    assert_eq!(o.indices[2], vec![10, 11]);
    let dropped = tiny(folder_source(dir.path()), 5, true, 2);
    assert_eq!(dropped.batches_per_epoch(), 2);
    let epoch = dropped.epoch(0);
    assert_eq!(epoch.batches(), 2);
    let o = observe(&dropped, 0);
    assert_eq!(o.lens, vec![5, 5]);
    assert_eq!(all_indices(&o), (0..10).collect::<Vec<u64>>());
    // a batch larger than the dataset: one short batch, or none at all
    let big = tiny(folder_source(dir.path()), 32, false, 2);
    assert_eq!(observe(&big, 0).lens, vec![12]);
    let none = tiny(folder_source(dir.path()), 32, true, 2);
    assert_eq!(none.batches_per_epoch(), 0);
    assert_eq!(none.epoch(0).count(), 0);
}

#[test]
fn shuffle_changes_order_between_epochs_but_not_the_samples() {
    let dir = tiny_folder();
    let p = tiny(folder_source(dir.path()).shuffle(true).seed(3), 5, false, 2);
    let orders: Vec<Vec<u64>> = (0..4).map(|e| all_indices(&observe(&p, e))).collect();
    for (e, o) in orders.iter().enumerate() {
        let mut s = o.clone();
        s.sort();
        assert_eq!(
            s,
            (0..12).collect::<Vec<u64>>(),
            "epoch {e} is not a permutation"
        );
    }
    assert!(
        orders[1..].iter().all(|o| *o != orders[0]),
        "epochs 1..3 should not repeat epoch 0's order: {orders:?}"
    );
    assert_eq!(
        all_indices(&observe(&p, 2)),
        orders[2],
        "the same epoch repeats its order"
    );
    // another seed, another order
    let q = tiny(folder_source(dir.path()).shuffle(true).seed(4), 5, false, 2);
    assert_ne!(all_indices(&observe(&q, 0)), orders[0]);
}

#[test]
fn shards_are_disjoint_and_cover_the_dataset() {
    let dir = tiny_folder();
    for shuffle in [false, true] {
        let shard = |id| {
            let src = folder_source(dir.path())
                .shuffle(shuffle)
                .seed(11)
                .shards(2, id);
            let p = tiny(src, 4, false, 2);
            assert_eq!(p.samples_per_epoch(), 6);
            all_indices(&observe(&p, 1))
        };
        let (a, b) = (shard(0), shard(1));
        assert_eq!((a.len(), b.len()), (6, 6));
        if !shuffle {
            assert_eq!(a, vec![0, 2, 4, 6, 8, 10]);
            assert_eq!(b, vec![1, 3, 5, 7, 9, 11]);
        }
        assert!(
            a.iter().all(|i| !b.contains(i)),
            "shards overlap: {a:?} {b:?}"
        );
        let mut all = [a, b].concat();
        all.sort();
        assert_eq!(all, (0..12).collect::<Vec<u64>>(), "shuffle={shuffle}");
    }
    // 5 shards of 12: ceil(12 / 5) = 3 each, the last round wraps to the start
    let src = folder_source(dir.path()).shards(5, 4);
    assert_eq!(
        all_indices(&observe(&tiny(src, 4, false, 1), 0)),
        vec![4, 9, 2]
    );
}

#[test]
fn num_samples_limits_the_epoch() {
    let dir = tiny_folder();
    let p = tiny(folder_source(dir.path()).num_samples(3), 2, false, 2);
    assert_eq!((p.samples_per_epoch(), p.batches_per_epoch()), (3, 2));
    let o = observe(&p, 0);
    assert_eq!(o.lens, vec![2, 1]);
    assert_eq!(all_indices(&o), vec![0, 1, 2]);
    let src = folder_source(dir.path())
        .num_samples(3)
        .shuffle(true)
        .seed(5);
    let full = folder_source(dir.path()).shuffle(true).seed(5);
    let first3 = all_indices(&observe(&tiny(full, 12, false, 1), 0))[..3].to_vec();
    assert_eq!(
        all_indices(&observe(&tiny(src, 5, false, 2), 0)),
        first3,
        "num_samples keeps the first of the shuffled order"
    );
}

#[test]
fn random_ops_do_not_depend_on_the_worker_count() {
    let imgs: Vec<Img> = (0..16).map(|i| Img::pattern(6, 5, i as u8 + 1)).collect();
    let names: Vec<String> = (0..16).map(|i| format!("a/{i:02}.bmp")).collect();
    let files: Vec<(&str, &Img)> = names.iter().map(String::as_str).zip(imgs.iter()).collect();
    let dir = bmp_folder(&files);
    let run = |workers, epoch| {
        let p = Pipeline::builder(folder_source(dir.path()).shuffle(true).seed(9))
            .op(decode())
            .op(flip(0.5))
            .op(random_crop(4, 4, 1, 0))
            .batch(3, false)
            .workers(workers)
            .build()
            .expect("random pipeline builds");
        observe(&p, epoch)
    };
    let one = run(1, 2);
    assert!(run(2, 2) == one, "2 workers differ from 1 with random ops");
    assert!(run(5, 2) == one, "5 workers differ from 1 with random ops");
    assert!(
        run(1, 3) != one,
        "epoch 3 should draw other crops/flips than epoch 2"
    );
}

// ---- early shutdown ---------------------------------------------------------------------

#[test]
fn dropping_an_epoch_early_returns_promptly_and_the_pipeline_still_works() {
    let engine = engine_with(3, 2, 1);
    let p = canonical_like(imagefolder(), 1, false, engine);
    let mut epoch = p.epoch(0);
    let first = epoch
        .next()
        .expect("a first batch")
        .expect("first batch ok");
    assert_eq!((first.len(), first.indices()), (1, &[0u64][..]));
    let t = Instant::now();
    drop(epoch);
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "dropping the epoch took {took:?} (hang guard)"
    );
    // the batch outlives its epoch and still holds its data
    let kept = first.image_bytes().to_vec();
    assert_eq!(kept.len(), 3 * 56 * 56 * 4);
    // a fresh epoch on the same pipeline works, starts the same and yields everything
    let again = observe(&p, 0);
    assert_eq!(again.images[0], kept);
    assert_eq!(again.labels[0], vec![0]);
    assert_eq!(
        again.images[0],
        reference_sample(0),
        "batch 1 of 1-sample batches is sample 0"
    );
    assert_eq!(all_indices(&again), (0..12).collect::<Vec<u64>>());
    // dropping one that was never read is prompt too
    let t = Instant::now();
    drop(p.epoch(1));
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "dropping an unread epoch took {:?}",
        t.elapsed()
    );
}

// ---- bad files ----------------------------------------------------------------------------

const BAD: [&str; 14] = [
    "bomb.jpg",
    "bomb.png",
    "corrupt_entropy.jpg",
    "empty.jpg",
    "garbage.jpg",
    "header_only.jpg",
    "png_bad_crc.png",
    "png_cut_zlib.png",
    "png_missing_rows.png",
    "text.jpg",
    "text.png",
    "truncated.jpg",
    "truncated.png",
    "zlib_bomb.png",
];

#[test]
fn fixtures_bad_lists_exactly_the_files_under_test() {
    let mut names: Vec<String> = std::fs::read_dir(fixtures().join("bad"))
        .expect("fixtures/bad")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n != "README.md")
        .collect();
    names.sort();
    assert_eq!(names, BAD.to_vec(), "a new bad fixture needs a test");
}

#[test]
fn each_bad_file_fails_its_batch_with_file_and_stage() {
    let good: Vec<Img> = (0..3)
        .map(|i| Img::uniform(4, 4, [i * 50 + 1, 2, 3]))
        .collect();
    for bad in BAD {
        let dir = bmp_folder(&[
            ("a/0.bmp", &good[0]),
            ("a/1.bmp", &good[1]),
            ("a/2.bmp", &good[2]),
        ]);
        let rel = format!("b/{bad}");
        copy_into(dir.path(), &rel, &fixtures().join("bad").join(bad));
        let p = Pipeline::builder(folder_source(dir.path()))
            .op(decode())
            .op(center_crop(4, 4))
            .batch(2, false)
            .workers(2)
            .build()
            .expect("pipeline builds (files are only read when the epoch runs)");
        let mut epoch = p.epoch(0);
        let b0 = epoch
            .next()
            .expect("first batch")
            .unwrap_or_else(|e| panic!("{bad}: first batch (good files) failed: {e}"));
        assert_eq!(b0.indices(), &[0, 1]);
        let err = match epoch.next() {
            Some(Err(e)) => e,
            Some(Ok(b)) => panic!(
                "{bad} decoded: batch of {} samples, skipped {:?}",
                b.len(),
                b.skipped()
            ),
            None => panic!("{bad}: the epoch ended without reporting the bad file"),
        };
        let text = err.to_string();
        match &err {
            Error::Sample {
                index, file, stage, ..
            } => {
                assert_eq!(
                    (*index, file.as_str(), *stage),
                    (3, rel.as_str(), "decode"),
                    "{text}"
                );
            }
            other => panic!("{bad}: expected a sample error, got {other:?}"),
        }
        assert!(
            text.contains(&rel) && text.contains("decode"),
            "{bad}: message should name file and stage: {text}"
        );
        assert!(
            !err.is_usage(),
            "a bad file is a data error, not a usage error"
        );
        let claimed = match bad {
            "bomb.jpg" => Some("65000x65000"),
            "bomb.png" => Some("60000x60000"),
            "zlib_bomb.png" => Some("16000x16000"),
            _ => None,
        };
        if let Some(size) = claimed {
            assert!(
                text.contains("pixel limit"),
                "{bad}: expected the pixel-limit error, got: {text}"
            );
            assert!(
                text.contains(size),
                "{bad}: the error should give the claimed size: {text}"
            );
        }
        assert!(
            epoch.next().is_none(),
            "{bad}: the epoch must end after the failed batch"
        );
    }
}

#[test]
fn skip_mode_leaves_bad_files_out_and_reports_each() {
    // Good and bad files interleaved by name, so batches have holes to compact.
    let dir = tempfile::tempdir().expect("tempdir");
    let g0 = Img::uniform(8, 8, [10, 20, 30]);
    let g1 = Img::uniform(8, 8, [40, 50, 60]);
    g0.write_bmp(&dir.path().join("a/00_good.bmp"));
    g1.write_bmp(&dir.path().join("a/03_good.bmp"));
    let mut order = vec![(1, "bomb.jpg"), (2, "bomb.png")];
    order.extend([
        (4, "empty.jpg"),
        (5, "garbage.jpg"),
        (6, "header_only.jpg"),
        (7, "text.png"),
        (8, "truncated.jpg"),
        (9, "truncated.png"),
    ]);
    for (k, bad) in &order {
        copy_into(
            dir.path(),
            &format!("a/{k:02}_{bad}"),
            &fixtures().join("bad").join(bad),
        );
    }
    copy_into(
        dir.path(),
        "a/10_good.jpg",
        &fixtures().join("formats/rgb.jpg"),
    );
    let make_with = |on_error, drop_remainder| {
        Pipeline::builder(folder_source(dir.path()))
            .op(decode())
            .op(center_crop(8, 8))
            .batch(2, drop_remainder)
            .engine(EngineConfig::default().workers(2).on_error(on_error))
            .build()
            .expect("pipeline builds")
    };
    let make = |on_error| make_with(on_error, false);
    let jpeg_alone = {
        let d = tempfile::tempdir().expect("tempdir");
        copy_into(d.path(), "a/x.jpg", &fixtures().join("formats/rgb.jpg"));
        samples_u8(&build(d.path(), vec![decode(), center_crop(8, 8)], 1, 1), 0).remove(0)
    };
    let p = make(OnError::Skip);
    let mut epoch = p.epoch(0);
    let first = epoch.next().expect("a batch").expect("skip mode");
    // 00 good, 01 bad, 02 bad, 03 good: the batch of two is filled from later samples
    assert_eq!((first.len(), first.indices()), (2, &[0u64, 3][..]));
    let imgs = first.images_u8().expect("uint8");
    assert_eq!(&imgs[..192], &g0.rgb[..], "first kept sample is 00_good");
    assert_eq!(&imgs[192..384], &g1.rgb[..], "03_good moved up");
    assert_eq!(first.labels(), Labels::U32(&[0, 0]));
    assert_eq!(first.number(), 0);
    // the next batch starts at order position 4 (sample 04)
    let state = epoch.state();
    assert_eq!((state.batch, state.sample), (1, Some(4)));
    let second = epoch.next().expect("a batch").expect("skip mode");
    assert!(epoch.next().is_none());
    // 04..09 bad, then 10 good (a JPEG): the last batch holds it alone
    assert_eq!(
        (second.len(), second.indices(), second.number()),
        (1, &[10u64][..], 1)
    );
    assert_eq!(second.images_u8().expect("uint8"), &jpeg_alone[..]);
    // resuming at the state yields the same second batch, with another worker count
    let resumed: Vec<_> = make(OnError::Skip)
        .resume(state)
        .expect("resume")
        .map(|b| b.expect("skip mode"))
        .collect();
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0].indices(), second.indices());
    assert_eq!(resumed[0].skipped().len(), 6);
    // every bad file reported once, with the batch it held up, as a decode error naming it
    let all = [first, second];
    let mut reported: Vec<(usize, String)> = Vec::new();
    for (b, batch) in all.iter().enumerate() {
        for e in batch.skipped() {
            match e {
                Error::Sample {
                    file, stage, index, ..
                } => {
                    assert_eq!(*stage, "decode", "{e}");
                    assert_eq!(b, usize::from(*index >= 4), "{file} reported in batch {b}");
                    reported.push((*index, file.clone()));
                }
                other => panic!("skipped error is not a sample error: {other:?}"),
            }
        }
    }
    reported.sort();
    let expected: Vec<(usize, String)> = order
        .iter()
        .map(|(k, bad)| (*k, format!("a/{k:02}_{bad}")))
        .collect();
    assert_eq!(reported, expected);
    // with drop_remainder the short last batch goes, and its bad samples are still told
    let p = make_with(OnError::Skip, true);
    let mut epoch = p.epoch(0);
    let kept: Vec<Vec<u64>> = epoch
        .by_ref()
        .map(|b| b.expect("skip mode").indices().to_vec())
        .collect();
    assert_eq!(kept, vec![vec![0, 3]]);
    let mut tail: Vec<usize> = epoch
        .dropped_tail_errors()
        .iter()
        .filter_map(|e| match e {
            Error::Sample { index, .. } => Some(*index),
            _ => None,
        })
        .collect();
    tail.sort();
    assert_eq!(tail, vec![4, 5, 6, 7, 8, 9]);
    // fail mode on the same tree stops at the first bad file (01_bomb.jpg, in batch 0)
    let mut failing = make(OnError::Error).epoch(0);
    match failing.next() {
        Some(Err(Error::Sample { file, index: 1, .. })) => assert_eq!(file, "a/01_bomb.jpg"),
        other => panic!("expected the first bad file to fail batch 0, got {other:?}"),
    }
    assert!(failing.next().is_none());
}

// ---- formats --------------------------------------------------------------------------------

/// Decode `file` (in fixtures/formats) through a decode + no-op center_crop pipeline.
fn decode_fixture(file: &str, h: usize, w: usize) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_into(
        dir.path(),
        &format!("a/{file}"),
        &fixtures().join("formats").join(file),
    );
    let p = build(dir.path(), vec![decode(), center_crop(h, w)], 1, 1);
    let mut s = samples_u8(&p, 0);
    assert_eq!(s.len(), 1);
    s.remove(0)
}

fn expected_png(stem: &str) -> (usize, usize, Vec<u8>) {
    let path = fixtures()
        .join("formats/expected")
        .join(format!("{stem}.png"));
    let img = image::open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .to_rgb8();
    let (w, h) = img.dimensions();
    (h as usize, w as usize, img.into_raw())
}

#[test]
fn every_format_decodes_to_its_expected_rgb() {
    // (file, max allowed abs diff, max allowed mean abs diff)
    let cases: [(&str, u8, f64); 11] = [
        ("palette.png", 0, 0.0),
        ("rgba.png", 0, 0.0),
        ("la.png", 0, 0.0),
        ("gray16.png", 0, 0.0),
        ("rgb16.png", 1, 0.05), // round(v / 257); a high-byte (v >> 8) decode averages ~0.5 off
        ("image.bmp", 0, 0.0),
        ("lossless.webp", 0, 0.0),
        ("rgb.jpg", 12, 1.0),
        ("progressive.jpg", 12, 1.0),
        ("gray.jpg", 12, 1.0),
        ("cmyk.jpg", 12, 1.0),
    ];
    let mut listed: Vec<String> = std::fs::read_dir(fixtures().join("formats"))
        .expect("fixtures/formats")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n != "README.md" && n != "expected")
        .collect();
    listed.sort();
    let mut tested: Vec<String> = cases.iter().map(|c| c.0.to_string()).collect();
    tested.sort();
    assert_eq!(listed, tested, "every file in fixtures/formats is tested");
    let mut failures = Vec::new();
    for (file, max_ok, mean_ok) in cases {
        let stem = Path::new(file)
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("stem");
        let (h, w, want) = expected_png(stem);
        assert_eq!(
            (h, w),
            if file == "image.bmp" {
                (31, 47)
            } else {
                (32, 48)
            },
            "{file}: expected size"
        );
        let got = decode_fixture(file, h, w);
        let (max, mean) = diff_u8(&got, &want);
        if max > max_ok || mean > mean_ok {
            failures.push(format!(
                "{file}: max {max} (allowed {max_ok}), mean {mean:.3} (allowed {mean_ok})"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "decoded pixels differ from fixtures/formats/expected: {failures:#?}"
    );
}

#[test]
fn rgba_and_la_drop_alpha_without_compositing() {
    // rgba.png: the top 4 rows have alpha 0; compositing on black or white would change
    // them. The expected RGB keeps the colour channels, so a decode that composites fails.
    let got = decode_fixture("rgba.png", 32, 48);
    let (_, _, want) = expected_png("rgba");
    assert_eq!(&got[..4 * 48 * 3], &want[..4 * 48 * 3]);
    assert!(
        got[..4 * 48 * 3].iter().any(|&v| v != 0 && v != 255),
        "top rows keep their colours"
    );
}

/// A decoder that failed on a broken file must decode the next good one (a libjpeg-turbo
/// handle that failed mid-image misreads the next header unless it is reset).
#[test]
fn a_bad_file_does_not_poison_the_next_decode() {
    for bad in [
        "header_only.jpg",
        "truncated.jpg",
        "bomb.jpg",
        "garbage.jpg",
    ] {
        let d = tempfile::tempdir().expect("tempdir");
        copy_into(
            d.path(),
            &format!("a/00_{bad}"),
            &fixtures().join("bad").join(bad),
        );
        copy_into(
            d.path(),
            "a/01_good.jpg",
            &fixtures().join("formats/rgb.jpg"),
        );
        let p = Pipeline::builder(folder_source(d.path()))
            .op(decode())
            .op(center_crop(8, 8))
            .batch(1, false)
            .engine(EngineConfig::default().workers(1).on_error(OnError::Skip))
            .build()
            .expect("pipeline builds");
        let got: Vec<(Vec<u64>, usize)> = p
            .epoch(0)
            .map(|b| b.expect("skip mode"))
            .map(|b| (b.indices().to_vec(), b.skipped().len()))
            .collect();
        assert_eq!(got, vec![(vec![1], 1)], "{bad}, then a good JPEG");
    }
}

#[test]
fn fingerprints_follow_their_samples_through_skip_repacking() {
    // Good and bad files interleaved, so skip mode moves samples between batches.
    let dir = tempfile::tempdir().expect("tempdir");
    for (k, v) in [(0u8, 10u8), (3, 40), (4, 70), (7, 100), (8, 130)] {
        Img::uniform(8, 8, [v, v + 1, v + 2]).write_bmp(&dir.path().join(format!("a/{k:02}.bmp")));
    }
    for (k, bad) in [
        (1, "garbage.jpg"),
        (2, "truncated.png"),
        (5, "empty.jpg"),
        (6, "text.png"),
    ] {
        copy_into(
            dir.path(),
            &format!("a/{k:02}_{bad}"),
            &fixtures().join("bad").join(bad),
        );
    }
    let make = |fingerprint| {
        Pipeline::builder(folder_source(dir.path()))
            .op(decode())
            .op(center_crop(8, 8))
            .batch(2, false)
            .engine(
                EngineConfig::default()
                    .workers(2)
                    .on_error(OnError::Skip)
                    .fingerprint(fingerprint),
            )
            .build()
            .expect("pipeline builds")
    };
    let p = make(true);
    let mut seen = Vec::new();
    for b in p.epoch(0) {
        let b = b.expect("skip mode");
        let fps = b.fingerprints().expect("fingerprints on");
        assert_eq!(fps.len(), b.len());
        let imgs = b.images_u8().expect("uint8");
        for (k, &fp) in fps.iter().enumerate() {
            assert_eq!(fp, fingerprint(&imgs[k * 192..(k + 1) * 192]), "sample {k}");
        }
        seen.extend_from_slice(b.indices());
    }
    assert_eq!(seen, [0, 3, 4, 7, 8], "every good sample, in order");
    let off = make(false);
    let b = off.epoch(0).next().expect("a batch").expect("ok");
    assert_eq!(b.fingerprints(), None);
}

// ---- waiting with a timeout --------------------------------------------------------------

/// Every batch of epoch 0 through `next_timeout`, counting the waits that timed out.
fn polled(p: &Pipeline, timeout: Duration) -> (Vec<Vec<u8>>, Vec<Vec<u64>>, usize) {
    let (mut images, mut indices, mut timeouts) = (vec![], vec![], 0);
    let mut epoch = p.epoch(0);
    loop {
        match epoch.next_timeout(timeout) {
            Err(imgfeed::TimedOut) => timeouts += 1,
            Ok(None) => break,
            Ok(Some(b)) => {
                let b = b.expect("batch");
                images.push(b.image_bytes().to_vec());
                indices.push(b.indices().to_vec());
            }
        }
    }
    (images, indices, timeouts)
}

#[test]
fn next_timeout_yields_what_next_yields_and_times_out_while_waiting() {
    // Big enough that a 1 µs wait cannot find a batch ready.
    let big = Img::from_fn(900, 700, |x, y| {
        [(x % 251) as u8, (y % 241) as u8, ((x + y) % 239) as u8]
    });
    let files: Vec<(String, Img)> = (0..6)
        .map(|i| (format!("c/{i}.bmp"), big.clone()))
        .collect();
    let refs: Vec<(&str, &Img)> = files.iter().map(|(n, i)| (n.as_str(), i)).collect();
    let dir = bmp_folder(&refs);
    let p = canonical_like(folder_source(dir.path()), 2, false, engine(1));
    let want = observe(&p, 0);
    let (images, indices, timeouts) = polled(&p, Duration::from_micros(1));
    assert_eq!(images, want.images);
    assert_eq!(indices, want.indices);
    assert!(
        timeouts > 0,
        "a 1 µs wait on a 900×700 decode should time out"
    );
}

#[test]
fn next_timeout_keeps_a_half_filled_batch_in_skip_mode() {
    // Skip mode refills a batch that lost a sample from the next engine batch: a wait that
    // times out in between must keep what it holds.
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, name) in ["a/0.jpg", "a/1.jpg", "a/2.jpg", "a/3.jpg", "a/4.jpg"]
        .iter()
        .enumerate()
    {
        let from = fixtures()
            .join("imagefolder/bird")
            .join(format!("bird_00{}.jpg", i % 3));
        copy_into(dir.path(), name, &from);
    }
    copy_into(
        dir.path(),
        "a/1b.jpg",
        &fixtures().join("bad/truncated.jpg"),
    );
    let p = canonical_like(folder_source(dir.path()), 2, false, skipping(1));
    let want = observe(&p, 0);
    assert_eq!(want.lens, vec![2, 2, 1]);
    let (images, indices, _) = polled(&p, Duration::from_micros(1));
    assert_eq!(images, want.images);
    assert_eq!(indices, want.indices);
}

#[test]
fn skip_mode_never_yields_an_empty_last_batch() {
    // 5 good files then a bad one, batches of 5 without drop_remainder: the bad file would
    // be alone in a last batch; skipped, no batch is left, and its error is reported as a
    // dropped tail's.
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..5 {
        let from = fixtures()
            .join("imagefolder/bird")
            .join(format!("bird_00{}.jpg", i % 3));
        copy_into(dir.path(), &format!("a/{i}.jpg"), &from);
    }
    copy_into(
        dir.path(),
        "a/9_bad.jpg",
        &fixtures().join("bad/truncated.jpg"),
    );
    for workers in [1, 2] {
        let p = canonical_like(folder_source(dir.path()), 5, false, skipping(workers));
        let mut epoch = p.epoch(0);
        let lens: Vec<usize> = epoch.by_ref().map(|b| b.expect("batch").len()).collect();
        assert_eq!(lens, vec![5], "{workers} workers");
        let tail = epoch.dropped_tail_errors();
        assert_eq!(tail.len(), 1, "{tail:?}");
        assert!(tail[0].to_string().contains("9_bad.jpg"), "{}", tail[0]);
    }
}
