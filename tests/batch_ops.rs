//! Batch ops (issue 15): `one_hot` soft labels, and MixUp / CutMix on whole batches,
//! checked against their definitions for the parameters drawn from each batch's stream.

mod common;

use common::*;
use imgfeed::batch_ops::cutmix::CutMix;
use imgfeed::batch_ops::mixup::MixUp;
use imgfeed::batch_ops::mixup_cutmix::{MixUpCutMix, Mixed};
use imgfeed::batch_ops::{BatchOp, OneHot};
use imgfeed::rng::batch_rng;
use imgfeed::{Batch, Labels, Pipeline};

const SEED: u64 = 9;
const H: usize = 12;
const W: usize = 16;

/// decode → crop → rescale → normalize → CHW, batches of 4, then `batch_ops`.
fn pipeline(batch_ops: Vec<BatchOp>, workers: usize) -> Pipeline {
    let root = fixtures().join("imagefolder");
    let mut b = Pipeline::builder(folder_source(&root).seed(SEED).shuffle(true))
        .batch(4, false)
        .workers(workers);
    for op in [
        decode(),
        center_crop(H, W),
        normalize([120.0, 110.0, 100.0], [60.0, 55.0, 50.0]),
        hwc_to_chw(),
    ] {
        b = b.op(op);
    }
    for op in batch_ops {
        b = b.batch_op(op);
    }
    b.build().unwrap_or_else(|e| panic!("builds: {e}"))
}

fn one_hot(k: usize, smoothing: f64) -> BatchOp {
    BatchOp::OneHot(OneHot::new(k).smoothing(smoothing))
}

/// `(images, labels)` of every batch of epoch `e`.
fn epoch(p: &Pipeline, e: u64) -> Vec<(Vec<f32>, Vec<f32>)> {
    batches(p, e)
        .iter()
        .map(|b: &Batch| {
            let labels = match b.labels() {
                Labels::F32(l) => l.to_vec(),
                other => panic!("float labels expected, got {other:?}"),
            };
            (b.images_f32().expect("float images").to_vec(), labels)
        })
        .collect()
}

/// torch's `rolled.mul(1 - lam).add(x.mul(lam))` on rows of `len`.
fn roll_mix(x: &[f32], len: usize, lam: f64) -> Vec<f32> {
    let n = x.len() / len;
    let (keep, take) = (lam as f32, (1.0 - lam) as f32);
    (0..n)
        .flat_map(|i| {
            let prev = (i + n - 1) % n;
            (0..len).map(move |j| x[prev * len + j] * take + x[i * len + j] * keep)
        })
        .collect()
}

#[test]
fn one_hot_writes_smoothed_rows_and_refuses_labels_beyond_num_classes() {
    let p = pipeline(vec![one_hot(5, 0.1)], 2);
    assert_eq!(p.output_spec().label_columns, 5);
    let plain = pipeline(vec![], 2);
    for (b, c) in batches(&p, 0).iter().zip(batches(&plain, 0)) {
        let Labels::F32(rows) = b.labels() else {
            panic!("float32 labels")
        };
        let Labels::U32(classes) = c.labels() else {
            panic!("u32 labels")
        };
        assert_eq!(b.label_columns(), 5);
        for (row, &class) in rows.chunks(5).zip(classes) {
            for (j, &v) in row.iter().enumerate() {
                let want = if j == class as usize { 0.92f32 } else { 0.02 };
                assert!((v - want).abs() < 1e-7, "{row:?} for class {class}");
            }
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        }
    }
    // the fixture has 3 classes: num_classes 2 fails the samples of class 2, by name
    let small = pipeline(vec![one_hot(2, 0.0)], 2);
    let err = small
        .epoch(0)
        .find_map(|b| b.err())
        .expect("a label of class 2 fails");
    assert!(
        err.to_string()
            .contains("not below one_hot's num_classes 2"),
        "{err}"
    );
}

#[test]
fn mixup_blends_each_batch_with_itself_rolled_by_the_drawn_lambda() {
    let base = epoch(&pipeline(vec![one_hot(3, 0.0)], 1), 0);
    let op = MixUp::new(0.4);
    let mixed = epoch(
        &pipeline(vec![one_hot(3, 0.0), BatchOp::Mixup(op.clone())], 1),
        0,
    );
    assert_eq!(
        mixed,
        epoch(
            &pipeline(vec![one_hot(3, 0.0), BatchOp::Mixup(op.clone())], 2),
            0
        )
    );
    let len = 3 * H * W;
    let mut lams = Vec::new();
    for (b, ((img, lab), (bimg, blab))) in mixed.iter().zip(&base).enumerate() {
        let lam = op.draw(&mut batch_rng(SEED, 0, b)).expect("prob 1");
        lams.push(lam);
        assert_eq!(img, &roll_mix(bimg, len, lam), "batch {b}");
        assert_eq!(lab, &roll_mix(blab, 3, lam), "batch {b}");
        for row in lab.chunks(3) {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6, "{row:?}");
        }
    }
    assert!(lams.iter().all(|l| (0.0..=1.0).contains(l)));
    assert!(lams.windows(2).any(|w| w[0] != w[1]), "{lams:?}");
}

