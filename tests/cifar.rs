//! The CIFAR-10 / CIFAR-100 source end to end, on the committed fixtures (written by
//! `fixtures/make_cifar.py`, whose every pixel and label follows a formula): exact pixels
//! in HWC and CHW, usages, CIFAR-100 label choice, the eval and train pipelines' math,
//! sampling, bad record files, and the `imgfeed` binary on CIFAR pipelines.

mod common;

use common::*;
use imgfeed::source::{
    Cifar, Cifar100Config, CifarConfig, CifarKind, CifarLabel, Raw, Source, Usage,
};
use imgfeed::{
    BatchConfig, Dataset, EngineConfig, Error, LabelType, Labels, Layout, OnError, Pipeline,
    PipelineConfig, SampleErrorKind, SourceConfig, SourceKind,
};
use std::path::Path;

// ---- the fixtures' formulas ----------------------------------------------------------------

const SIDE: usize = 32;
const PER: usize = 3 * SIDE * SIDE;

/// CIFAR-10 files in file-number order (`f` of make_cifar.py).
const C10_FILES: [&str; 6] = [
    "data_batch_1.bin",
    "data_batch_2.bin",
    "data_batch_3.bin",
    "data_batch_4.bin",
    "data_batch_5.bin",
    "test_batch.bin",
];
/// CIFAR-100 files in file-number order.
const C100_FILES: [&str; 2] = ["train.bin", "test.bin"];

/// Record `k` of file number `f`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Rec {
    f: usize,
    k: usize,
}

/// make_cifar.py's pixel at channel `c`, row `y`, column `x`.
fn pix(r: Rec, c: usize, y: usize, x: usize) -> u8 {
    ((r.k * 37 + c * 85 + y * 7 + x * 3 + r.f * 11) % 256) as u8
}

fn c10_label(r: Rec) -> u32 {
    ((r.k + r.f) % 10) as u32
}

fn c100_coarse(r: Rec) -> u32 {
    ((r.k + r.f) % 20) as u32
}

fn c100_fine(r: Rec) -> u32 {
    ((r.k * 3 + r.f) % 100) as u32
}

/// The records of a CIFAR-10 usage, in dataset order: 3 per train file, 4 in the test file.
fn c10_recs(usage: Usage) -> Vec<Rec> {
    let train = (0..5).flat_map(|f| (0..3).map(move |k| Rec { f, k }));
    let test = (0..4).map(|k| Rec { f: 5, k });
    match usage {
        Usage::Train => train.collect(),
        Usage::Test => test.collect(),
        Usage::All => train.chain(test).collect(),
    }
}

/// The records of a CIFAR-100 usage: 5 in train.bin, 3 in test.bin.
fn c100_recs(usage: Usage) -> Vec<Rec> {
    let train = (0..5).map(|k| Rec { f: 0, k });
    let test = (0..3).map(|k| Rec { f: 1, k });
    match usage {
        Usage::Train => train.collect(),
        Usage::Test => test.collect(),
        Usage::All => train.chain(test).collect(),
    }
}

/// The image of a record, HWC (MindSpore's logical layout).
fn hwc(r: Rec) -> Vec<u8> {
    let mut v = vec![0u8; PER];
    for y in 0..SIDE {
        for x in 0..SIDE {
            for c in 0..3 {
                v[(y * SIDE + x) * 3 + c] = pix(r, c, y, x);
            }
        }
    }
    v
}

/// The image of a record, CHW (the record's own byte order).
fn chw(r: Rec) -> Vec<u8> {
    let mut v = vec![0u8; PER];
    for c in 0..3 {
        for y in 0..SIDE {
            for x in 0..SIDE {
                v[(c * SIDE + y) * SIDE + x] = pix(r, c, y, x);
            }
        }
    }
    v
}

fn names(files: &[&str], recs: &[Rec]) -> Vec<String> {
    recs.iter()
        .map(|r| format!("{}:{}", files[r.f], r.k))
        .collect()
}

// ---- pipelines ---------------------------------------------------------------------------------

fn c10_at(root: &Path, usage: Option<Usage>) -> SourceConfig {
    SourceConfig::from(Dataset::Cifar10(CifarConfig::new(root).usage(usage)))
}

fn c10(usage: Option<Usage>) -> SourceConfig {
    c10_at(&fixtures().join("cifar10"), usage)
}

fn c100_at(root: &Path, usage: Option<Usage>, label: Option<CifarLabel>) -> SourceConfig {
    SourceConfig::from(Dataset::Cifar100(
        Cifar100Config::new(root).usage(usage).label(label),
    ))
}

fn c100(usage: Option<Usage>, label: Option<CifarLabel>) -> SourceConfig {
    c100_at(&fixtures().join("cifar100"), usage, label)
}

/// An engine table; `work_unit = Some(1)` makes workers really share a tiny dataset (the
/// CIFAR default of 64 records per claim would hand every fixture sample to one worker).
fn eng(workers: usize, work_unit: Option<usize>, on_error: OnError) -> EngineConfig {
    let e = EngineConfig::default().workers(workers).on_error(on_error);
    match work_unit {
        Some(n) => e.work_unit(n),
        None => e,
    }
}

fn pipe(src: SourceConfig, ops: Vec<imgfeed::ops::Op>, batch: usize, e: EngineConfig) -> Pipeline {
    let mut b = Pipeline::builder(src).batch(batch, false).engine(e);
    for op in ops {
        b = b.op(op);
    }
    b.build()
        .unwrap_or_else(|e| panic!("CIFAR pipeline should build: {e}"))
}

fn build_err(src: SourceConfig) -> Error {
    Pipeline::builder(src)
        .batch(2, false)
        .workers(1)
        .build()
        .expect_err("opening this dataset should fail")
}

/// A pipeline file from `pipelines/`, with a small batch that keeps the remainder.
fn pipeline_file(name: &str, batch: usize, workers: usize) -> PipelineConfig {
    let mut cfg =
        PipelineConfig::from_file(repo().join("pipelines").join(name)).expect("pipeline parses");
    cfg.batch = BatchConfig::new(batch);
    cfg.engine = eng(workers, Some(1), OnError::Error);
    cfg
}

/// Everything an epoch gives, flattened over batches.
#[derive(Debug, PartialEq)]
struct Run {
    u8s: Vec<Vec<u8>>,
    f32s: Vec<Vec<f32>>,
    indices: Vec<u64>,
    /// `len × label_columns`, row-major, as i64.
    labels: Vec<i64>,
    lens: Vec<usize>,
    shapes: Vec<[usize; 4]>,
    label_cols: Vec<usize>,
}

fn run(p: &Pipeline, epoch: u64) -> Run {
    let mut r = Run {
        u8s: vec![],
        f32s: vec![],
        indices: vec![],
        labels: vec![],
        lens: vec![],
        shapes: vec![],
        label_cols: vec![],
    };
    for b in batches(p, epoch) {
        let n = b.len();
        if let Ok(v) = b.images_u8() {
            r.u8s.extend(v.chunks(PER).map(<[u8]>::to_vec));
            assert_eq!(v.len(), n * PER);
        }
        if let Ok(v) = b.images_f32() {
            r.f32s.extend(v.chunks(PER).map(<[f32]>::to_vec));
            assert_eq!(v.len(), n * PER);
        }
        assert_eq!(b.indices().len(), n);
        r.indices.extend_from_slice(b.indices());
        r.labels.extend(labels_i64(&b));
        r.lens.push(n);
        r.shapes.push(b.shape());
        r.label_cols.push(b.label_columns());
    }
    r
}

fn seq(n: u64) -> Vec<u64> {
    (0..n).collect()
}

