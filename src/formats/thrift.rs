//! Apache Thrift's compact protocol, read: what Parquet's page headers are written in
//! (the `parquet` crate keeps its reader of them private). A reader of one struct's fields
//! at a time, skipping those it is not asked for, with nesting bounded.

/// Why thrift bytes cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ThriftError {
    /// The bytes end inside a value.
    #[error("thrift data cut short at byte {at}")]
    Truncated {
        /// Where.
        at: usize,
    },
    /// A type code the protocol does not have, or values nested too deep.
    #[error("thrift data malformed at byte {at}")]
    Malformed {
        /// Where.
        at: usize,
    },
}

impl ThriftError {
    /// The byte where it goes wrong.
    pub fn at(&self) -> usize {
        match self {
            ThriftError::Truncated { at } | ThriftError::Malformed { at } => *at,
        }
    }
}

/// A field's type in the compact protocol.
pub const BOOL_TRUE: u8 = 1;
/// `false`, as a field's type.
pub const BOOL_FALSE: u8 = 2;
/// A 32-bit integer.
pub const I32: u8 = 5;
/// A struct.
pub const STRUCT: u8 = 12;

/// Deepest nesting skipped.
const DEPTH: usize = 32;

/// A reader over compact-protocol bytes.
#[derive(Debug)]
pub struct Compact<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Compact<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Compact<'a> {
        Compact { bytes, at: 0 }
    }

    /// Where it is.
    pub fn position(&self) -> usize {
        self.at
    }

    fn byte(&mut self) -> Result<u8, ThriftError> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or(ThriftError::Truncated { at: self.at })?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, ThriftError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(ThriftError::Malformed { at: self.at })
    }

    fn zigzag(&mut self) -> Result<i64, ThriftError> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A 32-bit integer value.
    pub fn i32(&mut self) -> Result<i32, ThriftError> {
        let at = self.at;
        i32::try_from(self.zigzag()?).map_err(|_| ThriftError::Malformed { at })
    }

    /// The next field of the struct being read: `(id, type)`, `None` at its end; `last` is
    /// the previous field's id (0 at the struct's start), as field ids are deltas.
    pub fn field(&mut self, last: i16) -> Result<Option<(i16, u8)>, ThriftError> {
        let b = self.byte()?;
        if b == 0 {
            return Ok(None);
        }
        let kind = b & 0x0f;
        let delta = b >> 4;
        let id = if delta == 0 {
            let at = self.at;
            i16::try_from(self.zigzag()?).map_err(|_| ThriftError::Malformed { at })?
        } else {
            last.saturating_add(i16::from(delta))
        };
        Ok(Some((id, kind)))
    }

    /// Skip a value of type `kind`.
    pub fn skip(&mut self, kind: u8) -> Result<(), ThriftError> {
        self.skip_at(kind, 0)
    }

    fn skip_at(&mut self, kind: u8, depth: usize) -> Result<(), ThriftError> {
        if depth > DEPTH {
            return Err(ThriftError::Malformed { at: self.at });
        }
        match kind {
            BOOL_TRUE | BOOL_FALSE => {}
            3 => {
                self.byte()?;
            }
            4..=6 => {
                self.varint()?;
            }
            7 => self.take(8)?,
            8 => {
                let n = self.length()?;
                self.take(n)?;
            }
            9 | 10 => {
                let h = self.byte()?;
                let n = match h >> 4 {
                    15 => self.length()?,
                    n => usize::from(n),
                };
                let elem = h & 0x0f;
                for _ in 0..n {
                    if elem == BOOL_TRUE || elem == BOOL_FALSE {
                        self.byte()?;
                    } else {
                        self.skip_at(elem, depth + 1)?;
                    }
                }
            }
            11 => {
                let n = self.length()?;
                if n > 0 {
                    let kv = self.byte()?;
                    for _ in 0..n {
                        self.skip_map_part(kv >> 4, depth)?;
                        self.skip_map_part(kv & 0x0f, depth)?;
                    }
                }
            }
            STRUCT => {
                let mut last = 0;
                while let Some((id, k)) = self.field(last)? {
                    self.skip_at(k, depth + 1)?;
                    last = id;
                }
            }
            _ => return Err(ThriftError::Malformed { at: self.at }),
        }
        Ok(())
    }

    fn skip_map_part(&mut self, kind: u8, depth: usize) -> Result<(), ThriftError> {
        if kind == BOOL_TRUE || kind == BOOL_FALSE {
            self.byte().map(drop)
        } else {
            self.skip_at(kind, depth + 1)
        }
    }

    fn length(&mut self) -> Result<usize, ThriftError> {
        let at = self.at;
        let n = self.varint()?;
        // A length longer than what is left is cut short, whatever it says.
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.bytes.len() - self.at)
            .ok_or(ThriftError::Truncated { at })
    }

    fn take(&mut self, n: usize) -> Result<(), ThriftError> {
        if n > self.bytes.len() - self.at {
            return Err(ThriftError::Truncated { at: self.at });
        }
        self.at += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_and_the_rest_skip() {
        // struct { 1: i32 -3, 2: binary "ab", 5: struct { 1: true, 2: list<i32> [1, 2] },
        //          20: i64 7 }
        let bytes = [
            0x15, 0x05, // field 1, i32, zigzag(-3) = 5
            0x18, 0x02, b'a', b'b', // field 2 (delta 1), binary
            0x3c, // field 5 (delta 3), struct
            0x11, // field 1 bool true
            0x19, 0x25, 0x02, 0x04, // field 2 list of 2 i32: 1, 2
            0x00, // end of inner struct
            0x06, 0x28, 0x0e, // field 20 (long form), i64 zigzag 7 = 14
            0x00,
        ];
        let mut c = Compact::new(&bytes);
        assert_eq!(c.field(0), Ok(Some((1, I32))));
        assert_eq!(c.i32(), Ok(-3));
        let (id, kind) = c.field(1).expect("reads").expect("a field");
        assert_eq!(id, 2);
        c.skip(kind).expect("skips");
        let (id, kind) = c.field(2).expect("reads").expect("a field");
        assert_eq!((id, kind), (5, STRUCT));
        c.skip(kind).expect("skips the struct");
        let (id, kind) = c.field(5).expect("reads").expect("a field");
        assert_eq!(id, 20);
        c.skip(kind).expect("skips");
        assert_eq!(c.field(20), Ok(None));
        assert_eq!(c.position(), bytes.len());
        for cut in 0..bytes.len() {
            let mut c = Compact::new(&bytes[..cut]);
            assert!(c.skip(STRUCT).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn deep_nesting_is_refused() {
        let bytes = vec![0x1c; 200];
        assert!(matches!(
            Compact::new(&bytes).skip(STRUCT),
            Err(ThriftError::Malformed { .. })
        ));
    }
}
