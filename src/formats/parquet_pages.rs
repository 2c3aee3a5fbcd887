//! Where each value of a Parquet byte-array column lies in the file itself, so that one
//! image can be read by a range request without the rest of its page or file (range
//! mode's exact global shuffle over Parquet objects, `crate::store::ranges`).
//!
//! A column chunk is a run of pages, each a thrift header ([`super::thrift`]) and a body.
//! A value of a data page is either in the page (`PLAIN`: a 4-byte length and the bytes)
//! or an index into the chunk's dictionary page (`RLE_DICTIONARY`), whose entries are
//! `PLAIN`. A body is compressed whole (data page v1, dictionary page) or after its
//! levels (v2). An uncompressed value is a plain byte range of the file; a Snappy one
//! (the default of pyarrow and of Hugging Face `datasets`) is a range of the compressed
//! stream that decodes to it alone ([`super::snappy`]).
//!
//! Anything else (other codecs, other encodings, nulls, repeated values, a header this
//! reader does not follow) gives `None`: the file is then read whole, as before, by the
//! `parquet` crate.

use super::snappy::Elements;
use super::thrift::{Compact, ThriftError, BOOL_FALSE, BOOL_TRUE, I32, STRUCT};
use super::Stored;
use std::ops::Range;

/// Where one value lies: bytes `range` of the file, stored as `stored` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueSpan {
    /// The file's bytes to read.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// How the value is stored in them.
    pub stored: Stored,
}

/// A column chunk's compression, as far as this reader follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// Stored as is.
    None,
    /// Snappy's raw format.
    Snappy,
}

const DATA_PAGE: i32 = 0;
const DICTIONARY_PAGE: i32 = 2;
const DATA_PAGE_V2: i32 = 3;
const PLAIN: i32 = 0;
const PLAIN_DICTIONARY: i32 = 2;
const RLE: i32 = 3;
const RLE_DICTIONARY: i32 = 8;

#[derive(Debug, Default)]
struct Header {
    kind: i32,
    uncompressed: i32,
    compressed: i32,
    num_values: i32,
    encoding: i32,
    def_encoding: i32,
    // v2
    num_nulls: i32,
    def_len: i32,
    rep_len: i32,
    is_compressed: bool,
}

/// Fields 1-4 of a data page header, or a dictionary or v2 one (each by its own ids).
fn sub_header(c: &mut Compact<'_>, h: &mut Header, v2: bool) -> Result<(), ThriftError> {
    let mut last = 0;
    while let Some((id, kind)) = c.field(last)? {
        last = id;
        match (v2, id, kind) {
            (_, 1, I32) => h.num_values = c.i32()?,
            (false, 2, I32) | (true, 4, I32) => h.encoding = c.i32()?,
            (false, 3, I32) => h.def_encoding = c.i32()?,
            (true, 2, I32) => h.num_nulls = c.i32()?,
            (true, 5, I32) => h.def_len = c.i32()?,
            (true, 6, I32) => h.rep_len = c.i32()?,
            (true, 7, BOOL_TRUE) => h.is_compressed = true,
            (true, 7, BOOL_FALSE) => h.is_compressed = false,
            _ => c.skip(kind)?,
        }
    }
    Ok(())
}

/// A page header: what it says, and its length.
fn header(bytes: &[u8]) -> Result<(Header, usize), ThriftError> {
    let mut c = Compact::new(bytes);
    let mut h = Header {
        is_compressed: true,
        kind: -1,
        ..Header::default()
    };
    let mut last = 0;
    while let Some((id, kind)) = c.field(last)? {
        last = id;
        match (id, kind) {
            (1, I32) => h.kind = c.i32()?,
            (2, I32) => h.uncompressed = c.i32()?,
            (3, I32) => h.compressed = c.i32()?,
            (5 | 7, STRUCT) => sub_header(&mut c, &mut h, false)?,
            (8, STRUCT) => sub_header(&mut c, &mut h, true)?,
            _ => c.skip(kind)?,
        }
    }
    Ok((h, c.position()))
}

/// How many times its stored bytes a page may say it holds (uncompressed):
/// far past what any codec gives images or labels, and a bound on what the `parquet`
/// crate allocates for a page (at least [`MIN_PAGE_BOUND`]).
pub const MAX_RATIO: usize = 4096;

/// The uncompressed size any page may say, however small its stored bytes (16 times the
/// writers' usual 1 MiB pages: a column of one repeated value compresses past any
/// ratio).
pub const MIN_PAGE_BOUND: usize = 16 << 20;

