//! The batch kernels (the mixing batch ops) run on a complete batch, by the worker that
//! completed it, before it is sent.

use super::batch::{ImageBuf, LabelBuf};
use super::*;
use crate::batch_ops::BatchView;
use crate::imgproc::half_float::{narrow, widen};
use crate::rng::batch_rng;

/// A worker's buffers for mixing the batches it completes, reused from batch to batch:
/// the 16-bit images widened to float32, and the mixing ops' scratch rows.
#[derive(Default)]
pub(super) struct MixBuffers {
    wide: Vec<f32>,
    rows: Vec<f32>,
}

impl Shared {
    /// Run the mixing batch ops on engine batch `b`, just completed in `slot`, by the
    /// worker that completed it and before `complete` sends it: outside the emit lock, so
    /// other workers keep completing and sending batches meanwhile. (Mixing is refused with
    /// `on_error = "skip"`, so no sample of the batch is left out later.)
    pub(super) fn mix(&self, slot: &Slot, b: usize, bufs: &mut MixBuffers) {
        if self.job.batch_kernels.is_empty() {
            return;
        }
        // SAFETY: every sample of batch `b` is written (`remaining` hit zero, AcqRel), no
        // worker can reach the slot again before it is reopened, and `complete` (the only
        // other reader) takes the buffer only after this worker marks the batch done.
        let Some(buf) = (unsafe { &mut *slot.buf.get() }).as_mut() else {
            return;
        };
        let n = self.batch_len(b);
        let d = self.job.program.out.dims();
        let dims = [d[0].unwrap_or(0), d[1].unwrap_or(0), d[2].unwrap_or(0)];
        let elems = n * dims.iter().product::<usize>();
        let classes = self.job.pool.shape.label_cols;
        let LabelBuf::F32(labels) = &mut buf.labels else {
            return; // the spec checks made sure of float label rows (written with the samples)
        };
        let labels = &mut labels[..n * classes];
        let MixBuffers { wide, rows } = bufs;
        let images = match &mut buf.images {
            ImageBuf::F32(v) => &mut v[..elems],
            // 16-bit images are mixed as torch mixes a half batch: each value computed in
            // float32 from the 16-bit samples, rounded once.
            ImageBuf::U16(v) => {
                widen(&v[..elems], self.job.pool.shape.dtype, wide);
                &mut wide[..]
            }
            ImageBuf::U8(_) => return, // the spec checks made sure of float images
        };
        let mut view = BatchView {
            images,
            labels,
            n,
            dims,
            layout: self.job.program.tail.layout,
            classes,
        };
        let number = self.job.first_batch + b;
        let mut rng = batch_rng(self.job.seed, self.job.epoch, number);
        for kernel in self.job.batch_kernels.iter() {
            kernel.apply(&mut view, &mut rng, rows);
        }
        if let ImageBuf::U16(v) = &mut buf.images {
            // `wide` is the batch's images, widened above: the lengths agree.
            let _ = narrow(wide, self.job.pool.shape.dtype, &mut v[..elems]);
        }
    }
}
