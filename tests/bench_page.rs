//! `imgfeed bench --html FILE` (issue 33): one self-contained page per bench — the sweep's
//! plot and table, and for each run its figures, throughput over time and the time per stage
//! behind the verdict — holding the same figures as `--json`.

mod common;

use common::*;

#[test]
fn the_bench_page_holds_each_runs_figures_and_the_sweep() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("bench.html");
    let o = imgfeed(&[
        "bench",
        "pipelines/resnet50_eval.toml",
        "--batch-size",
        "4",
        "--epochs",
        "2",
        "--sweep-workers",
        "1,2",
        "--json",
        "--html",
        page.to_str().expect("utf-8"),
    ]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let html = std::fs::read_to_string(&page).expect("the page");
    let fetches = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(
        !fetches.contains("http:") && !fetches.contains("<script"),
        "self-contained"
    );
    assert!(html.contains("<section id=\"sweep\">"), "the sweep");
    let runs = v["runs"].as_array().expect("runs");
    assert_eq!(html.matches("<section class=\"run\"").count(), runs.len());
    // each run's throughput line has a point a window, and its stages are the JSON's
    assert_eq!(
        html.matches("<polyline class=\"rate\" points=\"").count(),
        runs.len()
    );
    for (i, run) in runs.iter().enumerate() {
        let section = html
            .split(&format!("id=\"run-{i}\""))
            .nth(1)
            .and_then(|s| s.split("</section>").next())
            .expect("the run's section");
        let points = section
            .split("points=\"")
            .nth(1)
            .and_then(|p| p.split('"').next())
            .expect("points");
        assert!(points.split(' ').count() >= 2, "{points}");
        let split = run["stage_split"].as_object().expect("stage_split");
        assert!(!split.is_empty());
        for (stage, share) in split {
            let bar = format!("data-label=\"{stage}\" data-share=\"");
            let at = section
                .find(&bar)
                .unwrap_or_else(|| panic!("{stage} in {section}"));
            let shown: f64 = section[at + bar.len()..]
                .split('"')
                .next()
                .and_then(|s| s.parse().ok())
                .expect("a share");
            let share = share.as_f64().expect("a number");
            assert!((shown - share).abs() < 0.01, "{stage}: {shown} vs {share}");
        }
        let workers = run["workers"].as_u64().expect("workers");
        assert!(section.contains(&format!("<th>workers</th><td>{workers}</td>")));
    }
}
