//! The MessagePack reader of MindRecord's raw rows: each row is a map from column name to a
//! scalar (int, float, string). Just enough to find one column's value; every length is
//! checked against the bytes left, nesting is bounded, nothing is allocated.

/// A scalar value of a raw row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar<'a> {
    /// Any integer type.
    Int(i128),
    /// float32 or float64.
    Float(f64),
    /// A string (UTF-8 is not checked here).
    Str(&'a [u8]),
    /// Anything else (nil, bool, binary, array, map, extension).
    Other,
}

/// Bytes that are not the MessagePack a raw row must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MsgpackError {
    /// The bytes end inside a value.
    #[error("MessagePack value truncated at byte {0}")]
    Truncated(usize),
    /// The row is not a map.
    #[error("the row is not a MessagePack map")]
    NotMap,
    /// A map key that is not a string.
    #[error("a MessagePack map key at byte {0} is not a string")]
    Key(usize),
    /// Nesting deeper than any MindRecord row has.
    #[error("MessagePack nested too deeply at byte {0}")]
    Deep(usize),
    /// A byte that starts no MessagePack value (0xC1).
    #[error("byte {0} starts no MessagePack value")]
    Invalid(usize),
}

const MAX_DEPTH: usize = 16;

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], MsgpackError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or(MsgpackError::Truncated(self.pos))?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn uint(&mut self, n: usize) -> Result<u64, MsgpackError> {
        let s = self.take(n)?;
        Ok(s.iter().fold(0u64, |a, &x| (a << 8) | u64::from(x)))
    }

    /// A count of elements that each take at least one byte: no more than the bytes left.
    fn count(&mut self, n: usize, per: usize) -> Result<usize, MsgpackError> {
        let at = self.pos;
        let c = self.uint(n)? as usize;
        if c.saturating_mul(per) > self.b.len() - self.pos {
            return Err(MsgpackError::Truncated(at));
        }
        Ok(c)
    }

    fn value(&mut self, depth: usize) -> Result<Scalar<'a>, MsgpackError> {
        let at = self.pos;
        if depth > MAX_DEPTH {
            return Err(MsgpackError::Deep(at));
        }
        let t = self.take(1)?[0];
        Ok(match t {
            0x00..=0x7F => Scalar::Int(i128::from(t)),
            0xE0..=0xFF => Scalar::Int(i128::from(t as i8)),
            0xA0..=0xBF => Scalar::Str(self.take(usize::from(t & 0x1F))?),
            0x80..=0x8F => self.skip_items(usize::from(t & 0x0F) * 2, depth)?,
            0x90..=0x9F => self.skip_items(usize::from(t & 0x0F), depth)?,
            0xC0 | 0xC2 | 0xC3 => Scalar::Other,
            0xC1 => return Err(MsgpackError::Invalid(at)),
            0xC4..=0xC6 => {
                let n = self.uint(1 << (t - 0xC4))? as usize;
                self.take(n)?;
                Scalar::Other
            }
            0xC7..=0xC9 => {
                let n = self.uint(1 << (t - 0xC7))? as usize;
                self.take(n.saturating_add(1))?;
                Scalar::Other
            }
            0xCA => Scalar::Float(f64::from(f32::from_bits(self.uint(4)? as u32))),
            0xCB => Scalar::Float(f64::from_bits(self.uint(8)?)),
            0xCC..=0xCF => Scalar::Int(i128::from(self.uint(1 << (t - 0xCC))?)),
            0xD0..=0xD3 => {
                let n = 1usize << (t - 0xD0);
                let u = self.uint(n)?;
                let shift = 64 - 8 * n as u32;
                Scalar::Int(i128::from(((u << shift) as i64) >> shift))
            }
            0xD4..=0xD8 => {
                self.take(1 + (1 << (t - 0xD4)))?;
                Scalar::Other
            }
            0xD9..=0xDB => {
                let n = self.uint(1 << (t - 0xD9))? as usize;
                Scalar::Str(self.take(n)?)
            }
            0xDC | 0xDD => {
                let n = self.count(if t == 0xDC { 2 } else { 4 }, 1)?;
                self.skip_items(n, depth)?
            }
            0xDE | 0xDF => {
                let n = self.count(if t == 0xDE { 2 } else { 4 }, 2)?;
                self.skip_items(n * 2, depth)?
            }
        })
    }

    fn skip_items(&mut self, n: usize, depth: usize) -> Result<Scalar<'a>, MsgpackError> {
        for _ in 0..n {
            self.value(depth + 1)?;
        }
        Ok(Scalar::Other)
    }
}

/// The value of column `name` in the raw row `row` (a MessagePack map), `None` when the row
/// has no such column.
pub fn column<'a>(row: &'a [u8], name: &str) -> Result<Option<Scalar<'a>>, MsgpackError> {
    let mut r = Reader { b: row, pos: 0 };
    let t = r.take(1).map_err(|_| MsgpackError::NotMap)?[0];
    let n = match t {
        0x80..=0x8F => usize::from(t & 0x0F),
        0xDE => r.count(2, 2)?,
        0xDF => r.count(4, 2)?,
        _ => return Err(MsgpackError::NotMap),
    };
    let mut found = None;
    for _ in 0..n {
        let at = r.pos;
        let Scalar::Str(key) = r.value(1)? else {
            return Err(MsgpackError::Key(at));
        };
        let v = r.value(1)?;
        if key == name.as_bytes() {
            found = Some(v);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_columns_of_every_width() {
        // {"f": 1.5f32, "file_name": "img0.jpg", "label": -2} as MindSpore wrote it
        let row = b"\x83\xa1f\xca\x3f\xc0\x00\x00\xa9file_name\xa8img0.jpg\xa5label\xfe";
        assert_eq!(column(row, "label").unwrap(), Some(Scalar::Int(-2)));
        assert_eq!(column(row, "f").unwrap(), Some(Scalar::Float(1.5)));
        assert_eq!(
            column(row, "file_name").unwrap(),
            Some(Scalar::Str(b"img0.jpg"))
        );
        assert_eq!(column(row, "nope").unwrap(), None);
        let row = b"\x82\xa1a\xd1\xff\x00\xa1b\xce\x00\x01\x00\x00";
        assert_eq!(column(row, "a").unwrap(), Some(Scalar::Int(-256)));
        assert_eq!(column(row, "b").unwrap(), Some(Scalar::Int(65536)));
    }

    #[test]
    fn refuses_bad_rows() {
        for bad in [
            &b""[..],
            b"\x01",
            b"\x81\x01\x01",
            b"\x81\xa1a",
            b"\xdf\xff\xff\xff\xff",
            b"\x81\xa1a\xdb\xff\xff\xff\xffab",
            b"\x81\xa1a\xc1",
        ] {
            assert!(column(bad, "a").is_err(), "{bad:?}");
        }
        // deep nesting
        let mut deep = b"\x81\xa1a".to_vec();
        deep.extend(std::iter::repeat_n(0x91u8, 100));
        deep.push(0);
        assert!(matches!(column(&deep, "a"), Err(MsgpackError::Deep(_))));
    }
}
