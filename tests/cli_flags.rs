//! Each command takes exactly the flags it uses (issue 16): every flag docs/commands.md lists
//! for a command is accepted by it, and refused by the others with exit 2 and a message
//! naming the flag (and, where a flag depends on `convert --format`, why).

mod common;

use common::*;

const EVAL: &str = "pipelines/resnet50_eval.toml";

/// Every flag of every command, with a value where it takes one.
const FLAGS: &[(&str, Option<&str>)] = &[
    ("--data", Some("fixtures/imagefolder")),
    ("--usage", Some("train")),
    ("--workers", Some("1")),
    ("--batch-size", Some("4")),
    ("--work-unit", Some("1")),
    ("--seed", Some("1")),
    ("--shuffle", None),
    ("--no-shuffle", None),
    ("--num-shards", Some("1")),
    ("--shard-id", Some("0")),
    ("--uneven", Some("pad")),
    ("--shuffle-window", Some("2")),
    ("--on-error", Some("skip")),
    ("--start-epoch", Some("0")),
    ("--start-batch", Some("0")),
    ("--start-sample", Some("0")),
    ("--start-position", Some("0")),
    ("--start-world", Some("1")),
    ("--epochs", Some("1")),
    ("--max-batches", Some("1")),
    ("--report", Some("/dev/null")),
    ("--json", None),
    ("--no-profile", None),
    ("--slice", Some("0/2")),
    ("--store", Some("raw")),
    ("--shard-size", Some("1GB")),
    ("--sweep-workers", Some("1,2")),
    ("--plot", Some("x.svg")),
    ("--step-ms", Some("1")),
    ("--print-config", None),
    ("--epoch", Some("0")),
    ("--count", Some("2")),
    ("--with-source", None),
    ("--tile", Some("32")),
    ("--html", Some("x.html")),
    ("--against", Some("fixtures/imagefolder")),
    ("--fetch", Some("ranges")),
];

const INPUT: &[&str] = &[
    "--data",
    "--usage",
    "--workers",
    "--batch-size",
    "--work-unit",
    "--fetch",
];
const SAMPLING: &[&str] = &[
    "--seed",
    "--shuffle",
    "--no-shuffle",
    "--num-shards",
    "--shard-id",
    "--uneven",
    "--shuffle-window",
];
const RESUME: &[&str] = &[
    "--start-epoch",
    "--start-batch",
    "--start-sample",
    "--start-position",
    "--start-world",
];

/// The flags docs/commands.md gives each command (`convert` split by its format).
fn accepted(cmd: &str) -> Vec<&'static str> {
    let mut v: Vec<&str> = Vec::new();
    match cmd {
        "check" => {
            v.extend(INPUT);
            v.extend(SAMPLING);
            v.extend(["--on-error", "--print-config"]);
        }
        "run" | "bench" => {
            v.extend(INPUT);
            v.extend(SAMPLING);
            v.extend(RESUME);
            v.extend(["--on-error", "--epochs", "--report"]);
            if cmd == "run" {
                v.push("--max-batches");
            } else {
                v.extend([
                    "--json",
                    "--no-profile",
                    "--sweep-workers",
                    "--plot",
                    "--step-ms",
                    "--html",
                ]);
            }
        }
        "npy" => {
            v.extend(INPUT);
            v.extend(SAMPLING);
            v.extend(RESUME);
            v.extend(["--report", "--slice"]);
        }
        "shards" => {
            v.extend(INPUT);
            v.extend(["--report", "--slice", "--store", "--shard-size"]);
        }
        "validate" => v.extend([
            "--data",
            "--workers",
            "--usage",
            "--json",
            "--report",
            "--html",
            "--against",
        ]),
        "preview" => {
            v.extend(INPUT);
            v.extend(SAMPLING);
            v.extend(RESUME);
            v.extend([
                "--on-error",
                "--epoch",
                "--count",
                "--with-source",
                "--tile",
            ]);
        }
        _ => {}
    }
    v
}

