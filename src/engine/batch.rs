//! `Batch`: contiguous images, labels and sample indices, as plain slices with a shape.
//! Its buffers come from a pool and go back to it when the batch is dropped, so a steady
//! epoch allocates nothing.

use crate::error::Error;
use crate::spec::{DType, LabelType, Layout};
use std::sync::{Arc, Mutex};

/// Image storage of a batch.
#[derive(Debug)]
pub(crate) enum ImageBuf {
    U8(Vec<u8>),
    F32(Vec<f32>),
    /// float16 or bfloat16 (the shape's `dtype` says which), as their bits.
    U16(Vec<u16>),
}

/// Label storage of a batch.
#[derive(Debug)]
pub(crate) enum LabelBuf {
    U32(Vec<u32>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
}

/// The labels of a batch, typed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Labels<'a> {
    /// uint32 (no type_cast).
    U32(&'a [u32]),
    /// int32.
    I32(&'a [i32]),
    /// int64.
    I64(&'a [i64]),
    /// float32.
    F32(&'a [f32]),
}

impl Labels<'_> {
    /// Label `i` as f64, whatever the type (soft labels are fractions).
    pub fn value(&self, i: usize) -> Option<f64> {
        match self {
            Labels::U32(v) => v.get(i).map(|&x| f64::from(x)),
            Labels::I32(v) => v.get(i).map(|&x| f64::from(x)),
            Labels::I64(v) => v.get(i).map(|&x| x as f64),
            Labels::F32(v) => v.get(i).map(|&x| f64::from(x)),
        }
    }

    /// Label `i` as i64, whatever the type (f32 labels truncated).
    pub fn get(&self, i: usize) -> Option<i64> {
        match self {
            Labels::U32(v) => v.get(i).map(|&x| x as i64),
            Labels::I32(v) => v.get(i).map(|&x| x as i64),
            Labels::I64(v) => v.get(i).copied(),
            Labels::F32(v) => v.get(i).map(|&x| x as i64),
        }
    }
}

/// What every buffer of one pipeline looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BufShape {
    pub batch_size: usize,
    pub sample_elems: usize,
    pub dtype: DType,
    pub label: LabelType,
    pub label_cols: usize,
    /// Workers fingerprint each sample (`[engine] fingerprint`).
    pub fingerprints: bool,
}

/// The storage of one batch.
#[derive(Debug)]
pub(crate) struct BatchBuf {
    pub images: ImageBuf,
    pub labels: LabelBuf,
    pub indices: Vec<u64>,
    /// Per sample: its fingerprint (empty unless the shape asks for them).
    pub fingerprints: Vec<u64>,
}

impl BatchBuf {
    fn new(s: &BufShape) -> BatchBuf {
        let n = s.batch_size * s.sample_elems;
        let l = s.batch_size * s.label_cols;
        BatchBuf {
            images: match s.dtype {
                DType::U8 => ImageBuf::U8(vec![0; n]),
                DType::F32 => ImageBuf::F32(vec![0.0; n]),
                DType::F16 | DType::BF16 => ImageBuf::U16(vec![0; n]),
            },
            labels: match s.label {
                LabelType::U32 => LabelBuf::U32(vec![0; l]),
                LabelType::I32 => LabelBuf::I32(vec![0; l]),
                LabelType::I64 => LabelBuf::I64(vec![0; l]),
                LabelType::F32 => LabelBuf::F32(vec![0.0; l]),
            },
            indices: vec![0; s.batch_size],
            fingerprints: vec![0; if s.fingerprints { s.batch_size } else { 0 }],
        }
    }

    /// Move the samples whose `keep` is true to the front, in order.
    pub(crate) fn compact(&mut self, keep: &[bool], s: &BufShape) {
        fn squeeze<T: Copy>(v: &mut [T], keep: &[bool], width: usize) {
            let mut to = 0;
            for (from, &k) in keep.iter().enumerate() {
                if k {
                    if to != from {
                        v.copy_within(from * width..(from + 1) * width, to * width);
                    }
                    to += 1;
                }
            }
        }
        match &mut self.images {
            ImageBuf::U8(v) => squeeze(v, keep, s.sample_elems),
            ImageBuf::F32(v) => squeeze(v, keep, s.sample_elems),
            ImageBuf::U16(v) => squeeze(v, keep, s.sample_elems),
        }
        match &mut self.labels {
            LabelBuf::U32(v) => squeeze(v, keep, s.label_cols),
            LabelBuf::I32(v) => squeeze(v, keep, s.label_cols),
            LabelBuf::I64(v) => squeeze(v, keep, s.label_cols),
            LabelBuf::F32(v) => squeeze(v, keep, s.label_cols),
        }
        squeeze(&mut self.indices, keep, 1);
        if !self.fingerprints.is_empty() {
            squeeze(&mut self.fingerprints, keep, 1);
        }
    }
}

/// Free batch buffers of one pipeline, shared by its epochs.
#[derive(Debug)]
pub(crate) struct Pool {
    pub shape: BufShape,
    free: Mutex<Vec<BatchBuf>>,
    keep: usize,
}

impl Pool {
    pub(crate) fn new(shape: BufShape, keep: usize) -> Pool {
        Pool {
            shape,
            free: Mutex::new(Vec::new()),
            keep,
        }
    }

    /// A buffer: a returned one when there is one, a new one otherwise (a trainer that
    /// holds on to batches costs memory, never a deadlock).
    pub(crate) fn take(&self) -> BatchBuf {
        let reused = self.free.lock().ok().and_then(|mut f| f.pop());
        reused.unwrap_or_else(|| BatchBuf::new(&self.shape))
    }

    fn give(&self, buf: BatchBuf) {
        if let Ok(mut f) = self.free.lock() {
            if f.len() < self.keep {
                f.push(buf);
            }
        }
    }
}

/// A batch column read as a type it does not have: which column, what it is, what was
/// asked for, and what to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the batch's {column} are {have}, not {want}: {why}")]
pub struct WrongType {
    /// `images` or `labels`.
    pub column: &'static str,
    /// Their type (numpy's name).
    pub have: &'static str,
    /// The type asked for.
    pub want: &'static str,
    /// What to read or change instead.
    pub why: &'static str,
}

/// One batch of samples, in output order.
///
/// Images are contiguous `[n, c, h, w]` (or `[n, h, w, c]`), labels `[n]` (or `[n, k]`
/// with k label columns), and `indices` are the samples' indices in the source.
#[derive(Debug)]
pub struct Batch {
    pub(crate) buf: Option<BatchBuf>,
    pub(crate) len: usize,
    pub(crate) number: usize,
    pub(crate) dims: [usize; 3],
    pub(crate) layout: Layout,
    pub(crate) label_cols: usize,
    pub(crate) pool: Arc<Pool>,
    pub(crate) skipped: Vec<Error>,
    /// Skip mode: positions (in the engine's batch) of the samples left out, ascending.
    pub(crate) lost: Vec<usize>,
}

impl Batch {
    /// Samples in this batch.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a batch whose samples were all skipped (`on_error = "skip"`).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Position of this batch in its epoch (0, 1, ...).
    pub fn number(&self) -> usize {
        self.number
    }

    /// `[n, c, h, w]` for CHW pipelines, `[n, h, w, c]` for HWC ones.
    pub fn shape(&self) -> [usize; 4] {
        [self.len, self.dims[0], self.dims[1], self.dims[2]]
    }

    /// The memory layout of each image.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    fn elems(&self) -> usize {
        self.len * self.dims.iter().product::<usize>()
    }

    /// The images' element type.
    pub fn dtype(&self) -> DType {
        self.pool.shape.dtype
    }

    fn wrong_images(&self, want: DType) -> WrongType {
        let have = self.dtype();
        WrongType {
            column: "images",
            have: have.name(),
            want: want.name(),
            why: match have {
                DType::U8 => {
                    "the pipeline ends before any normalize, rescale or type_cast of the image \
                     (which make floats): read images_u8, or add one"
                }
                DType::F32 => "normalize or rescale made them float32: read images_f32",
                DType::F16 => "a type_cast made them float16: read images_f16",
                DType::BF16 => "a type_cast made them bfloat16: read images_bf16",
            },
        }
    }

    /// The images, when the pipeline ends in float32 (after `normalize` or `rescale`);
    /// else why not.
    pub fn images_f32(&self) -> Result<&[f32], WrongType> {
        match self.buf.as_ref().map(|b| &b.images) {
            Some(ImageBuf::F32(v)) => Ok(&v[..self.elems()]),
            _ => Err(self.wrong_images(DType::F32)),
        }
    }

    /// The images, when the pipeline ends in uint8 (no `normalize` or `rescale`); else why
    /// not.
    pub fn images_u8(&self) -> Result<&[u8], WrongType> {
        match self.buf.as_ref().map(|b| &b.images) {
            Some(ImageBuf::U8(v)) => Ok(&v[..self.elems()]),
            _ => Err(self.wrong_images(DType::U8)),
        }
    }

    /// The images, when the pipeline casts them to float16 (`type_cast`, `column =
    /// "image"`); else why not.
    pub fn images_f16(&self) -> Result<&[half::f16], WrongType> {
        match self.buf.as_ref().map(|b| &b.images) {
            Some(ImageBuf::U16(v)) if self.dtype() == DType::F16 => {
                Ok(bytemuck::cast_slice(&v[..self.elems()]))
            }
            _ => Err(self.wrong_images(DType::F16)),
        }
    }

    /// The images, when the pipeline casts them to bfloat16; else why not.
    pub fn images_bf16(&self) -> Result<&[half::bf16], WrongType> {
        match self.buf.as_ref().map(|b| &b.images) {
            Some(ImageBuf::U16(v)) if self.dtype() == DType::BF16 => {
                Ok(bytemuck::cast_slice(&v[..self.elems()]))
            }
            _ => Err(self.wrong_images(DType::BF16)),
        }
    }

    /// The images as raw little-endian bytes (what `.npy` files hold).
    pub fn image_bytes(&self) -> &[u8] {
        match self.buf.as_ref().map(|b| &b.images) {
            Some(ImageBuf::U8(v)) => &v[..self.elems()],
            Some(ImageBuf::F32(v)) => bytemuck::cast_slice(&v[..self.elems()]),
            Some(ImageBuf::U16(v)) => bytemuck::cast_slice(&v[..self.elems()]),
            None => &[],
        }
    }

    /// The images as raw bytes, writable: for a consumer that hands the batch's memory on
    /// without a copy (the Python package's numpy arrays view it, and trainers may write
    /// to them in place). The memory stays where it is until the batch is dropped.
    pub fn image_bytes_mut(&mut self) -> &mut [u8] {
        let n = self.elems();
        match self.buf.as_mut().map(|b| &mut b.images) {
            Some(ImageBuf::U8(v)) => &mut v[..n],
            Some(ImageBuf::F32(v)) => bytemuck::cast_slice_mut(&mut v[..n]),
            Some(ImageBuf::U16(v)) => bytemuck::cast_slice_mut(&mut v[..n]),
            None => &mut [],
        }
    }

    /// The labels as raw bytes, writable (see [`Batch::image_bytes_mut`]).
    pub fn label_bytes_mut(&mut self) -> &mut [u8] {
        let n = self.len * self.label_cols;
        match self.buf.as_mut().map(|b| &mut b.labels) {
            Some(LabelBuf::U32(v)) => bytemuck::cast_slice_mut(&mut v[..n]),
            Some(LabelBuf::I32(v)) => bytemuck::cast_slice_mut(&mut v[..n]),
            Some(LabelBuf::I64(v)) => bytemuck::cast_slice_mut(&mut v[..n]),
            Some(LabelBuf::F32(v)) => bytemuck::cast_slice_mut(&mut v[..n]),
            None => &mut [],
        }
    }

    /// Number of label columns (1, or 2 for CIFAR-100 with both labels).
    pub fn label_columns(&self) -> usize {
        self.label_cols
    }

    /// The labels, `len × label_columns`, row-major.
    pub fn labels(&self) -> Labels<'_> {
        let n = self.len * self.label_cols;
        match self.buf.as_ref().map(|b| &b.labels) {
            Some(LabelBuf::U32(v)) => Labels::U32(&v[..n]),
            Some(LabelBuf::I32(v)) => Labels::I32(&v[..n]),
            Some(LabelBuf::I64(v)) => Labels::I64(&v[..n]),
            Some(LabelBuf::F32(v)) => Labels::F32(&v[..n]),
            None => Labels::U32(&[]),
        }
    }

