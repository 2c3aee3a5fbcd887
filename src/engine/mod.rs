//! The streaming engine: runs one epoch of a plan on `workers` threads and hands ordered
//! batches to the consumer through a bounded queue.
//!
//! * **Order from construction.** Position `p` of the epoch's order goes to slot
//!   `p % batch_size` of batch `p / batch_size`. Workers claim work units (`Source::work_unit`
//!   consecutive positions) from an atomic counter and write each finished sample straight
//!   into its slot of a preallocated batch buffer. Output is identical for any worker
//!   count: per-sample randomness comes from `(seed, epoch, index)`, not from a thread.
//! * **No per-batch barrier.** Up to `prefetch` batches are open at once, so a worker that
//!   finishes the tail of batch k moves on to batch k+1 while another is still on k.
//! * **Bounded.** `prefetch` open batches plus `queue` ready ones plus what the trainer
//!   holds: memory does not grow with the dataset. Buffers come from a pool and return to
//!   it when a [`Batch`] is dropped.
//! * **No lock per sample, no coordinator thread.** A claim is one `fetch_add`; a finished
//!   run of samples is one `fetch_sub`. The worker that completes a batch takes the emit
//!   lock (once per batch), sends every batch that is now complete and next in order, and
//!   opens the slots they free. CIFAR batches fill in tens of microseconds, and a
//!   coordinator thread's extra wake-up per batch was a visible share of the CPU time
//!   (perf); other locks are taken only to wait for a slot or record a failed sample.
//! * **Prompt shutdown.** Dropping the [`Epoch`] raises a stop flag, wakes waiting workers,
//!   disconnects the queue and joins every thread; a worker finishes at most the sample it
//!   is on.

pub mod batch;
mod epoch;
mod mix;
pub(crate) mod ordered;
mod pointwise;
mod policy;
pub(crate) mod program;
mod sample;
pub(crate) mod worker;

/// Per-sample fingerprints (in [`crate::imgproc`]: the plane write computes them).
pub use crate::imgproc::fingerprint;
pub use batch::{Batch, Labels, WrongType};
pub use epoch::{Epoch, TimedOut};
use mix::MixBuffers;
pub use policy::{State, REPLACE_ATTEMPTS};
use sample::{replace, try_one};
pub use worker::StageTimes;

use crate::batch_ops::BatchKernel;
use crate::error::{Error, OnError, Result};
use crate::source::Source;
use batch::{BatchBuf, ImageBuf, LabelBuf, Pool};
use crossbeam_channel::Sender;
use program::Program;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use worker::Worker;

/// Everything one epoch needs.
pub(crate) struct Job {
    pub source: Arc<dyn Source>,
    pub program: Arc<Program>,
    pub pool: Arc<Pool>,
    /// This shard's whole order for the epoch (replacements are drawn from all of it).
    pub order: Vec<usize>,
    /// The worlds the epoch was split among so far, this one last ([`crate::resume`]).
    pub worlds: Arc<[crate::resume::World]>,
    /// Position in `order` of the first sample to read.
    pub start: usize,
    /// Samples to read from `start`.
    pub total: usize,
    /// Number of the first batch yielded.
    pub first_batch: usize,
    /// Batches the engine fills (`ceil(total / batch_size)`).
    pub batches: usize,
    pub drop_remainder: bool,
    pub seed: u64,
    pub epoch: u64,
    pub workers: usize,
    pub prefetch: usize,
    pub queue: usize,
    pub on_error: OnError,
    pub profile: bool,
    pub work_unit: usize,
    /// `(on, off, stage)` of the label rows workers write with each sample (a batch op
    /// that lowers to label rows: `one_hot`).
    pub label_rows: Option<(f32, f32, &'static str)>,
    /// The kernels run on each complete batch, in order (the mixing batch ops).
    pub batch_kernels: Arc<[Arc<dyn BatchKernel>]>,
}

#[derive(Clone, Copy)]
struct RawParts {
    images: *mut u8,
    labels: *mut u8,
    indices: *mut u64,
    /// Null unless the pipeline fingerprints its samples.
    fingerprints: *mut u64,
}

struct Slot {
    /// The buffer being filled; touched under the emit lock only while no worker can
    /// reach this slot (before it is published as open, after `remaining` hits zero).
    buf: UnsafeCell<Option<BatchBuf>>,
    parts: UnsafeCell<RawParts>,
    remaining: AtomicUsize,
    /// `(position in batch, error, replaced)` of the samples that failed.
    failures: Mutex<Vec<(usize, Error, bool)>>,
}

// SAFETY: workers write through `parts` only into the slot positions they claimed (each
// position is claimed exactly once through `next_unit`), so writes never overlap; `buf`
// and `parts` are written under the emit lock only before the batch is published through
// `opened` (Release/Acquire) and read back after every worker reported the batch done
// through `remaining` (AcqRel: the worker whose decrement reaches zero has seen every
// other worker's writes, and it alone takes the buffer back out in `complete`).
unsafe impl Sync for Slot {}
unsafe impl Send for Slot {}

/// In-order emission state, behind `Shared::emit`.
struct Emit {
    /// Next batch to send.
    next: usize,
    /// Batches opened so far (mirrors `Shared::opened`).
    opened: usize,
    /// Per slot: its batch is complete and waits to be sent.
    done: Vec<bool>,
    /// The trainer-facing queue; dropped after the last batch (or an error), which ends
    /// the consumer's iteration.
    out: Option<Sender<Result<Batch>>>,
}

struct Shared {
    job: Job,
    slots: Vec<Slot>,
    emit: Mutex<Emit>,
    next_unit: AtomicUsize,
    /// Batches `< opened` have buffers in their slots.
    opened: AtomicUsize,
    gate: Mutex<()>,
    wake: Condvar,
    stop: AtomicBool,
    total: usize,
    times: Mutex<StageTimes>,
}

impl Shared {
    fn batch_len(&self, b: usize) -> usize {
        let bs = self.job.pool.shape.batch_size;
        bs.min(self.total - b * bs)
    }

