//! torchvision's CIFAR layout (pickled dicts of a numpy array and label lists), on the
//! committed fixtures written by `fixtures/make_cifar_pickle.py` from the same records as
//! the binary fixtures: the pickle layout gives exactly the binary layout's batches (pixels,
//! labels, order, augmentation draws) in every usage and label choice and in every pickle
//! encoding (Python 2 protocol 2, Python 3 protocols 2, 4, 5); bad pickles are dataset
//! errors naming the file, never panics; a folder of neither layout says what it looked for.

mod common;

use common::*;
use imgfeed::source::{
    parse_cifar_pickle, Cifar, Cifar100Config, CifarConfig, CifarKind, CifarLabel, PickleError,
    Pixels, Raw, Source, Usage,
};
use imgfeed::{
    BatchConfig, Dataset, EngineConfig, Error, OnError, Pipeline, PipelineConfig, SourceConfig,
};
use std::path::{Path, PathBuf};

const PER: usize = 3 * 32 * 32;

fn c10_at(root: &Path, usage: Usage) -> SourceConfig {
    SourceConfig::from(Dataset::Cifar10(CifarConfig::new(root).usage(Some(usage))))
}

fn c100_at(root: &Path, usage: Usage, label: CifarLabel) -> SourceConfig {
    SourceConfig::from(Dataset::Cifar100(
        Cifar100Config::new(root)
            .usage(Some(usage))
            .label(Some(label)),
    ))
}

/// An epoch: per-sample u8 images (or f32 bits), labels, sample names.
#[derive(Debug, PartialEq)]
struct Out {
    images: Vec<Vec<u8>>,
    floats: Vec<Vec<u32>>,
    labels: Vec<i64>,
    names: Vec<String>,
}

fn collect(p: &Pipeline) -> Out {
    let mut o = Out {
        images: vec![],
        floats: vec![],
        labels: vec![],
        names: vec![],
    };
    for b in batches(p, 0) {
        if let Ok(v) = b.images_u8() {
            o.images.extend(v.chunks(PER).map(<[u8]>::to_vec));
        }
        if let Ok(v) = b.images_f32() {
            o.floats.extend(
                v.chunks(PER)
                    .map(|c| c.iter().map(|x| x.to_bits()).collect()),
            );
        }
        o.labels.extend(labels_i64(&b));
    }
    let s = p.source();
    // The pickle layout's names are the binary ones without `.bin`.
    o.names = (0..s.len())
        .map(|i| s.sample_name(i).replace(".bin:", ":"))
        .collect();
    o
}

fn epoch(src: SourceConfig, workers: usize) -> Out {
    let p = Pipeline::builder(src)
        .batch(4, false)
        .engine(
            EngineConfig::default()
                .workers(workers)
                .work_unit(1)
                .on_error(OnError::Error),
        )
        .op(hwc_to_chw())
        .build()
        .unwrap_or_else(|e| panic!("CIFAR pipeline should build: {e}"));
    collect(&p)
}

/// A pipeline file of `pipelines/` (shuffle, random crop and flip, normalize) on `root`.
fn train_file(name: &str, root: &Path) -> Out {
    let mut cfg = PipelineConfig::from_file(repo().join("pipelines").join(name)).expect("parses");
    cfg.source
        .dataset
        .root_mut()
        .clone_from(&root.to_path_buf());
    cfg.batch = BatchConfig::new(4);
    cfg.engine = EngineConfig::default().workers(2).work_unit(1);
    collect(&Pipeline::new(cfg).expect("pipeline builds"))
}

fn fx(name: &str) -> PathBuf {
    fixtures().join(name)
}

fn variant(kind: &str, tag: &str) -> PathBuf {
    fixtures().join("cifar_py_variants").join(kind).join(tag)
}

// ---- same batches ----------------------------------------------------------------------------