    /// The labels when they are int32 (the canonical pipelines cast to it); else why not.
    pub fn labels_i32(&self) -> Result<&[i32], WrongType> {
        let have = match self.labels() {
            Labels::I32(v) => return Ok(v),
            Labels::U32(_) => "uint32",
            Labels::I64(_) => "int64",
            Labels::F32(_) => "float32",
        };
        Err(WrongType {
            column: "labels",
            have,
            want: "int32",
            why: "add a type_cast of the label column to int32, or read labels()",
        })
    }

    /// The labels as raw little-endian bytes.
    pub fn label_bytes(&self) -> &[u8] {
        match self.labels() {
            Labels::U32(v) => bytemuck::cast_slice(v),
            Labels::I32(v) => bytemuck::cast_slice(v),
            Labels::I64(v) => bytemuck::cast_slice(v),
            Labels::F32(v) => bytemuck::cast_slice(v),
        }
    }

    /// Source index of each sample.
    pub fn indices(&self) -> &[u64] {
        self.buf.as_ref().map_or(&[], |b| &b.indices[..self.len])
    }

    /// Each sample's fingerprint, a 64-bit digest of its image bytes computed by the
    /// worker that wrote it (see [`crate::engine::fingerprint`]); `None` unless the
    /// pipeline runs with `[engine] fingerprint = true`.
    pub fn fingerprints(&self) -> Option<&[u64]> {
        self.buf
            .as_ref()
            .filter(|b| !b.fingerprints.is_empty())
            .map(|b| &b.fingerprints[..self.len])
    }

