//! The `imgfeed` binary: check, run, convert, bench, and its exit codes (0 ok, 1 data
//! error, 2 usage / pipeline error).

mod common;

use common::*;
use imgfeed::engine::fingerprint::{fingerprint, fold, OFFSET64};

const CANONICAL: &str = "pipelines/resnet50_eval.toml";

fn digest_of(stdout: &str) -> String {
    let at = stdout
        .find("digest ")
        .unwrap_or_else(|| panic!("no digest in: {stdout}"));
    stdout[at + 7..]
        .chars()
        .take_while(|c| c.is_ascii_hexdigit())
        .collect()
}

#[test]
fn check_prints_every_stage_and_the_batch_shape() {
    let o = imgfeed(&["check", CANONICAL]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "stderr: {err}");
    assert!(
        out.starts_with("image_folder pipelines/../fixtures/imagefolder: 12 samples, 3 classes\n"),
        "{out}"
    );
    let stage_lines: Vec<(&str, &str)> = out
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_once("->"))
        .map(|(a, b)| (a.trim(), b.trim()))
        .collect();
    let expected = [
        ("source", "encoded bytes, label uint32"),
        ("decode", "uint8 HWC [?, ?, 3], label uint32"),
        ("resize", "uint8 HWC [?, ?, 3], label uint32"),
        ("center_crop", "uint8 HWC [224, 224, 3], label uint32"),
        ("normalize", "float32 HWC [224, 224, 3], label uint32"),
        ("hwc_to_chw", "float32 CHW [3, 224, 224], label uint32"),
        ("type_cast", "float32 CHW [3, 224, 224], label int32"),
        (
            "batch(32, drop_remainder=true)",
            "float32 [32, 3, 224, 224], labels int32 [32]",
        ),
    ];
    assert_eq!(stage_lines, expected, "{out}");
    assert!(out.contains("fused: resize + center_crop"), "{out}");
    assert!(out.contains("epoch: 12 samples in 0 batches"), "{out}");
}

#[test]
fn run_digest_matches_across_workers_and_the_converted_bytes() {
    let one = imgfeed(&["run", CANONICAL, "--batch-size", "4", "--workers", "1"]);
    let three = imgfeed(&["run", CANONICAL, "--batch-size", "4", "--workers", "3"]);
    let (out1, err1) = text(&one);
    let (out3, err3) = text(&three);
    assert_eq!(code(&one), 0, "stderr: {err1}");
    assert_eq!(code(&three), 0, "stderr: {err3}");
    for out in [&out1, &out3] {
        assert!(out.contains("epoch 0: 3 batches, 12 samples"), "{out}");
        assert!(out.contains("images float32 [4, 3, 224, 224]"), "{out}");
        assert!(
            out.contains("labels int32 (sum 12)"),
            "labels 0x4 + 1x4 + 2x4: {out}"
        );
    }
    let d1 = digest_of(&out1);
    assert_eq!(d1.len(), 16, "{out1}");
    assert_eq!(
        d1,
        digest_of(&out3),
        "--workers 1 and --workers 3 must produce the same bytes"
    );

    // The digest folds (FNV-1a 64) each sample's fingerprint, then the fingerprint of the
    // batch's label bytes: recompute it from what `convert` writes, in batches of 4.
    let tmp = tempfile::tempdir().expect("tempdir");
    let out_dir = tmp.path().join("npy");
    let c = imgfeed(&[
        "convert",
        CANONICAL,
        "--out",
        out_dir.to_str().expect("utf-8 path"),
    ]);
    let (cout, cerr) = text(&c);
    assert_eq!(code(&c), 0, "stderr: {cerr}");
    assert!(cout.starts_with("wrote 12 samples to "), "{cout}");
    let (_, images) = read_npy(&out_dir.join("images.npy"));
    let (_, labels) = read_npy(&out_dir.join("labels.npy"));
    let per = 3 * 224 * 224 * 4;
    let mut h = OFFSET64;
    for b in 0..3 {
        for s in 0..4 {
            let at = (b * 4 + s) * per;
            h = fold(h, fingerprint(&images[at..at + per]));
        }
        h = fold(h, fingerprint(&labels[b * 16..(b + 1) * 16]));
    }
    assert_eq!(
        format!("{h:016x}"),
        d1,
        "run's digest and convert's bytes disagree"
    );
}

