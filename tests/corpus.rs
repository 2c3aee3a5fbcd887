//! The bad-file and edge-case corpus (`fixtures/bad/`, `fixtures/edge/`), file by file, with
//! every JPEG decoder built in: each bad file gives exactly its error kind, each edge case
//! decodes to exactly its size and (within JPEG tolerance) its pixels. Also through the
//! engine: a bad file fails its sample with the same kind, naming file and stage.

mod common;

use common::{copy_into, fixtures};
use imgfeed::codec::{Decoder, JpegBackend};
use imgfeed::ops::Decode;
use imgfeed::ops::Op;
use imgfeed::{EngineConfig, Error, OnError, Pipeline, SampleErrorKind as K, SourceConfig};
use imgfeed::{PipelineConfig, SourceKind};

/// Every file of `fixtures/bad/` and the one error kind it must give.
const BAD: &[(&str, K)] = &[
    ("bomb.jpg", K::TooManyPixels),
    ("bomb.png", K::TooManyPixels),
    ("corrupt_entropy.jpg", K::Corrupt),
    ("empty.jpg", K::Empty),
    ("garbage.jpg", K::UnknownFormat),
    ("header_only.jpg", K::Truncated),
    ("png_bad_crc.png", K::Corrupt),
    ("png_cut_zlib.png", K::Truncated),
    ("png_missing_rows.png", K::Truncated),
    ("text.jpg", K::UnknownFormat),
    ("text.png", K::UnknownFormat),
    ("truncated.jpg", K::Truncated),
    ("truncated.png", K::Truncated),
    ("zlib_bomb.png", K::TooManyPixels),
];

/// The decoders to check: zune-jpeg always, libjpeg-turbo when built in.
fn backends() -> Vec<JpegBackend> {
    let mut v = vec![JpegBackend::Zune];
    if cfg!(imgfeed_libjpeg) {
        v.push(JpegBackend::Libjpeg);
    }
    if cfg!(feature = "turbojpeg") {
        v.push(JpegBackend::Turbo);
    }
    v
}

fn listed(dir: &str, ext_filter: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures().join(dir))
        .expect("fixture folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| ext_filter.iter().any(|e| n.ends_with(e)))
        .collect();
    names.sort();
    names
}

#[test]
fn every_bad_file_has_an_expected_kind() {
    let names = listed("bad", &[".jpg", ".png"]);
    let table: Vec<String> = BAD.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(names, table, "a new bad fixture needs a row in BAD");
}

#[test]
fn bad_files_give_their_error_kind_with_every_decoder() {
    for backend in backends() {
        let mut d = Decoder::new(&Decode::default().decoder(backend));
        let mut out = Vec::new();
        for (name, kind) in BAD {
            let bytes = std::fs::read(fixtures().join("bad").join(name)).expect("read");
            match d.decode(&bytes, &mut out) {
                Ok((h, w)) => panic!("{backend:?}: {name} decoded to {w}x{h}"),
                Err(f) => {
                    assert_eq!(f.kind, *kind, "{backend:?}: {name}: {}", f.reason);
                    assert!(!f.reason.is_empty());
                }
            }
            // Nothing allocated for the bombs: the buffer never grew to the claimed size.
            assert!(
                out.len() < 64 << 20,
                "{backend:?}: {name}: buffer grew to {} bytes",
                out.len()
            );
        }
    }
}

#[test]
fn a_bad_file_does_not_spoil_the_next_decode() {
    // libjpeg-turbo keeps state in its handle: a good file right after each bad one must
    // decode exactly as it does alone.
    let good = std::fs::read(fixtures().join("edge/sampling_420.jpg")).expect("read");
    for backend in backends() {
        let mut alone = Vec::new();
        let size = Decoder::new(&Decode::default().decoder(backend))
            .decode(&good, &mut alone)
            .expect("decodes");
        let mut d = Decoder::new(&Decode::default().decoder(backend));
        let mut out = Vec::new();
        for (name, _) in BAD {
            let bytes = std::fs::read(fixtures().join("bad").join(name)).expect("read");
            assert!(d.decode(&bytes, &mut out).is_err());
            assert_eq!(d.decode(&good, &mut out).expect("good after bad"), size);
            assert_eq!(out[..alone.len()], alone[..], "{backend:?}: after {name}");
        }
    }
}

