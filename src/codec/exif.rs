//! The EXIF orientation tag (0x0112) of a JPEG or PNG, read as Pillow's `getexif()` reads
//! it for `ImageOps.exif_transpose`: the first `APP1` segment that starts `Exif\0\0` (a
//! JPEG) or the `eXIf` chunk before the first `IDAT` (a PNG), its TIFF header (`II` or `MM`,
//! then 42) and the first directory's entries. Whatever cannot be read — no EXIF, a
//! damaged TIFF header, a directory cut short before the tag, a tag of a type Pillow
//! skips or with more than one value — is orientation 1, as Pillow leaves such an image
//! as it is. A bounds-checked parser of a few dozen bytes: nothing here allocates.

use super::decoder::{sniff, Format};

/// An EXIF orientation: 1 (as stored) to 8; anything else means 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Orientation(u8);

impl Orientation {
    /// As stored (tag value 1, or no usable tag).
    pub const NORMAL: Orientation = Orientation(1);

    /// The orientation of tag value `v`: 2 to 8 as they are, anything else 1 (Pillow's
    /// `exif_transpose` does nothing for values outside 2–8).
    pub fn from_tag(v: u32) -> Orientation {
        match v {
            2..=8 => Orientation(v as u8),
            _ => Orientation::NORMAL,
        }
    }

    /// The tag value, 1 to 8.
    pub fn value(self) -> u8 {
        self.0
    }

    /// Whether the stored pixels are shown as they are.
    pub fn is_normal(self) -> bool {
        self.0 == 1
    }

    /// Whether showing the image swaps its height and width (5 to 8: a quarter turn).
    pub fn swaps_axes(self) -> bool {
        self.0 >= 5
    }

    /// `(height, width)` of the image shown, for stored `(h, w)`.
    pub fn shown(self, (h, w): (usize, usize)) -> (usize, usize) {
        if self.swaps_axes() {
            (w, h)
        } else {
            (h, w)
        }
    }
}

/// The orientation `bytes` (an encoded image) carry; [`Orientation::NORMAL`] for formats
/// without EXIF here (BMP, WebP) and for missing or unreadable EXIF. Without the tag in the
/// EXIF, a JPEG's XMP packet may give it (`tiff:Orientation`), as Pillow reads it.
pub fn orientation(bytes: &[u8]) -> Orientation {
    let (exif, xmp) = match sniff(bytes) {
        Some(Format::Jpeg) => jpeg_segments(bytes),
        Some(Format::Png) => (png_exif(bytes), None),
        _ => (None, None),
    };
    let tag = match exif.map_or(Tag::Absent, tiff_orientation) {
        Tag::Absent => xmp.and_then(xmp_orientation),
        Tag::Present(v) => v,
    };
    tag.map_or(Orientation::NORMAL, Orientation::from_tag)
}

/// The TIFF data of the first `APP1` segment starting `Exif\0\0` and the first XMP
/// packet (`APP1` starting `http://ns.adobe.com/xap/1.0/\0`), before the first scan.
fn jpeg_segments(b: &[u8]) -> (Option<&[u8]>, Option<&[u8]>) {
    const XMP: &[u8] = b"http://ns.adobe.com/xap/1.0/\0";
    let (mut exif, mut xmp) = (None, None);
    let mut pos = 2usize; // after SOI
    while let Some((marker, body, next)) = segment(b, pos) {
        if marker == 0xE1 {
            if exif.is_none() && body.starts_with(b"Exif\0\0") {
                exif = Some(strip_exif(body));
            } else if xmp.is_none() && body.starts_with(XMP) {
                xmp = Some(&body[XMP.len()..]);
            }
        }
        pos = next;
    }
    (exif, xmp)
}

/// The marker segment at `pos` before the first scan: `(marker, body, next position)`.
fn segment(b: &[u8], mut pos: usize) -> Option<(u8, &[u8], usize)> {
    loop {
        // Fill bytes (0xFF runs) may precede a marker.
        while *b.get(pos)? == 0xFF && *b.get(pos + 1)? == 0xFF {
            pos += 1;
        }
        if *b.get(pos)? != 0xFF {
            return None;
        }
        match *b.get(pos + 1)? {
            0xD8 | 0x01 | 0xD0..=0xD7 => pos += 2, // no length
            0xDA | 0xD9 => return None,            // the scan, or the end: no header after
            marker => {
                let len = usize::from(u16::from_be_bytes([*b.get(pos + 2)?, *b.get(pos + 3)?]));
                if len < 2 {
                    return None;
                }
                let body = b.get(pos + 4..(pos + 2 + len).min(b.len()))?;
                return Some((marker, body, pos + 2 + len));
            }
        }
    }
}

/// Pillow strips `Exif\0\0` once or twice.
fn strip_exif(d: &[u8]) -> &[u8] {
    let d = d.strip_prefix(b"Exif\0\0").unwrap_or(d);
    d.strip_prefix(b"Exif\0\0").unwrap_or(d)
}

/// The `eXIf` chunk's data, among the chunks before the first `IDAT`.
fn png_exif(b: &[u8]) -> Option<&[u8]> {
    super::inspect::png_header_chunks(b)
        .find(|(kind, _, _)| *kind == b"eXIf")
        .and_then(|(_, at, len)| b.get(at..at.checked_add(len)?))
        .map(strip_exif)
}

