//! A restricted pickle reader: it parses the opcodes that pickled dicts of lists, ints,
//! strings and numpy arrays use (protocols 2 to 5) into plain values and never executes
//! anything.
//!
//! * Globals are names, not code: only numpy's array and dtype reconstructors, `_codecs
//!   encode` (how Python 3 writes bytes in protocol 2) and `bytes` (an empty `bytes` in
//!   protocol 2) are known; any other `GLOBAL` / `STACK_GLOBAL` is an error, and so is a
//!   `REDUCE` / `BUILD` on anything but them.
//! * Every length is checked against the bytes left in the file before anything is read,
//!   and no allocation is sized from a length the file declares: strings and byte strings
//!   stay spans of the input, containers grow one value per opcode, and the only copies
//!   (latin-1 text decoded by `_codecs encode`) are budgeted to the input's size in total.
//! * Containers live in arenas and values are small copies of their ids, so `BINGET` never
//!   duplicates a container; values and memo entries are counted, at most [`MIN_VALUES`]
//!   plus one per [`BYTES_PER_VALUE`] input bytes, so memory stays within a small multiple
//!   of the input's size.
//! * `MARK` nesting is bounded by [`MAX_DEPTH`]; the reader never recurses.
//!
//! Errors name the byte offset of the opcode at fault.

use std::collections::HashMap;

/// Most open `MARK`s (nested tuples, lists and dicts being built) a pickle may have.
pub const MAX_DEPTH: usize = 64;

/// Values (pushes and memo entries) any pickle may make, whatever its size.
pub(crate) const MIN_VALUES: usize = 1 << 16;
/// Beyond [`MIN_VALUES`], one value per this many input bytes. A CIFAR batch makes a few
/// values per 3072-byte record; the bound keeps a crafted file's memory within a small
/// multiple of its size (each value costs a few dozen bytes).
pub(crate) const BYTES_PER_VALUE: usize = 16;

/// Most items of a `REDUCE` argument tuple or a `BUILD` state tuple (numpy's dtype state
/// has 8).
const MAX_ARGS: usize = 8;

/// Why a pickle cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PickleError {
    /// An opcode's argument runs past the end of the input.
    #[error("truncated: {what} at byte {offset} needs {need} bytes, {left} remain")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// The opcode's offset.
        offset: usize,
        /// Bytes it declares or needs.
        need: u64,
        /// Bytes left in the input.
        left: usize,
    },
    /// The input ends without a `STOP` opcode.
    #[error("truncated: no STOP opcode before the end ({len} bytes)")]
    NoStop {
        /// The input's length.
        len: usize,
    },
    /// An opcode this reader does not know (or refuses).
    #[error("unsupported pickle opcode 0x{opcode:02x} at byte {offset}")]
    UnknownOpcode {
        /// The opcode byte.
        opcode: u8,
        /// Its offset.
        offset: usize,
    },
    /// A global other than numpy's array reconstruction.
    #[error(
        "refused global `{module} {name}` at byte {offset}: only numpy array \
         reconstruction is read, nothing is executed"
    )]
    Global {
        /// Its module (at most 64 characters shown).
        module: String,
        /// Its name (at most 64 characters shown).
        name: String,
        /// The opcode's offset.
        offset: usize,
    },
    /// More than [`MAX_DEPTH`] open `MARK`s.
    #[error("nesting deeper than {MAX_DEPTH} at byte {offset}")]
    TooDeep {
        /// The `MARK`'s offset.
        offset: usize,
    },
    /// A well-formed opcode used in a way these files never do.
    #[error("malformed pickle at byte {offset}: {reason}")]
    Malformed {
        /// The opcode's offset.
        offset: usize,
        /// What is wrong.
        reason: String,
    },
    /// The pickle parses but does not hold what the caller expects.
    #[error("{0}")]
    Content(String),
}

