//! Range mode (`fetch = "ranges"`): a dataset in object storage read by its samples' byte
//! ranges, ahead of the epoch's exact order, when its files do not fit the cache, against
//! a real S3-compatible server (moto_server, `python/envs.sh moto`) on loopback: the local
//! run's digests with the cache at 10% of the dataset (asked for and picked by `auto`),
//! the cache folder within its limit (nothing big written there), a mid-epoch resume equal
//! to the local one, 503s and bodies cut during range reads retried, WebDataset tars read
//! by ranges as the local tars, and a compressed container refused by name.
//!
//! Like tests/s3.rs: inside `unshare -n sh -c 'ip link set lo up && cargo test --test
//! store_ranges'` (`.ci/run`, `IMGFEED_S3_TESTS=required`); elsewhere each test says why
//! it is skipped and passes, unless `IMGFEED_S3_TESTS=required`. Everything is bounded in
//! time.

mod common;
#[path = "common/remote.rs"]
mod remote;

use remote::{digests, free_port, local_shards, text, traffic, COMMAND_LIMIT, EVAL, TRAIN};

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why this machine cannot run the tests, or `None` when it can.
fn unavailable() -> Option<String> {
    let dev = std::fs::read_to_string("/proc/net/dev").unwrap_or_default();
    let ifaces: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next().map(str::trim))
        .collect();
    if ifaces != ["lo"] {
        return Some(format!(
            "not in a network namespace holding only loopback (interfaces: {ifaces:?}); run \
             `unshare -n sh -c 'ip link set lo up && cargo test --test store_ranges'` as root"
        ));
    }
    if TcpListener::bind("127.0.0.1:0").is_err() {
        return Some("loopback is down (ip link set lo up)".into());
    }
    if moto_server().is_none() {
        return Some(
            "moto_server is not installed: bash python/envs.sh moto (or IMGFEED_MOTO_SERVER)"
                .into(),
        );
    }
    None
}

/// True when the test may run; otherwise prints why (and fails when they are required).
fn ready(test: &str) -> bool {
    match unavailable() {
        None => true,
        Some(why) => {
            assert!(
                std::env::var("IMGFEED_S3_TESTS").as_deref() != Ok("required"),
                "{test}: IMGFEED_S3_TESTS=required, but {why}"
            );
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
            false
        }
    }
}

fn moto_server() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("IMGFEED_MOTO_SERVER") {
        return Some(PathBuf::from(p));
    }
    let out = Command::new("bash")
        .arg(common::repo().join("python/envs.sh"))
        .args(["--path", "moto"])
        .output()
        .ok()?;
    let env = String::from_utf8(out.stdout).ok()?;
    let bin = Path::new(env.trim()).join("bin/moto_server");
    (out.status.success() && bin.is_file()).then_some(bin)
}

/// A moto_server on loopback, killed on drop.
struct Moto {
    child: Child,
    port: u16,
}

