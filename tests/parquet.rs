//! Parquet files with an image column read in place, written by Hugging Face `datasets`
//! (`Dataset.from_dict` of the fixture tree, `image` an `Image()`, `label` a `ClassLabel`,
//! the images embedded as `push_to_hub` embeds them, `to_parquet` with small row groups:
//! `fixtures/records/write_tree.py`, in the `formats` environment: `bash python/envs.sh
//! formats`). `imgfeed run` on them gives the image tree's digests (eval and train
//! pipelines, 2 epochs, ranks of 2, 1 and 2 workers); the class names come from the files'
//! `huggingface` metadata; broken files are errors naming the file and the reason.
//!
//! Without the environment each test says how to make it and passes, unless
//! `IMGFEED_FORMAT_TESTS=required` (as `.ci/run` sets), which turns a skip into a failure.

mod common;
#[path = "common/formats.rs"]
mod formats;

use common::{code, repo, text};
use formats::{digests, s, EVAL, TRAIN};
use std::path::{Path, PathBuf};
use std::process::Output;

fn ready(test: &str) -> Option<PathBuf> {
    formats::ready(test, "formats", "datasets")
}

/// The fixture tree as `files` Parquet files in `out`, by HF `datasets`.
fn write(python: &Path, out: &Path, files: usize, extra: &[&str]) {
    formats::write_tree(python, "parquet", out, files, extra);
}

/// `imgfeed ARGS` with `XDG_CACHE_HOME` set to `cache` (where Parquet files are unpacked).
fn cached(args: &[&str], cache: &Path) -> Output {
    formats::in_cache(args, Some(cache))
}

fn run(
    pipeline: &str,
    data: &str,
    workers: &str,
    rank: Option<(&str, &str)>,
    cache: &Path,
) -> Output {
    formats::run(pipeline, data, workers, rank, Some(cache))
}

