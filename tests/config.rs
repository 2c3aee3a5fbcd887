//! Pipeline files and pipeline checks: parse errors with line numbers, invalid op orders,
//! relative roots, the canonical file, and how ImageFolder lists a dataset.

mod common;

use common::*;
use imgfeed::codec::JpegBackend;
use imgfeed::imgproc::Filter;
use imgfeed::ops::{CenterCrop, Decode, HwcToChw, Normalize, Op, Resize, Size, TypeCast};
use imgfeed::source::{ImageFolder, ImageFolderConfig, Source};
use imgfeed::{
    DType, Dataset, Error, LabelType, Layout, Pipeline, PipelineConfig, SourceConfig, SourceKind,
    SpecError,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const HEAD: &str = "[source]\nkind = \"image_folder\"\nroot = \"data\"\n\n";
const TAIL: &str = "\n[batch]\nsize = 2\n";

fn parse(text: &str) -> Result<PipelineConfig, Error> {
    PipelineConfig::parse(text, Path::new("/cfg/dir/p.toml"))
}

/// The message of a Config error (and checks its path and usage class).
fn config_error(text: &str) -> String {
    match parse(text) {
        Err(e @ Error::Config { .. }) => {
            assert!(e.is_usage(), "config errors are usage errors");
            let Error::Config { path, message } = &e else {
                unreachable!()
            };
            assert_eq!(path, Path::new("/cfg/dir/p.toml"));
            assert!(
                e.to_string().starts_with("pipeline file /cfg/dir/p.toml: "),
                "{e}"
            );
            message.clone()
        }
        Err(other) => panic!("expected a Config error, got {other:?}"),
        Ok(cfg) => panic!("expected a Config error, parsed {cfg:?}"),
    }
}

// ---- parse errors -------------------------------------------------------------------------

#[test]
fn unknown_field_in_an_op_names_field_and_line() {
    let m = config_error(&format!(
        "{HEAD}[[ops]]\nop = \"resize\"\nsizee = 256\n{TAIL}"
    ));
    assert!(m.contains("sizee"), "{m}");
    assert!(
        m.contains("at line 7, column 1"),
        "`sizee` is on line 7 (its [[ops]] table starts on line 5): {m}"
    );
    // the fields it does take are listed
    assert!(m.contains("`size`") && m.contains("`filter`"), "{m}");
}

#[test]
fn a_mistake_in_a_later_op_is_reported_at_that_op() {
    // lines 1-4 [source]; 5 [[ops]] decode; 8 [[ops]] resize; 12 [[ops]] type_cast
    let ops = "[[ops]]\nop = \"decode\"\n\n[[ops]]\nop = \"resize\"\nsize = 256\n\n\
               [[ops]]\nop = \"type_cast\"\ncolumn = \"label\"\ndtyp = \"int32\"\n";
    let m = config_error(&format!("{HEAD}{ops}{TAIL}"));
    assert!(m.contains("dtyp"), "{m}");
    assert!(
        m.contains("ops[2] (type_cast) at line 15, column 1"),
        "`dtyp` is on line 15, in the third op's table (line 12), not the first's (line 5): {m}"
    );
    // A bad value too: the second op's size.
    let bad = ops.replace("size = 256", "size = \"big\"");
    let m = config_error(&format!("{HEAD}{bad}{TAIL}"));
    assert!(m.contains("ops[1] (resize) at line 8"), "{m}");
}

/// An op that parses but cannot run (a value out of range, an input it cannot take) is an
/// `Error::Op` naming the op, pointing at the parameter's line when there is one, else at
/// the op's table.
#[test]
fn an_op_out_of_range_points_at_its_parameter_or_its_table() {
    // lines 1-3 [source] (root: the fixtures); 5 [[ops]] decode; 8 [[ops]] resize, 11 size;
    // 13 [[ops]] hwc_to_chw; 16 [[ops]] hwc_to_chw again (already CHW)
    let root = fixtures().join("imagefolder");
    let head = format!("[source]\nkind = \"image_folder\"\nroot = {:?}\n\n", root);
    let ops =
        "[[ops]]\nop = \"decode\"\n\n[[ops]]\nop = \"resize\"\nfilter = \"bilinear\"\nsize = 0\n\n\
               [[ops]]\nop = \"hwc_to_chw\"\n\n[[ops]]\nop = \"hwc_to_chw\"\n";
    let build = |text: &str| {
        let cfg = PipelineConfig::parse(text, Path::new("/p/x.toml")).expect("parses");
        Pipeline::new(cfg).expect_err("does not build")
    };
    let e = build(&format!("{head}{ops}{TAIL}"));
    match &e {
        Error::Op {
            index: 1,
            op: "resize",
            reason: SpecError::Param { name: "size", .. },
            at: Some(at),
        } => assert_eq!((at.line, at.column), (11, 1), "{e}"),
        other => panic!("expected Error::Op for ops[1] at its size, got {other:?}"),
    }
    assert!(
        e.to_string()
            .contains("/p/x.toml:11:1: ops[1] (resize): size: must be positive"),
        "{e}"
    );
    assert!(e.is_usage());
    let e = build(&format!(
        "{head}{}{TAIL}",
        ops.replace("size = 0", "size = 8")
    ));
    match &e {
        Error::Op {
            index: 3,
            op: "hwc_to_chw",
            reason: SpecError::Input(_),
            at: Some(at),
        } => assert_eq!((at.line, at.column), (16, 1), "{e}"),
        other => panic!("expected Error::Op for ops[3] at its table, got {other:?}"),
    }
    // Built in code, the same error has no place.
    let cfg = PipelineConfig::parse(&format!("{head}{ops}{TAIL}"), Path::new("/p/x.toml"))
        .expect("parses");
    let code = Pipeline::new(PipelineConfig::new(cfg.source, cfg.ops, cfg.batch)).expect_err("no");
    assert!(
        matches!(
            code,
            Error::Op {
                index: 1,
                at: None,
                ..
            }
        ),
        "{code:?}"
    );
}

#[test]
fn unknown_op_name_is_reported_with_its_line() {
    let m = config_error(&format!(
        "{HEAD}[[ops]]\nop = \"resise\"\nsize = 256\n{TAIL}"
    ));
    assert!(m.contains("resise"), "{m}");
    assert!(m.contains("line 6"), "{m}");
    assert!(m.contains("`resize`"), "the known ops are listed: {m}");
}

#[test]
fn unknown_fields_in_other_tables_are_errors() {
    // lines: 1-3 [source], 4 blank, 5 blank, 6 [batch], 7 size, 8 blank, 9 [extra]
    let m = config_error(&format!("{HEAD}{TAIL}\n[extra]\na = 1\n"));
    assert!(m.contains("extra") && m.contains("line 9"), "{m}");
    let m = config_error(
        "[source]\nkind = \"image_folder\"\nroot = \"data\"\nshufle = true\n[batch]\nsize = 2\n",
    );
    assert!(m.contains("shufle") && m.contains("line 4"), "{m}");
    let m = config_error(&format!("{HEAD}[batch]\nsize = 2\ndrop_reminder = true\n"));
    assert!(m.contains("drop_reminder"), "{m}");
    let m = config_error(&format!("{HEAD}{TAIL}[engine]\nthreads = 4\n"));
    assert!(m.contains("threads"), "{m}");
    let m = config_error("[source]\nkind = \"imagefolder\"\nroot = \"data\"\n[batch]\nsize = 2\n");
    assert!(
        m.contains("imagefolder") && m.contains("line 2"),
        "unknown source kind: {m}"
    );
}

#[test]
fn missing_required_fields_are_named() {
    let m = config_error(&format!("{HEAD}[[ops]]\nop = \"resize\"\n{TAIL}"));
    assert!(m.contains("missing field `size`"), "{m}");
    assert!(m.contains("line"), "{m}");
    let m = config_error(HEAD);
    assert!(m.contains("missing field `batch`"), "{m}");
    // `root` may be left out (the command line's --data gives it): opening asks for it
    let cfg = parse("[source]\nkind = \"image_folder\"\n[batch]\nsize = 2\n").expect("parses");
    assert_eq!(cfg.source.root(), Path::new(""));
    let Err(e) = cfg.source.open() else {
        panic!("opened a source without a root")
    };
    assert!(
        e.is_usage() && e.to_string().contains("no dataset root"),
        "{e}"
    );
    let m = config_error(&format!("{HEAD}[[ops]]\nop = \"type_cast\"\n{TAIL}"));
    assert!(m.contains("missing field `dtype`"), "{m}");
}

#[test]
fn wrong_value_types_are_errors() {
    let m = config_error(&format!(
        "{HEAD}[[ops]]\nop = \"resize\"\nsize = \"big\"\n{TAIL}"
    ));
    assert!(m.contains("line"), "{m}");
    let m = config_error(&format!(
        "{HEAD}[[ops]]\nop = \"resize\"\nsize = 256\nfilter = \"lanczos\"\n{TAIL}"
    ));
    assert!(m.contains("lanczos"), "{m}");
    let m = config_error(&format!(
        "{HEAD}[[ops]]\nop = \"type_cast\"\ndtype = \"int16\"\n{TAIL}"
    ));
    assert!(m.contains("int16"), "{m}");
    let m =
        config_error("[source]\nkind = \"image_folder\"\nroot = \"data\"\n[batch]\nsize = -1\n");
    assert!(m.contains("line 5"), "{m}");
}

#[test]
fn a_missing_pipeline_file_is_a_config_error() {
    let e = Pipeline::from_file("/definitely/not/here.toml").expect_err("no such file");
    assert!(
        matches!(&e, Error::Config { path, .. } if path == Path::new("/definitely/not/here.toml")),
        "{e:?}"
    );
    assert!(e.is_usage());
}

// ---- invalid pipelines (parse, but cannot run) ------------------------------------------------

fn fixture_source() -> SourceConfig {
    folder_source(&fixtures().join("imagefolder"))
}

fn invalid(ops: Vec<Op>) -> String {
    let mut b = Pipeline::builder(fixture_source())
        .batch(4, false)
        .workers(1);
    for op in ops {
        b = b.op(op);
    }
    match b.build() {
        Err(e @ (Error::Invalid(_) | Error::Op { .. })) => {
            assert!(e.is_usage(), "invalid pipelines are usage errors");
            assert!(e.to_string().starts_with("invalid pipeline: "), "{e}");
            e.to_string()
        }
        Err(other) => panic!("expected Error::Invalid, got {other:?}"),
        Ok(p) => panic!("expected Error::Invalid, built {p:?}"),
    }
}

#[test]
fn ops_in_an_invalid_order_are_rejected_before_reading_pixels() {
    let m = invalid(vec![
        normalize([0.0; 3], [1.0; 3]),
        decode(),
        center_crop(4, 4),
    ]);
    assert!(
        m.contains("ops[0] (normalize)") && m.contains("decode"),
        "{m}"
    );
    let m = invalid(vec![
        decode(),
        center_crop(8, 8),
        hwc_to_chw(),
        resize_exact(4, 4, Filter::Bilinear),
    ]);
    assert!(m.contains("ops[3] (resize)") && m.contains("HWC"), "{m}");
    let m = invalid(vec![decode(), normalize([0.0; 3], [1.0; 3])]);
    assert!(m.contains("batched"), "sizes vary without a crop: {m}");
    let m = invalid(vec![decode(), resize_short(64, Filter::Bilinear)]);
    assert!(
        m.contains("batched"),
        "a shorter-side resize leaves sizes varying: {m}"
    );
    let m = invalid(vec![center_crop(4, 4)]);
    assert!(
        m.contains("ops[0] (center_crop)") && m.contains("encoded"),
        "{m}"
    );
    let m = invalid(vec![]);
    assert!(m.contains("decode"), "no ops at all: {m}");
    let m = invalid(vec![decode(), decode(), center_crop(4, 4)]);
    assert!(m.contains("ops[1] (decode)"), "{m}");
    let m = invalid(vec![
        decode(),
        center_crop(8, 8),
        hwc_to_chw(),
        hwc_to_chw(),
    ]);
    assert!(m.contains("ops[3] (hwc_to_chw)"), "{m}");
}

#[test]
fn bad_op_parameters_are_rejected() {
    let m = invalid(vec![
        decode(),
        center_crop(4, 4),
        normalize_n(vec![1.0, 2.0], vec![1.0, 1.0]),
    ]);
    assert!(
        m.contains("ops[2] (normalize)") && m.contains("3 values"),
        "{m}"
    );
    let m = invalid(vec![
        decode(),
        center_crop(4, 4),
        normalize([0.0; 3], [1.0, 0.0, 1.0]),
    ]);
    assert!(m.contains("non-zero"), "{m}");
    let m = invalid(vec![decode(), center_crop(4, 4), flip(1.5)]);
    assert!(m.contains("1.5"), "{m}");
    let m = invalid(vec![decode(), center_crop(0, 4)]);
    assert!(m.contains("positive"), "{m}");
    let m = invalid(vec![
        decode(),
        resize_exact(10, 10, Filter::Nearest),
        random_crop(12, 12, 0, 0),
    ]);
    assert!(
        m.contains("ops[2] (random_crop)") && m.contains("larger"),
        "{m}"
    );
    let m = invalid(vec![
        decode(),
        center_crop(4, 4),
        Op::TypeCast(TypeCast::new(LabelType::I32).column("image".into())),
    ]);
    assert!(m.contains("image"), "{m}");
    let m = invalid(vec![
        Op::Decode(Decode::default().decoder(JpegBackend::Auto).max_pixels(0)),
        center_crop(4, 4),
    ]);
    assert!(m.contains("max_pixels"), "{m}");
}

#[cfg(not(feature = "turbojpeg"))]
#[test]
fn the_turbo_decoder_needs_the_feature() {
    let m = invalid(vec![
        Op::Decode(Decode::default().decoder(JpegBackend::Turbo)),
        center_crop(4, 4),
    ]);
    assert!(m.contains("turbojpeg"), "{m}");
}

/// `imgfeed check` lists the fusions; one that needs libjpeg-turbo must not be claimed by
/// a build without it.
#[cfg(not(imgfeed_turbo))]
#[test]
fn a_build_without_turbojpeg_claims_no_libjpeg_turbo_fusion() {
    let p = Pipeline::from_file(repo().join("pipelines/resnet50_eval.toml")).expect("builds");
    assert!(
        p.fusions().iter().all(|f| !f.contains("libjpeg-turbo")),
        "fusions of a build without the turbojpeg feature: {:?}",
        p.fusions()
    );
}

fn normalize_n(mean: Vec<f32>, std: Vec<f32>) -> Op {
    Op::Normalize(Normalize::new(mean, std))
}

#[test]
fn bad_batch_engine_and_sampling_values_are_rejected() {
    let ok_ops = |b: imgfeed::PipelineBuilder| b.op(decode()).op(center_crop(4, 4));
    let err = |r: imgfeed::Result<Pipeline>| -> String {
        match r {
            Err(e @ Error::Invalid(_)) => e.to_string(),
            other => panic!("expected Error::Invalid, got {other:?}"),
        }
    };
    let m = err(ok_ops(Pipeline::builder(fixture_source()))
        .batch(0, false)
        .build());
    assert!(m.contains("batch.size"), "{m}");
    let m = err(ok_ops(Pipeline::builder(fixture_source()))
        .workers(0)
        .build());
    assert!(m.contains("workers"), "{m}");
    let m = err(ok_ops(Pipeline::builder(fixture_source().shards(2, 2))).build());
    assert!(m.contains("shard_id 2"), "{m}");
    let m = err(ok_ops(Pipeline::builder(fixture_source().shards(0, 0))).build());
    assert!(m.contains("num_shards"), "{m}");
    let m = err(ok_ops(Pipeline::builder(fixture_source().num_samples(0))).build());
    assert!(m.contains("num_samples"), "{m}");
    let m = err(
        ok_ops(Pipeline::builder(SourceConfig::from(Dataset::ImageFolder(
            ImageFolderConfig::new(fixtures().join("imagefolder")).extensions(Vec::<String>::new()),
        ))))
        .build(),
    );
    assert!(m.contains("extensions"), "{m}");
}

// ---- relative roots -------------------------------------------------------------------------

#[test]
fn a_relative_root_is_relative_to_the_pipeline_files_folder() {
    let cfg = parse(&format!(
        "[source]\nkind = \"image_folder\"\nroot = \"../data\"\n{TAIL}"
    ))
    .expect("parses");
    assert_eq!(cfg.source.root(), PathBuf::from("/cfg/dir/../data"));
    let cfg = parse(&format!(
        "[source]\nkind = \"image_folder\"\nroot = \"/abs/data\"\n{TAIL}"
    ))
    .expect("parses");
    assert_eq!(cfg.source.root(), PathBuf::from("/abs/data"));
    // a real file: tmp/pipes/p.toml reading tmp/imgs (the test's cwd is the crate root)
    let tmp = tempfile::tempdir().expect("tempdir");
    Img::uniform(2, 2, [9, 8, 7]).write_bmp(&tmp.path().join("imgs/only/x.bmp"));
    std::fs::create_dir_all(tmp.path().join("pipes")).expect("mkdir");
    let file = tmp.path().join("pipes/p.toml");
    std::fs::write(
        &file,
        "[source]\nkind = \"image_folder\"\nroot = \"../imgs\"\n\n[[ops]]\nop = \"decode\"\n\n[[ops]]\nop = \"center_crop\"\nsize = 2\n\n[batch]\nsize = 1\n",
    )
    .expect("write pipeline");
    let p = Pipeline::from_file(&file).expect("pipeline with a relative root builds");
    assert_eq!(p.config().source.root(), tmp.path().join("pipes/../imgs"));
    assert_eq!(p.samples_per_epoch(), 1);
    let s = samples_u8(&p, 0);
    assert_eq!(s, vec![[9u8, 8, 7].repeat(4)]);
}

// ---- the canonical pipeline file ---------------------------------------------------------------

#[test]
fn resnet50_eval_parses_to_the_canonical_values() {
    let path = repo().join("pipelines/resnet50_eval.toml");
    let cfg = PipelineConfig::from_file(&path).expect("resnet50_eval.toml parses");
    assert_eq!(cfg.source.kind(), SourceKind::ImageFolder);
    assert_eq!(
        cfg.source.root(),
        repo().join("pipelines/../fixtures/imagefolder")
    );
    assert!(!cfg.source.sampling.shuffle);
    assert_eq!(
        (
            cfg.source.sampling.seed,
            cfg.source.sampling.num_shards,
            cfg.source.sampling.shard_id,
            cfg.source.sampling.num_samples
        ),
        (0, 1, 0, None)
    );
    assert_eq!(
        cfg.source.dataset,
        Dataset::ImageFolder(ImageFolderConfig::new(cfg.source.root()))
    );
    // what serde makes of the decimal literals (f64 parsed, then narrowed)
    let f = |v: f64| v as f32;
    let expected = vec![
        Op::Decode(
            Decode::default()
                .decoder(JpegBackend::Auto)
                .max_pixels(89_478_485),
        ),
        Op::Resize(Resize::new(Size::One(256)).filter(Filter::Bilinear)),
        Op::CenterCrop(CenterCrop::new(Size::One(224))),
        Op::Normalize(Normalize::new(
            vec![f(123.675), f(116.28), f(103.53)],
            vec![f(58.395), f(57.12), f(57.375)],
        )),
        Op::HwcToChw(HwcToChw::new()),
        Op::TypeCast(TypeCast::new(LabelType::I32)),
    ];
    assert_eq!(cfg.ops, expected);
    assert_eq!((cfg.batch.size, cfg.batch.drop_remainder), (32, true));
    assert_eq!(cfg.engine.on_error, imgfeed::OnError::Error);
    assert!(!cfg.engine.profile);

    let p = Pipeline::new(cfg.clone()).expect("canonical pipeline builds");
    let names: Vec<&str> = p.stages().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "source",
            "decode",
            "resize",
            "center_crop",
            "normalize",
            "hwc_to_chw",
            "type_cast"
        ]
    );
    let specs: Vec<String> = p.stages().iter().map(|(_, s)| s.to_string()).collect();
    assert_eq!(specs[0], "encoded bytes, label uint32");
    assert_eq!(specs[1], "uint8 HWC [?, ?, 3], label uint32");
    assert_eq!(specs[3], "uint8 HWC [224, 224, 3], label uint32");
    assert_eq!(specs[6], "float32 CHW [3, 224, 224], label int32");
    let out = p.output_spec();
    assert_eq!(
        (out.dtype, out.layout, out.dims(), out.label),
        (
            DType::F32,
            Layout::Chw,
            [Some(3), Some(224), Some(224)],
            LabelType::I32
        )
    );
    assert_eq!(p.samples_per_epoch(), 12);
    assert_eq!(
        p.batches_per_epoch(),
        0,
        "12 samples, batch 32, drop_remainder: nothing"
    );
    for f in [
        "resize + center_crop: one resize computing only the crop window",
        "normalize + hwc_to_chw: one pass written into the batch buffer",
    ] {
        assert!(
            p.fusions().iter().any(|x| x == f),
            "missing fusion {f:?} in {:?}",
            p.fusions()
        );
    }
    // TOML round trip
    let again = PipelineConfig::parse(&cfg.to_toml(), Path::new("elsewhere.toml"))
        .expect("to_toml parses back");
    assert_eq!(again, cfg);
}

