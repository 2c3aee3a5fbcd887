//! Snappy's raw stream (the codec of most Parquet pages) read from the middle: where a
//! slice of the decompressed output can be decoded from without the bytes before it, and
//! the decoder that does it.
//!
//! A Snappy stream is a varint (the output's length) and then elements: a *literal* (its
//! bytes follow the tag) or a *copy* (a length and an offset back into the output already
//! written). To decode output bytes `a..b` alone, decoding starts at a point `p <= a`
//! (the start of an element, or inside a literal) such that no copy that writes within
//! `p..b` reads before `p`. For incompressible data (JPEG bytes) the stream is nearly all
//! literals, so `p` is at or just before `a` and the bytes fetched are about the image's.
//! [`Elements::locate`] finds `p` from the whole stream (at indexing, where the page is in
//! memory); [`decode_within`] then decodes from those bytes alone.

use std::ops::Range;

/// Why Snappy bytes cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnappyError {
    /// The stream ends inside an element, or before the output wanted.
    #[error("Snappy data cut short at byte {at}")]
    Truncated {
        /// Where it stops.
        at: usize,
    },
    /// A copy reaches before the start of the output (a corrupt stream, or bytes that are
    /// not the ones indexed).
    #[error("Snappy copy at byte {at} reaches {offset} bytes back, before the data's start")]
    Offset {
        /// Where the copy is.
        at: usize,
        /// How far back it reaches.
        offset: usize,
    },
    /// The stream's declared length disagrees with its elements.
    #[error("Snappy stream declares {declared} bytes and holds {found}")]
    Length {
        /// The length the stream states.
        declared: u64,
        /// What its elements write.
        found: u64,
    },
}

/// One element of a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Element {
    /// Where its tag starts in the stream.
    tag: usize,
    /// Where its literal bytes start (after the tag); for a copy, its end.
    data: usize,
    /// Where its output starts.
    out: usize,
    /// Its output's length.
    len: usize,
    /// For a copy, where in the output it reads from.
    from: Option<usize>,
}

/// Where output bytes can be decoded from alone: the stream's bytes `fetch` (relative to
/// its start), of which the first `lead` are the rest of a literal, decode to output whose
/// first `skip` bytes come before the slice wanted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Located {
    /// First byte of the stream to read.
    pub start: usize,
    /// One past the last.
    pub end: usize,
    /// Literal bytes at `start` before the next element's tag.
    pub lead: usize,
    /// Output bytes decoded before the slice.
    pub skip: usize,
}

/// A whole stream's elements (see the module).
#[derive(Debug)]
pub struct Elements {
    elements: Vec<Element>,
    total: usize,
}

fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..35).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The element whose tag is at `at`: `(literal or copy length, the copy's offset (`None`
/// for a literal), where its data starts)`.
fn element(bytes: &[u8], at: usize) -> Result<(usize, Option<usize>, usize), SnappyError> {
    let cut = SnappyError::Truncated { at };
    let tag = *bytes.get(at).ok_or(cut.clone())?;
    let le = |n: usize| -> Result<usize, SnappyError> {
        let b = bytes.get(at + 1..at + 1 + n).ok_or(cut.clone())?;
        Ok(b.iter()
            .rev()
            .fold(0usize, |v, &x| (v << 8) | usize::from(x)))
    };
    let (len, offset, data) = match tag & 3 {
        0 => {
            let small = usize::from(tag >> 2);
            if small < 60 {
                return Ok((small + 1, None, at + 1));
            }
            let n = small - 59;
            return Ok((le(n)? + 1, None, at + 1 + n));
        }
        1 => {
            let b = *bytes.get(at + 1).ok_or(cut)?;
            (
                usize::from((tag >> 2) & 7) + 4,
                (usize::from(tag >> 5) << 8) | usize::from(b),
                at + 2,
            )
        }
        2 => (usize::from(tag >> 2) + 1, le(2)?, at + 3),
        _ => (usize::from(tag >> 2) + 1, le(4)?, at + 5),
    };
    if offset == 0 {
        return Err(SnappyError::Offset { at, offset });
    }
    Ok((len, Some(offset), data))
}

