//! Decoding less than the whole image must not change a byte where it is exact, and must
//! be Pillow's where it is not:
//!
//! * the evaluation pipelines (`resize` + `center_crop`, where libjpeg-turbo decodes only
//!   the rectangle the crop window reads) give the bytes of the same pipeline with the
//!   fusions off (`[engine] fuse = false`: the whole image decoded, resized, cropped) on
//!   the JPEG fixtures and on images of odd sizes in every chroma subsampling;
//! * `draft = true` (DCT-scaled decode) gives Pillow's `draft` + `Resize` + `CenterCrop`
//!   bit for bit (libjpeg-turbo builds), the same bytes with and without the region
//!   decode, and `check` says which scale an image size gets.
//!
//! The odd-size files are written by Pillow (python3 with numpy and Pillow; skipped
//! without them, except under CI).

mod common;

use common::*;
use imgfeed::imgproc::Filter;
use imgfeed::ops::{Decode, Op};
use imgfeed::{EngineConfig, Pipeline, PipelineConfig};
use std::path::Path;
use std::process::Command;

fn python_has_numpy_and_pillow() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import numpy, PIL"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs python3 with numpy and Pillow for this test"
        );
        eprintln!("skipped: python3 with numpy and Pillow is not available");
    }
    ok
}

fn python(script: &str, args: &[&str]) {
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("run python3");
    let (so, se) = text(&o);
    assert!(o.status.success(), "python3:\n{so}{se}");
}

/// JPEGs of odd sizes in every subsampling Pillow writes (and greyscale, progressive,
/// restart markers), cut from a photo, into `root/a/`.
const ODD_SIZES: &str = r#"
import sys, os
import numpy as np
from PIL import Image
src = Image.open(sys.argv[1]).convert("RGB")
out = os.path.join(sys.argv[2], "a")
os.makedirs(out, exist_ok=True)
sizes = [(333, 251), (517, 389), (257, 1023), (1001, 301), (97, 771)]
for i, (w, h) in enumerate(sizes):
    im = src.resize((w, h), Image.BILINEAR)
    for s in ["4:4:4", "4:2:2", "4:2:0"]:
        im.save(f"{out}/{i}_{s.replace(':', '')}.jpg", quality=90, subsampling=s)
    im.save(f"{out}/{i}_progressive.jpg", quality=85, progressive=True)
    im.convert("L").save(f"{out}/{i}_gray.jpg", quality=90)
"#;

fn odd_size_tree() -> Option<tempfile::TempDir> {
    if !python_has_numpy_and_pillow() {
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let photo = fixtures().join("parity/images/jpeg/rocket_640x427.jpg");
    python(
        ODD_SIZES,
        &[
            photo.to_str().expect("utf-8"),
            dir.path().to_str().expect("utf-8"),
        ],
    );
    Some(dir)
}

/// The committed JPEG fixtures (real photos, the edge cases' samplings, CMYK), one folder.
fn fixture_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files = Vec::new();
    for sub in ["imagefolder", "parity/images/jpeg", "edge"] {
        for e in walk(&fixtures().join(sub)) {
            let jpeg = e
                .extension()
                .is_some_and(|x| x.eq_ignore_ascii_case("jpg") || x.eq_ignore_ascii_case("jpeg"));
            if jpeg {
                files.push(e);
            }
        }
    }
    assert!(files.len() >= 20, "{files:?}");
    for (i, f) in files.iter().enumerate() {
        let name = f
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_lowercase();
        copy_into(dir.path(), &format!("a/{i:02}_{name}"), f);
    }
    dir
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The ops of `pipelines/NAME` on the tree at `root`, batches of one, 2 workers.
fn from_file(name: &str, root: &Path, fuse: bool, edit: impl Fn(&mut Vec<Op>)) -> Pipeline {
    let mut cfg = PipelineConfig::from_file(repo().join("pipelines").join(name)).expect("parses");
    cfg.source
        .dataset
        .root_mut()
        .clone_from(&root.to_path_buf());
    cfg.batch.size = 1;
    cfg.batch.drop_remainder = false;
    cfg.engine = EngineConfig::default().workers(2).fuse(fuse);
    edit(&mut cfg.ops);
    Pipeline::new(cfg).expect("builds")
}

fn image_bytes(p: &Pipeline) -> Vec<Vec<u8>> {
    batches(p, 0)
        .iter()
        .map(|b| b.image_bytes().to_vec())
        .collect()
}

/// A change to a pipeline's ops.
type Edit = dyn Fn(&mut Vec<Op>);

/// Every evaluation pipeline of `pipelines/`, and a small resize that leaves the crop
/// window a small part of large images, region-decoded and whole.
fn assert_region_decode_is_exact(root: &Path) {
    let small = |ops: &mut Vec<Op>| {
        ops[1] = resize_short(72, Filter::Bilinear);
        ops[2] = center_crop(40, 64);
    };
    let cases: [(&str, &Edit); 3] = [
        ("resnet50_eval.toml", &|_| {}),
        ("resnet50_eval_tv2.toml", &|_| {}),
        ("resnet50_eval.toml", &small),
    ];
    for (name, edit) in cases {
        let fused = from_file(name, root, true, edit);
        if cfg!(imgfeed_turbo) {
            assert!(
                fused.fusions().iter().any(|f| f.contains("region decode")),
                "{:?}",
                fused.fusions()
            );
        }
        let plain = from_file(name, root, false, edit);
        assert!(plain.fusions().iter().all(|f| !f.contains("region")));
        let (a, b) = (image_bytes(&fused), image_bytes(&plain));
        assert!(a.len() >= 20);
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(
                x == y,
                "{name}: sample {i} differs between region and whole decode"
            );
        }
    }
}