#[test]
fn cifar10_pickle_layout_gives_the_binary_batches_in_every_usage() {
    for usage in [Usage::Train, Usage::Test, Usage::All] {
        let bin = epoch(c10_at(&fx("cifar10"), usage), 1);
        let n = match usage {
            Usage::Train => 15,
            Usage::Test => 4,
            Usage::All => 19,
        };
        assert_eq!(bin.images.len(), n, "{usage:?}");
        for workers in [1, 2] {
            let py = epoch(c10_at(&fx("cifar10_py"), usage), workers);
            assert!(py == bin, "{usage:?}, {workers} worker(s)");
        }
    }
    assert_eq!(
        train_file("cifar10_train.toml", &fx("cifar10_py")),
        train_file("cifar10_train.toml", &fx("cifar10"))
    );
}

#[test]
fn cifar100_pickle_layout_gives_the_binary_batches_for_every_label_choice() {
    for usage in [Usage::Train, Usage::Test, Usage::All] {
        for label in [CifarLabel::Fine, CifarLabel::Coarse, CifarLabel::Both] {
            let bin = epoch(c100_at(&fx("cifar100"), usage, label), 1);
            let py = epoch(c100_at(&fx("cifar100_py"), usage, label), 2);
            assert!(py == bin, "{usage:?} {label:?}");
            let cols = if label == CifarLabel::Both { 2 } else { 1 };
            assert_eq!(bin.labels.len(), bin.images.len() * cols);
        }
    }
    let both = epoch(
        c100_at(&fx("cifar100_py"), Usage::Test, CifarLabel::Both),
        1,
    );
    // make_cifar.py: coarse (k + f) % 20, fine (k * 3 + f) % 100, f = 1 for test
    assert_eq!(both.labels, vec![1, 1, 2, 4, 3, 7]);
    assert_eq!(
        train_file("cifar100_train.toml", &fx("cifar100_py")),
        train_file("cifar100_train.toml", &fx("cifar100"))
    );
}

#[test]
fn every_pickle_protocol_gives_the_same_batches() {
    for tag in ["proto2_py3", "proto4", "proto5"] {
        let py = epoch(c10_at(&variant("cifar10", tag), Usage::Test), 1);
        assert!(
            py == epoch(c10_at(&fx("cifar10"), Usage::Test), 1),
            "cifar10 {tag}"
        );
        for label in [CifarLabel::Fine, CifarLabel::Both] {
            let py = epoch(c100_at(&variant("cifar100", tag), Usage::All, label), 2);
            let bin = epoch(c100_at(&fx("cifar100"), Usage::All, label), 1);
            assert!(py == bin, "cifar100 {tag} {label:?}");
        }
    }
}

#[test]
fn raw_array_bytes_are_read_in_place_and_latin1_text_is_decoded() {
    for (path, in_file) in [
        (fx("cifar10_py/test_batch"), true),
        (variant("cifar10", "proto4").join("test_batch"), true),
        (variant("cifar10", "proto5").join("test_batch"), true),
        (variant("cifar10", "proto2_py3").join("test_batch"), false),
    ] {
        let bytes = std::fs::read(&path).expect("fixture");
        let p = parse_cifar_pickle(&bytes, CifarKind::Cifar10).expect("parses");
        assert_eq!(p.len(), 4);
        assert_eq!(p.labels, vec![[5, 0], [6, 0], [7, 0], [8, 0]]);
        match &p.pixels {
            Pixels::InFile(r) => {
                assert!(in_file, "{}", path.display());
                assert_eq!(r.len(), 4 * PER);
            }
            Pixels::Decoded(v) => {
                assert!(!in_file, "{}", path.display());
                assert_eq!(v.len(), 4 * PER);
            }
        }
        let bin = std::fs::read(fx("cifar10/test_batch.bin")).expect("binary fixture");
        for r in 0..4 {
            let rec = &bin[r * (PER + 1) + 1..(r + 1) * (PER + 1)];
            assert_eq!(p.record(&bytes, r), Some(rec), "record {r}");
        }
        assert_eq!(p.record(&bytes, 4), None);
    }
    // the source hands out planes of the memory map, named FILE:RECORD
    let c = Cifar::open(
        &fx("cifar10_py"),
        CifarKind::Cifar10,
        Usage::All,
        CifarLabel::Fine,
    )
    .expect("opens");
    assert_eq!(c.len(), 19);
    assert_eq!(c.sample_name(15), "test_batch:0");
    assert_eq!(c.sample_name(3), "data_batch_2:0");
    assert!(
        c.describe()
            .ends_with("(usage all, pickle layout): 19 samples in 6 file(s)"),
        "{}",
        c.describe()
    );
    let mut scratch = Vec::new();
    let s = c.read(16, &mut scratch).expect("read");
    assert_eq!(s.labels, [6, 0]);
    assert!(matches!(
        s.raw,
        Raw::Planar {
            height: 32,
            width: 32,
            data
        } if data.len() == PER
    ));
    assert!(scratch.is_empty(), "nothing is copied");
}