fn copy_fixture_dir(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for e in std::fs::read_dir(fixtures().join(name)).expect("read fixture folder") {
        let e = e.expect("fixture entry");
        copy_into(dir.path(), &e.file_name().to_string_lossy(), &e.path());
    }
    dir
}

fn patch(path: &Path, offset: usize, byte: u8) {
    let mut b = std::fs::read(path).expect("read record file");
    b[offset] = byte;
    std::fs::write(path, b).expect("write record file");
}

// ---- 1. round trip ------------------------------------------------------------------------------

#[test]
fn fixture_files_have_the_sizes_make_cifar_writes() {
    for (f, name) in C10_FILES.iter().enumerate() {
        let n = if f == 5 { 4 } else { 3 };
        let len = std::fs::metadata(fixtures().join("cifar10").join(name))
            .expect("cifar10 fixture")
            .len();
        assert_eq!(len, n * 3073, "{name}");
    }
    for (name, n) in [("train.bin", 5), ("test.bin", 3)] {
        let len = std::fs::metadata(fixtures().join("cifar100").join(name))
            .expect("cifar100 fixture")
            .len();
        assert_eq!(len, n * 3074, "{name}");
    }
}

#[test]
fn cifar10_without_ops_gives_every_pixel_hwc_with_labels_indices_and_names() {
    let recs = c10_recs(Usage::All);
    for workers in [1, 3] {
        let p = pipe(
            c10(Some(Usage::All)),
            vec![],
            4,
            eng(workers, Some(1), OnError::Error),
        );
        let spec = p.output_spec();
        assert_eq!(
            (spec.dims(), spec.layout, spec.label, spec.label_columns),
            (
                [Some(32), Some(32), Some(3)],
                Layout::Hwc,
                LabelType::U32,
                1
            )
        );
        assert_eq!((p.samples_per_epoch(), p.batches_per_epoch()), (19, 5));
        let r = run(&p, 0);
        assert_eq!(r.lens, vec![4, 4, 4, 4, 3]);
        assert_eq!(r.shapes[0], [4, 32, 32, 3]);
        assert_eq!(r.shapes[4], [3, 32, 32, 3]);
        assert_eq!(r.indices, seq(19));
        assert_eq!(r.u8s.len(), 19);
        for (i, rec) in recs.iter().enumerate() {
            assert!(
                r.u8s[i] == hwc(*rec),
                "{workers} workers: sample {i} ({rec:?}) is not the formula in HWC"
            );
        }
        let want: Vec<i64> = recs.iter().map(|r| c10_label(*r) as i64).collect();
        assert_eq!(r.labels, want);
        assert_eq!(r.label_cols, vec![1; 5]);
    }
    // labels are uint32 when nothing casts them, in batch order
    let p = pipe(
        c10(Some(Usage::Test)),
        vec![],
        4,
        eng(2, None, OnError::Error),
    );
    let b = batches(&p, 0);
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].labels(), Labels::U32(&[5, 6, 7, 8]));
    assert_eq!(b[0].layout(), Layout::Hwc);
    assert_eq!(b[0].indices(), &[0, 1, 2, 3]);
    // the names samples.txt gets
    let p = pipe(
        c10(Some(Usage::All)),
        vec![],
        4,
        eng(1, None, OnError::Error),
    );
    let got: Vec<String> = (0..19).map(|i| p.source().sample_name(i)).collect();
    assert_eq!(got, names(&C10_FILES, &recs));
    assert_eq!(got[0], "data_batch_1.bin:0");
    assert_eq!(got[3], "data_batch_2.bin:0");
    assert_eq!(got[14], "data_batch_5.bin:2");
    assert_eq!(got[15], "test_batch.bin:0");
    assert_eq!(got[18], "test_batch.bin:3");
    assert_eq!(p.source().sample_name(19), "<sample 19 out of range>");
    assert_eq!(p.source().len(), 19);
    assert!(
        p.source()
            .describe()
            .ends_with("(usage all): 19 samples in 6 file(s)"),
        "{}",
        p.source().describe()
    );
}

#[test]
fn cifar10_hwc_to_chw_gives_every_pixel_in_record_order() {
    let recs = c10_recs(Usage::All);
    for workers in [1, 2] {
        let p = pipe(
            c10(Some(Usage::All)),
            vec![hwc_to_chw()],
            5,
            eng(workers, Some(1), OnError::Error),
        );
        assert_eq!(p.output_spec().dims(), [Some(3), Some(32), Some(32)]);
        let r = run(&p, 0);
        assert_eq!(r.lens, vec![5, 5, 5, 4]);
        assert_eq!(r.shapes[0], [5, 3, 32, 32]);
        assert_eq!(r.indices, seq(19));
        for (i, rec) in recs.iter().enumerate() {
            assert!(
                r.u8s[i] == chw(*rec),
                "sample {i} ({rec:?}) is not the formula in CHW"
            );
        }
        let want: Vec<i64> = recs.iter().map(|r| c10_label(*r) as i64).collect();
        assert_eq!(r.labels, want);
    }
    // the CHW output is the record's own pixel bytes
    let file = std::fs::read(fixtures().join("cifar10/data_batch_2.bin")).expect("fixture");
    let p = pipe(
        c10(None),
        vec![hwc_to_chw()],
        16,
        eng(1, None, OnError::Error),
    );
    let r = run(&p, 0);
    assert_eq!(
        r.u8s[4],
        file[3073 + 1..2 * 3073].to_vec(),
        "data_batch_2.bin:1"
    );
}

#[test]
fn cifar100_round_trip_hwc_and_chw() {
    let recs = c100_recs(Usage::All);
    let p = pipe(
        c100(Some(Usage::All), None),
        vec![],
        3,
        eng(2, Some(1), OnError::Error),
    );
    let r = run(&p, 0);
    assert_eq!(r.lens, vec![3, 3, 2]);
    assert_eq!(r.indices, seq(8));
    for (i, rec) in recs.iter().enumerate() {
        assert!(r.u8s[i] == hwc(*rec), "HWC sample {i} ({rec:?})");
    }
    let fine: Vec<i64> = recs.iter().map(|r| c100_fine(*r) as i64).collect();
    assert_eq!(r.labels, fine);
    let p = pipe(
        c100(Some(Usage::All), None),
        vec![hwc_to_chw()],
        8,
        eng(1, None, OnError::Error),
    );
    let r = run(&p, 0);
    assert_eq!(r.shapes, vec![[8, 3, 32, 32]]);
    for (i, rec) in recs.iter().enumerate() {
        assert!(r.u8s[i] == chw(*rec), "CHW sample {i} ({rec:?})");
    }
    let got: Vec<String> = (0..8).map(|i| p.source().sample_name(i)).collect();
    assert_eq!(got, names(&C100_FILES, &recs));
    assert_eq!(got[5], "test.bin:0");
}

#[test]
fn the_source_reads_planes_and_labels_straight_from_the_record() {
    let c = Cifar::open(
        &fixtures().join("cifar100"),
        CifarKind::Cifar100,
        Usage::Test,
        CifarLabel::Both,
    )
    .expect("open cifar100 test");
    assert_eq!(
        (c.kind(), c.len(), c.spec().label_columns),
        (CifarKind::Cifar100, 3, 2)
    );
    assert_eq!(c.spec().fixed_size(), Some((32, 32)));
    assert!(!c.spec().encoded);
    let file = std::fs::read(fixtures().join("cifar100/test.bin")).expect("fixture");
    let mut scratch = Vec::new();
    let s = c.read(2, &mut scratch).expect("read record 2");
    let rec = Rec { f: 1, k: 2 };
    assert_eq!(s.labels, [c100_coarse(rec), c100_fine(rec)]);
    assert_eq!(s.labels, [3, 7]);
    match s.raw {
        Raw::Planar {
            data,
            height,
            width,
        } => {
            assert_eq!((height, width), (32, 32));
            assert_eq!(data, &file[2 * 3074 + 2..3 * 3074]);
            assert_eq!(data, &chw(rec)[..]);
        }
        other => panic!("CIFAR should give planes, got {other:?}"),
    }
    match c.read(3, &mut scratch) {
        Err(Error::Sample {
            index: 3,
            stage: "read",
            ..
        }) => {}
        other => panic!("reading past the end should be a sample error, got {other:?}"),
    }
}

