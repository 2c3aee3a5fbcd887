//! `decode`'s `exif_transpose = true` against Pillow's `ImageOps.exif_transpose` on the
//! files of `fixtures/exif/` (written by Pillow, `make_exif.py`): the 8 orientations, a
//! big-endian directory, no EXIF, a damaged TIFF header, a directory cut short after the
//! tag, the tag in XMP only, a PNG's eXIf chunk; then through resize + center_crop (the
//! region decode) against torchvision's `Resize(16)` + `CenterCrop(12)` of Pillow's
//! transposed image; and `validate`'s count of images stored turned or mirrored.

mod common;

use common::*;
use imgfeed::imgproc::Filter;
use imgfeed::ops::{Decode, Op};
use imgfeed::{EngineConfig, Pipeline};
use serde_json::Value;
use std::path::PathBuf;

fn exif_dir() -> PathBuf {
    fixtures().join("exif")
}

/// `(file name, expected orientation, expected (height, width))`, sorted by name.
fn expected() -> Vec<(String, u64, (usize, usize))> {
    let text = std::fs::read_to_string(exif_dir().join("expected.json")).expect("expected.json");
    let v: Value = serde_json::from_str(&text).expect("json");
    let mut out: Vec<_> = v
        .as_object()
        .expect("object")
        .iter()
        .map(|(name, e)| {
            let size = |i: usize| e["size"][i].as_u64().expect("size") as usize;
            let o = e["orientation"].as_u64().expect("orientation");
            (name.clone(), o, (size(0), size(1)))
        })
        .collect();
    out.sort();
    out
}

/// Pillow's bytes for `name` (`suffix` "rgb" or "crop.rgb").
fn pillow(name: &str, suffix: &str) -> Vec<u8> {
    let stem = name.rsplit_once('.').expect("extension").0;
    std::fs::read(exif_dir().join(format!("{stem}.{suffix}"))).expect("reference bytes")
}

/// The fixtures in one class folder, in name order (the source's order).
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, _, _) in expected() {
        copy_into(dir.path(), &format!("a/{name}"), &exif_dir().join(&name));
    }
    dir
}

fn pipeline(root: &std::path::Path, ops: Vec<Op>, fuse: bool) -> Pipeline {
    let mut b = Pipeline::builder(folder_source(root))
        .batch(1, false)
        .engine(EngineConfig::default().workers(2).fuse(fuse));
    for op in ops {
        b = b.op(op);
    }
    b.build().expect("builds")
}

/// `got` equals `want` (libjpeg-turbo decodes as Pillow does) or, with zune-jpeg, is
/// within a few grey levels of it; either way a wrong turn or mirror is far off.
fn assert_close(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: size");
    let (max, _) = diff_u8(got, want);
    let tolerance = if cfg!(imgfeed_turbo) { 0 } else { 12 };
    assert!(
        max <= tolerance,
        "{what}: differs from Pillow's by up to {max}"
    );
}

fn exif_decode() -> Op {
    Op::Decode(Decode::default().exif_transpose(true))
}

#[test]
fn every_orientation_is_pillows_exif_transpose() {
    let cases = expected();
    assert!(cases.len() >= 13, "{cases:?}");
    let dir = tree();
    // Every image padded into a 40x40 canvas (center_crop pads with zeros, torchvision's
    // way): the size after the turn decides where it lands.
    let got = samples_u8(
        &pipeline(dir.path(), vec![exif_decode(), center_crop(40, 40)], true),
        0,
    );
    let plain = samples_u8(
        &pipeline(dir.path(), vec![decode(), center_crop(40, 40)], true),
        0,
    );
    assert_eq!(got.len(), cases.len());
    let mut turned = 0;
    for (i, (name, orientation, (h, w))) in cases.iter().enumerate() {
        let want = pillow(name, "rgb");
        assert_eq!(want.len(), h * w * 3, "{name}");
        let mut canvas = vec![0u8; 40 * 40 * 3];
        let (top, left) = ((40 - h) / 2, (40 - w) / 2);
        for y in 0..*h {
            let at = ((top + y) * 40 + left) * 3;
            canvas[at..at + w * 3].copy_from_slice(&want[y * w * 3..(y + 1) * w * 3]);
        }
        assert_close(&got[i], &canvas, name);
        // off by default: the image as stored
        if *orientation != 1 {
            turned += 1;
            assert_ne!(plain[i], got[i], "{name}: exif_transpose is off by default");
        } else {
            assert_eq!(plain[i], got[i], "{name}");
        }
    }
    assert!(turned >= 10, "{turned}");
}

#[test]
fn orientation_comes_before_resize_and_center_crop() {
    let dir = tree();
    let ops = || {
        vec![
            exif_decode(),
            resize_short(16, Filter::Bilinear),
            center_crop(12, 12),
        ]
    };
    let fused = pipeline(dir.path(), ops(), true);
    assert!(
        fused.fusions().iter().any(|f| f.contains("exif_transpose")),
        "{:?}",
        fused.fusions()
    );
    let got = samples_u8(&fused, 0);
    // the region decode (normal orientations) and the whole decode agree byte for byte
    assert_eq!(got, samples_u8(&pipeline(dir.path(), ops(), false), 0));
    for (i, (name, _, _)) in expected().iter().enumerate() {
        assert_close(&got[i], &pillow(name, "crop.rgb"), name);
    }
}

#[test]
fn validate_counts_images_stored_turned_or_mirrored() {
    let dir = tree();
    let o = imgfeed(&["validate", dir.path().to_str().expect("utf-8"), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    let turned = expected().iter().filter(|(_, o, _)| *o != 1).count();
    assert_eq!(v["colors"]["exif_oriented"], turned);
    let o = imgfeed(&["validate", dir.path().to_str().expect("utf-8")]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("EXIF orientation: {turned} images")),
        "{text}"
    );
}
