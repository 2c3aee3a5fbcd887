//! MindSpore's MindRecord read in place, and written for MindSpore: groups written by
//! MindSpore's own `FileWriter` (`shard_num = 2`) from the fixture tree
//! (`fixtures/records/write_tree.py`, in the `mindspore` environment: `bash python/envs.sh
//! mindspore`) give the image tree's digests with `imgfeed run` (eval and train pipelines,
//! 2 epochs, ranks of 2, 1 and 2 workers), read from either file of the group, the folder
//! or a list of both; `imgfeed convert --format mindrecord`'s group is read by MindSpore's
//! `MindDataset` with the bytes and labels imgfeed reads; files whose header lies are
//! errors naming the file and the reason.
//!
//! Without the environment each test says how to make it and passes, unless
//! `IMGFEED_FORMAT_TESTS=required` (as `.ci/run` sets), which turns a skip into a failure.

mod common;
#[path = "common/formats.rs"]
mod formats;

use common::{code, imgfeed, repo, text};
use formats::{digests, s, EVAL, TRAIN};
use imgfeed::formats::mindrecord::{group, index, read_header, MindRecordOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ready(test: &str) -> Option<PathBuf> {
    formats::ready(test, "mindspore", "mindspore.mindrecord")
}

/// The fixture tree as a MindRecord group of `shards` files `out/tree.mindrecordN`,
/// written by MindSpore's FileWriter.
fn write(python: &Path, out: &Path, shards: usize) {
    let o = Command::new(python)
        .arg(repo().join("fixtures/records/write_tree.py"))
        .arg("mindrecord")
        .arg(repo().join("fixtures/imagefolder"))
        .arg(out.join("tree.mindrecord"))
        .arg(shards.to_string())
        .output()
        .expect("runs python");
    assert!(o.status.success(), "{}", text(&o).1);
}

fn run(pipeline: &str, data: &str, workers: &str, rank: Option<(&str, &str)>) -> Output {
    formats::run(pipeline, data, workers, rank, None)
}

#[test]
fn mindspores_group_gives_the_trees_digests_from_any_of_its_names() {
    let Some(python) = ready("mindspores_group_gives_the_trees_digests_from_any_of_its_names")
    else {
        return;
    };
    let out = tempfile::tempdir().expect("tempdir");
    write(&python, out.path(), 2);
    let (f0, f1) = (
        out.path().join("tree.mindrecord0"),
        out.path().join("tree.mindrecord1"),
    );
    // Both files hold samples: the group is really split.
    for f in [&f0, &f1] {
        let b = std::fs::read(f).expect("reads");
        assert!(!index(&b, &MindRecordOptions::default())
            .expect("indexes")
            .is_empty());
    }
    let list = format!("{}::{}", s(&f0), s(&f1));
    let tree = repo().join("fixtures/imagefolder");
    for pipeline in [EVAL, TRAIN] {
        for workers in ["1", "2"] {
            for rank in [None, Some(("2", "0")), Some(("2", "1"))] {
                let want = digests(&run(pipeline, s(&tree), workers, rank));
                assert_eq!(want.len(), 2, "two epochs");
                for data in [s(&f0), s(&f1), s(out.path()), list.as_str()] {
                    let got = run(pipeline, data, workers, rank);
                    let so = text(&got).0;
                    assert!(
                        so.starts_with("mindrecord ") && so.contains("12 samples in 2 files"),
                        "{so}"
                    );
                    assert_eq!(digests(&got), want, "{pipeline} {data} {workers} {rank:?}");
                }
            }
        }
    }
    // A list of one file reads that file only, as MindDataset([file]) does.
    let o = run(EVAL, &format!("{}::", s(&f1)), "2", None);
    assert!(text(&o).0.contains("in 1 file"), "{}", text(&o).0);
}

/// `(label, length, crc32, file_name)` per row, as read_mindrecord.py prints them.
fn rows(text: &str) -> Vec<(u32, usize, u32, String)> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.splitn(4, ' ');
            Some((
                it.next()?.parse().ok()?,
                it.next()?.parse().ok()?,
                it.next()?.parse().ok()?,
                it.next()?.to_string(),
            ))
        })
        .collect()
}