#[test]
fn run_says_once_how_long_the_first_batch_took_opening_included() {
    let t0 = std::time::Instant::now();
    let o = imgfeed(&["run", CANONICAL, "--batch-size", "4", "--epochs", "2"]);
    let wall = t0.elapsed().as_secs_f64();
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "stderr: {err}");
    let lines: Vec<&str> = out.lines().collect();
    let at: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("first batch "))
        .collect();
    assert_eq!(
        at.len(),
        1,
        "one line for the run, not one per epoch: {out}"
    );
    assert!(lines[at[0] - 1].starts_with("epoch 0: "), "{out}");
    let secs: f64 = lines[at[0]]
        .split_whitespace()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no seconds in: {out}"));
    // The first batch comes after the data is opened and before the command ends.
    assert!(
        secs > 0.0 && secs <= wall,
        "{secs} s of a {wall:.3} s run: {out}"
    );
}

#[test]
fn convert_writes_npy_files_and_sample_names() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out_dir = tmp.path().join("out");
    let o = imgfeed(&[
        "convert",
        CANONICAL,
        "--out",
        out_dir.to_str().expect("utf-8 path"),
    ]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "stderr: {err}");
    assert!(
        out.contains("images.npy float32 [12, 3, 224, 224], labels.npy int32"),
        "{out}"
    );

    let images_path = out_dir.join("images.npy");
    let (header, data) = read_npy(&images_path);
    assert!(header.contains("'descr': '<f4'"), "{header}");
    assert!(header.contains("'fortran_order': False"), "{header}");
    assert!(header.contains("'shape': (12, 3, 224, 224)"), "{header}");
    let size = std::fs::metadata(&images_path).expect("stat").len() as usize;
    assert_eq!(size, 128 + 12 * 3 * 224 * 224 * 4, "header + data");
    assert_eq!(data.len(), 12 * 3 * 224 * 224 * 4);
    // normalized values of real photos: finite, around zero, within the reachable range
    let floats: Vec<f32> = data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let lo = (0.0 - 123.675) / 58.395 - 1e-4;
    let hi = (255.0 - 103.53) / 57.375 + 1e-4;
    assert!(
        floats.iter().all(|v| v.is_finite() && *v >= lo && *v <= hi),
        "values out of [{lo}, {hi}]"
    );

    let (lheader, ldata) = read_npy(&out_dir.join("labels.npy"));
    assert!(
        lheader.contains("'descr': '<i4'") && lheader.contains("'shape': (12,)"),
        "{lheader}"
    );
    let labels: Vec<i32> = ldata
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert_eq!(labels, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);

    let names = std::fs::read_to_string(out_dir.join("samples.txt")).expect("samples.txt");
    let lines: Vec<&str> = names.lines().collect();
    assert_eq!(lines.len(), 12);
    assert_eq!(lines[0], "bird/bird_000.jpg");
    assert_eq!(lines[5], "cat/cat_001.JPEG");
    assert_eq!(lines[11], "coffee/coffee_003.png");
    // The class map beside them, as the shards manifest has it.
    let classes: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join("classes.json")).expect("classes.json"),
    )
    .expect("json");
    assert_eq!(
        classes,
        serde_json::json!({"bird": 0, "cat": 1, "coffee": 2})
    );
}

