//! Shards datasets in object storage, against a real S3-compatible server (moto_server,
//! from `python/envs.sh moto`) on the loopback interface, with `imgfeed` run as a user runs
//! it: the same digests as the local copy (eval and train pipelines, cold and warm cache),
//! ranks disjoint, the cache limit holding, faults (503s, connections dropped mid-body: a
//! fault-injecting proxy of this file's own), a missing object, a truncated object, wrong
//! credentials, an image tree asked of object storage, and objects rewritten since they
//! were listed refused by name.
//!
//! Everything runs inside a network namespace holding only loopback, so no request can
//! leave the machine: `.ci/run` runs this file as
//! `unshare -n sh -c 'ip link set lo up && cargo test --test s3'` with
//! `IMGFEED_S3_TESTS=required`. Elsewhere (a plain `cargo test`) each test says why it is
//! skipped and passes, unless `IMGFEED_S3_TESTS=required`, which turns a skip into a
//! failure. Every server, subprocess and loop here is bounded in time.

mod common;
#[path = "common/formats.rs"]
mod formats;
#[path = "common/moto.rs"]
mod moto;
#[path = "common/proxy.rs"]
mod proxy;
#[path = "common/remote.rs"]
mod remote;

use moto::*;
use proxy::{Fault, Proxy};

use remote::{
    convert_fixtures, digests, files_of, local_shards, per_epoch, text, traffic, COMMAND_LIMIT,
    EVAL, TRAIN,
};

use std::io::Write;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