#[test]
fn imgfeeds_mindrecord_is_read_by_mindspores_minddataset() {
    let Some(python) = ready("imgfeeds_mindrecord_is_read_by_mindspores_minddataset") else {
        return;
    };
    let out = tempfile::tempdir().expect("tempdir");
    let mr = out.path().join("mr");
    let sh = out.path().join("sh");
    for (format, dir, size) in [("mindrecord", &mr, "150KB"), ("shards", &sh, "64MB")] {
        let o = imgfeed(&[
            "convert",
            "pipelines/convert_jpeg256.toml",
            "--format",
            format,
            "--out",
            s(dir),
            "--shard-size",
            size,
        ]);
        let (so, se) = text(&o);
        assert_eq!(code(&o), 0, "{so}{se}");
        assert!(so.contains("wrote 12 samples"), "{so}");
    }
    let files: Vec<PathBuf> = (0..)
        .map(|k| mr.join(format!("data.mindrecord{k}")))
        .take_while(|p| p.is_file())
        .collect();
    assert!(files.len() >= 2, "a group of several files: {files:?}");
    for f in &files {
        assert!(
            Path::new(&format!("{}.db", s(f))).is_file(),
            "{} has its .db",
            f.display()
        );
    }
    // imgfeed's read of its group: the same digests as its shards of the same conversion.
    for pipeline in [EVAL, TRAIN] {
        let want = digests(&run(pipeline, s(&sh), "2", None));
        assert_eq!(
            digests(&run(pipeline, s(&files[1]), "2", None)),
            want,
            "{pipeline}"
        );
    }
    // MindSpore's read, from the last file of the group: imgfeed's bytes and labels.
    let last = files.last().expect("files");
    let o = Command::new(&python)
        .arg(repo().join("fixtures/records/read_mindrecord.py"))
        .arg(last)
        .output()
        .expect("runs python");
    assert!(o.status.success(), "{}", text(&o).1);
    let theirs = rows(&text(&o).0);
    let header = read_header(&std::fs::read(last).expect("reads")).expect("header");
    let mut ours = Vec::new();
    for f in group(&header, last).expect("group") {
        let b = std::fs::read(&f).expect("reads");
        for e in index(&b, &MindRecordOptions::default()).expect("indexes") {
            let data = &b[e.offset as usize..(e.offset + e.len) as usize];
            ours.push((e.labels[0], data.len(), crc32fast::hash(data), e.key));
        }
    }
    assert_eq!(ours.len(), 12);
    assert_eq!(theirs, ours);
    assert_eq!(
        ours.iter()
            .map(|r| r.3.as_str())
            .take(2)
            .collect::<Vec<_>>(),
        ["bird/bird_000.jpg", "bird/bird_001.jpg"]
    );
}

#[test]
fn lying_mindrecord_headers_are_errors_naming_the_file() {
    let Some(python) = ready("lying_mindrecord_headers_are_errors_naming_the_file") else {
        return;
    };
    let out = tempfile::tempdir().expect("tempdir");
    write(&python, out.path(), 1);
    let whole = std::fs::read(out.path().join("tree.mindrecord")).expect("reads");
    let broken = out.path().join("broken");
    std::fs::create_dir_all(&broken).expect("mkdir");
    let mut long = whole.clone();
    long[..8].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let mut json = whole.clone();
    json[8] = b'#';
    let n = u64::from_le_bytes(whole[..8].try_into().expect("8")) as usize;
    let header = String::from_utf8_lossy(&whole[8..8 + n]).into_owned();
    // The page table claims a page far past the file (same length: ids are digits).
    let far = header.replacen("\"page_id\":0,", "\"page_id\":9,", 1);
    assert_ne!(far, header, "{header}");
    let mut page = whole.clone();
    page[8..8 + n].copy_from_slice(far.as_bytes());
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("long.mindrecord", long, "not a MindRecord file: header of"),
        ("json.mindrecord", json, "not a MindRecord header"),
        (
            "page.mindrecord",
            page,
            "the header lies: page 9 (lies past the end of the file)",
        ),
        (
            "truncated.mindrecord",
            whole[..whole.len() - 1000].to_vec(),
            "lies past the end of the file",
        ),
    ];
    for (file, bytes, says) in cases {
        let path = broken.join(file);
        std::fs::write(&path, bytes).expect("writes");
        // Its header names its group as written (tree.mindrecord, elsewhere): read it as
        // a list of itself, which is exactly that file.
        let data = format!("{}::", s(&path));
        let o = run(EVAL, &data, "2", None);
        let (so, se) = text(&o);
        assert_eq!(code(&o), 2, "{file}: {so}{se}");
        assert!(se.contains(s(&path)) && se.contains(says), "{file}: {se}");
    }
}
