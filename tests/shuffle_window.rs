//! The shard-aware shuffle (`shuffle_window`) on local datasets made of multi-sample files:
//! the ranks' reads really come a window of files at a time (checked from what the batches
//! hold, not from the order function), the bytes do not depend on the worker count, resume
//! is exact on the same world and on another one, and what cannot work is refused.

mod common;

use common::*;
use imgfeed::pipeline::JobState;
use imgfeed::{Pipeline, SourceConfig, SourceKind, Uneven};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Samples: 4 classes of 12, written class by class (the worst case of an ImageFolder
/// converted to shards: each shard holds one class or two).
const N: usize = 48;

/// A class-sorted ImageFolder of `N` small BMPs, converted to shards (`sh/`, 8 shards of the
/// BMPs) and to WebDataset tars (`wds/`, JPEGs).
fn datasets() -> tempfile::TempDir {
    let imgs: Vec<Img> = (0..N)
        .map(|i| Img::uniform(3, 2, [i as u8 * 5, 100, 250 - i as u8]))
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, img) in imgs.iter().enumerate() {
        img.write_bmp(&dir.path().join(format!("src/c{}/{i:02}.bmp", i / 12)));
    }
    let src = dir.path().join("src").to_str().expect("utf-8").to_string();
    // shards keep the BMPs; tars hold JPEGs (what a WebDataset reader takes)
    for (format, store, size, out, ops) in [
        ("shards", "original", "500B", "sh", ""),
        (
            "webdataset",
            "jpeg",
            "12kB",
            "wds",
            "[[ops]]\nop = \"decode\"\n",
        ),
    ] {
        let pipeline = dir.path().join(format!("{out}.toml"));
        std::fs::write(
            &pipeline,
            format!("[source]\nkind = \"image_folder\"\nroot = {src:?}\n{ops}[batch]\nsize = 4\n"),
        )
        .expect("writes the pipeline");
        let out = dir.path().join(out);
        let o = imgfeed(&[
            "convert",
            pipeline.to_str().expect("utf-8"),
            "--format",
            format,
            "--store",
            store,
            "--shard-size",
            size,
            "--out",
            out.to_str().expect("utf-8"),
        ]);
        assert_eq!(code(&o), 0, "convert {format}: {}", text(&o).1);
    }
    dir
}

struct Rank {
    kind: SourceKind,
    window: Option<usize>,
    shards: usize,
    id: usize,
    batch: usize,
    workers: usize,
}

fn rank(kind: SourceKind, window: usize, shards: usize, id: usize) -> Rank {
    Rank {
        kind,
        window: Some(window),
        shards,
        id,
        batch: 4,
        workers: 2,
    }
}

fn pipeline(root: &Path, r: &Rank) -> Pipeline {
    let mut src = SourceConfig::new(r.kind, root)
        .shuffle(true)
        .seed(11)
        .shards(r.shards, r.id)
        .uneven(Uneven::Exact);
    src.sampling.shuffle_window = r.window;
    Pipeline::builder(src)
        .op(decode())
        .op(center_crop(2, 3))
        .op(flip(0.5))
        .batch(r.batch, false)
        .workers(r.workers)
        .build()
        .expect("pipeline builds")
}

/// `(indices, images)` of every batch.
fn read(epoch: impl Iterator<Item = imgfeed::Result<imgfeed::Batch>>) -> Vec<(Vec<u64>, Vec<u8>)> {
    epoch
        .map(|b| {
            let b = b.expect("batch");
            (b.indices().to_vec(), b.images_u8().expect("u8").to_vec())
        })
        .collect()
}

/// The file each sample was read from, by its name: `FILE:KEY` for tars, and for shards
/// the shard the manifest's index gives it (the names are the original paths).
fn file_of_sample(p: &Pipeline) -> Vec<String> {
    let s = p.source();
    (0..s.len())
        .map(|i| match s.sample_name(i).split_once(':') {
            Some((file, _)) => file.to_string(),
            None => format!("shard {}", s.file_of().expect("files")[i]),
        })
        .collect()
}