// ---- 2. usages -------------------------------------------------------------------------------------

#[test]
fn usage_train_test_all_counts_and_order() {
    for (usage, n) in [
        (None, 15),
        (Some(Usage::Train), 15),
        (Some(Usage::Test), 4),
        (Some(Usage::All), 19),
    ] {
        let p = pipe(c10(usage), vec![], 64, eng(2, None, OnError::Error));
        assert_eq!(
            (p.source().len(), p.samples_per_epoch()),
            (n, n),
            "{usage:?}"
        );
        let recs = c10_recs(usage.unwrap_or(Usage::Train));
        assert_eq!(recs.len(), n);
        let r = run(&p, 0);
        assert_eq!(r.indices, seq(n as u64), "{usage:?}");
        let labels: Vec<i64> = recs.iter().map(|r| c10_label(*r) as i64).collect();
        assert_eq!(r.labels, labels, "{usage:?}");
        for (i, rec) in recs.iter().enumerate() {
            assert!(r.u8s[i] == hwc(*rec), "{usage:?} sample {i}");
        }
        let got: Vec<String> = (0..n).map(|i| p.source().sample_name(i)).collect();
        assert_eq!(got, names(&C10_FILES, &recs), "{usage:?}");
    }
    for (usage, n) in [
        (None, 5),
        (Some(Usage::Train), 5),
        (Some(Usage::Test), 3),
        (Some(Usage::All), 8),
    ] {
        let p = pipe(c100(usage, None), vec![], 64, eng(2, None, OnError::Error));
        assert_eq!(
            (p.source().len(), p.samples_per_epoch()),
            (n, n),
            "{usage:?}"
        );
        let recs = c100_recs(usage.unwrap_or(Usage::Train));
        let r = run(&p, 0);
        for (i, rec) in recs.iter().enumerate() {
            assert!(r.u8s[i] == hwc(*rec), "cifar100 {usage:?} sample {i}");
        }
        let got: Vec<String> = (0..n).map(|i| p.source().sample_name(i)).collect();
        assert_eq!(got, names(&C100_FILES, &recs), "{usage:?}");
    }
    // "all" is train then test: its test part equals usage test
    let all = run(
        &pipe(
            c10(Some(Usage::All)),
            vec![],
            19,
            eng(1, None, OnError::Error),
        ),
        0,
    );
    let test = run(
        &pipe(
            c10(Some(Usage::Test)),
            vec![],
            4,
            eng(1, None, OnError::Error),
        ),
        0,
    );
    let train = run(
        &pipe(
            c10(Some(Usage::Train)),
            vec![],
            15,
            eng(1, None, OnError::Error),
        ),
        0,
    );
    assert!(all.u8s[..15] == train.u8s[..] && all.u8s[15..] == test.u8s[..]);
    assert_eq!(all.labels, [train.labels, test.labels].concat());
}

#[test]
fn usage_parses_from_text_and_toml() {
    // The command line's names (clap's ValueEnum) are the pipeline file's (serde's).
    use clap::ValueEnum;
    assert_eq!(Usage::from_str("train", false), Ok(Usage::Train));
    assert_eq!(Usage::from_str("test", false), Ok(Usage::Test));
    assert_eq!(Usage::from_str("all", false), Ok(Usage::All));
    let e = Usage::from_str("bogus", false).expect_err("bogus is no usage");
    assert!(e.contains("bogus"), "{e}");
    let text = "[source]\nkind = \"cifar100\"\nroot = \"../fixtures/cifar100\"\nusage = \"all\"\nlabel = \"coarse\"\n[batch]\nsize = 2\n";
    let cfg = PipelineConfig::parse(text, &repo().join("pipelines/x.toml")).expect("parses");
    assert_eq!(
        cfg.source.dataset,
        Dataset::Cifar100(
            Cifar100Config::new(repo().join("pipelines/../fixtures/cifar100"))
                .usage(Usage::All)
                .label(CifarLabel::Coarse)
        )
    );
    let p = Pipeline::new(cfg).expect("relative root resolves to the fixture");
    assert_eq!(p.source().len(), 8);
    let bad = "[source]\nkind = \"cifar10\"\nroot = \"r\"\nusage = \"val\"\n[batch]\nsize = 2\n";
    match PipelineConfig::parse(bad, Path::new("bad.toml")) {
        Err(Error::Config { message, .. }) => assert!(message.contains("val"), "{message}"),
        other => panic!("usage = \"val\" should be a config error, got {other:?}"),
    }
}

// ---- 3. CIFAR-100 labels ------------------------------------------------------------------------

#[test]
fn cifar100_label_fine_coarse_both() {
    let recs = c100_recs(Usage::All);
    let fine: Vec<u32> = recs.iter().map(|r| c100_fine(*r)).collect();
    let coarse: Vec<u32> = recs.iter().map(|r| c100_coarse(*r)).collect();
    assert_eq!(fine, vec![0, 3, 6, 9, 12, 1, 4, 7]);
    assert_eq!(coarse, vec![0, 1, 2, 3, 4, 1, 2, 3]);
    let labels = |label| {
        let p = pipe(
            c100(Some(Usage::All), label),
            vec![],
            8,
            eng(2, None, OnError::Error),
        );
        let b = batches(&p, 0);
        assert_eq!(b.len(), 1);
        let l = match b[0].labels() {
            Labels::U32(v) => v.to_vec(),
            other => panic!("labels should be uint32, got {other:?}"),
        };
        (p.output_spec().label_columns, b[0].label_columns(), l)
    };
    assert_eq!(labels(None), (1, 1, fine.clone()), "the default is fine");
    assert_eq!(labels(Some(CifarLabel::Fine)), (1, 1, fine.clone()));
    assert_eq!(labels(Some(CifarLabel::Coarse)), (1, 1, coarse.clone()));
    let both: Vec<u32> = coarse
        .iter()
        .zip(&fine)
        .flat_map(|(c, f)| [*c, *f])
        .collect();
    assert_eq!(labels(Some(CifarLabel::Both)), (2, 2, both.clone()));
    // both, cast to int32 and cut into batches of 3: rows stay [coarse, fine]
    let p = pipe(
        c100(Some(Usage::All), Some(CifarLabel::Both)),
        vec![hwc_to_chw(), type_cast(LabelType::I32)],
        3,
        eng(3, Some(1), OnError::Error),
    );
    let mut got = Vec::new();
    for b in batches(&p, 0) {
        assert_eq!(b.label_columns(), 2);
        let l = b.labels_i32().expect("int32 labels");
        assert_eq!(l.len(), 2 * b.len());
        got.extend_from_slice(l);
    }
    let both_i32: Vec<i32> = both.iter().map(|&v| v as i32).collect();
    assert_eq!(got, both_i32);
    // images do not depend on the label choice
    let img = |label| {
        run(
            &pipe(
                c100(Some(Usage::All), label),
                vec![],
                8,
                eng(1, None, OnError::Error),
            ),
            0,
        )
        .u8s
    };
    assert!(img(Some(CifarLabel::Both)) == img(Some(CifarLabel::Coarse)));
}

