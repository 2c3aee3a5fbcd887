//! Deterministic mutation fuzzing of every parser of untrusted bytes: the image decoders
//! (JPEG, PNG, BMP, WebP), CIFAR records, CIFAR pickles (torchvision's layout), WebDataset
//! tar indexes and pipeline files. Each mutant must give `Ok` or a typed error — never a panic, a hang or an
//! unbounded allocation. (Coverage-guided fuzzing of the same entry points: `fuzz/`, with
//! cargo-fuzz on a nightly toolchain.)

use imgfeed::codec::{Decoder, JpegBackend};
use imgfeed::ops::Decode;
use imgfeed::rng::SplitMix64;
use imgfeed::source::{parse_cifar_pickle, CifarKind, PIXELS_PER_RECORD};
use imgfeed::{PipelineConfig, SampleErrorKind, SourceKind};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// A few byte-level mutations: flips, overwrites with interesting values, truncation,
/// duplication of a span.
fn mutate(seed: &[u8], g: &mut SplitMix64) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..=g.below(4) {
        if v.is_empty() {
            break;
        }
        let i = g.below(v.len() as u64) as usize;
        match g.below(5) {
            0 => v[i] ^= 1 << g.below(8),
            1 => v[i] = [0x00, 0xFF, 0x7F, 0x80, 0xD8, 0xD9, 0xC0, 0xDA][g.below(8) as usize],
            2 => v.truncate(i.max(1)),
            3 => {
                let n = (g.below(64) as usize).min(v.len() - i);
                let span = v[i..i + n].to_vec();
                v.splice(i..i, span);
            }
            _ => {
                // big-endian 16-bit size fields (JPEG SOF, PNG IHDR) set to extremes
                if i + 1 < v.len() {
                    let x = [0u16, 1, 0x7FFF, 0xFFFF][g.below(4) as usize].to_be_bytes();
                    v[i] = x[0];
                    v[i + 1] = x[1];
                }
            }
        }
    }
    v
}

#[test]
fn mutated_images_never_panic() {
    let files = [
        "formats/rgb.jpg",
        "formats/progressive.jpg",
        "formats/gray.jpg",
        "formats/cmyk.jpg",
        "formats/palette.png",
        "formats/rgb16.png",
        "formats/rgba.png",
        "formats/image.bmp",
        "formats/lossless.webp",
    ];
    let mut g = SplitMix64::new(0x1337);
    let mut ok = 0;
    let mut errors = 0;
    for backend in [JpegBackend::Zune, JpegBackend::Auto] {
        let mut d = Decoder::new(&Decode::default().decoder(backend).max_pixels(1 << 22));
        let mut out = Vec::new();
        for f in files {
            let seed = std::fs::read(fixtures().join(f)).expect("fixture");
            for _ in 0..150 {
                let m = mutate(&seed, &mut g);
                match d.decode(&m, &mut out) {
                    Ok((h, w)) => {
                        assert!(h * w <= 1 << 22, "{f}: {h}x{w} past the pixel limit");
                        assert!(out.len() >= h * w * 3, "{f}: buffer shorter than the image");
                        ok += 1;
                    }
                    Err(e) => {
                        assert!(!e.reason.is_empty());
                        // A panic caught by the decoder's guard is still a panic: a bug.
                        assert_ne!(
                            e.kind,
                            SampleErrorKind::Panic,
                            "{backend:?} {f}: {}",
                            e.reason
                        );
                        errors += 1;
                    }
                }
            }
        }
    }
    // The mutations must exercise both outcomes, or the test proves nothing.
    assert!(ok > 100 && errors > 100, "ok {ok}, errors {errors}");
}

#[test]
fn mutated_cifar_files_give_errors_not_panics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seed = std::fs::read(fixtures().join("cifar10/test_batch.bin")).expect("fixture");
    let mut g = SplitMix64::new(7);
    let mut outcomes = [0usize; 2];
    for round in 0..60 {
        let m = mutate(&seed, &mut g);
        std::fs::write(dir.path().join("test_batch.bin"), &m).expect("write");
        let mut cfg = PipelineConfig::parse(
            "[source]\nkind = \"cifar10\"\nroot = \".\"\nusage = \"test\"\n[batch]\nsize = 2\n",
            Path::new("x.toml"),
        )
        .expect("parses");
        cfg.source
            .dataset
            .root_mut()
            .clone_from(&dir.path().to_path_buf());
        match imgfeed::Pipeline::new(cfg) {
            Err(e) => {
                assert!(
                    e.to_string().contains("test_batch.bin"),
                    "round {round}: {e}"
                );
                outcomes[0] += 1;
            }
            Ok(p) => {
                for b in p.epoch(0) {
                    if let Err(e) = b {
                        assert!(
                            e.to_string().contains("test_batch.bin:"),
                            "round {round}: {e}"
                        );
                        assert_ne!(
                            e.sample_kind(),
                            Some(SampleErrorKind::Panic),
                            "round {round}: {e}"
                        );
                    }
                }
                outcomes[1] += 1;
            }
        }
    }
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}