/// The command line of `cmd` with one `flag`.
fn line(cmd: &str, out: &str, flag: &str, value: Option<&str>) -> Vec<String> {
    let mut a: Vec<String> = match cmd {
        "npy" | "shards" => ["convert", EVAL, "--out", out, "--format", cmd]
            .map(String::from)
            .to_vec(),
        "merge-index" => vec!["merge-index".into(), out.into()],
        "preview" => ["preview", EVAL, "--out", "x.png"]
            .map(String::from)
            .to_vec(),
        c => vec![c.into(), EVAL.into()],
    };
    a.push(flag.into());
    a.extend(value.map(String::from));
    a
}

#[test]
fn every_command_refuses_the_flags_it_does_not_take_and_says_which() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let out = out.to_str().expect("utf-8");
    for cmd in [
        "check",
        "run",
        "bench",
        "npy",
        "shards",
        "validate",
        "merge-index",
        "preview",
    ] {
        let takes = accepted(cmd);
        for &(flag, value) in FLAGS {
            if takes.contains(&flag) {
                continue;
            }
            let args = line(cmd, out, flag, value);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = imgfeed(&args);
            let (_, err) = text(&o);
            assert_eq!(code(&o), 2, "{args:?} should be refused: {err}");
            assert!(
                err.contains(flag),
                "{args:?}: the message names {flag}: {err}"
            );
            let named = match cmd {
                "npy" => err.contains("imgfeed convert") || err.contains("--format npy"),
                "shards" => err.contains("imgfeed convert") || err.contains("--format shards"),
                c => err.contains(&format!("imgfeed {c}")),
            };
            assert!(named, "{args:?}: the message names the command: {err}");
        }
    }
}

#[test]
fn every_command_accepts_the_flags_the_readme_gives_it() {
    // the flags table is in docs/commands.md (the README is the front door)
    let readme = std::fs::read_to_string(repo().join("docs/commands.md")).expect("commands");
    for (cmd, sub) in [
        ("check", "check"),
        ("run", "run"),
        ("bench", "bench"),
        ("npy", "convert"),
        ("shards", "convert"),
        ("validate", "validate"),
        ("preview", "preview"),
    ] {
        let o = imgfeed(&[sub, "--help"]);
        let (help, _) = text(&o);
        for flag in accepted(cmd) {
            assert!(help.contains(flag), "`{sub} --help` lacks {flag}");
            assert!(readme.contains(flag), "docs/commands.md lacks {flag}");
        }
    }
    // accepted for real: a run with every run flag at a harmless value
    let o = imgfeed(&[
        "run",
        EVAL,
        "--batch-size",
        "4",
        "--workers",
        "1",
        "--work-unit",
        "1",
        "--seed",
        "1",
        "--no-shuffle",
        "--num-shards",
        "1",
        "--shard-id",
        "0",
        "--uneven",
        "pad",
        "--on-error",
        "error",
        "--start-epoch",
        "0",
        "--start-batch",
        "0",
        "--epochs",
        "1",
        "--max-batches",
        "1",
        "--fetch",
        "auto",
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o).1);
    // and a shards conversion with its own
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().to_str().expect("utf-8");
    let o = imgfeed(&[
        "convert",
        "pipelines/convert_raw256.toml",
        "--data",
        "fixtures/imagefolder",
        "--format",
        "shards",
        "--out",
        out,
        "--slice",
        "0/2",
        "--store",
        "raw",
        "--shard-size",
        "1MB",
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o).1);
    assert!(text(&o).0.contains("slice 0 of 2"), "{}", text(&o).0);
}

#[test]
fn help_states_the_defaults_and_the_exit_codes() {
    for sub in [
        "check",
        "run",
        "convert",
        "bench",
        "validate",
        "merge-index",
        "preview",
    ] {
        let (help, _) = text(&imgfeed(&[sub, "--help"]));
        assert!(help.contains("Exit codes"), "{sub}");
    }
    let (help, _) = text(&imgfeed(&["run", "--help"]));
    for default in [
        "default pad",
        "default error",
        "default 0",
        "default: one per core",
    ] {
        assert!(help.contains(default), "run --help lacks {default:?}");
    }
    let (help, _) = text(&imgfeed(&["convert", "--help"]));
    assert!(
        help.contains("always skipped"),
        "convert --help states its error policy"
    );
}