#[test]
fn label_does_not_apply_to_cifar10() {
    // A cifar10 source has no `label` field: in code there is nowhere to put one, and in a
    // pipeline file it is an error naming the field and the kind.
    let text =
        "[source]\nkind = \"cifar10\"\nroot = \"c\"\nlabel = \"coarse\"\n[batch]\nsize = 1\n";
    match PipelineConfig::parse(text, Path::new("p.toml")) {
        Err(Error::Config { message, .. }) => assert!(
            message.contains("unknown field `label`") && message.contains("kind = \"cifar10\""),
            "{message}"
        ),
        other => panic!("expected a config error, got {other:?}"),
    }
}

// ---- 4. eval pipeline math ----------------------------------------------------------------------

const C10_MEAN: [f64; 3] = [0.4914, 0.4822, 0.4465];
const C10_STD: [f64; 3] = [0.2023, 0.1994, 0.2010];
const C100_MEAN: [f64; 3] = [0.5071, 0.4865, 0.4409];
const C100_STD: [f64; 3] = [0.2673, 0.2564, 0.2762];

fn normalized(v: u8, c: usize, mean: &[f64; 3], std: &[f64; 3]) -> f64 {
    (v as f64 / 255.0 - mean[c]) / std[c]
}

#[test]
fn eval_pipeline_is_rescale_normalize_chw_int32_exactly() {
    for (usage, n, workers) in [
        (Usage::Test, 4usize, 1usize),
        (Usage::All, 19, 2),
        (Usage::Train, 15, 4),
    ] {
        let mut cfg = pipeline_file("cifar10_eval.toml", 3, workers);
        assert_eq!(cfg.source.kind(), SourceKind::Cifar10);
        assert_eq!(
            cfg.source.dataset.usage(),
            Some(Usage::Test),
            "the eval pipeline reads the test split"
        );
        cfg.source
            .dataset
            .root_mut()
            .clone_from(&fixtures().join("cifar10"));
        cfg.source.set_usage(usage).expect("cifar has splits");
        let p = Pipeline::new(cfg).expect("eval pipeline builds");
        let spec = p.output_spec();
        assert_eq!(
            (spec.dims(), spec.dtype, spec.label),
            (
                [Some(3), Some(32), Some(32)],
                imgfeed::DType::F32,
                LabelType::I32
            )
        );
        assert_eq!(p.batches_per_epoch(), n.div_ceil(3));
        let recs = c10_recs(usage);
        let mut pos = 0;
        let mut worst = 0f64;
        for b in batches(&p, 0) {
            assert_eq!(b.layout(), Layout::Chw);
            assert_eq!(b.shape(), [b.len(), 3, 32, 32]);
            let labels = b.labels_i32().expect("int32 labels");
            let imgs = b.images_f32().expect("float32 images");
            for (j, &i) in b.indices().iter().enumerate() {
                assert_eq!(i as usize, pos, "in order");
                let rec = recs[pos];
                assert_eq!(labels[j], c10_label(rec) as i32, "label of {rec:?}");
                let img = &imgs[j * PER..(j + 1) * PER];
                for c in 0..3 {
                    for y in 0..SIDE {
                        for x in 0..SIDE {
                            let got = img[(c * SIDE + y) * SIDE + x] as f64;
                            let want = normalized(pix(rec, c, y, x), c, &C10_MEAN, &C10_STD);
                            let d = (got - want).abs();
                            worst = worst.max(d);
                            assert!(
                                d <= 1e-5,
                                "{usage:?} sample {pos} c{c} y{y} x{x}: {got} vs {want}"
                            );
                        }
                    }
                }
                pos += 1;
            }
        }
        assert_eq!(pos, n);
        assert!(worst <= 1e-5, "{worst}");
    }
}

#[test]
fn eval_pipeline_file_drops_the_remainder_by_default() {
    // batch 128, drop_remainder = true: the 4 fixture test samples make no batch at all
    let p = Pipeline::from_file(repo().join("pipelines/cifar10_eval.toml")).expect("builds");
    assert_eq!(p.config().batch, BatchConfig::new(128).drop_remainder(true));
    assert_eq!((p.samples_per_epoch(), p.batches_per_epoch()), (4, 0));
    assert_eq!(p.epoch(0).count(), 0);
}

#[test]
fn normalize_without_hwc_to_chw_gives_hwc_floats_exactly() {
    let recs = c10_recs(Usage::All);
    let mean = [0.4914f32, 0.4822, 0.4465];
    let std = [0.2023f32, 0.1994, 0.2010];
    let p = pipe(
        c10(Some(Usage::All)),
        vec![rescale(1.0 / 255.0, 0.0), normalize(mean, std)],
        7,
        eng(2, Some(1), OnError::Error),
    );
    assert_eq!(p.output_spec().dims(), [Some(32), Some(32), Some(3)]);
    let r = run(&p, 0);
    assert_eq!(r.lens, vec![7, 7, 5]);
    assert_eq!(r.shapes[0], [7, 32, 32, 3]);
    for (s, rec) in recs.iter().enumerate() {
        for y in 0..SIDE {
            for x in 0..SIDE {
                for c in 0..3 {
                    let got = r.f32s[s][(y * SIDE + x) * 3 + c] as f64;
                    let want = normalized(pix(*rec, c, y, x), c, &C10_MEAN, &C10_STD);
                    assert!(
                        (got - want).abs() <= 1e-5,
                        "sample {s} y{y} x{x} c{c}: {got} vs {want}"
                    );
                }
            }
        }
    }
}

// ---- 5. train pipeline -------------------------------------------------------------------------------

/// Undo rescale + normalize: the u8 value behind a normalized float (checked to be one).
fn denormalize(v: f32, c: usize, mean: &[f64; 3], std: &[f64; 3], what: &str) -> u8 {
    let u = (v as f64 * std[c] + mean[c]) * 255.0;
    let r = u.round();
    assert!(
        (u - r).abs() < 0.01 && (0.0..=255.0).contains(&r),
        "{what}: {v} is not a normalized u8 value ({u})"
    );
    r as u8
}

/// Where a train output came from: `(top, left, flipped)` with every output pixel equal to
/// the source pixel at `(y + top, x' + left)` (x' = x, or 31 - x when flipped), or 0 (the
/// pad fill) where that falls outside the source. `None` when no placement explains it.
fn placement(out: &[u8], rec: Rec) -> Option<(isize, isize, bool)> {
    for flipped in [false, true] {
        for top in -4isize..=4 {
            'left: for left in -4isize..=4 {
                for c in 0..3 {
                    for y in 0..SIDE {
                        for x in 0..SIDE {
                            let xx = if flipped { SIDE - 1 - x } else { x };
                            let (sy, sx) = (y as isize + top, xx as isize + left);
                            let want = if (0..32).contains(&sy) && (0..32).contains(&sx) {
                                pix(rec, c, sy as usize, sx as usize)
                            } else {
                                0
                            };
                            if out[(c * SIDE + y) * SIDE + x] != want {
                                continue 'left;
                            }
                        }
                    }
                }
                return Some((top, left, flipped));
            }
        }
    }
    None
}

/// Check every sample of a train epoch against its source record; returns the placements.
fn check_train_epoch(
    r: &Run,
    recs: &[Rec],
    mean: &[f64; 3],
    std: &[f64; 3],
) -> Vec<(isize, isize, bool)> {
    let mut placements = Vec::new();
    for (pos, (img, &i)) in r.f32s.iter().zip(&r.indices).enumerate() {
        let rec = recs[i as usize];
        let what = format!("output {pos} (sample {i}, {rec:?})");
        let u8s: Vec<u8> = img
            .iter()
            .enumerate()
            .map(|(e, &v)| denormalize(v, e / (SIDE * SIDE), mean, std, &what))
            .collect();
        // the non-pad (non-zero) values of each channel are a sub-multiset of the source's
        for c in 0..3 {
            let mut have = [0usize; 256];
            for y in 0..SIDE {
                for x in 0..SIDE {
                    have[pix(rec, c, y, x) as usize] += 1;
                }
            }
            let mut used = [0usize; 256];
            for &v in &u8s[c * SIDE * SIDE..(c + 1) * SIDE * SIDE] {
                if v != 0 {
                    used[v as usize] += 1;
                    assert!(
                        used[v as usize] <= have[v as usize],
                        "{what}: channel {c} has value {v} more often than the source"
                    );
                }
            }
        }
        let pl = placement(&u8s, rec)
            .unwrap_or_else(|| panic!("{what} is no padded crop (+ flip) of its source"));
        placements.push(pl);
    }
    placements
}