/// The globals this reader knows: names, not code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Global {
    /// `numpy.core.multiarray _reconstruct` (or `numpy._core.multiarray`).
    Reconstruct,
    /// `numpy.core.numeric _frombuffer` (or `numpy._core.numeric`): protocol 5 arrays.
    FromBuffer,
    /// `numpy ndarray`.
    Ndarray,
    /// `numpy dtype`.
    Dtype,
    /// `_codecs encode`: Python 3's protocol-2 `bytes`, latin-1 text.
    Encode,
    /// `__builtin__ bytes` / `builtins bytes`: an empty `bytes` in protocol 2.
    Bytes,
}

impl Global {
    fn lookup(module: &[u8], name: &[u8]) -> Option<Global> {
        Some(match (module, name) {
            (b"numpy.core.multiarray" | b"numpy._core.multiarray", b"_reconstruct") => {
                Global::Reconstruct
            }
            (b"numpy.core.numeric" | b"numpy._core.numeric", b"_frombuffer") => Global::FromBuffer,
            (b"numpy", b"ndarray") => Global::Ndarray,
            (b"numpy", b"dtype") => Global::Dtype,
            (b"_codecs", b"encode") => Global::Encode,
            (b"__builtin__" | b"builtins", b"bytes") => Global::Bytes,
            _ => return None,
        })
    }
}

/// One value: scalars inline, strings as spans of the input, containers as arena ids.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// A byte string of the input (Python 2 `str`, `bytes`, `bytearray`).
    Bytes(usize, usize),
    /// UTF-8 text of the input (`str`), not yet validated.
    Text(usize, usize),
    /// Bytes decoded by `_codecs encode`: an id in `Parsed::decoded`.
    Decoded(usize),
    List(usize),
    Tuple(usize),
    Dict(usize),
    Global(Global),
    Dtype(usize),
    Array(usize),
}

impl Value {
    fn what(self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "a bool",
            Value::Int(_) => "an int",
            Value::Bytes(..) | Value::Decoded(_) => "bytes",
            Value::Text(..) => "a str",
            Value::List(_) => "a list",
            Value::Tuple(_) => "a tuple",
            Value::Dict(_) => "a dict",
            Value::Global(_) => "a global",
            Value::Dtype(_) => "a numpy dtype",
            Value::Array(_) => "a numpy array",
        }
    }
}

/// A numpy dtype: only its name matters here.
#[derive(Clone, Debug)]
pub(crate) struct Dtype {
    /// The name as pickled (`u1`, `f8`, …), at most 32 bytes kept.
    pub(crate) name: String,
}

impl Dtype {
    pub(crate) fn is_u8(&self) -> bool {
        matches!(self.name.as_str(), "u1" | "|u1" | "uint8")
    }
}

/// A numpy array: its shape, dtype, order and where its bytes are, once built.
#[derive(Clone, Debug, Default)]
pub(crate) struct Array {
    /// The shape tuple (an id in `Parsed::seqs`).
    pub(crate) shape: Option<usize>,
    /// The dtype value.
    pub(crate) dtype: Option<Value>,
    pub(crate) fortran: bool,
    /// The data value (`Bytes` or `Decoded`).
    pub(crate) data: Option<Value>,
}

/// A parsed pickle: the top value and the arenas its ids point into.
#[derive(Debug)]
pub(crate) struct Parsed<'a> {
    pub(crate) input: &'a [u8],
    pub(crate) root: Value,
    pub(crate) seqs: Vec<Vec<Value>>,
    pub(crate) dicts: Vec<Vec<(Value, Value)>>,
    pub(crate) dtypes: Vec<Dtype>,
    pub(crate) arrays: Vec<Array>,
    pub(crate) decoded: Vec<Vec<u8>>,
}

impl Parsed<'_> {
    /// The bytes of a `Bytes`, `Text` or `Decoded` value.
    pub(crate) fn bytes(&self, v: Value) -> Option<&[u8]> {
        match v {
            Value::Bytes(s, n) | Value::Text(s, n) => self.input.get(s..s.checked_add(n)?),
            Value::Decoded(i) => self.decoded.get(i).map(Vec::as_slice),
            _ => None,
        }
    }

    /// The items of a list or tuple.
    pub(crate) fn items(&self, v: Value) -> Option<&[Value]> {
        match v {
            Value::List(i) | Value::Tuple(i) => self.seqs.get(i).map(Vec::as_slice),
            _ => None,
        }
    }

    /// Take the bytes of a `Decoded` value out (leaving it empty).
    pub(crate) fn take_decoded(&mut self, i: usize) -> Vec<u8> {
        self.decoded
            .get_mut(i)
            .map(std::mem::take)
            .unwrap_or_default()
    }
}

