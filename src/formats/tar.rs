//! WebDataset: tar files whose members are grouped into samples by key (`KEY.jpg`,
//! `KEY.cls`, ...), indexed by one pass over the tar headers (no member is read but the
//! labels).
//!
//! The tar reader takes what Python's `tarfile` writes by default (POSIX.1-2001 "pax":
//! ustar headers, with an extended header carrying `path`/`size` when a name or a number
//! does not fit, or a float mtime), GNU long names (`././@LongLink`) and plain ustar with a
//! name prefix. Every header's checksum is checked. Members other than regular files
//! (folders, links) are skipped.
//!
//! Samples are as the `webdataset` package groups them: a member's key is its path up to
//! the first dot of its base name, the rest its extension (`a/b.seg.png`: key `a/b`,
//! extension `seg.png`); consecutive members with the same key are one sample; a member
//! whose base name has no dot or starts with one is skipped. A sample's image is its
//! member whose extension is in the image list (the first of the list present), its label
//! the ASCII integer in its label member.

use super::{RecordEntry, RecordFormat};
use crate::spec::MAX_LABELS;

/// Tar block size.
const BLOCK: usize = 512;

/// The image extensions a sample's image member may have, in order of preference.
pub const DEFAULT_IMAGE: &str = "jpg;jpeg;png;webp";
/// The label member's extension.
pub const DEFAULT_LABEL: &str = "cls";

/// Why a tar cannot be indexed as a WebDataset file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TarError {
    /// The file ends inside a header or a member's data.
    #[error("truncated: {what} at byte {offset} needs {need} bytes, the file has {len}")]
    Truncated {
        /// The member (or "header").
        what: String,
        /// Where it starts.
        offset: u64,
        /// Bytes it needs up to its end.
        need: u64,
        /// The file's length.
        len: u64,
    },
    /// A header that is not a tar header, or an extended header that does not parse.
    #[error("bad tar header at byte {offset}: {reason}")]
    BadHeader {
        /// Where the header starts.
        offset: u64,
        /// Why.
        reason: String,
    },
    /// A sample without an image member.
    #[error("sample {key:?} (member at byte {offset}) has no image member (.{wanted})")]
    NoImage {
        /// The sample's key.
        key: String,
        /// Its first member's header.
        offset: u64,
        /// The image extensions looked for.
        wanted: String,
    },
    /// A sample without a label member.
    #[error("sample {key:?} (member at byte {offset}) has no label member (.{wanted})")]
    NoLabel {
        /// The sample's key.
        key: String,
        /// Its first member's header.
        offset: u64,
        /// The label extension looked for.
        wanted: String,
    },
    /// A label member that does not hold a non-negative integer.
    #[error("member {member:?} (at byte {offset}): label {text:?} is not an integer in 0..2^32")]
    BadLabel {
        /// The label member.
        member: String,
        /// Its header.
        offset: u64,
        /// What it holds (at most 40 bytes of it).
        text: String,
    },
    /// Two members of one sample with the same extension.
    #[error("member {member:?} (at byte {offset}): a second .{extension} for sample {key:?}")]
    Duplicate {
        /// The second member.
        member: String,
        /// Its header.
        offset: u64,
        /// The sample's key.
        key: String,
        /// The extension.
        extension: String,
    },
}

/// The WebDataset format: which members hold the image and the label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebDataset {
    /// Image extensions, lower case, in order of preference.
    pub image: Vec<String>,
    /// The label extension, lower case.
    pub label: String,
}

impl Default for WebDataset {
    fn default() -> WebDataset {
        WebDataset::new(DEFAULT_IMAGE, DEFAULT_LABEL)
    }
}

impl WebDataset {
    /// `image`: extensions separated by `;` (`"jpg;png"`, as `webdataset`'s `to_tuple`
    /// writes them); `label`: one extension.
    pub fn new(image: &str, label: &str) -> WebDataset {
        WebDataset {
            image: image
                .split(';')
                .map(|e| e.trim().trim_start_matches('.').to_ascii_lowercase())
                .filter(|e| !e.is_empty())
                .collect(),
            label: label.trim().trim_start_matches('.').to_ascii_lowercase(),
        }
    }
}

impl RecordFormat for WebDataset {
    type Error = TarError;