#[test]
fn train_pipeline_is_worker_independent_and_crops_and_flips_its_source() {
    let make = |workers| {
        Pipeline::new(pipeline_file("cifar10_train.toml", 4, workers))
            .expect("train pipeline builds")
    };
    let p1 = make(1);
    assert_eq!(p1.config().source.dataset.usage(), Some(Usage::Train));
    assert!(p1.config().source.sampling.shuffle);
    assert_eq!((p1.samples_per_epoch(), p1.batches_per_epoch()), (15, 4));
    let e0 = run(&p1, 0);
    assert_eq!(e0.lens, vec![4, 4, 4, 3]);
    assert_eq!(e0.shapes[0], [4, 3, 32, 32]);
    for workers in [2, 4] {
        let p = make(workers);
        assert!(
            run(&p, 0) == e0,
            "{workers} workers differ from 1 in epoch 0"
        );
    }
    // the default work unit (64: one claim for the whole fixture) gives the same too
    let mut cfg = pipeline_file("cifar10_train.toml", 4, 2);
    cfg.engine.work_unit = None;
    assert!(run(&Pipeline::new(cfg).expect("builds"), 0) == e0);
    let e1 = run(&p1, 1);
    assert!(e1.f32s != e0.f32s, "epoch 1 should differ from epoch 0");
    assert_eq!(run(&make(2), 1), e1, "epoch 1 is worker-independent too");
    let recs = c10_recs(Usage::Train);
    let mut all = Vec::new();
    for e in [&e0, &e1] {
        let mut sorted = e.indices.clone();
        sorted.sort();
        assert_eq!(sorted, seq(15), "a shuffled epoch is a permutation");
        let want: Vec<i64> = e
            .indices
            .iter()
            .map(|&i| c10_label(recs[i as usize]) as i64)
            .collect();
        assert_eq!(e.labels, want, "labels follow the shuffled index");
        all.extend(check_train_epoch(e, &recs, &C10_MEAN, &C10_STD));
    }
    assert_ne!(e0.indices, e1.indices, "the shuffle changes with the epoch");
    assert_ne!(e0.indices, seq(15), "shuffle = true");
    // the augmentations really ran: some flips, some non-flips, some shifted windows
    assert!(
        all.iter().any(|p| p.2) && all.iter().any(|p| !p.2),
        "{all:?}"
    );
    assert!(all.iter().any(|p| p.0 != 0 || p.1 != 0), "{all:?}");
}

#[test]
fn cifar100_train_pipeline_keeps_both_labels_and_crops_its_source() {
    let make = |workers| {
        Pipeline::new(pipeline_file("cifar100_train.toml", 2, workers))
            .expect("cifar100 train builds")
    };
    let p = make(1);
    assert_eq!(p.output_spec().label_columns, 2);
    let r = run(&p, 0);
    assert_eq!(r.lens, vec![2, 2, 1]);
    assert_eq!(r.label_cols, vec![2, 2, 2]);
    assert!(run(&make(3), 0) == r, "3 workers differ from 1");
    let recs = c100_recs(Usage::Train);
    let want: Vec<i64> = r
        .indices
        .iter()
        .flat_map(|&i| {
            let rec = recs[i as usize];
            [c100_coarse(rec) as i64, c100_fine(rec) as i64]
        })
        .collect();
    assert_eq!(r.labels, want);
    let b = batches(&p, 0);
    assert!(b[0].labels_i32().is_ok(), "labels are int32");
    check_train_epoch(&r, &recs, &C100_MEAN, &C100_STD);
}

