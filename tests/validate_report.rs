//! `imgfeed validate --html` and `--against` (issue 33): exact duplicates and leakage found
//! in a dataset built with known ones, and the report page rendered by a real headless
//! Chromium with no network — the screenshot is not blank, the histogram's bars are the
//! class counts (read back from the DOM it dumps), and hostile file names (`<script>`, an
//! `onerror` attribute, quotes, a byte that is not UTF-8) appear as text, never as markup.
//!
//! The browser tests need Debian's `chromium` and root (for `unshare -n`); without them they
//! skip with a message, unless IMGFEED_BROWSER_TESTS=required (.ci/run sets it).

mod common;

use common::*;
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const HOSTILE_SCRIPT: &str = "<script>document.title='pwned1'";
const HOSTILE_IMG: &str = "<img src=x onerror=\"document.title='pwned2'\">";

/// train/: a (4: one, its copy, two.bmp and two.png with the same pixels), b (2: three, and
/// one's bytes again), c (3: hostile names); val/: a copy of b/three and a new picture.
fn dataset() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = dir.path().join("train");
    let v = dir.path().join("val");
    for d in ["a", "b", "c"] {
        std::fs::create_dir_all(t.join(d)).expect("mkdir");
    }
    std::fs::create_dir_all(v.join("x")).expect("mkdir");
    let one = Img::pattern(12, 8, 1).to_bmp();
    let two = Img::pattern(10, 10, 2);
    let three = Img::pattern(8, 12, 3).to_bmp();
    let w = |p: PathBuf, b: &[u8]| std::fs::write(p, b).expect("write");
    w(t.join("a/one.bmp"), &one);
    w(t.join("a/one_copy.bmp"), &one);
    w(t.join("a/two.bmp"), &two.to_bmp());
    let png = t.join("a/two.png");
    image::save_buffer(&png, &two.rgb, 10, 10, image::ExtendedColorType::Rgb8).expect("png");
    w(t.join("b/three.bmp"), &three);
    w(t.join("b/one_again.bmp"), &one);
    w(
        t.join("c").join(format!("{HOSTILE_SCRIPT}.bmp")),
        &Img::pattern(8, 8, 5).to_bmp(),
    );
    w(
        t.join("c").join(format!("{HOSTILE_IMG}.bmp")),
        &Img::pattern(8, 8, 6).to_bmp(),
    );
    let odd = std::ffi::OsStr::from_bytes(b"\xff\"q'.bmp");
    w(t.join("c").join(odd), &Img::pattern(8, 8, 7).to_bmp());
    w(v.join("x/leak.bmp"), &three);
    w(v.join("x/fresh.bmp"), &Img::pattern(9, 9, 9).to_bmp());
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

#[test]
fn duplicates_and_leakage_are_found_in_a_dataset_with_known_ones() {
    let dir = dataset();
    let o = imgfeed(&[
        "validate",
        s(&dir.path().join("train")),
        "--against",
        s(&dir.path().join("val")),
        "--json",
    ]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let groups = |key: &str| -> Vec<(String, Vec<String>)> {
        v["duplicates"][key]
            .as_array()
            .expect("groups")
            .iter()
            .map(|g| {
                let files = g["samples"]
                    .as_array()
                    .expect("samples")
                    .iter()
                    .map(|m| m["path"].as_str().expect("path").to_string())
                    .collect();
                (g["same"].as_str().expect("same").to_string(), files)
            })
            .collect()
    };
    assert_eq!(
        groups("within_class"),
        vec![(
            "pixels".into(),
            vec!["a/two.bmp".into(), "a/two.png".into()]
        )],
        "{out}"
    );
    assert_eq!(
        groups("across_classes"),
        vec![(
            "bytes".into(),
            vec![
                "a/one.bmp".into(),
                "a/one_copy.bmp".into(),
                "b/one_again.bmp".into()
            ]
        )],
        "{out}"
    );
    let leaks = v["against"]["in_both"].as_array().expect("in_both");
    assert_eq!(leaks.len(), 1, "{out}");
    assert_eq!(leaks[0]["path"], "b/three.bmp");
    assert_eq!(leaks[0]["other"], "x/leak.bmp");
    assert_eq!(leaks[0]["same"], "bytes");
    // and in words
    let o = imgfeed(&[
        "validate",
        s(&dir.path().join("train")),
        "--against",
        s(&dir.path().join("val")),
    ]);
    let (out, _) = text(&o);
    assert!(
        out.contains("same bytes, across classes: a/one.bmp = a/one_copy.bmp = b/one_again.bmp"),
        "{out}"
    );
    assert!(
        out.contains("same bytes: b/three.bmp = x/leak.bmp"),
        "{out}"
    );
}

/// The tags of a serialised DOM, their attribute values and the text between them taken
/// out (a serialised DOM writes `<` inside attribute values, and quotes in text, as they
/// are): what is left is element and attribute names only.
fn markup_only(dom: &str) -> String {
    let mut out = String::with_capacity(dom.len());
    let (mut in_tag, mut in_value) = (false, false);
    let mut prev = ' ';
    for c in dom.chars() {
        if in_value {
            if c == '"' {
                in_value = false;
                out.push('"');
            }
            continue;
        }
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                out.push('>');
            }
            '"' if in_tag && prev == '=' => in_value = true,
            _ => {}
        }
        if in_tag {
            out.push(c);
        }
        prev = c;
    }
    out
}

