//! The binary on bad data: `imgfeed validate` (the dataset doctor) on folders and CIFAR
//! files, `--report` on run / convert / validate, bombs refused within a small peak RSS,
//! and Ctrl-C stopping every long command promptly (convert leaving no complete-looking
//! file).

mod common;

use common::{code, copy_into, fixtures, imgfeed, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every bad fixture and its kind (as `tests/corpus.rs` checks it on the decoder).
const BAD: &[(&str, &str)] = &[
    ("bomb.jpg", "too_many_pixels"),
    ("bomb.png", "too_many_pixels"),
    ("corrupt_entropy.jpg", "corrupt"),
    ("empty.jpg", "empty"),
    ("garbage.jpg", "unknown_format"),
    ("header_only.jpg", "truncated"),
    ("png_bad_crc.png", "corrupt"),
    ("png_cut_zlib.png", "truncated"),
    ("png_missing_rows.png", "truncated"),
    ("text.jpg", "unknown_format"),
    ("text.png", "unknown_format"),
    ("truncated.jpg", "truncated"),
    ("truncated.png", "truncated"),
    ("zlib_bomb.png", "too_many_pixels"),
];

fn edge_files() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(fixtures().join("edge"))
        .expect("edge")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jpg") || n.ends_with(".png"))
        .collect();
    v.sort();
    v
}

/// `root/bad/*` (every bad fixture), `root/edge/*` (every edge case), a hidden file and a
/// text file.
fn mixed_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, _) in BAD {
        copy_into(
            dir.path(),
            &format!("bad/{name}"),
            &fixtures().join("bad").join(name),
        );
    }
    for name in edge_files() {
        copy_into(
            dir.path(),
            &format!("edge/{name}"),
            &fixtures().join("edge").join(&name),
        );
    }
    let one = fixtures().join("edge/one_pixel.jpg");
    copy_into(dir.path(), "edge/.hidden.jpg", &one);
    std::fs::write(dir.path().join("edge/notes.txt"), "not an image").expect("write");
    dir
}

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn report_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("report file")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn want_bad(prefix: &str) -> Vec<(String, String)> {
    BAD.iter()
        .map(|(n, k)| (format!("{prefix}{n}"), k.to_string()))
        .collect()
}

fn path_kind(v: &Value) -> (String, String) {
    (
        v["path"].as_str().expect("path").to_string(),
        v["kind"].as_str().expect("kind").to_string(),
    )
}