    fn name(&self) -> &'static str {
        "webdataset"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &[".tar"]
    }

    fn options(&self) -> String {
        format!("image={};label={}", self.image.join(","), self.label)
    }

    fn index(&self, bytes: &[u8]) -> Result<Vec<RecordEntry>, TarError> {
        let mut out = Vec::new();
        let mut group: Option<Group> = None;
        for member in Members::new(bytes) {
            let m = member?;
            let Some((key, ext)) = split_key(&m.name) else {
                continue;
            };
            if group.as_ref().is_none_or(|g| g.key != key) {
                if let Some(g) = group.take() {
                    out.push(self.finish(g)?);
                }
                group = Some(Group {
                    key: key.to_string(),
                    header: m.header,
                    image: None,
                    label: None,
                    seen: Vec::new(),
                });
            }
            let g = group.as_mut().ok_or_else(|| TarError::BadHeader {
                offset: m.header,
                reason: "no sample".into(),
            })?;
            let ext = ext.to_ascii_lowercase();
            if g.seen.contains(&ext) {
                return Err(TarError::Duplicate {
                    member: m.name.clone(),
                    offset: m.header,
                    key: g.key.clone(),
                    extension: ext,
                });
            }
            if let Some(rank) = self.image.iter().position(|e| *e == ext) {
                if g.image.is_none_or(|(r, _, _)| rank < r) {
                    g.image = Some((rank, m.data, m.size));
                }
            } else if ext == self.label {
                let end = m.data + m.size;
                let text = &bytes[m.data as usize..end as usize];
                g.label = Some(parse_label(text).ok_or_else(|| TarError::BadLabel {
                    member: m.name.clone(),
                    offset: m.header,
                    text: String::from_utf8_lossy(&text[..text.len().min(40)]).into_owned(),
                })?);
            }
            g.seen.push(ext);
        }
        if let Some(g) = group.take() {
            out.push(self.finish(g)?);
        }
        Ok(out)
    }
}

/// The members of one sample seen so far.
struct Group {
    key: String,
    header: u64,
    /// (rank in the image list, data offset, size).
    image: Option<(usize, u64, u64)>,
    label: Option<u32>,
    seen: Vec<String>,
}

impl WebDataset {
    fn finish(&self, g: Group) -> Result<RecordEntry, TarError> {
        let Some((_, offset, len)) = g.image else {
            return Err(TarError::NoImage {
                key: g.key,
                offset: g.header,
                wanted: self.image.join(";."),
            });
        };
        let Some(label) = g.label else {
            return Err(TarError::NoLabel {
                key: g.key,
                offset: g.header,
                wanted: self.label.clone(),
            });
        };
        let mut labels = [0; MAX_LABELS];
        labels[0] = label;
        Ok(RecordEntry {
            stored: super::Stored::Plain,
            offset,
            len,
            labels,
            key: g.key,
        })
    }
}

/// An ASCII integer in `0..2^32`, surrounding whitespace allowed (Python's `int(bytes)`).
fn parse_label(text: &[u8]) -> Option<u32> {
    let t = std::str::from_utf8(text).ok()?.trim();
    t.strip_prefix('+').unwrap_or(t).parse().ok()
}

/// `(key, extension)` of a member path as `webdataset` splits it: the key is the path up
/// to the first dot of the base name; `None` when the base name has no dot or starts
/// with one.
pub fn split_key(path: &str) -> Option<(&str, &str)> {
    let base_start = path.rfind('/').map_or(0, |i| i + 1);
    let dot = path[base_start..].find('.')?;
    if dot == 0 {
        return None;
    }
    let at = base_start + dot;
    Some((&path[..at], &path[at + 1..]))
}

/// The two zero blocks that end a tar.
pub const END_OF_ARCHIVE: [u8; 2 * BLOCK] = [0; 2 * BLOCK];

/// The bytes after `size` bytes of member data that pad it to a whole block.
pub fn padding(size: u64) -> usize {
    (BLOCK - (size % BLOCK as u64) as usize) % BLOCK
}

/// The ustar header of a regular file `name` (at most 100 bytes, ASCII) of `size` bytes
/// (below 8 GiB), mode 0644, owner 0, mtime 0: the same bytes on every machine. `None`
/// for a name or size that does not fit.
pub fn ustar_header(name: &str, size: u64) -> Option<[u8; BLOCK]> {
    if name.is_empty() || name.len() > 100 || !name.is_ascii() || size >= 1 << 33 {
        return None;
    }
    let mut h = [0u8; BLOCK];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    h[136..148].copy_from_slice(b"00000000000\0");
    h[156] = b'0';
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| b as u32).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    Some(h)
}