#[test]
fn a_typo_in_the_pipeline_file_exits_2_naming_the_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let text_in = std::fs::read_to_string(repo().join(CANONICAL)).expect("read canonical");
    let typo = text_in.replacen("size = 256", "sizee = 256", 1);
    assert_ne!(typo, text_in);
    let file = tmp.path().join("typo.toml");
    std::fs::write(&file, typo).expect("write");
    for cmd in ["check", "run"] {
        let o = imgfeed(&[cmd, file.to_str().expect("utf-8")]);
        let (out, err) = text(&o);
        assert_eq!(code(&o), 2, "{cmd}: stdout {out} stderr {err}");
        assert!(
            err.contains("line") && err.contains("sizee"),
            "{cmd}: {err}"
        );
        assert!(err.starts_with("error: pipeline file "), "{cmd}: {err}");
    }
}

#[test]
fn usage_errors_exit_2() {
    let o = imgfeed(&["check", "pipelines/does_not_exist.toml"]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("does_not_exist.toml"), "{err}");
    // a pipeline that parses but cannot run
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("nocrop.toml");
    std::fs::write(
        &file,
        format!(
            "[source]\nkind = \"image_folder\"\nroot = \"{}\"\n\n[[ops]]\nop = \"decode\"\n\n[batch]\nsize = 2\n",
            fixtures().join("imagefolder").display()
        ),
    )
    .expect("write");
    let o = imgfeed(&["run", file.to_str().expect("utf-8")]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("batched"), "{err}");
    // --usage applies to CIFAR only
    let o = imgfeed(&["check", CANONICAL, "--usage", "test"]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("--usage"), "{err}");
    // --workers 0
    let o = imgfeed(&["check", CANONICAL, "--workers", "0"]);
    assert_eq!(code(&o), 2, "{}", text(&o).1);
}

#[test]
fn bad_data_exits_1_and_convert_keeps_the_good_samples() {
    let data = tempfile::tempdir().expect("tempdir");
    Img::uniform(8, 6, [200, 100, 50]).write_bmp(&data.path().join("a/good_0.bmp"));
    Img::uniform(6, 8, [10, 20, 30]).write_bmp(&data.path().join("b/good_1.bmp"));
    copy_into(
        data.path(),
        "b/garbage.jpg",
        &fixtures().join("bad/garbage.jpg"),
    );
    let data_arg = data.path().to_str().expect("utf-8");

    let tmp = tempfile::tempdir().expect("tempdir");
    let out_dir = tmp.path().join("out");
    let o = imgfeed(&[
        "convert",
        CANONICAL,
        "--data",
        data_arg,
        "--out",
        out_dir.to_str().expect("utf-8"),
    ]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 1, "stdout {out} stderr {err}");
    assert!(
        err.contains("b/garbage.jpg") && err.contains("decode"),
        "{err}"
    );
    assert!(
        out.contains("wrote 2 samples") && out.contains("1 bad sample(s) skipped"),
        "{out}"
    );
    let (header, data_bytes) = read_npy(&out_dir.join("images.npy"));
    assert!(header.contains("'shape': (2, 3, 224, 224)"), "{header}");
    assert_eq!(data_bytes.len(), 2 * 3 * 224 * 224 * 4);
    // a uniform image stays uniform: every value of sample 0's R plane is (200 - mean) / std
    let r0 = f32::from_le_bytes([data_bytes[0], data_bytes[1], data_bytes[2], data_bytes[3]]);
    assert!(
        (r0 as f64 - (200.0 - 123.675) / 58.395).abs() < 1e-4,
        "{r0}"
    );
    let (lheader, ldata) = read_npy(&out_dir.join("labels.npy"));
    assert!(lheader.contains("'shape': (2,)"), "{lheader}");
    assert_eq!(ldata, [0, 0, 0, 0, 1, 0, 0, 0]);
    let names = std::fs::read_to_string(out_dir.join("samples.txt")).expect("samples.txt");
    assert_eq!(names, "a/good_0.bmp\nb/good_1.bmp\n");

    // `run` (on_error = fail) stops with exit 1 and names the file
    let o = imgfeed(&["run", CANONICAL, "--data", data_arg, "--batch-size", "1"]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 1, "{err}");
    assert!(err.contains("b/garbage.jpg: decode:"), "{err}");
}