#[test]
fn validate_lists_every_bad_file_with_its_kind_and_exits_1() {
    let dir = mixed_tree();
    let report = dir.path().join("report.jsonl");
    let root = dir.path().to_str().expect("utf-8");
    let o = imgfeed(&[
        "validate",
        root,
        "--json",
        "--workers",
        "2",
        "--report",
        report.to_str().expect("utf-8"),
    ]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 1, "stdout {out} stderr {err}");
    let v = json(&out);
    let edge = edge_files();
    assert_eq!(v["samples"], BAD.len() + edge.len());
    assert_eq!(v["checked"], BAD.len() + edge.len());
    assert_eq!(
        (v["bad"].as_u64(), v["ok"].as_u64()),
        (Some(14), Some(edge.len() as u64))
    );
    let listed: Vec<(String, String)> = v["bad_samples"]
        .as_array()
        .expect("array")
        .iter()
        .map(path_kind)
        .collect();
    assert_eq!(listed, want_bad("bad/"));
    for b in v["bad_samples"].as_array().expect("array") {
        assert_eq!(b["stage"], "decode");
        assert!(!b["reason"].as_str().expect("reason").is_empty());
    }
    // the same list, as JSON lines
    let lines: Vec<(String, String)> = report_lines(&report).iter().map(path_kind).collect();
    assert_eq!(lines, want_bad("bad/"));
    // grouped by kind: counted from the table
    let mut by_kind = std::collections::BTreeMap::<&str, u64>::new();
    for (_, k) in BAD {
        *by_kind.entry(k).or_default() += 1;
    }
    for (k, n) in &by_kind {
        assert_eq!(v["bad_by_kind"][k], *n, "{k}");
    }
    // classes: bad (label 0) and edge (label 1)
    let classes = v["classes"].as_array().expect("classes");
    assert_eq!(classes.len(), 2);
    assert_eq!(
        (
            &classes[0]["name"],
            &classes[0]["samples"],
            &classes[0]["bad"]
        ),
        (&Value::from("bad"), &Value::from(14), &Value::from(14))
    );
    assert_eq!(
        (
            &classes[1]["name"],
            &classes[1]["samples"],
            &classes[1]["bad"]
        ),
        (
            &Value::from("edge"),
            &Value::from(edge.len()),
            &Value::from(0)
        )
    );
    // ignored while listing, and why
    let ignored: Vec<(String, String)> = v["ignored"]
        .as_array()
        .expect("ignored")
        .iter()
        .map(|i| {
            (
                i["path"].as_str().expect("p").to_string(),
                i["reason"].as_str().expect("r").to_string(),
            )
        })
        .collect();
    assert_eq!(
        ignored,
        vec![
            ("edge/.hidden.jpg".to_string(), "hidden".to_string()),
            ("edge/notes.txt".to_string(), "extension".to_string()),
        ]
    );
    // formats by magic: every file whose signature (and header) is readable
    let magic = |prefix: &[u8]| {
        BAD.iter()
            .map(|(n, _)| fixtures().join("bad").join(n))
            .chain(edge.iter().map(|n| fixtures().join("edge").join(n)))
            .filter(|p| std::fs::read(p).expect("read").starts_with(prefix))
            .count()
    };
    assert_eq!(v["formats"]["jpeg"], magic(&[0xFF, 0xD8, 0xFF]));
    assert_eq!(v["formats"]["png"], magic(b"\x89PNG\r\n\x1a\n"));
}

#[test]
fn validate_summarises_sizes_and_colour_models() {
    // Only the edge cases: every number here comes from expected.json or the file list.
    let dir = tempfile::tempdir().expect("tempdir");
    for name in edge_files() {
        copy_into(
            dir.path(),
            &format!("e/{name}"),
            &fixtures().join("edge").join(&name),
        );
    }
    let o = imgfeed(&["validate", dir.path().to_str().expect("utf-8"), "--json"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "stderr {err}");
    let v = json(&out);
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("edge/expected.json")).expect("json"),
    )
    .expect("parse");
    let spread = |key: &str| {
        let mut d: Vec<u64> = expected
            .as_object()
            .expect("object")
            .values()
            .map(|e| e[key].as_u64().expect("dim"))
            .collect();
        d.sort();
        (d[0], d[(d.len() - 1) / 2], d[d.len() - 1])
    };
    for key in ["width", "height"] {
        let (min, median, max) = spread(key);
        assert_eq!(
            (&v[key]["min"], &v[key]["median"], &v[key]["max"]),
            (&Value::from(min), &Value::from(median), &Value::from(max)),
            "{key}"
        );
    }
    let c = &v["colors"];
    // gray.jpg + gray_alpha.png; cmyk.jpg; palette_trns.png + gray_alpha.png; rgb16.png
    assert_eq!(
        [
            &c["gray"],
            &c["cmyk"],
            &c["alpha"],
            &c["palette"],
            &c["sixteen_bit"],
            &c["progressive"]
        ],
        [2, 1, 2, 1, 1, 1].map(Value::from).each_ref()
    );
    let names = edge_files();
    let jpegs = names.iter().filter(|n| n.ends_with(".jpg")).count();
    assert_eq!(v["formats"]["jpeg"], jpegs);
    assert_eq!(v["formats"]["png"], names.len() - jpegs);
    // text output: the same facts for people
    let o = imgfeed(&["validate", dir.path().to_str().expect("utf-8")]);
    let (out, _) = text(&o);
    assert!(
        out.contains(&format!("checked {n} of {n} samples", n = names.len())),
        "{out}"
    );
    assert!(out.contains("cmyk 1") && out.contains("16-bit 1"), "{out}");
}