// ---- layouts -----------------------------------------------------------------------------------

fn copy_dir(from: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for e in std::fs::read_dir(from).expect("read fixture folder") {
        let e = e.expect("entry");
        copy_into(dir.path(), &e.file_name().to_string_lossy(), &e.path());
    }
    dir
}

fn open_err(src: SourceConfig) -> (PathBuf, String) {
    match Pipeline::builder(src).batch(2, false).workers(1).build() {
        Err(Error::Dataset { path, reason }) => (path, reason),
        Err(other) => panic!("expected a dataset error, got {other}"),
        Ok(p) => panic!("expected an error, opened {}", p.source().describe()),
    }
}

#[test]
fn a_folder_of_neither_layout_names_both_layouts_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, reason) = open_err(c10_at(dir.path(), Usage::Train));
    assert_eq!(path, dir.path().join("data_batch_1.bin"));
    for want in [
        "missing",
        "data_batch_1.bin … data_batch_5.bin, test_batch.bin",
        "pickle layout (data_batch_1 … data_batch_5, test_batch)",
    ] {
        assert!(reason.contains(want), "{want:?} in {reason}");
    }
    let (path, reason) = open_err(c100_at(dir.path(), Usage::Test, CifarLabel::Fine));
    assert_eq!(path, dir.path().join("test.bin"));
    assert!(reason.contains("(train, test)"), "{reason}");
    // torchvision's root (the folder above cifar-10-batches-py) gets a hint
    std::fs::create_dir(dir.path().join("cifar-10-batches-py")).expect("mkdir");
    let (_, reason) = open_err(c10_at(dir.path(), Usage::Train));
    assert!(
        reason.contains("holds cifar-10-batches-py/: point root there"),
        "{reason}"
    );
    // the other CIFAR's pickle files
    let (_, reason) = open_err(c10_at(&fx("cifar100_py"), Usage::Train));
    assert!(
        reason.contains("holds train instead") && reason.contains("kind = \"cifar100\""),
        "{reason}"
    );
    let (_, reason) = open_err(c100_at(&fx("cifar10_py"), Usage::Train, CifarLabel::Fine));
    assert!(reason.contains("holds data_batch_1 instead"), "{reason}");
}

#[test]
fn binary_files_win_and_a_missing_pickle_file_is_named() {
    let dir = copy_dir(&fx("cifar10_py"));
    copy_into(dir.path(), "test_batch.bin", &fx("cifar10/test_batch.bin"));
    let c = Cifar::open(
        dir.path(),
        CifarKind::Cifar10,
        Usage::Test,
        CifarLabel::Fine,
    )
    .expect("binary test file");
    assert_eq!(c.sample_name(0), "test_batch.bin:0");
    // the binary layout is chosen, so its missing train files are the error
    let (path, _) = open_err(c10_at(dir.path(), Usage::Train));
    assert_eq!(path, dir.path().join("data_batch_1.bin"));

    let dir = copy_dir(&fx("cifar10_py"));
    std::fs::remove_file(dir.path().join("data_batch_3")).expect("rm");
    let (path, reason) = open_err(c10_at(dir.path(), Usage::All));
    assert_eq!(path, dir.path().join("data_batch_3"));
    assert!(
        reason.contains("missing") && reason.contains("pickle"),
        "{reason}"
    );
    assert_eq!(
        epoch(c10_at(dir.path(), Usage::Test), 1),
        epoch(c10_at(&fx("cifar10"), Usage::Test), 1)
    );
}

