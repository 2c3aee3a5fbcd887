//! A protobuf wire-format reader, just enough for `tf.train.Example`: fields as
//! (number, value) pairs over a byte slice, lengths checked against what is left, no
//! allocation. Groups (wire types 3 and 4, deprecated) are refused.

/// What went wrong reading protobuf bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The bytes end inside a field.
    #[error("truncated protobuf field at byte {0}")]
    Truncated(usize),
    /// A varint longer than 10 bytes.
    #[error("varint longer than 10 bytes at byte {0}")]
    LongVarint(usize),
    /// A wire type protobuf does not have, or a group.
    #[error("unsupported protobuf wire type {kind} at byte {at}")]
    WireType {
        /// The wire type.
        kind: u8,
        /// Where its tag is.
        at: usize,
    },
}

/// One field's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2, with the offset of its first byte in the message being read.
    Bytes(&'a [u8], usize),
    /// Wire type 5.
    Fixed32(u32),
}

/// The fields of one message, in order.
pub struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
    failed: bool,
}

impl<'a> Fields<'a> {
    /// The fields of the message `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Fields {
            buf,
            pos: 0,
            failed: false,
        }
    }
}

/// Reads a varint at `*pos`, advancing it.
pub fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, WireError> {
    let start = *pos;
    let mut v = 0u64;
    for i in 0..10 {
        let Some(&b) = buf.get(*pos) else {
            return Err(WireError::Truncated(start));
        };
        *pos += 1;
        v |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(WireError::LongVarint(start))
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Value<'a>), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let r = self.field();
        self.failed = r.is_err();
        Some(r)
    }
}

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize, at: usize) -> Result<&'a [u8], WireError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(WireError::Truncated(at))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn field(&mut self) -> Result<(u64, Value<'a>), WireError> {
        let at = self.pos;
        let tag = varint(self.buf, &mut self.pos)?;
        let number = tag >> 3;
        let value = match (tag & 7) as u8 {
            0 => Value::Varint(varint(self.buf, &mut self.pos)?),
            1 => {
                let b = self.take(8, at)?;
                Value::Fixed64(u64::from_le_bytes(
                    b.try_into().map_err(|_| WireError::Truncated(at))?,
                ))
            }
            2 => {
                let n = varint(self.buf, &mut self.pos)?;
                let n = usize::try_from(n).map_err(|_| WireError::Truncated(at))?;
                let start = self.pos;
                Value::Bytes(self.take(n, at)?, start)
            }
            5 => {
                let b = self.take(4, at)?;
                Value::Fixed32(u32::from_le_bytes(
                    b.try_into().map_err(|_| WireError::Truncated(at))?,
                ))
            }
            kind => return Err(WireError::WireType { kind, at }),
        };
        Ok((number, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields_and_refuses_bad_ones() {
        // field 1 varint 150, field 2 bytes "hi", field 3 fixed32, field 4 fixed64
        let msg = [
            0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x1D, 1, 0, 0, 0, 0x21, 2, 0, 0, 0, 0, 0, 0,
            0,
        ];
        let f: Vec<_> = Fields::new(&msg).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            f,
            vec![
                (1, Value::Varint(150)),
                (2, Value::Bytes(b"hi", 5)),
                (3, Value::Fixed32(1)),
                (4, Value::Fixed64(2))
            ]
        );
        // a length past the end, a group, an endless varint
        for bad in [
            &[0x12u8, 0x05, b'a'][..],
            &[0x0B],
            &[
                0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,
            ],
        ] {
            let r: Result<Vec<_>, _> = Fields::new(bad).collect();
            assert!(r.is_err(), "{bad:?}");
        }
    }
}
