//! The documentation's snippets are tested (issue 34): every ```` ```sh ```` and
//! ```` ```python ```` block of README.md and docs/*.md carries a marker on the line before
//! it — `<!-- docs: run -->` or `<!-- docs: skip: WHY -->` — and
//!
//! * every shell block marked `run` runs here, with this build's `imgfeed` on the `PATH`
//!   (`cargo run --release --` and `target/release/imgfeed` stand for it), in a scratch
//!   folder that sees the repository's `pipelines/`, `fixtures/`, `examples/` and `benches/`,
//!   and must exit 0;
//! * every `imgfeed SUBCOMMAND ...` line of every shell block, run or not, uses only flags
//!   that subcommand takes (its `--help`), so a renamed flag breaks the build, not the reader;
//! * the Python blocks marked `run` run in python/tests/test_docs.py (the wheel's
//!   environment).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Clone, PartialEq)]
enum Marker {
    Run,
    Skip(String),
}

#[derive(Debug)]
struct Block {
    file: PathBuf,
    /// The line of the opening fence, from 1.
    line: usize,
    lang: String,
    text: String,
    marker: Option<Marker>,
}

fn marker(line: &str) -> Option<Marker> {
    let inner = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim()
        .strip_prefix("docs:")?
        .trim();
    if inner == "run" {
        return Some(Marker::Run);
    }
    let why = inner.strip_prefix("skip:")?.trim();
    Some(Marker::Skip(why.to_string()))
}

fn blocks(file: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(lang) = lines[i].trim_start().strip_prefix("```") else {
            i += 1;
            continue;
        };
        let start = i;
        let mut body = String::new();
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            body.push_str(lines[i]);
            body.push('\n');
            i += 1;
        }
        let before = lines[..start]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| marker(l));
        out.push(Block {
            file: file.to_path_buf(),
            line: start + 1,
            lang: lang.trim().to_string(),
            text: body,
            marker: before,
        });
        i += 1;
    }
    out
}

