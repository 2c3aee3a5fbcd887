//! One file of torchvision's CIFAR layout ("CIFAR-10 python version": `data_batch_1` …
//! `data_batch_5`, `test_batch`; CIFAR-100: `train`, `test`): a pickled dict whose `data`
//! is a numpy `uint8` array of shape `[N, 3072]` (rows 1024 R + 1024 G + 1024 B bytes, the
//! binary records' pixel order) and whose labels are lists of ints: `labels` (CIFAR-10),
//! `coarse_labels` and `fine_labels` (CIFAR-100). Keys may be byte strings (as the Python 2
//! originals and `encoding="bytes"` have them) or text (a re-save from Python 3).
//!
//! [`parse_cifar_pickle`] reads the pickle with a restricted reader that executes nothing
//! (see [`PickleError`] for what it refuses) and, when the array's bytes are stored raw
//! (Python 2's protocol 2, protocols 3 to 5), only records where they lie in the file, so
//! the caller reads records straight from its memory map. Python 3's protocol 2 stores them
//! as latin-1 text; those are decoded once.

use super::cifar::{CifarKind, PIXELS};
use crate::codec::pickle::{parse, Parsed, Value};
pub use crate::codec::pickle::{PickleError, MAX_DEPTH};
use std::ops::Range;

/// Where a CIFAR pickle's pixel bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pixels {
    /// This byte range of the file holds the `N × 3072` bytes.
    InFile(Range<usize>),
    /// The bytes were stored as latin-1 text (Python 3, protocol 2) and are decoded here.
    Decoded(Vec<u8>),
}

/// The contents of one CIFAR pickle file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CifarPickle {
    /// The `N × 3072` pixel bytes, record after record.
    pub pixels: Pixels,
    /// One entry per record, in the binary record's label order: CIFAR-10 `[label, 0]`,
    /// CIFAR-100 `[coarse, fine]`. Not range-checked (the source checks them per record, as
    /// it checks the binary label bytes).
    pub labels: Vec<[i64; 2]>,
}

impl CifarPickle {
    /// Records in the file.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when the file holds no record (never, for a parsed one).
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The 3072 pixel bytes of record `r`, given the file's bytes (`None` out of range).
    #[inline]
    pub fn record<'a>(&'a self, file: &'a [u8], r: usize) -> Option<&'a [u8]> {
        let all = match &self.pixels {
            Pixels::InFile(range) => file.get(range.clone())?,
            Pixels::Decoded(v) => v.as_slice(),
        };
        all.get(r.checked_mul(PIXELS)?..r.checked_add(1)?.checked_mul(PIXELS)?)
    }
}

fn content(reason: impl Into<String>) -> PickleError {
    PickleError::Content(reason.into())
}

fn ints(p: &Parsed<'_>, v: Value, key: &str) -> Result<Vec<i64>, PickleError> {
    let items = p.items(v).ok_or_else(|| {
        content(format!(
            "'{key}' is {}, not a list of ints",
            match v {
                Value::Array(_) => "a numpy array",
                Value::Dict(_) => "a dict",
                _ => "not a list",
            }
        ))
    })?;
    items
        .iter()
        .enumerate()
        .map(|(i, x)| match x {
            Value::Int(n) => Ok(*n),
            _ => Err(content(format!("'{key}'[{i}] is not an int"))),
        })
        .collect()
}

