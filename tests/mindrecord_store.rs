//! MindSpore's MindRecord read in place from object storage, against a real S3-compatible
//! server (moto_server, from `python/envs.sh moto`) on loopback: a group written by
//! MindSpore's own `FileWriter` (`shard_num = 2`, `fixtures/records/write_tree.py` in the
//! `mindspore` environment) and uploaded with its `.db` files gives `imgfeed run`'s digests
//! of the image tree (eval and train pipelines, 2 epochs, 1 and 2 workers, ranks of 2),
//! read from either name of the group, a pattern of both or the prefix; each object is
//! indexed once, the index kept in the cache (a warm run downloads nothing); a missing file
//! of the group, or a header that lies, is an error naming its object.
//!
//! Runs inside a network namespace holding only loopback (`.ci/run`:
//! `unshare -n sh -c 'ip link set lo up && cargo test --test mindrecord_store'` with
//! `IMGFEED_S3_TESTS=required IMGFEED_FORMAT_TESTS=required`). Elsewhere, or without the
//! environments, each test says why it is skipped and passes, unless those variables say
//! the tests are required.

mod common;
#[path = "common/formats.rs"]
mod formats;
#[path = "common/moto.rs"]
mod moto;
#[path = "common/remote.rs"]
mod remote;

use formats::{s, EVAL, TRAIN};
use moto::Moto;
use remote::{text, traffic};
use std::path::{Path, PathBuf};
use std::process::Output;

/// MindSpore's python when both the S3 server and the `mindspore` environment are there.
fn ready(test: &str) -> Option<PathBuf> {
    if !moto::ready(test) {
        return None;
    }
    formats::ready(test, "mindspore", "mindspore.mindrecord")
}

/// `imgfeed run PIPELINE` on `data` in the store at `endpoint` (batches of 4, 2 epochs),
/// with `workers`, `(num_shards, shard_id)` and the cache folder `cache`.
fn run(
    pipeline: &str,
    data: &str,
    workers: &str,
    rank: Option<(&str, &str)>,
    cache: &Path,
    endpoint: &str,
) -> Output {
    let mut args = vec![
        "run",
        pipeline,
        "--data",
        data,
        "--cache-dir",
        s(cache),
        "--batch-size",
        "4",
        "--workers",
        workers,
        "--epochs",
        "2",
    ];
    if let Some((n, i)) = rank {
        args.extend(["--num-shards", n, "--shard-id", i]);
    }
    moto::imgfeed(&args, &[], &[("AWS_ENDPOINT_URL", endpoint)])
}

/// The digests of a run that must have succeeded.
fn digests(o: &Output) -> Vec<String> {
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    remote::digests(o)
}

/// The fixture tree as MindSpore's group `dir/tree.mindrecord0..1` (with their `.db`).
fn group(python: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    formats::write_tree(
        python,
        "mindrecord",
        &dir.path().join("tree.mindrecord"),
        2,
        &[],
    );
    for k in 0..2 {
        assert!(dir.path().join(format!("tree.mindrecord{k}")).is_file());
    }
    dir
}

