//! The rooms of `ARCHITECTURE.md` hold: every `crate::` path in a file under `src/` names a
//! room that its room's "what it may see" column names, and every room a column names is
//! drawn below it in the table (the house has floors, no circles). A new module without a
//! row, or a new import that the table does not allow, fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod common;

/// A table row: the room, the rooms it may see (`None`: the whole library).
struct Row {
    room: String,
    may_see: Option<BTreeSet<String>>,
}

fn backticked(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// The room a `src/...` path of the table's first column is (`src/cli/`, `src/plan.rs`).
fn room_of_path(path: &str) -> Option<String> {
    let rest = path.strip_prefix("src/")?;
    let name = rest
        .strip_suffix('/')
        .or_else(|| rest.strip_suffix(".rs"))?;
    (!name.contains('/')).then(|| name.to_string())
}

/// The modules `src/lib.rs` declares, and what its `pub use` lines re-export at the root
/// (`crate::Error` is the `error` room's).
fn crate_modules(lib: &str) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let mut modules = BTreeSet::new();
    let mut reexports = BTreeMap::new();
    let mut in_use: Option<String> = None;
    for line in lib.lines() {
        let t = line.trim();
        if let Some(m) = t
            .strip_prefix("pub mod ")
            .or_else(|| t.strip_prefix("mod "))
            .and_then(|m| m.strip_suffix(';'))
        {
            modules.insert(m.to_string());
            continue;
        }
        let text = match (&in_use, t.strip_prefix("pub use ")) {
            (None, Some(rest)) => {
                let module = rest.split("::").next().unwrap_or("").to_string();
                in_use = Some(module);
                rest.split_once("::").map_or("", |(_, r)| r)
            }
            (Some(_), _) => t,
            (None, None) => continue,
        };
        if let Some(module) = &in_use {
            for name in text
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with(|c: char| c.is_ascii_uppercase()))
            {
                reexports.insert(name.to_string(), module.clone());
            }
        }
        if t.ends_with(';') {
            in_use = None;
        }
    }
    (modules, reexports)
}

/// The table of `ARCHITECTURE.md`'s "The rooms", in its order (top floor first).
fn rows(text: &str, modules: &BTreeSet<String>) -> Vec<Row> {
    let section = text
        .split("## The rooms")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("ARCHITECTURE.md has a section \"The rooms\"");
    let mut out = Vec::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
        assert_eq!(cells.len(), 3, "a room row has three cells: {line}");
        let see = cells[2];
        let may_see = if see.contains("the library") {
            None
        } else {
            Some(
                backticked(see)
                    .into_iter()
                    .filter(|w| modules.contains(*w))
                    .map(str::to_string)
                    .collect(),
            )
        };
        for path in backticked(cells[0]) {
            if let Some(room) = room_of_path(path) {
                out.push(Row {
                    room,
                    may_see: may_see.clone(),
                });
            }
        }
    }
    out
}

fn rust_files(at: &Path, out: &mut Vec<PathBuf>) {
    if at.is_file() {
        out.push(at.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(at) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The rooms that the code of `room` (its folder and its `.rs` file) names by `crate::`
/// paths, comments left out, with one place each names it.
fn imports(
    src: &Path,
    room: &str,
    modules: &BTreeSet<String>,
    reexports: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut files = Vec::new();
    rust_files(&src.join(room), &mut files);
    rust_files(&src.join(format!("{room}.rs")), &mut files);
    let mut found = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("reads");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for (at, _) in code.match_indices("crate::") {
                let before = code[..at].chars().last();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue; // `imgfeed_crate::`, not ours
                }
                let rest = &code[at + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let names: Vec<String> = if name.is_empty() && rest.starts_with('{') {
                    let group = rest[1..].split('}').next().unwrap_or("");
                    group
                        .split(',')
                        .map(|w| w.trim().split("::").next().unwrap_or("").to_string())
                        .collect()
                } else {
                    vec![name]
                };
                for name in names {
                    let target = if modules.contains(&name) {
                        Some(name)
                    } else {
                        reexports.get(&name).cloned()
                    };
                    if let Some(target) = target.filter(|t| t != room) {
                        found
                            .entry(target)
                            .or_insert_with(|| format!("{}:{}", file.display(), n + 1));
                    }
                }
            }
        }
    }
    found
}

#[test]
fn every_room_sees_only_what_architecture_md_allows_and_only_downwards() {
    let repo = common::repo();
    let src = repo.join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("reads src/lib.rs");
    let (mut modules, reexports) = crate_modules(&lib);
    // The binary's modules (`src/main.rs`: the CLI) are rooms too.
    let main = std::fs::read_to_string(src.join("main.rs")).expect("reads src/main.rs");
    modules.extend(crate_modules(&main).0);
    let text = std::fs::read_to_string(repo.join("ARCHITECTURE.md")).expect("reads");
    let rows = rows(&text, &modules);
    let drawn: Vec<&str> = rows.iter().map(|r| r.room.as_str()).collect();
    let mut problems = Vec::new();
    for m in &modules {
        if !drawn.contains(&m.as_str()) {
            problems.push(format!("src/{m}: no row in ARCHITECTURE.md's rooms"));
        }
    }
    for (floor, row) in rows.iter().enumerate() {
        if !modules.contains(&row.room) {
            problems.push(format!("{}: a row for a module src/lib.rs lacks", row.room));
        }
        let Some(allowed) = &row.may_see else {
            continue;
        };
        for seen in allowed {
            let below = drawn.iter().skip(floor + 1).any(|r| *r == seen.as_str());
            if !below {
                problems.push(format!(
                    "{}: may see {seen}, which is not drawn below it",
                    row.room
                ));
            }
        }
        for (seen, place) in imports(&src, &row.room, &modules, &reexports) {
            if !allowed.contains(&seen) {
                problems.push(format!(
                    "{}: sees {seen} ({place}), which its column does not allow",
                    row.room
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_import_reader_sees_what_it_should() {
    let lib = "pub mod a;\nmod b;\npub use a::{Thing,\n    Other};\npub use b::Third;\n";
    let (modules, reexports) = crate_modules(lib);
    assert_eq!(modules.len(), 2);
    assert_eq!(reexports.get("Other").map(String::as_str), Some("a"));
    assert_eq!(reexports.get("Third").map(String::as_str), Some("b"));
    assert_eq!(room_of_path("src/cli/").as_deref(), Some("cli"));
    assert_eq!(room_of_path("src/plan.rs").as_deref(), Some("plan"));
    assert_eq!(room_of_path("python/"), None);
}
