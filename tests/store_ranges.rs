//! Range mode (`fetch = "ranges"`): a dataset in object storage read by its samples' byte
//! ranges, ahead of the epoch's exact order, when its files do not fit the cache, against
//! a real S3-compatible server (moto_server, `python/envs.sh moto`) on loopback: the local
//! run's digests with the cache at 10% of the dataset (asked for and picked by `auto`),
//! the cache folder within its limit, the next epoch's first samples kept there and read
//! from there without a request (none after the run's last epoch), a mid-epoch resume equal
//! to the local one, 503s and bodies cut during range reads retried, WebDataset tars read
//! by ranges as the local tars, and a compressed container refused by name.
//!
//! Like tests/s3.rs: inside `unshare -n sh -c 'ip link set lo up && cargo test --test
//! store_ranges'` (`.ci/run`, `IMGFEED_S3_TESTS=required`); elsewhere each test says why
//! it is skipped and passes, unless `IMGFEED_S3_TESTS=required`. Everything is bounded in
//! time.

mod common;
#[path = "common/formats.rs"]
mod formats;
#[path = "common/moto.rs"]
mod moto;
#[path = "common/proxy.rs"]
mod proxy;
#[path = "common/remote.rs"]
mod remote;

use moto::{bytes_under, imgfeed, ready, watching, Moto};
use proxy::{Fault, Proxy};
use remote::{digests, local_shards, per_epoch, text, traffic, EVAL, TRAIN};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Create `bucket` and put every file of `dir` under `prefix`.
fn upload(port: u16, bucket: &str, prefix: &str, dir: &Path) {
    moto::upload(port, bucket, prefix, dir, |_, b| Some(b));
}

/// `imgfeed ARGS --data URL --cache-dir CACHE --cache-size LIMIT MORE`.
fn run_ranged(
    args: &[&str],
    url: &str,
    cache: &Path,
    limit: u64,
    more: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let limit = limit.to_string();
    let cache = cache.to_str().expect("utf-8");
    let mut all = vec!["--data", url, "--cache-dir", cache, "--cache-size", &limit];
    all.extend_from_slice(more);
    imgfeed(args, &all, env)
}

/// The shards' bytes and the rest's (index, names, manifest) of a local dataset.
fn sizes(dir: &Path) -> (u64, u64) {
    let shards: u64 = std::fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("shard-"))
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .sum();
    (shards, bytes_under(dir) - shards)
}

/// Samples in a local dataset (its index's entries).
fn samples(dir: &Path) -> u64 {
    (std::fs::metadata(dir.join("index.bin"))
        .expect("index")
        .len()
        - 32)
        / 56
}