/// A regular file member of a tar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its path (from a pax or GNU long-name header when there is one).
    pub name: String,
    /// Where its (first) header starts.
    pub header: u64,
    /// Where its data starts.
    pub data: u64,
    /// Its size.
    pub size: u64,
}

/// The regular file members of a tar, in order (see the module); an error ends them.
pub struct Members<'a> {
    bytes: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> Members<'a> {
    /// The members of the tar `bytes`.
    pub fn new(bytes: &'a [u8]) -> Members<'a> {
        Members {
            bytes,
            pos: 0,
            done: false,
        }
    }

    fn next_member(&mut self) -> Result<Option<Member>, TarError> {
        let len = self.bytes.len() as u64;
        // What pax and GNU headers say of the next member.
        let mut long_name: Option<String> = None;
        let mut pax_size: Option<u64> = None;
        let mut first_header: Option<u64> = None;
        loop {
            let at = self.pos;
            if at >= self.bytes.len() {
                // No end-of-archive blocks: the members so far are the archive, unless a
                // pax or GNU header announced one more.
                return match first_header {
                    None => Ok(None),
                    Some(h) => Err(TarError::Truncated {
                        what: "member announced by an extended header".into(),
                        offset: h,
                        need: at as u64 - h + BLOCK as u64,
                        len,
                    }),
                };
            }
            let header = self
                .bytes
                .get(at..at + BLOCK)
                .ok_or_else(|| TarError::Truncated {
                    what: "header".into(),
                    offset: at as u64,
                    need: BLOCK as u64,
                    len,
                })?;
            if header.iter().all(|&b| b == 0) {
                return Ok(None);
            }
            let bad = |reason: String| TarError::BadHeader {
                offset: at as u64,
                reason,
            };
            check_checksum(header).map_err(bad)?;
            let header_size = number(&header[124..136]).map_err(|r| bad(format!("size: {r}")))?;
            let typeflag = header[156];
            let size = match typeflag {
                b'0' | 0 | b'7' => pax_size.unwrap_or(header_size),
                _ => header_size,
            };
            let data = at as u64 + BLOCK as u64;
            let end = data
                .checked_add(size)
                .ok_or_else(|| bad("size overflows".into()))?;
            let name = || {
                long_name
                    .clone()
                    .unwrap_or_else(|| header_name(header).into_owned())
            };
            if end > len {
                return Err(TarError::Truncated {
                    what: format!("member {:?}", name()),
                    offset: first_header.unwrap_or(at as u64),
                    need: end - first_header.unwrap_or(at as u64),
                    len,
                });
            }
            let next = end.div_ceil(BLOCK as u64) * BLOCK as u64;
            self.pos = usize::try_from(next).unwrap_or(usize::MAX);
            let body = &self.bytes[data as usize..end as usize];
            first_header.get_or_insert(at as u64);
            match typeflag {
                b'x' => {
                    for (k, v) in pax_records(body).map_err(|r| bad(format!("pax header: {r}")))? {
                        match k {
                            "path" => long_name = Some(v.to_string()),
                            "size" => {
                                pax_size = Some(v.parse().map_err(|_| {
                                    bad(format!("pax header: size {v:?} is not a number"))
                                })?)
                            }
                            _ => {}
                        }
                    }
                }
                b'L' => {
                    let n = body.split(|&b| b == 0).next().unwrap_or_default();
                    long_name = Some(String::from_utf8_lossy(n).into_owned());
                }
                b'0' | 0 | b'7' => {
                    let m = Member {
                        name: name(),
                        header: first_header.unwrap_or(at as u64),
                        data,
                        size,
                    };
                    return Ok(Some(m));
                }
                // Global pax headers, long link names, folders, links, devices: nothing
                // to read; what a pax or GNU header said applied to this entry.
                b'g' | b'K' => {}
                _ => {
                    long_name = None;
                    pax_size = None;
                    first_header = None;
                }
            }
        }
    }
}

