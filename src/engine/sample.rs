//! One sample, run by a worker into its slot of a batch buffer: the ops' program, the label
//! (or the label row a batch op asks for), a caught panic as this sample's error, and a
//! replacement drawn from the same shard in `replace` mode.

use super::ordered::isolate;
use super::worker::{Out, Worker};
use super::*;
use crate::error::{Error, Result};
use crate::imgproc::Dst;
use crate::rng::{replacement_rng, sample_rng};
use crate::spec::{DType, LabelType};

fn write_label(parts: &RawParts, label: LabelType, at: usize, value: u32) {
    // SAFETY: `at` is inside this sample's label slots, which only this worker writes.
    unsafe {
        match label {
            LabelType::U32 => *(parts.labels as *mut u32).add(at) = value,
            LabelType::I32 => *(parts.labels as *mut i32).add(at) = value as i32,
            LabelType::I64 => *(parts.labels as *mut i64).add(at) = value as i64,
            LabelType::F32 => *(parts.labels as *mut f32).add(at) = value as f32,
        }
    }
}

/// Run one sample; a panic in a decoder or kernel fails this sample, not the epoch.
pub(super) fn try_one(
    sh: &Shared,
    worker: &mut Worker,
    scratch: &mut Vec<u8>,
    parts: &RawParts,
    pos: usize,
    index: usize,
) -> Result<()> {
    let job = &sh.job;
    isolate(
        worker,
        |w| run_one(sh, w, scratch, parts, pos, index),
        |w| {
            let times = std::mem::take(&mut w.times);
            *w = Worker::new(job.profile);
            w.times = times;
        },
        || Err(Error::panicked(index, job.source.sample_name(index))),
    )
}

/// `on_error = "replace"`: fill position `pos` with another sample of this shard, drawn
/// from `(seed, epoch, index, attempt)`; false when every attempt failed too.
pub(super) fn replace(
    sh: &Shared,
    worker: &mut Worker,
    scratch: &mut Vec<u8>,
    parts: &RawParts,
    pos: usize,
    index: usize,
) -> bool {
    let job = &sh.job;
    let n = job.order.len() as u64;
    let mut g = replacement_rng(job.seed, job.epoch, index);
    for _ in 0..REPLACE_ATTEMPTS {
        let candidate = job.order[g.below(n) as usize];
        if candidate != index && try_one(sh, worker, scratch, parts, pos, candidate).is_ok() {
            return true;
        }
    }
    false
}

fn run_one(
    sh: &Shared,
    worker: &mut Worker,
    scratch: &mut Vec<u8>,
    parts: &RawParts,
    pos: usize,
    index: usize,
) -> Result<()> {
    let job = &sh.job;
    let shape = job.pool.shape;
    let t0 = worker.profile.then(std::time::Instant::now);
    let sample = job.source.read(index, scratch)?;
    if let Some(t0) = t0 {
        worker.times.add("read", t0.elapsed().as_nanos() as u64);
    }
    if let crate::source::Raw::Encoded(b) = sample.raw {
        worker.times.bytes_in += b.len() as u64;
    }
    let mut rng = sample_rng(job.seed, job.epoch, index);
    let n = shape.sample_elems;
    let hash = !parts.fingerprints.is_null();
    // SAFETY (each `from_raw_parts_mut` below): position `pos` of this batch belongs to
    // this worker alone (claimed once), and the buffer holds `batch_size * sample_elems`
    // elements of the shape's type.
    let done = match shape.dtype {
        DType::U8 => {
            let dst = unsafe { std::slice::from_raw_parts_mut(parts.images.add(pos * n), n) };
            worker.run(
                &job.program,
                sample.raw,
                &mut rng,
                Out::Plain(Dst::U8(dst)),
                hash,
            )
        }
        DType::F32 => {
            let dst = unsafe {
                std::slice::from_raw_parts_mut((parts.images as *mut f32).add(pos * n), n)
            };
            worker.run(
                &job.program,
                sample.raw,
                &mut rng,
                Out::Plain(Dst::F32(dst)),
                hash,
            )
        }
        DType::F16 | DType::BF16 => {
            let dst = unsafe {
                std::slice::from_raw_parts_mut((parts.images as *mut u16).add(pos * n), n)
            };
            let out = Out::Narrow(dst, shape.dtype);
            worker.run(&job.program, sample.raw, &mut rng, out, hash)
        }
    };
    let fused = done
        .map_err(|(stage, fault)| Error::at(index, job.source.sample_name(index), stage, fault))?;
    match job.label_rows {
        Some((on, off, stage)) => {
            let k = shape.label_cols;
            let class = sample.labels[0] as usize;
            if class >= k {
                let why = format!("label {class} is not below {stage}'s num_classes {k}");
                let fault = crate::error::Fault::new(crate::error::SampleErrorKind::Other, why);
                return Err(Error::at(
                    index,
                    job.source.sample_name(index),
                    stage,
                    fault,
                ));
            }
            // SAFETY: row `pos` of the label buffer belongs to this sample alone.
            let row = unsafe {
                std::slice::from_raw_parts_mut((parts.labels as *mut f32).add(pos * k), k)
            };
            row.fill(off);
            row[class] = on;
        }
        None => {
            for c in 0..shape.label_cols {
                write_label(
                    parts,
                    shape.label,
                    pos * shape.label_cols + c,
                    sample.labels[c],
                );
            }
        }
    }
    if hash {
        // The write computed it, or the sample is hashed now, while it is in cache.
        let fp = fused.unwrap_or_else(|| {
            // SAFETY: the bytes this worker just wrote: its own slot position of the
            // batch buffer (see above), re-derived from the raw pointer now that the
            // mutable slice handed to `run` is gone.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    parts.images.add(pos * n * shape.dtype.size()),
                    n * shape.dtype.size(),
                )
            };
            fingerprint::fingerprint(bytes)
        });
        // SAFETY: as above, this sample's fingerprint slot.
        unsafe { *parts.fingerprints.add(pos) = fp };
    }
    // SAFETY: as above, this sample's index slot.
    unsafe { *parts.indices.add(pos) = index as u64 };
    worker.times.samples += 1;
    Ok(())
}