#[test]
fn cutmix_pastes_the_previous_samples_box_and_mixes_labels_by_area() {
    let base = epoch(&pipeline(vec![one_hot(3, 0.1)], 1), 0);
    let op = CutMix::new(1.0);
    let mixed = epoch(
        &pipeline(vec![one_hot(3, 0.1), BatchOp::Cutmix(op.clone())], 2),
        0,
    );
    let len = 3 * H * W;
    let mut areas = std::collections::BTreeSet::new();
    for (b, ((img, lab), (bimg, blab))) in mixed.iter().zip(&base).enumerate() {
        let cut = op.draw(&mut batch_rng(SEED, 0, b), H, W).expect("prob 1");
        let r = cut.rect;
        areas.insert(r.height * r.width);
        let n = bimg.len() / len;
        let mut want = bimg.clone();
        for i in 0..n {
            let prev = (i + n - 1) % n;
            for c in 0..3 {
                for y in r.top..r.top + r.height {
                    for x in r.left..r.left + r.width {
                        let o = c * H * W + y * W + x;
                        want[i * len + o] = bimg[prev * len + o];
                    }
                }
            }
        }
        assert_eq!(img, &want, "batch {b}, box {r:?}");
        let kept = 1.0 - (r.height * r.width) as f64 / (H * W) as f64;
        assert!((cut.lam - kept).abs() < 1e-12);
        assert_eq!(lab, &roll_mix(blab, 3, cut.lam), "batch {b}");
        for row in lab.chunks(3) {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6, "{row:?}");
        }
    }
    assert!(areas.len() >= 2, "{areas:?}");
}

#[test]
fn mixup_cutmix_picks_one_per_batch_and_both_occur() {
    let base = epoch(&pipeline(vec![one_hot(3, 0.0)], 1), 0);
    let op = MixUpCutMix::new(0.2, 1.0);
    let mut kinds = (0, 0);
    for e in 0..4 {
        let base = if e == 0 {
            base.clone()
        } else {
            epoch(&pipeline(vec![one_hot(3, 0.0)], 1), e)
        };
        let p = pipeline(vec![one_hot(3, 0.0), BatchOp::MixupCutmix(op.clone())], 2);
        for (b, ((_, lab), (_, blab))) in epoch(&p, e).iter().zip(&base).enumerate() {
            match op.draw(&mut batch_rng(SEED, e, b), H, W) {
                Some(Mixed::MixUp(lam)) => {
                    kinds.0 += 1;
                    assert_eq!(lab, &roll_mix(blab, 3, lam));
                }
                Some(Mixed::CutMix(c)) => {
                    kinds.1 += 1;
                    assert_eq!(lab, &roll_mix(blab, 3, c.lam));
                }
                None => panic!("prob 1"),
            }
        }
    }
    assert!(kinds.0 > 0 && kinds.1 > 0, "{kinds:?}");
}

#[test]
fn mixing_needs_soft_labels_and_float_images() {
    let root = fixtures().join("imagefolder");
    let e = Pipeline::builder(folder_source(&root))
        .op(decode())
        .op(center_crop(8, 8))
        .op(normalize([0.0; 3], [1.0; 3]))
        .batch_op(BatchOp::Mixup(MixUp::new(1.0)))
        .build()
        .expect_err("labels are not one-hot");
    assert!(
        e.to_string().contains("batch_ops[0] (mixup)") && e.to_string().contains("one_hot"),
        "{e}"
    );
    let e = Pipeline::builder(folder_source(&root))
        .op(decode())
        .op(center_crop(8, 8))
        .batch_op(one_hot(3, 0.0))
        .batch_op(BatchOp::Cutmix(CutMix::new(1.0)))
        .build()
        .expect_err("u8 images");
    assert!(e.to_string().contains("float images"), "{e}");
    let text = format!(
        "[source]\nkind = \"image_folder\"\nroot = {root:?}\n[[ops]]\nop = \"decode\"\n\
         [[ops]]\nop = \"center_crop\"\nsize = 8\n[[ops]]\nop = \"rescale\"\nrescale = 0.5\n\
         [batch]\nsize = 2\n[[batch_ops]]\nop = \"one_hot\"\nnum_classes = 3\n\
         [[batch_ops]]\nop = \"mixup\"\nalpha = -1\n"
    );
    let cfg =
        imgfeed::PipelineConfig::parse(&text, std::path::Path::new("p.toml")).expect("parses");
    let e = Pipeline::new(cfg).expect_err("alpha -1");
    assert!(
        e.to_string()
            .contains("p.toml:19:1: batch_ops[1] (mixup): alpha: -1 must be positive"),
        "the alpha line: {e}"
    );
    // an unknown field is reported at its own line too
    let typo = text.replace("alpha = -1", "alfa = 1");
    match imgfeed::PipelineConfig::parse(&typo, std::path::Path::new("p.toml")) {
        Err(e) => assert!(
            e.to_string()
                .contains("batch_ops[1] (mixup) at line 19, column 1: unknown field `alfa`"),
            "{e}"
        ),
        Ok(_) => panic!("alfa is no field"),
    }
}

