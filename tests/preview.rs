//! `imgfeed preview` (issue 33): the contact sheet of a fixed pipeline is a committed PNG,
//! byte for byte; the same command gives the same bytes on any worker count; normalize is
//! undone within one grey level; soft labels show their weights; the page carries its tiles
//! inline and escapes what it shows.
//!
//! `IMGFEED_BLESS=1 cargo test --test preview` rewrites the references — and still fails
//! when they changed, so a change is always seen and committed on purpose.

mod common;

use common::*;
use imgfeed::ops::Op;
use imgfeed::preview::{preview, PreviewOptions};
use imgfeed::{Pipeline, PipelineConfig};
use std::path::Path;

/// The reference: CIFAR-10 records need no JPEG decoder, so every build gives these bytes.
const CIFAR: &[&str] = &[
    "preview",
    "pipelines/cifar10_train.toml",
    "--batch-size",
    "15",
    "--count",
    "15",
    "--with-source",
];

fn run_preview(args: &[&str], out: &Path) -> Vec<u8> {
    let mut a: Vec<&str> = args.to_vec();
    let out_s = out.to_str().expect("utf-8");
    a.extend(["--out", out_s]);
    let o = imgfeed(&a);
    assert_eq!(code(&o), 0, "{a:?}: {}", text(&o).1);
    std::fs::read(out).expect("the preview was written")
}

/// `got` equals the committed `reference` (relative to the repository), or the test fails;
/// with IMGFEED_BLESS=1 a changed reference is rewritten first.
fn same_as_reference(got: &[u8], reference: &str, how: &str) {
    let path = repo().join(reference);
    let want = std::fs::read(&path).unwrap_or_default();
    if got != want.as_slice() {
        if std::env::var_os("IMGFEED_BLESS").is_some() {
            std::fs::write(&path, got).expect("write the reference");
        }
        panic!(
            "{reference} differs from what `{how}` makes now ({} bytes, was {}); if the change \
             is meant, rerun with IMGFEED_BLESS=1 and commit the new file",
            got.len(),
            want.len()
        );
    }
}

#[test]
fn the_preview_of_a_fixed_pipeline_equals_the_committed_png() {
    let dir = tempfile::tempdir().expect("tempdir");
    let got = run_preview(CIFAR, &dir.path().join("p.png"));
    same_as_reference(&got, "fixtures/preview/cifar10_train.png", &CIFAR.join(" "));
    // a PNG of the grid: 15 cells of 2 pictures, 32 px each
    let img = image::load_from_memory(&got).expect("a PNG").to_rgb8();
    assert!(
        img.width() > 4 * 64 && img.height() > 4 * 32,
        "{:?}",
        img.dimensions()
    );
}

/// The README's one preview line makes the README's image (byte for byte where the build
/// decodes JPEG with libjpeg-turbo, as the committed image was; zune-jpeg rounds a few
/// pixels otherwise, so there the size is compared).
#[test]
fn the_readme_image_is_what_the_readme_command_makes() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README");
    let line = readme
        .lines()
        .find(|l| l.starts_with("imgfeed preview "))
        .expect("the README has an `imgfeed preview` line");
    let words: Vec<&str> = line
        .split(" #")
        .next()
        .unwrap_or(line)
        .split_whitespace()
        .collect();
    let out_at = words.iter().position(|w| *w == "--out").expect("--out");
    let image = readme
        .split("](")
        .skip(1)
        .filter_map(|s| s.split(')').next())
        .find(|s| s.ends_with(".png"))
        .expect("the README shows a PNG");
    let mut args: Vec<&str> = words[1..].to_vec();
    args.drain(out_at - 1..out_at + 1);
    let dir = tempfile::tempdir().expect("tempdir");
    let got = run_preview(&args, &dir.path().join("r.png"));
    if imgfeed::codec::jpeg_decoder().contains("libjpeg-turbo") {
        same_as_reference(&got, image, line);
    } else {
        let want = std::fs::read(repo().join(image)).expect("the README image");
        let dims = |b: &[u8]| {
            image::load_from_memory(b)
                .expect("a PNG")
                .to_rgb8()
                .dimensions()
        };
        assert_eq!(dims(&got), dims(&want));
    }
    assert!(
        got.len() < 200_000,
        "the README image stays small: {}",
        got.len()
    );
}

