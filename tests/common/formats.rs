//! What the tests of containers read in place share (`tests/webdataset.rs`,
//! `tfrecord.rs`, `mindrecord.rs`, `parquet.rs`): the python of the environment whose
//! library writes the files (a skip saying how to make it, or a failure when
//! `IMGFEED_FORMAT_TESTS=required`), the fixture tree written by it, and `imgfeed run` on
//! the files with its digests. Included as `#[path = "common/formats.rs"] mod formats;`
//! beside `mod common;`.
#![allow(dead_code)]

use super::common::{code, repo, text};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const EVAL: &str = "pipelines/resnet50_eval.toml";
pub const TRAIN: &str = "pipelines/resnet50_train.toml";

/// The python of environment `env` (`python/envs.sh`) when it imports `module`, or why
/// there is none.
pub fn env_python(env: &str, module: &str) -> Result<PathBuf, String> {
    let how = format!("bash python/envs.sh {env}");
    let out = Command::new("bash")
        .arg(repo().join("python/envs.sh"))
        .args(["--path", env])
        .output()
        .map_err(|e| format!("bash: {e}"))?;
    let folder = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let python = Path::new(&folder).join("bin/python");
    let imports = out.status.success()
        && Command::new(&python)
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success());
    if imports {
        Ok(python)
    } else {
        Err(format!(
            "the {env} environment is not made (it must import {module}): {how}"
        ))
    }
}

/// [`env_python`] for `test`, or `None` (said, or a failure when the tests are required).
pub fn ready(test: &str, env: &str, module: &str) -> Option<PathBuf> {
    match env_python(env, module) {
        Ok(p) => Some(p),
        Err(why) => {
            assert!(
                std::env::var("IMGFEED_FORMAT_TESTS").as_deref() != Ok("required"),
                "{test}: IMGFEED_FORMAT_TESTS=required, but {why}"
            );
            // Straight to stderr, past the test harness's capture: a skip must be seen.
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
            None
        }
    }
}

/// The fixture tree as `files` files of `format` in `out`, by that format's own library
/// (`fixtures/records/write_tree.py FORMAT TREE OUT FILES EXTRA...`).
pub fn write_tree(python: &Path, format: &str, out: &Path, files: usize, extra: &[&str]) {
    let o = Command::new(python)
        .arg(repo().join("fixtures/records/write_tree.py"))
        .arg(format)
        .arg(repo().join("fixtures/imagefolder"))
        .arg(out)
        .arg(files.to_string())
        .args(extra)
        .output()
        .expect("runs python");
    assert!(o.status.success(), "{}", text(&o).1);
}

/// The fixture tree as `files` Parquet files by HF `datasets` in `out` ([`write_tree`]),
/// and their sizes, smallest first.
pub fn parquet_files(python: &Path, out: &Path, files: usize, extra: &[&str]) -> Vec<u64> {
    write_tree(python, "parquet", out, files, extra);
    let mut sizes: Vec<u64> = std::fs::read_dir(out)
        .expect("dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".parquet"))
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .collect();
    sizes.sort_unstable();
    assert_eq!(sizes.len(), files, "{files} Parquet files");
    sizes
}

/// The line of `validate`'s class table (its output `so`) for class `label` named `name`.
pub fn class_line<'a>(so: &'a str, label: usize, name: &str) -> Option<&'a str> {
    so.lines().find(|l| {
        l.split_whitespace()
            .take(2)
            .eq([label.to_string().as_str(), name])
    })
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

/// The digests `imgfeed run` printed, one per epoch (the run must have succeeded).
pub fn digests(o: &Output) -> Vec<String> {
    let (so, se) = text(o);
    assert_eq!(code(o), 0, "{so}{se}");
    let d: Vec<String> = so
        .lines()
        .filter_map(|l| l.split("digest ").nth(1))
        .map(|d| d.split(';').next().unwrap_or("").to_string())
        .collect();
    assert!(!d.is_empty(), "{so}");
    d
}

/// `imgfeed ARGS` in the repository, with `XDG_CACHE_HOME` set to `cache` when given
/// (where compressed files are unpacked and store files cached).
pub fn in_cache(args: &[&str], cache: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_imgfeed"));
    cmd.args(args).current_dir(repo());
    if let Some(c) = cache {
        cmd.env("XDG_CACHE_HOME", c);
    }
    cmd.output().expect("run the imgfeed binary")
}

/// `imgfeed run PIPELINE` on `data` with `workers` and `(num_shards, shard_id)`, batches
/// of 4, 2 epochs ([`in_cache`] for `cache`).
pub fn run(
    pipeline: &str,
    data: &str,
    workers: &str,
    rank: Option<(&str, &str)>,
    cache: Option<&Path>,
) -> Output {
    let mut args = vec![
        "run",
        pipeline,
        "--data",
        data,
        "--batch-size",
        "4",
        "--workers",
        workers,
        "--epochs",
        "2",
    ];
    if let Some((n, i)) = rank {
        args.extend(["--num-shards", n, "--shard-id", i]);
    }
    in_cache(&args, cache)
}
