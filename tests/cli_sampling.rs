//! The sampling flags of every command: --seed, --shuffle/--no-shuffle, --num-shards,
//! --shard-id, --uneven, shard = "env", --epochs, --start-epoch, --start-batch and
//! `run --max-batches`.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

const TRAIN: &str = "pipelines/resnet50_train.toml";
const EVAL: &str = "pipelines/resnet50_eval.toml";

fn ok(args: &[&str]) -> String {
    exits(args, 0)
}

/// stdout of a run that exits `want` (1: bad samples were skipped).
fn exits(args: &[&str], want: i32) -> String {
    let o = imgfeed(args);
    let (out, err) = text(&o);
    assert_eq!(code(&o), want, "imgfeed {args:?}: {err}");
    out
}

fn epoch_line(out: &str) -> &str {
    out.lines()
        .find(|l| l.starts_with("epoch: "))
        .unwrap_or_else(|| panic!("no epoch line in {out}"))
}

/// `convert` into a fresh folder; returns (folder, sample names, image bytes).
fn convert(args: &[&str]) -> (tempfile::TempDir, Vec<String>, Vec<u8>) {
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().to_str().expect("utf-8 path").to_string();
    let mut all = vec!["convert"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", &dir]);
    ok(&all);
    let names = std::fs::read_to_string(out.path().join("samples.txt")).expect("samples.txt");
    let names = names.lines().map(str::to_string).collect();
    let (_, bytes) = read_npy(&out.path().join("images.npy"));
    (out, names, bytes)
}

#[test]
fn shard_flags_pick_the_policy_and_check_prints_the_epoch_length() {
    // 12 samples over 5 shards: pad 3 each, drop 2 each, exact 3/3/2/2/2
    for (flags, want) in [
        (
            &["--shard-id", "4", "--uneven", "pad"][..],
            "epoch: 3 samples in 1 batches",
        ),
        (
            &["--shard-id", "4", "--uneven", "drop"][..],
            "epoch: 2 samples in 1 batches",
        ),
        (
            &["--shard-id", "4", "--uneven", "exact"][..],
            "epoch: 2 samples in 1 batches",
        ),
        (
            &["--shard-id", "1", "--uneven", "exact"][..],
            "epoch: 3 samples in 1 batches",
        ),
    ] {
        let mut args = vec!["check", EVAL, "--num-shards", "5", "--batch-size", "2"];
        args.extend_from_slice(flags);
        let out = ok(&args);
        assert!(epoch_line(&out).starts_with(want), "{flags:?}: {out}");
    }
    let o = imgfeed(&["check", EVAL, "--num-shards", "2", "--shard-id", "2"]);
    assert_eq!(code(&o), 2);
    assert!(text(&o).1.contains("shard_id 2 must be below num_shards 2"));
    let o = imgfeed(&["check", EVAL, "--uneven", "sometimes"]);
    assert_eq!(code(&o), 2);
}

#[test]
fn exact_shards_convert_every_sample_once() {
    let mut all = Vec::new();
    for id in 0..5 {
        let id = id.to_string();
        let (_d, names, _) = convert(&[
            TRAIN,
            "--num-shards",
            "5",
            "--shard-id",
            &id,
            "--uneven",
            "exact",
            "--batch-size",
            "2",
        ]);
        all.extend(names);
    }
    all.sort();
    let before = all.len();
    all.dedup();
    assert_eq!((before, all.len()), (12, 12));
}

#[test]
fn npy_slices_concatenate_to_the_whole_conversion_and_shards_stay_the_samplers() {
    // A shuffled training conversion (random ops): the slices hold the epoch's samples
    // once, in order, with the same bytes.
    let args = [TRAIN, "--batch-size", "5", "--seed", "3"];
    let (_w, names, bytes) = convert(&args);
    assert_eq!(names.len(), 12);
    let (mut cat_names, mut cat_bytes, mut slices) = (Vec::new(), Vec::new(), Vec::new());
    for id in ["0/3", "1/3", "2/3"] {
        let (d, n, b) = convert(&[&args[..], &["--slice", id]].concat());
        assert_eq!(n.len(), 4, "slice {id}");
        cat_names.extend(n);
        cat_bytes.extend(b);
        slices.push(d);
    }
    assert_eq!(cat_names, names);
    assert!(
        cat_bytes == bytes,
        "the slices' bytes differ from the whole conversion's"
    );
    // merge-npy joins the slice folders into the whole conversion's files, byte for byte
    let merged = tempfile::tempdir().expect("tempdir");
    let out = merged.path().join("whole");
    let mut merge = vec!["merge-npy", out.to_str().expect("utf-8")];
    merge.extend(slices.iter().map(|d| d.path().to_str().expect("utf-8")));
    assert!(ok(&merge).contains("merged 12 samples from 3 slice(s)"));
    for name in ["images.npy", "labels.npy", "samples.txt", "classes.json"] {
        let read = |d: &std::path::Path| std::fs::read(d.join(name)).expect(name);
        assert!(read(&out) == read(_w.path()), "{name} differs");
    }
    // slices out of one conversion only: a folder without the files is refused, exit 2
    let o = imgfeed(&["merge-npy", out.to_str().expect("utf-8"), "fixtures"]);
    assert_eq!(code(&o), 2, "{}", text(&o).1);
    // --num-shards is the sampler's: 12 samples over 5 ranks, padded to 3 each
    let (_d, n, _) = convert(&[TRAIN, "--num-shards", "5", "--shard-id", "4"]);
    assert_eq!(n.len(), 3);
    // a bad slice is a usage error naming it
    let o = imgfeed(&["convert", TRAIN, "--out", "unused", "--slice", "3/3"]);
    assert_eq!(code(&o), 2);
    assert!(text(&o).1.contains("I must be below K"), "{}", text(&o).1);
}

/// A pipeline file in a temporary folder reading the fixtures, with `shard = "env"`.
fn env_pipeline(dir: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(repo().join(EVAL)).expect("eval pipeline");
    let root = fixtures().join("imagefolder");
    let text = text.replace(
        "root = \"../fixtures/imagefolder\"",
        &format!(
            "root = {:?}\nshard = \"env\"",
            root.to_str().expect("utf-8")
        ),
    );
    let path = dir.join("sharded.toml");
    std::fs::write(&path, text).expect("write pipeline");
    path
}

fn check_with_env(pipeline: &Path, vars: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_imgfeed"));
    cmd.args([
        "check",
        pipeline.to_str().expect("utf-8"),
        "--batch-size",
        "2",
    ]);
    for v in ["RANK", "WORLD_SIZE", "RANK_ID", "RANK_SIZE"] {
        cmd.env_remove(v);
    }
    cmd.envs(vars.iter().copied());
    cmd.output().expect("run imgfeed")
}

#[test]
fn shard_env_reads_torchrun_and_mindspore_variables() {
    let d = tempfile::tempdir().expect("tempdir");
    let p = env_pipeline(d.path());
    let o = check_with_env(&p, &[("RANK", "1"), ("WORLD_SIZE", "5")]);
    let out = text(&o).0;
    assert_eq!(code(&o), 0, "{}", text(&o).1);
    assert!(epoch_line(&out).contains("shard 1 of 5"), "{out}");
    let o = check_with_env(&p, &[("RANK_ID", "3"), ("RANK_SIZE", "4")]);
    assert!(epoch_line(&text(&o).0).contains("shard 3 of 4"));
    // flags win over the environment
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_imgfeed"));
    let o = cmd
        .args([
            "check",
            p.to_str().expect("utf-8"),
            "--num-shards",
            "2",
            "--shard-id",
            "0",
        ])
        .env("RANK", "1")
        .env("WORLD_SIZE", "5")
        .output()
        .expect("run");
    assert!(epoch_line(&text(&o).0).contains("shard 0 of 2"));
    // nothing set: a usage error that says what to set
    let o = check_with_env(&p, &[]);
    assert_eq!(code(&o), 2);
    assert!(text(&o).1.contains("WORLD_SIZE/RANK"), "{}", text(&o).1);
    let o = check_with_env(&p, &[("RANK", "5"), ("WORLD_SIZE", "5")]);
    assert_eq!(code(&o), 2);
}

#[test]
fn seed_and_shuffle_flags_override_the_pipeline_file() {
    let args = |extra: &[&'static str]| {
        let mut a = vec![TRAIN, "--batch-size", "4"];
        a.extend_from_slice(extra);
        a
    };
    let (_a, seed1, _) = convert(&args(&[]));
    let (_b, seed1_again, _) = convert(&args(&["--seed", "1", "--workers", "1"]));
    let (_c, seed2, _) = convert(&args(&["--seed", "2"]));
    let (_d, plain, _) = convert(&args(&["--no-shuffle"]));
    assert_eq!(seed1, seed1_again, "the file says seed 1");
    assert_ne!(seed1, seed2);
    let mut sorted = plain.clone();
    sorted.sort();
    assert_eq!(plain, sorted, "--no-shuffle keeps the source order");
    assert_ne!(seed1, plain);
    // --shuffle turns it on for a pipeline whose file says shuffle = false
    let (_e, eval_plain, _) = convert(&[EVAL]);
    let (_f, eval_shuffled, _) = convert(&[EVAL, "--shuffle"]);
    assert_eq!(eval_plain, sorted);
    assert_ne!(eval_shuffled, sorted);
}

#[test]
fn start_batch_converts_exactly_the_rest_of_the_epoch() {
    // The training pipeline (random crops and flips), 12 samples in batches of 4.
    let (_a, names, bytes) = convert(&[TRAIN, "--batch-size", "4", "--workers", "2"]);
    let (_b, rest_names, rest) = convert(&[
        TRAIN,
        "--batch-size",
        "4",
        "--workers",
        "1",
        "--start-batch",
        "1",
    ]);
    assert_eq!(names.len(), 12);
    assert_eq!(rest_names, names[4..]);
    let per = bytes.len() / 12;
    assert_eq!(
        rest,
        bytes[4 * per..],
        "the same crops and flips from batch 1 on"
    );
    // another epoch: another order
    let (_c, other, _) = convert(&[TRAIN, "--batch-size", "4", "--start-epoch", "1"]);
    assert_ne!(other, names);
}

#[test]
fn run_stops_after_max_batches_and_says_how_to_resume() {
    let out = ok(&[
        "run",
        TRAIN,
        "--batch-size",
        "4",
        "--epochs",
        "3",
        "--max-batches",
        "4",
    ]);
    assert!(out.contains("epoch 0: 3 batches"), "{out}");
    assert!(out.contains("epoch 1: 1 batches"), "{out}");
    assert!(
        out.contains("stopped at epoch 1 batch 1: resume with --start-epoch 1 --start-batch 1"),
        "{out}"
    );
    assert!(!out.contains("epoch 2:"), "{out}");
    let out = ok(&[
        "run",
        TRAIN,
        "--batch-size",
        "4",
        "--epochs",
        "3",
        "--start-epoch",
        "1",
        "--start-batch",
        "1",
    ]);
    assert!(!out.contains("epoch 0:"), "{out}");
    assert!(out.contains("epoch 1: 2 batches, 8 samples"), "{out}");
    assert!(out.contains("epoch 2: 3 batches, 12 samples"), "{out}");
    let o = imgfeed(&["run", TRAIN, "--epochs", "2", "--start-epoch", "2"]);
    assert_eq!(code(&o), 2);
    let o = imgfeed(&["run", TRAIN, "--batch-size", "4", "--start-batch", "4"]);
    assert_eq!(code(&o), 2);
    assert!(text(&o).1.contains("3 batches"), "{}", text(&o).1);
}

#[test]
fn a_skip_mode_run_resumed_from_its_hint_reads_each_sample_once() {
    // 13 files, the second in order truncated, batches of 4: batch 0 skips it and takes the
    // fifth sample instead, so batch 1 starts at position 5, not 4.
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, class) in ["bird", "cat", "coffee"].iter().enumerate() {
        for k in 0..4 {
            let from = fixtures().join("imagefolder/bird/bird_000.jpg");
            copy_into(dir.path(), &format!("{class}/{i}{k}.jpg"), &from);
        }
    }
    copy_into(
        dir.path(),
        "bird/00_bad.jpg",
        &fixtures().join("bad/truncated.jpg"),
    );
    let data = dir.path().to_str().expect("utf-8 path");
    let base = [
        "run",
        EVAL,
        "--data",
        data,
        "--batch-size",
        "4",
        "--on-error",
        "skip",
    ];
    // A skipped sample exits 1, as in convert.
    let whole = exits(&base, 1);
    assert!(whole.contains("3 batches, 12 samples"), "{whole}");
    let first = exits(&[&base[..], &["--max-batches", "1"]].concat(), 1);
    let hint = first
        .lines()
        .find_map(|l| l.split_once("resume with ").map(|(_, f)| f.to_string()))
        .unwrap_or_else(|| panic!("no resume hint: {first}"));
    assert_eq!(
        hint,
        "--start-epoch 0 --start-batch 1 --start-sample 5 --start-position 4 --start-world 1"
    );
    let flags: Vec<&str> = hint.split_whitespace().collect();
    let rest = ok(&[&base[..], &flags[..]].concat());
    // The other 8 good samples: the 4 cats (label 1) and 4 coffees (label 2). From
    // position 4, a bird (label 0) came again and a coffee fell into the dropped remainder:
    // the same count, label sum 10.
    assert!(rest.contains("2 batches, 8 samples"), "{rest}");
    assert!(rest.contains("(sum 12)"), "{rest}");
}

