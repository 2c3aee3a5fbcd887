//! Exact duplicates among the samples `validate` read: the same bytes (a file copied), or
//! the same decoded pixels in other bytes (re-encoded losslessly, another format) — within a
//! class, across classes (one picture under two labels: label noise), and between two
//! datasets (a training set's picture in the validation set: leakage).
//!
//! Each sample leaves a [`Digest`] (8 bytes of each fingerprint, its label and index); the
//! groups are found by sorting them, so memory is 24 bytes a sample, whatever the images.

use crate::imgproc::fingerprint::fold;

/// What `validate` keeps of one readable sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Digest {
    /// Its index in the source.
    pub index: usize,
    /// Its (first) label.
    pub label: u32,
    /// Fingerprint of its bytes as stored.
    pub bytes: u64,
    /// Fingerprint of its decoded pixels and their size (`None`: it did not decode).
    pub pixels: Option<u64>,
}

/// The fingerprint of an `h × w` picture's pixels.
pub fn pixels_digest(h: usize, w: usize, rgb: &[u8]) -> u64 {
    fold(
        fold(crate::imgproc::fingerprint::fingerprint(rgb), h as u64),
        w as u64,
    )
}

/// How the members of a group are the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Same {
    /// Byte for byte.
    Bytes,
    /// Other bytes, the same decoded pixels.
    Pixels,
}

impl Same {
    /// `bytes` or `pixels`.
    pub fn name(self) -> &'static str {
        match self {
            Same::Bytes => "bytes",
            Same::Pixels => "pixels",
        }
    }
}

/// Samples that are the same picture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// Bytes, or only pixels.
    pub same: Same,
    /// `(index, label)` of each, by index.
    pub members: Vec<(usize, u32)>,
}

impl Group {
    /// Its members carry more than one label (label noise).
    pub fn across_classes(&self) -> bool {
        self.members.windows(2).any(|w| w[0].1 != w[1].1)
    }
}

/// Runs of equal keys (of two or more) among `items`, sorted by key then index.
fn runs<K: Ord + Copy>(mut items: Vec<(K, usize, u32)>) -> Vec<Vec<(usize, u32)>> {
    items.sort_unstable();
    let mut out = Vec::new();
    let mut i = 0;
    while i < items.len() {
        let j = i + items[i..].iter().take_while(|x| x.0 == items[i].0).count();
        if j - i > 1 {
            out.push(items[i..j].iter().map(|x| (x.1, x.2)).collect());
        }
        i = j;
    }
    out
}

/// The duplicate groups among `digests`: byte-identical samples, then pictures whose pixels
/// are identical in two or more different files (a group of byte copies counts once there).
pub fn groups(digests: &[Digest]) -> Vec<Group> {
    let mut out: Vec<Group> = runs(
        digests
            .iter()
            .map(|d| (d.bytes, d.index, d.label))
            .collect(),
    )
    .into_iter()
    .map(|members| Group {
        same: Same::Bytes,
        members,
    })
    .collect();
    // one sample stands for each set of byte copies: a pixel group is two or more files
    // with different bytes
    let mut firsts: Vec<(u64, u64, usize, u32)> = digests
        .iter()
        .filter_map(|d| Some((d.pixels?, d.bytes, d.index, d.label)))
        .collect();
    firsts.sort_unstable();
    firsts.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    out.extend(
        runs(firsts.into_iter().map(|(p, _, i, l)| (p, i, l)).collect())
            .into_iter()
            .map(|members| Group {
                same: Same::Pixels,
                members,
            }),
    );
    out.sort_by(|a, b| (a.same, a.members[0].0).cmp(&(b.same, b.members[0].0)));
    out
}

/// Pictures of `a` that are in `b` too: `(a's index, b's index, how)`, by a's index. A
/// pair with the same bytes is not listed again as the same pixels.
pub fn between(a: &[Digest], b: &[Digest]) -> Vec<(usize, usize, Same)> {
    use std::collections::HashMap;
    let mut by_bytes: HashMap<u64, usize> = HashMap::new();
    let mut by_pixels: HashMap<u64, usize> = HashMap::new();
    for d in b {
        by_bytes.entry(d.bytes).or_insert(d.index);
        if let Some(p) = d.pixels {
            by_pixels.entry(p).or_insert(d.index);
        }
    }
    let mut out: Vec<(usize, usize, Same)> = a
        .iter()
        .filter_map(|d| {
            if let Some(&j) = by_bytes.get(&d.bytes) {
                return Some((d.index, j, Same::Bytes));
            }
            let j = *by_pixels.get(&d.pixels?)?;
            Some((d.index, j, Same::Pixels))
        })
        .collect();
    out.sort_unstable_by_key(|x| x.0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(index: usize, label: u32, bytes: u64, pixels: u64) -> Digest {
        Digest {
            index,
            label,
            bytes,
            pixels: Some(pixels),
        }
    }

    #[test]
    fn copies_and_re_encodings_are_grouped_once() {
        let v = [
            d(0, 0, 10, 100), // 0, 1: copies in class 0
            d(1, 0, 10, 100),
            d(2, 1, 20, 200), // 2 (class 1), 3 (class 0): the same pixels
            d(3, 0, 21, 200),
            d(4, 1, 30, 300), // alone
            d(5, 0, 22, 200), // a third encoding of 2's picture
        ];
        let g = groups(&v);
        assert_eq!(
            g,
            vec![
                Group {
                    same: Same::Bytes,
                    members: vec![(0, 0), (1, 0)]
                },
                Group {
                    same: Same::Pixels,
                    members: vec![(2, 1), (3, 0), (5, 0)]
                },
            ]
        );
        assert!(!g[0].across_classes());
        assert!(g[1].across_classes());
    }

    #[test]
    fn between_finds_each_leak_once() {
        let a = [d(0, 0, 10, 100), d(1, 0, 11, 101), d(2, 0, 12, 102)];
        let b = [d(7, 0, 10, 100), d(8, 0, 13, 102)];
        assert_eq!(
            between(&a, &b),
            vec![(0, 7, Same::Bytes), (2, 8, Same::Pixels)]
        );
    }
}
