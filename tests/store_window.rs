//! The shard-aware shuffle (`--shuffle-window`) reading a shards dataset from a real
//! S3-compatible server (moto_server, on loopback) through a cache of ~15% of the dataset:
//! the epochs give the local run's digests with the same window, the cache folder never
//! holds more than its limit, each shard comes about once an epoch, a cache too small for
//! the window is refused before the first batch (saying what would fit), and a run stopped
//! mid-epoch resumes from the store as the local one does.
//!
//! Run inside a network namespace holding only loopback, as `.ci/run` does:
//! `unshare -n sh -c 'ip link set lo up && IMGFEED_S3_TESTS=required cargo test --test
//! store_window'`; elsewhere each test says why it is skipped and passes.

mod common;
#[path = "common/moto.rs"]
mod moto;
#[path = "common/remote.rs"]
mod remote;

use moto::*;
use remote::{digests, text, traffic};
use std::path::Path;
use std::process::Output;

/// Samples, written class by class, 3 to a shard: 32 shards.
const N: usize = 96;

/// A class-sorted folder of `N` 32×32 BMPs converted to shards (`ds/`, `--store original`,
/// 3 samples a shard) and the pipeline the tests run (`p.toml`: decode, a random flip).
fn dataset() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..N {
        let img = common::Img::from_fn(32, 32, |x, y| [(x * 8) as u8, (y * 8) as u8, i as u8]);
        img.write_bmp(&dir.path().join(format!("src/c{}/{i:02}.bmp", i / 24)));
    }
    let src = dir.path().join("src");
    let convert = dir.path().join("convert.toml");
    std::fs::write(
        &convert,
        format!(
            "[source]\nkind = \"image_folder\"\nroot = {:?}\n[batch]\nsize = 4\n",
            src.to_str().expect("utf-8")
        ),
    )
    .expect("writes");
    // the same images as WebDataset tars of JPEGs (`wds/`, about 3 a tar)
    let jpeg = dir.path().join("jpeg.toml");
    std::fs::write(
        &jpeg,
        format!(
            "[source]\nkind = \"image_folder\"\nroot = {:?}\n[[ops]]\nop = \"decode\"\n\
             [batch]\nsize = 4\n",
            src.to_str().expect("utf-8")
        ),
    )
    .expect("writes");
    let o = imgfeed(
        &[
            "convert",
            jpeg.to_str().expect("utf-8"),
            "--format",
            "webdataset",
            "--shard-size",
            "10kB",
            "--out",
            dir.path().join("wds").to_str().expect("utf-8"),
        ],
        &[],
        &[],
    );
    assert!(o.status.success(), "convert: {}", text(&o.stderr));
    let out = dir.path().join("ds");
    let o = imgfeed(
        &[
            "convert",
            convert.to_str().expect("utf-8"),
            "--format",
            "shards",
            "--store",
            "original",
            "--shard-size",
            "9500B",
            "--out",
            out.to_str().expect("utf-8"),
        ],
        &[],
        &[],
    );
    assert!(o.status.success(), "convert: {}", text(&o.stderr));
    std::fs::write(
        dir.path().join("p.toml"),
        "[source]\nkind = \"shards\"\nroot = \"ds\"\nshuffle = true\nseed = 4\n\n\
         [[ops]]\nop = \"decode\"\n\n[[ops]]\nop = \"center_crop\"\nsize = 32\n\n\
         [[ops]]\nop = \"random_horizontal_flip\"\nprob = 0.5\n\n\
         [batch]\nsize = 8\n\n[engine]\nworkers = 2\n",
    )
    .expect("writes");
    dir
}

/// The shard files' sizes, largest first, and the index's and the names' (what the cache
/// keeps beside the shards).
fn sizes(ds: &Path) -> (Vec<u64>, u64) {
    let mut shards = Vec::new();
    let mut other = 0;
    for e in std::fs::read_dir(ds).expect("dir").flatten() {
        let len = e.metadata().expect("metadata").len();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("shard-") {
            shards.push(len);
        } else if name != "manifest.json" {
            other += len;
        }
    }
    shards.sort_unstable_by(|a, b| b.cmp(a));
    (shards, other)
}

