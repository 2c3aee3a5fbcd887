//! WebDataset tars read in place, written by the tools users write them with: webdataset's
//! `ShardWriter` (several shards) and `TarWriter`, plain `tarfile` (Python's default pax
//! format, long names) and `tarfile`'s GNU format (`fixtures/make_webdataset.py`, in the
//! `formats` environment: `bash python/envs.sh formats`). `imgfeed run` on them gives the
//! image tree's digests (eval and train pipelines, 2 epochs, ranks of 2, 1 and 2 workers);
//! a changed tar is never read with its old index; broken tars are errors naming the file
//! and the member.
//!
//! Without the environment each test says how to make it and passes, unless
//! `IMGFEED_FORMAT_TESTS=required` (as `.ci/run` sets), which turns a skip into a failure.

mod common;
#[path = "common/formats.rs"]
mod formats;

use common::{code, imgfeed, repo, text};
use formats::{digests, s, EVAL, TRAIN};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ready(test: &str) -> Option<PathBuf> {
    formats::ready(test, "formats", "webdataset")
}

/// The fixture tree's tars, written by the real writers into a new folder.
fn written(python: &Path) -> tempfile::TempDir {
    let out = tempfile::tempdir().expect("tempdir");
    let o = Command::new(python)
        .arg(repo().join("fixtures/make_webdataset.py"))
        .arg(repo().join("fixtures/imagefolder"))
        .arg(out.path())
        .output()
        .expect("runs python");
    assert!(o.status.success(), "{}", text(&o).1);
    out
}

fn run(pipeline: &str, data: &str, workers: &str, rank: Option<(&str, &str)>) -> Output {
    formats::run(pipeline, data, workers, rank, None)
}

#[test]
fn every_writers_tars_give_the_trees_digests() {
    let Some(python) = ready("every_writers_tars_give_the_trees_digests") else {
        return;
    };
    let out = written(&python);
    let dir = out.path();
    let shards = dir.join("shards");
    let pattern = format!("{}/train-{{0000..0002}}.tar", s(&shards));
    assert_eq!(
        std::fs::read_dir(&shards).expect("dir").count(),
        3,
        "ShardWriter wrote several shards"
    );
    let tree = repo().join("fixtures/imagefolder");
    for pipeline in [EVAL, TRAIN] {
        for workers in ["1", "2"] {
            for rank in [None, Some(("2", "0")), Some(("2", "1"))] {
                let want = digests(&run(pipeline, s(&tree), workers, rank));
                assert_eq!(want.len(), 2, "two epochs");
                for data in [s(&shards), pattern.as_str()] {
                    let got = run(pipeline, data, workers, rank);
                    assert!(text(&got).0.starts_with("webdataset "), "{}", text(&got).0);
                    assert_eq!(digests(&got), want, "{pipeline} {data} {workers} {rank:?}");
                }
            }
        }
        let want = digests(&run(pipeline, s(&tree), "2", None));
        for file in ["tarwriter.tar", "pax.tar", "gnu.tar"] {
            let got = digests(&run(pipeline, s(&dir.join(file)), "2", None));
            assert_eq!(got, want, "{pipeline} {file}");
        }
    }
    // Each tar's index was kept beside it, and is what a second run reads.
    for i in 0..3 {
        let idx = shards.join(format!("train-{i:04}.tar.imgfeed-index"));
        assert!(idx.is_file(), "{}", idx.display());
    }
}

#[test]
fn a_changed_tar_is_never_read_with_its_old_index() {
    let Some(python) = ready("a_changed_tar_is_never_read_with_its_old_index") else {
        return;
    };
    let out = written(&python);
    let shards = out.path().join("shards");
    let (first, second) = (shards.join("train-0000.tar"), shards.join("train-0001.tar"));
    let fresh = tempfile::tempdir().expect("tempdir");
    let copy = fresh.path().join("copy.tar");
    std::fs::copy(&second, &copy).expect("copies");
    let want_second = digests(&run(EVAL, s(&copy), "2", None));
    let before = digests(&run(EVAL, s(&first), "2", None));
    assert_ne!(before, want_second);
    let idx = shards.join("train-0000.tar.imgfeed-index");
    assert!(idx.is_file());
    // A damaged index is rebuilt, not believed.
    std::fs::write(&idx, b"IMGFIDX1 and then garbage").expect("writes");
    assert_eq!(digests(&run(EVAL, s(&first), "2", None)), before);
    // The tar replaced by another (its index left as it was): the new tar's samples.
    std::fs::copy(&second, &first).expect("copies");
    assert_eq!(digests(&run(EVAL, s(&first), "2", None)), want_second);
}

#[test]
fn broken_tars_are_errors_naming_the_file_and_the_member() {
    let Some(python) = ready("broken_tars_are_errors_naming_the_file_and_the_member") else {
        return;
    };
    let out = written(&python);
    let broken = out.path().join("broken");
    let whole = std::fs::read(out.path().join("tarwriter.tar")).expect("reads");
    let cut = broken.join("truncated.tar");
    // Inside the data of a member past the first.
    std::fs::write(&cut, &whole[..whole.len() / 2 + 100]).expect("writes");
    for (file, says) in [
        ("no_label.tar", "sample \"lonely\" (member at byte"),
        ("no_image.tar", "sample \"imageless\" (member at byte"),
        ("bad_label.tar", "member \"odd.cls\""),
        ("truncated.tar", "truncated: member \""),
    ] {
        let path = broken.join(file);
        let o = run(EVAL, s(&path), "2", None);
        let (so, se) = text(&o);
        assert_eq!(code(&o), 2, "{file}: {so}{se}");
        assert!(se.contains(s(&path)) && se.contains(says), "{file}: {se}");
    }
    let o = run(EVAL, s(&broken.join("bad_label.tar")), "2", None);
    assert!(
        text(&o).1.contains("label \"cat\" is not an integer"),
        "{}",
        text(&o).1
    );
    // A pattern naming a file that is not there says which.
    let missing = format!("{}/train-{{0000..0003}}.tar", s(&out.path().join("shards")));
    let o = run(EVAL, &missing, "2", None);
    assert_eq!(code(&o), 2);
    assert!(
        text(&o).1.contains("train-0003.tar") && text(&o).1.contains("no such file"),
        "{}",
        text(&o).1
    );
}

