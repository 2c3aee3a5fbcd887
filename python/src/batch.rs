//! A batch as Python sees it: numpy arrays that view the engine's pooled buffer, owned by a
//! [`BatchMemory`] (the arrays' base object) that gives it back to the pool when the last
//! array is released.

use crate::errors::to_py;
use imgfeed::LabelType;
use numpy::ndarray::{ArrayView, IxDyn};
use numpy::{Element, PyArray1, PyArrayDyn};
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::ptr::NonNull;

/// Owns one batch's buffer while numpy arrays view it: the arrays' base object. When the
/// last of them is released this is dropped and the buffer returns to the pool.
#[pyclass(module = "imgfeed._imgfeed", frozen)]
pub(crate) struct BatchMemory {
    _batch: imgfeed::Batch,
}

/// A writable numpy array of `shape` over `ptr`, kept alive by `owner`.
///
/// # Safety
/// `ptr` must point to `shape.product()` initialised, aligned `T`s that stay valid, and
/// that nothing else reads or writes, for as long as `owner` lives.
unsafe fn view<'py, T: Element>(
    owner: &Bound<'py, BatchMemory>,
    ptr: *mut u8,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let ptr = if shape.iter().product::<usize>() == 0 {
        NonNull::<T>::dangling().as_ptr()
    } else {
        ptr.cast::<T>()
    };
    // SAFETY: the caller's contract; the element count matches `shape`.
    let arr = unsafe { ArrayView::from_shape_ptr(IxDyn(shape), ptr.cast_const()) };
    // SAFETY: `owner` keeps the buffer alive and in place for the array's lifetime.
    let out = unsafe { PyArrayDyn::<T>::borrow_from_array(&arr, owner.clone().into_any()) };
    Ok(out.into_any())
}

/// One batch: `images` `[n, c, h, w]` (or `[n, h, w, c]`), `labels` `[n]` (or `[n, k]`),
/// both numpy arrays over the engine's buffer; `indices` (source index of each sample);
/// `number` (position in the epoch); `skipped` (the bad samples left out or replaced).
#[pyclass(module = "imgfeed._imgfeed", frozen)]
pub(crate) struct Batch {
    #[pyo3(get)]
    images: Py<PyAny>,
    #[pyo3(get)]
    labels: Py<PyAny>,
    #[pyo3(get)]
    indices: Py<PyAny>,
    #[pyo3(get)]
    number: usize,
    #[pyo3(get)]
    skipped: Py<PyList>,
    len: usize,
}

impl Batch {
    /// `batch` as numpy arrays of its images (`dtype`) and labels (`label`) over its
    /// buffer, which the new object owns.
    pub(crate) fn new(
        py: Python<'_>,
        mut batch: imgfeed::Batch,
        label: LabelType,
        dtype: imgfeed::DType,
    ) -> PyResult<Batch> {
        let image_shape = batch.shape().to_vec();
        let label_shape = match batch.label_columns() {
            1 => vec![batch.len()],
            k => vec![batch.len(), k],
        };
        let (number, len) = (batch.number(), batch.len());
        let indices = PyArray1::from_slice(py, batch.indices())
            .into_any()
            .unbind();
        let skipped: Vec<Py<PyAny>> = batch
            .skipped()
            .iter()
            .map(|e| to_py(py, e).into_value(py).into_any())
            .collect();
        let image_ptr = batch.image_bytes_mut().as_mut_ptr();
        let label_ptr = batch.label_bytes_mut().as_mut_ptr();
        // The buffers are heap allocations: moving the batch does not move them.
        let owner = Bound::new(py, BatchMemory { _batch: batch })?;
        // SAFETY: the pointers come from the batch now owned by `owner`, which no code
        // touches again until it is dropped; the shapes are the batch's own, the element
        // types the pipeline's output spec.
        let (images, labels) = unsafe {
            let images = match dtype {
                imgfeed::DType::U8 => view::<u8>(&owner, image_ptr, &image_shape)?,
                imgfeed::DType::F32 => view::<f32>(&owner, image_ptr, &image_shape)?,
                // float16: numpy's own type, viewed over the bits; bfloat16 has no numpy
                // type: its bits as uint16 (`torch.from_numpy(a).view(torch.bfloat16)`,
                // `a.view(ml_dtypes.bfloat16)`; the Loader does the first).
                imgfeed::DType::F16 => view::<u16>(&owner, image_ptr, &image_shape)?
                    .call_method1("view", ("float16",))?,
                _ => view::<u16>(&owner, image_ptr, &image_shape)?,
            };
            let labels = match label {
                LabelType::U32 => view::<u32>(&owner, label_ptr, &label_shape)?,
                LabelType::I32 => view::<i32>(&owner, label_ptr, &label_shape)?,
                LabelType::I64 => view::<i64>(&owner, label_ptr, &label_shape)?,
                LabelType::F32 => view::<f32>(&owner, label_ptr, &label_shape)?,
            };
            (images, labels)
        };
        Ok(Batch {
            images: images.unbind(),
            labels: labels.unbind(),
            indices,
            number,
            skipped: PyList::new(py, skipped)?.unbind(),
            len,
        })
    }
}

#[pymethods]
impl Batch {
    fn __len__(&self) -> usize {
        self.len
    }
}