impl Iterator for Members<'_> {
    type Item = Result<Member, TarError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.next_member().transpose();
        if !matches!(r, Some(Ok(_))) {
            self.done = true;
        }
        r
    }
}

/// The header's name: ustar's prefix and name, or the name alone (GNU, old tar).
fn header_name(h: &[u8]) -> std::borrow::Cow<'_, str> {
    let field = |f: &'_ [u8]| -> usize { f.iter().position(|&b| b == 0).unwrap_or(f.len()) };
    let name = &h[..field(&h[..100])];
    let ustar = &h[257..263] == b"ustar\0";
    let prefix = &h[345..345 + field(&h[345..500])];
    if ustar && !prefix.is_empty() {
        let mut full = prefix.to_vec();
        full.push(b'/');
        full.extend_from_slice(name);
        std::borrow::Cow::Owned(String::from_utf8_lossy(&full).into_owned())
    } else {
        String::from_utf8_lossy(name)
    }
}

/// The header checksum: the sum of its bytes with the checksum field as spaces (unsigned,
/// or signed as some old tars wrote it).
fn check_checksum(h: &[u8]) -> Result<(), String> {
    let stored = number(&h[148..156]).map_err(|r| format!("checksum field: {r}"))?;
    let field = 148..156;
    let (mut unsigned, mut signed) = (0u64, 0i64);
    for (i, &b) in h.iter().enumerate() {
        let b = if field.contains(&i) { b' ' } else { b };
        unsigned += b as u64;
        signed += b as i8 as i64;
    }
    if stored == unsigned || stored as i64 == signed {
        Ok(())
    } else {
        Err(format!(
            "checksum {stored} does not match the header's {unsigned}: not a tar header, or a damaged one"
        ))
    }
}

/// A numeric header field: octal digits (space- or NUL-terminated), or base-256 when the
/// first byte's high bit is set (GNU, for sizes past 8 GiB).
fn number(f: &[u8]) -> Result<u64, String> {
    if f.first().is_some_and(|&b| b & 0x80 != 0) {
        if f[0] & 0x40 != 0 {
            return Err("negative base-256 number".into());
        }
        let mut v: u64 = (f[0] & 0x3f) as u64;
        for &b in &f[1..] {
            v = v
                .checked_mul(256)
                .and_then(|v| v.checked_add(b as u64))
                .ok_or("base-256 number overflows")?;
        }
        return Ok(v);
    }
    let t = f
        .iter()
        .skip_while(|&&b| b == b' ' || b == 0)
        .take_while(|&&b| b != b' ' && b != 0);
    let mut v: u64 = 0;
    let mut digits = 0;
    for &b in t {
        if !(b'0'..=b'7').contains(&b) {
            return Err(format!(
                "{:?} is not an octal number",
                String::from_utf8_lossy(f)
            ));
        }
        v = v
            .checked_mul(8)
            .and_then(|v| v.checked_add((b - b'0') as u64))
            .ok_or("octal number overflows")?;
        digits += 1;
    }
    if digits == 0 && f.iter().any(|&b| b != 0 && b != b' ') {
        return Err("not a number".into());
    }
    Ok(v)
}