#[test]
fn random_ops_draw_the_same_windows_in_hwc_and_chw_and_before_or_after_normalize() {
    // The draws depend on (seed, epoch, index) only: the same crop/flip comes out whatever
    // the output layout, and whether the pointwise ops run before or after the geometry.
    let src = c10(Some(Usage::All)).shuffle(true).seed(3);
    let geo = || vec![random_crop(32, 32, 4, 0), flip(0.5)];
    let hwc_run = run(
        &pipe(src.clone(), geo(), 5, eng(2, Some(1), OnError::Error)),
        2,
    );
    let chw_run = run(
        &pipe(
            src.clone(),
            [geo(), vec![hwc_to_chw()]].concat(),
            5,
            eng(3, Some(1), OnError::Error),
        ),
        2,
    );
    assert_eq!(hwc_run.indices, chw_run.indices);
    assert_eq!(hwc_run.labels, chw_run.labels);
    let recs = c10_recs(Usage::All);
    let mut flips = 0;
    for (s, (h, c)) in hwc_run.u8s.iter().zip(&chw_run.u8s).enumerate() {
        for ch in 0..3 {
            for y in 0..SIDE {
                for x in 0..SIDE {
                    assert_eq!(
                        h[(y * SIDE + x) * 3 + ch],
                        c[(ch * SIDE + y) * SIDE + x],
                        "output {s} c{ch} y{y} x{x}"
                    );
                }
            }
        }
        let rec = recs[chw_run.indices[s] as usize];
        let pl = placement(c, rec)
            .unwrap_or_else(|| panic!("output {s} is no padded crop (+ flip) of {rec:?}"));
        flips += pl.2 as usize;
    }
    assert!(flips > 0 && flips < 19, "{flips} of 19 flipped");
    // normalize first, then crop (in float, pad 0.0) and flip: the same windows, so where
    // the source is inside the window the values are the normalized source values
    let mean = [0.4914f32, 0.4822, 0.4465];
    let std = [0.2023f32, 0.1994, 0.2010];
    let early = run(
        &pipe(
            src,
            [
                vec![rescale(1.0 / 255.0, 0.0), normalize(mean, std)],
                geo(),
                vec![hwc_to_chw()],
            ]
            .concat(),
            5,
            eng(2, Some(1), OnError::Error),
        ),
        2,
    );
    assert_eq!(early.indices, chw_run.indices);
    for (s, (f, c)) in early.f32s.iter().zip(&chw_run.u8s).enumerate() {
        let rec = recs[chw_run.indices[s] as usize];
        let (top, left, flipped) = placement(c, rec).expect("placed above");
        for ch in 0..3 {
            for y in 0..SIDE {
                for x in 0..SIDE {
                    let xx = if flipped { SIDE - 1 - x } else { x };
                    let (sy, sx) = (y as isize + top, xx as isize + left);
                    let got = f[(ch * SIDE + y) * SIDE + x] as f64;
                    let want = if (0..32).contains(&sy) && (0..32).contains(&sx) {
                        normalized(
                            pix(rec, ch, sy as usize, sx as usize),
                            ch,
                            &C10_MEAN,
                            &C10_STD,
                        )
                    } else {
                        0.0
                    };
                    assert!(
                        (got - want).abs() <= 1e-5,
                        "output {s} c{ch} y{y} x{x}: {got} vs {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn cifar_pipeline_configs_survive_a_toml_round_trip() {
    for name in [
        "cifar10_eval.toml",
        "cifar10_train.toml",
        "cifar100_train.toml",
    ] {
        let cfg = PipelineConfig::from_file(repo().join("pipelines").join(name)).expect("parses");
        let again = PipelineConfig::parse(&cfg.to_toml(), Path::new("/again.toml"))
            .unwrap_or_else(|e| panic!("{name}: to_toml does not parse back: {e}"));
        assert_eq!(again, cfg, "{name}");
    }
    let cfg =
        PipelineConfig::from_file(repo().join("pipelines/cifar100_train.toml")).expect("parses");
    assert_eq!(
        (
            &cfg.source.dataset,
            cfg.source.sampling.shuffle,
            cfg.source.sampling.seed
        ),
        (
            &Dataset::Cifar100(
                Cifar100Config::new(cfg.source.root())
                    .usage(Usage::Train)
                    .label(CifarLabel::Both)
            ),
            true,
            1
        )
    );
}

// ---- 6. bad input ---------------------------------------------------------------------------------

#[test]
fn a_missing_train_file_is_named_but_the_test_split_still_opens() {
    let dir = copy_fixture_dir("cifar10");
    let gone = dir.path().join("data_batch_3.bin");
    std::fs::remove_file(&gone).expect("remove data_batch_3.bin");
    for usage in [Some(Usage::Train), None, Some(Usage::All)] {
        let e = build_err(c10_at(dir.path(), usage));
        let text = e.to_string();
        match &e {
            Error::Dataset { path, reason } => {
                assert_eq!(path, &gone, "{text}");
                assert!(reason.contains("missing"), "{text}");
            }
            other => panic!("expected a dataset error, got {other:?}"),
        }
        assert!(text.contains("data_batch_3.bin"), "{text}");
        // The dataset as a whole cannot be used: a usage error (exit 2), not a bad sample.
        assert!(
            e.is_usage(),
            "a missing file is the dataset's error, not a sample's"
        );
    }
    let p = pipe(
        c10_at(dir.path(), Some(Usage::Test)),
        vec![],
        4,
        eng(1, None, OnError::Error),
    );
    let r = run(&p, 0);
    assert_eq!(r.indices, seq(4));
    assert_eq!(r.labels, vec![5, 6, 7, 8]);
    assert!(r.u8s[3] == hwc(Rec { f: 5, k: 3 }));
}

#[test]
fn a_file_that_is_not_whole_records_is_named_with_the_record_size() {
    let dir = copy_fixture_dir("cifar10");
    let f = dir.path().join("data_batch_2.bin");
    let mut bytes = std::fs::read(&f).expect("read");
    bytes.push(0);
    std::fs::write(&f, bytes).expect("write");
    let e = build_err(c10_at(dir.path(), Some(Usage::Train)));
    let text = e.to_string();
    match &e {
        Error::Dataset { path, reason } => {
            assert_eq!(path, &f, "{text}");
            assert!(reason.contains("3073") && reason.contains("9220"), "{text}");
        }
        other => panic!("expected a dataset error, got {other:?}"),
    }
    assert!(text.contains("data_batch_2.bin"), "{text}");
    // the test split does not read that file
    let p = pipe(
        c10_at(dir.path(), Some(Usage::Test)),
        vec![],
        4,
        eng(1, None, OnError::Error),
    );
    assert_eq!(p.source().len(), 4);

    let dir = copy_fixture_dir("cifar100");
    let f = dir.path().join("test.bin");
    let mut bytes = std::fs::read(&f).expect("read");
    bytes.truncate(bytes.len() - 1);
    std::fs::write(&f, bytes).expect("write");
    match build_err(c100_at(dir.path(), Some(Usage::All), None)) {
        Error::Dataset { path, reason } => {
            assert_eq!(path, f);
            assert!(
                reason.contains("3074") && reason.contains("9221"),
                "{reason}"
            );
        }
        other => panic!("expected a dataset error, got {other:?}"),
    }
}

#[test]
fn an_empty_record_file_or_a_missing_root_is_an_error() {
    let dir = copy_fixture_dir("cifar10");
    let f = dir.path().join("test_batch.bin");
    std::fs::write(&f, b"").expect("truncate");
    let e = build_err(c10_at(dir.path(), Some(Usage::Test)));
    match &e {
        Error::Dataset { path, reason } => {
            assert_eq!(path, &f, "{e}");
            assert!(reason.contains("size 0 bytes"), "{e}");
        }
        other => panic!("expected a dataset error, got {other:?}"),
    }
    let missing = dir.path().join("nope");
    match build_err(c10_at(&missing, None)) {
        Error::Dataset { path, reason } => {
            assert_eq!(path, missing);
            assert_eq!(reason, "not a directory");
        }
        other => panic!("expected a dataset error, got {other:?}"),
    }
}

#[test]
fn the_wrong_kind_hints_at_the_right_one() {
    let e = build_err(c100_at(&fixtures().join("cifar10"), None, None));
    let text = e.to_string();
    match &e {
        Error::Dataset { path, .. } => assert_eq!(path, &fixtures().join("cifar10/train.bin")),
        other => panic!("expected a dataset error, got {other:?}"),
    }
    assert!(
        text.contains("data_batch_1.bin") && text.contains("kind = \"cifar10\""),
        "the error should hint at cifar10: {text}"
    );
    let e = build_err(c10_at(&fixtures().join("cifar100"), Some(Usage::Test)));
    let text = e.to_string();
    assert!(
        text.contains("test_batch.bin") && text.contains("kind = \"cifar100\""),
        "the error should hint at cifar100: {text}"
    );
    // no hint when the folder holds neither
    let empty = tempfile::tempdir().expect("tempdir");
    let text = build_err(c10_at(empty.path(), None)).to_string();
    assert!(
        text.contains("data_batch_1.bin") && !text.contains("kind ="),
        "{text}"
    );
}

/// The one error of a fail-mode epoch whose first batch holds the bad sample.
fn first_batch_error(p: &Pipeline) -> Error {
    let mut epoch = p.epoch(0);
    let e = match epoch.next() {
        Some(Err(e)) => e,
        Some(Ok(b)) => panic!(
            "the bad record was read: {} samples, indices {:?}",
            b.len(),
            b.indices()
        ),
        None => panic!("the epoch ended without an error"),
    };
    assert!(
        epoch.next().is_none(),
        "the epoch ends after the failed batch"
    );
    e
}

#[test]
fn a_cifar10_label_out_of_range_fails_its_sample_or_is_skipped() {
    let dir = copy_fixture_dir("cifar10");
    patch(&dir.path().join("test_batch.bin"), 3073, 10);
    // opening reads no record
    for (usage, index) in [(Usage::Test, 1usize), (Usage::All, 16)] {
        let p = pipe(
            c10_at(dir.path(), Some(usage)),
            vec![],
            64,
            eng(2, Some(1), OnError::Error),
        );
        let e = first_batch_error(&p);
        let text = e.to_string();
        match &e {
            Error::Sample {
                index: i,
                file,
                stage,
                kind: SampleErrorKind::BadLabel,
                reason,
            } => {
                assert_eq!(
                    (*i, file.as_str(), *stage),
                    (index, "test_batch.bin:1", "read"),
                    "{text}"
                );
                assert!(reason.contains("label") && reason.contains("10"), "{text}");
            }
            other => panic!("expected a sample error, got {other:?}"),
        }
        assert!(
            text.contains("test_batch.bin:1") && text.contains("label"),
            "{text}"
        );
        assert!(!e.is_usage());
    }
    // the train split never touches it
    let r = run(
        &pipe(
            c10_at(dir.path(), None),
            vec![],
            64,
            eng(1, None, OnError::Error),
        ),
        0,
    );
    assert_eq!(r.indices, seq(15));
    // skip: left out, reported, the rest kept in order and moved up to fill the batch
    let p = pipe(
        c10_at(dir.path(), Some(Usage::Test)),
        vec![hwc_to_chw()],
        2,
        eng(2, Some(1), OnError::Skip),
    );
    let b = batches(&p, 0);
    assert_eq!(b.len(), 2);
    assert_eq!((b[0].len(), b[0].indices()), (2, &[0u64, 2][..]));
    assert_eq!(b[0].labels(), Labels::U32(&[5, 7]));
    let imgs = b[0].images_u8().expect("u8");
    assert!(
        imgs[..PER] == chw(Rec { f: 5, k: 0 })[..] && imgs[PER..] == chw(Rec { f: 5, k: 2 })[..]
    );
    assert_eq!(b[0].skipped().len(), 1);
    match &b[0].skipped()[0] {
        Error::Sample { index: 1, file, .. } => assert_eq!(file, "test_batch.bin:1"),
        other => panic!("skipped error: {other:?}"),
    }
    assert_eq!((b[1].indices(), b[1].skipped().len()), (&[3u64][..], 0));
    assert_eq!(b[1].labels(), Labels::U32(&[8]));
    assert_eq!(b[1].images_u8().expect("u8"), &chw(Rec { f: 5, k: 3 })[..]);
    assert_eq!((b[0].number(), b[1].number()), (0, 1));
}

#[test]
fn cifar100_coarse_and_fine_labels_out_of_range_fail_with_the_record() {
    let dir = copy_fixture_dir("cifar100");
    patch(&dir.path().join("train.bin"), 2 * 3074, 20); // coarse of train.bin:2
    patch(&dir.path().join("test.bin"), 1, 100); // fine of test.bin:0
    for label in [None, Some(CifarLabel::Coarse), Some(CifarLabel::Both)] {
        let p = pipe(
            c100_at(dir.path(), Some(Usage::Train), label),
            vec![],
            8,
            eng(1, None, OnError::Error),
        );
        let e = first_batch_error(&p);
        let text = e.to_string();
        match &e {
            Error::Sample {
                index: 2,
                file,
                stage: "read",
                kind: SampleErrorKind::BadLabel,
                reason,
            } => {
                assert_eq!(file, "train.bin:2");
                assert!(reason.contains("coarse label byte 20"), "{text}");
            }
            other => panic!("expected a sample error for train.bin:2, got {other:?}"),
        }
        let p = pipe(
            c100_at(dir.path(), Some(Usage::Test), label),
            vec![],
            8,
            eng(1, None, OnError::Error),
        );
        let e = first_batch_error(&p);
        let text = e.to_string();
        match &e {
            Error::Sample {
                index: 0,
                file,
                stage: "read",
                kind: SampleErrorKind::BadLabel,
                reason,
            } => {
                assert_eq!(file, "test.bin:0");
                assert!(reason.contains("fine label byte 100"), "{text}");
            }
            other => panic!("expected a sample error for test.bin:0, got {other:?}"),
        }
        assert!(
            text.contains("test.bin:0") && text.contains("label"),
            "{text}"
        );
    }
    // usage all, skip: both bad records (indices 2 and 5) left out
    let p = pipe(
        c100_at(dir.path(), Some(Usage::All), Some(CifarLabel::Both)),
        vec![],
        8,
        eng(2, Some(1), OnError::Skip),
    );
    let b = batches(&p, 0);
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].indices(), &[0, 1, 3, 4, 6, 7]);
    let mut reported: Vec<(usize, String)> = b[0]
        .skipped()
        .iter()
        .map(|e| match e {
            Error::Sample { index, file, .. } => (*index, file.clone()),
            other => panic!("skipped: {other:?}"),
        })
        .collect();
    reported.sort();
    assert_eq!(
        reported,
        vec![
            (2, "train.bin:2".to_string()),
            (5, "test.bin:0".to_string())
        ]
    );
    assert_eq!(
        b[0].labels(),
        Labels::U32(&[0, 0, 1, 3, 3, 9, 4, 12, 2, 4, 3, 7])
    );
}

#[test]
fn the_largest_valid_labels_are_accepted() {
    let dir = copy_fixture_dir("cifar100");
    patch(&dir.path().join("test.bin"), 0, 19);
    patch(&dir.path().join("test.bin"), 1, 99);
    let p = pipe(
        c100_at(dir.path(), Some(Usage::Test), Some(CifarLabel::Both)),
        vec![],
        8,
        eng(1, None, OnError::Error),
    );
    let b = batches(&p, 0);
    assert_eq!(b[0].labels(), Labels::U32(&[19, 99, 2, 4, 3, 7]));
    let dir = copy_fixture_dir("cifar10");
    patch(&dir.path().join("test_batch.bin"), 0, 9);
    let p = pipe(
        c10_at(dir.path(), Some(Usage::Test)),
        vec![],
        8,
        eng(1, None, OnError::Error),
    );
    assert_eq!(batches(&p, 0)[0].labels(), Labels::U32(&[9, 6, 7, 8]));
}

// ---- 7. sampling ------------------------------------------------------------------------------------

#[test]
fn num_samples_limits_a_cifar_epoch() {
    let src = c10(Some(Usage::All)).num_samples(5);
    let p = pipe(src, vec![], 2, eng(2, Some(1), OnError::Error));
    assert_eq!((p.samples_per_epoch(), p.batches_per_epoch()), (5, 3));
    let r = run(&p, 0);
    assert_eq!(r.lens, vec![2, 2, 1]);
    assert_eq!(r.indices, seq(5));
    assert_eq!(r.labels, vec![0, 1, 2, 1, 2]);
    assert!(r.u8s[4] == hwc(Rec { f: 1, k: 1 }));
    let src = c10(Some(Usage::All)).num_samples(100);
    assert_eq!(
        pipe(src, vec![], 2, eng(1, None, OnError::Error)).samples_per_epoch(),
        19
    );
    let src = c10(None).num_samples(0);
    match Pipeline::builder(src).build() {
        // typed: the sampling rule broken, as the error's source
        Err(Error::Invalid(imgfeed::error::Invalid::Sampling(e))) => {
            assert_eq!(e, imgfeed::plan::SamplingError::NoSamples)
        }
        other => panic!("num_samples = 0 should be invalid, got {other:?}"),
    }
}

#[test]
fn shuffle_is_a_worker_independent_permutation_of_cifar_samples() {
    let recs = c10_recs(Usage::All);
    let src = c10(Some(Usage::All)).shuffle(true).seed(17);
    let one = run(
        &pipe(src.clone(), vec![], 4, eng(1, Some(1), OnError::Error)),
        0,
    );
    let two = run(
        &pipe(src.clone(), vec![], 4, eng(2, Some(1), OnError::Error)),
        0,
    );
    assert!(one == two, "2 workers shuffle otherwise than 1");
    assert_ne!(one.indices, seq(19), "shuffle = true kept the file order");
    let mut sorted = one.indices.clone();
    sorted.sort();
    assert_eq!(sorted, seq(19));
    for (pos, &i) in one.indices.iter().enumerate() {
        let rec = recs[i as usize];
        assert!(
            one.u8s[pos] == hwc(rec),
            "position {pos} holds sample {i}'s image"
        );
        assert_eq!(one.labels[pos], c10_label(rec) as i64);
    }
    let next = run(
        &pipe(src.clone(), vec![], 4, eng(2, Some(1), OnError::Error)),
        1,
    );
    assert_ne!(next.indices, one.indices, "epoch 1 reshuffles");
    // num_samples keeps the first of the shuffled order
    let limited = src.num_samples(6);
    let l = run(
        &pipe(limited, vec![], 4, eng(2, Some(1), OnError::Error)),
        0,
    );
    assert_eq!(l.indices, one.indices[..6].to_vec());
}

#[test]
fn two_shards_split_cifar_all_with_wrap_around_padding() {
    let recs = c10_recs(Usage::All);
    let shard = |id: usize, shuffle: bool| {
        let src = c10(Some(Usage::All)).shuffle(shuffle).seed(5).shards(2, id);
        let p = pipe(src, vec![], 4, eng(2, Some(1), OnError::Error));
        assert_eq!((p.samples_per_epoch(), p.batches_per_epoch()), (10, 3));
        let r = run(&p, 0);
        assert_eq!(r.lens, vec![4, 4, 2]);
        for (pos, &i) in r.indices.iter().enumerate() {
            assert!(
                r.u8s[pos] == hwc(recs[i as usize]),
                "shard {id} position {pos}"
            );
            assert_eq!(r.labels[pos], c10_label(recs[i as usize]) as i64);
        }
        r.indices
    };
    let (a, b) = (shard(0, false), shard(1, false));
    assert_eq!(a, vec![0, 2, 4, 6, 8, 10, 12, 14, 16, 18]);
    assert_eq!(
        b,
        vec![1, 3, 5, 7, 9, 11, 13, 15, 17, 0],
        "shard 1 wraps to sample 0"
    );
    for shuffle in [false, true] {
        let (a, b) = (shard(0, shuffle), shard(1, shuffle));
        // disjoint but for the one padding sample, which is shard 0's first
        assert_eq!(b[9], a[0], "shuffle={shuffle}");
        assert!(
            b[..9].iter().all(|i| !a.contains(i)),
            "shuffle={shuffle}: {a:?} {b:?}"
        );
        let mut all: Vec<u64> = [a.clone(), b[..9].to_vec()].concat();
        all.sort();
        assert_eq!(all, seq(19), "shuffle={shuffle}");
    }
}

// ---- 8. the binary --------------------------------------------------------------------------------

#[test]
fn convert_writes_the_cifar10_train_split() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out_dir = tmp.path().join("npy");
    let o = imgfeed(&[
        "convert",
        "pipelines/cifar10_eval.toml",
        "--usage",
        "train",
        "--batch-size",
        "4",
        "--out",
        out_dir.to_str().expect("utf-8 path"),
    ]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "stdout: {out}\nstderr: {err}");
    assert!(out.starts_with("wrote 15 samples to "), "{out}");
    assert!(
        out.contains("images.npy float32 [15, 3, 32, 32], labels.npy int32"),
        "{out}"
    );

    let (header, data) = read_npy(&out_dir.join("images.npy"));
    assert!(header.contains("'descr': '<f4'"), "{header}");
    assert!(header.contains("'shape': (15, 3, 32, 32)"), "{header}");
    assert_eq!(data.len(), 15 * PER * 4);
    let recs = c10_recs(Usage::Train);
    for (s, rec) in recs.iter().enumerate() {
        for e in 0..PER {
            let at = (s * PER + e) * 4;
            let got =
                f32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]) as f64;
            let (c, y, x) = (e / 1024, e / 32 % 32, e % 32);
            let want = normalized(pix(*rec, c, y, x), c, &C10_MEAN, &C10_STD);
            assert!(
                (got - want).abs() <= 1e-5,
                "sample {s} element {e}: {got} vs {want}"
            );
        }
    }

    let (lheader, ldata) = read_npy(&out_dir.join("labels.npy"));
    assert!(lheader.contains("'descr': '<i4'"), "{lheader}");
    assert!(lheader.contains("'shape': (15,)"), "{lheader}");
    let labels: Vec<i32> = ldata
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let want: Vec<i32> = recs.iter().map(|r| c10_label(*r) as i32).collect();
    assert_eq!(labels, want);
    assert_eq!(labels, [0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4, 5, 4, 5, 6]);

    let samples = std::fs::read_to_string(out_dir.join("samples.txt")).expect("samples.txt");
    let lines: Vec<&str> = samples.lines().collect();
    assert_eq!(lines, names(&C10_FILES, &recs));
    assert_eq!(lines[0], "data_batch_1.bin:0");
    assert_eq!(lines[14], "data_batch_5.bin:2");
}