// ---- bad pickles ---------------------------------------------------------------------------------

/// Write `bytes` as `test_batch` of a CIFAR-10 pickle folder and open the test split:
/// the dataset error's reason (the path must be that file).
fn bad_c10(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("test_batch");
    std::fs::write(&f, bytes).expect("write");
    let (path, reason) = open_err(c10_at(dir.path(), Usage::Test));
    assert_eq!(path, f, "{reason}");
    assert!(
        reason.starts_with("not a readable cifar10 pickle: "),
        "{reason}"
    );
    let e = Error::Dataset {
        path,
        reason: reason.clone(),
    };
    assert!(e.to_string().contains("test_batch"), "{e}");
    reason
}

fn fixture_batch() -> Vec<u8> {
    std::fs::read(fx("cifar10_py/test_batch")).expect("fixture")
}

/// `bytes` with the single occurrence of `from` replaced by `to`.
fn patched(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let at: Vec<usize> = (0..bytes.len().saturating_sub(from.len() - 1))
        .filter(|&i| bytes[i..].starts_with(from))
        .collect();
    assert_eq!(at.len(), 1, "{from:?} occurs {} times", at.len());
    [&bytes[..at[0]], to, &bytes[at[0] + from.len()..]].concat()
}

#[test]
fn truncated_pickles_are_errors_naming_the_file() {
    let b = fixture_batch();
    let mut cuts: Vec<usize> = (0..b.len()).step_by(53).collect();
    cuts.extend([1, 2, 215, 216, 220, b.len() - 1]);
    for cut in cuts {
        let reason = bad_c10(&b[..cut]);
        assert!(reason.contains("truncated"), "cut at {cut}: {reason}");
    }
}

#[test]
fn a_global_other_than_numpy_is_refused() {
    let reason = bad_c10(b"\x80\x02cos\nsystem\n(U\x04echotR.");
    assert!(
        reason.contains("refused global `os system` at byte 2"),
        "{reason}"
    );
    // STACK_GLOBAL too
    let reason = bad_c10(b"\x80\x04\x8c\x08builtins\x8c\x04eval\x93.");
    assert!(reason.contains("`builtins eval`"), "{reason}");
    // in place of numpy's reconstructor, in a real file
    let b = patched(
        &fixture_batch(),
        b"cnumpy.core.multiarray\n_reconstruct\n",
        b"csubprocess\ncheck_output______\n",
    );
    assert!(bad_c10(&b).contains("`subprocess check_output______`"));
}

#[test]
fn wrong_arrays_and_labels_are_clear_errors() {
    let b = fixture_batch();
    let cases: [(&[u8], &[u8], &str); 6] = [
        (b"U\x02u1", b"U\x02f1", "'data' has dtype 'f1', not uint8"),
        // N = 5 in the shape: the bytes are 4 records
        (
            b"K\x04M\x00\x0c\x86",
            b"K\x05M\x00\x0c\x86",
            "'data' holds 12288 bytes but its shape [5, 3072] needs 15360",
        ),
        (
            b"K\x04M\x00\x0c\x86",
            b"K\x04M\x01\x0c\x86",
            "'data' has shape [4, 3073], not [N, 3072]",
        ),
        (
            b"K\x05K\x06K\x07K\x08e",
            b"K\x05K\x06K\x07e",
            "'labels' has 3 labels for 4 images",
        ),
        (b"\x89T", b"\x88T", "Fortran-ordered"),
        (b"U\x06labels", b"U\x06lables", "no 'labels' key"),
    ];
    for (from, to, want) in cases {
        let reason = bad_c10(&patched(&b, from, to));
        assert!(reason.contains(want), "{want:?} in {reason}");
    }
    // a CIFAR-10 file read as CIFAR-100
    let dir = tempfile::tempdir().expect("tempdir");
    copy_into(dir.path(), "test", &fx("cifar10_py/test_batch"));
    let (_, reason) = open_err(c100_at(dir.path(), Usage::Test, CifarLabel::Fine));
    assert!(reason.contains("is this CIFAR-10"), "{reason}");
}

