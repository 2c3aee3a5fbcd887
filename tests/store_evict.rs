//! The whole-file cache of a dataset in object storage when it is smaller than the data
//! (issue 32), against a real S3-compatible server (moto_server, from
//! `python/envs.sh moto`) on the loopback interface: a cache of a fraction of the dataset,
//! and one just above the least that the open accepts, never goes past its limit (the
//! folder's size is polled during the run) and gives the local digests for shuffled
//! training and eval (runs that died mid-epoch with "cannot hold ... beside the files in
//! use" before); the files fetched again after eviction are counted in the traffic line;
//! and a large file's parallel ranged part downloads get past 503s and cut bodies (through
//! the fault proxy) with the object's exact bytes, as do whole runs through it.
//!
//! Everything runs inside a network namespace holding only loopback: `.ci/run` runs this
//! file as `unshare -n sh -c 'ip link set lo up && cargo test --test store_evict'` with
//! `IMGFEED_S3_TESTS=required`. Elsewhere each test says why it is skipped and passes,
//! unless `IMGFEED_S3_TESTS=required`, which turns a skip into a failure. Every server,
//! subprocess and loop here is bounded in time.

mod common;
#[path = "common/formats.rs"]
mod formats;
#[path = "common/moto.rs"]
mod moto;
#[path = "common/proxy.rs"]
mod proxy;
#[path = "common/remote.rs"]
mod remote;

use imgfeed::store::{RetryPolicy, StoreClient, StoreUrl};
use moto::*;
use proxy::{Fault, Proxy};
use remote::{convert_fixtures, digests, text, traffic, COMMAND_LIMIT, EVAL, TRAIN};
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The fixtures converted to shards of about three images each, in `ds/` of a new
/// temporary folder: a shuffle reads every shard several times an epoch.
fn shards() -> tempfile::TempDir {
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().join("ds");
    let mut args = convert_fixtures("80kB");
    args.extend(["--out", dir.to_str().expect("utf-8")]);
    let o = remote::imgfeed_with_env(&args, &[]);
    assert!(o.status.success(), "convert: {}", text(&o.stderr));
    out
}

/// Bytes of the index and names, and the shards' sizes.
fn sizes(dir: &Path) -> (u64, Vec<u64>) {
    let shards: Vec<u64> = std::fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("shard-"))
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .collect();
    (bytes_under(dir) - shards.iter().sum::<u64>(), shards)
}