// ---- datasets -------------------------------------------------------------------------------

fn dataset_error(root: &Path) -> (PathBuf, String) {
    match ImageFolder::open(root, None, None) {
        Err(Error::Dataset { path, reason }) => (path, reason),
        Err(other) => panic!("expected a Dataset error, got {other:?}"),
        Ok(f) => panic!("expected a Dataset error, opened {}", f.describe()),
    }
}

#[test]
fn empty_or_imageless_roots_are_dataset_errors() {
    let empty = tempfile::tempdir().expect("tempdir");
    let (path, reason) = dataset_error(empty.path());
    assert_eq!(path, empty.path());
    assert!(reason.contains("no class folders"), "{reason}");
    // and through a pipeline: a dataset error, which is the user's to fix (exit code 2),
    // not a bad sample (1)
    let e = Pipeline::builder(folder_source(empty.path()))
        .op(decode())
        .op(center_crop(2, 2))
        .build()
        .expect_err("empty root");
    assert!(matches!(e, Error::Dataset { .. }) && e.is_usage(), "{e:?}");

    let no_images = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(no_images.path().join("cats")).expect("mkdir");
    std::fs::create_dir_all(no_images.path().join("dogs/.thumbs")).expect("mkdir");
    std::fs::write(no_images.path().join("cats/readme.txt"), "no images").expect("write");
    std::fs::write(no_images.path().join("dogs/.thumbs/a.jpg"), "hidden").expect("write");
    let (path, reason) = dataset_error(no_images.path());
    assert_eq!(path, no_images.path());
    assert!(
        reason.contains("no images") && reason.contains("2 class folder"),
        "{reason}"
    );

    let (path, _) = dataset_error(&empty.path().join("missing"));
    assert_eq!(path, empty.path().join("missing"));
    let file = empty.path().join("file.txt");
    std::fs::write(&file, "x").expect("write");
    let (path, reason) = dataset_error(&file);
    assert_eq!((path, reason.as_str()), (file, "not a directory"));
}