#[test]
fn convert_skips_a_bad_record_and_exits_1() {
    let dir = copy_fixture_dir("cifar10");
    patch(&dir.path().join("test_batch.bin"), 2 * 3073, 200);
    let tmp = tempfile::tempdir().expect("tempdir");
    let out_dir = tmp.path().join("npy");
    let o = imgfeed(&[
        "convert",
        "pipelines/cifar10_eval.toml",
        "--data",
        dir.path().to_str().expect("utf-8 path"),
        "--out",
        out_dir.to_str().expect("utf-8 path"),
    ]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 1, "stdout: {out}\nstderr: {err}");
    assert!(
        err.contains("skipped: test_batch.bin:2") && err.contains("label byte 200"),
        "{err}"
    );
    assert!(
        out.contains("wrote 3 samples") && out.contains("1 bad sample(s) skipped"),
        "{out}"
    );
    let samples = std::fs::read_to_string(out_dir.join("samples.txt")).expect("samples.txt");
    assert_eq!(
        samples,
        "test_batch.bin:0\ntest_batch.bin:1\ntest_batch.bin:3\n"
    );
    let (lheader, ldata) = read_npy(&out_dir.join("labels.npy"));
    assert!(lheader.contains("'shape': (3,)"), "{lheader}");
    assert_eq!(
        ldata,
        [5i32, 6, 8]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>()
    );
}