#[test]
fn mutated_cifar_pickles_never_panic() {
    let seeds = [
        "cifar10_py/test_batch",
        "cifar100_py/test",
        "cifar_py_variants/cifar10/proto2_py3/test_batch",
        "cifar_py_variants/cifar100/proto4/test",
        "cifar_py_variants/cifar10/proto5/test_batch",
    ];
    let mut g = SplitMix64::new(11);
    let (mut ok, mut errors) = (0, 0);
    for f in seeds {
        let seed = std::fs::read(fixtures().join(f)).expect("fixture");
        for _ in 0..300 {
            let m = mutate(&seed, &mut g);
            for kind in [CifarKind::Cifar10, CifarKind::Cifar100] {
                match parse_cifar_pickle(&m, kind) {
                    Ok(p) => {
                        ok += 1;
                        for r in 0..p.len() {
                            assert_eq!(
                                p.record(&m, r).map(<[u8]>::len),
                                Some(PIXELS_PER_RECORD),
                                "{f}"
                            );
                        }
                    }
                    Err(e) => {
                        errors += 1;
                        assert!(!e.to_string().is_empty());
                    }
                }
            }
        }
    }
    // The mutations must exercise both outcomes, or the test proves nothing.
    assert!(ok > 100 && errors > 100, "ok {ok}, errors {errors}");
}

#[test]
fn mutated_pipeline_files_give_config_errors_not_panics() {
    let seed =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/resnet50_eval.toml"))
            .expect("pipeline file");
    let mut g = SplitMix64::new(99);
    let mut errors = 0;
    for _ in 0..400 {
        let m = mutate(&seed, &mut g);
        let text = String::from_utf8_lossy(&m);
        match PipelineConfig::parse(&text, Path::new("mutant.toml")) {
            Ok(mut cfg) => {
                // Parsed: building may still refuse it, but must not panic.
                *cfg.source.dataset.root_mut() = fixtures().join("imagefolder");
                if cfg.source.kind() == SourceKind::ImageFolder {
                    let _ = imgfeed::Pipeline::new(cfg);
                }
            }
            Err(e) => {
                assert!(e.is_usage(), "{e}");
                errors += 1;
            }
        }
    }
    assert!(errors > 50, "only {errors} mutants were rejected");
}

/// TFRecord frames around `payloads`, with correct CRCs (so mutations reach the parser of
/// the examples, not only the CRC check).
fn tfrecord_frames(payloads: &[Vec<u8>]) -> Vec<u8> {
    use imgfeed::formats::crc32c::masked;
    let mut out = Vec::new();
    for p in payloads {
        let len = (p.len() as u64).to_le_bytes();
        out.extend_from_slice(&len);
        out.extend_from_slice(&masked(&len).to_le_bytes());
        out.extend_from_slice(p);
        out.extend_from_slice(&masked(p).to_le_bytes());
    }
    out
}

#[test]
fn mutated_record_files_give_errors_not_panics() {
    use imgfeed::formats::{mindrecord, tfrecord};
    let seed = std::fs::read(fixtures().join("records/small.tfrecord")).expect("fixture");
    let opts = tfrecord::TfRecordOptions::default();
    let payloads: Vec<Vec<u8>> = tfrecord::frames(&seed)
        .map(|f| {
            let f = f.expect("fixture frames");
            seed[f.data as usize..(f.data + f.len) as usize].to_vec()
        })
        .collect();
    let mut g = SplitMix64::new(30);
    let (mut ok, mut errors) = (0, 0);
    for round in 0..600 {
        // Half the rounds mutate the framing, half the examples under correct CRCs.
        let bytes = if round % 2 == 0 {
            mutate(&seed, &mut g)
        } else {
            let mut ps = payloads.clone();
            let k = g.below(ps.len() as u64) as usize;
            ps[k] = mutate(&ps[k], &mut g);
            tfrecord_frames(&ps)
        };
        match tfrecord::index(&bytes, &opts) {
            Ok(entries) => {
                ok += 1;
                for e in entries {
                    assert!(e.offset + e.len <= bytes.len() as u64);
                }
            }
            Err(e) => {
                errors += 1;
                assert!(e.to_string().starts_with("record "), "{e}");
            }
        }
    }
    assert!(
        ok > 20 && errors > 100,
        "tfrecord: ok {ok}, errors {errors}"
    );

    let file = fixtures().join("records/multi_blob.mindrecord");
    let seed = std::fs::read(&file).expect("fixture");
    let opts = mindrecord::MindRecordOptions::default();
    let header = mindrecord::read_header(&seed).expect("fixture header");
    let pages = header.header_size as usize;
    let (mut ok, mut errors) = (0, 0);
    for round in 0..600 {
        // The header, or the pages (keeping the header).
        let bytes = if round % 2 == 0 {
            mutate(&seed, &mut g)
        } else {
            let mut b = seed[..pages].to_vec();
            // The pages' used bytes only: mutating the zero padding proves little.
            let used: Vec<u8> = seed[pages..].to_vec();
            b.extend(mutate(&used, &mut g));
            b
        };
        match mindrecord::index(&bytes, &opts) {
            Ok(entries) => {
                ok += 1;
                for e in entries {
                    assert!(e.offset + e.len <= bytes.len() as u64);
                }
            }
            Err(e) => {
                errors += 1;
                assert!(!e.to_string().is_empty(), "{e}");
            }
        }
    }
    assert!(
        ok > 20 && errors > 100,
        "mindrecord: ok {ok}, errors {errors}"
    );
}

