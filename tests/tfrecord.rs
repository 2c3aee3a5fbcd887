//! TFRecord files read in place, written by the `tfrecord` package's `TFRecordWriter`
//! (plain, and gzip'd as TensorFlow's `GZIP` option writes them) from the fixture tree
//! (`fixtures/records/write_tree.py`, in the `formats` environment: `bash python/envs.sh
//! formats`). `imgfeed run` on them gives the image tree's digests (eval and train
//! pipelines, 2 epochs, ranks of 2, 1 and 2 workers); TensorFlow's 1-based labels read with
//! `label_offset = -1` give them too; broken files are errors naming the file, the record
//! and the reason.
//!
//! Without the environment each test says how to make it and passes, unless
//! `IMGFEED_FORMAT_TESTS=required` (as `.ci/run` sets), which turns a skip into a failure.

mod common;
#[path = "common/formats.rs"]
mod formats;

use common::{code, imgfeed, repo, text};
use formats::{digests, s, EVAL, TRAIN};
use std::path::{Path, PathBuf};
use std::process::Output;

fn ready(test: &str) -> Option<PathBuf> {
    formats::ready(test, "formats", "tfrecord")
}

/// The fixture tree as `files` TFRecord files in `out`, by the tfrecord package.
fn write(python: &Path, out: &Path, files: usize, extra: &[&str]) {
    formats::write_tree(python, "tfrecord", out, files, extra);
}

fn run(pipeline: &str, data: &str, workers: &str, rank: Option<(&str, &str)>) -> Output {
    formats::run(pipeline, data, workers, rank, None)
}

#[test]
fn tfrecord_files_plain_and_gzipped_give_the_trees_digests() {
    let Some(python) = ready("tfrecord_files_plain_and_gzipped_give_the_trees_digests") else {
        return;
    };
    let out = tempfile::tempdir().expect("tempdir");
    let (plain, gz, one) = (
        out.path().join("plain"),
        out.path().join("gz"),
        out.path().join("one"),
    );
    write(&python, &plain, 3, &[]);
    write(&python, &gz, 2, &["--gzip"]);
    write(&python, &one, 1, &[]);
    let pattern = format!("{}/train-{{00000..00002}}-of-00003.tfrecord", s(&plain));
    let single = one.join("train-00000-of-00001.tfrecord");
    let tree = repo().join("fixtures/imagefolder");
    // The cache a gzip'd file is unpacked into: this test's own.
    let cache = out.path().join("cache");
    for pipeline in [EVAL, TRAIN] {
        for workers in ["1", "2"] {
            for rank in [None, Some(("2", "0")), Some(("2", "1"))] {
                let want = digests(&run(pipeline, s(&tree), workers, rank));
                assert_eq!(want.len(), 2, "two epochs");
                for data in [s(&plain), pattern.as_str(), s(&gz), s(&single)] {
                    let got = formats::run(pipeline, data, workers, rank, Some(&cache));
                    assert!(text(&got).0.starts_with("tfrecord "), "{}", text(&got).0);
                    assert_eq!(digests(&got), want, "{pipeline} {data} {workers} {rank:?}");
                }
            }
        }
    }
    // Each file's index was kept beside it; each gzip'd file was unpacked once, into the
    // cache.
    for i in 0..3 {
        let idx = plain.join(format!("train-{i:05}-of-00003.tfrecord.imgfeed-index"));
        assert!(idx.is_file(), "{}", idx.display());
    }
    let unpacked = std::fs::read_dir(cache.join("imgfeed/unpacked"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".tfrecord.gz"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(unpacked, 2, "one unpacked copy per gzip'd file");
}

#[test]
fn tensorflows_one_based_labels_read_with_a_label_offset() {
    let Some(python) = ready("tensorflows_one_based_labels_read_with_a_label_offset") else {
        return;
    };
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().join("tf");
    write(&python, &dir, 2, &["--label-base", "1"]);
    let tree = repo().join("fixtures/imagefolder");
    let eval = std::fs::read_to_string(repo().join(EVAL)).expect("reads");
    let source = format!(
        "[source]\nkind = \"tfrecord\"\nroot = {:?}\nshuffle = false\nlabel_offset = -1\n",
        s(&dir)
    );
    let body = eval
        .split_once("[[ops]]")
        .map(|(_, ops)| format!("{source}\n[[ops]]{ops}"))
        .expect("the eval pipeline has ops");
    let pipeline = out.path().join("tf_eval.toml");
    std::fs::write(&pipeline, body).expect("writes");
    let args = |p: &str| {
        imgfeed(&[
            "run",
            p,
            "--batch-size",
            "4",
            "--workers",
            "2",
            "--epochs",
            "2",
        ])
    };
    let want = digests(&run(EVAL, s(&tree), "2", None));
    assert_eq!(digests(&args(s(&pipeline))), want);
    // Without the offset the labels are TensorFlow's, one more each: another digest.
    let got = digests(&run(EVAL, s(&dir), "2", None));
    assert_ne!(got, want);
}

#[test]
fn broken_tfrecords_are_errors_naming_the_file_and_the_record() {
    let Some(python) = ready("broken_tfrecords_are_errors_naming_the_file_and_the_record") else {
        return;
    };
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().join("tf");
    write(&python, &dir, 1, &[]);
    let whole = std::fs::read(dir.join("train-00000-of-00001.tfrecord")).expect("reads");
    let broken = out.path().join("broken");
    std::fs::create_dir_all(&broken).expect("mkdir");
    // The second record's start: past the first record's 16 bytes of framing and data.
    let first = u64::from_le_bytes(whole[..8].try_into().expect("8 bytes")) as usize + 16;
    let mut bad_crc = whole.clone();
    bad_crc[first + 12 + 40] ^= 0x10;
    let mut bad_len = whole.clone();
    bad_len[first] ^= 0x01;
    let cases: [(&str, Vec<u8>, &str); 3] = [
        ("bad_crc.tfrecord", bad_crc, "record 1 (at byte "),
        ("bad_length.tfrecord", bad_len, "record 1 (at byte "),
        (
            "truncated.tfrecord",
            whole[..whole.len() - 100].to_vec(),
            "truncated: the file ends inside the record",
        ),
    ];
    for (file, bytes, says) in cases {
        let path = broken.join(file);
        std::fs::write(&path, bytes).expect("writes");
        let o = run(EVAL, s(&path), "2", None);
        let (so, se) = text(&o);
        assert_eq!(code(&o), 2, "{file}: {so}{se}");
        assert!(se.contains(s(&path)) && se.contains(says), "{file}: {se}");
    }
    let o = run(EVAL, s(&broken.join("bad_crc.tfrecord")), "2", None);
    assert!(
        text(&o).1.contains("bad CRC of the record data"),
        "{}",
        text(&o).1
    );
    let o = run(EVAL, s(&broken.join("bad_length.tfrecord")), "2", None);
    assert!(
        text(&o).1.contains("bad CRC of the record length"),
        "{}",
        text(&o).1
    );
}