/// Chromium's path, or why the browser tests cannot run here (a skip, or a failure when
/// IMGFEED_BROWSER_TESTS=required).
fn browser() -> Option<PathBuf> {
    let required = std::env::var("IMGFEED_BROWSER_TESTS").as_deref() == Ok("required");
    let found = ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        })
    });
    let unshare_ok = Command::new("unshare")
        .args(["-n", "true"])
        .status()
        .is_ok_and(|s| s.success());
    match (found, unshare_ok) {
        (Some(p), true) => Some(p),
        (found, _) => {
            let why = if found.is_none() {
                "no chromium on PATH (apt-get install chromium)"
            } else {
                "unshare -n is not permitted (run as root)"
            };
            assert!(!required, "IMGFEED_BROWSER_TESTS=required but {why}");
            eprintln!("skipped: {why}");
            None
        }
    }
}

/// Run headless Chromium on `page` with `what` (`--dump-dom`, `--screenshot=FILE`) in a
/// network namespace holding only loopback; its stdout.
fn chromium(bin: &Path, page: &Path, what: &str) -> String {
    let profile = tempfile::tempdir().expect("profile");
    let cmd = format!(
        "ip link set lo up && exec '{}' --headless --no-sandbox --disable-gpu --disable-quic \
         --no-first-run --disable-background-networking --disable-component-update \
         --disable-sync --user-data-dir='{}' --window-size=1200,1600 {what} 'file://{}'",
        bin.display(),
        profile.path().display(),
        page.display()
    );
    let o = Command::new("unshare")
        .args(["-n", "sh", "-c", &cmd])
        .output()
        .expect("run chromium");
    assert!(
        o.status.success(),
        "chromium {what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_report_page_renders_in_a_real_browser_and_shows_names_only_as_text() {
    let Some(bin) = browser() else { return };
    let dir = dataset();
    let page = dir.path().join("report.html");
    let o = imgfeed(&[
        "validate",
        s(&dir.path().join("train")),
        "--against",
        s(&dir.path().join("val")),
        "--html",
        s(&page),
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o).1);
    let html = std::fs::read_to_string(&page).expect("page");
    // self-contained: nothing to fetch (the SVG namespace is a name, not a request)
    let fetches = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(
        !fetches.contains("http:") && !fetches.contains("https:"),
        "the page fetches nothing"
    );
    assert!(
        !html.contains("<script"),
        "no script of ours, and no name unescaped"
    );

    let dom = chromium(&bin, &page, "--dump-dom");
    // the hostile names did not run: the title is the page's
    let title = dom
        .split("<title>")
        .nth(1)
        .and_then(|t| t.split("</title>").next())
        .expect("a title");
    assert!(
        title.starts_with("imgfeed validate: image_folder"),
        "{title}"
    );
    // ...and are no element: the markup holds no script and no onerror attribute
    let markup = markup_only(&dom);
    assert!(
        markup.contains("<img alt=\"\" src=\"\">"),
        "the thumbnails are elements: {markup}"
    );
    assert!(!markup.contains("<script"), "a <script> element in the DOM");
    assert!(
        !markup.contains("onerror="),
        "an onerror attribute in the DOM"
    );
    // they are there, as text
    assert!(
        dom.contains("&lt;script&gt;document.title='pwned1'.bmp"),
        "the <script> name shown escaped"
    );
    assert!(
        dom.contains("&lt;img src=x onerror=\"document.title='pwned2'\"&gt;.bmp"),
        "the <img> name shown escaped"
    );
    assert!(
        dom.contains("\u{fffd}\"q'.bmp"),
        "the non-UTF-8 name shown lossily"
    );
    // the histogram's bars are the class counts, their lengths in proportion
    let hist = dom
        .split("id=\"class-histogram\"")
        .nth(1)
        .and_then(|h| h.split("</svg>").next())
        .expect("the class histogram");
    let mut bars = BTreeMap::new();
    for g in hist.split("<g class=\"bar\"").skip(1) {
        let attr = |name: &str| {
            g.split(&format!("{name}=\""))
                .nth(1)
                .and_then(|v| v.split('"').next())
                .expect("attribute")
                .to_string()
        };
        let n: usize = attr("data-count").parse().expect("count");
        let width: usize = attr("width").parse().expect("width");
        bars.insert(attr("data-label"), (n, width));
    }
    let want = [("a", 4), ("b", 2), ("c", 3)];
    assert_eq!(
        bars.iter()
            .map(|(k, v)| (k.as_str(), v.0))
            .collect::<Vec<_>>(),
        want.to_vec(),
        "{hist}"
    );
    for (n, width) in bars.values() {
        assert_eq!(*width, n * 420 / 4);
    }
    // the duplicates and the leak are on the page
    assert!(dom.contains("a/one.bmp (a)  =  a/one_copy.bmp (a)  =  b/one_again.bmp (b)"));
    assert!(dom.contains("x/leak.bmp"));

    // the screenshot is a page, not a blank
    let shot = dir.path().join("shot.png");
    chromium(&bin, &page, &format!("--screenshot={}", shot.display()));
    let img = image::open(&shot).expect("a screenshot").to_rgb8();
    let ink = img
        .pixels()
        .filter(|p| p.0.iter().any(|&c| c < 200))
        .count();
    let colours: std::collections::BTreeSet<[u8; 3]> = img.pixels().map(|p| p.0).collect();
    assert!(
        ink * 100 > img.pixels().len(),
        "under 1% of the screenshot is ink: {ink}"
    );
    assert!(colours.len() > 50, "{} colours", colours.len());
    // the histogram's blue is drawn
    assert!(img.pixels().any(|p| p.0 == [0x4a, 0x78, 0xc2]));
}