/// A resumed epoch mixes its batches as the whole epoch did: each batch draws from its own
/// number's stream, not from its place in the resumed run.
#[test]
fn a_resumed_epoch_mixes_like_the_whole_epoch() {
    let p = pipeline(
        vec![
            one_hot(3, 0.1),
            BatchOp::MixupCutmix(MixUpCutMix::new(0.4, 1.0)),
        ],
        2,
    );
    let whole = epoch(&p, 1);
    let resumed: Vec<(Vec<f32>, Vec<f32>)> = p
        .resume(imgfeed::State {
            epoch: 1,
            batch: 1,
            sample: None,
        })
        .expect("resumes")
        .map(|b| {
            let b = b.expect("batch");
            let Labels::F32(l) = b.labels() else {
                panic!("float labels")
            };
            (b.images_f32().expect("float").to_vec(), l.to_vec())
        })
        .collect();
    assert_eq!(resumed.len(), whole.len() - 1);
    assert_eq!(resumed, whole[1..]);
}

/// What cannot be mixed is refused before any pixel is read: labels that are not one-hot
/// (CIFAR-100's two float-cast label columns), a second one_hot, skipping bad samples
/// (which re-cuts batches after mixing), and batch ops in a conversion.
#[test]
fn mixing_is_refused_where_it_cannot_mean_what_it_says() {
    let c100 = format!(
        "[source]\nkind = \"cifar100\"\nroot = {:?}\nlabel = \"both\"\n\
         [[ops]]\nop = \"rescale\"\nrescale = 0.5\n[[ops]]\nop = \"type_cast\"\ndtype = \"float32\"\n\
         [batch]\nsize = 2\n[[batch_ops]]\nop = \"mixup\"\n",
        fixtures().join("cifar100")
    );
    let e = imgfeed::PipelineConfig::parse(&c100, std::path::Path::new("c.toml"))
        .and_then(Pipeline::new)
        .expect_err("class indices are no soft labels");
    assert!(
        e.to_string().contains("put a one_hot batch op before it"),
        "{e}"
    );
    let e = Pipeline::builder(folder_source(&fixtures().join("imagefolder")))
        .op(decode())
        .op(center_crop(8, 8))
        .batch_op(one_hot(3, 0.0))
        .batch_op(one_hot(3, 0.0))
        .build()
        .expect_err("twice");
    assert!(e.to_string().contains("already one-hot"), "{e}");
    let mut skip = pipeline(vec![], 1).config().clone();
    skip.engine.on_error = imgfeed::OnError::Skip;
    skip.batch_ops = vec![one_hot(3, 0.0), BatchOp::Mixup(MixUp::new(1.0))];
    let e = Pipeline::new(skip.clone()).expect_err("skip");
    assert!(e.to_string().contains("on_error = \"skip\""), "{e}");
    let out = tempfile::tempdir().expect("tempdir");
    let store = imgfeed::shards::StoreConfig::default();
    skip.engine.on_error = imgfeed::OnError::Error;
    let e = imgfeed::sink::convert_to_shards(&skip, &store, out.path(), |_| {}, |_| {}, |_| {})
        .expect_err("no batch ops in a conversion");
    assert!(e.to_string().contains("batch_ops do not apply"), "{e}");
}

/// Beta draws stay in [0, 1] and spread towards the ends for small alphas (no 0/0).
#[test]
fn beta_draws_are_sane_for_small_and_large_alphas() {
    let mut rng = imgfeed::rng::SplitMix64::new(5);
    for alpha in [1e-4, 0.01, 0.2, 1.0, 50.0] {
        let draws: Vec<f64> = (0..2000).map(|_| rng.beta(alpha, alpha)).collect();
        assert!(draws.iter().all(|x| (0.0..=1.0).contains(x)), "{alpha}");
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 0.5).abs() < 0.05, "alpha {alpha}: mean {mean}");
        let near_ends = draws.iter().filter(|x| **x < 0.01 || **x > 0.99).count();
        if alpha <= 0.01 {
            assert!(near_ends > 1800, "alpha {alpha}: {near_ends} near the ends");
        }
        if alpha >= 50.0 {
            assert!(near_ends == 0, "alpha {alpha}: {near_ends} near the ends");
        }
    }
}