/// Parse one torchvision CIFAR file (`bytes`: the whole file) of `kind`.
///
/// Reads nothing but data: pickle opcodes of protocols 2 to 5 and numpy's array
/// reconstruction, with every length checked against `bytes`. The dict must hold `data`
/// (a C-ordered `uint8` array of shape `[N, 3072]`, `N > 0`) and, for CIFAR-10, `labels`;
/// for CIFAR-100, `fine_labels` and `coarse_labels`: lists of `N` ints. Anything else is a
/// [`PickleError`]; other keys (`filenames`, `batch_label`) are ignored.
pub fn parse_cifar_pickle(bytes: &[u8], kind: CifarKind) -> Result<CifarPickle, PickleError> {
    let mut p = parse(bytes)?;
    let dict = match p.root {
        Value::Dict(i) => p.dicts.get(i).cloned().unwrap_or_default(),
        other => {
            return Err(content(format!(
                "the pickle holds {}, not a dict",
                match other {
                    Value::List(_) => "a list",
                    Value::Array(_) => "a numpy array",
                    _ => "something else",
                }
            )))
        }
    };
    let get = |name: &str| {
        dict.iter()
            .rev()
            .find(|(k, _)| p.bytes(*k) == Some(name.as_bytes()))
            .map(|(_, v)| *v)
    };
    let data = get("data");
    let (first, second) = match kind {
        CifarKind::Cifar10 => (get("labels"), None),
        CifarKind::Cifar100 => (get("coarse_labels"), get("fine_labels")),
    };
    let wrong_kind = match kind {
        CifarKind::Cifar10 if get("fine_labels").is_some() => {
            "; it has 'fine_labels': is this CIFAR-100 (kind = \"cifar100\")?"
        }
        CifarKind::Cifar100 if get("labels").is_some() => {
            "; it has 'labels': is this CIFAR-10 (kind = \"cifar10\")?"
        }
        _ => "",
    };
    let data = data.ok_or_else(|| content("the dict has no 'data' key"))?;
    let (first, second) = match (kind, first, second) {
        (CifarKind::Cifar10, Some(l), _) => (ints(&p, l, "labels")?, None),
        (CifarKind::Cifar100, Some(c), Some(f)) => (
            ints(&p, c, "coarse_labels")?,
            Some(ints(&p, f, "fine_labels")?),
        ),
        (CifarKind::Cifar10, ..) => {
            return Err(content(format!("the dict has no 'labels' key{wrong_kind}")))
        }
        (CifarKind::Cifar100, ..) => {
            return Err(content(format!(
                "the dict lacks 'coarse_labels' or 'fine_labels'{wrong_kind}"
            )))
        }
    };
    let array = match data {
        Value::Array(i) => p.arrays.get(i).cloned().unwrap_or_default(),
        _ => return Err(content("'data' is not a numpy array")),
    };
    let (Some(shape), Some(dtype), Some(bytes_v)) = (array.shape, array.dtype, array.data) else {
        return Err(content("'data' is a numpy array without its state"));
    };
    match dtype {
        Value::Dtype(d) => match p.dtypes.get(d) {
            Some(d) if d.is_u8() => {}
            Some(d) => {
                return Err(content(format!(
                    "'data' has dtype '{}', not uint8 ('u1')",
                    d.name
                )))
            }
            None => return Err(content("'data' has no dtype")),
        },
        _ => return Err(content("'data' has no dtype")),
    }
    let dims: Vec<Option<i64>> = p
        .seqs
        .get(shape)
        .map(|s| {
            s.iter()
                .map(|v| match v {
                    Value::Int(n) => Some(*n),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let shown = dims
        .iter()
        .map(|d| d.map_or("?".into(), |n| n.to_string()))
        .collect::<Vec<_>>()
        .join(", ");
    let n = match dims.as_slice() {
        [Some(n), Some(3072)] if *n > 0 => usize::try_from(*n).unwrap_or(usize::MAX),
        _ => {
            return Err(content(format!(
                "'data' has shape [{shown}], not [N, 3072] with N > 0"
            )))
        }
    };
    if array.fortran {
        return Err(content(
            "'data' is Fortran-ordered, not C-contiguous rows of 3072 bytes",
        ));
    }
    let held = match bytes_v {
        Value::Bytes(_, len) => len,
        Value::Decoded(i) => p.decoded.get(i).map_or(0, Vec::len),
        _ => return Err(content("'data' holds no raw bytes (an object array?)")),
    };
    if n.checked_mul(PIXELS) != Some(held) {
        return Err(content(format!(
            "'data' holds {held} bytes but its shape [{shown}] needs {}",
            (n as u128) * PIXELS as u128
        )));
    }
    let check = |what: &str, l: &[i64]| {
        if l.len() == n {
            Ok(())
        } else {
            Err(content(format!(
                "'{what}' has {} labels for {n} images",
                l.len()
            )))
        }
    };
    let labels: Vec<[i64; 2]> = match &second {
        None => {
            check("labels", &first)?;
            first.iter().map(|&l| [l, 0]).collect()
        }
        Some(fine) => {
            check("coarse_labels", &first)?;
            check("fine_labels", fine)?;
            first.iter().zip(fine).map(|(&c, &f)| [c, f]).collect()
        }
    };
    let pixels = match bytes_v {
        Value::Bytes(s, len) => Pixels::InFile(s..s + len),
        Value::Decoded(i) => Pixels::Decoded(p.take_decoded(i)),
        _ => return Err(content("'data' holds no raw bytes")),
    };
    Ok(CifarPickle { pixels, labels })
}