#[test]
fn remote_shards_give_the_local_digests_cold_and_warm() {
    if !ready("remote_shards_give_the_local_digests_cold_and_warm") {
        return;
    }
    let local = local_shards();
    let dir = local.path().join("ds");
    let moto = Moto::start(None);
    upload(moto.port, "data", "jpeg256", &dir, |_, b| Some(b));
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let cache = tempfile::tempdir().expect("tempdir");
    let shards = std::fs::read_dir(&dir)
        .expect("dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("shard-"))
        .count() as u64;
    assert!(shards >= 3, "{shards} shards");
    for args in [EVAL, TRAIN] {
        let want = imgfeed(args, &["--data", dir.to_str().expect("utf-8")], &[]);
        assert!(want.status.success(), "{}", text(&want.stderr));
        let want = digests(&want);
        assert!(!want.is_empty());
        let c = tempfile::tempdir().expect("tempdir");
        let cold = run_remote(args, "s3://data/jpeg256", c.path(), &env);
        assert!(cold.status.success(), "{}", text(&cold.stderr));
        assert_eq!(digests(&cold), want, "{args:?} cold");
        assert_eq!(
            traffic(&cold, "files downloaded"),
            shards + 2,
            "{}",
            text(&cold.stdout)
        );
        let warm = run_remote(args, "s3://data/jpeg256", c.path(), &env);
        assert!(warm.status.success(), "{}", text(&warm.stderr));
        assert_eq!(digests(&warm), want, "{args:?} warm");
        assert_eq!(
            traffic(&warm, "files downloaded"),
            0,
            "{}",
            text(&warm.stdout)
        );
    }
    // The endpoint as a flag instead of AWS_ENDPOINT_URL, and a prefix of one's own.
    let flag = imgfeed(
        EVAL,
        &[
            "--data",
            "s3://data/jpeg256/",
            "--endpoint",
            &ep,
            "--cache-dir",
            cache.path().to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(flag.status.success(), "{}", text(&flag.stderr));
}

#[test]
fn ranks_read_disjoint_samples_from_the_store() {
    if !ready("ranks_read_disjoint_samples_from_the_store") {
        return;
    }
    let local = local_shards();
    let moto = Moto::start(None);
    upload(moto.port, "data", "ds", &local.path().join("ds"), |_, b| {
        Some(b)
    });
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let cache = tempfile::tempdir().expect("tempdir");
    let mut seen: Vec<Vec<String>> = Vec::new();
    for rank in ["0", "1"] {
        let out = local.path().join(format!("rank{rank}"));
        let d = data("s3://data/ds", cache.path());
        let mut more: Vec<&str> = d.iter().map(String::as_str).collect();
        more.extend([
            "--format",
            "npy",
            "--shuffle",
            "--num-shards",
            "2",
            "--shard-id",
            rank,
            "--out",
            out.to_str().expect("utf-8"),
        ]);
        let o = imgfeed(&["convert", "pipelines/resnet50_eval.toml"], &more, &env);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let names = std::fs::read_to_string(out.join("samples.txt")).expect("samples.txt");
        seen.push(names.lines().map(str::to_string).collect());
    }
    assert_eq!((seen[0].len(), seen[1].len()), (6, 6));
    let mut all: Vec<&String> = seen.iter().flatten().collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 12, "ranks overlap: {seen:?}");
}

#[test]
fn the_cache_stays_within_its_limit() {
    if !ready("the_cache_stays_within_its_limit") {
        return;
    }
    let local = local_shards();
    let dir = local.path().join("ds");
    let moto = Moto::start(None);
    upload(moto.port, "data", "ds", &dir, |_, b| Some(b));
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let want = digests(&imgfeed(
        TRAIN,
        &["--data", dir.to_str().expect("utf-8")],
        &[],
    ));
    let sizes: Vec<u64> = std::fs::read_dir(&dir)
        .expect("dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("shard-"))
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .collect();
    let small = bytes_under(&dir) - sizes.iter().sum::<u64>();
    let largest = sizes.iter().copied().max().unwrap_or(0);
    // Room for the index, the names and three shards: less than the dataset.
    let limit = small + 3 * largest;
    assert!(limit < bytes_under(&dir));
    let cache = tempfile::tempdir().expect("tempdir");
    let d = data("s3://data/ds", cache.path());
    let mut more: Vec<&str> = d.iter().map(String::as_str).collect();
    let limit_s = limit.to_string();
    // Whole files (range mode, auto's choice here, is tests/store_ranges.rs's).
    more.extend(["--cache-size", &limit_s, "--fetch", "files"]);
    let (o, most) = watching(cache.path(), || imgfeed(TRAIN, &more, &env));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(digests(&o), want);
    assert!(
        most > 0 && most <= limit,
        "{most} bytes on disk, limit {limit}"
    );
    // Two shuffled epochs through a cache smaller than the dataset: shards come again.
    assert!(traffic(&o, "files downloaded") > sizes.len() as u64 + 2);
    // A limit that cannot hold the largest shard is refused up front, naming the flag.
    let tiny = (small + largest / 2).to_string();
    let d = data("s3://data/ds", cache.path());
    let mut more: Vec<&str> = d.iter().map(String::as_str).collect();
    more.extend(["--cache-size", &tiny, "--fetch", "files"]);
    let o = imgfeed(TRAIN, &more, &env);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--cache-size"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn server_errors_and_connections_dropped_mid_body_are_retried_and_counted() {
    if !ready("server_errors_and_connections_dropped_mid_body_are_retried_and_counted") {
        return;
    }
    let local = local_shards();
    let dir = local.path().join("ds");
    let moto = Moto::start(None);
    upload(moto.port, "data", "ds", &dir, |_, b| Some(b));
    let want = digests(&imgfeed(
        TRAIN,
        &["--data", dir.to_str().expect("utf-8")],
        &[],
    ));
    for (fault, faults) in [(Fault::Unavailable, 4), (Fault::CutAfter(3000), 3)] {
        let proxy = Proxy::start(moto.port, fault, faults);
        let ep = proxy.endpoint();
        let cache = tempfile::tempdir().expect("tempdir");
        let o = run_remote(
            TRAIN,
            "s3://data/ds",
            cache.path(),
            &[("AWS_ENDPOINT_URL", ep.as_str())],
        );
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(digests(&o), want, "nothing lost or repeated");
        // Every fault cost one retry (a cut download resumes where it stopped).
        let retries = traffic(&o, "retries");
        assert!(retries >= faults as u64, "{}", text(&o.stdout));
    }
}

#[test]
fn missing_truncated_and_forbidden_objects_fail_naming_the_object() {
    if !ready("missing_truncated_and_forbidden_objects_fail_naming_the_object") {
        return;
    }
    let local = local_shards();
    let dir = local.path().join("ds");
    let moto = Moto::start(None);
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    upload(moto.port, "missing", "ds", &dir, |n, b| {
        (n != "shard-00001.bin").then_some(b)
    });
    upload(moto.port, "truncated", "ds", &dir, |n, mut b| {
        if n == "shard-00001.bin" {
            b.truncate(b.len() - 100);
        }
        Some(b)
    });
    // Replaced by other bytes of the same size: the manifest's CRC-32 tells.
    upload(moto.port, "changed", "ds", &dir, |n, mut b| {
        if n == "shard-00001.bin" {
            let last = b.len() - 1;
            b[last] ^= 0xff;
        }
        Some(b)
    });
    let cache = tempfile::tempdir().expect("tempdir");
    for (bucket, says) in [
        ("missing", "no such object (404)"),
        ("truncated", "the manifest says"),
        ("changed", "checksum mismatch"),
    ] {
        let o = run_remote(EVAL, &format!("s3://{bucket}/ds"), cache.path(), &env);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bucket}: {err}");
        assert!(
            err.contains(&format!("s3://{bucket}/ds/shard-00001.bin")) && err.contains(says),
            "{bucket}: {err}"
        );
        assert!(
            digests(&o).is_empty(),
            "no epoch completes: {}",
            text(&o.stdout)
        );
    }
    // A bucket that does not exist: said in words, not the store's XML (an image tree's
    // listing and a shards dataset's manifest alike).
    let o = run_remote(EVAL, "s3://no-such-bucket/ds", cache.path(), &env);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("s3://no-such-bucket: no such bucket in S3") && !err.contains("<?xml"),
        "{err}"
    );
    // A shards pipeline on a prefix without a manifest: say what to do.
    let pipeline = local.path().join("shards_eval.toml");
    let toml = std::fs::read_to_string(common::repo().join("pipelines/resnet50_eval.toml"))
        .expect("reads")
        .replace("kind = \"image_folder\"", "kind = \"shards\"");
    std::fs::write(&pipeline, toml).expect("writes");
    let o = run_remote(
        &[
            "run",
            pipeline.to_str().expect("utf-8"),
            "--batch-size",
            "4",
        ],
        "s3://missing/elsewhere",
        cache.path(),
        &env,
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("s3://missing/elsewhere/manifest.json") && err.contains("--format shards"),
        "{err}"
    );
    // Wrong credentials: a server that checks them after the uploads.
    let n = {
        let probe = Moto::start(None);
        upload(probe.port, "data", "ds", &dir, |_, b| Some(b))
    };
    let strict = Moto::start(Some(n));
    upload(strict.port, "data", "ds", &dir, |_, b| Some(b));
    let sep = strict.endpoint();
    let o = run_remote(
        EVAL,
        "s3://data/ds",
        cache.path(),
        &[
            ("AWS_ENDPOINT_URL", sep.as_str()),
            ("AWS_SECRET_ACCESS_KEY", "wrong-secret-1234"),
        ],
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("s3://data/ds/manifest.json") && err.contains("access denied"),
        "{err}"
    );
    assert!(
        !err.contains("wrong-secret-1234"),
        "a secret printed: {err}"
    );
}

/// moto with its minimum part size lowered, so that shards of 30 kB go as multipart
/// uploads of 8 KiB parts (`IMGFEED_S3_PART_SIZE`).
const SMALL_PARTS: &[(&str, &str)] = &[("S3_UPLOAD_PART_MIN_SIZE", "1024")];
const PART_SIZE: (&str, &str) = ("IMGFEED_S3_PART_SIZE", "8192");

/// `convert --format shards` of the fixtures (30 kB shards, as [`local_shards`]) to `out`,
/// with `more` flags.
fn convert_to(out: &str, more: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args = convert_fixtures("30kB");
    args.extend_from_slice(more);
    imgfeed(&args, &["--out", out], env)
}

/// The digests of `args` reading `data` (a folder, or a URL through `env`).
fn digests_of(args: &[&str], data: &str, env: &[(&str, &str)]) -> Vec<String> {
    let cache = tempfile::tempdir().expect("tempdir");
    let o = run_remote(args, data, cache.path(), env);
    assert!(o.status.success(), "{data}: {}", text(&o.stderr));
    let d = digests(&o);
    assert!(!d.is_empty());
    d
}

#[test]
fn a_conversion_written_to_the_store_holds_the_local_files_and_reads_back_alike() {
    if !ready("a_conversion_written_to_the_store_holds_the_local_files_and_reads_back_alike") {
        return;
    }
    let local = local_shards();
    let dir = local.path().join("ds");
    let moto = Moto::start_with(None, SMALL_PARTS);
    public_bucket(moto.port, "out");
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str()), PART_SIZE];
    let o = convert_to("s3://out/ds", &[], &env);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let files = files_of(&dir);
    // Shards, index, names and manifest: the local conversion's bytes, nothing else.
    assert_eq!(
        traffic(&o, "objects written"),
        files.len() as u64,
        "{}",
        text(&o.stdout)
    );
    let stored = objects_of(moto.port, "out", "ds");
    let names = |v: &[(String, Vec<u8>)]| v.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&stored), names(&files));
    assert!(stored == files, "the objects differ from the local files");
    // Shards of 30 kB in parts of 8 KiB: several requests per shard.
    let shards = files.iter().filter(|f| f.0.starts_with("shard-")).count() as u64;
    assert!(traffic(&o, "requests") >= 4 * shards, "{}", text(&o.stdout));
    let local_dir = dir.to_str().expect("utf-8");
    for args in [EVAL, TRAIN] {
        assert_eq!(
            digests_of(args, "s3://out/ds", &env),
            digests_of(args, local_dir, &[]),
            "{args:?}"
        );
    }
    // A prefix holding a dataset is not written over.
    let again = convert_to("s3://out/ds", &[], &env);
    let err = text(&again.stderr);
    assert_eq!(again.status.code(), Some(2), "{err}");
    assert!(
        err.contains("s3://out/ds/manifest.json") && err.contains("already exists"),
        "{err}"
    );
}

