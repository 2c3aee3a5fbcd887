//! What a new user hit in the first hour (issue 25): a closed pipe, output errors' exit
//! code, the messages in the program's words, the counting in hints, and the smaller ones.
//! Each test runs the real binary.

mod common;

use common::{code, fixtures, imgfeed, text};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Run imgfeed with stdout into a pipe whose reader takes one line and closes it, as
/// `imgfeed ... | head -1` does; returns how it ended and its stderr.
fn into_closed_pipe(args: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_imgfeed"))
        .args(args)
        .current_dir(common::repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("read the first line");
    // the reader is dropped here: the pipe is closed while imgfeed still writes
    assert!(!first.is_empty(), "no first line");
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("poll") {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                std::io::Read::read_to_string(&mut e, &mut err).expect("stderr");
            }
            return (status, err);
        }
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("imgfeed {args:?} still running 120 s after its output was closed");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Ended quietly: no panic message, not Rust's panic exit code (101); a SIGPIPE death (as
/// `seq` and `cat` end) or exit 0.
fn assert_quiet(args: &[&str], status: std::process::ExitStatus, err: &str) {
    use std::os::unix::process::ExitStatusExt;
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(!err.contains("Broken pipe"), "{args:?}: {err}");
    assert!(
        status.signal() == Some(libc::SIGPIPE) || status.code() == Some(0),
        "{args:?} ended {status:?}: {err}"
    );
}

#[test]
fn a_closed_pipe_ends_every_command_quietly() {
    // run: a line per epoch, many epochs, so the write after the close is certain
    for _ in 0..10 {
        let args = [
            "run",
            "pipelines/resnet50_eval.toml",
            "--batch-size",
            "4",
            "--epochs",
            "200",
        ];
        let (status, err) = into_closed_pipe(&args);
        assert_quiet(&args, status, &err);
    }
    let tree = fixtures().join("imagefolder");
    let tree = tree.to_str().expect("utf-8");
    for _ in 0..10 {
        let args = ["validate", tree];
        let (status, err) = into_closed_pipe(&args);
        assert_quiet(&args, status, &err);
    }
    let args = ["check", "pipelines/resnet50_train.toml"];
    let (status, err) = into_closed_pipe(&args);
    assert_quiet(&args, status, &err);
}

#[test]
fn an_output_that_cannot_be_created_is_exit_2_with_one_message() {
    let work = tempfile::tempdir().expect("tempdir");
    let afile = work.path().join("afile");
    std::fs::write(&afile, b"x").expect("write");
    for (format, pipeline) in [
        ("npy", "pipelines/resnet50_eval.toml"),
        ("shards", "pipelines/convert_jpeg256.toml"),
    ] {
        let o = imgfeed(&[
            "convert",
            pipeline,
            "--format",
            format,
            "--out",
            afile.to_str().expect("utf-8"),
        ]);
        let (_, err) = text(&o);
        assert_eq!(code(&o), 2, "{format}: {err}");
        assert!(err.contains("afile"), "{err}");
        assert!(err.contains("cannot be created"), "{err}");
        assert_eq!(err.matches("error").count(), 1, "one message: {err}");
        assert!(!err.contains("caused by"), "{err}");
    }
}

#[test]
fn settings_print_in_the_pipeline_files_words() {
    let o = imgfeed(&["check", "pipelines/resnet50_eval.toml"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(out.contains("uneven pad"), "{out}");
    assert!(out.contains("on_error error"), "{out}");
    assert!(!out.contains("Pad") && !out.contains("Error"), "{out}");
    let o = imgfeed(&["run", "pipelines/cifar10_eval.toml", "--batch-size", "4"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(out.contains("(usage test"), "{out}");
    // a missing CIFAR file names the usage as written
    let empty = tempfile::tempdir().expect("tempdir");
    let o = imgfeed(&[
        "check",
        "pipelines/cifar10_eval.toml",
        "--data",
        empty.path().to_str().expect("utf-8"),
        "--usage",
        "all",
    ]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("usage all"), "{err}");
    assert!(!err.contains("All"), "{err}");
}

#[test]
fn help_has_no_rustdoc_syntax_and_only_the_exit_codes_that_apply() {
    for cmd in common::subcommands() {
        let cmd = cmd.as_str();
        let o = imgfeed(&[cmd, "--help"]);
        let (out, _) = text(&o);
        assert_eq!(code(&o), 0);
        assert!(!out.contains("[`") && !out.contains("`]"), "{cmd}: {out}");
        let bad_sample_code = out.contains("1 a bad sample");
        assert_eq!(
            bad_sample_code,
            !matches!(cmd, "check" | "merge-index" | "merge-npy"),
            "{cmd}: {out}"
        );
    }
    // --help states the default the program has
    let (out, _) = text(&imgfeed(&["run", "--help"]));
    assert!(out.contains("default false"), "{out}");
}

#[test]
fn a_flag_of_another_command_names_the_commands_that_take_it() {
    let o = imgfeed(&["run", "pipelines/resnet50_eval.toml", "--json"]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(
        err.contains("`run` does not take --json: only `bench` and `validate` do"),
        "{err}"
    );
    assert!(!err.contains("-- --json"), "{err}");
    // an argument that is not UTF-8 (a path) does not make the message panic
    use std::os::unix::ffi::OsStrExt;
    let o = Command::new(env!("CARGO_BIN_EXE_imgfeed"))
        .arg("run")
        .arg(std::ffi::OsStr::from_bytes(b"pipe\xfflines.toml"))
        .arg("--json")
        .current_dir(common::repo())
        .output()
        .expect("run");
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("only `bench` and `validate` do"), "{err}");
    // a flag no command takes keeps clap's own message
    let o = imgfeed(&["run", "pipelines/resnet50_eval.toml", "--no-such-flag"]);
    assert_eq!(code(&o), 2);
}

#[test]
fn a_bad_value_shows_its_commands_usage() {
    let o = imgfeed(&[
        "bench",
        "pipelines/resnet50_eval.toml",
        "--sweep-workers",
        "0,2",
    ]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("--sweep-workers needs"), "{err}");
    assert!(err.contains("Usage: imgfeed bench"), "{err}");
}

#[test]
fn the_resume_hint_after_a_finished_epoch_names_the_next_one() {
    // 12 samples, batches of 4: three batches an epoch; stopping after 3 finishes epoch 0
    let o = imgfeed(&[
        "run",
        "pipelines/resnet50_eval.toml",
        "--batch-size",
        "4",
        "--epochs",
        "3",
        "--max-batches",
        "3",
    ]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(
        out.contains("resume with --start-epoch 1 --start-batch 0"),
        "{out}"
    );
    assert!(!out.contains("--start-batch 3"), "{out}");
    // with skipped samples the epoch ends early: 11 good of 12 (one truncated file), batches
    // of 4 with drop_remainder: 2 batches, not the 3 announced
    let tree = tempfile::tempdir().expect("tempdir");
    for entry in walk(&fixtures().join("imagefolder")) {
        let rel = entry
            .strip_prefix(fixtures().join("imagefolder"))
            .expect("inside");
        common::copy_into(tree.path(), rel.to_str().expect("utf-8"), &entry);
    }
    common::copy_into(
        tree.path(),
        "bird/bird_004.jpg",
        &fixtures().join("bad/header_only.jpg"),
    );
    std::fs::remove_file(tree.path().join("cat/cat_003.png")).expect("rm");
    std::fs::remove_file(tree.path().join("coffee/coffee_003.png")).expect("rm");
    let o = imgfeed(&[
        "run",
        "pipelines/resnet50_eval.toml",
        "--data",
        tree.path().to_str().expect("utf-8"),
        "--batch-size",
        "4",
        "--epochs",
        "2",
        "--on-error",
        "skip",
        "--max-batches",
        "2",
    ]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 1, "{out} {err}");
    assert!(out.contains("epoch 0: 2 batches"), "{out}");
    assert!(
        out.contains("resume with --start-epoch 1 --start-batch 0"),
        "{out}"
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            files.extend(walk(&p));
        } else {
            files.push(p);
        }
    }
    files
}

#[test]
fn bench_cautions_when_the_run_is_too_short_to_measure() {
    let o = imgfeed(&["bench", "pipelines/resnet50_eval.toml", "--batch-size", "4"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(out.contains("caution      only 12 images"), "{out}");
    let o = imgfeed(&[
        "bench",
        "pipelines/resnet50_eval.toml",
        "--batch-size",
        "4",
        "--json",
    ]);
    let (out, _) = text(&o);
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    assert!(v["caution"]
        .as_str()
        .is_some_and(|c| c.contains("too little")));
    assert_eq!(v["partial"], false);
}

#[test]
fn the_sweep_plot_names_the_data() {
    let work = tempfile::tempdir().expect("tempdir");
    let svg = work.path().join("sweep.svg");
    let o = imgfeed(&[
        "bench",
        "pipelines/resnet50_eval.toml",
        "--batch-size",
        "4",
        "--sweep-workers",
        "1,2",
        "--plot",
        svg.to_str().expect("utf-8"),
    ]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    let plot = std::fs::read_to_string(&svg).expect("svg");
    assert!(plot.contains("fixtures/imagefolder"), "{plot}");
}

#[test]
fn a_misspelt_kind_is_reported_at_its_line() {
    let work = tempfile::tempdir().expect("tempdir");
    let p = work.path().join("typo.toml");
    std::fs::write(
        &p,
        "# a comment\n[source]\nroot = \"x\"\nkind = 'image_foldr'   # typo\n\n[[ops]]\nop = \"decode\"\n",
    )
    .expect("write");
    let o = imgfeed(&["check", p.to_str().expect("utf-8")]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("line 4, column 1"), "{err}");
    assert!(err.contains("image_foldr"), "{err}");
}