    /// Wait until batch `b` is open; false when the epoch is stopping.
    fn wait_open(&self, b: usize) -> bool {
        while self.opened.load(Ordering::Acquire) <= b {
            if self.stop.load(Ordering::Relaxed) {
                return false;
            }
            let Ok(guard) = self.gate.lock() else {
                return false;
            };
            if self.opened.load(Ordering::Acquire) <= b && !self.stop.load(Ordering::Relaxed) {
                let _ = self.wake.wait_timeout(guard, Duration::from_millis(50));
            }
        }
        !self.stop.load(Ordering::Relaxed)
    }

    fn publish(&self, opened: usize) {
        let _g = self.gate.lock();
        self.opened.store(opened, Ordering::Release);
        self.wake.notify_all();
    }

    fn halt(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let _g = self.gate.lock();
        self.wake.notify_all();
    }

    /// Put a fresh buffer into the slot of batch `b` (under the emit lock).
    fn open(&self, b: usize) {
        let slot = &self.slots[b % self.slots.len()];
        let mut buf = self.job.pool.take();
        let parts = RawParts {
            images: match &mut buf.images {
                ImageBuf::U8(v) => v.as_mut_ptr(),
                ImageBuf::F32(v) => v.as_mut_ptr() as *mut u8,
                ImageBuf::U16(v) => v.as_mut_ptr() as *mut u8,
            },
            labels: match &mut buf.labels {
                LabelBuf::U32(v) => v.as_mut_ptr() as *mut u8,
                LabelBuf::I32(v) => v.as_mut_ptr() as *mut u8,
                LabelBuf::I64(v) => v.as_mut_ptr() as *mut u8,
                LabelBuf::F32(v) => v.as_mut_ptr() as *mut u8,
            },
            indices: buf.indices.as_mut_ptr(),
            fingerprints: if buf.fingerprints.is_empty() {
                std::ptr::null_mut()
            } else {
                buf.fingerprints.as_mut_ptr()
            },
        };
        // SAFETY: no worker touches this slot until `publish` makes batch `b` visible.
        unsafe {
            *slot.buf.get() = Some(buf);
            *slot.parts.get() = parts;
        }
        slot.remaining.store(self.batch_len(b), Ordering::Relaxed);
    }
}

impl Shared {
    fn emit_state(&self) -> std::sync::MutexGuard<'_, Emit> {
        // A panic while holding the lock leaves consistent state (it only ever advances).
        self.emit.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Batch `b` is complete: send it and every later complete batch that is next in
    /// order, opening the slots they free.
    fn complete(&self, b: usize) {
        let nb = self.job.batches;
        let window = self.slots.len();
        let shape = self.job.pool.shape;
        let program = &self.job.program;
        let d = program.out.dims();
        let dims = [d[0].unwrap_or(0), d[1].unwrap_or(0), d[2].unwrap_or(0)];
        let mut st = self.emit_state();
        st.done[b % window] = true;
        while st.next < nb && st.done[st.next % window] {
            let next = st.next;
            st.done[next % window] = false;
            let slot = &self.slots[next % window];
            // SAFETY: every sample of this batch is written (remaining hit zero with
            // AcqRel), and no worker can reach the slot again before it is reopened below.
            let buf = unsafe { (*slot.buf.get()).take() };
            let mut failures = slot
                .failures
                .lock()
                .map(|mut f| std::mem::take(&mut *f))
                .unwrap_or_default();
            failures.sort_by_key(|(p, _, _)| *p);
            let len = self.batch_len(next);
            let bug = failures.iter().position(|f| f.1.sample_kind().is_none());
            let fatal = bug.or_else(|| match self.job.on_error {
                OnError::Error => failures.iter().position(|_| true),
                OnError::Replace => failures.iter().position(|f| !f.2),
                OnError::Skip => None,
            });
            let item = match fatal {
                Some(i) => Err(failures.swap_remove(i).1),
                None => {
                    let mut buf = buf;
                    let mut lost = Vec::new();
                    if self.job.on_error == OnError::Skip && !failures.is_empty() {
                        let mut keep = vec![true; len];
                        for (p, _, _) in &failures {
                            keep[*p] = false;
                            lost.push(*p);
                        }
                        if let Some(b) = buf.as_mut() {
                            b.compact(&keep, &shape);
                        }
                    }
                    Ok(Batch {
                        buf,
                        len: len - lost.len(),
                        number: next,
                        dims,
                        layout: program.tail.layout,
                        label_cols: shape.label_cols,
                        pool: Arc::clone(&self.job.pool),
                        skipped: failures.into_iter().map(|(_, e, _)| e).collect(),
                        lost,
                    })
                }
            };
            let failed = item.is_err();
            let Some(out) = st.out.as_ref() else { return };
            // Blocks while the trainer's queue is full: that is the backpressure.
            if out.send(item).is_err() || failed {
                st.out = None;
                drop(st);
                self.halt();
                return;
            }
            st.next += 1;
            if st.opened < nb {
                self.open(st.opened);
                st.opened += 1;
                self.publish(st.opened);
            }
        }
        if st.next >= nb {
            st.out = None;
        }
    }
}

fn work(sh: &Shared, worker: &mut Worker) {
    let job = &sh.job;
    let shape = job.pool.shape;
    let bs = shape.batch_size;
    let unit = job.work_unit;
    let mut scratch = Vec::new();
    let mut mixing = MixBuffers::default();
    loop {
        if sh.stop.load(Ordering::Relaxed) {
            return;
        }
        let u = sh.next_unit.fetch_add(1, Ordering::Relaxed);
        let start = u.saturating_mul(unit);
        if start >= sh.total {
            return;
        }
        let end = (start + unit).min(sh.total);
        let mut p = start;
        while p < end {
            let b = p / bs;
            let run_end = ((b + 1) * bs).min(end);
            if !sh.wait_open(b) {
                return;
            }
            let slot = &sh.slots[b % sh.slots.len()];
            // SAFETY: published before `opened` passed b (Acquire in wait_open).
            let parts = unsafe { *slot.parts.get() };
            for q in p..run_end {
                let pos = q - b * bs;
                let index = job.order[job.start + q];
                if let Err(e) = try_one(sh, worker, &mut scratch, &parts, pos, index) {
                    // A bug (not a sample's fault) ends the epoch whatever the policy.
                    let replaced = job.on_error == OnError::Replace
                        && e.sample_kind().is_some()
                        && replace(sh, worker, &mut scratch, &parts, pos, index);
                    if let Ok(mut f) = slot.failures.lock() {
                        f.push((pos, e, replaced));
                    }
                }
                if sh.stop.load(Ordering::Relaxed) {
                    return;
                }
            }
            let n = run_end - p;
            if slot.remaining.fetch_sub(n, Ordering::AcqRel) == n {
                sh.mix(slot, b, &mut mixing);
                sh.complete(b);
            }
            p = run_end;
        }
    }
}