#[test]
fn sliced_conversions_merged_on_the_store_equal_the_local_ones() {
    if !ready("sliced_conversions_merged_on_the_store_equal_the_local_ones") {
        return;
    }
    let local = tempfile::tempdir().expect("tempdir");
    let sliced = local.path().join("sliced");
    let sliced_s = sliced.to_str().expect("utf-8");
    let moto = Moto::start_with(None, SMALL_PARTS);
    public_bucket(moto.port, "out");
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str()), PART_SIZE];
    for slice in ["0/2", "1/2"] {
        let o = convert_to(sliced_s, &["--slice", slice], &[]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let o = convert_to("s3://out/sliced", &["--slice", slice], &env);
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    // Before the merge there is no manifest: a reader fails, saying so.
    let cache = tempfile::tempdir().expect("tempdir");
    let o = run_remote(EVAL, "s3://out/sliced", cache.path(), &env);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("s3://out/sliced/manifest.json") && err.contains("no such object"),
        "{err}"
    );
    let merged = imgfeed(&["merge-index", sliced_s], &[], &[]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    let merged = imgfeed(
        &["merge-index", "s3://out/sliced", "--endpoint", &ep],
        &[],
        &[],
    );
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    assert!(
        objects_of(moto.port, "out", "sliced") == files_of(&sliced),
        "the merged objects differ from the local merge"
    );
    // The same samples as one job's conversion.
    let whole = local_shards();
    let whole = whole.path().join("ds");
    for args in [EVAL, TRAIN] {
        assert_eq!(
            digests_of(args, "s3://out/sliced", &env),
            digests_of(args, whole.to_str().expect("utf-8"), &[]),
            "{args:?}"
        );
    }
    // Merging again is refused: the manifest is there.
    let again = imgfeed(
        &["merge-index", "s3://out/sliced", "--endpoint", &ep],
        &[],
        &[],
    );
    assert_eq!(again.status.code(), Some(2), "{}", text(&again.stderr));
    assert!(
        text(&again.stderr).contains("s3://out/sliced/manifest.json"),
        "{}",
        text(&again.stderr)
    );
}

#[test]
fn uploads_get_past_503s_and_a_refused_one_leaves_nothing_behind() {
    if !ready("uploads_get_past_503s_and_a_refused_one_leaves_nothing_behind") {
        return;
    }
    let local = local_shards();
    let files = files_of(&local.path().join("ds"));
    let moto = Moto::start_with(None, SMALL_PARTS);
    public_bucket(moto.port, "out");
    // A burst of 503s (a dropped request body on some): retried, the dataset whole.
    let faults = 6;
    let proxy = Proxy::start(moto.port, Fault::Unavailable, faults);
    let ep = proxy.endpoint();
    let o = convert_to(
        "s3://out/ds",
        &[],
        &[("AWS_ENDPOINT_URL", ep.as_str()), PART_SIZE],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        traffic(&o, "retries") >= faults as u64,
        "{}",
        text(&o.stdout)
    );
    assert!(
        objects_of(moto.port, "out", "ds") == files,
        "the objects differ from the local files"
    );
    // A part refused (403) in the third shard, after two shards are stored: the upload is
    // aborted, the stored objects removed, no manifest written, the object named.
    let proxy = Proxy::start(
        moto.port,
        Fault::Deny("shard-00002.bin?partNumber=2", 403),
        0,
    );
    let ep = proxy.endpoint();
    let o = convert_to(
        "s3://out/refused",
        &[],
        &[("AWS_ENDPOINT_URL", ep.as_str()), PART_SIZE],
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("s3://out/refused/shard-00002.bin") && err.contains("access denied"),
        "{err}"
    );
    assert_eq!(keys(moto.port, "out", "refused/"), Vec::<String>::new());
    let (st, uploads) = http_full(moto.port, "GET", "/out?uploads", b"");
    assert_eq!(st, 200);
    assert!(
        !text(&uploads).contains("<UploadId>"),
        "a multipart upload left open: {}",
        text(&uploads)
    );
}

/// The flags after `resume with ` in a run's output.
fn resume_hint(o: &Output) -> Vec<String> {
    let out = text(&o.stdout);
    let line = out
        .lines()
        .find_map(|l| l.split("resume with ").nth(1))
        .unwrap_or_else(|| panic!("no resume hint: {out}"));
    line.split_whitespace().map(str::to_string).collect()
}

/// The shard of each sample name of the local dataset `dir` (from its index and names).
fn shard_of_names(dir: &Path) -> std::collections::HashMap<String, u32> {
    let index = std::fs::read(dir.join("index.bin")).expect("index");
    let names = std::fs::read(dir.join("names.bin")).expect("names");
    let u64_at =
        |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let u32_at =
        |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    index[32..]
        .chunks_exact(56)
        .map(|e| {
            let (off, len) = (u64_at(e, 16) as usize, u32_at(e, 48) as usize);
            (text(&names[off..off + len]), u32_at(e, 24))
        })
        .collect()
}

#[test]
fn an_interrupted_run_resumes_from_the_store_like_a_local_one() {
    if !ready("an_interrupted_run_resumes_from_the_store_like_a_local_one") {
        return;
    }
    let local = local_shards();
    let dir = local.path().join("ds");
    let dir_s = dir.to_str().expect("utf-8");
    let moto = Moto::start(None);
    upload(moto.port, "data", "ds", &dir, |_, b| Some(b));
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    // Stopped in the middle of epoch 1 (3 batches an epoch), then resumed.
    let stop = ["--max-batches", "5"];
    let mut runs: Vec<Vec<String>> = Vec::new();
    let mut resumed_remote = None;
    for data in [dir_s, "s3://data/ds"] {
        let cache = tempfile::tempdir().expect("tempdir");
        let o = run_remote(&[TRAIN, &stop[..]].concat(), data, cache.path(), &env);
        assert!(o.status.success(), "{data}: {}", text(&o.stderr));
        let hint = resume_hint(&o);
        assert_eq!(hint[..4], ["--start-epoch", "1", "--start-batch", "2"]);
        let mut seen = digests(&o);
        // A fresh cache: the resumed run fetches what its part of the epoch needs.
        let cache = tempfile::tempdir().expect("tempdir");
        let args: Vec<&str> = TRAIN
            .iter()
            .copied()
            .chain(hint.iter().map(String::as_str))
            .collect();
        let r = run_remote(&args, data, cache.path(), &env);
        assert!(r.status.success(), "{data}: {}", text(&r.stderr));
        seen.extend(digests(&r));
        assert_eq!(seen.len(), 3, "{}", text(&r.stdout));
        if data.starts_with("s3://") {
            resumed_remote = Some(r);
        }
        runs.push(seen);
    }
    assert_eq!(
        runs[1], runs[0],
        "the store's run resumes like the local one"
    );
    // Prefetching follows the resumed epoch's order: nothing is fetched that the rest of
    // the epoch does not read (the index, the names, and the shards of its samples).
    let out = tempfile::tempdir().expect("tempdir");
    let o = imgfeed(
        &[
            "convert",
            "pipelines/resnet50_train.toml",
            "--data",
            dir_s,
            "--format",
            "npy",
            "--start-epoch",
            "1",
            "--start-batch",
            "2",
            "--batch-size",
            "4",
            "--out",
        ],
        &[out.path().to_str().expect("utf-8")],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let shard_of = shard_of_names(&dir);
    let mut needed: Vec<u32> = std::fs::read_to_string(out.path().join("samples.txt"))
        .expect("samples.txt")
        .lines()
        .map(|n| shard_of[n])
        .collect();
    needed.sort_unstable();
    needed.dedup();
    let shards = shard_of.values().max().map_or(0, |m| m + 1) as usize;
    assert!(
        needed.len() < shards,
        "{needed:?} of {shards}: the test needs fewer"
    );
    let r = resumed_remote.expect("a remote run");
    assert_eq!(
        traffic(&r, "files downloaded"),
        2 + needed.len() as u64,
        "{}",
        text(&r.stdout)
    );
}

/// Put every file under `dir` (recursively) under `bucket/prefix`, keys `/`-separated.
fn upload_tree(port: u16, bucket: &str, prefix: &str, dir: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("dir").flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(dir).expect("under dir");
            let key: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let bytes = std::fs::read(&path).expect("reads");
            let st = http(
                port,
                "PUT",
                &format!("/{bucket}/{prefix}/{}", key.join("/")),
                &bytes,
            );
            assert_eq!(st, 200, "put {rel:?}");
            n += 1;
        }
    }
    n
}

