//! `imgfeed bench --html FILE`: a run (or a worker sweep) as one self-contained page a user
//! can attach to a bug report — the figures and the verdict, throughput over time, the share
//! of worker time per stage behind the verdict, and the sweep's plot and table. Inline SVG
//! and CSS only; every text escaped.

use super::bench::{Measured, Verdict};
use super::plot;
use imgfeed::preview::html::escape;
use std::fmt::Write;

const W: f64 = 640.0;
const H: f64 = 220.0;
const LEFT: f64 = 60.0;
/// Points of the throughput line at most: the run is cut into this many windows.
const WINDOWS: usize = 60;

/// Images/s in windows of the run, from the `(seconds, images so far)` after each batch.
fn throughput(timeline: &[(f64, usize)], wall: f64) -> Vec<(f64, f64)> {
    let windows = WINDOWS.min(timeline.len()).max(1);
    let dt = wall.max(1e-9) / windows as f64;
    let mut out = Vec::with_capacity(windows);
    let (mut k, mut before) = (0usize, 0usize);
    for w in 0..windows {
        let end = (w + 1) as f64 * dt;
        let mut now = before;
        while k < timeline.len() && timeline[k].0 <= end {
            now = timeline[k].1;
            k += 1;
        }
        out.push((end, (now - before) as f64 / dt));
        before = now;
    }
    out
}

fn over_time(m: &Measured) -> String {
    let pts = throughput(&m.timeline, m.wall);
    let ymax = pts.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0);
    let (pw, ph) = (W - LEFT - 20.0, H - 50.0);
    let x = |t: f64| LEFT + t / m.wall.max(1e-9) * pw;
    let y = |v: f64| 20.0 + ph - v / ymax * ph;
    let line: Vec<String> = pts
        .iter()
        .map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v)))
        .collect();
    format!(
        "<svg id=\"throughput\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" role=\"img\">\
         <title>images/s over the run ({} workers)</title>\
         <line class=\"axis\" x1=\"{LEFT}\" y1=\"{b:.1}\" x2=\"{r:.1}\" y2=\"{b:.1}\"></line>\
         <line class=\"axis\" x1=\"{LEFT}\" y1=\"20\" x2=\"{LEFT}\" y2=\"{b:.1}\"></line>\
         <text x=\"{l:.1}\" y=\"24\" text-anchor=\"end\">{ymax:.0}</text>\
         <text x=\"{l:.1}\" y=\"{b:.1}\" text-anchor=\"end\">0</text>\
         <text x=\"{r:.1}\" y=\"{t:.1}\" text-anchor=\"end\">{:.2} s</text>\
         <text x=\"{LEFT}\" y=\"12\">images/s</text>\
         <polyline class=\"rate\" points=\"{}\"></polyline></svg>",
        m.workers,
        m.wall,
        line.join(" "),
        b = 20.0 + ph,
        r = LEFT + pw,
        l = LEFT - 4.0,
        t = 20.0 + ph + 16.0,
    )
}

fn stages(m: &Measured) -> String {
    if m.split.is_empty() {
        return "<p>Not timed (--no-profile).</p>".into();
    }
    let mut s = format!(
        "<svg id=\"stages\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{}\" role=\"img\">",
        m.split.len() * 20 + 4
    );
    for (i, (name, f)) in m.split.iter().enumerate() {
        let y = i * 20 + 2;
        let w = f * 400.0;
        let name = escape(name);
        let _ = write!(
            s,
            "<g class=\"bar\" data-label=\"{name}\" data-share=\"{f:.4}\"><text x=\"150\" y=\"{}\" text-anchor=\"end\">{name}</text>\
             <rect x=\"156\" y=\"{y}\" width=\"{w:.1}\" height=\"16\"></rect><text x=\"{:.1}\" y=\"{}\">{:.1}%</text></g>",
            y + 13,
            160.0 + w,
            y + 13,
            f * 100.0
        );
    }
    s.push_str("</svg>");
    s
}

