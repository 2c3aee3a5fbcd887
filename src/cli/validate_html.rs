//! `imgfeed validate DATA --html FILE`: the report as one self-contained page — inline SVG
//! and CSS, thumbnails as `data:` URIs, no script, nothing fetched. Every name on it (files,
//! classes, reasons) goes through `imgfeed::preview::html::escape`.

use imgfeed::codec::decoder::Decoder;
use imgfeed::ops::Decode;
use imgfeed::preview::html::escape;
use imgfeed::preview::Picture;
use imgfeed::source::{Raw, Source};
use imgfeed::validate::duplicates::{Group, Same};
use imgfeed::validate::{ValidateReport, ASPECT_BUCKETS};
use imgfeed::OnError;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Thumbnails a class shows, and the page in all.
const THUMBS_PER_CLASS: usize = 8;
const THUMBS: usize = 96;
/// The thumbnails' longer side.
const THUMB: usize = 64;
/// Points of the size scatter plot (the first ones checked).
const SCATTER: usize = 3000;

/// One dataset of the page: what was found, and the source it was found in.
pub struct Checked<'a> {
    pub report: &'a ValidateReport,
    pub source: &'a dyn Source,
}

/// A picture of the main dataset found in the other: `(its index, the other's index, how)`.
pub type Leak = (usize, usize, Same);

/// What the page needs besides the report.
pub struct Page<'a> {
    pub main: Checked<'a>,
    /// `--against`: the other dataset, and the pictures of the main one found in it.
    pub against: Option<(Checked<'a>, Vec<Leak>)>,
    /// The pipeline's `on_error` (the default for a bare dataset), and whether a pipeline
    /// file said it.
    pub on_error: (OnError, bool),
    pub decode: Decode,
    pub jpeg: String,
}

fn class_names(r: &ValidateReport) -> BTreeMap<u32, String> {
    r.classes
        .iter()
        .map(|(l, n, _, _)| (*l, n.clone().unwrap_or_else(|| format!("label {l}"))))
        .collect()
}

/// Horizontal bars: one row a `(label, count)`, the longest `width` pixels; each bar a
/// `<g class="bar" data-label=.. data-count=..>` (what the browser test reads back).
fn bars(id: &str, rows: &[(String, usize)]) -> String {
    let max = rows.iter().map(|r| r.1).max().unwrap_or(0).max(1);
    let (label_w, width, row_h) = (170usize, 420usize, 20usize);
    let mut s = format!(
        "<svg id=\"{id}\" class=\"bars\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\">",
        label_w + width + 70,
        rows.len() * row_h + 4
    );
    for (i, (label, n)) in rows.iter().enumerate() {
        let y = i * row_h + 2;
        let w = n * width / max;
        let short = escape(&imgfeed::preview::font::fit(label, 160));
        let label = escape(label);
        let _ = write!(
            s,
            "<g class=\"bar\" data-label=\"{label}\" data-count=\"{n}\"><title>{label}: {n}</title>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{label_w}\" y=\"{y}\" width=\"{w}\" height=\"{}\"></rect>\
             <text x=\"{}\" y=\"{}\">{n}</text></g>",
            label_w - 6,
            y + 14,
            short,
            row_h - 4,
            label_w + w + 4,
            y + 14,
        );
    }
    s.push_str("</svg>");
    s
}

/// Width against height of the first images, log-free: both axes to the largest side.
fn scatter(sizes: &[(u32, u32)]) -> String {
    let pts = &sizes[..sizes.len().min(SCATTER)];
    let max = pts.iter().map(|s| s.0.max(s.1)).max().unwrap_or(1).max(1) as f64;
    let side = 260.0;
    let mut s = format!(
        "<svg id=\"sizes-scatter\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{w}\" role=\"img\"><title>width × height of {} images</title>\
         <line x1=\"30\" y1=\"{b}\" x2=\"{w}\" y2=\"{b}\" class=\"axis\"></line><line x1=\"30\" y1=\"0\" x2=\"30\" y2=\"{b}\" class=\"axis\"></line>\
         <text x=\"{w}\" y=\"{t}\" text-anchor=\"end\">width ≤ {max}</text><text x=\"34\" y=\"12\">height</text>",
        pts.len(),
        w = side + 40.0,
        b = side + 10.0,
        t = side + 28.0,
    );
    for &(w, h) in pts {
        let _ = write!(
            s,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\"></circle>",
            30.0 + f64::from(w) / max * side,
            side + 10.0 - f64::from(h) / max * side
        );
    }
    s.push_str("</svg>");
    s
}

fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = String::from("<table><tr>");
    for h in head {
        let _ = write!(s, "<th>{}</th>", escape(h));
    }
    s.push_str("</tr>");
    for r in rows {
        s.push_str("<tr>");
        for c in r {
            let _ = write!(s, "<td>{}</td>", escape(c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    s
}

/// Sample `index` of `source` as a thumbnail, when it reads and decodes.
fn thumbnail(
    source: &dyn Source,
    index: usize,
    d: &mut Decoder,
    scratch: &mut Vec<u8>,
) -> Option<String> {
    let sample = source.read(index, scratch).ok()?;
    let pic = match sample.raw {
        Raw::Pixels {
            data,
            height,
            width,
        } => Picture {
            width,
            height,
            rgb: data.to_vec(),
        },
        Raw::Planar {
            data,
            height,
            width,
        } => {
            let n = height * width;
            Picture {
                width,
                height,
                rgb: (0..n * 3).map(|i| data[(i % 3) * n + i / 3]).collect(),
            }
        }
        Raw::Encoded(bytes) => {
            let mut out = Vec::new();
            let (h, w) = d.decode(bytes, &mut out).ok()?;
            out.truncate(h * w * 3);
            Picture {
                width: w,
                height: h,
                rgb: out,
            }
        }
    };
    pic.fit(THUMB).data_uri().ok()
}

fn policy_rows(on_error: (OnError, bool)) -> String {
    let (active, said) = on_error;
    let mut s = String::from("<ul class=\"policies\">");
    for (p, what) in [
        (
            OnError::Error,
            "the first bad sample stops the run: its batch comes out as an error naming the \
             file, stage and reason, and the epoch ends (exit code 1)",
        ),
        (
            OnError::Skip,
            "each bad sample is left out and listed; the following samples fill its batch, so \
             the epoch comes out shorter by the bad samples it meets",
        ),
        (
            OnError::Replace,
            "each bad sample's slot is filled by another sample of the same shard (the same \
             one for any worker count) and listed; every shard yields the batches announced",
        ),
    ] {
        let mark = if p == active {
            if said {
                " class=\"active\" title=\"the pipeline's on_error\""
            } else {
                " class=\"active\" title=\"the default\""
            }
        } else {
            ""
        };
        let _ = write!(
            s,
            "<li{mark}><code>on_error = \"{}\"</code>{}: {}</li>",
            p,
            if p == active { " (this pipeline)" } else { "" },
            escape(what)
        );
    }
    s.push_str("</ul>");
    s
}

/// A duplicate group as a line: each member's file and class.
fn group_line(g: &Group, source: &dyn Source, names: &BTreeMap<u32, String>) -> Vec<String> {
    let files: Vec<String> = g
        .members
        .iter()
        .map(|(i, l)| {
            format!(
                "{} ({})",
                source.sample_name(*i),
                names
                    .get(l)
                    .cloned()
                    .unwrap_or_else(|| format!("label {l}"))
            )
        })
        .collect();
    vec![format!("same {}", g.same.name()), files.join("  =  ")]
}

/// The page.
pub fn page(p: &Page<'_>) -> String {
    let r = p.main.report;
    let src = p.main.source;
    let names = class_names(r);
    let mut body = String::new();

    // summary
    let _ = write!(
        body,
        "<section id=\"summary\"><h2>Summary</h2>{}</section>",
        table(
            &["", ""],
            &[
                vec!["dataset".into(), r.source.clone()],
                vec![
                    "checked".into(),
                    format!(
                        "{} of {} samples in {:.2} s{}",
                        r.checked,
                        r.samples,
                        r.seconds,
                        if r.interrupted { " (interrupted)" } else { "" }
                    ),
                ],
                vec!["good".into(), (r.checked - r.bad.len()).to_string()],
                vec!["bad".into(), r.bad.len().to_string()],
                vec!["duplicate groups".into(), r.duplicates.len().to_string()],
                vec!["JPEG decoder".into(), p.jpeg.clone()],
            ]
        )
    );

    // classes
    let rows: Vec<(String, usize)> = r
        .classes
        .iter()
        .map(|(l, _, n, _)| (names.get(l).cloned().unwrap_or_default(), *n))
        .collect();
    let _ = write!(
        body,
        "<section id=\"classes\"><h2>Samples per class</h2>{}</section>",
        bars("class-histogram", &rows)
    );

    // sizes
    let buckets = {
        let mut v = Vec::new();
        let mut lo = 0;
        for ub in imgfeed::validate::SIDE_BUCKETS {
            v.push(format!("{lo}-{}", ub - 1));
            lo = ub;
        }
        v.push(format!("{lo}+"));
        v
    };
    let side_rows: Vec<(String, usize)> = buckets.into_iter().zip(r.shorter_side).collect();
    let mut aspect_rows = Vec::new();
    let mut lo = 0.0;
    for (i, ub) in ASPECT_BUCKETS.iter().enumerate() {
        aspect_rows.push((format!("{lo:.2}-{ub:.2}"), r.aspect[i]));
        lo = *ub;
    }
    aspect_rows.push((format!("{lo:.2}+"), r.aspect[ASPECT_BUCKETS.len()]));
    let _ = write!(
        body,
        "<section id=\"sizes\"><h2>Image sizes</h2>{}<h3>Shorter side (pixels)</h3>{}<h3>Aspect ratio (width / height)</h3>{}<h3>Width × height</h3>{}</section>",
        table(
            &["", "min", "median", "max"],
            &[
                vec!["width".into(), r.width.min.to_string(), r.width.median.to_string(), r.width.max.to_string()],
                vec!["height".into(), r.height.min.to_string(), r.height.median.to_string(), r.height.max.to_string()],
            ]
        ),
        bars("shorter-side", &side_rows),
        bars("aspect", &aspect_rows),
        scatter(&r.sizes)
    );

    // formats and colours
    let fmt_rows: Vec<(String, usize)> =
        r.formats.iter().map(|(f, n)| (f.to_string(), *n)).collect();
    let c = &r.colors;
    let colour_rows: Vec<(String, usize)> = [
        ("gray", c.gray),
        ("cmyk", c.cmyk),
        ("alpha", c.alpha),
        ("palette", c.palette),
        ("16-bit", c.sixteen_bit),
        ("progressive", c.progressive),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v))
    .collect();
    let _ = write!(
        body,
        "<section id=\"formats\"><h2>Formats and colour modes</h2>{}{}<p>Every image becomes 8-bit RGB on decode: grey is spread to three channels, CMYK converted, alpha dropped, palettes expanded, 16 bits rounded.</p></section>",
        bars("format-counts", &fmt_rows),
        bars("colour-counts", &colour_rows)
    );

    // bad files
    let mut bad_rows = Vec::new();
    for e in &r.bad {
        match e {
            imgfeed::Error::Sample {
                file,
                stage,
                kind,
                reason,
                ..
            } => bad_rows.push(vec![
                file.clone(),
                kind.name().to_string(),
                stage.to_string(),
                reason.clone(),
            ]),
            other => bad_rows.push(vec![
                String::new(),
                "other".into(),
                String::new(),
                other.to_string(),
            ]),
        }
    }
    let by_kind: Vec<(String, usize)> = r
        .bad_by_kind()
        .into_iter()
        .map(|(k, n)| (k.name().to_string(), n))
        .collect();
    let _ = write!(
        body,
        "<section id=\"bad\"><h2>Bad files ({})</h2>{}{}<h3>What a run does with them</h3>{}</section>",
        r.bad.len(),
        if by_kind.is_empty() { "<p>None: every sample reads and decodes.</p>".to_string() } else { bars("bad-kinds", &by_kind) },
        if bad_rows.is_empty() { String::new() } else { table(&["file", "kind", "stage", "reason"], &bad_rows) },
        policy_rows(p.on_error)
    );

    // duplicates
    let within: Vec<Vec<String>> = r
        .duplicates
        .iter()
        .filter(|g| !g.across_classes())
        .map(|g| group_line(g, src, &names))
        .collect();
    let across: Vec<Vec<String>> = r
        .duplicates
        .iter()
        .filter(|g| g.across_classes())
        .map(|g| group_line(g, src, &names))
        .collect();
    let none = "<p class=\"none\">None.</p>".to_string();
    let _ = write!(
        body,
        "<section id=\"duplicates\"><h2>Exact duplicates</h2><p>The same bytes, or the same decoded pixels in other bytes.</p>\
         <h3>Within a class ({})</h3>{}<h3>Across classes: one picture, two labels ({})</h3>{}",
        within.len(),
        if within.is_empty() { none.clone() } else { table(&["", "samples"], &within) },
        across.len(),
        if across.is_empty() { none.clone() } else { table(&["", "samples"], &across) },
    );
    if let Some((other, leaks)) = &p.against {
        let other_names = class_names(other.report);
        let rows: Vec<Vec<String>> = leaks
            .iter()
            .map(|(i, j, same)| {
                let label = |r: &ValidateReport, idx: usize, n: &BTreeMap<u32, String>| {
                    r.digests
                        .binary_search_by_key(&idx, |d| d.index)
                        .ok()
                        .and_then(|k| n.get(&r.digests[k].label).cloned())
                        .unwrap_or_default()
                };
                vec![
                    format!("same {}", same.name()),
                    format!("{} ({})", src.sample_name(*i), label(r, *i, &names)),
                    format!(
                        "{} ({})",
                        other.source.sample_name(*j),
                        label(other.report, *j, &other_names)
                    ),
                ]
            })
            .collect();
        let _ = write!(
            body,
            "<h3 id=\"leakage\">In both datasets: {} (leakage into {})</h3>{}",
            leaks.len(),
            escape(&other.report.source),
            if rows.is_empty() {
                none
            } else {
                table(&["", "this dataset", "the other"], &rows)
            }
        );
    }
    body.push_str("</section>");

    // thumbnails
    let mut d = Decoder::new(&p.decode);
    let mut scratch = Vec::new();
    let mut shown = 0;
    body.push_str("<section id=\"thumbnails\"><h2>Readable samples, by class</h2>");
    let mut per_class: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for dg in r.digests.iter().filter(|d| d.pixels.is_some()) {
        let v = per_class.entry(dg.label).or_default();
        if v.len() < THUMBS_PER_CLASS {
            v.push(dg.index);
        }
    }
    for (label, indices) in &per_class {
        let _ = write!(
            body,
            "<div class=\"class\"><h3>{}</h3>",
            escape(names.get(label).map_or("", String::as_str))
        );
        for &i in indices {
            if shown == THUMBS {
                break;
            }
            if let Some(uri) = thumbnail(src, i, &mut d, &mut scratch) {
                let name = escape(&src.sample_name(i));
                let _ = write!(
                    body,
                    "<figure title=\"{name}\"><img alt=\"{name}\" src=\"{uri}\"><figcaption>{name}</figcaption></figure>"
                );
                shown += 1;
            }
        }
        body.push_str("</div>");
    }
    body.push_str("</section>");

    // ignored entries
    if !r.ignored.is_empty() {
        let rows: Vec<Vec<String>> = r
            .ignored
            .iter()
            .map(|(path, why)| vec![path.to_string_lossy().into_owned(), why.name().to_string()])
            .collect();
        let _ = write!(
            body,
            "<section id=\"ignored\"><h2>Entries that are not samples ({})</h2>{}</section>",
            rows.len(),
            table(&["entry", "why"], &rows)
        );
    }

    let title = escape(&format!("imgfeed validate: {}", r.source));
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title><style>\
body{{font:14px system-ui,sans-serif;margin:1em 2em;color:#111;background:#fff}}\
h2{{border-bottom:1px solid #ccc;margin-top:1.6em}}\
table{{border-collapse:collapse;margin:.5em 0}}td,th{{border:1px solid #ddd;padding:2px 8px;text-align:left;vertical-align:top;font-size:13px}}\
svg.bars rect{{fill:#4a78c2}}svg text{{font:12px system-ui,sans-serif;fill:#222}}\
svg .axis{{stroke:#888}}#sizes-scatter circle{{fill:#4a78c2;fill-opacity:.5}}\
figure{{display:inline-block;margin:4px;width:{t}px;vertical-align:top}}figure img{{display:block;margin:auto}}\
figcaption{{font-size:10px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}}\
.policies .active{{font-weight:bold}}\
</style></head><body><h1>{title}</h1>\n{body}\n</body></html>\n",
        t = THUMB + 16
    )
}