#[test]
fn a_mindspore_group_in_the_store_gives_the_trees_digests_from_either_name() {
    let Some(python) =
        ready("a_mindspore_group_in_the_store_gives_the_trees_digests_from_either_name")
    else {
        return;
    };
    let local = group(&python);
    let moto = Moto::start(None);
    moto::upload(moto.port, "mrec", "train", local.path(), |_, b| Some(b));
    let ep = moto.endpoint();
    let tree = common::repo().join("fixtures/imagefolder");
    let names = [
        "s3://mrec/train/tree.mindrecord0",
        "s3://mrec/train/tree.mindrecord1",
    ];
    let cache = tempfile::tempdir().expect("tempdir");
    for pipeline in [EVAL, TRAIN] {
        for workers in ["1", "2"] {
            for rank in [None, Some(("2", "0")), Some(("2", "1"))] {
                let want = formats::digests(&formats::run(pipeline, s(&tree), workers, rank, None));
                assert_eq!(want.len(), 2, "two epochs");
                for data in names {
                    let got = run(pipeline, data, workers, rank, cache.path(), &ep);
                    let so = text(&got.stdout);
                    assert!(
                        so.starts_with(&format!("mindrecord {data}: 12 samples in 2 files")),
                        "{so}{}",
                        text(&got.stderr)
                    );
                    assert_eq!(digests(&got), want, "{pipeline} {data} {workers} {rank:?}");
                }
            }
        }
    }
    // Each object indexed once: its index is in the cache, and a warm run fetches nothing.
    let indexes = std::fs::read_dir(cache.path().join("indexes"))
        .map(|d| d.flatten().count())
        .unwrap_or(0);
    assert_eq!(indexes, 2, "one index per object of the group");
    let warm = run(EVAL, names[1], "2", None, cache.path(), &ep);
    let want = formats::digests(&formats::run(EVAL, s(&tree), "2", None, None));
    assert_eq!(digests(&warm), want, "warm");
    assert_eq!(
        traffic(&warm, "files downloaded"),
        0,
        "{}",
        text(&warm.stdout)
    );
    // A pattern reads exactly the objects it names; the prefix, every group in it (kind
    // mindrecord, as a pipeline names it).
    let fresh = tempfile::tempdir().expect("tempdir");
    let one = run(
        EVAL,
        "s3://mrec/train/tree.mindrecord{1..1}",
        "2",
        None,
        fresh.path(),
        &ep,
    );
    assert!(
        text(&one.stdout).contains("in 1 file"),
        "{}{}",
        text(&one.stdout),
        text(&one.stderr)
    );
    let pipeline = fresh.path().join("mindrecord_eval.toml");
    let eval = std::fs::read_to_string(common::repo().join(EVAL)).expect("reads");
    let changed = eval.replacen("kind = \"image_folder\"", "kind = \"mindrecord\"", 1);
    assert_ne!(changed, eval);
    std::fs::write(&pipeline, changed).expect("writes");
    let prefix = run(
        s(&pipeline),
        "s3://mrec/train/",
        "2",
        None,
        fresh.path(),
        &ep,
    );
    assert!(
        text(&prefix.stdout).contains("12 samples in 2 files"),
        "{}{}",
        text(&prefix.stdout),
        text(&prefix.stderr)
    );
    assert_eq!(digests(&prefix), want, "the prefix");
}

#[test]
fn a_missing_file_of_the_group_or_a_lying_header_is_named_with_its_object() {
    let Some(python) =
        ready("a_missing_file_of_the_group_or_a_lying_header_is_named_with_its_object")
    else {
        return;
    };
    let local = group(&python);
    let moto = Moto::start(None);
    moto::upload(moto.port, "mrec", "half", local.path(), |name, b| {
        (!name.starts_with("tree.mindrecord1")).then_some(b)
    });
    let ep = moto.endpoint();
    let cache = tempfile::tempdir().expect("tempdir");
    let o = run(
        EVAL,
        "s3://mrec/half/tree.mindrecord0",
        "2",
        None,
        cache.path(),
        &ep,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stdout));
    let e = text(&o.stderr);
    assert!(
        e.contains("s3://mrec/half/tree.mindrecord1")
            && e.contains("no such object (a file of the MindRecord group s3://mrec/half/tree.mindrecord0 belongs to)"),
        "{e}"
    );
    // A header announcing more bytes than the object has: the object and the reason.
    let lying = tempfile::tempdir().expect("tempdir");
    let mut bytes = std::fs::read(local.path().join("tree.mindrecord0")).expect("reads");
    bytes[..8].copy_from_slice(&(1u64 << 60).to_le_bytes());
    std::fs::write(lying.path().join("tree.mindrecord0"), bytes).expect("writes");
    moto::upload(moto.port, "lies", "mr", lying.path(), |_, b| Some(b));
    let o = run(
        EVAL,
        "s3://lies/mr/tree.mindrecord0",
        "2",
        None,
        cache.path(),
        &ep,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stdout));
    let e = text(&o.stderr);
    assert!(
        e.contains("s3://lies/mr/tree.mindrecord0")
            && e.contains("not a MindRecord file: header of 1152921504606846976 bytes announced"),
        "{e}"
    );
    // The named object itself missing is said too.
    let o = run(
        EVAL,
        "s3://mrec/half/tree.mindrecord1",
        "2",
        None,
        cache.path(),
        &ep,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stdout));
    let e = text(&o.stderr);
    assert!(
        e.contains("s3://mrec/half/tree.mindrecord1") && e.contains("no such object"),
        "{e}"
    );
}
