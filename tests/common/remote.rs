//! What the object-store tests share (`tests/s3.rs`: moto_server; `tests/stores.rs`:
//! Azurite, fake-gcs-server): running `imgfeed` as a user runs it, bounded in time and with
//! none of this process's store variables, reading its digests and traffic lines, and the
//! local conversion of the fixtures that the stores are compared with. Included by those
//! two files only (`#[path = "common/remote.rs"] mod remote;`).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longest any one `imgfeed` command may take here.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(180);

/// The prefixes of the stores' variables, none of which the tests' `imgfeed` inherits.
const STORE_VARS: &[&str] = &["AWS_", "GOOGLE_", "AZURE_", "AZURITE_"];

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Start a server (`spawn` gets the port to listen on) and wait, at most `limit`, until the
/// child itself (or a process it started) listens on that loopback port.
///
/// A port from [`free_port`] is free only when it is asked for: a test running beside this
/// one may take it (another server, or a client's outgoing socket) before the child binds
/// it. Then the child exits for want of the port, while a plain connect succeeds against
/// the other process and fails later, when that one is gone. So the listener is matched to
/// the child through `/proc`, and a child that exits is started again on another port (at
/// most 5 times).
pub fn start_listening(
    what: &str,
    limit: Duration,
    mut spawn: impl FnMut(u16) -> std::process::Child,
) -> (std::process::Child, u16) {
    for _ in 0..5 {
        let port = free_port();
        let mut child = spawn(port);
        let t0 = Instant::now();
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                break; // the port was taken: try another
            }
            if listens(child.id(), port) {
                return (child, port);
            }
            if t0.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what} did not listen on 127.0.0.1:{port} within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    panic!("{what} exited at start on 5 ports in a row");
}

/// Whether process `pid` or one of its descendants holds a listening TCP socket on `port`.
fn listens(pid: u32, port: u16) -> bool {
    let want = format!(":{port:04X}");
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let rows = std::fs::read_to_string(table).unwrap_or_default();
        for row in rows.lines().skip(1) {
            let cols: Vec<&str> = row.split_whitespace().collect();
            // local_address, state (0A: LISTEN), inode
            if cols.len() > 9 && cols[1].ends_with(&want) && cols[3] == "0A" {
                inodes.push(format!("socket:[{}]", cols[9]));
            }
        }
    }
    if inodes.is_empty() {
        return false;
    }
    family(pid).into_iter().any(|p| {
        std::fs::read_dir(format!("/proc/{p}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .any(|link| inodes.iter().any(|i| link.as_os_str() == i.as_str()))
    })
}

/// `pid` and every process descended from it.
fn family(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let p: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // after the command's closing parenthesis: state, then the parent's pid
            let ppid = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

/// The files of a folder, sorted by name, with their bytes.
pub fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).expect("reads"))
        })
        .collect();
    out.sort();
    out
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The digests `imgfeed run` printed, one per epoch.
pub fn digests(o: &Output) -> Vec<String> {
    text(&o.stdout)
        .lines()
        .filter_map(|l| l.split("digest ").nth(1))
        .map(|d| d.split(';').next().unwrap_or("").to_string())
        .collect()
}

/// Each epoch's count before `what` on its `object store:` line (0 where the line lacks
/// it).
pub fn per_epoch(o: &Output, what: &str) -> Vec<u64> {
    text(&o.stdout)
        .lines()
        .filter(|l| l.starts_with("epoch ") && l.contains("object store:"))
        .map(|l| {
            l.find(what)
                .and_then(|at| l[..at].split_whitespace().last()?.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .collect()
}

/// The sum of the `object store:` lines' count before `what` (`requests`, `files`, ...).
pub fn traffic(o: &Output, what: &str) -> u64 {
    text(&o.stdout)
        .lines()
        .filter(|l| l.contains("object store:"))
        .filter_map(|l| {
            let at = l.find(what)?;
            l[..at].split_whitespace().last()?.parse::<u64>().ok()
        })
        .sum()
}

/// `imgfeed ARGS` from the repository root, with none of this process's store variables
/// but `env`'s, killed (and the test failed) after [`COMMAND_LIMIT`].
pub fn imgfeed_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_imgfeed"));
    cmd.current_dir(crate::common::repo())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars() {
        if STORE_VARS.iter().any(|p| k.starts_with(p)) {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("imgfeed starts");
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut b);
        }
        b
    });
    let ereader = std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut b);
        }
        b
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("waits") {
            break s;
        }
        if t0.elapsed() > COMMAND_LIMIT {
            let _ = child.kill();
            panic!("imgfeed {args:?} ran past {COMMAND_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: reader.join().unwrap_or_default(),
        stderr: ereader.join().unwrap_or_default(),
    }
}

/// `imgfeed run` of the eval pipeline, as the tests compare it.
pub const EVAL: &[&str] = &[
    "run",
    "pipelines/resnet50_eval.toml",
    "--batch-size",
    "4",
    "--workers",
    "2",
];
/// `imgfeed run` of the training pipeline, two epochs.
pub const TRAIN: &[&str] = &[
    "run",
    "pipelines/resnet50_train.toml",
    "--batch-size",
    "4",
    "--workers",
    "2",
    "--epochs",
    "2",
];

/// `imgfeed convert` of the fixtures to shards of `shard_size`; `--out` and the rest follow.
pub fn convert_fixtures(shard_size: &str) -> Vec<&str> {
    vec![
        "convert",
        "pipelines/convert_jpeg256.toml",
        "--data",
        "fixtures/imagefolder",
        "--format",
        "shards",
        "--shard-size",
        shard_size,
    ]
}

/// The fixtures converted to shards of 30 kB in `ds/` of a new temporary folder.
pub fn local_shards() -> tempfile::TempDir {
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().join("ds");
    let mut args = convert_fixtures("30kB");
    args.extend(["--out", dir.to_str().expect("utf-8")]);
    let o = imgfeed_with_env(&args, &[]);
    assert!(o.status.success(), "convert: {}", text(&o.stderr));
    out
}

/// One HTTP/1.1 request; returns the status and the body (Content-Length or chunked).
pub fn request(
    port: u16,
    method: &str,
    target: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut head = format!(
        "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\n\
         Connection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).expect("writes");
    s.write_all(body).expect("writes");
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let at = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(resp.len(), |p| p + 4);
    let head = String::from_utf8_lossy(&resp[..at]).to_ascii_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let mut body = resp[at..].to_vec();
    if head.contains("transfer-encoding: chunked") {
        let (mut out, mut rest) = (Vec::new(), &body[..]);
        while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
            let n = usize::from_str_radix(String::from_utf8_lossy(&rest[..eol]).trim(), 16)
                .unwrap_or(0);
            if n == 0 || rest.len() < eol + 2 + n {
                break;
            }
            out.extend_from_slice(&rest[eol + 2..eol + 2 + n]);
            rest = &rest[(eol + 4 + n).min(rest.len())..];
        }
        body = out;
    }
    (status, body)
}
