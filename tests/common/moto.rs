//! A moto_server (S3) on loopback for the object-store tests, with the unsigned requests
//! that set up and read its buckets, `imgfeed` run against it, and the check that the test
//! runs in a network namespace holding only loopback (a skip, or a failure when
//! `IMGFEED_S3_TESTS=required`). Included as `#[path = "common/moto.rs"] mod moto;` beside
//! `mod common;` and `#[path = "common/remote.rs"] mod remote;`.
#![allow(dead_code)]

use super::common;
use super::remote::{self, text, COMMAND_LIMIT};
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why this machine cannot run the tests, or `None` when it can.
pub fn unavailable() -> Option<String> {
    let dev = std::fs::read_to_string("/proc/net/dev").unwrap_or_default();
    let ifaces: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next().map(str::trim))
        .collect();
    if ifaces != ["lo"] {
        return Some(format!(
            "not in a network namespace holding only loopback (interfaces: {ifaces:?}); run \
             `unshare -n sh -c 'ip link set lo up && cargo test --test s3'` as root"
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

/// The in-process client's settings: dummy credentials, no instance metadata.
pub fn client_env() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for (k, v) in [
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ] {
            std::env::set_var(k, v);
        }
    });
}

/// True when the test may run; otherwise prints why (and fails when they are required).
pub fn ready(test: &str) -> bool {
    match unavailable() {
        None => true,
        Some(why) => {
            assert!(
                std::env::var("IMGFEED_S3_TESTS").as_deref() != Ok("required"),
                "{test}: IMGFEED_S3_TESTS=required, but {why}"
            );
            // Straight to stderr, past the test harness's capture: a skip must be seen.
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
            false
        }
    }
}

pub fn moto_server() -> Option<PathBuf> {
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
pub struct Moto {
    child: Child,
    pub port: u16,
}

impl Moto {
    /// Start it; `no_auth` requests are served before credentials are checked (None:
    /// never checked).
    pub fn start(no_auth: Option<usize>) -> Moto {
        Moto::start_with(no_auth, &[])
    }

    /// [`Moto::start`] with more environment (`S3_UPLOAD_PART_MIN_SIZE`, ...).
    pub fn start_with(no_auth: Option<usize>, env: &[(&str, &str)]) -> Moto {
        let bin = moto_server().expect("moto_server");
        let (child, port) =
            remote::start_listening("moto_server", Duration::from_secs(60), |port| {
                let mut cmd = Command::new(&bin);
                cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
                if let Some(n) = no_auth {
                    cmd.env("INITIAL_NO_AUTH_ACTION_COUNT", n.to_string());
                }
                for (k, v) in env {
                    cmd.env(k, v);
                }
                cmd.spawn().expect("moto_server starts")
            });
        Moto { child, port }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One unsigned HTTP/1.1 request (moto takes them while it does not check credentials);
/// returns the status.
pub fn http(port: u16, method: &str, path: &str, body: &[u8]) -> u16 {
    http_full(port, method, path, body).0
}

/// [`http`], returning the status and the response body (Content-Length or chunked).
pub fn http_full(port: u16, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
    remote::request(port, method, path, &[], body)
}

/// Create `bucket`, with a policy that lets this file's unsigned requests read the
/// objects that `imgfeed` writes (signed, so private to it otherwise).
pub fn public_bucket(port: u16, bucket: &str) {
    assert_eq!(
        http(port, "PUT", &format!("/{bucket}"), b""),
        200,
        "create {bucket}"
    );
    let policy = format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::{bucket}/*"}}]}}"#
    );
    let st = http(port, "PUT", &format!("/{bucket}?policy"), policy.as_bytes());
    assert!(st == 200 || st == 204, "policy of {bucket}: {st}");
}

/// The keys under `prefix` in `bucket` (one page: the tests hold few objects).
pub fn keys(port: u16, bucket: &str, prefix: &str) -> Vec<String> {
    let (st, body) = http_full(
        port,
        "GET",
        &format!("/{bucket}?list-type=2&prefix={prefix}"),
        b"",
    );
    assert_eq!(st, 200, "list {bucket}/{prefix}");
    let text = text(&body);
    let mut out: Vec<String> = text
        .split("<Key>")
        .skip(1)
        .filter_map(|k| k.split("</Key>").next().map(str::to_string))
        .collect();
    out.sort();
    out
}

/// The bytes of object `bucket/key`.
pub fn object(port: u16, bucket: &str, key: &str) -> Vec<u8> {
    let (st, body) = http_full(port, "GET", &format!("/{bucket}/{key}"), b"");
    assert_eq!(st, 200, "get {bucket}/{key}");
    body
}

/// The objects under `bucket/prefix/`, as [`files_of`] gives a folder's files.
pub fn objects_of(port: u16, bucket: &str, prefix: &str) -> Vec<(String, Vec<u8>)> {
    keys(port, bucket, &format!("{prefix}/"))
        .into_iter()
        .map(|k| {
            let bytes = object(port, bucket, &k);
            let name = k.rsplit('/').next().unwrap_or("").to_string();
            (name, bytes)
        })
        .collect()
}

/// Create `bucket` and put every file of `dir` under `prefix`, with `edit` changing a
/// file's bytes (None: leave the file out).
pub fn upload(
    port: u16,
    bucket: &str,
    prefix: &str,
    dir: &Path,
    edit: impl Fn(&str, Vec<u8>) -> Option<Vec<u8>>,
) -> usize {
    let st = http(port, "PUT", &format!("/{bucket}"), b"");
    assert_eq!(st, 200, "create bucket {bucket}");
    let mut n = 1;
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    for f in files {
        let name = f.file_name().and_then(|n| n.to_str()).expect("name");
        let bytes = std::fs::read(&f).expect("reads");
        if let Some(bytes) = edit(name, bytes) {
            let st = http(port, "PUT", &format!("/{bucket}/{prefix}/{name}"), &bytes);
            assert_eq!(st, 200, "put {name}");
            n += 1;
        }
    }
    n
}

/// Run `imgfeed ARGS MORE` in the repository with S3 settings `env` (and dummy
/// credentials, no instance metadata), killed after [`COMMAND_LIMIT`].
pub fn imgfeed(args: &[&str], more: &[&str], env: &[(&str, &str)]) -> Output {
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

pub fn data(url: &str, cache: &Path) -> Vec<String> {
    vec![
        "--data".into(),
        url.into(),
        "--cache-dir".into(),
        cache.to_string_lossy().into_owned(),
    ]
}

pub fn run_remote(args: &[&str], url: &str, cache: &Path, env: &[(&str, &str)]) -> Output {
    let d = data(url, cache);
    let more: Vec<&str> = d.iter().map(String::as_str).collect();
    imgfeed(args, &more, env)
}

/// Bytes of the files under `dir` (recursively).
pub fn bytes_under(dir: &Path) -> u64 {
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

/// The most bytes seen under `root` while `f` runs (sampled every millisecond).
pub fn watching<T>(root: &Path, f: impl FnOnce() -> T) -> (T, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicUsize::new(0));
    let watcher = {
        let (stop, most, root) = (stop.clone(), most.clone(), root.to_path_buf());
        std::thread::spawn(move || {
            let t0 = Instant::now();
            while !stop.load(Ordering::Relaxed) && t0.elapsed() < COMMAND_LIMIT {
                most.fetch_max(bytes_under(&root) as usize, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let out = f();
    stop.store(true, Ordering::Relaxed);
    let _ = watcher.join();
    (out, most.load(Ordering::Relaxed) as u64)
}