impl Moto {
    fn start() -> Moto {
        let bin = moto_server().expect("moto_server");
        let port = free_port();
        let child = Command::new(bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server starts");
        let moto = Moto { child, port };
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "moto did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        moto
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Create `bucket` (once) and put every file of `dir` under `prefix`.
fn upload(port: u16, bucket: &str, prefix: &str, dir: &Path) {
    let st = remote::request(port, "PUT", &format!("/{bucket}"), &[], b"").0;
    assert!(st == 200 || st == 409, "create bucket {bucket}: {st}");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    for f in files {
        let name = f.file_name().and_then(|n| n.to_str()).expect("name");
        let bytes = std::fs::read(&f).expect("reads");
        let path = format!("/{bucket}/{prefix}/{name}");
        assert_eq!(
            remote::request(port, "PUT", &path, &[], &bytes).0,
            200,
            "put {name}"
        );
    }
}

/// `imgfeed ARGS MORE` with S3 settings `env` (dummy credentials, no instance metadata).
fn imgfeed(args: &[&str], more: &[&str], env: &[(&str, &str)]) -> Output {
    let all: Vec<&str> = args.iter().chain(more).copied().collect();
    let mut vars = vec![
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ];
    vars.extend_from_slice(env);
    remote::imgfeed_with_env(&all, &vars)
}

/// `imgfeed ARGS --data URL --cache-dir CACHE --cache-size LIMIT MORE`.
fn run_remote(
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

/// Bytes of the files under `dir` (recursively).
fn bytes_under(dir: &Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => n += bytes_under(&e.path()),
                Ok(m) => n += m.len(),
                Err(_) => {}
            }
        }
    }
    n
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
    let moto = Moto::start();
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
        let stop = Arc::new(AtomicBool::new(false));
        let most = Arc::new(AtomicUsize::new(0));
        let watcher = {
            let (stop, most, root) = (stop.clone(), most.clone(), cache.path().to_path_buf());
            std::thread::spawn(move || {
                let t0 = Instant::now();
                while !stop.load(Ordering::Relaxed) && t0.elapsed() < COMMAND_LIMIT {
                    most.fetch_max(bytes_under(&root) as usize, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        };
        let o = run_remote(TRAIN, "s3://data/ds", cache.path(), limit, fetch, &env);
        stop.store(true, Ordering::Relaxed);
        let _ = watcher.join();
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
        let most = most.load(Ordering::Relaxed) as u64;
        assert!(
            most <= limit && most <= small,
            "{most} bytes on disk, limit {limit}"
        );
    }
    // Unshuffled, with the cache at 30%: auto reads whole shards through the cache.
    let cache = tempfile::tempdir().expect("tempdir");
    let want = digests(&imgfeed(
        EVAL,
        &["--data", dir.to_str().expect("utf-8")],
        &[],
    ));
    let o = run_remote(
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
    let moto = Moto::start();
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
        let o = run_remote(
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
        let r = run_remote(
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

/// What the proxy does to the first faults.
#[derive(Clone, Copy)]
enum Fault {
    /// Answer 503 SlowDown without asking the server.
    Unavailable,
    /// Forward, but close the connection after this many response bytes.
    CutAfter(usize),
}

/// A fault-injecting TCP proxy on loopback in front of `upstream`; stops on drop.
struct Proxy {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    fn start(upstream: u16, fault: Fault, faults: usize) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
        let port = listener.local_addr().expect("addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let left = Arc::new(AtomicUsize::new(faults));
        let st = stop.clone();
        std::thread::spawn(move || {
            let t0 = Instant::now();
            while !st.load(Ordering::Relaxed) && t0.elapsed() < COMMAND_LIMIT * 2 {
                match listener.accept() {
                    Ok((client, _)) => {
                        let left = left.clone();
                        std::thread::spawn(move || serve(client, upstream, fault, &left));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Proxy { port, stop }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Take one of the faults left, if any.
fn take(left: &AtomicUsize) -> bool {
    left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

/// One connection: a 503 (while faults are left), or forwarded, cut once it has carried
/// more response bytes than the cut (while faults are left).
fn serve(mut client: TcpStream, upstream: u16, fault: Fault, left: &AtomicUsize) {
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(Duration::from_secs(30)));
    let cut = match fault {
        Fault::Unavailable if take(left) => {
            let mut head = Vec::new();
            let mut b = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 1 << 16 {
                match client.read(&mut b) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&b[..n]),
                }
            }
            let body = "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code>\
                        <Message>Please reduce your request rate.</Message></Error>";
            let _ = write!(
                client,
                "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            return;
        }
        Fault::Unavailable => usize::MAX,
        Fault::CutAfter(n) => n,
    };
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    let _ = server.set_read_timeout(Some(Duration::from_secs(30)));
    let (Ok(mut c2), Ok(mut s2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut c2, &mut s2);
        let _ = s2.shutdown(std::net::Shutdown::Write);
    });
    let mut cut = cut;
    let mut sent = 0usize;
    let mut b = [0u8; 8192];
    loop {
        match server.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if sent + n > cut && !take(left) {
                    cut = usize::MAX;
                }
                let n = n.min(cut - sent);
                if client.write_all(&b[..n]).is_err() {
                    break;
                }
                sent += n;
                if sent >= cut {
                    break;
                }
            }
        }
    }
    let _ = client.shutdown(std::net::Shutdown::Both);
    let _ = server.shutdown(std::net::Shutdown::Both);
    let _ = up.join();
}

#[test]
fn faults_during_range_reads_are_retried_and_the_digests_match() {
    if !ready("faults_during_range_reads_are_retried_and_the_digests_match") {
        return;
    }
    let local = local_shards();
    let dir = local.path().join("ds");
    let moto = Moto::start();
    upload(moto.port, "data", "ds", &dir);
    let want = digests(&imgfeed(
        TRAIN,
        &["--data", dir.to_str().expect("utf-8")],
        &[],
    ));
    let (shards, small) = sizes(&dir);
    let limit = (shards + small) / 10;
    for (fault, faults) in [(Fault::Unavailable, 6), (Fault::CutAfter(3000), 4)] {
        let proxy = Proxy::start(moto.port, fault, faults);
        let ep = proxy.endpoint();
        let cache = tempfile::tempdir().expect("tempdir");
        let o = run_remote(
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
    let out = Command::new("bash")
        .arg(common::repo().join("python/envs.sh"))
        .args(["--path", "formats"])
        .output()
        .ok()?;
    let python = Path::new(String::from_utf8(out.stdout).ok()?.trim()).join("bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import webdataset"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(python)
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
    let moto = Moto::start();
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
        let o = run_remote(TRAIN, pattern, cache.path(), largest, fetch, &env);
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
    upload(moto.port, "wds", "gz", gz.path());
    let cache = tempfile::tempdir().expect("tempdir");
    let url = "s3://wds/gz/small.tfrecord.gz";
    let o = run_remote(
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
    let o = run_remote(EVAL, url, cache.path(), 1 << 30, &[], &env);
    assert!(
        o.status.success(),
        "auto reads it whole: {}",
        text(&o.stderr)
    );
}