fn figures(m: &Measured, v: &Verdict) -> String {
    let rows = [
        ("workers", m.workers.to_string()),
        ("images", format!("{} in {} batches", m.images, m.batches)),
        ("wall", format!("{:.3} s", m.wall)),
        ("throughput", format!("{:.0} images/s", m.images_per_s())),
        (
            "cpu",
            format!(
                "{:.3} s ({:.2} cores busy), {:.2} ms per image",
                m.cpu,
                m.cpu / m.wall.max(1e-9),
                m.cpu_ms_per_image()
            ),
        ),
        ("peak RSS", format!("{:.1} MB", m.peak_rss as f64 / 1e6)),
        ("bound", v.bound.clone()),
        ("verdict", v.finding.clone()),
        ("advice", v.advice.clone()),
    ];
    let mut s = String::from("<table>");
    for (k, val) in rows {
        let _ = write!(
            s,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape(k),
            escape(&val)
        );
    }
    s.push_str("</table>");
    s
}

/// The page of `runs` (one, or a sweep's in the order measured).
pub fn page(title: &str, runs: &[(&Measured, &Verdict)]) -> String {
    let mut body = String::new();
    if runs.len() > 1 {
        let points: Vec<plot::Point> = runs
            .iter()
            .map(|(m, _)| plot::Point {
                workers: m.workers,
                images_per_s: m.images_per_s(),
                cpu_ms_per_image: m.cpu_ms_per_image(),
            })
            .collect();
        let svg = plot::svg(title, &points);
        // the plot's own document, inline: its XML declaration is not needed in HTML
        let svg = svg.find("<svg").map_or(svg.as_str(), |i| &svg[i..]);
        let _ = write!(
            body,
            "<section id=\"sweep\"><h2>Worker sweep</h2>{svg}<table><tr><th>workers</th><th>images/s</th><th>per worker</th><th>cpu ms/image</th><th>cores busy</th><th>bound</th></tr>"
        );
        for (m, v) in runs {
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{:.0}</td><td>{:.0}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td></tr>",
                m.workers,
                m.images_per_s(),
                m.images_per_s() / m.workers.max(1) as f64,
                m.cpu_ms_per_image(),
                m.cpu / m.wall.max(1e-9),
                escape(&v.bound)
            );
        }
        body.push_str("</table></section>");
    }
    for (i, (m, v)) in runs.iter().enumerate() {
        let _ = write!(
            body,
            "<section class=\"run\" id=\"run-{i}\"><h2>{} workers</h2>{}<h3>Throughput over time</h3>{}<h3>Time per stage (share of worker time)</h3>{}</section>",
            m.workers,
            figures(m, v),
            over_time(m),
            stages(m)
        );
    }
    let title = escape(title);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title><style>\
body{{font:14px system-ui,sans-serif;margin:1em 2em;color:#111}}h2{{border-bottom:1px solid #ccc}}\
table{{border-collapse:collapse;margin:.5em 0}}td,th{{border:1px solid #ddd;padding:2px 8px;text-align:left;font-size:13px}}\
svg text{{font:12px system-ui,sans-serif;fill:#222}}svg .axis{{stroke:#888}}\
polyline.rate{{fill:none;stroke:#4a78c2;stroke-width:2}}#stages rect{{fill:#4a78c2}}\
</style></head><body><h1>{title}</h1>\n{body}\n</body></html>\n"
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn throughput_windows_count_every_image_once() {
        let timeline: Vec<(f64, usize)> = (1..=100).map(|i| (i as f64 * 0.01, i * 4)).collect();
        let pts = super::throughput(&timeline, 1.0);
        assert_eq!(pts.len(), super::WINDOWS);
        let images: f64 = pts
            .iter()
            .map(|p| p.1 * (1.0 / super::WINDOWS as f64))
            .sum();
        assert!((images - 400.0).abs() < 1e-6, "{images}");
    }
}