/// README.md and every Markdown file under docs/.
fn documents() -> Vec<PathBuf> {
    let repo = common::repo();
    let mut files = vec![repo.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

fn is_shell(lang: &str) -> bool {
    matches!(lang, "sh" | "bash" | "shell" | "console")
}

fn all_blocks() -> Vec<Block> {
    documents().iter().flat_map(|f| blocks(f)).collect()
}

#[test]
fn every_shell_and_python_snippet_is_run_or_says_why_not() {
    let mut unmarked = Vec::new();
    for b in all_blocks() {
        if !(is_shell(&b.lang) || b.lang == "python") {
            continue;
        }
        match &b.marker {
            None => unmarked.push(format!("{}:{} ({})", b.file.display(), b.line, b.lang)),
            Some(Marker::Skip(why)) if why.len() < 10 => unmarked.push(format!(
                "{}:{}: skipped without a reason ({why:?})",
                b.file.display(),
                b.line
            )),
            _ => {}
        }
    }
    assert!(
        unmarked.is_empty(),
        "snippets without <!-- docs: run --> or <!-- docs: skip: WHY --> before them:\n{}",
        unmarked.join("\n")
    );
}

/// `cargo run --release --`, `cargo run --` and `target/release/imgfeed` as `imgfeed`.
fn as_imgfeed(line: &str) -> String {
    line.replace("cargo run --release -- ", "imgfeed ")
        .replace("cargo run -- ", "imgfeed ")
        .replace("target/release/imgfeed ", "imgfeed ")
}

/// Each subcommand's long flags, from its `--help`.
fn flags_of(sub: &str) -> BTreeSet<String> {
    let o = common::imgfeed(&[sub, "--help"]);
    assert!(o.status.success(), "imgfeed {sub} --help");
    let help = String::from_utf8_lossy(&o.stdout);
    help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_string)
        .collect()
}

#[test]
fn every_imgfeed_command_line_in_the_docs_uses_flags_its_command_takes() {
    let subs = common::subcommands();
    let known: BTreeMap<&str, BTreeSet<String>> =
        subs.iter().map(|s| (s.as_str(), flags_of(s))).collect();
    // what `convert --format shards` refuses although `convert` takes it
    let not_for_shards = [
        "--seed",
        "--shuffle",
        "--no-shuffle",
        "--num-shards",
        "--shard-id",
        "--uneven",
        "--start-epoch",
        "--start-batch",
        "--start-sample",
    ];
    let mut wrong = Vec::new();
    let mut seen = 0;
    for b in all_blocks().iter().filter(|b| is_shell(&b.lang)) {
        // a line continued with `\` is one command
        let joined = b.text.replace("\\\n", " ");
        for (k, line) in joined.lines().enumerate() {
            let line = as_imgfeed(line.split(" #").next().unwrap_or(line));
            let words: Vec<&str> = line.split_whitespace().collect();
            let Some(at) = words.iter().position(|w| *w == "imgfeed") else {
                continue;
            };
            let Some(sub) = words.get(at + 1) else {
                continue;
            };
            let Some(flags) = known.get(sub) else {
                if sub.starts_with('-') {
                    continue; // imgfeed --version
                }
                wrong.push(format!(
                    "{}:{}: no subcommand {sub}",
                    b.file.display(),
                    b.line
                ));
                continue;
            };
            seen += 1;
            let shards = line.contains("--format shards");
            for w in &words[at + 2..] {
                let w = w.trim_matches(|c| c == '[' || c == ']' || c == '|');
                if !w.starts_with("--") {
                    continue;
                }
                let flag = w.split('=').next().unwrap_or(w);
                let refused = shards && sub == &"convert" && not_for_shards.contains(&flag);
                if !flags.contains(flag) || refused {
                    wrong.push(format!(
                        "{}:{} (+{k}): `imgfeed {sub}` does not take {flag}: {}",
                        b.file.display(),
                        b.line,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(seen > 10, "only {seen} imgfeed command lines found");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_shell_snippets_marked_run_run() {
    let repo = common::repo();
    let bin = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_imgfeed"), bin.path().join("imgfeed"))
        .expect("symlink");
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for b in all_blocks() {
        if !is_shell(&b.lang) || b.marker != Some(Marker::Run) {
            continue;
        }
        // a scratch folder of its own that sees the repository's inputs
        let work = tempfile::tempdir().expect("tempdir");
        for d in ["pipelines", "fixtures", "examples", "benches", "python"] {
            std::os::unix::fs::symlink(repo.join(d), work.path().join(d)).expect("symlink");
        }
        let script: String = b.text.lines().map(|l| as_imgfeed(l) + "\n").collect();
        let o = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .current_dir(work.path())
            .env("PATH", &path)
            .output()
            .expect("bash");
        assert!(
            o.status.success(),
            "{}:{}: the snippet exited {:?}\n{script}\nstdout:\n{}\nstderr:\n{}",
            b.file.display(),
            b.line,
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        ran += 1;
    }
    assert!(ran >= 3, "only {ran} shell snippets ran");
}

#[test]
fn the_pipeline_tables_in_the_docs_parse() {
    let mut checked = 0;
    for b in all_blocks() {
        if b.lang != "toml" || !b.text.contains("[source]") || !b.text.contains("[[ops]]") {
            continue;
        }
        // as a file of pipelines/ (its relative root is the fixtures')
        let file = common::repo().join("pipelines").join("docs-snippet.toml");
        // every table and key known (an annotated excerpt: its ops need not make batches)
        imgfeed::PipelineConfig::parse(&b.text, &file)
            .unwrap_or_else(|e| panic!("{}:{}: {e}", b.file.display(), b.line));
        checked += 1;
    }
    assert!(checked >= 1, "no pipeline table in the docs");
}