#[test]
fn bad_usage_and_a_missing_file_are_exit_2() {
    let o = imgfeed(&["run", "pipelines/cifar10_eval.toml", "--usage", "bogus"]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("bogus"), "{err}");
    let o = imgfeed(&["check", "pipelines/resnet50_eval.toml", "--usage", "test"]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(
        err.contains("usage (--usage) applies to cifar10 and cifar100"),
        "{err}"
    );
    let o = imgfeed(&[
        "convert",
        "pipelines/cifar10_eval.toml",
        "--usage",
        "bogus",
        "--out",
        "/nonexistent/never-written",
    ]);
    assert_eq!(code(&o), 2, "{}", text(&o).1);
    let dir = copy_fixture_dir("cifar10");
    std::fs::remove_file(dir.path().join("data_batch_3.bin")).expect("remove");
    let o = imgfeed(&[
        "run",
        "pipelines/cifar10_eval.toml",
        "--usage",
        "train",
        "--data",
        dir.path().to_str().expect("utf-8 path"),
    ]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "only per-sample failures are 1: {err}");
    assert!(
        err.contains("data_batch_3.bin") && err.contains("missing"),
        "{err}"
    );
}

#[test]
fn run_prints_batches_and_samples_of_the_test_split() {
    let o = imgfeed(&[
        "run",
        "pipelines/cifar10_eval.toml",
        "--usage",
        "test",
        "--batch-size",
        "2",
    ]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "stderr: {err}");
    assert!(out.starts_with("cifar10 "), "{out}");
    assert!(
        out.contains("(usage test): 4 samples in 1 file(s)"),
        "{out}"
    );
    assert!(out.contains("epoch 0: 2 batches, 4 samples"), "{out}");
    assert!(
        out.contains("images float32 [2, 3, 32, 32], labels int32 (sum 26)"),
        "5+6+7+8: {out}"
    );
}

#[test]
fn check_prints_the_cifar100_batch_with_two_label_columns() {
    let o = imgfeed(&["check", "pipelines/cifar100_train.toml", "--usage", "all"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "stderr: {err}");
    assert!(out.contains("(usage all): 8 samples in 2 file(s)"), "{out}");
    assert!(
        out.contains("float32 [128, 3, 32, 32], labels int32 [128, 2]"),
        "{out}"
    );
    assert!(out.contains("epoch: 8 samples in 0 batches"), "{out}");
}
