//! The SVG plot of `imgfeed bench --sweep-workers ... --plot FILE`: images/s (left axis)
//! and CPU milliseconds per image (right axis) against the number of workers. Plain SVG,
//! written by hand: two polylines, their points, axes with ticks and a legend.

use std::fmt::Write;

/// One measured worker count.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    pub workers: usize,
    pub images_per_s: f64,
    pub cpu_ms_per_image: f64,
}

const W: f64 = 640.0;
const H: f64 = 400.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 70.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// A "nice" upper bound for an axis holding values up to `max`.
fn nice(max: f64) -> f64 {
    if !(max > 0.0 && max.is_finite()) {
        return 1.0;
    }
    let mag = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|&v| v >= max)
        .unwrap_or(10.0 * mag)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The plot of `points` (in the order measured) as an SVG document.
pub fn svg(title: &str, points: &[Point]) -> String {
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let max_w = points.iter().map(|p| p.workers).max().unwrap_or(1).max(1) as f64;
    let min_w = points.iter().map(|p| p.workers).min().unwrap_or(1) as f64;
    let span = (max_w - min_w).max(1.0);
    let ymax = nice(points.iter().map(|p| p.images_per_s).fold(0.0, f64::max));
    let cmax = nice(
        points
            .iter()
            .map(|p| p.cpu_ms_per_image)
            .fold(0.0, f64::max),
    );
    let x = |w: usize| LEFT + (w as f64 - min_w) / span * pw;
    let y = |v: f64| TOP + ph - v / ymax * ph;
    let yc = |v: f64| TOP + ph - v / cmax * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        W / 2.0,
        escape(title)
    );
    // axes
    let _ = writeln!(
        s,
        r#"<path d="M{LEFT} {TOP} V{b} H{r} V{TOP}" fill="none" stroke="black"/>"#,
        b = TOP + ph,
        r = LEFT + pw
    );
    for k in 0..=4 {
        let f = k as f64 / 4.0;
        let ty = TOP + ph - f * ph;
        let _ = writeln!(
            s,
            r#"<line x1="{LEFT}" y1="{ty}" x2="{}" y2="{ty}" stroke="gainsboro"/><text x="{}" y="{}" text-anchor="end">{:.0}</text><text x="{}" y="{}">{:.2}</text>"#,
            LEFT + pw,
            LEFT - 6.0,
            ty + 4.0,
            f * ymax,
            LEFT + pw + 6.0,
            ty + 4.0,
            f * cmax
        );
    }
    for p in points {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            x(p.workers),
            TOP + ph + 18.0,
            p.workers
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">workers</text>"#,
        LEFT + pw / 2.0,
        H - 10.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(16 {m}) rotate(-90)" text-anchor="middle" fill="steelblue">images/s</text><text transform="translate({r} {m}) rotate(90)" text-anchor="middle" fill="darkorange">CPU ms per image</text>"#,
        m = TOP + ph / 2.0,
        r = W - 14.0
    );
    // the two series
    for (color, f) in [
        (
            "steelblue",
            &(|p: &Point| y(p.images_per_s)) as &dyn Fn(&Point) -> f64,
        ),
        ("darkorange", &|p: &Point| yc(p.cpu_ms_per_image)),
    ] {
        let pts: Vec<String> = points
            .iter()
            .map(|p| format!("{:.1},{:.1}", x(p.workers), f(p)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            pts.join(" ")
        );
        for p in points {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{color}"/>"#,
                x(p.workers),
                f(p)
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_bounds_hold_the_maximum() {
        assert_eq!(nice(0.0), 1.0);
        assert_eq!(nice(1720.0), 2000.0);
        assert_eq!(nice(2.3), 2.5);
        assert_eq!(nice(0.7), 1.0);
    }

    #[test]
    fn the_plot_has_a_point_per_run_and_escapes_its_title() {
        let pts = [
            Point {
                workers: 1,
                images_per_s: 900.0,
                cpu_ms_per_image: 1.1,
            },
            Point {
                workers: 2,
                images_per_s: 1700.0,
                cpu_ms_per_image: 1.15,
            },
        ];
        let s = svg("a<b", &pts);
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<circle").count(), 4);
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains("a&lt;b"));
    }
}