#[test]
fn ranges_with_a_tenth_of_the_dataset_cached_give_the_local_digests() {
    if !ready("ranges_with_a_tenth_of_the_dataset_cached_give_the_local_digests") {
        return;
    }
    let local = local_shards();
    let dir = local.path().join("ds");
    let moto = Moto::start(None);
    upload(moto.port, "data", "ds", &dir);
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let want = imgfeed(TRAIN, &["--data", dir.to_str().expect("utf-8")], &[]);
    assert!(want.status.success(), "{}", text(&want.stderr));
    let want = digests(&want);
    assert_eq!(want.len(), 2, "two epochs");
    let (shards, small) = sizes(&dir);
    let limit = (shards + small) / 10;
    assert!(limit > small, "the index and the names fit");
    let n = samples(&dir);
    for fetch in [&["--fetch", "ranges"][..], &[]] {
        let cache = tempfile::tempdir().expect("tempdir");
        let (o, most) = watching(cache.path(), || {
            run_ranged(TRAIN, "s3://data/ds", cache.path(), limit, fetch, &env)
        });
        assert!(o.status.success(), "{fetch:?}: {}", text(&o.stderr));
        assert_eq!(digests(&o), want, "{fetch:?}: the local run's digests");
        // By ranges (auto picks them: a shuffle over files larger than the cache): the
        // index and the names are the only files downloaded, every sample a range read.
        let out = text(&o.stdout);
        assert_eq!(traffic(&o, "files downloaded"), 2, "{fetch:?}: {out}");
        let ranged = traffic(&o, "range requests");
        assert!(
            ranged >= 1 && ranged <= 2 * n,
            "{fetch:?}: {ranged} for {n}: {out}"
        );
        // Range mode keeps the next epoch's first samples there, within the limit.
        assert!(most <= limit, "{most} bytes on disk, limit {limit}");
    }
    // Unshuffled, with the cache at 30%: auto reads whole shards through the cache.
    let cache = tempfile::tempdir().expect("tempdir");
    let want = digests(&imgfeed(
        EVAL,
        &["--data", dir.to_str().expect("utf-8")],
        &[],
    ));
    let o = run_ranged(
        EVAL,
        "s3://data/ds",
        cache.path(),
        (shards + small) * 3 / 10,
        &[],
        &env,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(digests(&o), want);
    assert_eq!(traffic(&o, "range requests"), 0, "{}", text(&o.stdout));
    assert!(traffic(&o, "files downloaded") > 2, "{}", text(&o.stdout));
}

#[test]
fn the_next_epochs_first_samples_are_kept_in_the_cache_and_read_from_there() {
    if !ready("the_next_epochs_first_samples_are_kept_in_the_cache_and_read_from_there") {
        return;
    }
    let local = local_shards();
    let dir = local.path().join("ds");
    let moto = Moto::start(None);
    upload(moto.port, "data", "ds", &dir);
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let three = [
        "run",
        "pipelines/resnet50_train.toml",
        "--batch-size",
        "4",
        "--workers",
        "2",
        "--epochs",
        "3",
    ];
    let want = imgfeed(&three, &["--data", dir.to_str().expect("utf-8")], &[]);
    assert!(want.status.success(), "{}", text(&want.stderr));
    let (shards, small) = sizes(&dir);
    let limit = (shards + small) * 3 / 10;
    let n = samples(&dir);
    let cache = tempfile::tempdir().expect("tempdir");
    let (o, most) = watching(cache.path(), || {
        run_ranged(
            &three,
            "s3://data/ds",
            cache.path(),
            limit,
            &["--fetch", "ranges"],
            &env,
        )
    });
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(digests(&o), digests(&want), "the local run's bytes: {out}");
    let kept = per_epoch(&o, "samples from the kept ranges");
    let ranged = per_epoch(&o, "range requests");
    assert_eq!(kept.len(), 3, "{out}");
    assert_eq!(kept[0], 0, "nothing kept before the first epoch: {out}");
    // Epoch 1's file is planned a 64th into epoch 0 (here after its first read); later
    // files once the readers are done with the previous one (on so small a dataset,
    // maybe too late).
    assert!(kept[1] > 0, "epoch 1 reads kept samples: {out}");
    for e in 1..3 {
        // What came from disk was not asked of the store.
        assert!(
            ranged[e] + kept[e] <= n + 2,
            "epoch {e}: {} requests, {} kept, {n} samples: {out}",
            ranged[e],
            kept[e]
        );
    }
    assert!(ranged[1] < n, "{out}");
    // Every sample read from a kept file was written there by the epoch before; the
    // run's last epoch writes nothing for an epoch that never comes.
    let keeping = per_epoch(&o, "samples kept for a later epoch");
    assert_eq!(keeping.len(), 3, "{out}");
    assert!(keeping[0] >= kept[1] && keeping[1] >= kept[2], "{out}");
    assert_eq!(keeping[2], 0, "the last epoch keeps nothing: {out}");
    assert!(most <= limit, "{most} bytes on disk, limit {limit}");
    assert!(most > small, "the kept samples were on disk: {most} bytes");
    // Nothing is left behind but the index and the names.
    let after = bytes_under(cache.path());
    assert!(after <= small, "{after} bytes left in the cache folder");
}

#[test]
fn ranks_sharing_the_cache_folder_share_its_room_and_write_each_others_kept_samples() {
    if !ready("ranks_sharing_the_cache_folder_share_its_room_and_write_each_others_kept_samples") {
        return;
    }
    // The fixtures four times over (48 samples): each rank's share holds several.
    let local = tempfile::tempdir().expect("tempdir");
    let tree = local.path().join("tree");
    for class in std::fs::read_dir("fixtures/imagefolder")
        .expect("fixtures")
        .flatten()
    {
        let to = tree.join(class.file_name());
        std::fs::create_dir_all(&to).expect("mkdir");
        for image in std::fs::read_dir(class.path()).expect("class").flatten() {
            for k in 0..4 {
                let name = format!("{k}-{}", image.file_name().to_string_lossy());
                std::fs::copy(image.path(), to.join(name)).expect("copy");
            }
        }
    }
    let dir = local.path().join("ds");
    let mut convert = remote::convert_fixtures("30kB");
    let (tree_s, dir_s) = (tree.to_str().expect("utf-8"), dir.to_str().expect("utf-8"));
    if let Some(at) = convert.iter().position(|a| *a == "--data") {
        convert[at + 1] = tree_s;
    }
    convert.extend(["--out", dir_s]);
    let o = remote::imgfeed_with_env(&convert, &[]);
    assert!(o.status.success(), "convert: {}", text(&o.stderr));
    let moto = Moto::start(None);
    upload(moto.port, "data", "ds", &dir);
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let epochs = [
        "run",
        "pipelines/resnet50_train.toml",
        "--batch-size",
        "4",
        "--workers",
        "1",
        "--epochs",
        "5",
        "--num-shards",
        "2",
    ];
    let (shards, small) = sizes(&dir);
    // A rank reads half the samples and keeps at most the first half of its next order:
    // a quarter of the dataset. With the room at a fifth, one rank alone would fill it.
    let limit = small + shards / 5;
    let cache = tempfile::tempdir().expect("tempdir");
    let (folder, args, env) = (cache.path(), &epochs[..], &env[..]);
    let ((a, b), most) = watching(folder, || {
        std::thread::scope(|s| {
            let rank = |id: &'static str| {
                s.spawn(move || {
                    run_ranged(
                        args,
                        "s3://data/ds",
                        folder,
                        limit,
                        &["--fetch", "ranges", "--shard-id", id],
                        env,
                    )
                })
            };
            let (a, b) = (rank("0"), rank("1"));
            (a.join().expect("rank 0"), b.join().expect("rank 1"))
        })
    });
    for (id, o) in [(0, &a), (1, &b)] {
        let out = text(&o.stdout);
        assert!(o.status.success(), "rank {id}: {}", text(&o.stderr));
        let want = imgfeed(
            &epochs,
            &[
                "--data",
                dir.to_str().expect("utf-8"),
                "--shard-id",
                &id.to_string(),
            ],
            &[],
        );
        assert_eq!(digests(o), digests(&want), "rank {id}: the local bytes");
        // Once both ranks are known to the folder, each keeps its share for its next
        // epoch (the first epochs may go to whoever asked first).
        let kept = per_epoch(o, "samples from the kept ranges");
        let others = per_epoch(o, "written by other ranks");
        assert_eq!(kept.len(), 5, "{out}");
        assert!(
            kept[3] > 0 && kept[4] > 0,
            "rank {id} reads kept samples in its last epochs: {kept:?}: {out}"
        );
        // The ranks pool what they read: some of a rank's kept samples were read (and
        // written there) by the other rank in the epoch before.
        assert!(
            others.iter().sum::<u64>() > 0,
            "rank {id}: none of its kept samples {kept:?} written by the other rank: {out}"
        );
    }
    assert!(most <= limit, "{most} bytes on disk, limit {limit}");
    let after = bytes_under(cache.path());
    assert!(after <= small, "{after} bytes left in the cache folder");
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
fn a_run_by_ranges_resumes_mid_epoch_like_the_local_one() {
    if !ready("a_run_by_ranges_resumes_mid_epoch_like_the_local_one") {
        return;
    }
    let local = local_shards();
    let dir = local.path().join("ds");
    let dir_s = dir.to_str().expect("utf-8");
    let moto = Moto::start(None);
    upload(moto.port, "data", "ds", &dir);
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let (shards, small) = sizes(&dir);
    let limit = (shards + small) / 10;
    // Stopped in the middle of epoch 1 (3 batches an epoch), then resumed.
    let stop = ["--max-batches", "5"];
    let mut runs: Vec<Vec<String>> = Vec::new();
    for data in [dir_s, "s3://data/ds"] {
        let cache = tempfile::tempdir().expect("tempdir");
        let args = [TRAIN, &stop[..]].concat();
        let o = run_ranged(
            &args,
            data,
            cache.path(),
            limit,
            &["--fetch", "ranges"],
            &env,
        );
        assert!(o.status.success(), "{data}: {}", text(&o.stderr));
        let hint = resume_hint(&o);
        assert_eq!(hint[..4], ["--start-epoch", "1", "--start-batch", "2"]);
        let mut seen = digests(&o);
        let cache = tempfile::tempdir().expect("tempdir");
        let args: Vec<&str> = TRAIN
            .iter()
            .copied()
            .chain(hint.iter().map(String::as_str))
            .collect();
        let r = run_ranged(
            &args,
            data,
            cache.path(),
            limit,
            &["--fetch", "ranges"],
            &env,
        );
        assert!(r.status.success(), "{data}: {}", text(&r.stderr));
        seen.extend(digests(&r));
        assert_eq!(seen.len(), 3, "{}", text(&r.stdout));
        if data.starts_with("s3://") {
            // The resumed part of the epoch reads its 4 samples' ranges, no more.
            let ranged = traffic(&r, "range requests");
            assert!((1..=4).contains(&ranged), "{}", text(&r.stdout));
        }
        runs.push(seen);
    }
    assert_eq!(
        runs[1], runs[0],
        "the store's run resumes like the local one"
    );
}

#[test]
fn faults_during_range_reads_are_retried_and_the_digests_match() {
    if !ready("faults_during_range_reads_are_retried_and_the_digests_match") {
        return;
    }
    let local = local_shards();
    let dir = local.path().join("ds");
    let moto = Moto::start(None);
    upload(moto.port, "data", "ds", &dir);
    let want = digests(&imgfeed(
        TRAIN,
        &["--data", dir.to_str().expect("utf-8")],
        &[],
    ));
    let (shards, small) = sizes(&dir);
    let limit = (shards + small) / 10;
    // 503s to range requests (not to the manifest or the index), then bodies cut (only
    // the records' answers are longer than the cut).
    for (fault, faults) in [
        (Fault::UnavailableIf("range: bytes="), 6),
        (Fault::CutAfter(3000), 4),
    ] {
        let proxy = Proxy::start(moto.port, fault, faults);
        let ep = proxy.endpoint();
        let cache = tempfile::tempdir().expect("tempdir");
        let o = run_ranged(
            TRAIN,
            "s3://data/ds",
            cache.path(),
            limit,
            &["--fetch", "ranges"],
            &[("AWS_ENDPOINT_URL", ep.as_str())],
        );
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(digests(&o), want, "nothing lost or repeated");
        assert!(traffic(&o, "range requests") > 0, "{}", text(&o.stdout));
        assert!(
            traffic(&o, "retries") >= faults as u64,
            "every fault cost a retry: {}",
            text(&o.stdout)
        );
    }
}

/// The `formats` environment's python (webdataset's writers), or `None`.
fn formats_python() -> Option<PathBuf> {
    formats::env_python("formats", "webdataset").ok()
}

#[test]
fn webdataset_tars_read_by_ranges_equal_the_local_tars() {
    if !ready("webdataset_tars_read_by_ranges_equal_the_local_tars") {
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
    let local = tempfile::tempdir().expect("tempdir");
    let o = Command::new(&python)
        .arg(common::repo().join("fixtures/make_webdataset.py"))
        .arg(common::repo().join("fixtures/imagefolder"))
        .arg(local.path())
        .output()
        .expect("runs python");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let tars = local.path().join("shards");
    let moto = Moto::start(None);
    upload(moto.port, "wds", "train", &tars);
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let local_pattern = format!("{}/train-{{0000..0002}}.tar", tars.display());
    let want = imgfeed(TRAIN, &["--data", &local_pattern], &[]);
    assert!(want.status.success(), "{}", text(&want.stderr));
    let pattern = "s3://wds/train/train-{0000..0002}.tar";
    // The cache holds the largest tar (each is indexed once, whole), not all three.
    let (mut total, mut largest) = (0, 0);
    for e in std::fs::read_dir(&tars).expect("dir").flatten() {
        let len = e.metadata().expect("meta").len();
        total += len;
        largest = largest.max(len);
    }
    assert!(largest < total);
    for fetch in [&["--fetch", "ranges"][..], &[]] {
        let cache = tempfile::tempdir().expect("tempdir");
        let o = run_ranged(TRAIN, pattern, cache.path(), largest, fetch, &env);
        assert!(o.status.success(), "{fetch:?}: {}", text(&o.stderr));
        assert_eq!(digests(&o), digests(&want), "{fetch:?}");
        assert!(traffic(&o, "range requests") > 0, "{}", text(&o.stdout));
    }
    // A gzip'd TFRecord is read from its unpacked copy: no ranges to read there.
    let gz = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        common::repo().join("fixtures/records/small.tfrecord.gz"),
        gz.path().join("small.tfrecord.gz"),
    )
    .expect("copies");
    upload(moto.port, "packed", "gz", gz.path());
    let cache = tempfile::tempdir().expect("tempdir");
    let url = "s3://packed/gz/small.tfrecord.gz";
    let o = run_ranged(
        EVAL,
        url,
        cache.path(),
        1 << 30,
        &["--fetch", "ranges"],
        &env,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let e = text(&o.stderr);
    assert!(
        e.contains("small.tfrecord.gz") && e.contains("compressed"),
        "{e}"
    );
    let o = run_ranged(EVAL, url, cache.path(), 1 << 30, &[], &env);
    assert!(
        o.status.success(),
        "auto reads it whole: {}",
        text(&o.stderr)
    );
}

/// Parquet files written by Hugging Face `datasets` (Snappy pages) in the global shuffle
/// through a cache that holds one of four: each image read by a range of its page (no
/// unpacked copy made, no file fetched again), the image tree's digests, the folder within
/// its limit. Pages compressed by gzip have no such ranges: `--fetch ranges` is refused
/// naming the object, and `auto` reads them whole, with its warning.
#[test]
fn parquet_pages_are_read_by_ranges_in_the_global_shuffle() {
    let test = "parquet_pages_are_read_by_ranges_in_the_global_shuffle";
    if !ready(test) {
        return;
    }
    let Some(python) = formats::ready(test, "formats", "datasets") else {
        return;
    };
    let local = tempfile::tempdir().expect("tempdir");
    let dir = local.path().join("hf");
    let sizes = formats::parquet_files(&python, &dir, 4, &["--row-group", "4"]);
    let largest = sizes[3];
    // The least the cache accepts: the largest object, not the four.
    let limit = largest + 4096;
    assert!(limit < sizes.iter().sum::<u64>());
    let moto = Moto::start(None);
    upload(moto.port, "recs", "hf", &dir);
    let ep = moto.endpoint();
    let env = [("AWS_ENDPOINT_URL", ep.as_str())];
    let url = "s3://recs/hf/train-{00000..00003}-of-00004.parquet";
    let want = digests(&imgfeed(TRAIN, &["--data", "fixtures/imagefolder"], &[]));
    assert_eq!(want.len(), 2);
    for fetch in [&["--fetch", "ranges"][..], &[]] {
        let cache = tempfile::tempdir().expect("tempdir");
        let (o, most) = watching(cache.path(), || {
            run_ranged(TRAIN, url, cache.path(), limit, fetch, &env)
        });
        assert!(o.status.success(), "{fetch:?}: {}", text(&o.stderr));
        assert_eq!(digests(&o), want, "{fetch:?}: the tree's digests");
        let out = text(&o.stdout);
        assert!(traffic(&o, "range requests") > 0, "{fetch:?}: {out}");
        // Each object fetched once, to index it; nothing again.
        assert_eq!(traffic(&o, "files downloaded"), 4, "{fetch:?}: {out}");
        assert_eq!(traffic(&o, "files fetched again"), 0, "{fetch:?}: {out}");
        assert!(
            !text(&o.stderr).contains("unpacked copies"),
            "{fetch:?}: {}",
            text(&o.stderr)
        );
        assert!(
            most <= limit,
            "{fetch:?}: {most} bytes on disk, limit {limit}"
        );
        // No unpacked copy left in the cache after the run (outside `indexes/`).
        let mut left = Vec::new();
        let mut dirs = vec![cache.path().to_path_buf()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if e.path().is_dir() {
                    if name != "indexes" {
                        dirs.push(e.path());
                    }
                } else if name.contains(".parquet") {
                    left.push(name);
                }
            }
        }
        assert!(left.is_empty(), "{fetch:?}: copies in the cache: {left:?}");
    }
    // The same files with gzip pages (pyarrow's writer): no ranges there.
    let gz = local.path().join("gz");
    std::fs::create_dir_all(&gz).expect("mkdir");
    let o = Command::new(&python)
        .arg("-c")
        .arg(
            "import sys, glob, os, pyarrow.parquet as pq\n\
             for p in glob.glob(os.path.join(sys.argv[1], '*.parquet')):\n\
             \x20   pq.write_table(pq.read_table(p), os.path.join(sys.argv[2], os.path.basename(p)), compression='gzip')\n",
        )
        .arg(&dir)
        .arg(&gz)
        .output()
        .expect("runs python");
    assert!(o.status.success(), "{}", text(&o.stderr));
    upload(moto.port, "recs", "gz", &gz);
    let url = "s3://recs/gz/train-{00000..00003}-of-00004.parquet";
    let cache = tempfile::tempdir().expect("tempdir");
    let o = run_ranged(
        TRAIN,
        url,
        cache.path(),
        limit,
        &["--fetch", "ranges"],
        &env,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let e = text(&o.stderr);
    assert!(e.contains("gz/train-0000") && e.contains("Snappy"), "{e}");
    let o = run_ranged(TRAIN, url, cache.path(), limit, &[], &env);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(digests(&o), want, "gzip pages, read whole");
    assert!(
        text(&o.stderr).contains("unpacked copies"),
        "{}",
        text(&o.stderr)
    );
}