#[test]
fn bench_json_prints_one_line_with_the_measurements() {
    let o = imgfeed(&[
        "bench",
        CANONICAL,
        "--json",
        "--batch-size",
        "4",
        "--workers",
        "2",
    ]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "stderr: {err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON line: {out}");
    let v: serde_json::Value =
        serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("not JSON ({e}): {}", lines[0]));
    assert_eq!(v["what"], "imgfeed-bench");
    assert_eq!(v["images"], 12);
    assert_eq!(v["batches"], 3);
    assert_eq!(v["workers"], 2);
    assert_eq!(v["pipeline"], CANONICAL);
    let num = |k: &str| {
        v[k].as_f64()
            .unwrap_or_else(|| panic!("{k} is not a number: {v}"))
    };
    assert!(num("images_per_s") > 0.0, "{v}");
    assert!(num("peak_rss_mb") > 1.0, "{v}");
    assert!(num("wall_s") > 0.0 && num("cpu_s") >= 0.0, "{v}");
    let split = v["stage_split"]
        .as_object()
        .unwrap_or_else(|| panic!("stage_split is not an object: {v}"));
    for stage in ["read", "decode", "write"] {
        assert!(split.contains_key(stage), "stage_split lacks {stage}: {v}");
    }
    assert!(
        split.keys().any(|k| k.starts_with("resize")),
        "stage_split lacks the resize: {v}"
    );
    let total: f64 = split.values().map(|x| x.as_f64().expect("share")).sum();
    assert!((total - 1.0).abs() < 0.01, "shares sum to {total}: {v}");
}

// ---- messages that say what happened (issue 16) ------------------------------------------

#[test]
fn a_missing_dataset_root_is_a_usage_error_naming_it() {
    let o = imgfeed(&[
        "run",
        "pipelines/resnet50_eval.toml",
        "--data",
        "/nonexistent/imgfeed-data",
    ]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("/nonexistent/imgfeed-data"), "{err}");
    assert!(!err.contains("hint: --on-error"), "not a bad sample: {err}");
}

#[test]
fn counts_take_the_right_number() {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_into(
        dir.path(),
        "only/a.jpg",
        &fixtures().join("imagefolder/cat/cat_000.jpg"),
    );
    let data = dir.path().to_str().expect("utf-8 path");
    let (out, _) = text(&imgfeed(&[
        "check",
        "pipelines/resnet50_eval.toml",
        "--data",
        data,
    ]));
    assert!(out.contains(": 1 sample, 1 class"), "{out}");
}

#[test]
fn epochs_0_and_work_unit_0_are_refused_by_name() {
    let o = imgfeed(&["run", "pipelines/resnet50_eval.toml", "--epochs", "0"]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("--epochs must be at least 1"), "{err}");
    assert!(
        !err.contains("--start-epoch"),
        "no flag that was not given: {err}"
    );
    let o = imgfeed(&[
        "run",
        "pipelines/resnet50_eval.toml",
        "--batch-size",
        "4",
        "--work-unit",
        "0",
    ]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("--work-unit"), "{err}");
}