impl Elements {
    /// The elements of the whole stream `bytes` (its length varint first), checked: every
    /// copy reads output already written, and the output is as long as declared.
    pub fn scan(bytes: &[u8]) -> Result<Elements, SnappyError> {
        let mut at = 0;
        let declared = varint(bytes, &mut at).ok_or(SnappyError::Truncated { at: 0 })?;
        let mut elements = Vec::new();
        let mut out = 0usize;
        while at < bytes.len() {
            let (len, offset, data) = element(bytes, at)?;
            let from = match offset {
                None => {
                    if data.checked_add(len).is_none_or(|e| e > bytes.len()) {
                        return Err(SnappyError::Truncated { at });
                    }
                    None
                }
                Some(offset) if offset > out => {
                    return Err(SnappyError::Offset { at, offset });
                }
                Some(offset) => Some(out - offset),
            };
            elements.push(Element {
                tag: at,
                data,
                out,
                len,
                from,
            });
            out += len;
            at = if from.is_none() { data + len } else { data };
            if out as u64 > declared {
                break;
            }
        }
        if out as u64 != declared {
            return Err(SnappyError::Length {
                declared,
                found: out as u64,
            });
        }
        Ok(Elements {
            elements,
            total: out,
        })
    }

    /// The whole output (the stream decompressed).
    pub fn decompress(&self, bytes: &[u8]) -> Result<Vec<u8>, SnappyError> {
        let first = self.elements.first().map_or(bytes.len(), |e| e.tag);
        let mut buf = bytes.to_vec();
        let got = decode_within(&mut buf, first..bytes.len(), 0, self.total)?;
        buf.drain(..got.start);
        Ok(buf)
    }

    /// The output's length.
    pub fn len(&self) -> usize {
        self.total
    }

    /// Whether the output is empty.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The element whose output holds byte `pos` (`pos` < the output's length).
    fn holding(&self, pos: usize) -> usize {
        self.elements
            .partition_point(|e| e.out <= pos)
            .saturating_sub(1)
    }

    /// Where output bytes `want` (non-empty, within the output) can be decoded from alone
    /// (see the module).
    pub fn locate(&self, want: Range<usize>) -> Option<Located> {
        if want.is_empty() || want.end > self.total {
            return None;
        }
        let last = self.holding(want.end - 1);
        // `p` the start, `first` the element holding it, `low` the least output position
        // read by the copies from `first` to `last`.
        let mut p = want.start;
        let mut first = self.holding(p);
        let mut low = usize::MAX;
        for e in &self.elements[first..=last] {
            low = low.min(e.from.unwrap_or(usize::MAX));
        }
        loop {
            let e = self.elements[first];
            if e.from.is_some() && e.out < p {
                // Inside a copy: it is decoded whole.
                p = e.out;
                continue;
            }
            if low < p {
                // Back to the copies' source, and the copies met on the way there.
                p = low;
                let to = self.holding(p);
                for e in &self.elements[to..first] {
                    low = low.min(e.from.unwrap_or(usize::MAX));
                }
                first = to;
                continue;
            }
            break;
        }
        let e = self.elements[first];
        let (start, lead) = if e.out == p {
            (e.tag, 0)
        } else {
            // Inside a literal.
            (e.data + (p - e.out), e.out + e.len - p)
        };
        let l = self.elements[last];
        let end = match l.from {
            None => l.data + (want.end - l.out),
            Some(_) => l.data,
        };
        Some(Located {
            start,
            end,
            lead,
            skip: want.start - p,
        })
    }
}