/// `imgfeed run p.toml` with `more`, on `data` (a store with `cache` as its cache folder).
fn run(dir: &Path, data: &str, cache: &Path, more: &[&str], env: &[(&str, &str)]) -> Output {
    let p = dir.join("p.toml");
    let mut args = vec![
        "run",
        p.to_str().expect("utf-8"),
        "--data",
        data,
        "--cache-dir",
        cache.to_str().expect("utf-8"),
    ];
    args.extend(more);
    imgfeed(&args, &[], env)
}

#[test]
fn epochs_through_a_small_cache_give_the_local_digests_within_the_limit() {
    if !ready("epochs_through_a_small_cache_give_the_local_digests_within_the_limit") {
        return;
    }
    let dir = dataset();
    let ds = dir.path().join("ds");
    let (shards, other) = sizes(&ds);
    assert_eq!(shards.len(), 32, "{shards:?}");
    let total = bytes_under(&ds);
    // Room for the index, the names, a window of 2 shards and the 2 fetched ahead.
    let limit = other + shards[..4].iter().sum::<u64>();
    assert!(limit * 100 <= total * 20, "{limit} of {total}");
    let moto = Moto::start(None);
    upload(moto.port, "data", "ds", &ds, |_, b| Some(b));
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let limit_s = limit.to_string();
    let flags = ["--epochs", "2", "--shuffle-window", "2"];
    let local = run(
        dir.path(),
        ds.to_str().expect("utf-8"),
        dir.path(),
        &flags,
        &[],
    );
    assert!(local.status.success(), "{}", text(&local.stderr));
    let want = digests(&local);
    assert_eq!(want.len(), 2);
    let cache = tempfile::tempdir().expect("tempdir");
    let mut more = flags.to_vec();
    more.extend(["--cache-size", &limit_s]);
    let (o, most) = watching(cache.path(), || {
        run(dir.path(), "s3://data/ds", cache.path(), &more, &env)
    });
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(digests(&o), want, "the store's epochs are the local ones");
    assert!(
        most > 0 && most <= limit,
        "{most} bytes in the cache folder, limit {limit}"
    );
    // Each shard about once an epoch (the index and the names once): the window keeps
    // the reads in the cache. The global shuffle through the same cache fetches far more.
    let fetched = traffic(&o, "files downloaded");
    assert!(
        fetched <= 2 + 2 * 32 + 8,
        "{fetched} files downloaded for 2 epochs of 32 shards: {}",
        text(&o.stdout)
    );
    let global = run(
        dir.path(),
        "s3://data/ds",
        cache.path(),
        // Whole files, as the window reads them (auto would read the global shuffle's
        // samples by ranges: no files at all).
        &[
            "--epochs",
            "2",
            "--cache-size",
            &limit_s,
            "--fetch",
            "files",
        ],
        &env,
    );
    assert!(global.status.success(), "{}", text(&global.stderr));
    let thrash = traffic(&global, "files downloaded");
    eprintln!(
        "2 epochs of 32 shards through a cache of {limit} bytes ({}% of {total}): \
         {fetched} files downloaded with --shuffle-window 2, {thrash} with the global shuffle",
        limit * 100 / total
    );
    assert!(thrash > 2 * fetched, "global {thrash}, window {fetched}");
}

