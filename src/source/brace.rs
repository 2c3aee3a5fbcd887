//! Brace patterns naming a list of files, as `webdataset` (its `braceexpand`) reads them:
//! `train-{000000..000146}.tar` (a range, zero-padded to the width written),
//! `{train,val}-{0..3}.tar` (a list), several in one name; and lists joined with `::`.

/// Most names a pattern may expand to (a typo like `{0..99999999999}` is an error, not an
/// allocation).
pub const MAX_NAMES: usize = 10_000_000;

/// Why a pattern does not expand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BraceError {
    /// A `{` without its `}`.
    #[error("pattern {pattern:?}: a '{{' without its '}}'")]
    Unclosed {
        /// The pattern.
        pattern: String,
    },
    /// More than [`MAX_NAMES`] names.
    #[error("pattern {pattern:?} names more than {MAX_NAMES} files")]
    TooMany {
        /// The pattern.
        pattern: String,
    },
}

/// Whether `text` is a pattern (or a `::` list) rather than one name.
pub fn is_pattern(text: &str) -> bool {
    text.contains('{') || text.contains("::")
}

/// The names `text` stands for, in order: its `::`-separated parts, each brace-expanded.
pub fn expand(text: &str) -> Result<Vec<String>, BraceError> {
    let mut out = Vec::new();
    for part in text.split("::").filter(|p| !p.is_empty()) {
        expand_into(part, text, &mut out)?;
    }
    Ok(out)
}

fn expand_into(part: &str, pattern: &str, out: &mut Vec<String>) -> Result<(), BraceError> {
    let Some(open) = part.find('{') else {
        if out.len() >= MAX_NAMES {
            return Err(BraceError::TooMany {
                pattern: pattern.into(),
            });
        }
        out.push(part.to_string());
        return Ok(());
    };
    let close = matching(part, open).ok_or_else(|| BraceError::Unclosed {
        pattern: pattern.into(),
    })?;
    let (head, inner, tail) = (&part[..open], &part[open + 1..close], &part[close + 1..]);
    if let Some(range) = range(inner) {
        let (a, b, width) = range;
        let count = a.abs_diff(b) as usize + 1;
        if count > MAX_NAMES || out.len() + count > MAX_NAMES {
            return Err(BraceError::TooMany {
                pattern: pattern.into(),
            });
        }
        let step: i128 = if a <= b { 1 } else { -1 };
        let mut n = a as i128;
        for _ in 0..count {
            expand_into(&format!("{head}{n:0width$}{tail}"), pattern, out)?;
            n += step;
        }
    } else {
        for item in split_top(inner) {
            expand_into(&format!("{head}{item}{tail}"), pattern, out)?;
        }
    }
    Ok(())
}

/// The `}` closing the `{` at `open`.
fn matching(s: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `a..b` of non-negative integers: `(a, b, width)`, the width that of a zero-padded end.
fn range(inner: &str) -> Option<(u64, u64, usize)> {
    let (a, b) = inner.split_once("..")?;
    let num = |t: &str| {
        (!t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()))
            .then(|| t.parse::<u64>().ok())
            .flatten()
    };
    let (x, y) = (num(a)?, num(b)?);
    let padded = |t: &str| t.len() > 1 && t.starts_with('0');
    let width = if padded(a) || padded(b) {
        a.len().max(b.len())
    } else {
        0
    };
    Some((x, y, width))
}

/// The comma-separated items of a list, commas inside nested braces kept.
fn split_top(inner: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_lists_and_joins_expand_in_order() {
        assert_eq!(
            expand("d/train-{0008..0011}.tar").expect("expands"),
            [
                "d/train-0008.tar",
                "d/train-0009.tar",
                "d/train-0010.tar",
                "d/train-0011.tar"
            ]
        );
        assert_eq!(
            expand("{a,b}-{1..2}.tar::c.tar").expect("expands"),
            ["a-1.tar", "a-2.tar", "b-1.tar", "b-2.tar", "c.tar"]
        );
        assert_eq!(expand("x{3..1}").expect("expands"), ["x3", "x2", "x1"]);
        assert_eq!(expand("{a,{b,c}}").expect("expands"), ["a", "b", "c"]);
        assert_eq!(expand("plain.tar").expect("expands"), ["plain.tar"]);
    }

    #[test]
    fn bad_patterns_are_errors() {
        assert!(matches!(expand("a{1..3"), Err(BraceError::Unclosed { .. })));
        assert!(matches!(
            expand("a{0..99999999999}"),
            Err(BraceError::TooMany { .. })
        ));
    }
}