/// The pages of a column chunk (`chunk`, its bytes) as far as their headers say what no
/// true page can: a negative size or count; an uncompressed size past [`MAX_RATIO`] times
/// the stored one; a dictionary of more values than its bytes hold (`min_value` bytes a value
/// at least: 4 for byte arrays and 32-bit values, 8 for 64-bit ones); or a header whose
/// thrift does not hold together. The `parquet` crate would allocate, or walk, for what
/// such a header says. `Err((offset in the chunk, why))`.
pub fn check_chunk(chunk: &[u8], min_value: usize) -> Result<(), (usize, &'static str)> {
    let mut at = 0usize;
    while at < chunk.len() {
        let Some(rest) = chunk.get(at..) else {
            break;
        };
        // Any true header parses (the walk skips the fields it does not know); the
        // crate's own walk of one that does not can allocate and zero what a length in it
        // claims.
        let Ok((h, hlen)) = header(rest) else {
            return Err((at, "a page header that does not hold together"));
        };
        if h.uncompressed < 0 || h.compressed < 0 || h.num_values < 0 {
            return Err((at, "a page header with a negative size or count"));
        }
        let (stored, size) = (h.compressed as usize, h.uncompressed as usize);
        if size > stored.saturating_mul(MAX_RATIO).max(MIN_PAGE_BOUND) {
            return Err((at, "a page claiming more than 4096 times its stored bytes"));
        }
        if h.kind == DICTIONARY_PAGE
            && (h.num_values as usize).saturating_mul(min_value.max(1)) > h.uncompressed as usize
        {
            return Err((at, "a dictionary page of more values than its bytes hold"));
        }
        let Some(next) = at
            .checked_add(hlen)
            .and_then(|b| b.checked_add(h.compressed as usize))
        else {
            break;
        };
        at = next;
    }
    Ok(())
}

/// The RLE / bit-packed hybrid encoding's first `count` values of `width` bits.
fn hybrid(bytes: &[u8], width: u32, count: usize) -> Option<Vec<u32>> {
    if width > 32 {
        return None;
    }
    let mut out = Vec::with_capacity(count);
    let mut at = 0;
    let width_bytes = width.div_ceil(8) as usize;
    while out.len() < count {
        let mut h = 0u64;
        let mut shift = 0;
        loop {
            let b = *bytes.get(at)?;
            at += 1;
            h |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 56 {
                return None;
            }
        }
        let n = usize::try_from(h >> 1).ok()?;
        if h & 1 == 0 {
            let v = bytes
                .get(at..at + width_bytes)?
                .iter()
                .rev()
                .fold(0u32, |v, &b| (v << 8) | u32::from(b));
            at += width_bytes;
            let take = n.min(count - out.len());
            out.extend(std::iter::repeat_n(v, take));
            if n == 0 {
                return None;
            }
        } else {
            let len = n.checked_mul(width as usize)?;
            let packed = bytes.get(at..at.checked_add(len)?)?;
            at += len;
            let values = n.checked_mul(8)?;
            for i in 0..values.min(count - out.len()) {
                let mut v = 0u32;
                for bit in 0..width as usize {
                    let k = i * width as usize + bit;
                    if packed[k / 8] >> (k % 8) & 1 == 1 {
                        v |= 1 << bit;
                    }
                }
                out.push(v);
            }
            if n == 0 {
                return None;
            }
        }
    }
    Some(out)
}

/// The bits a level up to `max` takes.
fn bit_width(max: i16) -> u32 {
    16 - (max as u16).leading_zeros()
}

/// `PLAIN` byte arrays: the positions of the first `count` values in `bytes`, which must
/// hold exactly them.
fn plain(bytes: &[u8], count: usize, base: usize) -> Option<Vec<Range<usize>>> {
    let mut out = Vec::with_capacity(count);
    let mut at = 0;
    for _ in 0..count {
        let n = u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as usize;
        let end = (at + 4).checked_add(n).filter(|&e| e <= bytes.len())?;
        out.push(base + at + 4..base + end);
        at = end;
    }
    (at == bytes.len()).then_some(out)
}

/// A stream of one page (its body, or a v2 body's values), decompressed, with where it
/// starts in the file.
struct Section {
    start: u64,
    elements: Option<Elements>,
}

impl Section {
    /// Where output bytes `want` of the stream lie in the file.
    fn span(&self, want: Range<usize>) -> Option<ValueSpan> {
        let len = u32::try_from(want.len()).ok()?;
        if want.is_empty() {
            // An empty value: no bytes to read (it fails as an image, as in the copy).
            return Some(ValueSpan {
                start: self.start,
                end: self.start,
                stored: Stored::Plain,
            });
        }
        match &self.elements {
            None => Some(ValueSpan {
                start: self.start + want.start as u64,
                end: self.start + want.end as u64,
                stored: Stored::Plain,
            }),
            Some(el) => {
                let l = el.locate(want)?;
                Some(ValueSpan {
                    start: self.start + l.start as u64,
                    end: self.start + l.end as u64,
                    stored: Stored::Snappy {
                        lead: u32::try_from(l.lead).ok()?,
                        skip: u32::try_from(l.skip).ok()?,
                        len,
                    },
                })
            }
        }
    }
}