fn json_u64(v: &serde_json::Value, key: &str) -> usize {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}")) as usize
}

#[test]
fn edge_cases_decode_to_their_size_and_pixels_with_every_decoder() {
    let text = std::fs::read_to_string(fixtures().join("edge/expected.json")).expect("json");
    let expected: serde_json::Value = serde_json::from_str(&text).expect("parse");
    let table = expected.as_object().expect("object");
    let names = listed("edge", &[".jpg", ".png"]);
    let keys: Vec<String> = table.keys().cloned().collect();
    assert_eq!(names, keys, "expected.json must list every edge file");
    assert!(names.len() >= 15, "{names:?}");
    for backend in backends() {
        let mut d = Decoder::new(&Decode::default().decoder(backend));
        let mut out = Vec::new();
        for (name, e) in table {
            let bytes = std::fs::read(fixtures().join("edge").join(name)).expect("read");
            let (h, w) = d
                .decode(&bytes, &mut out)
                .unwrap_or_else(|f| panic!("{backend:?}: {name}: {f} ({:?})", f.kind));
            assert_eq!(
                (w, h),
                (json_u64(e, "width"), json_u64(e, "height")),
                "{backend:?}: {name}"
            );
            let jpeg = name.ends_with(".jpg");
            // JPEG decoders differ in IDCT and chroma upsampling (more at 4:1:1 edges);
            // lossless formats must be exact.
            let (pix_tol, mean_tol) = if jpeg { (24, 2.5) } else { (0, 0.0) };
            let img = &out[..h * w * 3];
            for c in 0..3 {
                let mean = img
                    .iter()
                    .skip(c)
                    .step_by(3)
                    .map(|&v| v as f64)
                    .sum::<f64>()
                    / (h * w) as f64;
                let want = e["mean"][c].as_f64().expect("mean");
                assert!(
                    (mean - want).abs() <= mean_tol + 1e-3,
                    "{backend:?}: {name}: channel {c} mean {mean:.3}, Pillow {want:.3}"
                );
            }
            for p in e["pixels"].as_array().expect("pixels") {
                let (x, y) = (
                    p[0].as_u64().expect("x") as usize,
                    p[1].as_u64().expect("y") as usize,
                );
                for c in 0..3 {
                    let got = img[(y * w + x) * 3 + c] as i64;
                    let want = p[2][c].as_i64().expect("value");
                    assert!(
                        (got - want).abs() <= pix_tol,
                        "{backend:?}: {name}: pixel ({x}, {y}) channel {c}: {got}, Pillow {want}"
                    );
                }
            }
        }
    }
}

fn engine(on_error: OnError) -> EngineConfig {
    EngineConfig::default().workers(2).on_error(on_error)
}