#[test]
fn the_fixture_imagefolder_lists_twelve_samples_case_insensitively() {
    let root = fixtures().join("imagefolder");
    let f = ImageFolder::open(&root, None, None).expect("fixtures/imagefolder opens");
    assert_eq!(
        f.len(),
        12,
        "hidden .hidden.jpg and notes.txt are not samples"
    );
    assert_eq!(
        f.classes(),
        [
            ("bird".to_string(), 0),
            ("cat".to_string(), 1),
            ("coffee".to_string(), 2)
        ]
    );
    let names: Vec<String> = (0..12).map(|i| f.sample_name(i)).collect();
    assert_eq!(
        names,
        [
            "bird/bird_000.jpg",
            "bird/bird_001.jpg",
            "bird/bird_002.jpg",
            "bird/bird_003.png",
            "cat/cat_000.jpg",
            "cat/cat_001.JPEG",
            "cat/cat_002.jpg",
            "cat/cat_003.png",
            "coffee/coffee_000.jpg",
            "coffee/coffee_001.jpg",
            "coffee/coffee_002.jpg",
            "coffee/coffee_003.png",
        ]
    );
    let labels: Vec<u32> = (0..12).map(|i| f.sample(i).expect("sample").1).collect();
    assert_eq!(labels, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
    assert_eq!(
        f.describe(),
        format!("image_folder {}: 12 samples, 3 classes", root.display())
    );
    // extensions: case-insensitive, with or without the dot
    let count = |exts: &[&str]| {
        let e: Vec<String> = exts.iter().map(|s| s.to_string()).collect();
        ImageFolder::open(&root, Some(&e), None).map(|f| f.len())
    };
    assert_eq!(count(&["PNG"]).expect("png"), 3);
    assert_eq!(count(&[".jpg"]).expect("jpg"), 8);
    assert_eq!(count(&["jpeg"]).expect("jpeg"), 1, "cat_001.JPEG");
    assert_eq!(count(&["jpg", "JPEG"]).expect("jpg+jpeg"), 9);
    assert!(matches!(count(&["gif"]), Err(Error::Dataset { .. })));
}

#[test]
fn class_indexing_selects_and_labels_folders() {
    let root = fixtures().join("imagefolder");
    let mut map = BTreeMap::new();
    map.insert("coffee".to_string(), 0u32);
    map.insert("bird".to_string(), 7u32);
    let f = ImageFolder::open(&root, None, Some(&map)).expect("subset opens");
    assert_eq!(f.len(), 8);
    // MindSpore's order: folders by name, labels looked up (not sorted by label).
    assert_eq!(
        f.classes(),
        [("bird".to_string(), 7), ("coffee".to_string(), 0)],
        "ordered by folder name"
    );
    assert_eq!(
        f.sample(0).map(|(p, l)| (p.to_path_buf(), l)),
        Some((PathBuf::from("bird/bird_000.jpg"), 7))
    );
    assert_eq!(
        f.sample(4).map(|(p, l)| (p.to_path_buf(), l)),
        Some((PathBuf::from("coffee/coffee_000.jpg"), 0))
    );
    assert!(f.sample(8).is_none());
    // a name with no folder is an error, not an empty class
    map.insert("dog".to_string(), 3);
    match ImageFolder::open(&root, None, Some(&map)) {
        Err(Error::Dataset { path, reason }) => {
            assert_eq!(path, root.join("dog"));
            assert!(reason.contains("class_indexing"), "{reason}");
        }
        other => panic!("expected a Dataset error for class `dog`, got {other:?}"),
    }
    // through a pipeline file too
    let text = format!(
        "[source]\nkind = \"image_folder\"\nroot = \"{}\"\nclass_indexing = {{ cat = 4 }}\n\n[[ops]]\nop = \"decode\"\n\n[[ops]]\nop = \"center_crop\"\nsize = 8\n{TAIL}",
        root.display()
    );
    let p = Pipeline::new(PipelineConfig::parse(&text, Path::new("p.toml")).expect("parses"))
        .expect("builds");
    assert_eq!(p.samples_per_epoch(), 4);
    let b = batches(&p, 0);
    assert_eq!(
        b.iter().flat_map(labels_i64).collect::<Vec<_>>(),
        [4, 4, 4, 4]
    );
}

#[test]
fn nested_folders_count_and_hidden_entries_do_not() {
    let dir = bmp_folder(&[
        ("a/x.bmp", &Img::uniform(1, 1, [1, 1, 1])),
        ("a/deeper/y.BMP", &Img::uniform(1, 1, [2, 2, 2])),
        ("a/.cache/z.bmp", &Img::uniform(1, 1, [3, 3, 3])),
        ("a/.w.bmp", &Img::uniform(1, 1, [4, 4, 4])),
        (".hidden_class/v.bmp", &Img::uniform(1, 1, [5, 5, 5])),
        ("b/u.bmp", &Img::uniform(1, 1, [6, 6, 6])),
    ]);
    std::fs::write(
        dir.path().join("loose.bmp"),
        Img::uniform(1, 1, [7, 7, 7]).to_bmp(),
    )
    .expect("write");
    let f = ImageFolder::open(dir.path(), None, None).expect("opens");
    let names: Vec<String> = (0..f.len()).map(|i| f.sample_name(i)).collect();
    assert_eq!(names, ["a/deeper/y.BMP", "a/x.bmp", "b/u.bmp"]);
    assert_eq!(f.classes(), [("a".to_string(), 0), ("b".to_string(), 1)]);
}

/// The batch buffer's size is checked, never assumed: an absurd batch is a pipeline error,
/// not an overflowed allocation written through raw pointers.
#[test]
fn a_batch_too_large_to_address_is_refused() {
    let src = SourceConfig::new(SourceKind::ImageFolder, fixtures().join("imagefolder"));
    let r = Pipeline::builder(src)
        .op(Op::Decode(Default::default()))
        .op(Op::CenterCrop(imgfeed::ops::CenterCrop::new(
            imgfeed::ops::Size::Two([32768, 32768]),
        )))
        .batch(1 << 34, false)
        .build();
    match r {
        Err(e @ Error::Invalid(_)) => assert!(e.to_string().contains("too large"), "{e}"),
        other => panic!("expected Error::Invalid, got {other:?}"),
    }
}

/// `exact` is Pillow's bilinear arithmetic: asking for it with another filter is refused.
#[test]
fn exact_resize_needs_the_bilinear_filter() {
    let src = SourceConfig::new(SourceKind::ImageFolder, fixtures().join("imagefolder"));
    let r = Pipeline::builder(src)
        .op(Op::Decode(Default::default()))
        .op(Op::Resize(
            Resize::new(imgfeed::ops::Size::One(64))
                .filter(Filter::Bicubic)
                .exact(true),
        ))
        .op(Op::CenterCrop(imgfeed::ops::CenterCrop::new(
            imgfeed::ops::Size::One(32),
        )))
        .build();
    match r {
        Err(Error::Op {
            index: 1,
            op: "resize",
            reason: SpecError::Param { name: "exact", .. },
            at: None,
        }) => {}
        other => panic!("expected Error::Op for ops[1] (resize), got {other:?}"),
    }
}