/// Cut `order` where every file met so far has been read whole: the stretches a reader
/// needs together. Each is checked to hold at most `window` files.
fn stretches(order: &[u64], file: &[String]) -> Vec<BTreeSet<String>> {
    let mut left: BTreeMap<&str, usize> = BTreeMap::new();
    for f in file {
        *left.entry(f).or_default() += 1;
    }
    let (mut out, mut open, mut open_left) = (Vec::new(), BTreeSet::new(), 0usize);
    for &i in order {
        let f = file[i as usize].as_str();
        if open.insert(f.to_string()) {
            open_left += left[f];
        }
        open_left -= 1;
        if open_left == 0 {
            out.push(std::mem::take(&mut open));
        }
    }
    assert!(open.is_empty(), "the order ends inside a window");
    out
}

/// The ranks of one world, read in lockstep, interleaved back into the epoch's order
/// (rank `s`'s `j`-th sample at position `s + j·k`): the windows are the order's, and the
/// ranks read one at a time together.
#[test]
fn the_ranks_read_the_files_a_window_at_a_time() {
    let dir = datasets();
    for (kind, sub) in [(SourceKind::Shards, "sh"), (SourceKind::Webdataset, "wds")] {
        let root = dir.path().join(sub);
        for window in [1, 2, 3] {
            for k in [1, 2, 3] {
                let case = format!("{kind:?} window {window}, {k} ranks");
                let per_rank: Vec<Vec<u64>> = (0..k)
                    .map(|id| {
                        let p = pipeline(&root, &rank(kind, window, k, id));
                        read(p.epoch(2)).into_iter().flat_map(|(i, _)| i).collect()
                    })
                    .collect();
                let mut order = Vec::new();
                for j in 0..per_rank[0].len() {
                    order.extend(per_rank.iter().filter_map(|r| r.get(j)));
                }
                let mut sorted = order.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..N as u64).collect::<Vec<_>>(), "{case}");
                let p = pipeline(&root, &rank(kind, window, 1, 0));
                let file = file_of_sample(&p);
                let files: BTreeSet<&String> = file.iter().collect();
                assert!(files.len() >= 6, "{case}: {} files", files.len());
                let got = stretches(&order, &file);
                assert!(
                    got.iter().all(|w| w.len() <= window),
                    "{case}: a stretch reads more than {window} files: {got:?}"
                );
                // a window of one file: every file's samples are consecutive, and each
                // rank's too
                if window == 1 {
                    assert_eq!(got.len(), files.len(), "{case}");
                }
                // the order is the pipeline's permutation, sharded by MindSpore's rule
                assert_eq!(
                    order,
                    p.permutation(2)
                        .into_iter()
                        .map(|i| i as u64)
                        .collect::<Vec<_>>(),
                    "{case}"
                );
            }
        }
        // epochs differ; the global shuffle reads across windows
        let p = pipeline(&root, &rank(kind, 2, 1, 0));
        assert_ne!(p.permutation(0), p.permutation(1), "{kind:?}");
        let global = pipeline(
            &root,
            &Rank {
                window: None,
                ..rank(kind, 2, 1, 0)
            },
        );
        let order: Vec<u64> = global.permutation(0).iter().map(|&i| i as u64).collect();
        let got = stretches(&order, &file_of_sample(&global));
        assert!(got.iter().any(|w| w.len() > 2), "{kind:?}: {got:?}");
    }
}

#[test]
fn the_bytes_do_not_depend_on_the_worker_count() {
    let dir = datasets();
    for (kind, sub) in [(SourceKind::Shards, "sh"), (SourceKind::Webdataset, "wds")] {
        let root = dir.path().join(sub);
        for id in 0..2 {
            let one = Rank {
                workers: 1,
                ..rank(kind, 2, 2, id)
            };
            let three = Rank {
                workers: 3,
                ..rank(kind, 2, 2, id)
            };
            for epoch in [0, 1] {
                let a = read(pipeline(&root, &one).epoch(epoch));
                let b = read(pipeline(&root, &three).epoch(epoch));
                assert!(!a.is_empty());
                assert_eq!(a, b, "{kind:?} rank {id} epoch {epoch}");
            }
        }
    }
}