#[test]
fn unknown_opcodes_huge_lengths_and_deep_nesting_are_errors() {
    let b = fixture_batch();
    // EMPTY_DICT at byte 2 replaced by an opcode that does not exist
    let mut u = b.clone();
    u[2] = 0xff;
    let reason = bad_c10(&u);
    assert!(
        reason.contains("unsupported pickle opcode 0xff at byte 2"),
        "{reason}"
    );
    // the array's BINSTRING declares 2 GiB
    let t = patched(&b, b"\x89T\x000\x00\x00", b"\x89T\xff\xff\xff\x7f");
    let reason = bad_c10(&t);
    assert!(reason.contains("needs 2147483647 bytes"), "{reason}");
    // BINBYTES8 and FRAME of 2^64 - 1 bytes, a negative BINSTRING length
    for huge in [
        &b"\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\xff."[..],
        b"\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xff}.",
    ] {
        let reason = bad_c10(huge);
        assert!(
            reason.contains("needs 18446744073709551615 bytes"),
            "{reason}"
        );
    }
    assert!(bad_c10(b"\x80\x02T\xff\xff\xff\xff.").contains("BINSTRING length -1"));
    let reason = bad_c10(&[b'('; 10_000]);
    assert!(reason.contains("nesting deeper than 64"), "{reason}");
    assert!(bad_c10(b"").contains("no STOP"));
    assert!(bad_c10(b"\x80\x02]q\x00.").contains("not a dict"));
    assert!(bad_c10(b"\x80\x06}.").contains("protocol 6"));
    // the parser's own entry point gives the same typed errors
    assert_eq!(
        parse_cifar_pickle(&u, CifarKind::Cifar10),
        Err(PickleError::UnknownOpcode {
            opcode: 0xff,
            offset: 2
        })
    );
}

#[test]
fn a_bad_label_fails_its_sample_like_a_bad_label_byte() {
    let b = patched(&fixture_batch(), b"K\x05K\x06", b"K\x05K\x0a");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("test_batch"), &b).expect("write");
    let p = Pipeline::builder(c10_at(dir.path(), Usage::Test))
        .batch(4, false)
        .workers(1)
        .build()
        .expect("opens: labels are checked per record");
    let errs: Vec<String> = p
        .epoch(0)
        .filter_map(|b| b.err().map(|e| e.to_string()))
        .collect();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].contains("test_batch:1") && errs[0].contains("CIFAR-10 label 10 out of range"),
        "{}",
        errs[0]
    );
    let p = Pipeline::builder(c10_at(dir.path(), Usage::Test))
        .batch(4, false)
        .engine(skipping(1))
        .build()
        .expect("opens");
    let out = collect(&p);
    assert_eq!(out.labels, vec![5, 7, 8]);
}

// ---- the binary ------------------------------------------------------------------------------

#[test]
fn run_and_validate_take_a_torchvision_folder() {
    let data = fx("cifar10_py");
    let o = imgfeed(&[
        "run",
        "pipelines/cifar10_eval.toml",
        "--usage",
        "test",
        "--batch-size",
        "2",
        "--data",
        data.to_str().expect("utf-8 path"),
    ]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "stderr: {err}");
    assert!(
        out.contains("(usage test, pickle layout): 4 samples in 1 file(s)"),
        "{out}"
    );
    assert!(
        out.contains("images float32 [2, 3, 32, 32], labels int32 (sum 26)"),
        "5+6+7+8: {out}"
    );
    for (dir, samples) in [("cifar10_py", 19), ("cifar100_py", 8)] {
        let o = imgfeed(&["validate", fx(dir).to_str().expect("utf-8"), "--json"]);
        let (out, err) = text(&o);
        assert_eq!(code(&o), 0, "{dir}: stderr {err}");
        assert!(
            out.contains(&format!("\"samples\":{samples}")),
            "{dir}: {out}"
        );
    }
}