    /// The bad samples met while making this batch, with their errors: left out
    /// (`on_error = "skip"`) or replaced by another sample (`on_error = "replace"`).
    pub fn skipped(&self) -> &[Error] {
        &self.skipped
    }

    /// Order position of this batch's sample `k`, when the engine batch it came from
    /// started at position `pos0` and lost the samples in `lost`.
    pub(crate) fn position_of(&self, k: usize, pos0: usize) -> usize {
        let mut p = k;
        for &l in &self.lost {
            if l <= p {
                p += 1;
            } else {
                break;
            }
        }
        pos0 + p
    }

    /// Append the first `k` samples of `other` (same pipeline) after this batch's own.
    pub(crate) fn append_front_of(&mut self, other: &Batch, k: usize) {
        fn app<T: Copy>(dst: &mut [T], at: usize, src: &[T], n: usize, width: usize) {
            dst[at * width..(at + n) * width].copy_from_slice(&src[..n * width]);
        }
        let (Some(dst), Some(src)) = (self.buf.as_mut(), other.buf.as_ref()) else {
            return;
        };
        let (at, e, c) = (
            self.len,
            self.dims.iter().product::<usize>(),
            self.label_cols,
        );
        match (&mut dst.images, &src.images) {
            (ImageBuf::U8(d), ImageBuf::U8(s)) => app(d, at, s, k, e),
            (ImageBuf::F32(d), ImageBuf::F32(s)) => app(d, at, s, k, e),
            (ImageBuf::U16(d), ImageBuf::U16(s)) => app(d, at, s, k, e),
            _ => return,
        }
        match (&mut dst.labels, &src.labels) {
            (LabelBuf::U32(d), LabelBuf::U32(s)) => app(d, at, s, k, c),
            (LabelBuf::I32(d), LabelBuf::I32(s)) => app(d, at, s, k, c),
            (LabelBuf::I64(d), LabelBuf::I64(s)) => app(d, at, s, k, c),
            (LabelBuf::F32(d), LabelBuf::F32(s)) => app(d, at, s, k, c),
            _ => return,
        }
        app(&mut dst.indices, at, &src.indices, k, 1);
        if !dst.fingerprints.is_empty() && !src.fingerprints.is_empty() {
            app(&mut dst.fingerprints, at, &src.fingerprints, k, 1);
        }
        self.len += k;
    }