/// Parse a pickle into values. Reads up to the first `STOP`; bytes after it are ignored,
/// as Python's `pickle.load` ignores them.
pub(crate) fn parse(input: &[u8]) -> Result<Parsed<'_>, PickleError> {
    let mut r = Reader {
        p: Parsed {
            input,
            root: Value::None,
            seqs: Vec::new(),
            dicts: Vec::new(),
            dtypes: Vec::new(),
            arrays: Vec::new(),
            decoded: Vec::new(),
        },
        pos: 0,
        op_at: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
        decoded_total: 0,
        units: 0,
        max_units: MIN_VALUES.saturating_add(input.len() / BYTES_PER_VALUE),
    };
    r.run()?;
    Ok(r.p)
}

struct Reader<'a> {
    p: Parsed<'a>,
    pos: usize,
    /// Offset of the opcode being run (for errors).
    op_at: usize,
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: HashMap<u64, Value>,
    /// Bytes decoded by `_codecs encode` so far: at most the input's length.
    decoded_total: usize,
    /// Values pushed and memo entries made so far, and the most allowed.
    units: usize,
    max_units: usize,
}

/// Text shown in errors: lossy, at most 64 characters.
fn shown(b: &[u8]) -> String {
    String::from_utf8_lossy(b).chars().take(64).collect()
}

