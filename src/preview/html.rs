//! The preview as one self-contained page: each tile a PNG inline (`data:` URI), and on
//! hover (CSS, and the `title` tooltip) what the pipeline did to it — its source index, batch
//! and slot, file, label or label weights, and the pipeline's stages. No script, no network.
//! [`escape`] is what every page imgfeed writes puts text through.

use super::{sheet, Preview};
use crate::error::Result;

/// `s` safe as HTML text and inside a quoted attribute: `&`, `<`, `>`, `"` and `'` as
/// entities, control characters (but tab and newline) as `U+FFFD`.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' => out.push(c),
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// The page of `p`, titled `title`.
pub fn page(p: &Preview, title: &str) -> Result<String> {
    let mut body = String::new();
    for t in &p.tiles {
        let mut info = vec![
            format!("sample {} (batch {}, slot {})", t.index, t.batch, t.slot),
            format!("file: {}", t.file),
        ];
        if t.weights.is_empty() {
            info.push(format!("label: {}", t.label));
        } else {
            info.push("label weights (one-hot / mixed by a batch op):".into());
            info.extend(t.weights.iter().map(|(n, w)| format!("  {n}: {w:.3}")));
        }
        info.push(format!("stages: {}", p.stages.join(" → ")));
        if t.source.is_some() {
            info.push("left: the decoded original; right: what the trainer gets".into());
        }
        let text = info.join("\n");
        let uri = sheet::tile(p, t).data_uri()?;
        body.push_str(&format!(
            "<figure class=\"tile\" title=\"{}\" data-index=\"{}\"><img alt=\"{}\" src=\"{uri}\"><figcaption>{}</figcaption><pre class=\"info\">{}</pre></figure>\n",
            escape(&text),
            t.index,
            escape(&t.file),
            escape(&t.label),
            escape(&text),
        ));
    }
    let notes: String = p
        .notes
        .iter()
        .map(|n| format!("<li>{}</li>", escape(n)))
        .collect();
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>\
body{{font:14px system-ui,sans-serif;margin:1em;background:#fafafa;color:#111}}\
.grid{{display:flex;flex-wrap:wrap;gap:8px}}\
.tile{{position:relative;margin:0}}\
.tile img{{display:block;image-rendering:pixelated}}\
.tile figcaption{{position:absolute;left:-9999px}}\
.info{{display:none;position:absolute;top:0;left:0;z-index:2;margin:0;padding:6px;background:rgba(0,0,0,.85);color:#fff;font:12px monospace;white-space:pre-wrap;min-width:16em}}\
.tile:hover .info{{display:block}}\
</style></head><body>\n<h1>{t}</h1>\n<p>stages: {stages}</p><ul>{notes}</ul>\n<div class=\"grid\">\n{body}</div>\n</body></html>\n",
        t = escape(title),
        stages = escape(&p.stages.join(" → ")),
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn escape_leaves_no_markup() {
        let s = super::escape("<script>alert('x')</script> & \"q\"\u{1}");
        assert_eq!(
            s,
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;\u{fffd}"
        );
    }
}