/// `args` on `url` through a fresh cache of `limit` bytes, polling the cache folder's size
/// during the run: the output and the most bytes seen there.
fn watched(args: &[&str], url: &str, limit: u64, env: &[(&str, &str)]) -> (Output, u64) {
    let cache = tempfile::tempdir().expect("tempdir");
    let stop = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicU64::new(0));
    let watcher = {
        let (stop, most, root) = (stop.clone(), most.clone(), cache.path().to_path_buf());
        std::thread::spawn(move || {
            let t0 = Instant::now();
            while !stop.load(Ordering::Relaxed) && t0.elapsed() < COMMAND_LIMIT {
                // The dataset's folder (a container format's indexes are kept beside it,
                // under the cache root, outside the limit).
                let indexes = bytes_under(&root.join("indexes"));
                most.fetch_max(
                    bytes_under(&root).saturating_sub(indexes),
                    Ordering::Relaxed,
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let d = data(url, cache.path());
    let mut more: Vec<&str> = d.iter().map(String::as_str).collect();
    let limit_s = limit.to_string();
    // Whole files (`auto` reads a global shuffle through a small cache by ranges).
    more.extend(["--cache-size", &limit_s, "--fetch", "files"]);
    let o = imgfeed(args, &more, env);
    stop.store(true, Ordering::Relaxed);
    let _ = watcher.join();
    (o, most.load(Ordering::Relaxed))
}

#[test]
fn a_cache_smaller_than_the_data_holds_its_limit_and_gives_the_local_digests() {
    if !ready("a_cache_smaller_than_the_data_holds_its_limit_and_gives_the_local_digests") {
        return;
    }
    let local = shards();
    let dir = local.path().join("ds");
    let moto = Moto::start(None);
    upload(moto.port, "data", "ds", &dir, |_, b| Some(b));
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let at = ["--data", dir.to_str().expect("utf-8")];
    let want_train = digests(&imgfeed(TRAIN, &at, &[]));
    let want_eval = digests(&imgfeed(EVAL, &at, &[]));
    assert_eq!(want_train.len(), 2);
    let (small, shards) = sizes(&dir);
    let largest = shards.iter().copied().max().unwrap_or(0);
    let total: u64 = shards.iter().sum();
    assert!(
        shards.len() >= 4,
        "{} shards: the test needs more",
        shards.len()
    );
    // The least the open accepts (the index, the names and the largest shard: one file
    // at a time), and about a quarter of the shards.
    let least = small + largest;
    let quarter = (small + total / 4).max(least);
    assert!(quarter < small + total / 2);
    for limit in [least, quarter] {
        for (args, want) in [(TRAIN, &want_train), (EVAL, &want_eval)] {
            let (o, most) = watched(args, "s3://data/ds", limit, &env);
            let what = format!("{:?} with a cache of {limit} bytes", args[1]);
            assert!(o.status.success(), "{what}: {}", text(&o.stderr));
            assert_eq!(&digests(&o), want, "{what}");
            assert!(
                most > 0 && most <= limit,
                "{what}: {most} bytes in the cache folder"
            );
            if args == TRAIN {
                // Two shuffled epochs through a cache of a fraction of the shards: files
                // come again, and the traffic line says how many and how much.
                let again = traffic(&o, "files fetched again");
                assert!(again > 0, "{what}: {}", text(&o.stdout));
                assert!(
                    traffic(&o, "files downloaded") >= shards.len() as u64 + again,
                    "{}",
                    text(&o.stdout)
                );
                assert!(
                    text(&o.stdout).contains("MB: the cache is smaller than the sampling"),
                    "{}",
                    text(&o.stdout)
                );
            }
        }
    }
    // A cache that holds everything fetches each shard once over both epochs.
    let (o, _) = watched(TRAIN, "s3://data/ds", 10 * (small + total), &env);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(digests(&o), want_train);
    assert_eq!(traffic(&o, "files downloaded"), shards.len() as u64 + 2);
    assert_eq!(traffic(&o, "files fetched again"), 0);
    // Below the least: refused up front, naming the flag, before any batch.
    let (o, _) = watched(TRAIN, "s3://data/ds", largest - 1, &env);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--cache-size"),
        "{}",
        text(&o.stderr)
    );
    assert!(digests(&o).is_empty());
}

/// Parquet files (written by Hugging Face `datasets`), which are read through an unpacked
/// copy, in a store, through a cache that holds three of the four: the copies are made in
/// the cache when the epochs need them and evicted like any file (the folder never passes
/// its limit, and no copy is kept outside it), and the runs give the image tree's digests
/// with the global shuffle (files fetched again) and a fixed order with a shard-aware window
/// (each file once an epoch). Before, every object was unpacked when the dataset opened,
/// into a folder outside the limit, whatever the cache's size.
#[test]
fn packed_files_stream_through_a_cache_smaller_than_their_copies() {
    let test = "packed_files_stream_through_a_cache_smaller_than_their_copies";
    if !ready(test) {
        return;
    }
    let Some(python) = formats::ready(test, "formats", "datasets") else {
        return;
    };
    let local = tempfile::tempdir().expect("tempdir");
    let dir = local.path().join("hf");
    let sizes = formats::parquet_files(&python, &dir, 4, &[]);
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let total: u64 = sizes.iter().sum();
    // Room for three files (the unpacked copies are smaller than the Parquet files: no
    // footer, no page headers) and never all four.
    let limit = 3 * largest;
    assert!(limit < total + largest, "{sizes:?}");
    let moto = Moto::start(None);
    upload(moto.port, "recs", "hf", &dir, |_, b| Some(b));
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let url = "s3://recs/hf/train-{00000..00003}-of-00004.parquet";
    let tree = ["--data", "fixtures/imagefolder"];
    let mut global_downloads = 0;
    // `watched` asks for whole files: `auto` would read these Snappy pages by ranges in
    // the global shuffle (tests/store_ranges.rs).
    for (args, what) in [(TRAIN, "train"), (EVAL, "eval")] {
        let want = digests(&imgfeed(args, &tree, &[]));
        assert_eq!(want.len(), if what == "train" { 2 } else { 1 });
        let (o, most) = watched(args, url, limit, &env);
        assert!(o.status.success(), "{what}: {}", text(&o.stderr));
        assert!(
            text(&o.stdout).starts_with("parquet "),
            "{}",
            text(&o.stdout)
        );
        assert_eq!(digests(&o), want, "{what}: the tree's digests");
        assert!(
            most > 0 && most <= limit,
            "{what}: {most} bytes in the cache folder, limit {limit}"
        );
        if what == "train" {
            // Two shuffled epochs through room for three of four copies: copies made again.
            assert!(
                traffic(&o, "files fetched again") > 0,
                "{}",
                text(&o.stdout)
            );
            global_downloads = traffic(&o, "files downloaded");
            // And the run says so before the first batch, with what would not.
            assert!(
                text(&o.stderr).contains("read through unpacked copies")
                    && text(&o.stderr).contains("--shuffle-window")
                    && text(&o.stderr).contains("--fetch ranges"),
                "{}",
                text(&o.stderr)
            );
        }
    }
    // The shard-aware shuffle (a window of one file): each copy made once an epoch, the
    // same order at 1 and 2 workers.
    let mut window: Vec<&str> = TRAIN.to_vec();
    window.extend(["--shuffle", "--shuffle-window", "1"]);
    let (o, most) = watched(&window, url, limit, &env);
    assert!(o.status.success(), "window: {}", text(&o.stderr));
    assert!(
        !text(&o.stderr).contains("unpacked copies"),
        "{}",
        text(&o.stderr)
    );
    assert!(most <= limit, "window: {most} bytes, limit {limit}");
    let got = digests(&o);
    assert_eq!(got.len(), 2);
    // At most the four objects fetched to index them, then each copy once an epoch; fewer
    // than the global shuffle made through the same cache.
    let downloads = traffic(&o, "files downloaded");
    assert!(
        (4..=4 + 2 * 4).contains(&downloads) && downloads < global_downloads,
        "{downloads} downloads (global shuffle: {global_downloads}): {}",
        text(&o.stdout)
    );
    let at = window
        .iter()
        .position(|a| *a == "--workers")
        .expect("workers")
        + 1;
    window[at] = "1";
    let (one, _) = watched(&window, url, limit, &env);
    assert_eq!(digests(&one), got, "the window's order at 1 worker");
    // The class names (from the files' `huggingface` metadata, in the copies' header) when
    // the open builds the indexes and when it finds them kept (no copy read at open).
    let cache = tempfile::tempdir().expect("tempdir");
    let more = ["--cache-dir", formats::s(cache.path())];
    for pass in [
        "indexing",
        "kept indexes",
        "kept indexes without their headers",
    ] {
        if pass.ends_with("without their headers") {
            // As an earlier version kept them: the open indexes the first file again.
            for e in std::fs::read_dir(cache.path().join("indexes"))
                .expect("the indexes are kept")
                .flatten()
            {
                if e.file_name().to_string_lossy().ends_with(".imgfeed-head") {
                    std::fs::remove_file(e.path()).expect("removes");
                }
            }
        }
        let o = imgfeed(&["validate", url], &more, &env);
        assert!(o.status.success(), "{pass}: {}", text(&o.stderr));
        let so = text(&o.stdout);
        for (label, name) in ["bird", "cat", "coffee"].iter().enumerate() {
            let line = formats::class_line(&so, label, name);
            assert!(
                line.is_some_and(|l| l.contains("4 (0 bad)")),
                "{pass}, {name}: {so}"
            );
        }
    }
}

#[test]
fn parallel_part_downloads_get_past_503s_and_cut_bodies() {
    if !ready("parallel_part_downloads_get_past_503s_and_cut_bodies") {
        return;
    }
    client_env();
    let moto = Moto::start(None);
    assert_eq!(http(moto.port, "PUT", "/parts", b""), 200);
    // 3 MB of bytes that differ from part to part (a part written at the wrong offset
    // shows).
    let mut x: u32 = 0x9e37_79b9;
    let want: Vec<u8> = (0..3_000_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    assert_eq!(http(moto.port, "PUT", "/parts/p/big.bin", &want), 200);
    let fast = RetryPolicy {
        max_attempts: 10,
        base: Duration::from_millis(10),
        cap: Duration::from_millis(200),
        deadline: Duration::from_secs(60),
    };
    let url = StoreUrl::parse("s3://parts/p").expect("url");
    for (fault, faults) in [
        (None, 0),
        (Some(Fault::Unavailable), 6),
        (Some(Fault::CutAfter(40_000)), 6),
    ] {
        let proxy = fault.map(|f| Proxy::start(moto.port, f, faults));
        let ep = proxy
            .as_ref()
            .map_or_else(|| moto.endpoint(), Proxy::endpoint);
        let client = StoreClient::new(&url, Some(&ep))
            .expect("client")
            .with_retry(fast);
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("big.bin");
        let mut file = std::fs::File::create(&path).expect("creates");
        file.set_len(want.len() as u64).expect("sized");
        let before = imgfeed::store::snapshot();
        let (info, received) = client
            .download_parts(
                "big.bin",
                want.len() as u64,
                "the test",
                &mut file,
                256 << 10,
                8,
            )
            .expect("downloads");
        drop(file);
        let got = std::fs::read(&path).expect("reads");
        assert_eq!(info.size, want.len() as u64);
        assert!(got == want, "the parts make the object's bytes");
        // The CRC-32 counted as the parts arrived (cut ones resumed) is the object's: the
        // cache trusts it instead of reading the file again.
        assert_eq!(
            (received.len, received.crc32),
            (want.len() as u64, crc32fast::hash(&want))
        );
        let t = imgfeed::store::snapshot().since(&before);
        // 12 parts, each one request at least; every fault cost a retry (a cut part
        // resumes where it stopped).
        assert!(t.requests >= 12, "{t}");
        assert!(t.retries >= faults as u64, "{t}");
    }
    // A size that is not the object's is refused, naming the object.
    let client = StoreClient::new(&url, Some(&moto.endpoint())).expect("client");
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut file = std::fs::File::create(tmp.path().join("x")).expect("creates");
    let e = client
        .download_parts("big.bin", 2_000_000, "the test", &mut file, 256 << 10, 8)
        .expect_err("another size");
    assert!(
        e.to_string().contains("s3://parts/p/big.bin") && e.to_string().contains("2000000"),
        "{e}"
    );
}

#[test]
fn a_small_cache_through_a_faulty_store_gives_the_local_digests() {
    if !ready("a_small_cache_through_a_faulty_store_gives_the_local_digests") {
        return;
    }
    let local = shards();
    let dir = local.path().join("ds");
    let moto = Moto::start(None);
    upload(moto.port, "data", "ds", &dir, |_, b| Some(b));
    let want = digests(&imgfeed(
        TRAIN,
        &["--data", dir.to_str().expect("utf-8")],
        &[],
    ));
    let (small, shards) = sizes(&dir);
    let largest = shards.iter().copied().max().unwrap_or(0);
    let limit = small + 2 * largest;
    for (fault, faults) in [(Fault::Unavailable, 6), (Fault::CutAfter(3000), 4)] {
        let proxy = Proxy::start(moto.port, fault, faults);
        let ep = proxy.endpoint();
        let (o, most) = watched(
            TRAIN,
            "s3://data/ds",
            limit,
            &[("AWS_ENDPOINT_URL", ep.as_str())],
        );
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(digests(&o), want, "nothing lost or repeated");
        assert!(most <= limit, "{most} bytes in a cache of {limit}");
        assert!(
            traffic(&o, "retries") >= faults as u64,
            "{}",
            text(&o.stdout)
        );
    }
}