#[test]
fn bad_samples_say_replaced_or_skipped_and_errors_say_the_way_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["a.jpg", "b.jpg", "c.jpg"] {
        copy_into(
            dir.path(),
            &format!("x/{name}"),
            &fixtures().join("imagefolder/cat/cat_000.jpg"),
        );
    }
    copy_into(
        dir.path(),
        "x/b_bad.jpg",
        &fixtures().join("bad/truncated.jpg"),
    );
    let data = dir.path().to_str().expect("utf-8 path");
    let base = [
        "run",
        "pipelines/resnet50_eval.toml",
        "--data",
        data,
        "--batch-size",
        "2",
    ];
    let (_, err) = text(&imgfeed(&[&base[..], &["--on-error", "replace"]].concat()));
    assert!(err.contains("replaced"), "{err}");
    assert!(!err.contains("skipped"), "{err}");
    let o = imgfeed(&[&base[..], &["--on-error", "skip"]].concat());
    let (_, skip_err) = text(&o);
    assert_eq!(code(&o), 1, "skipped samples exit 1: {skip_err}");
    let o = imgfeed(&base);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 1, "{err}");
    assert!(
        err.contains("--on-error skip") && err.contains("imgfeed validate"),
        "{err}"
    );
    // one format for a bad sample everywhere: the stopping error, run's skip list and
    // convert's are the same `FILE: STAGE: REASON [KIND, sample INDEX]`
    let after = |text: &str, prefix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix).map(str::to_string))
            .unwrap_or_else(|| panic!("no {prefix:?} line: {text}"))
    };
    let stopped = after(&err, "error: ");
    assert!(stopped.starts_with("x/b_bad.jpg: decode: "), "{stopped}");
    assert!(stopped.ends_with("[truncated, sample 2]"), "{stopped}");
    assert_eq!(after(&skip_err, "skipped: "), stopped);
    let out = tempfile::tempdir().expect("tempdir");
    let o = imgfeed(&[
        "convert",
        "pipelines/resnet50_eval.toml",
        "--data",
        data,
        "--out",
        out.path().to_str().expect("utf-8"),
    ]);
    let (_, conv_err) = text(&o);
    assert_eq!(code(&o), 1, "{conv_err}");
    assert_eq!(after(&conv_err, "skipped: "), stopped);
}

#[test]
fn an_epoch_without_a_batch_warns_and_bench_refuses_it() {
    // 12 fixture images, batches of 32 with drop_remainder: no batch.
    let o = imgfeed(&["run", "pipelines/resnet50_eval.toml"]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(err.contains("warning: 12 samples an epoch"), "{err}");
    let o = imgfeed(&["check", "pipelines/resnet50_eval.toml"]);
    assert!(text(&o).1.contains("warning: "), "{}", text(&o).1);
    let o = imgfeed(&["bench", "pipelines/resnet50_eval.toml"]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("nothing to measure"), "{err}");
    // With batches that fit, no warning.
    let o = imgfeed(&["run", "pipelines/resnet50_eval.toml", "--batch-size", "4"]);
    assert!(!text(&o).1.contains("warning"), "{}", text(&o).1);
}

#[test]
fn normalize_in_torchvision_units_on_0_255_pixels_is_warned_about() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let text_in = std::fs::read_to_string(repo().join(CANONICAL)).expect("read canonical");
    let units = text_in
        .replace("[123.675, 116.28, 103.53]", "[0.485, 0.456, 0.406]")
        .replace("[58.395, 57.12, 57.375]", "[0.229, 0.224, 0.225]");
    assert_ne!(units, text_in);
    let file = tmp.path().join("units.toml");
    std::fs::write(
        &file,
        units.replace("../fixtures", &fixtures().display().to_string()),
    )
    .expect("write");
    for cmd in ["check", "run"] {
        let o = imgfeed(&[cmd, file.to_str().expect("utf-8"), "--batch-size", "4"]);
        let (_, err) = text(&o);
        assert_eq!(code(&o), 0, "{cmd}: a warning, not an error: {err}");
        assert!(
            err.contains("warning: ops[3] (normalize)") && err.contains("255"),
            "{cmd}: {err}"
        );
    }
    // MindSpore's units, and 0–1 units after a rescale (the CIFAR pipeline): no warning.
    for p in [CANONICAL, "pipelines/cifar10_eval.toml"] {
        let o = imgfeed(&["check", p, "--batch-size", "2"]);
        assert!(!text(&o).1.contains("normalize"), "{p}: {}", text(&o).1);
    }
}