#[test]
fn through_the_engine_each_bad_file_fails_its_sample_with_its_kind() {
    // One folder with every bad file and every edge case: with skip, the batches hold the
    // edge cases and the skipped list is exactly the bad files with their kinds.
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, _) in BAD {
        copy_into(
            dir.path(),
            &format!("bad/{name}"),
            &fixtures().join("bad").join(name),
        );
    }
    let edge = listed("edge", &[".jpg", ".png"]);
    for name in &edge {
        copy_into(
            dir.path(),
            &format!("edge/{name}"),
            &fixtures().join("edge").join(name),
        );
    }
    // Whole-image decode (resize to 8x8), and the fused resize + center_crop for which
    // libjpeg-turbo decodes only a rectangle: a cut or damaged scan below that rectangle
    // must still fail the sample.
    let resize = |size| Op::Resize(imgfeed::ops::Resize::new(size).filter(Default::default()));
    let whole = vec![resize(imgfeed::ops::Size::Two([8, 8]))];
    let region = vec![
        resize(imgfeed::ops::Size::One(16)),
        Op::CenterCrop(imgfeed::ops::CenterCrop::new(imgfeed::ops::Size::One(8))),
    ];
    for (backend, tail) in backends()
        .into_iter()
        .flat_map(|b| [(b, whole.clone()), (b, region.clone())])
    {
        let mut ops = vec![Op::Decode(Decode::default().decoder(backend))];
        ops.extend(tail);
        let cfg = PipelineConfig::new(
            SourceConfig::new(SourceKind::ImageFolder, dir.path()),
            ops,
            imgfeed::BatchConfig::new(4),
        )
        .engine(engine(OnError::Skip));
        let p = Pipeline::new(cfg).expect("pipeline");
        let mut kept = 0;
        let mut skipped: Vec<(String, &'static str, K)> = Vec::new();
        for b in p.epoch(0) {
            let b = b.expect("skip mode never fails a batch");
            kept += b.len();
            for e in b.skipped() {
                match e {
                    Error::Sample {
                        file, stage, kind, ..
                    } => skipped.push((file.clone(), stage, *kind)),
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(kept, edge.len(), "{backend:?}");
        let want: Vec<(String, &'static str, K)> = BAD
            .iter()
            .map(|(n, k)| (format!("bad/{n}"), "decode", *k))
            .collect();
        assert_eq!(skipped, want, "{backend:?}");
    }
}

#[test]
fn a_file_over_max_file_bytes_fails_on_its_size_before_it_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let edge = fixtures().join("edge");
    copy_into(dir.path(), "a/small.jpg", &edge.join("one_pixel.jpg")); // 634 bytes
    copy_into(dir.path(), "a/large.jpg", &edge.join("wide_2000x50.jpg")); // 11654 bytes
    let source = SourceConfig::from(imgfeed::Dataset::ImageFolder(
        imgfeed::source::ImageFolderConfig::new(dir.path()).max_file_bytes(1000),
    ));
    let cfg = PipelineConfig::new(
        source,
        vec![
            Op::Decode(Decode::default()),
            Op::CenterCrop(imgfeed::ops::CenterCrop::new(imgfeed::ops::Size::One(1))),
        ],
        imgfeed::BatchConfig::new(2),
    )
    .engine(engine(OnError::Error));
    let p = Pipeline::new(cfg).expect("pipeline");
    let err = p
        .epoch(0)
        .next()
        .expect("a batch")
        .expect_err("large.jpg is refused");
    match &err {
        Error::Sample {
            file,
            stage,
            kind,
            reason,
            ..
        } => {
            assert_eq!(
                (file.as_str(), *stage, *kind),
                ("a/large.jpg", "read", K::FileTooLarge)
            );
            assert!(
                reason.contains("11654") && reason.contains("1000"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("a/large.jpg") && text.contains("read"),
        "{text}"
    );
}

#[test]
fn max_file_bytes_applies_to_image_folder_only() {
    // A cifar10 source has no such field: in code there is nowhere to put it, and in a
    // pipeline file it is an error naming the field and the kind.
    let text =
        "[source]\nkind = \"cifar10\"\nroot = \"c\"\nmax_file_bytes = 10\n[batch]\nsize = 2\n";
    match PipelineConfig::parse(text, std::path::Path::new("p.toml")) {
        Err(Error::Config { message, .. }) => assert!(
            message.contains("unknown field `max_file_bytes`")
                && message.contains("kind = \"cifar10\""),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
}

/// Headers alone, claiming huge images, for the formats without a bomb fixture.
fn bmp_header(w: i32, h: i32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"BM");
    b.extend_from_slice(&54u32.to_le_bytes()); // file size (a lie: no pixel data)
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&54u32.to_le_bytes());
    b.extend_from_slice(&40u32.to_le_bytes());
    b.extend_from_slice(&w.to_le_bytes());
    b.extend_from_slice(&h.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&24u16.to_le_bytes());
    b.extend_from_slice(&[0; 24]);
    b
}

/// The lossless WebP fixture with its VP8L header patched to claim `w × h`.
fn webp_claiming(w: u32, h: u32) -> Vec<u8> {
    let mut b = std::fs::read(fixtures().join("formats/lossless.webp")).expect("read");
    assert_eq!(
        (&b[12..16], b[20]),
        (&b"VP8L"[..], 0x2f),
        "simple lossless layout"
    );
    let old = u32::from_le_bytes([b[21], b[22], b[23], b[24]]);
    let bits = (old & !((1 << 28) - 1)) | (w - 1) | ((h - 1) << 14);
    b[21..25].copy_from_slice(&bits.to_le_bytes());
    b
}

#[test]
fn bmp_and_webp_headers_over_the_pixel_limit_are_refused_before_decoding() {
    let mut d = Decoder::new(&Decode::default());
    let mut out = Vec::new();
    for (what, bytes, size) in [
        ("bmp", bmp_header(20_000, 20_000), "20000x20000"),
        ("bmp top-down", bmp_header(20_000, -20_000), "20000x20000"),
        (
            "bmp past its format limit",
            bmp_header(100_000, 100_000),
            "100000",
        ),
        ("webp", webp_claiming(16_383, 16_383), "16383x16383"),
    ] {
        let f = d.decode(&bytes, &mut out).expect_err(what);
        assert_eq!(f.kind, K::TooManyPixels, "{what}: {}", f.reason);
        assert!(f.reason.contains(size), "{what}: {}", f.reason);
        assert!(out.is_empty(), "{what}: allocated {}", out.len());
        // and the header inspector reads the same size
        let info = imgfeed::codec::inspect::inspect(&bytes).expect(what);
        let dims = format!("{}x{}", info.width, info.height);
        assert!(dims.starts_with(size), "{what}: {dims}");
    }
    // Under a lower limit, a small valid image is refused the same way.
    let mut small = Decoder::new(&Decode::default().max_pixels(100));
    for name in ["image.bmp", "lossless.webp", "rgb.jpg", "palette.png"] {
        let bytes = std::fs::read(fixtures().join("formats").join(name)).expect("read");
        let f = small.decode(&bytes, &mut out).expect_err(name);
        assert_eq!(f.kind, K::TooManyPixels, "{name}: {}", f.reason);
    }
}

/// `fixtures/tolerated/`: metadata damage Pillow decodes without complaint (junk before a
/// marker, an ICC segment after the frame header, a short APP14). Each file decodes to
/// exactly `clean.jpg`'s pixels — with every decoder that accepts it, and libjpeg-turbo's
/// must (zune-jpeg's result for each is asserted as it stands, so a change shows).
#[test]
fn metadata_damage_decodes_to_the_clean_pixels() {
    let dir = fixtures().join("tolerated");
    let files = listed("tolerated", &["jpg"]);
    assert_eq!(
        files,
        [
            "clean.jpg",
            "icc_after_sof.jpg",
            "junk_before_dqt.jpg",
            "short_app14.jpg"
        ]
    );
    for backend in backends() {
        let mut d = Decoder::new(&Decode::default().decoder(backend));
        let mut clean = Vec::new();
        let size = d
            .decode(
                &std::fs::read(dir.join("clean.jpg")).expect("read"),
                &mut clean,
            )
            .expect("clean.jpg decodes");
        clean.truncate(size.0 * size.1 * 3);
        for name in files.iter().filter(|n| *n != "clean.jpg") {
            let bytes = std::fs::read(dir.join(name)).expect("read");
            let mut out = Vec::new();
            // zune-jpeg's strict mode, which makes a truncated file an error, also refuses
            // bytes between headers, and zune-jpeg refuses a short APP14 in any mode;
            // libjpeg-turbo warns and goes on, as Pillow does.
            let refused = backend == JpegBackend::Zune
                && matches!(name.as_str(), "junk_before_dqt.jpg" | "short_app14.jpg");
            match d.decode(&bytes, &mut out) {
                Ok(got) if !refused => {
                    assert_eq!(got, size, "{backend:?}: {name}");
                    out.truncate(got.0 * got.1 * 3);
                    assert!(
                        out == clean,
                        "{backend:?}: {name}: pixels differ from clean.jpg"
                    );
                }
                Err(f) if refused => assert_eq!(f.kind, K::Corrupt, "{}", f.reason),
                Ok(_) => panic!("{backend:?}: {name} now decodes: update this test and the README"),
                Err(f) => panic!("{backend:?}: {name} refused: {} ({:?})", f.reason, f.kind),
            }
        }
    }
}

/// A CMYK JPEG becomes RGB exactly as Pillow's `convert("RGB")` makes it, with the system
/// libjpeg-turbo (`edge/cmyk_pillow.rgb` is Pillow's output, written by the generator).
#[cfg(imgfeed_libjpeg)]
#[test]
fn cmyk_converts_as_pillow_does() {
    let bytes = std::fs::read(fixtures().join("edge/cmyk.jpg")).expect("read");
    let want = std::fs::read(fixtures().join("edge/cmyk_pillow.rgb")).expect("read");
    let mut d = Decoder::new(&Decode::default().decoder(JpegBackend::Libjpeg));
    let mut out = Vec::new();
    let (h, w) = d.decode(&bytes, &mut out).expect("decodes");
    assert_eq!((h, w), (43, 61));
    out.truncate(h * w * 3);
    let max = out.iter().zip(&want).map(|(a, b)| a.abs_diff(*b)).max();
    assert_eq!(out.len(), want.len());
    assert!(out == want, "max difference from Pillow {max:?}");
    // And as RGBX for the fused paths: the same colours, 4 bytes a pixel.
    let rgbx = d
        .decode_region(&bytes, |_, _| 1, |_, _| None, true, &mut out)
        .expect("decodes");
    assert_eq!(rgbx.channels, 4);
    let packed: Vec<u8> = out[..h * w * 4]
        .chunks_exact(4)
        .flat_map(|p| [p[0], p[1], p[2]])
        .collect();
    assert!(packed == want);
}

/// A PNG whose PLTE chunk is not a whole number of RGB entries: the `png` crate panics on
/// it (found by fuzzing); imgfeed refuses it as damaged data, with both a 4- and a 0-byte
/// palette, and decodes the same file with a valid 3-byte one.
#[test]
fn a_png_palette_of_the_wrong_length_is_corrupt_not_a_panic() {
    fn chunk(kind: &[u8], data: &[u8]) -> Vec<u8> {
        let mut c = (data.len() as u32).to_be_bytes().to_vec();
        c.extend_from_slice(kind);
        c.extend_from_slice(data);
        let mut h = crc32fast::Hasher::new();
        h.update(kind);
        h.update(data);
        c.extend_from_slice(&h.finalize().to_be_bytes());
        c
    }
    // 1×1, 8-bit palette; the one pixel is index 0 (zlib stream of the row [filter 0, 0]).
    let png = |palette: &[u8]| {
        let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
        b.extend(chunk(b"IHDR", &[0, 0, 0, 1, 0, 0, 0, 1, 8, 3, 0, 0, 0]));
        b.extend(chunk(b"PLTE", palette));
        b.extend(chunk(
            b"IDAT",
            &[0x78, 0x9c, 0x63, 0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01],
        ));
        b.extend(chunk(b"IEND", &[]));
        b
    };
    let mut d = Decoder::new(&Decode::default());
    let mut out = Vec::new();
    assert_eq!(d.decode(&png(&[10, 20, 30]), &mut out), Ok((1, 1)));
    assert_eq!(out[..3], [10, 20, 30]);
    for bad in [&[10u8, 20, 30, 40][..], &[][..]] {
        let f = d.decode(&png(bad), &mut out).expect_err("a bad palette");
        assert_eq!(f.kind, K::Corrupt, "{}", f.reason);
        assert!(f.reason.contains("PLTE"), "{}", f.reason);
    }
}