/// Decode `want` output bytes from `buf[input]` (a stream's bytes from a [`Located`]
/// start, of which the first `lead` are literal), appending them to `buf`; the last
/// literal may be cut where the output wanted ends. Returns where in `buf` the output is.
pub fn decode_within(
    buf: &mut Vec<u8>,
    input: Range<usize>,
    lead: usize,
    want: usize,
) -> Result<Range<usize>, SnappyError> {
    let cut = |at: usize| SnappyError::Truncated {
        at: at - input.start,
    };
    if input.end > buf.len() || input.start > input.end {
        return Err(cut(input.start));
    }
    let base = buf.len();
    buf.reserve(want);
    let first = lead.min(want);
    if first > input.len() {
        return Err(cut(input.end));
    }
    buf.extend_from_within(input.start..input.start + first);
    let mut at = input.start + lead;
    while buf.len() - base < want {
        let left = want - (buf.len() - base);
        let (len, offset, data) = element(&buf[..input.end], at).map_err(|_| cut(at))?;
        let take = len.min(left);
        if let Some(offset) = offset {
            if offset > buf.len() - base {
                return Err(SnappyError::Offset {
                    at: at - input.start,
                    offset,
                });
            }
            let from = buf.len() - offset;
            if offset >= take {
                buf.extend_from_within(from..from + take);
            } else {
                // The copy overlaps its own output: byte by byte.
                for i in 0..take {
                    let b = buf[from + i];
                    buf.push(b);
                }
            }
            at = data;
        } else {
            if data.checked_add(take).is_none_or(|e| e > input.end) {
                return Err(cut(at));
            }
            buf.extend_from_within(data..data + take);
            at = data + len;
        }
    }
    Ok(base..buf.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Output bytes `skip..skip + len` decoded from `bytes` alone.
    fn decode(
        bytes: &[u8],
        lead: usize,
        want: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), SnappyError> {
        let mut buf = bytes.to_vec();
        let got = decode_within(&mut buf, 0..bytes.len(), lead, want)?;
        out.extend_from_slice(&buf[got]);
        Ok(())
    }

    /// A stream by hand: literals and copies.
    enum Op<'a> {
        Lit(&'a [u8]),
        Copy(usize, usize),
    }

    fn stream(ops: &[Op<'_>]) -> (Vec<u8>, Vec<u8>) {
        let mut body = Vec::new();
        let mut out: Vec<u8> = Vec::new();
        for op in ops {
            match op {
                Op::Lit(b) => {
                    let n = b.len() - 1;
                    if n < 60 {
                        body.push((n as u8) << 2);
                    } else if n < 256 {
                        body.extend_from_slice(&[60 << 2, n as u8]);
                    } else {
                        body.extend_from_slice(&[61 << 2, n as u8, (n >> 8) as u8]);
                    }
                    body.extend_from_slice(b);
                    out.extend_from_slice(b);
                }
                Op::Copy(len, offset) => {
                    body.push((((len - 1) as u8) << 2) | 2);
                    body.extend_from_slice(&(*offset as u16).to_le_bytes());
                    let from = out.len() - offset;
                    for i in 0..*len {
                        out.push(out[from + i]);
                    }
                }
            }
        }
        let mut s = Vec::new();
        let mut n = out.len();
        while n >= 0x80 {
            s.push((n as u8) | 0x80);
            n >>= 7;
        }
        s.push(n as u8);
        s.extend_from_slice(&body);
        (s, out)
    }

    fn every_slice_decodes(s: &[u8], out: &[u8]) -> usize {
        let el = Elements::scan(s).expect("scans");
        assert_eq!(el.len(), out.len());
        let mut fetched = 0;
        for a in 0..out.len() {
            for b in a + 1..=out.len() {
                let l = el.locate(a..b).expect("locates");
                let mut got = vec![7u8; 3];
                decode(&s[l.start..l.end], l.lead, l.skip + (b - a), &mut got)
                    .unwrap_or_else(|e| panic!("{a}..{b} {l:?}: {e}"));
                assert_eq!(&got[3 + l.skip..], &out[a..b], "{a}..{b} {l:?}");
                fetched += l.end - l.start;
            }
        }
        fetched
    }

    #[test]
    fn any_slice_decodes_from_the_bytes_located_alone() {
        let noise: Vec<u8> = (0..300u32).map(|i| (i * 7919 % 251) as u8).collect();
        let (s, out) = stream(&[
            Op::Lit(&noise[..40]),
            Op::Copy(8, 30),
            Op::Lit(&noise[40..110]),
            Op::Copy(20, 3),
            Op::Lit(&noise[110..300]),
            Op::Copy(5, 250),
        ]);
        every_slice_decodes(&s, &out);
    }

    #[test]
    fn a_slice_of_literals_fetches_its_own_bytes_and_no_more() {
        let noise: Vec<u8> = (0..400u32).map(|i| (i * 31 % 253) as u8).collect();
        let (s, _) = stream(&[Op::Lit(&noise[..200]), Op::Lit(&noise[200..])]);
        let el = Elements::scan(&s).expect("scans");
        let l = el.locate(50..150).expect("locates");
        assert_eq!((l.end - l.start, l.lead, l.skip), (100, 150, 0));
        let l = el.locate(150..250).expect("locates");
        // The second literal's tag (2 bytes) is fetched too.
        assert_eq!((l.end - l.start, l.skip), (102, 0));
    }

    #[test]
    fn a_copy_before_the_slice_moves_the_start_back_to_its_source() {
        let noise: Vec<u8> = (0..100u32).map(|i| (i * 13 % 97) as u8).collect();
        let (s, out) = stream(&[
            Op::Lit(&noise[..60]),
            Op::Copy(10, 55),
            Op::Lit(&noise[60..]),
        ]);
        let el = Elements::scan(&s).expect("scans");
        // Bytes 60..70 are the copy of bytes 5..15.
        let l = el.locate(62..80).expect("locates");
        assert_eq!(l.skip, 62 - 5);
        let mut got = Vec::new();
        decode(&s[l.start..l.end], l.lead, l.skip + 18, &mut got).expect("decodes");
        assert_eq!(&got[l.skip..], &out[62..80]);
    }

    #[test]
    fn the_snap_crates_streams_decode_slice_by_slice() {
        // What Parquet writers (arrow-rs's `snap`, Snappy's C++) produce: mostly
        // literals, copies where bytes repeat.
        let mut data = Vec::new();
        for i in 0..20u32 {
            data.extend_from_slice(b"\xff\xd8\xff\xe0 JFIF header tables repeated");
            data.extend((0..(500 + i * 37)).map(|k| (k.wrapping_mul(2_654_435_761) >> 13) as u8));
        }
        let s = snap::raw::Encoder::new()
            .compress_vec(&data)
            .expect("compresses");
        let el = Elements::scan(&s).expect("scans");
        assert_eq!(el.len(), data.len());
        for a in (0..data.len()).step_by(97) {
            for len in [1, 50, 700, 3000] {
                let b = (a + len).min(data.len());
                let l = el.locate(a..b).expect("locates");
                let mut got = Vec::new();
                decode(&s[l.start..l.end], l.lead, l.skip + (b - a), &mut got).expect("decodes");
                assert_eq!(&got[l.skip..], &data[a..b]);
            }
        }
    }

    #[test]
    fn bad_streams_are_errors_not_panics() {
        let (s, _) = stream(&[Op::Lit(b"abcdefgh"), Op::Copy(4, 8)]);
        for cut in 0..s.len() {
            let _ = Elements::scan(&s[..cut]);
            let _ = decode(&s[1..cut.max(1)], 0, 12, &mut Vec::new());
        }
        assert!(matches!(
            decode(&[(3 << 2) | 2, 9, 0], 0, 4, &mut Vec::new()),
            Err(SnappyError::Offset { .. })
        ));
        let mut bad = s.clone();
        bad[0] = 20;
        assert!(matches!(
            Elements::scan(&bad),
            Err(SnappyError::Length { .. })
        ));
    }
}