/// The section of `file` at `start`, `len` bytes, as `codec` compresses it: where it is,
/// and its output.
fn section(file: &[u8], start: usize, len: usize, codec: Codec) -> Option<(Section, Vec<u8>)> {
    let bytes = file.get(start..start.checked_add(len)?)?;
    match codec {
        Codec::None => Some((
            Section {
                start: start as u64,
                elements: None,
            },
            bytes.to_vec(),
        )),
        Codec::Snappy => {
            let el = Elements::scan(bytes).ok()?;
            let out = el.decompress(bytes).ok()?;
            Some((
                Section {
                    start: start as u64,
                    elements: Some(el),
                },
                out,
            ))
        }
    }
}

/// Where each value of the column chunk at bytes `chunk` of `file` lies (one per row,
/// `rows` of them), for a byte-array column of no repetition whose values are all present
/// (definition level `max_def`); `None` when a page is not one this reader follows (see
/// the module). `rows` must be known good (the rows the file was read with): no page
/// may hold more, so nothing here allocates for more.
pub fn value_spans(
    file: &[u8],
    chunk: Range<u64>,
    codec: Codec,
    max_def: i16,
    rows: usize,
) -> Option<Vec<ValueSpan>> {
    let end = usize::try_from(chunk.end)
        .ok()
        .filter(|&e| e <= file.len())?;
    let mut at = usize::try_from(chunk.start).ok()?;
    let mut dictionary: Option<Vec<ValueSpan>> = None;
    let mut out: Vec<ValueSpan> = Vec::with_capacity(rows.min(1 << 16));
    while at < end && out.len() < rows {
        let (h, hlen) = header(file.get(at..end)?).ok()?;
        let body = at.checked_add(hlen)?;
        let blen = usize::try_from(h.compressed).ok()?;
        let next = body.checked_add(blen).filter(|&n| n <= end)?;
        let count = usize::try_from(h.num_values).ok()?;
        // A data page of more values than rows left, or a dictionary of more values than
        // its bytes hold (4 bytes a value at least), is not followed.
        if h.kind != DICTIONARY_PAGE && count > rows - out.len() {
            return None;
        }
        match h.kind {
            DICTIONARY_PAGE => {
                if dictionary.is_some() || !matches!(h.encoding, PLAIN | PLAIN_DICTIONARY) {
                    return None;
                }
                let (sec, data) = section(file, body, blen, codec)?;
                if count > data.len() / 4 {
                    return None;
                }
                let spans = plain(&data, count, 0)?
                    .into_iter()
                    .map(|r| sec.span(r))
                    .collect::<Option<Vec<_>>>()?;
                dictionary = Some(spans);
            }
            DATA_PAGE => {
                let (sec, data) = section(file, body, blen, codec)?;
                let mut v = 0;
                if max_def > 0 {
                    if h.def_encoding != RLE {
                        return None;
                    }
                    let n = u32::from_le_bytes(data.get(..4)?.try_into().ok()?) as usize;
                    let levels = hybrid(
                        data.get(4..4usize.checked_add(n)?)?,
                        bit_width(max_def),
                        count,
                    )?;
                    if levels.iter().any(|&l| l != max_def as u32) {
                        return None;
                    }
                    v = 4 + n;
                }
                values(&h, &sec, &data, v, count, dictionary.as_deref(), &mut out)?;
            }
            DATA_PAGE_V2 => {
                if h.num_nulls != 0 || h.rep_len != 0 {
                    return None;
                }
                let levels = usize::try_from(h.def_len).ok()?;
                if max_def > 0 {
                    let l = hybrid(
                        file.get(body..body.checked_add(levels)?)?,
                        bit_width(max_def),
                        count,
                    )?;
                    if l.iter().any(|&l| l != max_def as u32) {
                        return None;
                    }
                }
                let codec = if h.is_compressed { codec } else { Codec::None };
                let (sec, data) = section(file, body + levels, blen.checked_sub(levels)?, codec)?;
                values(&h, &sec, &data, 0, count, dictionary.as_deref(), &mut out)?;
            }
            // Index pages (never written in practice) and others: nothing to read.
            _ => {}
        }
        at = next;
    }
    (out.len() == rows).then_some(out)
}

/// The values of a data page, whose values section starts at `v` of its stream `data`.
fn values(
    h: &Header,
    sec: &Section,
    data: &[u8],
    v: usize,
    count: usize,
    dictionary: Option<&[ValueSpan]>,
    out: &mut Vec<ValueSpan>,
) -> Option<()> {
    let rest = data.get(v..)?;
    match h.encoding {
        PLAIN => {
            for r in plain(rest, count, v)? {
                out.push(sec.span(r)?);
            }
        }
        RLE_DICTIONARY | PLAIN_DICTIONARY => {
            let dictionary = dictionary?;
            let width = u32::from(*rest.first()?);
            for i in hybrid(rest.get(1..)?, width, count)? {
                out.push(*dictionary.get(i as usize)?);
            }
        }
        _ => return None,
    }
    Some(())
}
