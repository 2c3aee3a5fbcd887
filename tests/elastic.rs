//! Resuming an epoch on a different number of ranks, through the pipeline: ranks of one
//! world read `k` batches in lockstep, one rank's [`JobState`] (through JSON) resumes the
//! epoch on another world, and the samples read are what the uneven policy promises; the
//! next epoch is an ordinary epoch of the new world; a foreign state is refused.

mod common;

use common::*;
use imgfeed::pipeline::JobState;
use imgfeed::{OnError, Pipeline, SourceConfig, SourceKind, Uneven};
use std::path::Path;

const N: usize = 37;

fn folder() -> tempfile::TempDir {
    let imgs: Vec<Img> = (0..N)
        .map(|i| Img::uniform(3, 2, [i as u8 * 5, 100, 250 - i as u8]))
        .collect();
    let names: Vec<String> = (0..N)
        .map(|i| format!("{}/{i:02}.bmp", ["a", "b"][i % 2]))
        .collect();
    let files: Vec<(&str, &Img)> = names.iter().map(String::as_str).zip(imgs.iter()).collect();
    bmp_folder(&files)
}

struct Rank {
    uneven: Uneven,
    shards: usize,
    id: usize,
    batch: usize,
    workers: usize,
    seed: u64,
}

fn pipeline(root: &Path, r: &Rank) -> Pipeline {
    let src = SourceConfig::new(SourceKind::ImageFolder, root)
        .shuffle(true)
        .seed(r.seed)
        .shards(r.shards, r.id)
        .uneven(r.uneven);
    Pipeline::builder(src)
        .op(decode())
        .op(center_crop(2, 3))
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

fn rank(uneven: Uneven, shards: usize, id: usize, batch: usize) -> Rank {
    Rank {
        uneven,
        shards,
        id,
        batch,
        workers: 2,
        seed: 5,
    }
}

#[test]
fn a_checkpoint_of_w_ranks_resumes_on_other_worlds_as_the_policy_says() {
    let dir = folder();
    let root = dir.path();
    for uneven in [Uneven::Exact, Uneven::Pad, Uneven::Drop] {
        for (w, w2, b, b2, k) in [
            (4, 2, 3, 3, 2),
            (4, 3, 3, 2, 1),
            (3, 5, 2, 4, 3),
            (2, 1, 4, 4, 2),
            (4, 4, 2, 3, 2),
        ] {
            let case = format!("{uneven:?} {w}→{w2} batch {b}→{b2} after {k}");
            let mut seen = vec![0usize; N];
            let mut states = Vec::new();
            for id in 0..w {
                let p = pipeline(root, &rank(uneven, w, id, b));
                let mut e = p.epoch(0);
                for (idx, _) in read(e.by_ref().take(k)) {
                    idx.iter().for_each(|&i| seen[i as usize] += 1);
                }
                states.push(p.job_state(e.state(), e.worlds()).to_json());
            }
            // every rank's state says the same about the job but its writer
            let first = JobState::from_json(&states[0]).expect("parses");
            let last = JobState::from_json(&states[w - 1]).expect("parses");
            assert_eq!(first.position, last.position, "{case}");
            assert_eq!(first.worlds, last.worlds, "{case}");
            // any rank's state: take the last one's
            let state = last;
            let mut lens = Vec::new();
            for id in 0..w2 {
                let mut one = rank(uneven, w2, id, b2);
                let p = pipeline(root, &one);
                let got = read(p.resume_job(&state).expect("resumes"));
                // the same with another worker count, byte for byte
                one.workers = 5;
                let again = read(pipeline(root, &one).resume_job(&state).expect("resumes"));
                assert_eq!(got, again, "{case}: worker count");
                // batches are numbered on from the checkpoint's
                let n: usize = got.iter().map(|(i, _)| i.len()).sum();
                lens.push(n);
                for (idx, _) in got {
                    idx.iter().for_each(|&i| seen[i as usize] += 1);
                }
            }
            let (min, max) = (lens.iter().min().copied(), lens.iter().max().copied());
            match uneven {
                Uneven::Exact => {
                    assert!(seen.iter().all(|&c| c == 1), "{case}: {seen:?}");
                    assert!(max.unwrap_or(0) - min.unwrap_or(0) <= 1, "{case}");
                }
                Uneven::Pad => {
                    assert!(seen.iter().all(|&c| c >= 1), "{case}: {seen:?}");
                    assert_eq!(min, max, "{case}");
                }
                Uneven::Drop => {
                    assert!(seen.iter().all(|&c| c <= 1), "{case}: {seen:?}");
                    assert_eq!(min, max, "{case}");
                    // the first world's epoch leaves N mod w out, the new world at most w2 - 1 more
                    let missing = seen.iter().filter(|&&c| c == 0).count();
                    assert!(
                        missing >= N % w && missing < N % w + w2,
                        "{case}: {missing}"
                    );
                }
            }
            // the next epoch is an ordinary epoch of the new world
            for id in 0..w2 {
                let p = pipeline(root, &rank(uneven, w2, id, b2));
                let fresh = read(p.epoch(1));
                let next = JobState {
                    epoch: 1,
                    position: 0,
                    batch: 0,
                    worlds: vec![imgfeed::resume::World {
                        from: 0,
                        batch: 0,
                        num_shards: w2,
                        batch_size: b2,
                        drop_remainder: false,
                    }],
                    ..state.clone()
                };
                assert_eq!(read(p.resume_job(&next).expect("resumes")), fresh, "{case}");
            }
        }
    }
}

#[test]
fn the_same_world_resumes_each_rank_where_it_stood_byte_for_byte() {
    let dir = folder();
    let root = dir.path();
    for uneven in [Uneven::Exact, Uneven::Pad, Uneven::Drop] {
        let writer = pipeline(root, &rank(uneven, 3, 2, 4));
        let mut e = writer.epoch(3);
        let _ = read(e.by_ref().take(2));
        let state = JobState::from_json(&writer.job_state(e.state(), e.worlds()).to_json())
            .expect("parses");
        for id in 0..3 {
            let p = pipeline(root, &rank(uneven, 3, id, 4));
            let whole = read(p.epoch(3));
            let rest = read(p.resume_job(&state).expect("resumes"));
            assert_eq!(rest, whole[2..], "{uneven:?} rank {id}");
        }
    }
}

#[test]
fn a_resumed_world_resumes_again_on_a_third() {
    let dir = folder();
    let root = dir.path();
    let mut seen = vec![0usize; N];
    // 4 ranks read 1 batch of 2, then 3 ranks 2 batches of 3, then 2 ranks the rest
    let mut state = None;
    for (w, b, k) in [(4, 2, Some(1)), (3, 3, Some(2)), (2, 4, None)] {
        let mut next = None;
        for id in 0..w {
            let p = pipeline(root, &rank(Uneven::Exact, w, id, b));
            let mut e = match &state {
                None => p.epoch(0),
                Some(s) => p.resume_job(s).expect("resumes"),
            };
            let got = read(e.by_ref().take(k.unwrap_or(usize::MAX)));
            got.iter()
                .flat_map(|(i, _)| i)
                .for_each(|&i| seen[i as usize] += 1);
            next = Some(p.job_state(e.state(), e.worlds()));
        }
        state = next;
    }
    assert!(seen.iter().all(|&c| c == 1), "{seen:?}");
    let end = state.expect("state");
    assert_eq!(end.worlds.len(), 3);
    assert_eq!(end.position, N, "the last world read the epoch to its end");
}

#[test]
fn a_state_from_another_seed_dataset_or_pipeline_is_refused_saying_which() {
    let dir = folder();
    let root = dir.path();
    let p = pipeline(root, &rank(Uneven::Pad, 2, 0, 4));
    let mut e = p.epoch(0);
    let _ = read(e.by_ref().take(1));
    let state = p.job_state(e.state(), e.worlds());
    drop(e);

    let other_seed = pipeline(
        root,
        &Rank {
            seed: 6,
            ..rank(Uneven::Pad, 2, 0, 4)
        },
    );
    let err = other_seed
        .resume_job(&state)
        .expect_err("refused")
        .to_string();
    assert!(err.contains("seed (state: 5; here: 6)"), "{err}");

    let fewer = folder();
    std::fs::remove_file(fewer.path().join("a/00.bmp")).expect("remove");
    let err = pipeline(fewer.path(), &rank(Uneven::Pad, 2, 0, 4))
        .resume_job(&state)
        .expect_err("refused")
        .to_string();
    assert!(err.contains("dataset (state: 37 samples"), "{err}");
    assert!(err.contains("here: 36 samples"), "{err}");

    let src = SourceConfig::new(SourceKind::ImageFolder, root)
        .shuffle(true)
        .seed(5)
        .shards(2, 0);
    let other_ops = Pipeline::builder(src)
        .op(decode())
        .op(center_crop(1, 3))
        .batch(4, false)
        .build()
        .expect("builds");
    let err = other_ops
        .resume_job(&state)
        .expect_err("refused")
        .to_string();
    assert!(err.contains("pipeline ops"), "{err}");

    let err = pipeline(root, &rank(Uneven::Drop, 2, 0, 4))
        .resume_job(&state)
        .expect_err("refused")
        .to_string();
    assert!(
        err.contains("uneven = pad, this pipeline has drop"),
        "{err}"
    );

    // the same dataset under another root is the same dataset
    let copy = tempfile::tempdir().expect("tempdir");
    for class in ["a", "b"] {
        std::fs::create_dir(copy.path().join(class)).expect("mkdir");
        for f in std::fs::read_dir(root.join(class)).expect("ls") {
            let f = f.expect("entry").path();
            let name = f.file_name().expect("name");
            std::fs::copy(&f, copy.path().join(class).join(name)).expect("copy");
        }
    }
    let moved = pipeline(copy.path(), &rank(Uneven::Pad, 2, 0, 4));
    assert!(moved.resume_job(&state).is_ok());
}

#[test]
fn skip_mode_resumes_its_own_rank_exactly_and_another_world_repeats_at_most_the_skipped() {
    let dir = folder();
    let root = dir.path();
    for bad in ["a/90.bmp", "b/91.bmp", "a/92.bmp", "b/93.bmp"] {
        std::fs::write(root.join(bad), b"BM not a bitmap").expect("write");
    }
    let total = N + 4;
    let skip = |shards: usize, id: usize, batch: usize| {
        let src = SourceConfig::new(SourceKind::ImageFolder, root)
            .shuffle(true)
            .seed(5)
            .shards(shards, id)
            .uneven(Uneven::Exact);
        Pipeline::builder(src)
            .op(decode())
            .op(center_crop(2, 3))
            .batch(batch, false)
            .engine(imgfeed::EngineConfig::default().on_error(OnError::Skip))
            .build()
            .expect("builds")
    };
    let names = skip(1, 0, 1);
    let is_bad = |i: u64| names.source().sample_name(i as usize).contains("/9");
    let mut seen = vec![0usize; total];
    let mut skipped = 0;
    let mut states = Vec::new();
    for id in 0..3 {
        let p = skip(3, id, 2);
        let mut e = p.epoch(0);
        for b in e.by_ref().take(3) {
            let b = b.expect("batch");
            skipped += b.skipped().len();
            b.indices().iter().for_each(|&i| seen[i as usize] += 1);
        }
        let state = p.job_state(e.state(), e.worlds());
        // the writer's own rank and world: exactly where it stood, past what it skipped
        let whole: Vec<Vec<u64>> = p
            .epoch(0)
            .map(|b| b.expect("b").indices().to_vec())
            .collect();
        let rest: Vec<Vec<u64>> = p
            .resume_job(&state)
            .expect("resumes")
            .map(|b| b.expect("b").indices().to_vec())
            .collect();
        assert_eq!(rest, whole[3..], "rank {id}");
        states.push(state);
    }
    assert!(
        skipped > 0,
        "the fixture's bad files fall in the first batches"
    );
    // another world from any rank's state: every good sample at least once, and no more
    // repeats than samples skipped before the checkpoint
    for id in 0..2 {
        let p = skip(2, id, 3);
        for b in p.resume_job(&states[1]).expect("resumes") {
            b.expect("batch")
                .indices()
                .iter()
                .for_each(|&i| seen[i as usize] += 1);
        }
    }
    let good: Vec<usize> = (0..total)
        .filter(|&i| !is_bad(i as u64))
        .map(|i| seen[i])
        .collect();
    assert!(good.iter().all(|&c| c >= 1), "{seen:?}");
    let repeats: usize = good.iter().map(|&c| c - 1).sum();
    assert!(repeats <= skipped, "{repeats} repeats, {skipped} skipped");
    assert!((0..total)
        .filter(|&i| is_bad(i as u64))
        .all(|i| seen[i] == 0));
}

#[test]
fn a_rank_with_nothing_left_to_read_still_says_where_the_others_are() {
    // 4 ranks read 2 batches of 4 (32 of 37), the rest goes to 8 ranks: 5 have one sample,
    // 3 have none. The state of one with none, taken before any batch, resumes the 5 on 2.
    let dir = folder();
    let root = dir.path();
    let mut seen = vec![0usize; N];
    let mut state = None;
    for id in 0..4 {
        let p = pipeline(root, &rank(Uneven::Exact, 4, id, 4));
        let mut e = p.epoch(0);
        for (idx, _) in read(e.by_ref().take(2)) {
            idx.iter().for_each(|&i| seen[i as usize] += 1);
        }
        state = Some(p.job_state(e.state(), e.worlds()));
    }
    let state = state.expect("state");
    let idle = pipeline(root, &rank(Uneven::Exact, 8, 7, 4));
    let e = idle.resume_job(&state).expect("resumes");
    assert_eq!(e.batches(), 0);
    let from_idle = idle.job_state(e.state(), e.worlds());
    assert_eq!(from_idle.position, 32);
    for id in 0..2 {
        let p = pipeline(root, &rank(Uneven::Exact, 2, id, 4));
        for (idx, _) in read(p.resume_job(&from_idle).expect("resumes")) {
            idx.iter().for_each(|&i| seen[i as usize] += 1);
        }
    }
    assert!(seen.iter().all(|&c| c == 1), "{seen:?}");
}