#[test]
fn a_mid_epoch_resume_goes_on_exactly_on_the_same_world_and_on_another() {
    let dir = datasets();
    let root = dir.path().join("sh");
    let kind = SourceKind::Shards;
    // the same world: 2 ranks stop after 3 batches and go on
    let mut whole = Vec::new();
    let mut states = Vec::new();
    for id in 0..2 {
        let p = pipeline(&root, &rank(kind, 2, 2, id));
        whole.push(read(p.epoch(1)));
        let mut e = p.epoch(1);
        let head = read(e.by_ref().take(3));
        assert_eq!(head, whole[id][..3]);
        states.push(p.job_state(e.state(), e.worlds()).to_json());
        // the engine's own state resumes too (another worker count)
        let r = Rank {
            workers: 3,
            ..rank(kind, 2, 2, id)
        };
        let again = read(pipeline(&root, &r).resume(e.state()).expect("resumes"));
        assert_eq!(again, whole[id][3..], "rank {id}: resume");
    }
    let state = JobState::from_json(&states[1]).expect("parses");
    for (id, all) in whole.iter().enumerate() {
        let p = pipeline(&root, &rank(kind, 2, 2, id));
        let rest = read(p.resume_job(&state).expect("resumes"));
        assert_eq!(rest, all[3..], "rank {id}: resume_job");
    }
    // another world: 3 ranks take over what is left; every sample read exactly once
    let mut seen = vec![0usize; N];
    for (idx, _) in whole.iter().flat_map(|r| r[..3].iter()) {
        idx.iter().for_each(|&i| seen[i as usize] += 1);
    }
    for id in 0..3 {
        let p = pipeline(&root, &rank(kind, 2, 3, id));
        for (idx, _) in read(p.resume_job(&state).expect("resumes")) {
            idx.iter().for_each(|&i| seen[i as usize] += 1);
        }
    }
    assert!(seen.iter().all(|&c| c == 1), "{seen:?}");
    // a state of another window is refused, naming it
    let p = pipeline(&root, &rank(kind, 3, 2, 0));
    let e = p
        .resume_job(&state)
        .expect_err("another window")
        .to_string();
    assert!(e.contains("shuffle_window (state: 2; here: 3)"), "{e}");
}

#[test]
fn a_window_is_refused_where_it_cannot_work() {
    let dir = datasets();
    // not made of multi-sample files: the kind is named
    let src = SourceConfig::new(SourceKind::ImageFolder, dir.path().join("src")).shuffle(true);
    let mut src = src;
    src.sampling.shuffle_window = Some(2);
    let e = Pipeline::builder(src).build().expect_err("image folder");
    let text = e.to_string();
    assert!(
        text.contains("image_folder") && text.contains("multi-sample files"),
        "{text}"
    );
    // without shuffle, or a window of 0
    let mut src = SourceConfig::new(SourceKind::Shards, dir.path().join("sh"));
    src.sampling.shuffle_window = Some(2);
    let text = Pipeline::builder(src.clone())
        .build()
        .expect_err("no shuffle")
        .to_string();
    assert!(text.contains("needs shuffle = true"), "{text}");
    src.sampling.shuffle = true;
    src.sampling.shuffle_window = Some(0);
    let text = Pipeline::builder(src).build().expect_err("0").to_string();
    assert!(text.contains("at least 1"), "{text}");
    // and on the command line, with the same words
    let o = imgfeed(&[
        "run",
        "pipelines/resnet50_train.toml",
        "--shuffle-window",
        "2",
    ]);
    assert_eq!(code(&o), 2);
    assert!(text_of(&o).contains("image_folder"), "{}", text_of(&o));
}

fn text_of(o: &std::process::Output) -> String {
    text(o).1
}