    /// Remove the first `k` samples (the rest move to the front).
    pub(crate) fn drop_front(&mut self, k: usize) {
        fn shift<T: Copy>(v: &mut [T], k: usize, n: usize, width: usize) {
            v.copy_within(k * width..n * width, 0);
        }
        let (n, e, c) = (
            self.len,
            self.dims.iter().product::<usize>(),
            self.label_cols,
        );
        let Some(buf) = self.buf.as_mut() else { return };
        match &mut buf.images {
            ImageBuf::U8(v) => shift(v, k, n, e),
            ImageBuf::F32(v) => shift(v, k, n, e),
            ImageBuf::U16(v) => shift(v, k, n, e),
        }
        match &mut buf.labels {
            LabelBuf::U32(v) => shift(v, k, n, c),
            LabelBuf::I32(v) => shift(v, k, n, c),
            LabelBuf::I64(v) => shift(v, k, n, c),
            LabelBuf::F32(v) => shift(v, k, n, c),
        }
        shift(&mut buf.indices, k, n, 1);
        if !buf.fingerprints.is_empty() {
            shift(&mut buf.fingerprints, k, n, 1);
        }
        self.len -= k;
        // positions of the remaining samples are tracked by the caller
        self.lost.clear();
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            self.pool.give(buf);
        }
    }
}