#[test]
fn validate_checks_cifar_labels_and_counts_classes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = fixtures().join("cifar10/test_batch.bin");
    let mut bytes = std::fs::read(&src).expect("read");
    bytes[3073] = 200; // label of record 1
    std::fs::write(dir.path().join("test_batch.bin"), &bytes).expect("write");
    let o = imgfeed(&["validate", dir.path().to_str().expect("utf-8"), "--json"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 1, "stderr {err}");
    let v = json(&out);
    let records = bytes.len() / 3073;
    assert_eq!(v["samples"], records);
    let bad = v["bad_samples"].as_array().expect("bad");
    assert_eq!(bad.len(), 1);
    assert_eq!(
        (&bad[0]["path"], &bad[0]["stage"], &bad[0]["kind"]),
        (
            &Value::from("test_batch.bin:1"),
            &Value::from("read"),
            &Value::from("bad_label")
        )
    );
    // classes: the label bytes of the good records
    let mut want = std::collections::BTreeMap::<u64, u64>::new();
    for r in (0..records).filter(|&r| r != 1) {
        *want.entry(bytes[r * 3073] as u64).or_default() += 1;
    }
    let got: std::collections::BTreeMap<u64, u64> = v["classes"]
        .as_array()
        .expect("classes")
        .iter()
        .map(|c| {
            (
                c["label"].as_u64().expect("l"),
                c["samples"].as_u64().expect("n"),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(v["formats"]["cifar_record"], records - 1);
}

fn write_pipeline(dir: &Path, root: &Path, extra_engine: &str) -> PathBuf {
    let p = dir.join("p.toml");
    std::fs::write(
        &p,
        format!(
            "[source]\nkind = \"image_folder\"\nroot = {:?}\n\n[[ops]]\nop = \"decode\"\n\n\
             [[ops]]\nop = \"resize\"\nsize = [8, 8]\n\n[batch]\nsize = 4\n\n[engine]\n\
             workers = 2\n{extra_engine}\n",
            root.to_str().expect("utf-8")
        ),
    )
    .expect("write pipeline");
    p
}

#[test]
fn run_and_convert_report_every_skipped_sample() {
    let data = mixed_tree();
    let work = tempfile::tempdir().expect("tempdir");
    let p = write_pipeline(work.path(), data.path(), "on_error = \"skip\"");
    let p = p.to_str().expect("utf-8");
    let report = work.path().join("run.jsonl");
    let o = imgfeed(&["run", p, "--report", report.to_str().expect("utf-8")]);
    let (out, err) = text(&o);
    assert_eq!(
        code(&o),
        1,
        "skipped samples exit 1: stdout {out} stderr {err}"
    );
    let lines: Vec<(String, String)> = report_lines(&report).iter().map(path_kind).collect();
    assert_eq!(lines, want_bad("bad/"));
    // and at the end of the run, every one on stderr
    for (name, kind) in BAD {
        assert!(
            err.contains(&format!("skipped: bad/{name}: decode: ")) && err.contains(kind),
            "{name}: {err}"
        );
    }
    let out_dir = work.path().join("npy");
    let report = work.path().join("convert.jsonl");
    let o = imgfeed(&[
        "convert",
        p,
        "--out",
        out_dir.to_str().expect("utf-8"),
        "--report",
        report.to_str().expect("utf-8"),
    ]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 1, "stdout {out} stderr {err}");
    let lines: Vec<(String, String)> = report_lines(&report).iter().map(path_kind).collect();
    assert_eq!(lines, want_bad("bad/"));
    let mut files: Vec<String> = std::fs::read_dir(&out_dir)
        .expect("out")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["classes.json", "images.npy", "labels.npy", "samples.txt"]
    );
    let names = std::fs::read_to_string(out_dir.join("samples.txt")).expect("samples");
    let want: Vec<String> = edge_files().iter().map(|n| format!("edge/{n}")).collect();
    assert_eq!(names.lines().collect::<Vec<_>>(), want);
}

/// Peak RSS (bytes) and exit code of a child, from wait4.
#[allow(clippy::zombie_processes)] // reaped by wait4 below, which also gives its rusage
fn run_measured(args: &[&str]) -> (u64, i32, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_imgfeed"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut out = String::new();
    if let Some(mut s) = child.stdout {
        use std::io::Read;
        s.read_to_string(&mut out).expect("stdout");
    }
    let mut status = 0;
    // SAFETY: plain syscall on our own child; the structs are plain data.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid, "wait4");
    assert!(libc::WIFEXITED(status), "killed by a signal: {status}");
    (ru.ru_maxrss as u64 * 1024, libc::WEXITSTATUS(status), out)
}

#[test]
fn bombs_are_refused_within_a_small_peak_rss() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["bomb.jpg", "zlib_bomb.png", "bomb.png"] {
        copy_into(
            dir.path(),
            &format!("b/{name}"),
            &fixtures().join("bad").join(name),
        );
    }
    // The decoded sizes they claim: 12.7 GB, 256 MB grey (768 MB as RGB), 10.8 GB.
    let (rss, code, out) = run_measured(&[
        "validate",
        dir.path().to_str().expect("utf-8"),
        "--json",
        "--workers",
        "2",
    ]);
    assert_eq!(code, 1, "{out}");
    let v = json(&out);
    assert_eq!(v["bad_by_kind"]["too_many_pixels"], 3, "{out}");
    assert!(rss < 100 << 20, "peak RSS {} MB", rss >> 20);
    assert!(rss > 1 << 20, "implausible RSS {rss}"); // the measurement works
}

// ---- Ctrl-C -----------------------------------------------------------------------------

/// A folder of `n` hard links to one 500x375 JPEG (no disk cost, real decode work).
fn many_images(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let class = dir.path().join("a");
    std::fs::create_dir_all(&class).expect("mkdir");
    let src = fixtures().join("parity/images/jpeg/kodim05_500x375.jpg");
    let first = class.join("img_00000.jpg");
    std::fs::copy(&src, &first).expect("copy");
    for i in 1..n {
        std::fs::hard_link(&first, class.join(format!("img_{i:05}.jpg"))).expect("link");
    }
    dir
}

/// Spawn imgfeed, wait until `ready()` (or `after`), send SIGINT, and return (exit code,
/// seconds from the signal to the exit, stdout, stderr).
fn interrupt(args: &[&str], ready: impl Fn() -> bool) -> (i32, f64, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_imgfeed"))
        .args(args)
        .current_dir(common::repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let t0 = Instant::now();
    while !ready() {
        assert!(t0.elapsed() < Duration::from_secs(60), "never became ready");
        assert!(
            child.try_wait().expect("poll").is_none(),
            "exited before the signal"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: a signal to our own child.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let sent = Instant::now();
    let o = child.wait_with_output().expect("wait");
    let secs = sent.elapsed().as_secs_f64();
    let (out, err) = text(&o);
    (code(&o), secs, out, err)
}

fn after(d: Duration) -> impl Fn() -> bool {
    let t = Instant::now();
    move || t.elapsed() >= d
}

const SAMPLES: usize = 3000;

#[test]
fn ctrl_c_stops_convert_promptly_and_leaves_no_complete_looking_file() {
    let data = many_images(SAMPLES);
    let work = tempfile::tempdir().expect("tempdir");
    let out_dir = work.path().join("npy");
    let partial = out_dir.join("images.npy.partial");
    let (code, secs, out, err) = interrupt(
        &[
            "convert",
            "pipelines/resnet50_eval.toml",
            "--data",
            data.path().to_str().expect("utf-8"),
            "--out",
            out_dir.to_str().expect("utf-8"),
            "--batch-size",
            "4",
            "--workers",
            "2",
        ],
        // the first batch is in the partial file
        || std::fs::metadata(&partial).is_ok_and(|m| m.len() > 128),
    );
    assert_eq!(code, 130, "stdout {out} stderr {err}");
    assert!(secs < 5.0, "took {secs:.1} s to stop");
    assert!(err.contains("interrupted after"), "{err}");
    let left: Vec<String> = std::fs::read_dir(&out_dir)
        .expect("out dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn ctrl_c_stops_run_bench_and_validate_promptly() {
    let data = many_images(SAMPLES);
    let root = data.path().to_str().expect("utf-8");
    // Many epochs: a fast release build must not finish before the signal.
    let engine_args = [
        "--data",
        root,
        "--batch-size",
        "4",
        "--workers",
        "2",
        "--epochs",
        "1000",
    ];
    for cmd in ["run", "bench"] {
        let mut args = vec![cmd, "pipelines/resnet50_eval.toml"];
        args.extend(engine_args);
        let (code, secs, out, err) = interrupt(&args, after(Duration::from_millis(1500)));
        assert_eq!(code, 130, "{cmd}: stdout {out} stderr {err}");
        assert!(secs < 5.0, "{cmd}: took {secs:.1} s to stop");
        assert!(err.contains("interrupted"), "{cmd}: {err}");
        if cmd == "bench" {
            // what was measured is printed, marked as partial (issue 25, item 6)
            assert!(err.contains("partial"), "{err}");
            assert!(out.contains("PARTIAL"), "{out}");
            assert!(out.contains("images/s"), "{out}");
        }
    }
    // validate reads each sample once: a larger tree (hard links cost nothing), so that a
    // release build (~2500 JPEGs/s on 2 cores) is still at work after 1.5 s
    const MANY: usize = 20_000;
    let many = many_images(MANY);
    let root = many.path().to_str().expect("utf-8");
    let (code, secs, out, err) = interrupt(
        &["validate", root, "--json", "--workers", "2"],
        after(Duration::from_millis(1500)),
    );
    assert_eq!(code, 130, "validate: stdout {out} stderr {err}");
    assert!(secs < 5.0, "validate: took {secs:.1} s to stop");
    let v = json(&out);
    assert_eq!(v["interrupted"], true);
    let checked = v["checked"].as_u64().expect("checked");
    assert!(checked > 0 && checked < MANY as u64, "checked {checked}");
    assert_eq!(v["ok"], checked);
}

#[test]
fn validate_uses_the_pipelines_source_and_decode_settings() {
    let work = tempfile::tempdir().expect("tempdir");
    let p = work.path().join("small.toml");
    let root = fixtures().join("imagefolder");
    std::fs::write(
        &p,
        format!(
            "[source]\nkind = \"image_folder\"\nroot = {:?}\nextensions = [\"png\"]\n\n\
             [[ops]]\nop = \"decode\"\nmax_pixels = 100\n\n[batch]\nsize = 1\n",
            root.to_str().expect("utf-8")
        ),
    )
    .expect("write");
    let o = imgfeed(&["validate", p.to_str().expect("utf-8"), "--json"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 1, "stderr {err}");
    let v = json(&out);
    // extensions = ["png"]: the 3 PNGs are the samples, the 9 JPEGs are ignored
    assert_eq!(v["samples"], 3);
    assert_eq!(v["bad_by_kind"]["too_many_pixels"], 3);
    assert_eq!(v["ignored_by_reason"]["extension"], 10); // 9 JPEGs + notes.txt
    if !cfg!(feature = "turbojpeg") {
        let t = work.path().join("turbo.toml");
        std::fs::write(
            &t,
            format!(
                "[source]\nkind = \"image_folder\"\nroot = {:?}\n\n[[ops]]\nop = \"decode\"\n\
                 decoder = \"turbo\"\n\n[batch]\nsize = 1\n",
                root.to_str().expect("utf-8")
            ),
        )
        .expect("write");
        let o = imgfeed(&["validate", t.to_str().expect("utf-8")]);
        let (_, err) = text(&o);
        assert_eq!(code(&o), 2, "{err}");
        assert!(err.contains("turbojpeg"), "{err}");
    }
}
