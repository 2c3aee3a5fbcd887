//! What a user hit in the second hour (issue 34): outputs inside the dataset, empty class
//! folders, exit codes and impossible positions, what is dropped, flags named in errors,
//! verdicts that contradict themselves. Each test runs the real binary.

mod common;

use common::{code, fixtures, imgfeed, text};
use std::path::{Path, PathBuf};

/// A copy of the fixture tree (3 classes of 4 images) in a temporary folder.
fn tree_copy() -> (tempfile::TempDir, PathBuf) {
    let work = tempfile::tempdir().expect("tempdir");
    let tree = work.path().join("tree");
    for class in ["bird", "cat", "coffee"] {
        let from = fixtures().join("imagefolder").join(class);
        std::fs::create_dir_all(tree.join(class)).expect("mkdir");
        for f in std::fs::read_dir(&from).expect("read_dir") {
            let f = f.expect("entry").path();
            let name = f.file_name().expect("name");
            std::fs::copy(&f, tree.join(class).join(name)).expect("copy");
        }
    }
    (work, tree)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn an_output_inside_the_dataset_is_refused() {
    let (_work, tree) = tree_copy();
    for (format, pipeline) in [
        ("npy", "pipelines/resnet50_eval.toml"),
        ("shards", "pipelines/convert_jpeg256.toml"),
    ] {
        for out in [tree.join("aaa_out"), tree.join("cat").join("x").join("y")] {
            let o = imgfeed(&[
                "convert",
                pipeline,
                "--data",
                s(&tree),
                "--format",
                format,
                "--out",
                s(&out),
            ]);
            let (_, err) = text(&o);
            assert_eq!(code(&o), 2, "{format} {out:?}: {err}");
            assert!(err.contains("inside the dataset"), "{err}");
            assert!(!out.exists(), "{out:?} was made");
        }
    }
    // beside the dataset: written
    let out = tree.parent().expect("parent").join("out");
    let o = imgfeed(&[
        "convert",
        "pipelines/resnet50_eval.toml",
        "--data",
        s(&tree),
        "--out",
        s(&out),
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o).1);
}

#[test]
fn an_empty_class_folder_is_named_loudly_and_keeps_its_label() {
    let (_work, tree) = tree_copy();
    std::fs::create_dir(tree.join("aaa_empty")).expect("mkdir");
    for cmd in ["check", "run"] {
        let o = imgfeed(&[
            cmd,
            "pipelines/resnet50_eval.toml",
            "--data",
            s(&tree),
            "--batch-size",
            "4",
        ]);
        let (out, err) = text(&o);
        assert_eq!(code(&o), 0, "{cmd}: {err}");
        assert!(out.contains("4 classes"), "{cmd}: {out}");
        assert!(
            err.contains("warning: class folder")
                && err.contains("aaa_empty")
                && err.contains("no samples")
                && err.contains("label 0"),
            "{cmd}: {err}"
        );
    }
    let o = imgfeed(&["validate", s(&tree)]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(
        err.contains("aaa_empty") && err.contains("no samples"),
        "{err}"
    );
    // the class table lists it, with its label and no samples; the others after it
    let row = |label: u32, name: &str, n: usize| {
        out.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() >= 3 && w[0] == label.to_string() && w[1] == name && w[2] == n.to_string()
        })
    };
    assert!(row(0, "aaa_empty", 0), "{out}");
    assert!(row(1, "bird", 4) && row(3, "coffee", 4), "{out}");
    // JSON too
    let o = imgfeed(&["validate", s(&tree), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["classes"][0]["name"], "aaa_empty");
    assert_eq!(v["classes"][0]["samples"], 0);
    assert!(v["warnings"][0]
        .as_str()
        .expect("a warning")
        .contains("aaa_empty"));
    // without it: no warning
    let o = imgfeed(&["validate", s(&fixtures().join("imagefolder"))]);
    assert!(!text(&o).1.contains("warning"), "{}", text(&o).1);
}

const EVAL: &str = "pipelines/resnet50_eval.toml";

#[test]
fn a_report_that_cannot_be_written_is_an_output_error() {
    let work = tempfile::tempdir().expect("tempdir");
    let report = work.path().join("no-such-folder").join("bad.jsonl");
    let out = work.path().join("out");
    let tree = fixtures().join("imagefolder");
    let report = s(&report);
    for args in [
        vec!["run", EVAL, "--batch-size", "4", "--report", report],
        vec!["validate", s(&tree), "--report", report],
        vec!["bench", EVAL, "--batch-size", "4", "--report", report],
        vec!["convert", EVAL, "--out", s(&out), "--report", report],
    ] {
        let o = imgfeed(&args);
        let (_, err) = text(&o);
        assert_eq!(code(&o), 2, "{args:?}: {err}");
        assert!(
            err.contains("--report") && err.contains("bad.jsonl"),
            "{err}"
        );
    }
}

#[test]
fn a_contradictory_resume_position_is_refused() {
    let run = |extra: &[&str]| {
        let mut args = vec!["run", EVAL, "--batch-size", "4"];
        args.extend_from_slice(extra);
        imgfeed(&args)
    };
    // batch 2 starts at sample 8, or later after skipped samples: never at 0 or 5
    for extra in [
        &["--start-batch", "2", "--start-sample", "0"][..],
        &[
            "--start-batch",
            "2",
            "--start-sample",
            "5",
            "--on-error",
            "skip",
        ][..],
        // without skip no sample moves: 9 contradicts too
        &["--start-batch", "2", "--start-sample", "9"][..],
    ] {
        let o = run(extra);
        let (_, err) = text(&o);
        assert_eq!(code(&o), 2, "{extra:?}: {err}");
        assert!(
            err.contains("--start-sample") && err.contains("starts at sample 8"),
            "{err}"
        );
    }
    // later than 8 with skip: a position after skipped samples
    let o = run(&[
        "--start-batch",
        "2",
        "--start-sample",
        "9",
        "--on-error",
        "skip",
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o).1);
    let o = run(&["--start-batch", "2", "--start-sample", "8"]);
    assert_eq!(code(&o), 0, "{}", text(&o).1);
}

#[test]
fn a_resume_that_may_shift_the_stream_is_said() {
    // under skip the hint always names --start-sample ...
    let o = imgfeed(&[
        "run",
        EVAL,
        "--batch-size",
        "4",
        "--on-error",
        "skip",
        "--max-batches",
        "1",
    ]);
    let (out, _) = text(&o);
    assert!(
        out.contains("resume with --start-epoch 0 --start-batch 1 --start-sample 4"),
        "{out}"
    );
    // ... and a resume without it says what it assumes
    let o = imgfeed(&[
        "run",
        EVAL,
        "--batch-size",
        "4",
        "--on-error",
        "skip",
        "--start-batch",
        "1",
    ]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(
        err.contains("warning: --start-batch 1 without --start-sample"),
        "{err}"
    );
    // not where nothing is skipped
    let o = imgfeed(&["run", EVAL, "--batch-size", "4", "--start-batch", "1"]);
    assert!(!text(&o).1.contains("warning"), "{}", text(&o).1);
}

#[test]
fn impossible_counts_say_what_is_possible() {
    let o = imgfeed(&["convert", EVAL, "--out", "/tmp/x", "--slice", "0/0"]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("at least 1"), "{err}");
    assert!(!err.contains("0/0 .. 0/0"), "{err}");
    let o = imgfeed(&["run", EVAL, "--max-batches", "0"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(
        err.contains("'--max-batches <MAX_BATCHES>': must be at least 1"),
        "{err}"
    );
    assert!(!out.contains("resume"), "{out}");
    // an epoch without a batch (12 samples, batches of 32 with drop_remainder): the shape
    // of an empty batch, not [0, 0, 0, 0]
    let o = imgfeed(&["run", EVAL]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(
        out.contains("0 batches, 0 samples; images float32 [0, 3, 224, 224]"),
        "{out}"
    );
}

#[test]
fn npy_conversion_refuses_to_overwrite_as_shards_do() {
    let work = tempfile::tempdir().expect("tempdir");
    let out = work.path().join("out");
    let o = imgfeed(&["convert", EVAL, "--out", s(&out)]);
    assert_eq!(code(&o), 0, "{}", text(&o).1);
    let before = std::fs::read(out.join("images.npy")).expect("images.npy");
    let o = imgfeed(&[
        "convert",
        EVAL,
        "--out",
        s(&out),
        "--seed",
        "3",
        "--shuffle",
    ]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(
        std::fs::read(out.join("images.npy")).expect("images.npy"),
        before
    );
}

#[test]
fn what_drop_remainder_drops_is_said() {
    for cmd in ["check", "run"] {
        let o = imgfeed(&[cmd, EVAL, "--batch-size", "5"]);
        let (out, err) = text(&o);
        assert_eq!(code(&o), 0, "{err}");
        assert!(
            out.contains("drop_remainder: the last 2 of each epoch's 12 samples are dropped"),
            "{cmd}: {out}"
        );
        // nothing dropped: nothing said
        let o = imgfeed(&[cmd, EVAL, "--batch-size", "4"]);
        assert!(!text(&o).0.contains("dropped"), "{cmd}: {}", text(&o).0);
    }
}

/// The fixture tree with one truncated JPEG added to `bird`.
fn tree_with_a_bad_file() -> (tempfile::TempDir, PathBuf) {
    let (work, tree) = tree_copy();
    std::fs::copy(
        fixtures().join("bad").join("truncated.jpg"),
        tree.join("bird").join("bird_00_bad.jpg"),
    )
    .expect("copy");
    (work, tree)
}

#[test]
fn a_bad_sample_met_every_epoch_is_listed_once_and_counted() {
    let (work, tree) = tree_with_a_bad_file();
    let report = work.path().join("bad.jsonl");
    for cmd in ["run", "bench"] {
        let o = imgfeed(&[
            cmd,
            EVAL,
            "--data",
            s(&tree),
            "--batch-size",
            "4",
            "--on-error",
            "skip",
            "--epochs",
            "3",
            "--report",
            s(&report),
        ]);
        let (_, err) = text(&o);
        assert_eq!(code(&o), 1, "{cmd}: {err}");
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("skipped:")).collect();
        assert_eq!(lines.len(), 1, "{cmd}: {err}");
        assert!(lines[0].contains("bird_00_bad.jpg"), "{err}");
        assert!(lines[0].ends_with("(3 times, in 3 epochs)"), "{err}");
        // the report has every time, each with its epoch
        let epochs: Vec<u64> = std::fs::read_to_string(&report)
            .expect("report")
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
                assert!(v["path"]
                    .as_str()
                    .expect("path")
                    .ends_with("bird_00_bad.jpg"));
                v["epoch"].as_u64().expect("an epoch")
            })
            .collect();
        assert_eq!(epochs, [0, 1, 2], "{cmd}");
    }
}

#[test]
fn a_flags_error_names_the_flag() {
    for (flag, value, says) in [
        ("--batch-size", "0", "must be at least 1"),
        ("--work-unit", "0", "must be at least 1"),
        ("--num-shards", "0", "must be at least 1"),
        ("--workers", "0", "must be at least 1"),
        ("--workers", "100000", "must be between 1 and 1024"),
        ("--seed", "-1", "seeds are whole numbers from 0 to"),
    ] {
        let o = imgfeed(&["run", EVAL, flag, value]);
        let (_, err) = text(&o);
        assert_eq!(code(&o), 2, "{flag} {value}: {err}");
        assert!(err.contains(&format!("'{flag} <")), "{flag} {value}: {err}");
        assert!(err.contains(says), "{flag} {value}: {err}");
        assert!(
            !err.contains("-- -1") && !err.contains("batch.size"),
            "{err}"
        );
    }
    // a seed still seeds
    let o = imgfeed(&["run", EVAL, "--seed", "7", "--shuffle", "--batch-size", "4"]);
    assert_eq!(code(&o), 0, "{}", text(&o).1);
}

#[test]
fn validate_names_cifars_classes_from_its_names_file() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("cifar-10-batches-bin");
    std::fs::create_dir(&dir).expect("mkdir");
    for f in std::fs::read_dir(fixtures().join("cifar10")).expect("read_dir") {
        let f = f.expect("entry").path();
        std::fs::copy(&f, dir.join(f.file_name().expect("name"))).expect("copy");
    }
    let names = [
        "airplane",
        "automobile",
        "bird",
        "cat",
        "deer",
        "dog",
        "frog",
        "horse",
        "ship",
        "truck",
    ];
    std::fs::write(dir.join("batches.meta.txt"), names.join("\n") + "\n\n").expect("write");
    let o = imgfeed(&["validate", s(&dir), "--usage", "test"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    for (label, name) in names.iter().enumerate() {
        assert!(
            out.lines().any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.len() > 2 && w[0] == label.to_string() && w[1] == *name
            }),
            "{name}: {out}"
        );
    }
}

#[test]
fn a_pipeline_file_without_a_root_takes_data() {
    let work = tempfile::tempdir().expect("tempdir");
    let text_of = std::fs::read_to_string(common::repo().join(EVAL)).expect("read");
    let no_root: String = text_of
        .lines()
        .filter(|l| !l.starts_with("root ="))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!no_root.contains("root ="));
    let file = work.path().join("no_root.toml");
    std::fs::write(&file, no_root).expect("write");
    let tree = fixtures().join("imagefolder");
    for cmd in ["check", "run", "validate"] {
        let o = imgfeed(&[cmd, s(&file), "--data", s(&tree)]);
        assert_eq!(code(&o), 0, "{cmd}: {}", text(&o).1);
        assert!(text(&o).0.contains("12 samples"), "{cmd}: {}", text(&o).0);
        // without --data: the missing root is named, with both ways to give it
        let o = imgfeed(&[cmd, s(&file)]);
        let (_, err) = text(&o);
        assert_eq!(code(&o), 2, "{cmd}: {err}");
        assert!(
            err.contains("no dataset root") && err.contains("--data"),
            "{cmd}: {err}"
        );
    }
}

#[test]
fn an_epochs_own_end_state_still_resumes() {
    // 12 samples in batches of 5 kept whole: the state after the short last batch is
    // batch 3 at sample 12 (the order's end), below 3 × 5: no contradiction
    for on_error in [imgfeed::OnError::Skip, imgfeed::OnError::Error] {
        let mut cfg =
            imgfeed::PipelineConfig::from_file(common::repo().join(EVAL)).expect("pipeline");
        cfg.batch.size = 5;
        cfg.batch.drop_remainder = false;
        cfg.engine.on_error = on_error;
        let p = imgfeed::Pipeline::new(cfg).expect("pipeline");
        let mut epoch = p.epoch(0);
        let mut n = 0;
        for b in epoch.by_ref() {
            n += b.expect("batch").len();
        }
        assert_eq!(n, 12);
        let end = epoch.state();
        assert_eq!(end.batch, 3);
        let rest = p.resume(end).expect("the end state resumes");
        assert_eq!(rest.count(), 0, "{on_error:?}");
    }
}
