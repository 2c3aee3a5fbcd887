//! The benchmark scripts in `benches/` work from a clone alone: `make_data.py` makes small
//! sets from `benches/photos` (the same bytes whatever the number of processes), the
//! engine runs the benchmark pipelines on them, and the references measure them. Needs
//! python3 with numpy and Pillow (skipped without them, except under CI); a few seconds.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Output};

fn python_has_numpy_and_pillow() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import numpy, PIL"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        // .ci/run installs both: there, a skip would hide the scripts under test.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs python3 with numpy and Pillow for this test"
        );
        eprintln!("skipped: python3 with numpy and Pillow is not available");
    }
    ok
}

fn script(name: &str, args: &[&str]) -> Output {
    let o = Command::new("python3")
        .arg(repo().join("benches").join(name))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run python3");
    let (so, se) = text(&o);
    assert!(o.status.success(), "{name} {args:?}:\n{so}{se}");
    o
}

fn arg(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Every file under `root`, as (relative path, bytes), sorted.
fn tree(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                let rel = p.strip_prefix(root).expect("under root");
                out.push((rel.display().to_string(), std::fs::read(&p).expect("read")));
            }
        }
    }
    out.sort();
    out
}

fn json_images(o: &Output) -> String {
    let (so, _) = text(o);
    let line = so.lines().last().expect("a JSON line").to_string();
    assert!(
        line.starts_with('{') && line.contains("\"images_per_s\""),
        "{line}"
    );
    line
}

#[test]
fn every_script_shows_its_usage() {
    if !python_has_numpy_and_pillow() {
        return;
    }
    for name in [
        "make_data.py",
        "decode_limit.py",
        "cifar_numpy.py",
        "ratio.py",
    ] {
        let (so, _) = text(&script(name, &["--help"]));
        assert!(so.contains("usage:"), "{name}: {so}");
    }
}

#[test]
fn an_imagefolder_set_is_the_same_whatever_the_processes_and_runs() {
    if !python_has_numpy_and_pillow() {
        return;
    }
    let one = tempfile::tempdir().expect("tempdir");
    let two = tempfile::tempdir().expect("tempdir");
    for (dir, jobs) in [(&one, "1"), (&two, "2")] {
        let args = [
            "imagefolder",
            "--out",
            arg(dir.path()),
            "--num",
            "32",
            "--classes",
            "4",
        ];
        script("make_data.py", &[&args[..], &["--jobs", jobs]].concat());
    }
    let files = tree(one.path());
    assert_eq!(files.len(), 32);
    assert!(files
        .iter()
        .all(|(n, b)| n.ends_with(".JPEG") && b.starts_with(&[0xFF, 0xD8])));
    assert!(
        files == tree(two.path()),
        "--jobs 1 and --jobs 2 wrote different files"
    );

    let o = imgfeed(&[
        "run",
        "pipelines/resnet50_eval.toml",
        "--data",
        arg(one.path()),
        "--workers",
        "2",
    ]);
    let (so, se) = text(&o);
    assert_eq!(code(&o), 0, "{so}{se}");
    assert!(so.contains("32 samples, 4 classes"), "{so}");
    assert!(so.contains("1 batches, 32 samples"), "{so}");

    let line = json_images(&script("decode_limit.py", &[arg(one.path()), "--json"]));
    assert!(line.contains("\"images\": 32"), "{line}");
}

#[test]
fn a_small_cifar_set_has_both_layouts_and_runs() {
    if !python_has_numpy_and_pillow() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    script(
        "make_data.py",
        &["cifar", "--out", arg(dir.path()), "--per-file", "64"],
    );
    let bin = dir.path().join("cifar-10-batches-bin");
    for f in ["data_batch_1.bin", "data_batch_5.bin", "test_batch.bin"] {
        let len = std::fs::metadata(bin.join(f)).expect("a batch file").len();
        assert_eq!(len, 64 * 3073, "{f}");
    }
    // The pickle layout holds the same records, read as torchvision reads it.
    let check = r#"
import pickle, sys, numpy as np
root = sys.argv[1]
for name in ["data_batch_1", "data_batch_3", "test_batch"]:
    with open(f"{root}/cifar-10-batches-py/{name}", "rb") as f:
        d = pickle.load(f, encoding="latin1")
    rec = np.fromfile(f"{root}/cifar-10-batches-bin/{name}.bin", np.uint8).reshape(-1, 3073)
    assert d["data"].dtype == np.uint8 and d["data"].shape == (64, 3072), d["data"].shape
    assert (d["data"] == rec[:, 1:]).all() and d["labels"] == rec[:, 0].tolist()
    assert len(d["filenames"]) == 64 and isinstance(d["batch_label"], str)
    with open(f"{root}/cifar-10-batches-py/{name}", "rb") as f:
        assert sorted(pickle.load(f, encoding="bytes")) == [b"batch_label", b"data", b"filenames", b"labels"]
with open(f"{root}/cifar-10-batches-py/batches.meta", "rb") as f:
    assert pickle.load(f, encoding="latin1")["label_names"][9] == "truck"
print("ok")
"#;
    let o = Command::new("python3")
        .args(["-c", check, arg(dir.path())])
        .output()
        .expect("run python3");
    let (so, se) = text(&o);
    assert!(o.status.success() && so.trim() == "ok", "{so}{se}");

    let o = imgfeed(&[
        "run",
        "pipelines/cifar10_eval.toml",
        "--data",
        arg(&bin),
        "--usage",
        "train",
    ]);
    let (so, se) = text(&o);
    assert_eq!(code(&o), 0, "{so}{se}");
    assert!(so.contains("320 samples in 5 file(s)"), "{so}");
    assert!(so.contains("2 batches, 256 samples"), "{so}");

    let line = json_images(&script("cifar_numpy.py", &[arg(&bin), "--json"]));
    assert!(line.contains("\"images\": 256"), "{line}");
}

/// `make_data.py large`: 12-megapixel JPEGs (4000 x 3000 or 3000 x 4000) in a class folder
/// the engine reads.
#[test]
fn a_large_photo_set_is_12_megapixels() {
    if !python_has_numpy_and_pillow() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let args = [
        "large",
        "--out",
        arg(dir.path()),
        "--num",
        "1",
        "--jobs",
        "1",
    ];
    script("make_data.py", &args);
    let files = tree(dir.path());
    assert_eq!(files.len(), 1);
    assert!(files[0].0.ends_with(".jpg"), "{}", files[0].0);
    let o = imgfeed(&["validate", arg(dir.path()), "--json"]);
    let (so, se) = text(&o);
    assert_eq!(code(&o), 0, "{so}{se}");
    let v: serde_json::Value = serde_json::from_str(&so).expect("json");
    let (w, h) = (&v["width"]["max"], &v["height"]["max"]);
    assert!(
        (w == 4000 && h == 3000) || (w == 3000 && h == 4000),
        "{w} x {h}"
    );
}
