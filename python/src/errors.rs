//! Library errors as the Python exceptions a user expects.

use imgfeed::Error;
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// A library error as the Python exception a user expects: `imgfeed.SampleError` (a
/// `ValueError`) for a bad sample, `ValueError` for a bad pipeline or dataset, `OSError`
/// for a failed write, `RuntimeError` for a bug.
pub(crate) fn to_py(py: Python<'_>, e: &Error) -> PyErr {
    match e {
        Error::Sample {
            index,
            file,
            stage,
            kind,
            reason,
        } => sample_error(py, &e.to_string(), file, *index, stage, kind.name(), reason)
            .unwrap_or_else(|err| err),
        Error::Config { .. } | Error::Invalid(_) | Error::Op { .. } | Error::Dataset { .. } => {
            PyValueError::new_err(e.to_string())
        }
        Error::Io { .. } => PyOSError::new_err(e.to_string()),
        Error::Internal(_) => PyRuntimeError::new_err(e.to_string()),
    }
}

/// An `imgfeed.SampleError` instance (the class lives in `imgfeed/_errors.py`).
fn sample_error(
    py: Python<'_>,
    message: &str,
    path: &str,
    index: usize,
    stage: &str,
    kind: &str,
    reason: &str,
) -> PyResult<PyErr> {
    let class = py.import("imgfeed._errors")?.getattr("SampleError")?;
    let value = class.call1((message, path, index, stage, kind, reason))?;
    Ok(PyErr::from_value(value))
}