#[test]
fn the_same_command_gives_the_same_bytes_on_any_worker_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (k, args) in [
        CIFAR,
        &[
            "preview",
            "pipelines/resnet50_train.toml",
            "--batch-size",
            "5",
            "--count",
            "7",
            "--tile",
            "40",
            "--start-batch",
            "1",
            "--seed",
            "9",
        ][..],
    ]
    .iter()
    .enumerate()
    {
        let mut one = args.to_vec();
        one.extend(["--workers", "1"]);
        let mut three = args.to_vec();
        three.extend(["--workers", "3"]);
        let a = run_preview(&one, &dir.path().join(format!("{k}a.png")));
        let b = run_preview(&three, &dir.path().join(format!("{k}b.png")));
        assert!(a == b, "{args:?}: workers 1 and 3 differ");
    }
}

fn pipeline(cfg: &PipelineConfig) -> Pipeline {
    Pipeline::new(cfg.clone()).expect("pipeline")
}

#[test]
fn normalize_is_undone_within_one_grey_level() {
    // the eval pipeline (resize, center crop, normalize, CHW, float32) against itself
    // without the ops that change values or layout: the trainer's view, undone, is the
    // picture
    let mut cfg =
        PipelineConfig::from_file(repo().join("pipelines/resnet50_eval.toml")).expect("pipeline");
    cfg.batch.size = 4;
    cfg.batch.drop_remainder = false;
    let mut plain = cfg.clone();
    plain
        .ops
        .retain(|o| !matches!(o, Op::Normalize(_) | Op::HwcToChw(_)));
    assert!(plain.ops.len() + 2 == cfg.ops.len(), "{:?}", cfg.ops);
    let opts = PreviewOptions {
        count: 6,
        ..PreviewOptions::default()
    };
    let (p, q) = (pipeline(&cfg), pipeline(&plain));
    assert_eq!(p.output_spec().dtype, imgfeed::DType::F32);
    assert_eq!(q.output_spec().dtype, imgfeed::DType::U8);
    let a = preview(&p, p.epoch(0), &opts).expect("preview");
    let b = preview(&q, q.epoch(0), &opts).expect("preview");
    assert_eq!(a.tiles.len(), 6);
    for (x, y) in a.tiles.iter().zip(&b.tiles) {
        assert_eq!(x.file, y.file);
        assert_eq!((x.picture.width, x.picture.height), (224, 224));
        let worst = x
            .picture
            .rgb
            .iter()
            .zip(&y.picture.rgb)
            .map(|(a, b)| a.abs_diff(*b))
            .max()
            .unwrap_or(0);
        assert!(worst <= 1, "{}: off by {worst}", x.file);
        // and it is a picture, not a blank
        assert!(x.picture.rgb.iter().any(|&v| v != x.picture.rgb[0]));
    }
    // the captions name the class and the file
    let t = &a.tiles[0];
    assert!(t.file.starts_with(&t.label), "{} {}", t.label, t.file);
}

#[test]
fn soft_labels_show_their_weights_and_the_page_carries_everything_inline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("p.html");
    let args = [
        "preview",
        "pipelines/resnet50_train_tv2.toml",
        "--batch-size",
        "4",
        "--count",
        "4",
        "--tile",
        "48",
        "--with-source",
    ];
    let page = String::from_utf8(run_preview(&args, &out)).expect("utf-8");
    assert_eq!(page.matches("<figure").count(), 4, "{page}");
    assert_eq!(page.matches("src=\"data:image/png;base64,").count(), 4);
    assert!(
        !page.contains("<script") && !page.contains("http"),
        "{page}"
    );
    assert!(page.contains("label weights"), "{page}");
    assert!(page.contains("decoded original"), "{page}");
    // the weights in the library's tiles: the largest first, summing to at most one
    let mut cfg = PipelineConfig::from_file(repo().join("pipelines/resnet50_train_tv2.toml"))
        .expect("pipeline");
    cfg.batch.size = 4;
    let p = pipeline(&cfg);
    let opts = PreviewOptions {
        count: 4,
        ..PreviewOptions::default()
    };
    let shown = preview(&p, p.epoch(0), &opts).expect("preview");
    assert_eq!(shown.tiles.len(), 4);
    for t in &shown.tiles {
        assert!(!t.weights.is_empty(), "{t:?}");
        let sum: f32 = t.weights.iter().map(|w| w.1).sum();
        assert!(sum <= 1.0 + 1e-4 && sum > 0.5, "{:?}", t.weights);
        assert!(t.weights.windows(2).all(|w| w[0].1 >= w[1].1));
        assert!(t.label.contains(&t.weights[0].0), "{}", t.label);
    }
}