#[test]
fn webdataset_tars_through_a_small_cache_give_the_local_digests_within_the_limit() {
    if !ready("webdataset_tars_through_a_small_cache_give_the_local_digests_within_the_limit") {
        return;
    }
    let dir = dataset();
    let wds = dir.path().join("wds");
    let mut tars: Vec<u64> = std::fs::read_dir(&wds)
        .expect("dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tar"))
        .map(|e| e.metadata().expect("metadata").len())
        .collect();
    tars.sort_unstable_by(|a, b| b.cmp(a));
    assert!(tars.len() >= 16, "{} tars", tars.len());
    let total: u64 = tars.iter().sum();
    let limit = tars[..4].iter().sum::<u64>();
    assert!(limit * 100 <= total * 30, "{limit} of {total}");
    let moto = Moto::start(None);
    upload(moto.port, "data", "wds", &wds, |name, b| {
        name.ends_with(".tar").then_some(b)
    });
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let flags = ["--epochs", "2", "--shuffle-window", "2"];
    let local = run(
        dir.path(),
        wds.to_str().expect("utf-8"),
        dir.path(),
        &flags,
        &[],
    );
    assert!(local.status.success(), "{}", text(&local.stderr));
    let want = digests(&local);
    assert_eq!(want.len(), 2);
    let cache = tempfile::tempdir().expect("tempdir");
    let limit_s = limit.to_string();
    let mut more = flags.to_vec();
    more.extend(["--cache-size", &limit_s]);
    let pattern = format!("s3://data/wds/shard-{{000000..{:06}}}.tar", tars.len() - 1);
    let (o, most) = watching(cache.path(), || {
        run(dir.path(), &pattern, cache.path(), &more, &env)
    });
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(digests(&o), want, "the store's epochs are the local ones");
    // (the tars' indexes are kept beside the cache, outside its limit: at most what the
    // watcher saw less what they hold at the end)
    let indexes = bytes_under(&cache.path().join("indexes"));
    assert!(indexes > 0);
    let most = most - indexes.min(most);
    assert!(most <= limit, "{most} bytes cached, limit {limit}");
    let fetched = traffic(&o, "files downloaded");
    eprintln!(
        "2 epochs of {} tars through a cache of {limit} bytes: {fetched} files downloaded",
        tars.len()
    );
    // each tar fetched once to index it, then about once an epoch
    assert!(
        fetched <= 3 * tars.len() as u64 + 8,
        "{fetched}: {}",
        text(&o.stdout)
    );
}

#[test]
fn a_cache_too_small_for_the_window_is_refused_before_the_first_batch() {
    if !ready("a_cache_too_small_for_the_window_is_refused_before_the_first_batch") {
        return;
    }
    let dir = dataset();
    let ds = dir.path().join("ds");
    let (shards, other) = sizes(&ds);
    let moto = Moto::start(None);
    upload(moto.port, "data", "ds", &ds, |_, b| Some(b));
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    // Holds a window of 2 (4 shards with the prefetched ones), not one of 6.
    let limit = other + shards[..4].iter().sum::<u64>() + 10;
    let need = other + shards[..8].iter().sum::<u64>();
    let cache = tempfile::tempdir().expect("tempdir");
    let limit_s = limit.to_string();
    let o = run(
        dir.path(),
        "s3://data/ds",
        cache.path(),
        &["--shuffle-window", "6", "--cache-size", &limit_s],
        &env,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stdout));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!("give at least {need} bytes")),
        "{need}: {err}"
    );
    assert!(err.contains("shuffle_window to 2 or less"), "{err}");
    assert!(!text(&o.stdout).contains("epoch 0"), "{}", text(&o.stdout));
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

#[test]
fn a_run_stopped_mid_epoch_resumes_from_the_store_like_the_local_one() {
    if !ready("a_run_stopped_mid_epoch_resumes_from_the_store_like_the_local_one") {
        return;
    }
    let dir = dataset();
    let ds = dir.path().join("ds");
    let (shards, other) = sizes(&ds);
    let limit = (other + shards[..4].iter().sum::<u64>()).to_string();
    let moto = Moto::start(None);
    upload(moto.port, "data", "ds", &ds, |_, b| Some(b));
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let base = [
        "--epochs",
        "2",
        "--shuffle-window",
        "2",
        "--cache-size",
        &limit,
    ];
    // 12 batches an epoch: stopped in the middle of epoch 1, then resumed
    let mut runs = Vec::new();
    for data in [ds.to_str().expect("utf-8"), "s3://data/ds"] {
        let cache = tempfile::tempdir().expect("tempdir");
        let mut stop = base.to_vec();
        stop.extend(["--max-batches", "17"]);
        let o = run(dir.path(), data, cache.path(), &stop, &env);
        assert!(o.status.success(), "{data}: {}", text(&o.stderr));
        let hint = resume_hint(&o);
        assert_eq!(hint[..4], ["--start-epoch", "1", "--start-batch", "5"]);
        let mut seen = digests(&o);
        let cache = tempfile::tempdir().expect("tempdir");
        let mut more = base.to_vec();
        more.extend(hint.iter().map(String::as_str));
        let r = run(dir.path(), data, cache.path(), &more, &env);
        assert!(r.status.success(), "{data}: {}", text(&r.stderr));
        seen.extend(digests(&r));
        assert_eq!(seen.len(), 3, "{}", text(&r.stdout));
        runs.push(seen);
    }
    assert_eq!(
        runs[1], runs[0],
        "the store's run resumes like the local one"
    );
}