/// Copy the tree `from` to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("dir").flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).expect("copy");
        }
    }
}

#[test]
fn an_image_tree_in_the_store_reads_like_the_local_tree() {
    if !ready("an_image_tree_in_the_store_reads_like_the_local_tree") {
        return;
    }
    let tree = common::repo().join("fixtures/imagefolder");
    // Listings of 5 keys a page: the 14 objects take several requests.
    let moto = Moto::start_with(None, &[("MOTO_S3_DEFAULT_MAX_KEYS", "5")]);
    assert_eq!(http(moto.port, "PUT", "/data", b""), 200);
    // Unsigned writes stay allowed after imgfeed's signed requests (an image is replaced
    // below).
    let policy = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":["s3:GetObject","s3:PutObject"],"Resource":"arn:aws:s3:::data/*"}]}"#;
    let st = http(moto.port, "PUT", "/data?policy", policy.as_bytes());
    assert!(st == 200 || st == 204, "policy: {st}");
    assert_eq!(upload_tree(moto.port, "data", "tree", &tree), 14);
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let local = tree.to_str().expect("utf-8");
    for args in [EVAL, TRAIN] {
        let want = digests_of(args, local, &[]);
        for fetch in [&[][..], &["--fetch", "ranges"]] {
            let all: Vec<&str> = args.iter().chain(fetch).copied().collect();
            let cache = tempfile::tempdir().expect("tempdir");
            let o = run_remote(&all, "s3://data/tree", cache.path(), &env);
            assert!(o.status.success(), "{}", text(&o.stderr));
            // The same classes, labels and order: the same digests.
            assert_eq!(digests(&o), want, "{all:?}");
            let out = text(&o.stdout);
            assert!(
                out.contains("image_folder s3://data/tree: 12 samples, 3 classes"),
                "{out}"
            );
            let epochs = digests(&o).len() as u64;
            if !fetch.is_empty() {
                // One GET per image and epoch (and the listing's pages, the manifest
                // probe), but the images that the epoch before kept in the cache's room
                // for this one (its first ones).
                let requests = per_epoch(&o, "requests");
                let kept = per_epoch(&o, "samples from the kept ranges");
                assert_eq!(requests.len() as u64, epochs, "{out}");
                for (e, (r, k)) in requests.iter().zip(&kept).enumerate() {
                    // Exactly: a kept image is not fetched too (after the first epoch,
                    // whose count has the listing's pages).
                    assert!(r + k >= 12 && (e == 0 || r + k == 12), "epoch {e}: {out}");
                }
                assert_eq!(kept[0], 0, "{out}");
                assert!(kept[1..].iter().all(|&k| k > 0), "{out}");
                continue;
            }
            // The cache holds the tree: its images come once, as one pack file, and the
            // later epochs read it (the pack's download began in the first epoch: only
            // a read that came before it was done asks for its image).
            let requests = per_epoch(&o, "requests");
            assert!(requests[0] >= 12, "{out}");
            assert!(requests[1..].iter().all(|&r| r < 12), "{out}");
            assert_eq!(traffic(&o, "files downloaded"), 1, "{out}");
            // A second run reads the pack from the cache: the listing's pages and the
            // manifest probe only.
            let again = run_remote(&all, "s3://data/tree", cache.path(), &env);
            assert!(again.status.success(), "{}", text(&again.stderr));
            assert_eq!(digests(&again), want, "{all:?}");
            assert_eq!(
                traffic(&again, "files downloaded"),
                0,
                "{}",
                text(&again.stdout)
            );
            assert!(traffic(&again, "requests") <= 4, "{}", text(&again.stdout));
        }
    }
    // A cache smaller than the tree: no packs (they would be made again and again), one
    // GET per image, unshuffled too.
    let cache = tempfile::tempdir().expect("tempdir");
    let small = [EVAL, &["--cache-size", "100000"]].concat();
    let o = run_remote(&small, "s3://data/tree", cache.path(), &env);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(digests(&o), digests_of(EVAL, local, &[]));
    assert_eq!(traffic(&o, "files downloaded"), 0, "{}", text(&o.stdout));
    assert!(traffic(&o, "requests") >= 12, "{}", text(&o.stdout));
    // Shuffled through a cache of a fifth of the tree: the images the next epoch reads
    // first are kept in its room as this one reads them, and read from there; the folder
    // stays within its limit and is left empty.
    let cache = tempfile::tempdir().expect("tempdir");
    let limit = 110_000u64;
    let limit_s = limit.to_string();
    let train = [TRAIN, &["--cache-size", limit_s.as_str()]].concat();
    let (o, most) = watching(cache.path(), || {
        run_remote(&train, "s3://data/tree", cache.path(), &env)
    });
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(digests(&o), digests_of(TRAIN, local, &[]));
    assert_eq!(traffic(&o, "files downloaded"), 0, "{out}");
    let kept = per_epoch(&o, "samples from the kept ranges");
    let requests = per_epoch(&o, "requests");
    assert!(kept[1] > 0 && requests[1] + kept[1] == 12, "{out}");
    assert!(
        most <= limit,
        "{most} bytes in the cache folder, limit {limit}"
    );
    assert_eq!(bytes_under(cache.path()), 0, "left behind");
    // Packs asked for through a cache smaller than one: refused up front, saying why.
    let cache = tempfile::tempdir().expect("tempdir");
    let files = [EVAL, &["--cache-size", "100000", "--fetch", "files"]].concat();
    let o = run_remote(&files, "s3://data/tree", cache.path(), &env);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("100000 bytes cannot hold one pack of s3://data/tree")
            && err.contains("--fetch"),
        "{err}"
    );
    // The shard-aware shuffle windows the packs (here one): the same order each run.
    let window = [TRAIN, &["--shuffle-window", "1"]].concat();
    let runs: Vec<Output> = (0..2)
        .map(|_| {
            let cache = tempfile::tempdir().expect("tempdir");
            run_remote(&window, "s3://data/tree", cache.path(), &env)
        })
        .collect();
    for o in &runs {
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(traffic(o, "files downloaded"), 1, "{}", text(&o.stdout));
    }
    assert_eq!(digests(&runs[0]), digests(&runs[1]));
    assert_eq!(digests(&runs[0]).len(), 2);
    // An image replaced on the store (same key, other bytes): its pack is fetched again,
    // and the run reads the new bytes, as a local tree with that image replaced does.
    let cache = tempfile::tempdir().expect("tempdir");
    let o = run_remote(EVAL, "s3://data/tree", cache.path(), &env);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let changed = tempfile::tempdir().expect("tempdir");
    let copy = changed.path().join("tree");
    copy_tree(&tree, &copy);
    let other = std::fs::read(tree.join("bird/bird_000.jpg")).expect("reads");
    std::fs::write(copy.join("cat/cat_000.jpg"), &other).expect("writes");
    let (st, body) = http_full(moto.port, "PUT", "/data/tree/cat/cat_000.jpg", &other);
    assert_eq!(st, 200, "{}", text(&body));
    let o = run_remote(EVAL, "s3://data/tree", cache.path(), &env);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(traffic(&o, "files downloaded"), 1, "{}", text(&o.stdout));
    assert_eq!(
        digests(&o),
        digests_of(EVAL, copy.to_str().expect("utf-8"), &[]),
        "the new bytes"
    );
    let original = std::fs::read(tree.join("cat/cat_000.jpg")).expect("reads");
    assert_eq!(
        http(moto.port, "PUT", "/data/tree/cat/cat_000.jpg", &original),
        200
    );
    // validate reads the tree in the store as it reads the local one (was: "pipeline file
    // s3://data/tree: No such file or directory", and --endpoint refused).
    let cache = tempfile::tempdir().expect("tempdir");
    let cache_dir = cache.path().to_str().expect("utf-8");
    let json = |o: &Output| -> serde_json::Value {
        serde_json::from_str(&text(&o.stdout)).expect("validate --json prints JSON")
    };
    let from_store = imgfeed(
        &["validate", "s3://data/tree", "--json", "--endpoint", &ep],
        &["--cache-dir", cache_dir],
        &[],
    );
    let here = imgfeed(&["validate", local, "--json"], &[], &[]);
    assert_eq!(
        from_store.status.code(),
        here.status.code(),
        "{}",
        text(&from_store.stderr)
    );
    let (a, b) = (json(&from_store), json(&here));
    for key in ["samples", "classes", "bad"] {
        assert_eq!(a.get(key), b.get(key), "{key}: {a} against {b}");
    }
    assert!(a.get("samples").is_some(), "{a}");
    // A conversion of the tree in the store to shards: the local conversion's files.
    let from_store = tempfile::tempdir().expect("tempdir");
    let ds = from_store.path().join("ds");
    let o = imgfeed(
        &[
            "convert",
            "pipelines/convert_jpeg256.toml",
            "--data",
            "s3://data/tree",
            "--format",
            "shards",
            "--shard-size",
            "30kB",
            "--out",
        ],
        &[ds.to_str().expect("utf-8")],
        &env,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let whole = local_shards();
    let strip_root = |files: Vec<(String, Vec<u8>)>| -> Vec<(String, Vec<u8>)> {
        // The manifest names the source's root: the only difference.
        files
            .into_iter()
            .map(|(n, b)| {
                let b = text(&b)
                    .replace("s3://data/tree", "ROOT")
                    .replace("fixtures/imagefolder", "ROOT");
                (
                    n.clone(),
                    if n.ends_with(".json") {
                        b.into_bytes()
                    } else {
                        Vec::new()
                    },
                )
            })
            .collect()
    };
    let (a, b) = (files_of(&ds), files_of(&whole.path().join("ds")));
    assert_eq!(strip_root(a.clone()), strip_root(b.clone()));
    for ((n, x), (_, y)) in a.iter().zip(&b) {
        if !n.ends_with(".json") {
            assert!(x == y, "{n} differs");
        }
    }
    // bench says what an image tree in a store costs, and what to do.
    let cache = tempfile::tempdir().expect("tempdir");
    let o = run_remote(
        &[
            "bench",
            "pipelines/resnet50_eval.toml",
            "--workers",
            "2",
            "--batch-size",
            "4",
            "--fetch",
            "ranges",
        ],
        "s3://data/tree",
        cache.path(),
        &env,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("one request per image")
            && text(&o.stdout).contains("--format shards"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn a_missing_forbidden_or_rewritten_image_in_the_store_is_named() {
    if !ready("a_missing_forbidden_or_rewritten_image_in_the_store_is_named") {
        return;
    }
    let tree = common::repo().join("fixtures/imagefolder");
    let moto = Moto::start(None);
    assert_eq!(http(moto.port, "PUT", "/data", b""), 200);
    upload_tree(moto.port, "data", "tree", &tree);
    let what = "GET /data/tree/cat/cat_002.jpg";
    for (fault, says) in [
        (Fault::Deny(what, 404), "no such object (404)"),
        (Fault::Deny(what, 403), "access denied"),
        // Rewritten after the listing (another ETag): in its pack, then read alone.
        (Fault::Rewritten(what), "rewritten since"),
    ] {
        let proxy = Proxy::start(moto.port, fault, 0);
        let ep = proxy.endpoint();
        let cache = tempfile::tempdir().expect("tempdir");
        let o = run_remote(
            EVAL,
            "s3://data/tree",
            cache.path(),
            &[("AWS_ENDPOINT_URL", ep.as_str())],
        );
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{says}: {err}");
        assert!(
            err.contains("s3://data/tree/cat/cat_002.jpg") && err.contains(says),
            "{says}: {err}"
        );
        // The tree's pack cannot be made: its other images are still read (one GET
        // each), and only that one is lost.
        let skip = [EVAL, &["--on-error", "skip"]].concat();
        let o = run_remote(
            &skip,
            "s3://data/tree",
            cache.path(),
            &[("AWS_ENDPOINT_URL", ep.as_str())],
        );
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        let all = format!("{out}{err}");
        // 11 images: 2 batches of 4.
        assert!(out.contains("2 batches, 8 samples"), "{says}: {all}");
        let skipped: Vec<&str> = all.lines().filter(|l| l.starts_with("skipped:")).collect();
        assert_eq!(skipped.len(), 1, "{all}");
        assert!(
            skipped[0].contains("s3://data/tree/cat/cat_002.jpg"),
            "{all}"
        );
        // The pack is tried once (12 GETs), then each image once more, and the listing.
        assert!(traffic(&o, "requests") <= 30, "{all}");
    }
    // An empty prefix: neither a dataset nor a tree, said so.
    let cache = tempfile::tempdir().expect("tempdir");
    let o = run_remote(
        EVAL,
        "s3://data/nothing",
        cache.path(),
        &[("AWS_ENDPOINT_URL", moto.endpoint().as_str())],
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("s3://data/nothing/") && err.contains("image tree"),
        "{err}"
    );
}

/// `python3 -m http.server` serving `dir` on loopback, killed on drop.
struct WebServer {
    child: Child,
    port: u16,
}

impl WebServer {
    fn start(dir: &Path) -> WebServer {
        let (child, port) =
            remote::start_listening("http.server", Duration::from_secs(30), |port| {
                Command::new("python3")
                    .args([
                        "-m",
                        "http.server",
                        &port.to_string(),
                        "--bind",
                        "127.0.0.1",
                    ])
                    .arg("--directory")
                    .arg(dir)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("python3 -m http.server starts")
            });
        WebServer { child, port }
    }
}

impl Drop for WebServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_shards_dataset_on_a_plain_http_server_reads_like_the_local_one() {
    if !ready("a_shards_dataset_on_a_plain_http_server_reads_like_the_local_one") {
        return;
    }
    let local = local_shards();
    let dir = local.path().join("ds");
    let web = WebServer::start(local.path());
    let url = format!("http://127.0.0.1:{}/ds", web.port);
    for args in [EVAL, TRAIN] {
        let cache = tempfile::tempdir().expect("tempdir");
        let cold = run_remote(args, &url, cache.path(), &[]);
        assert!(cold.status.success(), "{}", text(&cold.stderr));
        let want = digests_of(args, dir.to_str().expect("utf-8"), &[]);
        assert_eq!(digests(&cold), want, "{args:?}");
        assert!(
            traffic(&cold, "files downloaded") >= 3,
            "{}",
            text(&cold.stdout)
        );
        let warm = run_remote(args, &url, cache.path(), &[]);
        assert_eq!(digests(&warm), want, "{args:?} warm");
        assert_eq!(
            traffic(&warm, "files downloaded"),
            0,
            "{}",
            text(&warm.stdout)
        );
    }
    // A missing dataset names the object; the server is not written to.
    let cache = tempfile::tempdir().expect("tempdir");
    let missing = format!("http://127.0.0.1:{}/nothing", web.port);
    let o = run_remote(EVAL, &missing, cache.path(), &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{missing}/manifest.json")), "{err}");
    let o = convert_to(&format!("http://127.0.0.1:{}/out", web.port), &[], &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("read-only"), "{err}");
}

/// The digest of every batch of `epoch` (images and labels, in order).
fn epoch_digest(p: &imgfeed::Pipeline, epoch: u64) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    let mut batches = 0;
    for b in p.epoch(epoch) {
        let b = b.expect("a batch");
        let images = b.images_f32().expect("float32 images");
        for v in images {
            eat(&v.to_le_bytes());
        }
        eat(b.label_bytes());
        batches += 1;
    }
    format!("{batches} batches {h:016x}")
}

/// A pipeline file reading `root` (shuffled, batches of 4) through `endpoint`, with its
/// cache in `cache`.
fn fork_pipeline(
    dir: &Path,
    root: &str,
    endpoint: Option<&str>,
    cache: &Path,
    remote_lines: &str,
) -> PathBuf {
    let toml = std::fs::read_to_string(common::repo().join("pipelines/resnet50_eval.toml"))
        .expect("reads");
    let mut source = format!("root = {root:?}\ncache_dir = {cache:?}\n");
    if let Some(ep) = endpoint {
        source.push_str(&format!("endpoint = {ep:?}\n{remote_lines}"));
    }
    let toml = toml
        .replace("root = \"../fixtures/imagefolder\"\n", &source)
        .replace("shuffle = false", "shuffle = true")
        .replace(
            "size = 32\ndrop_remainder = true",
            "size = 4\ndrop_remainder = false",
        );
    let path = dir.join(format!(
        "fork-{}.toml",
        if endpoint.is_some() { "s3" } else { "local" }
    ));
    std::fs::write(&path, toml).expect("writes");
    path
}

/// Most time the forked child may take to read its epochs: a child that inherited the
/// parent's runtime without its threads hangs, and fails here instead.
const CHILD_LIMIT: Duration = Duration::from_secs(120);

/// Run by [`a_forked_process_reads_the_store_like_its_parent`] in a process of its own
/// (this test binary, started again with `IMGFEED_FORK_PROBE`); a no-op otherwise. Opens
/// the pipeline, reads one batch (the client's runtime, connections and the prefetcher
/// are running), forks; the child reads epochs 0 and 1 and writes their digests and its
/// requests to `OUT.child`, the parent waits for it (bounded), reads the same epochs and
/// writes `OUT.parent`.
#[test]
fn fork_probe() {
    let Ok(spec) = std::env::var("IMGFEED_FORK_PROBE") else {
        return;
    };
    let (toml, out) = spec.split_once('|').expect("PIPELINE|OUT");
    let p = imgfeed::Pipeline::from_file(toml).expect("the pipeline opens");
    {
        let mut first = p.epoch(0);
        first.next().expect("a batch").expect("reads");
    }
    let before = imgfeed::store::snapshot();
    // SAFETY: the child only reads the dataset through the library (which rebuilds what
    // it needs after a fork) and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let d = [epoch_digest(&p, 0), epoch_digest(&p, 1)];
            let t = imgfeed::store::snapshot().since(&before);
            format!("{}\n{}\n{}\n", d[0], d[1], t.requests)
        }));
        let code = match r {
            Ok(text) => std::fs::write(format!("{out}.child"), text).map_or(3, |_| 0),
            Err(_) => 2,
        };
        // SAFETY: leaving the forked child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let t0 = Instant::now();
    let mut status = 0;
    loop {
        // SAFETY: waiting for the child forked above.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break;
        }
        if t0.elapsed() > CHILD_LIMIT {
            // SAFETY: killing the child forked above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            unsafe { libc::waitpid(pid, &mut status, 0) };
            panic!("the forked child did not read its epochs within {CHILD_LIMIT:?}: it hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the forked child failed (status {status:#x})"
    );
    let d = [epoch_digest(&p, 0), epoch_digest(&p, 1)];
    std::fs::write(format!("{out}.parent"), format!("{}\n{}\n", d[0], d[1])).expect("writes");
}

#[test]
fn a_forked_process_reads_the_store_like_its_parent() {
    if !ready("a_forked_process_reads_the_store_like_its_parent") {
        return;
    }
    // Shards of about 8 kB, whole-file fetching, and a cache that holds four of the
    // largest (fewer than all of them): whatever the parent fetched ahead before the
    // fork, the child's two epochs must
    // download files again itself (with the whole dataset cached it might ask nothing, and
    // the test would not show its client works).
    let local = tempfile::tempdir().expect("tempdir");
    let dir = local.path().join("ds");
    let o = imgfeed(
        &convert_fixtures("8kB"),
        &["--out", dir.to_str().expect("utf-8")],
        &[],
    );
    assert!(o.status.success(), "convert: {}", text(&o.stderr));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).expect("manifest"))
            .expect("json");
    let sizes: Vec<u64> = manifest["shards"]
        .as_array()
        .expect("shards")
        .iter()
        .map(|s| s["size"].as_u64().expect("a size"))
        .collect();
    let small = manifest["index"]["size"].as_u64().expect("index size")
        + manifest["names"]["size"].as_u64().expect("names size");
    let total: u64 = sizes.iter().sum();
    let limit = small + 4 * sizes.iter().max().expect("shards");
    assert!(
        limit < small + total,
        "{} shards of {total} bytes: too few for a cache smaller than the dataset",
        sizes.len()
    );
    let moto = Moto::start(None);
    upload(moto.port, "data", "ds", &dir, |_, b| Some(b));
    let ep = moto.endpoint();
    let lines = format!("cache_size = \"{limit}\"\nfetch = \"files\"\n");
    fork_reads_alike(local.path(), "s3://data/ds", &dir, &ep, &lines);
    // An image tree read one GET per image (range mode: no packs in the cache): the
    // fetcher threads are the parent's too, and the child's second epoch asks the store
    // whatever happened before. (Its packs are files of the cache, as the shards above.)
    let tree = common::repo().join("fixtures/imagefolder");
    assert_eq!(upload_tree(moto.port, "data", "tree", &tree), 14);
    fork_reads_alike(
        local.path(),
        "s3://data/tree",
        &tree,
        &ep,
        "fetch = \"ranges\"\n",
    );
}

/// Run [`fork_probe`] on `url` (through `ep`) and compare what the forked child and its
/// parent read with what `local` gives here.
fn fork_reads_alike(work: &Path, url: &str, local: &Path, ep: &str, remote_lines: &str) {
    let cache = tempfile::tempdir().expect("tempdir");
    let remote = fork_pipeline(work, url, Some(ep), cache.path(), remote_lines);
    let out = work.join("digests");
    let _ = std::fs::remove_file(out.with_extension("child"));
    let _ = std::fs::remove_file(out.with_extension("parent"));
    // The probe's output goes to a file, and it runs in a process group of its own: a
    // forked child left hanging (the failure this test is for) holds neither a pipe of
    // this process nor outlives the test.
    let log_path = work.join("probe.log");
    let log_file = std::fs::File::create(&log_path).expect("the probe's log");
    let mut cmd = Command::new(std::env::current_exe().expect("this test binary"));
    cmd.args([
        "fork_probe",
        "--exact",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env(
        "IMGFEED_FORK_PROBE",
        format!("{}|{}", remote.display(), out.display()),
    )
    .env("AWS_ACCESS_KEY_ID", "test")
    .env("AWS_SECRET_ACCESS_KEY", "test")
    .env("AWS_REGION", "us-east-1")
    .env("AWS_EC2_METADATA_DISABLED", "true")
    .stdin(Stdio::null())
    .stdout(log_file.try_clone().expect("the log"))
    .stderr(log_file);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().expect("the probe starts");
    let group = child.id() as i32;
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("waits") {
            break Some(s);
        }
        if t0.elapsed() > CHILD_LIMIT * 2 + COMMAND_LIMIT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // SAFETY: the probe's own process group (its forked child included), made above.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let _ = child.wait();
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let status = status.unwrap_or_else(|| panic!("the fork probe ran past its limit: {log}"));
    assert!(status.success(), "the fork probe failed ({status}): {log}");
    let read = |ext: &str| {
        std::fs::read_to_string(format!("{}.{ext}", out.display()))
            .unwrap_or_else(|e| panic!("{ext}'s digests: {e}; {log}"))
    };
    let (child_said, parent_said) = (read("child"), read("parent"));
    let child_lines: Vec<&str> = child_said.lines().collect();
    let parent_lines: Vec<&str> = parent_said.lines().collect();
    // The local dataset's digests, in this process.
    let local_toml = fork_pipeline(work, local.to_str().expect("utf-8"), None, cache.path(), "");
    let p = imgfeed::Pipeline::from_file(&local_toml).expect("opens");
    let want = [epoch_digest(&p, 0), epoch_digest(&p, 1)];
    assert_ne!(want[0], want[1], "shuffled epochs differ");
    assert_eq!(child_lines[..2], want[..], "{url}: the child's epochs");
    assert_eq!(parent_lines[..2], want[..], "{url}: the parent's epochs");
    // The child went to the store itself (what was not fetched before the fork).
    let requests: u64 = child_lines[2].parse().expect("a count");
    assert!(requests > 0, "{url}: the child asked nothing: {child_said}");
}

/// The `formats` environment's python (webdataset's writers), or `None`.
fn formats_python() -> Option<PathBuf> {
    formats::env_python("formats", "webdataset").ok()
}

#[test]
fn webdataset_tars_in_the_store_give_the_trees_digests() {
    if !ready("webdataset_tars_in_the_store_give_the_trees_digests") {
        return;
    }
    let Some(python) = formats_python() else {
        assert!(
            std::env::var("IMGFEED_S3_TESTS").as_deref() != Ok("required"),
            "IMGFEED_S3_TESTS=required, but the formats environment is not made: bash \
             python/envs.sh formats"
        );
        let _ = writeln!(std::io::stderr(), "SKIPPED: bash python/envs.sh formats");
        return;
    };
    // The tree's tars, written by webdataset's ShardWriter (three shards).
    let local = tempfile::tempdir().expect("tempdir");
    let o = Command::new(&python)
        .arg(common::repo().join("fixtures/make_webdataset.py"))
        .arg(common::repo().join("fixtures/imagefolder"))
        .arg(local.path())
        .output()
        .expect("runs python");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let moto = Moto::start(None);
    upload(
        moto.port,
        "wds",
        "train",
        &local.path().join("shards"),
        |_, b| Some(b),
    );
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let tree = common::repo().join("fixtures/imagefolder");
    let tree = tree.to_str().expect("utf-8");
    let pattern = "s3://wds/train/train-{0000..0002}.tar";
    let cache = tempfile::tempdir().expect("tempdir");
    for args in [EVAL, TRAIN] {
        let want = imgfeed(args, &["--data", tree], &[]);
        assert!(want.status.success(), "{}", text(&want.stderr));
        let want = digests(&want);
        let cold = run_remote(args, pattern, cache.path(), &env);
        assert!(cold.status.success(), "{}", text(&cold.stderr));
        assert!(
            text(&cold.stdout).starts_with("webdataset s3://wds/train/"),
            "{}",
            text(&cold.stdout)
        );
        assert_eq!(digests(&cold), want, "{args:?} cold");
        let warm = run_remote(args, pattern, cache.path(), &env);
        assert!(warm.status.success(), "{}", text(&warm.stderr));
        assert_eq!(digests(&warm), want, "{args:?} warm");
        assert_eq!(
            traffic(&warm, "files downloaded"),
            0,
            "{}",
            text(&warm.stdout)
        );
        // Ranks of 2 read what they read from the tree.
        for id in ["0", "1"] {
            let rank = ["--num-shards", "2", "--shard-id", id];
            let want = imgfeed(args, &[&["--data", tree][..], &rank[..]].concat(), &[]);
            let c = tempfile::tempdir().expect("tempdir");
            let d = data(pattern, c.path());
            let more: Vec<&str> = d.iter().map(String::as_str).chain(rank).collect();
            let got = imgfeed(args, &more, &env);
            assert!(got.status.success(), "{}", text(&got.stderr));
            assert_eq!(digests(&got), digests(&want), "{args:?} rank {id}");
        }
    }
    // One object, as the local file.
    let one = local.path().join("shards/train-0001.tar");
    let want = digests(&imgfeed(
        EVAL,
        &["--data", one.to_str().expect("utf-8")],
        &[],
    ));
    let got = run_remote(EVAL, "s3://wds/train/train-0001.tar", cache.path(), &env);
    assert_eq!(digests(&got), want, "{}", text(&got.stderr));
    // `validate` takes the pattern as its target.
    let c = tempfile::tempdir().expect("tempdir");
    let v = imgfeed(
        &["validate", pattern],
        &[
            "--endpoint",
            &ep,
            "--cache-dir",
            c.path().to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(
        v.status.success() && text(&v.stdout).contains("checked 12 of 12 samples"),
        "{}{}",
        text(&v.stdout),
        text(&v.stderr)
    );
    // A pattern naming an object that is not there says which.
    let missing = run_remote(
        EVAL,
        "s3://wds/train/train-{0000..0003}.tar",
        cache.path(),
        &env,
    );
    assert_eq!(missing.status.code(), Some(2));
    let e = text(&missing.stderr);
    assert!(
        e.contains("train-0003.tar") && e.contains("no such object"),
        "{e}"
    );
}

#[test]
fn tfrecord_files_in_the_store_give_the_trees_digests() {
    if !ready("tfrecord_files_in_the_store_give_the_trees_digests") {
        return;
    }
    let Some(python) = formats_python() else {
        assert!(
            std::env::var("IMGFEED_S3_TESTS").as_deref() != Ok("required"),
            "IMGFEED_S3_TESTS=required, but the formats environment is not made: bash \
             python/envs.sh formats"
        );
        let _ = writeln!(std::io::stderr(), "SKIPPED: bash python/envs.sh formats");
        return;
    };
    // The tree as two TFRecord files, written by the tfrecord package.
    let local = tempfile::tempdir().expect("tempdir");
    let o = Command::new(&python)
        .arg(common::repo().join("fixtures/records/write_tree.py"))
        .arg("tfrecord")
        .arg(common::repo().join("fixtures/imagefolder"))
        .arg(local.path())
        .arg("2")
        .output()
        .expect("runs python");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let moto = Moto::start(None);
    upload(moto.port, "recs", "train", local.path(), |_, b| Some(b));
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let tree = common::repo().join("fixtures/imagefolder");
    let tree = tree.to_str().expect("utf-8");
    let pattern = "s3://recs/train/train-{00000..00001}-of-00002.tfrecord";
    let cache = tempfile::tempdir().expect("tempdir");
    for args in [EVAL, TRAIN] {
        let want = imgfeed(args, &["--data", tree], &[]);
        assert!(want.status.success(), "{}", text(&want.stderr));
        let want = digests(&want);
        let cold = run_remote(args, pattern, cache.path(), &env);
        assert!(cold.status.success(), "{}", text(&cold.stderr));
        assert!(
            text(&cold.stdout).starts_with("tfrecord s3://recs/train/"),
            "{}",
            text(&cold.stdout)
        );
        assert_eq!(digests(&cold), want, "{args:?} cold");
        let warm = run_remote(args, pattern, cache.path(), &env);
        assert!(warm.status.success(), "{}", text(&warm.stderr));
        assert_eq!(digests(&warm), want, "{args:?} warm");
        assert_eq!(
            traffic(&warm, "files downloaded"),
            0,
            "{}",
            text(&warm.stdout)
        );
    }
    // gzip'd files: fetched whole, unpacked once into the cache, read from there.
    let gz = tempfile::tempdir().expect("tempdir");
    let o = Command::new(&python)
        .arg(common::repo().join("fixtures/records/write_tree.py"))
        .arg("tfrecord")
        .arg(common::repo().join("fixtures/imagefolder"))
        .arg(gz.path())
        .args(["2", "--gzip"])
        .output()
        .expect("runs python");
    assert!(o.status.success(), "{}", text(&o.stderr));
    upload(moto.port, "recs", "gz", gz.path(), |_, b| Some(b));
    let want = digests(&imgfeed(EVAL, &["--data", tree], &[]));
    let pattern = "s3://recs/gz/train-{00000..00001}-of-00002.tfrecord.gz";
    for pass in ["cold", "warm"] {
        let got = run_remote(EVAL, pattern, cache.path(), &env);
        assert!(got.status.success(), "{pass}: {}", text(&got.stderr));
        assert_eq!(digests(&got), want, "gzip'd, {pass}");
    }
}

#[test]
fn parquet_files_in_the_store_give_the_trees_digests() {
    if !ready("parquet_files_in_the_store_give_the_trees_digests") {
        return;
    }
    let Some(python) = formats_python() else {
        assert!(
            std::env::var("IMGFEED_S3_TESTS").as_deref() != Ok("required"),
            "IMGFEED_S3_TESTS=required, but the formats environment is not made: bash \
             python/envs.sh formats"
        );
        let _ = writeln!(std::io::stderr(), "SKIPPED: bash python/envs.sh formats");
        return;
    };
    // The tree as two Parquet files of two-row row groups, written by HF `datasets`.
    let local = tempfile::tempdir().expect("tempdir");
    let o = Command::new(&python)
        .arg(common::repo().join("fixtures/records/write_tree.py"))
        .arg("parquet")
        .arg(common::repo().join("fixtures/imagefolder"))
        .arg(local.path())
        .arg("2")
        .output()
        .expect("runs python");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let moto = Moto::start(None);
    upload(moto.port, "recs", "hf", local.path(), |_, b| Some(b));
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let tree = common::repo().join("fixtures/imagefolder");
    let tree = tree.to_str().expect("utf-8");
    let pattern = "s3://recs/hf/train-{00000..00001}-of-00002.parquet";
    let cache = tempfile::tempdir().expect("tempdir");
    for args in [EVAL, TRAIN] {
        let want = imgfeed(args, &["--data", tree], &[]);
        assert!(want.status.success(), "{}", text(&want.stderr));
        let want = digests(&want);
        // Cold: each object fetched whole to index it, then its unpacked copy made in the
        // cache when the epoch reads it; warm: read from the copies, nothing downloaded.
        let cold = run_remote(args, pattern, cache.path(), &env);
        assert!(cold.status.success(), "{}", text(&cold.stderr));
        assert!(
            text(&cold.stdout).starts_with("parquet s3://recs/hf/"),
            "{}",
            text(&cold.stdout)
        );
        assert_eq!(digests(&cold), want, "{args:?} cold");
        let warm = run_remote(args, pattern, cache.path(), &env);
        assert!(warm.status.success(), "{}", text(&warm.stderr));
        assert_eq!(digests(&warm), want, "{args:?} warm");
        assert_eq!(
            traffic(&warm, "files downloaded"),
            0,
            "{}",
            text(&warm.stdout)
        );
    }
    // The unpacked copies are files of the dataset's cache folder, within its limit: none
    // is kept outside it.
    assert!(
        !cache.path().join("unpacked").exists(),
        "no copies outside the cache's folder"
    );
}

#[test]
fn objects_rewritten_since_their_listing_are_refused_naming_them() {
    if !ready("objects_rewritten_since_their_listing_are_refused_naming_them") {
        return;
    }
    client_env();
    let moto = Moto::start(None);
    assert_eq!(http(moto.port, "PUT", "/tree", b""), 200);
    assert_eq!(http(moto.port, "PUT", "/tree/t/a.jpg", &[1u8; 64]), 200);
    assert_eq!(http(moto.port, "PUT", "/tree/t/b.jpg", &[2u8; 64]), 200);
    let url = imgfeed::store::StoreUrl::parse("s3://tree/t").expect("url");
    let client = imgfeed::store::StoreClient::new(&url, Some(&moto.endpoint())).expect("client");
    let listed = client.list_info(10).expect("lists");
    let tag = |name: &str| {
        listed
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, i)| i.e_tag.clone())
            .expect("an ETag")
    };
    let (a, b) = (tag("a.jpg"), tag("b.jpg"));
    // As listed: both arrive.
    let get = |a: &str, b: &str| {
        let mut got = vec![None, None];
        client.get_objects(
            &[("a.jpg", 64, Some(a)), ("b.jpg", 64, Some(b))],
            2,
            |i, r| {
                got[i] = Some(r);
                true
            },
        );
        got
    };
    let got = get(&a, &b);
    assert!(got.iter().all(|r| matches!(r, Some(Ok(_)))), "{got:?}");
    // b.jpg rewritten to the same size: its GET is refused, naming it; a.jpg still arrives.
    client.put("b.jpg", vec![3u8; 64]).expect("rewritten");
    let got = get(&a, &b);
    assert!(matches!(got[0], Some(Ok(_))), "{got:?}");
    let e = match &got[1] {
        Some(Err(e)) => e.to_string(),
        other => panic!("a rewritten object was read: {other:?}"),
    };
    assert!(
        e.contains("s3://tree/t/b.jpg") && e.contains("rewritten"),
        "{e}"
    );
}