/// Pillow's `tiff:Orientation(="|>)([0-9])` in an XMP packet.
fn xmp_orientation(x: &[u8]) -> Option<u32> {
    const KEY: &[u8] = b"tiff:Orientation";
    (0..x.len().saturating_sub(KEY.len() + 1)).find_map(|i| {
        let rest = x[i..].strip_prefix(KEY)?;
        let digit = match rest {
            [b'=', b'"', d, ..] | [b'>', d, ..] => *d,
            _ => return None,
        };
        digit.is_ascii_digit().then(|| u32::from(digit - b'0'))
    })
}

/// Tag 0x0112 in EXIF: absent, or present (of a type Pillow reads) with the integer it
/// holds if it is a single one.
#[derive(Debug, PartialEq, Eq)]
enum Tag {
    Absent,
    Present(Option<u32>),
}

/// Tag 0x0112 of the first directory of TIFF data `t`, as Pillow's
/// `ImageFileDirectory_v2` reads it: entries in order (a later duplicate wins), reading
/// stops at an entry cut short (the ones before it count), types Pillow does not know are
/// skipped, and only a single integer value is an orientation. A damaged TIFF header is
/// no EXIF (where Pillow's `exif_transpose` raises).
fn tiff_orientation(t: &[u8]) -> Tag {
    let le = match t.get(..4) {
        Some(b"II\x2a\x00") => true,
        Some(b"MM\x00\x2a") => false,
        _ => return Tag::Absent,
    };
    let u16_at = |at: usize| -> Option<u32> {
        let s: [u8; 2] = t.get(at..at.checked_add(2)?)?.try_into().ok()?;
        Some(u32::from(if le {
            u16::from_le_bytes(s)
        } else {
            u16::from_be_bytes(s)
        }))
    };
    let u32_at = |at: usize| -> Option<u32> {
        let s: [u8; 4] = t.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(if le {
            u32::from_le_bytes(s)
        } else {
            u32::from_be_bytes(s)
        })
    };
    let mut found = Tag::Absent;
    let Some(ifd) = u32_at(4).map(|v| v as usize) else {
        return found;
    };
    let Some(count) = u16_at(ifd) else {
        return found;
    };
    for i in 0..count as usize {
        let at = ifd + 2 + 12 * i;
        let (Some(tag), Some(typ), Some(n), Some(_)) =
            (u16_at(at), u16_at(at + 2), u32_at(at + 4), u32_at(at + 8))
        else {
            break; // cut short: Pillow keeps what it read
        };
        if tag != 0x0112 || !(1..=13).contains(&typ) && typ != 16 {
            continue;
        }
        // SHORT, LONG and their signed kinds (and signed BYTE) unpack to an integer;
        // BYTE and UNDEFINED to bytes, which no orientation equals.
        let value = match (typ, n) {
            (6, 1) => t.get(at + 8).map(|&v| u32::from(v)),
            (3 | 8, 1) => u16_at(at + 8),
            (4 | 9, 1) => u32_at(at + 8),
            _ => None,
        };
        found = Tag::Present(value);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiff_le(entries: &[(u16, u16, u32, [u8; 4])]) -> Vec<u8> {
        let mut t = b"II\x2a\x00\x08\x00\x00\x00".to_vec();
        t.extend((entries.len() as u16).to_le_bytes());
        for (tag, typ, n, v) in entries {
            t.extend(tag.to_le_bytes());
            t.extend(typ.to_le_bytes());
            t.extend(n.to_le_bytes());
            t.extend(v);
        }
        t.extend([0, 0, 0, 0]);
        t
    }

    #[test]
    fn reads_the_tag_from_the_first_directory() {
        let t = tiff_le(&[(0x010F, 2, 4, *b"abc\0"), (0x0112, 3, 1, [6, 0, 0, 0])]);
        assert_eq!(tiff_orientation(&t), Tag::Present(Some(6)));
        // big-endian
        let mut m = b"MM\x00\x2a\x00\x00\x00\x08\x00\x01".to_vec();
        m.extend([0x01, 0x12, 0x00, 0x03, 0, 0, 0, 1, 0x00, 0x08, 0, 0]);
        assert_eq!(tiff_orientation(&m), Tag::Present(Some(8)));
        // two values, an unknown type, a damaged header: no orientation
        let two = tiff_le(&[(0x0112, 3, 2, [6, 0, 3, 0])]);
        assert_eq!(tiff_orientation(&two), Tag::Present(None));
        let unknown = tiff_le(&[(0x0112, 99, 1, [6, 0, 0, 0])]);
        assert_eq!(tiff_orientation(&unknown), Tag::Absent);
        assert_eq!(tiff_orientation(b"XX\x2a\x00\x08\x00\x00\x00"), Tag::Absent);
        // a directory cut short after the tag keeps it
        let t = tiff_le(&[(0x0112, 3, 1, [3, 0, 0, 0]), (0x0110, 2, 4, *b"abc\0")]);
        assert_eq!(tiff_orientation(&t[..t.len() - 10]), Tag::Present(Some(3)));
        assert_eq!(xmp_orientation(b"<x tiff:Orientation=\"6\"/>"), Some(6));
        assert_eq!(
            xmp_orientation(b"<tiff:Orientation>8</tiff:Orientation>"),
            Some(8)
        );
        assert_eq!(xmp_orientation(b"<tiff:Orientation/>"), None);
    }

    #[test]
    fn values_outside_2_to_8_are_normal() {
        for v in [0, 1, 9, 300] {
            assert!(Orientation::from_tag(v).is_normal());
        }
        assert_eq!(Orientation::from_tag(6).shown((3, 5)), (5, 3));
        assert_eq!(Orientation::from_tag(3).shown((3, 5)), (3, 5));
    }
}