impl Reader<'_> {
    fn bad(&self, reason: impl Into<String>) -> PickleError {
        PickleError::Malformed {
            offset: self.op_at,
            reason: reason.into(),
        }
    }

    fn left(&self) -> usize {
        self.p.input.len().saturating_sub(self.pos)
    }

    /// The next `n` bytes as a span, checked against what is left.
    fn take(&mut self, n: u64, what: &'static str) -> Result<(usize, usize), PickleError> {
        match usize::try_from(n) {
            Ok(len) if len <= self.left() => {
                let start = self.pos;
                self.pos += len;
                Ok((start, len))
            }
            _ => Err(PickleError::Truncated {
                what,
                offset: self.op_at,
                need: n,
                left: self.left(),
            }),
        }
    }

    fn arg<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], PickleError> {
        let (s, n) = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(self.p.input.get(s..s + n).unwrap_or(&[0u8; N][..]));
        Ok(out)
    }

    fn u8(&mut self, what: &'static str) -> Result<u64, PickleError> {
        Ok(u64::from(self.arg::<1>(what)?[0]))
    }

    fn u32(&mut self, what: &'static str) -> Result<u64, PickleError> {
        Ok(u64::from(u32::from_le_bytes(self.arg(what)?)))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, PickleError> {
        Ok(u64::from_le_bytes(self.arg(what)?))
    }

    /// Count one value or memo entry against the budget.
    fn spend(&mut self) -> Result<(), PickleError> {
        self.units += 1;
        if self.units > self.max_units {
            return Err(self.bad(format!(
                "more than {} values for a {}-byte input",
                self.max_units,
                self.p.input.len()
            )));
        }
        Ok(())
    }

    fn push(&mut self, v: Value) -> Result<(), PickleError> {
        self.spend()?;
        self.stack.push(v);
        Ok(())
    }

    fn pop(&mut self) -> Result<Value, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.bad("stack underflow"));
        }
        self.stack.pop().ok_or_else(|| self.bad("stack underflow"))
    }

    fn top(&self) -> Result<Value, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        match self.stack.last() {
            Some(v) if self.stack.len() > floor => Ok(*v),
            _ => Err(self.bad("stack underflow")),
        }
    }

    /// Pop everything down to the last `MARK`, and the mark.
    fn pop_mark(&mut self) -> Result<Vec<Value>, PickleError> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| self.bad("no MARK to pop to"))?;
        if m > self.stack.len() {
            return Err(self.bad("MARK above the stack"));
        }
        Ok(self.stack.split_off(m))
    }

    fn new_seq(&mut self, items: Vec<Value>, list: bool) -> Value {
        self.p.seqs.push(items);
        let id = self.p.seqs.len() - 1;
        if list {
            Value::List(id)
        } else {
            Value::Tuple(id)
        }
    }

    fn list_mut(&mut self, v: Value) -> Result<&mut Vec<Value>, PickleError> {
        let err = self.bad(format!("APPEND(S) to {}", v.what()));
        match v {
            Value::List(i) => self.p.seqs.get_mut(i).ok_or(err),
            _ => Err(err),
        }
    }

    fn dict_mut(&mut self, v: Value) -> Result<&mut Vec<(Value, Value)>, PickleError> {
        let err = self.bad(format!("SETITEM(S) on {}", v.what()));
        match v {
            Value::Dict(i) => self.p.dicts.get_mut(i).ok_or(err),
            _ => Err(err),
        }
    }

    fn global(&self, module: &[u8], name: &[u8]) -> Result<Value, PickleError> {
        Global::lookup(module, name)
            .map(Value::Global)
            .ok_or_else(|| PickleError::Global {
                module: shown(module),
                name: shown(name),
                offset: self.op_at,
            })
    }

    /// A `GLOBAL` argument: text up to a newline.
    fn line(&mut self) -> Result<(usize, usize), PickleError> {
        let rest = self.p.input.get(self.pos..).unwrap_or_default();
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or(PickleError::Truncated {
                what: "GLOBAL name line",
                offset: self.op_at,
                need: rest.len() as u64 + 1,
                left: rest.len(),
            })?;
        let span = (self.pos, n);
        self.pos += n + 1;
        Ok(span)
    }

    fn span_bytes(&self, (s, n): (usize, usize)) -> &[u8] {
        self.p.input.get(s..s + n).unwrap_or_default()
    }

    /// A little-endian two's complement integer of `n` bytes (LONG1 / LONG4).
    fn long(&mut self, n: u64) -> Result<Value, PickleError> {
        let span = self.take(n, "LONG bytes")?;
        let b = self.span_bytes(span);
        if b.len() > 8 {
            return Err(self.bad(format!("a {}-byte integer (wider than 64 bits)", b.len())));
        }
        let mut v: i64 = 0;
        for (i, &byte) in b.iter().enumerate() {
            v |= i64::from(byte) << (8 * i);
        }
        if let Some(&last) = b.last() {
            if b.len() < 8 && last & 0x80 != 0 {
                v -= 1i64 << (8 * b.len());
            }
        }
        Ok(Value::Int(v))
    }

    fn run(&mut self) -> Result<(), PickleError> {
        loop {
            self.op_at = self.pos;
            let op = match self.p.input.get(self.pos) {
                Some(&op) => op,
                None => {
                    return Err(PickleError::NoStop {
                        len: self.p.input.len(),
                    })
                }
            };
            self.pos += 1;
            match op {
                0x80 => {
                    // PROTO
                    let v = self.u8("PROTO version")?;
                    if v > 5 {
                        return Err(self.bad(format!("protocol {v} (this reader knows 2 to 5)")));
                    }
                }
                0x95 => {
                    // FRAME: advisory; the frame must lie within the input.
                    let n = self.u64("FRAME length")?;
                    if n > self.left() as u64 {
                        return Err(PickleError::Truncated {
                            what: "FRAME",
                            offset: self.op_at,
                            need: n,
                            left: self.left(),
                        });
                    }
                }
                b'.' => {
                    // STOP
                    self.p.root = self.pop()?;
                    return Ok(());
                }
                b'(' => {
                    if self.marks.len() >= MAX_DEPTH {
                        return Err(PickleError::TooDeep { offset: self.op_at });
                    }
                    self.marks.push(self.stack.len());
                }
                b'N' => self.push(Value::None)?,
                0x88 => self.push(Value::Bool(true))?,
                0x89 => self.push(Value::Bool(false))?,
                b'J' => {
                    let v = i32::from_le_bytes(self.arg("BININT")?);
                    self.push(Value::Int(i64::from(v)))?;
                }
                b'K' => {
                    let [v] = self.arg::<1>("BININT1")?;
                    self.push(Value::Int(i64::from(v)))?;
                }
                b'M' => {
                    let v = u16::from_le_bytes(self.arg("BININT2")?);
                    self.push(Value::Int(i64::from(v)))?;
                }
                0x8a => {
                    let n = self.u8("LONG1 length")?;
                    let v = self.long(n)?;
                    self.push(v)?;
                }
                0x8b => {
                    let n = self.u32("LONG4 length")?;
                    let v = self.long(n)?;
                    self.push(v)?;
                }
                b'X' | 0x8c | 0x8d => {
                    // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
                    let n = match op {
                        b'X' => self.u32("BINUNICODE length")?,
                        0x8c => self.u8("SHORT_BINUNICODE length")?,
                        _ => self.u64("BINUNICODE8 length")?,
                    };
                    let (s, n) = self.take(n, "str")?;
                    self.push(Value::Text(s, n))?;
                }
                b'T' | b'U' | b'B' | b'C' | 0x8e | 0x96 => {
                    // BINSTRING, SHORT_BINSTRING, BINBYTES, SHORT_BINBYTES, BINBYTES8,
                    // BYTEARRAY8
                    let n = match op {
                        b'T' => {
                            let n = i32::from_le_bytes(self.arg("BINSTRING length")?);
                            u64::try_from(n)
                                .map_err(|_| self.bad(format!("BINSTRING length {n}")))?
                        }
                        b'B' => self.u32("BINBYTES length")?,
                        b'U' | b'C' => self.u8("SHORT_BINSTRING length")?,
                        _ => self.u64("BINBYTES8 length")?,
                    };
                    let (s, n) = self.take(n, "byte string")?;
                    self.push(Value::Bytes(s, n))?;
                }
                b'}' => {
                    self.p.dicts.push(Vec::new());
                    let v = Value::Dict(self.p.dicts.len() - 1);
                    self.push(v)?;
                }
                b']' => {
                    let v = self.new_seq(Vec::new(), true);
                    self.push(v)?;
                }
                b')' => {
                    let v = self.new_seq(Vec::new(), false);
                    self.push(v)?;
                }
                b't' => {
                    let items = self.pop_mark()?;
                    let v = self.new_seq(items, false);
                    self.push(v)?;
                }
                0x85..=0x87 => {
                    // TUPLE1..3
                    let n = usize::from(op - 0x84);
                    let floor = self.marks.last().copied().unwrap_or(0);
                    if self.stack.len() < floor + n {
                        return Err(self.bad("stack underflow"));
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    let v = self.new_seq(items, false);
                    self.push(v)?;
                }
                b'a' => {
                    let v = self.pop()?;
                    let list = self.top()?;
                    self.list_mut(list)?.push(v);
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    let list = self.top()?;
                    self.list_mut(list)?.extend(items);
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    let d = self.top()?;
                    self.dict_mut(d)?.push((k, v));
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    if items.len() % 2 != 0 {
                        return Err(self.bad("SETITEMS with an odd number of items"));
                    }
                    let d = self.top()?;
                    let pairs = items.chunks_exact(2).map(|kv| (kv[0], kv[1]));
                    self.dict_mut(d)?.extend(pairs);
                }
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let v = self.top()?;
                    self.push(v)?;
                }
                b'q' | b'r' | 0x94 => {
                    // BINPUT, LONG_BINPUT, MEMOIZE
                    let i = match op {
                        b'q' => self.u8("BINPUT index")?,
                        b'r' => self.u32("LONG_BINPUT index")?,
                        _ => self.memo.len() as u64,
                    };
                    let v = self.top()?;
                    self.spend()?;
                    self.memo.insert(i, v);
                }
                b'h' | b'j' => {
                    let i = if op == b'h' {
                        self.u8("BINGET index")?
                    } else {
                        self.u32("LONG_BINGET index")?
                    };
                    let v = *self
                        .memo
                        .get(&i)
                        .ok_or_else(|| self.bad(format!("memo entry {i} was never set")))?;
                    self.push(v)?;
                }
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    let (m, n) = (self.span_bytes(module), self.span_bytes(name));
                    let v = self.global(m, n)?;
                    self.push(v)?;
                }
                0x93 => {
                    // STACK_GLOBAL
                    let name = self.pop()?;
                    let module = self.pop()?;
                    match (module, name) {
                        (Value::Text(ms, mn), Value::Text(ns, nn)) => {
                            let (m, n) = (self.span_bytes((ms, mn)), self.span_bytes((ns, nn)));
                            let v = self.global(m, n)?;
                            self.push(v)?;
                        }
                        _ => return Err(self.bad("STACK_GLOBAL of non-strings")),
                    }
                }
                b'R' => {
                    let args = self.pop()?;
                    let f = self.pop()?;
                    let v = self.reduce(f, args)?;
                    self.push(v)?;
                }
                b'b' => {
                    let state = self.pop()?;
                    let target = self.top()?;
                    self.build(target, state)?;
                }
                _ => {
                    return Err(PickleError::UnknownOpcode {
                        opcode: op,
                        offset: self.op_at,
                    })
                }
            }
        }
    }

    /// The items of an argument or state tuple: at most [`MAX_ARGS`] (none of the calls
    /// read takes more), so no opcode copies more than a few values.
    fn args(&self, args: Value, what: &str) -> Result<Vec<Value>, PickleError> {
        match args {
            Value::Tuple(i) => {
                let items = self.p.seqs.get(i).map(Vec::as_slice).unwrap_or_default();
                if items.len() > MAX_ARGS {
                    return Err(self.bad(format!("{what} with {} arguments", items.len())));
                }
                Ok(items.to_vec())
            }
            other => Err(self.bad(format!("{what} called with {}", other.what()))),
        }
    }

    fn new_dtype(&mut self, name: Value) -> Result<Value, PickleError> {
        let name = match name {
            Value::Bytes(..) | Value::Text(..) | Value::Decoded(_) => {
                shown(self.p.bytes(name).unwrap_or_default())
                    .chars()
                    .take(32)
                    .collect()
            }
            other => return Err(self.bad(format!("numpy dtype named by {}", other.what()))),
        };
        self.p.dtypes.push(Dtype { name });
        Ok(Value::Dtype(self.p.dtypes.len() - 1))
    }

    fn reduce(&mut self, f: Value, args: Value) -> Result<Value, PickleError> {
        let g = match f {
            Value::Global(g) => g,
            other => return Err(self.bad(format!("REDUCE of {}", other.what()))),
        };
        let a = self.args(args, "REDUCE")?;
        match (g, a.as_slice()) {
            (Global::Encode, [Value::Text(s, n), rest @ ..]) if rest.len() <= 1 => {
                let enc = rest
                    .first()
                    .and_then(|&e| self.p.bytes(e))
                    .unwrap_or(b"utf-8");
                if !matches!(
                    enc.to_ascii_lowercase().as_slice(),
                    b"latin1" | b"latin-1" | b"latin_1" | b"iso-8859-1" | b"iso8859-1"
                ) {
                    return Err(self.bad(format!("_codecs.encode to {:?}", shown(enc))));
                }
                let (s, n) = (*s, *n);
                if self.decoded_total.saturating_add(n) > self.p.input.len() {
                    return Err(self.bad("more decoded text than the input holds"));
                }
                let text = std::str::from_utf8(self.span_bytes((s, n)))
                    .map_err(|e| self.bad(format!("text is not UTF-8: {e}")))?;
                let mut out = Vec::with_capacity(n);
                for c in text.chars() {
                    let b = u8::try_from(u32::from(c)).map_err(|_| {
                        self.bad(format!("character U+{:04X} is not latin-1", u32::from(c)))
                    })?;
                    out.push(b);
                }
                self.decoded_total += n;
                self.p.decoded.push(out);
                Ok(Value::Decoded(self.p.decoded.len() - 1))
            }
            (Global::Bytes, []) => Ok(Value::Bytes(0, 0)),
            (Global::Reconstruct, [Value::Global(Global::Ndarray), ..]) => {
                self.p.arrays.push(Array::default());
                Ok(Value::Array(self.p.arrays.len() - 1))
            }
            (Global::Dtype, [name, ..]) => self.new_dtype(*name),
            (Global::FromBuffer, [data, dtype, shape, order]) => {
                let (data, dtype, shape, order) = (*data, *dtype, *shape, *order);
                let fortran = match self.p.bytes(order) {
                    Some(b"C") => false,
                    Some(b"F") => true,
                    _ => return Err(self.bad("_frombuffer order is not 'C' or 'F'")),
                };
                let shape = match shape {
                    Value::Tuple(i) => i,
                    other => return Err(self.bad(format!("array shape is {}", other.what()))),
                };
                self.p.arrays.push(Array {
                    shape: Some(shape),
                    dtype: Some(dtype),
                    fortran,
                    data: Some(data),
                });
                Ok(Value::Array(self.p.arrays.len() - 1))
            }
            (g, a) => Err(self.bad(format!("REDUCE of {g:?} with {} argument(s)", a.len()))),
        }
    }

    fn build(&mut self, target: Value, state: Value) -> Result<(), PickleError> {
        match target {
            Value::Array(i) => {
                let st = self.args(state, "ndarray.__setstate__")?;
                // (version, shape, dtype, is_fortran, data), or the same without version
                let st = match st.as_slice() {
                    [_, rest @ ..] if rest.len() == 4 => rest,
                    rest if rest.len() == 4 => rest,
                    _ => {
                        return Err(
                            self.bad("array state is not (version, shape, dtype, order, data)")
                        )
                    }
                };
                let shape = match st[0] {
                    Value::Tuple(i) => i,
                    other => return Err(self.bad(format!("array shape is {}", other.what()))),
                };
                let fortran = match st[2] {
                    Value::Bool(b) => b,
                    Value::Int(n) => n != 0,
                    other => return Err(self.bad(format!("array order flag is {}", other.what()))),
                };
                let a = Array {
                    shape: Some(shape),
                    dtype: Some(st[1]),
                    fortran,
                    data: Some(st[3]),
                };
                match self.p.arrays.get_mut(i) {
                    Some(slot) => *slot = a,
                    None => return Err(self.bad("BUILD of an unknown array")),
                }
                Ok(())
            }
            // The dtype's state (byte order, …) does not matter for the dtypes accepted.
            Value::Dtype(_) => Ok(()),
            other => Err(self.bad(format!("BUILD on {}", other.what()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `{b"k": [1, -2, 300, 70000], b"s": "é"}` in protocol 2 with the memo, as hand-written
    /// opcodes.
    #[test]
    fn reads_a_small_dict_of_lists_and_strings() {
        let mut p = vec![0x80, 2, b'}', b'q', 0, b'('];
        p.extend_from_slice(b"U\x01kq\x01]q\x02(K\x01J\xfe\xff\xff\xffM\x2c\x01");
        p.extend_from_slice(&[0x8a, 3, 0x70, 0x11, 0x01]); // LONG1 70000
        p.extend_from_slice(b"eU\x01sX\x02\x00\x00\x00\xc3\xa9u.");
        let parsed = parse(&p).expect("parses");
        let Value::Dict(d) = parsed.root else {
            panic!("not a dict: {:?}", parsed.root)
        };
        let items = &parsed.dicts[d];
        assert_eq!(items.len(), 2);
        assert_eq!(parsed.bytes(items[0].0), Some(&b"k"[..]));
        let list: Vec<Value> = parsed.items(items[0].1).expect("list").to_vec();
        assert_eq!(
            list,
            vec![
                Value::Int(1),
                Value::Int(-2),
                Value::Int(300),
                Value::Int(70000)
            ]
        );
        assert_eq!(parsed.bytes(items[1].1), Some("é".as_bytes()));
    }

    #[test]
    fn refuses_code_unknown_opcodes_lengths_and_depth() {
        let e = parse(b"\x80\x02cos\nsystem\nq\x00.").expect_err("os.system");
        assert!(
            matches!(&e, PickleError::Global { module, name, offset: 2 } if module == "os" && name == "system"),
            "{e}"
        );
        let e = parse(b"\x80\x02I1\n.").expect_err("INT is not supported");
        assert_eq!(
            e,
            PickleError::UnknownOpcode {
                opcode: b'I',
                offset: 2
            }
        );
        let e = parse(b"\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\x7fabc.").expect_err("huge");
        assert!(
            matches!(e, PickleError::Truncated { need, left: 4, offset: 2, .. } if need == i64::MAX as u64),
            "{e}"
        );
        let e = parse(&[b'('; 100]).expect_err("deep");
        assert_eq!(e, PickleError::TooDeep { offset: MAX_DEPTH });
        assert_eq!(
            parse(b"\x80\x02").expect_err("empty"),
            PickleError::NoStop { len: 2 }
        );
        assert!(matches!(
            parse(b"h\x05.").expect_err("memo"),
            PickleError::Malformed { offset: 0, .. }
        ));
        // a long argument tuple is refused, not copied for every REDUCE
        assert!(matches!(
            parse(b"c_codecs\nencode\n(NNNNNNNNNtR.").expect_err("9 arguments"),
            PickleError::Malformed { offset: 27, reason } if reason.contains("with 9 arguments")
        ));
        assert!(matches!(
            parse(b"(.").expect_err("stop under a mark"),
            PickleError::Malformed { .. }
        ));
    }

    #[test]
    fn values_are_budgeted_by_the_input_size() {
        // 70 000 NONEs (one byte each) in a list: past 65 536 + 70 002 / 16 values
        let mut p = b"](".to_vec();
        p.extend(std::iter::repeat_n(b'N', 70_000));
        p.extend_from_slice(b"e.");
        assert!(matches!(
            parse(&p).expect_err("budget"),
            PickleError::Malformed { reason, .. } if reason.contains("more than 69911 values for a 70004-byte input")
        ));
        // MEMOIZE of the same value counts too
        let mut p = b"N".to_vec();
        p.extend(std::iter::repeat_n(0x94, 70_000));
        p.push(b'.');
        assert!(parse(&p).is_err());
        let mut p = b"](".to_vec();
        p.extend(std::iter::repeat_n(b'N', 60_000));
        p.extend_from_slice(b"e.");
        assert!(parse(&p).is_ok());
    }

    #[test]
    fn decodes_latin1_text_within_a_budget() {
        // _codecs.encode("\u{ff}A", "latin1"), then the same again from the memo 3 times:
        // past the budget of the input's size.
        let mut p = b"\x80\x02c_codecs\nencode\nq\x00X\x03\x00\x00\x00\xc3\xbfAq\x01X\x06\x00\x00\x00latin1q\x02\x86R".to_vec();
        let ok = [&p[..], b"."].concat();
        let parsed = parse(&ok).expect("one decode");
        assert_eq!(parsed.bytes(parsed.root), Some(&[0xff, b'A'][..]));
        for _ in 0..40 {
            p.extend_from_slice(b"0h\x00h\x01h\x02\x86R");
        }
        p.push(b'.');
        assert!(parse(&p).is_ok(), "40 small decodes fit the budget");
        let mut big = b"\x80\x02c_codecs\nencode\nq\x00X\x00\x01\x00\x00".to_vec();
        big.extend(std::iter::repeat_n(b'a', 256));
        big.extend_from_slice(b"q\x01X\x06\x00\x00\x00latin1q\x02\x86R");
        for _ in 0..4 {
            big.extend_from_slice(b"0h\x00h\x01h\x02\x86R");
        }
        big.push(b'.');
        assert!(matches!(
            parse(&big).expect_err("budget"),
            PickleError::Malformed { reason, .. } if reason.contains("decoded")
        ));
    }
}