/// A pipeline of little but decoding: decode, then a small centre crop.
fn decode_only(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("decode_only.toml");
    let text = format!(
        "[source]\nkind = \"image_folder\"\nroot = {:?}\nshuffle = false\n\n[[ops]]\nop = \
         \"decode\"\n\n[[ops]]\nop = \"center_crop\"\nsize = 16\n\n[batch]\nsize = 1\n",
        fixtures().join("imagefolder")
    );
    std::fs::write(&p, text).expect("write pipeline");
    p
}

#[test]
fn bench_names_the_bottleneck_decode_or_a_slow_consumer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = decode_only(dir.path());
    let p = p.to_str().expect("utf-8");
    let verdict = |extra: &[&str]| {
        let o = imgfeed(&[&["bench", p, "--json", "--workers", "1"][..], extra].concat());
        let (out, err) = text(&o);
        assert_eq!(code(&o), 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON");
        v["verdict"].clone()
    };
    let v = verdict(&[]);
    assert_eq!(v["bound"], "decode", "{v}");
    assert!(
        v["finding"]
            .as_str()
            .is_some_and(|f| f.contains("images/s per worker")),
        "{v}"
    );
    // a step far longer than a decode (about 5 ms here), so that the loader stays ahead; on a
    // machine so loaded that one decode takes longer than the step (seen: 3 images/s per
    // worker with the load average at 16 on 2 cores), a longer step, at most three tries
    let mut v = serde_json::Value::Null;
    for step in ["150", "600", "2400"] {
        v = verdict(&["--step-ms", step]);
        if v["bound"] == "consumer" {
            break;
        }
    }
    assert_eq!(v["bound"], "consumer", "{v}");
    assert!(
        v["advice"]
            .as_str()
            .is_some_and(|a| a.contains("will not help")),
        "{v}"
    );
    // the table says it too
    let o = imgfeed(&["bench", p, "--workers", "1"]);
    let (out, _) = text(&o);
    assert!(out.contains("verdict      decode-bound"), "{out}");
    let header = out.find("workers ").expect("header");
    assert!(
        header < out.find("images ").expect("figures"),
        "header first: {out}"
    );
}

#[test]
fn bench_sweeps_worker_counts_into_a_table_a_json_and_an_svg() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = decode_only(dir.path());
    let svg = dir.path().join("sweep.svg");
    let args = [
        "bench",
        p.to_str().expect("utf-8"),
        "--sweep-workers",
        "1,2",
        "--plot",
        svg.to_str().expect("utf-8"),
    ];
    let o = imgfeed(&[&args[..], &["--json"]].concat());
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON document");
    let runs = v["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    for (run, w) in runs.iter().zip([1, 2]) {
        assert_eq!(run["workers"], w);
        assert_eq!(run["images"], 12);
        assert!(
            run["images_per_s"].as_f64().is_some_and(|x| x > 0.0),
            "{run}"
        );
        assert!(run["verdict"]["bound"].is_string(), "{run}");
    }
    let plot = std::fs::read_to_string(&svg).expect("svg written");
    assert!(
        plot.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "{plot}"
    );
    assert!(plot.trim_end().ends_with("</svg>"));
    assert_eq!(
        plot.matches("<circle").count(),
        4,
        "two series of two points"
    );
    assert_eq!(plot.matches("<polyline").count(), 2);
    // tags balance: every opened element is closed
    let opened = plot.matches("<text").count();
    assert_eq!(opened, plot.matches("</text>").count());
    // the table
    let o = imgfeed(&args);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(out.contains("workers  images/s  per worker"), "{out}");
    // --workers and --sweep-workers do not go together; --plot needs a sweep
    let o = imgfeed(&[&args[..], &["--workers", "2"]].concat());
    assert_eq!(code(&o), 2, "{}", text(&o).1);
    let o = imgfeed(&["bench", p.to_str().expect("utf-8"), "--plot", "x.svg"]);
    assert_eq!(code(&o), 2, "{}", text(&o).1);
}