#[test]
fn eval_region_decode_is_bit_identical_on_the_fixtures() {
    assert_region_decode_is_exact(fixture_tree().path());
}

#[test]
fn eval_region_decode_is_bit_identical_on_odd_sizes_and_every_subsampling() {
    if let Some(dir) = odd_size_tree() {
        assert_region_decode_is_exact(dir.path());
    }
}

fn draft_eval(root: &Path, resize: usize, crop: usize, draft: bool, fuse: bool) -> Pipeline {
    Pipeline::builder(folder_source(root))
        .op(Op::Decode(Decode::default().draft(draft)))
        .op(resize_short(resize, Filter::Bilinear))
        .op(center_crop(crop, crop))
        .batch(1, false)
        .engine(EngineConfig::default().workers(2).fuse(fuse))
        .build()
        .expect("builds")
}

/// With `draft`, the region decode (now in the scaled image) still changes no byte, for
/// every scale: resizes to 40, 20, 10 and 5 put the odd-size images at 1/2 to 1/8.
#[test]
fn draft_region_decode_is_bit_identical() {
    let Some(dir) = odd_size_tree() else {
        return;
    };
    for (resize, crop) in [(160, 150), (40, 36), (20, 18), (10, 9), (5, 4)] {
        let fused = draft_eval(dir.path(), resize, crop, true, true);
        let plain = draft_eval(dir.path(), resize, crop, true, false);
        let (a, b) = (samples_u8(&fused, 0), samples_u8(&plain, 0));
        assert_eq!(a.len(), 25);
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(x == y, "resize {resize}: sample {i} differs");
        }
    }
}

/// Pillow's `draft("RGB", (target_w, target_h))`, then torchvision's `Resize` and
/// `CenterCrop`, as raw bytes per file (sorted by name) into one file.
const PILLOW_DRAFT: &str = r#"
import sys, os
from PIL import Image
root, resize, crop, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
with open(out, "wb") as f:
    for name in sorted(os.listdir(os.path.join(root, "a"))):
        im = Image.open(os.path.join(root, "a", name))
        w, h = im.size
        tw, th = (resize, resize * h // w) if w <= h else (resize * w // h, resize)
        im.draft("RGB", (tw, th))
        im = im.convert("RGB")
        w, h = im.size
        tw, th = (resize, resize * h // w) if w <= h else (resize * w // h, resize)
        # the horizontal pass, then the vertical (Pillow 11+ may run the vertical first
        # on tall images, which imgfeed's references predate)
        im = im.resize((tw, h), Image.BILINEAR).resize((tw, th), Image.BILINEAR)
        top, left = int(round((th - crop) / 2.0)), int(round((tw - crop) / 2.0))
        f.write(im.crop((left, top, left + crop, top + crop)).tobytes())
"#;

#[test]
fn draft_is_pillows_draft_and_exact_otherwise() {
    let Some(dir) = odd_size_tree() else {
        return;
    };
    let refs = tempfile::tempdir().expect("tempdir");
    for (resize, crop) in [(160, 150), (40, 36), (10, 9)] {
        let out = refs.path().join(format!("{resize}.rgb"));
        python(
            PILLOW_DRAFT,
            &[
                dir.path().to_str().expect("utf-8"),
                &resize.to_string(),
                &crop.to_string(),
                out.to_str().expect("utf-8"),
            ],
        );
        let want = std::fs::read(&out).expect("reference");
        let drafted = samples_u8(&draft_eval(dir.path(), resize, crop, true, true), 0);
        let exact = samples_u8(&draft_eval(dir.path(), resize, crop, false, true), 0);
        let got: Vec<u8> = drafted.concat();
        assert_eq!(got.len(), want.len());
        if cfg!(imgfeed_turbo) {
            // libjpeg-turbo scales in the DCT domain as Pillow's draft does
            assert!(got == want, "resize {resize}: draft differs from Pillow's");
            // the small targets scale most images; the exact path differs there
            if resize <= 40 {
                assert_ne!(drafted, exact, "resize {resize}: draft changed nothing");
            }
        } else {
            // zune-jpeg has no DCT scaling: draft decodes at full size
            assert_eq!(drafted, exact, "resize {resize}");
        }
    }
}

#[test]
fn check_says_which_scale_an_image_size_gets() {
    let root = fixtures().join("imagefolder");
    let notes = draft_eval(&root, 256, 224, true, true).fusions().join("\n");
    if cfg!(imgfeed_turbo) {
        // resize 256 of 4032x3024: target 341x256, 4032 // 341 = 11, 3024 // 256 = 11 -> 1/8
        assert!(notes.contains("4032x3024 at 1/8 (504x378)"), "{notes}");
        assert!(notes.contains("1920x1080 at 1/4 (480x270)"), "{notes}");
        assert!(notes.contains("500x375 full size"), "{notes}");
    } else {
        assert!(notes.contains("draft ignored"), "{notes}");
    }
    let off = draft_eval(&root, 256, 224, false, true)
        .fusions()
        .join("\n");
    assert!(!off.contains("draft"), "{off}");
}