#[test]
fn the_resume_hint_of_4_ranks_resumes_on_3_and_each_sample_is_read_once() {
    let base = [
        EVAL,
        "--shuffle",
        "--seed",
        "3",
        "--uneven",
        "exact",
        "--batch-size",
        "1",
    ];
    let mut read: Vec<String> = Vec::new();
    let mut hints = Vec::new();
    for r in 0..4 {
        let id = r.to_string();
        let shard = ["--num-shards", "4", "--shard-id", &id];
        let out = ok(&[&["run"], &base[..], &shard[..], &["--max-batches", "1"]].concat());
        let hint = out
            .lines()
            .find_map(|l| l.split_once("resume with ").map(|(_, f)| f.to_string()))
            .unwrap_or_else(|| panic!("no resume hint: {out}"));
        hints.push(hint);
        // the one sample this rank read: the first of its shard
        let (_d, names, _) = convert(&[&base[..], &shard[..]].concat());
        read.push(names[0].clone());
    }
    assert!(hints.iter().all(|h| h == &hints[0]), "{hints:?}");
    assert_eq!(
        hints[0],
        "--start-epoch 0 --start-batch 1 --start-position 4 --start-world 4"
    );
    let flags: Vec<&str> = hints[0].split_whitespace().collect();
    for r in 0..3 {
        let id = r.to_string();
        let shard = ["--num-shards", "3", "--shard-id", &id];
        let (_d, names, _) = convert(&[&base[..], &shard[..], &flags[..]].concat());
        assert!(names.len() == 3 || names.len() == 2, "{names:?}");
        read.extend(names);
    }
    let mut sorted = read.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 12, "{read:?}");
    assert_eq!(read.len(), 12, "{read:?}");
}
