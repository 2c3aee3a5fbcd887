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