/// Each sample of the tars in `dir` as the `webdataset` package reads them: `(key, label,
/// image extension, CRC-32 of the image bytes)`.
fn read_by_webdataset(python: &Path, dir: &Path) -> Vec<(String, u32, String, u32)> {
    let script = "import sys, glob, zlib, webdataset as wds\n\
        files = sorted(glob.glob(sys.argv[1] + '/*.tar'))\n\
        for s in wds.WebDataset(files, shardshuffle=False):\n\
        \x20   ext = [k for k in s if k in ('jpg', 'png', 'webp', 'bmp')][0]\n\
        \x20   print(s['__key__'], int(s['cls']), ext, zlib.crc32(s[ext]))\n";
    let o = Command::new(python)
        .args(["-c", script, s(dir)])
        .output()
        .expect("runs python");
    assert!(o.status.success(), "{}", text(&o).1);
    text(&o)
        .0
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 4, "{l}");
            (
                f[0].to_string(),
                f[1].parse().expect("label"),
                f[2].to_string(),
                f[3].parse().expect("crc"),
            )
        })
        .collect()
}

#[test]
fn imgfeeds_webdataset_output_reads_back_alike_in_webdataset_and_imgfeed() {
    let Some(python) =
        ready("imgfeeds_webdataset_output_reads_back_alike_in_webdataset_and_imgfeed")
    else {
        return;
    };
    let out = tempfile::tempdir().expect("tempdir");
    let (wds_dir, shards_dir) = (out.path().join("wds"), out.path().join("shards"));
    for (format, dir) in [("webdataset", &wds_dir), ("shards", &shards_dir)] {
        let o = imgfeed(&[
            "convert",
            "pipelines/convert_jpeg256.toml",
            "--data",
            "fixtures/imagefolder",
            "--format",
            format,
            "--shard-size",
            "60kB",
            "--out",
            s(dir),
        ]);
        let (so, se) = text(&o);
        assert_eq!(code(&o), 0, "{so}{se}");
        assert!(so.contains("wrote 12 samples (jpeg storage)"), "{so}");
    }
    let tars = std::fs::read_dir(&wds_dir)
        .expect("dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tar"))
        .count();
    assert!(tars > 1, "{tars} tars: the shard size splits them");
    assert!(wds_dir.join("webdataset.json").is_file());
    // The webdataset package reads every sample, in order, with the bytes and labels of
    // the shards conversion (the same JPEG encoder), which imgfeed's own reader checks.
    let shards = imgfeed::shards::Shards::open(&shards_dir).expect("opens");
    let got = read_by_webdataset(&python, &wds_dir);
    assert_eq!(got.len(), shards.len());
    for (i, (key, label, ext, crc)) in got.iter().enumerate() {
        let (e, bytes) = shards.record(i).expect("record");
        assert_eq!(key, &format!("{i:06}"));
        assert_eq!(*label, e.labels[0], "{key}");
        assert_eq!(ext, "jpg");
        assert_eq!(*crc, imgfeed::shards::format::crc32(bytes), "{key}");
    }
    // imgfeed reads its WebDataset output as it reads the shards.
    for pipeline in [EVAL, TRAIN] {
        assert_eq!(
            digests(&run(pipeline, s(&wds_dir), "2", None)),
            digests(&run(pipeline, s(&shards_dir), "2", None)),
            "{pipeline}"
        );
    }
    // `original` keeps the tree's files: the tree's digests, their extensions kept.
    let orig = out.path().join("orig.toml");
    std::fs::write(
        &orig,
        format!(
            "[source]\nkind = \"image_folder\"\nroot = {:?}\n[store]\nmode = \"original\"\n",
            s(&repo().join("fixtures/imagefolder"))
        ),
    )
    .expect("writes");
    let odir = out.path().join("orig");
    let o = imgfeed(&[
        "convert",
        s(&orig),
        "--format",
        "webdataset",
        "--out",
        s(&odir),
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o).1);
    let exts: Vec<String> = read_by_webdataset(&python, &odir)
        .into_iter()
        .map(|r| r.2)
        .collect();
    assert!(exts.contains(&"png".to_string()) && exts.contains(&"jpg".to_string()));
    let tree = repo().join("fixtures/imagefolder");
    assert_eq!(
        digests(&run(EVAL, s(&odir), "2", None)),
        digests(&run(EVAL, s(&tree), "2", None))
    );
    // What the format cannot hold is refused before anything is read.
    let o = imgfeed(&[
        "convert",
        "pipelines/convert_raw256.toml",
        "--data",
        "fixtures/imagefolder",
        "--format",
        "webdataset",
        "--out",
        s(&out.path().join("raw")),
    ]);
    assert_eq!(code(&o), 2);
    assert!(
        text(&o).1.contains("store.mode = \"raw\""),
        "{}",
        text(&o).1
    );
}