#[test]
fn parquet_files_give_the_trees_digests() {
    let Some(python) = ready("parquet_files_give_the_trees_digests") else {
        return;
    };
    let out = tempfile::tempdir().expect("tempdir");
    let (three, one) = (out.path().join("three"), out.path().join("one"));
    // Three files of two row groups each; one file of four row groups of three rows.
    write(&python, &three, 3, &[]);
    write(&python, &one, 1, &["--row-group", "3"]);
    let pattern = format!("{}/train-{{00000..00002}}-of-00003.parquet", s(&three));
    let single = one.join("train-00000-of-00001.parquet");
    let tree = repo().join("fixtures/imagefolder");
    let cache = out.path().join("cache");
    for pipeline in [EVAL, TRAIN] {
        for workers in ["1", "2"] {
            for rank in [None, Some(("2", "0")), Some(("2", "1"))] {
                let want = digests(&run(pipeline, s(&tree), workers, rank, &cache));
                assert_eq!(want.len(), 2, "two epochs");
                for data in [s(&three), pattern.as_str(), s(&single)] {
                    let got = run(pipeline, data, workers, rank, &cache);
                    assert!(text(&got).0.starts_with("parquet "), "{}", text(&got).0);
                    assert_eq!(digests(&got), want, "{pipeline} {data} {workers} {rank:?}");
                }
            }
        }
    }
    // Each file was unpacked once, into the cache, to index its rows; its images are read
    // in place from its Snappy pages (the index in place kept beside it), so no copy is
    // kept.
    let unpacked = std::fs::read_dir(cache.join("imgfeed/unpacked"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".parquet"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(unpacked, 0, "no unpacked copy kept");
    for file in [three.join("train-00000-of-00003.parquet"), single.clone()] {
        let mut name = file.file_name().expect("name").to_os_string();
        name.push(".imgfeed-in-place");
        assert!(
            file.with_file_name(name).is_file(),
            "{}: its index in place",
            file.display()
        );
    }
}

#[test]
fn the_class_names_come_from_the_huggingface_metadata() {
    let Some(python) = ready("the_class_names_come_from_the_huggingface_metadata") else {
        return;
    };
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().join("pq");
    write(&python, &dir, 2, &[]);
    // Renamed, so only the metadata can name the classes.
    let renamed = out.path().join("renamed");
    std::fs::create_dir_all(&renamed).expect("mkdir");
    for i in 0..2 {
        std::fs::copy(
            dir.join(format!("train-{i:05}-of-00002.parquet")),
            renamed.join(format!("part{i}.parquet")),
        )
        .expect("copies");
    }
    let o = cached(&["validate", s(&renamed)], &out.path().join("cache"));
    let (so, se) = text(&o);
    assert_eq!(code(&o), 0, "{so}{se}");
    for (label, name) in ["bird", "cat", "coffee"].iter().enumerate() {
        let line = formats::class_line(&so, label, name);
        assert!(
            line.is_some_and(|l| l.contains("4 (0 bad)")),
            "{name}: {so}"
        );
    }
}

#[test]
fn broken_parquet_files_are_errors_naming_the_file_and_the_reason() {
    let Some(python) = ready("broken_parquet_files_are_errors_naming_the_file_and_the_reason")
    else {
        return;
    };
    let out = tempfile::tempdir().expect("tempdir");
    let (dir, nulls) = (out.path().join("pq"), out.path().join("nulls"));
    write(&python, &dir, 1, &[]);
    write(&python, &nulls, 1, &["--null-image", "5"]);
    let whole = std::fs::read(dir.join("train-00000-of-00001.parquet")).expect("reads");
    let broken = out.path().join("broken");
    std::fs::create_dir_all(&broken).expect("mkdir");
    // The first page's header (just after the leading `PAR1`) overwritten.
    let mut bad_page = whole.clone();
    bad_page[4..40].fill(0xFF);
    let cases: [(&str, Vec<u8>, &str); 3] = [
        (
            "truncated.parquet",
            whole[..whole.len() - 100].to_vec(),
            "not a readable Parquet file",
        ),
        ("bad_page.parquet", bad_page, "not a readable Parquet file"),
        (
            "not.parquet",
            b"PAR1 but nothing else".to_vec(),
            "not a readable Parquet file",
        ),
    ];
    let cache = out.path().join("cache");
    for (file, bytes, says) in cases {
        let path = broken.join(file);
        std::fs::write(&path, bytes).expect("writes");
        let o = run(EVAL, s(&path), "2", None, &cache);
        let (so, se) = text(&o);
        assert_eq!(code(&o), 2, "{file}: {so}{se}");
        assert!(se.contains(s(&path)) && se.contains(says), "{file}: {se}");
    }
    // A null image: the file and the row.
    let null = nulls.join("train-00000-of-00001.parquet");
    let o = run(EVAL, s(&null), "2", None, &cache);
    let se = text(&o).1;
    assert_eq!(code(&o), 2, "{se}");
    assert!(
        se.contains(s(&null)) && se.contains("row 5: the image is null"),
        "{se}"
    );
    // A column that is not there: its name and the file's columns (though the file was
    // unpacked before, with the default columns, into the same cache).
    let o = run(EVAL, s(&dir), "2", None, &cache);
    assert_eq!(code(&o), 0, "{}", text(&o).1);
    let eval = std::fs::read_to_string(repo().join(EVAL)).expect("reads");
    let source = format!(
        "[source]\nkind = \"parquet\"\nroot = {:?}\nimage = \"photo\"\n",
        s(&dir)
    );
    let body = eval
        .split_once("[[ops]]")
        .map(|(_, ops)| format!("{source}\n[[ops]]{ops}"))
        .expect("the eval pipeline has ops");
    let pipeline = out.path().join("photo.toml");
    std::fs::write(&pipeline, body).expect("writes");
    let o = cached(&["run", s(&pipeline), "--batch-size", "4"], &cache);
    let se = text(&o).1;
    assert_eq!(code(&o), 2, "{se}");
    assert!(
        se.contains("train-00000-of-00001.parquet")
            && se.contains(
                "no image column \"photo\" (the file's columns: image.bytes, image.path, label)"
            ),
        "{se}"
    );
}

/// The images of files written with each of pyarrow's page layouts, read in place from
/// their pages (range mode's index: `RecordFormat::in_place`): exactly the unpacked copy's
/// bytes, labels and keys, row for row; with Snappy a range about the image's own size.
/// gzip'd pages have no such ranges (`None`: those files are read whole).
#[test]
fn images_are_read_in_place_from_each_page_layout_pyarrow_writes() {
    use imgfeed::formats::parquet::{index, unpack, Parquet, ParquetOptions};
    use imgfeed::formats::{RecordFormat, Stored};
    let Some(python) = ready("images_are_read_in_place_from_each_page_layout_pyarrow_writes")
    else {
        return;
    };
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().join("pq");
    write(&python, &dir, 1, &["--row-group", "12"]);
    let source = dir.join("train-00000-of-00001.parquet");
    let layouts = [
        ("snappy", "compression='snappy'"),
        ("none", "compression='none'"),
        ("v2", "data_page_version='2.0'"),
        ("v2_none", "data_page_version='2.0', compression='none'"),
        ("plain", "use_dictionary=False"),
        // Every page one or two images: values cut across many pages.
        ("small_pages", "use_dictionary=False, data_page_size=64"),
        ("dictionary", "dictionary_pagesize_limit=1 << 30"),
        ("gzip", "compression='gzip'"),
    ];
    let mut script =
        String::from("import sys, os, pyarrow.parquet as pq\nt = pq.read_table(sys.argv[1])\n");
    for (name, args) in layouts {
        script.push_str(&format!(
            "pq.write_table(t, os.path.join(sys.argv[2], '{name}.parquet'), row_group_size=5, {args})\n"
        ));
    }
    let o = std::process::Command::new(&python)
        .arg("-c")
        .arg(&script)
        .arg(&source)
        .arg(out.path())
        .output()
        .expect("runs python");
    assert!(o.status.success(), "{}", text(&o).1);
    for (name, _) in layouts {
        let bytes = std::fs::read(out.path().join(format!("{name}.parquet"))).expect("reads");
        let mut copy = Vec::new();
        unpack(&bytes, &ParquetOptions::default(), &mut copy).expect("unpacks");
        let unpacked = index(&copy).expect("indexes");
        assert_eq!(unpacked.len(), 12, "{name}");
        let here = Parquet::default().in_place(&bytes, &unpacked);
        if name == "gzip" {
            assert!(here.is_none(), "gzip pages are read whole");
            continue;
        }
        let here = here.unwrap_or_else(|| panic!("{name}: read in place"));
        let (mut fetched, mut images) = (0, 0);
        for (h, u) in here.iter().zip(&unpacked) {
            let mut buf = bytes[h.offset as usize..(h.offset + h.len) as usize].to_vec();
            let n = buf.len();
            let got = h.stored.image(&mut buf, 0..n).expect("decodes");
            assert_eq!(
                buf[got],
                copy[u.offset as usize..(u.offset + u.len) as usize],
                "{name}: row {}",
                u.key
            );
            assert_eq!((h.labels, &h.key), (u.labels, &u.key), "{name}");
            assert_eq!(
                matches!(h.stored, Stored::Plain),
                name.ends_with("none"),
                "{name}"
            );
            fetched += h.len;
            images += u.len;
        }
        // JPEG bytes do not compress: a Snappy range is the image, or, where its header
        // repeats the one before it in the same 64 KiB of the stream (a copy back there),
        // from that one's start (1.09 here: 2 of 12 rows).
        assert!(
            fetched * 100 <= images * 125,
            "{name}: {fetched} bytes read for {images} bytes of images"
        );
    }
}

/// Ranks of one node opening the same files for the first time together (4 processes, 3
/// rounds): every one opens them and gives the one-process digests, and no copy is left
/// behind. (One may find the copy another removes once it reads in place; `unpacked` then
/// makes it again. That window is too narrow to hit on purpose here.)
#[test]
fn processes_opening_new_files_together_all_read_them() {
    let Some(python) = ready("processes_opening_new_files_together_all_read_them") else {
        return;
    };
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().join("pq");
    write(&python, &dir, 3, &[]);
    let want = digests(&run(EVAL, s(&dir), "1", None, &out.path().join("alone")));
    for round in 0..3 {
        // Fresh indexes and cache each round.
        for e in std::fs::read_dir(&dir).expect("dir").flatten() {
            if !e.file_name().to_string_lossy().ends_with(".parquet") {
                std::fs::remove_file(e.path()).expect("removes");
            }
        }
        let cache = out.path().join(format!("shared-{round}"));
        let exe = env!("CARGO_BIN_EXE_imgfeed");
        let spawn = || {
            std::process::Command::new(exe)
                .args([
                    "run",
                    EVAL,
                    "--data",
                    s(&dir),
                    "--batch-size",
                    "4",
                    "--epochs",
                    "2",
                ])
                .current_dir(repo())
                .env("XDG_CACHE_HOME", &cache)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawns")
        };
        let children: Vec<_> = (0..4).map(|_| spawn()).collect();
        for c in children {
            let o = c.wait_with_output().expect("waits");
            let (so, se) = text(&o);
            assert_eq!(code(&o), 0, "round {round}: {so}{se}");
            assert_eq!(digests(&o), want, "round {round}");
        }
        let left = std::fs::read_dir(cache.join("imgfeed/unpacked"))
            .map(|d| d.flatten().count())
            .unwrap_or(0);
        assert_eq!(left, 0, "round {round}: copies left in the cache");
    }
}