/// The `key=value` records of a pax extended header (`LEN key=value\n`, `LEN` counting
/// the whole record).
fn pax_records(body: &[u8]) -> Result<Vec<(&str, &str)>, String> {
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() && rest[0] != 0 {
        let space = rest
            .iter()
            .position(|&b| b == b' ')
            .ok_or("a record without a length")?;
        let n: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or("a record length that is not a number")?;
        if n <= space + 1 || n > rest.len() || rest[n - 1] != b'\n' {
            return Err(format!("a record of length {n} that does not fit"));
        }
        let kv = std::str::from_utf8(&rest[space + 1..n - 1])
            .map_err(|_| "a record that is not UTF-8")?;
        let (k, v) = kv.split_once('=').ok_or("a record without '='")?;
        out.push((k, v));
        rest = &rest[n..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ustar header for `name` of `size` bytes of type `flag`, checksummed.
    fn header(name: &str, size: u64, flag: u8) -> Vec<u8> {
        let mut h = ustar_header(name, size).expect("fits").to_vec();
        h[156] = flag;
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| b as u32).sum();
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        h
    }

    fn member(out: &mut Vec<u8>, name: &str, data: &[u8], flag: u8) {
        out.extend(header(name, data.len() as u64, flag));
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(BLOCK) * BLOCK, 0);
    }

    fn tar(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (n, d) in members {
            member(&mut out, n, d, b'0');
        }
        out.extend([0u8; 2 * BLOCK]);
        out
    }

    #[test]
    fn members_group_into_samples_by_key() {
        let t = tar(&[
            ("a/x.cls", b"3\n"),
            ("a/x.jpg", b"JPEGDATA"),
            ("a/x.json", b"{}"),
            ("a/y.seg.png", b"S"),
            ("a/y.png", b"PNG"),
            ("a/y.cls", b" 7 "),
            ("README", b"no dot: skipped"),
        ]);
        let e = WebDataset::default().index(&t).expect("indexes");
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].key, "a/x");
        assert_eq!(&t[e[0].offset as usize..][..e[0].len as usize], b"JPEGDATA");
        assert_eq!(e[0].labels[0], 3);
        assert_eq!(e[1].key, "a/y");
        assert_eq!(&t[e[1].offset as usize..][..e[1].len as usize], b"PNG");
        assert_eq!(e[1].labels[0], 7);
    }

    #[test]
    fn pax_and_gnu_long_names_name_the_next_member() {
        let long = format!("{}/k.jpg", "d".repeat(150));
        let mut t = Vec::new();
        let rec = format!("path={long}\n");
        let pax = format!("{} {rec}", rec.len() + 4);
        assert_eq!(pax.len(), rec.len() + 4);
        member(&mut t, "PaxHeaders/x", pax.as_bytes(), b'x');
        member(&mut t, "truncated-name.jpg", b"IMG", b'0');
        let lname = format!("{}/k.cls\0", "d".repeat(150));
        member(&mut t, "././@LongLink", lname.as_bytes(), b'L');
        member(&mut t, "truncated-name.cls", b"5", b'0');
        let e = WebDataset::default().index(&t).expect("indexes");
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].key, format!("{}/k", "d".repeat(150)));
        assert_eq!(e[0].labels[0], 5);
    }

    #[test]
    fn broken_tars_are_errors_naming_the_member() {
        let t = tar(&[("a.jpg", &[1u8; 1000]), ("a.cls", b"1")]);
        let e = WebDataset::default().index(&t[..900]).unwrap_err();
        assert!(
            matches!(&e, TarError::Truncated { what, .. } if what.contains("a.jpg")),
            "{e}"
        );
        let e = WebDataset::default()
            .index(&tar(&[("a.jpg", b"x"), ("b.jpg", b"y"), ("b.cls", b"1")]))
            .unwrap_err();
        assert!(
            matches!(&e, TarError::NoLabel { key, .. } if key == "a"),
            "{e}"
        );
        let e = WebDataset::default()
            .index(&tar(&[("a.cls", b"1")]))
            .unwrap_err();
        assert!(
            matches!(&e, TarError::NoImage { key, .. } if key == "a"),
            "{e}"
        );
        let e = WebDataset::default()
            .index(&tar(&[("a.jpg", b"x"), ("a.cls", b"-1")]))
            .unwrap_err();
        assert!(e.to_string().contains("\"-1\""), "{e}");
        let e = WebDataset::default()
            .index(&tar(&[("a.jpg", b"x"), ("a.jpg", b"y")]))
            .unwrap_err();
        assert!(matches!(e, TarError::Duplicate { .. }), "{e}");
        let mut t = tar(&[("a.jpg", b"x"), ("a.cls", b"1")]);
        t[10] ^= 1;
        let e = WebDataset::default().index(&t).unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
    }

    #[test]
    fn the_image_list_and_label_are_options() {
        let t = tar(&[("a.png", b"P"), ("a.webp", b"W"), ("a.txt", b"9")]);
        let e = WebDataset::new("webp;png", "txt")
            .index(&t)
            .expect("indexes");
        assert_eq!(&t[e[0].offset as usize..][..1], b"W");
        assert_eq!(e[0].labels[0], 9);
    }

    #[test]
    fn numbers_parse_octal_and_base256() {
        assert_eq!(number(b"00000001750\0"), Ok(1000));
        assert_eq!(number(b"  1750 \0\0\0\0\0"), Ok(1000));
        assert_eq!(number(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]), Ok(256));
        assert!(number(b"0000000019\0\0").is_err());
    }
}