#[test]
fn mutated_tars_index_inside_the_file_or_fail_typed() {
    use imgfeed::formats::tar::WebDataset;
    use imgfeed::formats::RecordFormat;
    let mut g = SplitMix64::new(17);
    let (mut ok, mut errors) = (0, 0);
    for f in ["webdataset/pax.tar", "webdataset/gnu.tar"] {
        let seed = std::fs::read(fixtures().join(f)).expect("fixture");
        assert_eq!(
            WebDataset::default().index(&seed).map(|e| e.len()),
            Ok(2),
            "{f}"
        );
        for _ in 0..2000 {
            let m = mutate(&seed, &mut g);
            match WebDataset::default().index(&m) {
                Ok(entries) => {
                    ok += 1;
                    for e in entries {
                        assert!(
                            e.offset
                                .checked_add(e.len)
                                .is_some_and(|end| end <= m.len() as u64),
                            "{f}: {e:?}"
                        );
                    }
                }
                Err(e) => {
                    errors += 1;
                    assert!(!e.to_string().is_empty());
                }
            }
        }
    }
    assert!(ok > 0 && errors > 0, "{ok} indexed, {errors} errors");
}

#[test]
fn mutated_parquet_files_give_errors_not_panics() {
    use imgfeed::formats::parquet::{index, unpack, ParquetOptions};
    // Written by HF `datasets` (fixtures/records/make_records.py parquet).
    let seed = std::fs::read(fixtures().join("records/small.parquet")).expect("fixture");
    let opts = ParquetOptions::default();
    let mut whole = Vec::new();
    unpack(&seed, &opts, &mut whole).expect("the fixture unpacks");
    let mut g = SplitMix64::new(31);
    let (mut ok, mut errors) = (0, 0);
    let mut copy = Vec::new();
    for round in 0..600 {
        // Half the rounds mutate the Parquet file, half its unpacked copy.
        if round % 2 == 0 {
            let bytes = mutate(&seed, &mut g);
            copy.clear();
            match unpack(&bytes, &opts, &mut copy) {
                Ok(()) => {
                    ok += 1;
                    let entries = index(&copy).expect("an unpacked copy indexes");
                    assert!(entries
                        .iter()
                        .all(|e| e.offset + e.len <= copy.len() as u64));
                    // Read in place (range mode's index): inside the file, decoding or
                    // failing, never a panic.
                    let here = imgfeed::formats::RecordFormat::in_place(
                        &imgfeed::formats::parquet::Parquet::default(),
                        &bytes,
                        &entries,
                    );
                    for e in here.unwrap_or_default() {
                        assert!(e.offset + e.len <= bytes.len() as u64);
                        let mut buf =
                            bytes[e.offset as usize..(e.offset + e.len) as usize].to_vec();
                        let n = buf.len();
                        let _ = e.stored.image(&mut buf, 0..n);
                    }
                }
                Err(e) => {
                    errors += 1;
                    assert!(!e.to_string().is_empty());
                }
            }
        } else {
            let bytes = mutate(&whole, &mut g);
            match index(&bytes) {
                Ok(entries) => {
                    ok += 1;
                    assert!(entries
                        .iter()
                        .all(|e| e.offset + e.len <= bytes.len() as u64));
                }
                Err(e) => {
                    errors += 1;
                    assert!(!e.to_string().is_empty());
                }
            }
        }
    }
    assert!(ok > 20 && errors > 100, "parquet: ok {ok}, errors {errors}");
}
