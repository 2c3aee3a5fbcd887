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
pub mod fingerprint;
pub(crate) mod ordered;
pub(crate) mod program;
pub(crate) mod worker;

pub use batch::{Batch, Labels, WrongType};
pub use worker::StageTimes;

use crate::batch_ops::{BatchOp, BatchView};
use crate::error::{Error, Result};
use crate::ops::pointwise::{narrow, widen, Dst};
use crate::rng::{batch_rng, replacement_rng, sample_rng};
use crate::source::Source;
use crate::spec::{DType, LabelType};
use batch::{BatchBuf, ImageBuf, LabelBuf, Pool};
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use ordered::isolate;
use program::Program;
use serde::{Deserialize, Serialize};
use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use worker::{Out, Worker};

/// What to do with a sample that fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum OnError {
    /// The batch holding it is delivered as `Err` (naming the file, stage and reason),
    /// and the epoch ends. `fail` is accepted as another name.
    #[default]
    #[serde(alias = "fail")]
    #[value(alias = "fail")]
    Error,
    /// Leave it out and report it in [`Batch::skipped`]; the following samples fill the
    /// batch, so batches stay full, but the epoch may come out shorter than announced
    /// (with `drop_remainder`, a short last batch is dropped as usual).
    Skip,
    /// Fill its slot with another sample of the same shard, chosen from the seed, the
    /// epoch and the failed sample's index (so every worker count picks the same one), and
    /// report it in [`Batch::skipped`]. Every shard yields exactly the batches announced
    /// before the epoch: the distributed-safe mode.
    Replace,
}

/// Attempts at finding a good replacement for a bad sample before the batch fails.
pub const REPLACE_ATTEMPTS: u64 = 16;

/// Where a run stands: the epoch and the next batch it will yield.
///
/// [`Epoch::state`] reads it; [`crate::Pipeline::resume`] starts there and yields exactly
/// the batches the first run would have yielded next, with any worker count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The epoch.
    pub epoch: u64,
    /// The next batch's number in the epoch.
    pub batch: usize,
    /// Position in this shard's order of the next batch's first sample. It is
    /// `batch × batch_size` unless `on_error = "skip"` left samples out earlier in the
    /// epoch; `None` (a state typed in by hand) means `batch × batch_size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<usize>,
}

impl State {
    /// The start of `epoch`.
    pub fn epoch_start(epoch: u64) -> State {
        State {
            epoch,
            batch: 0,
            sample: Some(0),
        }
    }
}

/// Everything one epoch needs.
pub(crate) struct Job {
    pub source: Arc<dyn Source>,
    pub program: Arc<Program>,
    pub pool: Arc<Pool>,
    /// This shard's whole order for the epoch (replacements are drawn from all of it).
    pub order: Vec<usize>,
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
    /// `(on, off)` values of the one-hot label rows workers write (`one_hot` batch op).
    pub one_hot: Option<(f32, f32)>,
    /// The batch ops that mix whole batches, run by the worker that completes a batch.
    pub batch_ops: Arc<[BatchOp]>,
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

/// One epoch in flight: an iterator of ordered batches.
///
/// Dropping it stops and joins every thread.
pub struct Epoch {
    rx: Option<Receiver<Result<Batch>>>,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    batches: usize,
    state: State,
    start: usize,
    batch_size: usize,
    /// `on_error = "skip"`: refills batches that lost samples.
    repack: Option<Repack>,
}

/// Skip mode's refilling of short batches from the samples that follow.
struct Repack {
    /// A batch being filled, and the position of its first sample in the shard's order.
    carry: Option<Batch>,
    carry_first: usize,
    /// Engine batches received.
    pulled: usize,
    /// Bad samples of a dropped last batch.
    tail: Vec<Error>,
}

impl Epoch {
    pub(crate) fn start(job: Job) -> Epoch {
        let shape = job.pool.shape;
        let repack = (job.on_error == OnError::Skip).then(|| Repack {
            carry: None,
            carry_first: 0,
            pulled: 0,
            tail: Vec::new(),
        });
        let state = State {
            epoch: job.epoch,
            batch: job.first_batch,
            sample: Some(job.start),
        };
        let (start, bs) = (job.start, shape.batch_size);
        let total = job.total.min(job.batches * shape.batch_size);
        let window = job.prefetch.max(1).min(job.batches.max(1));
        let slots = (0..window)
            .map(|_| Slot {
                buf: UnsafeCell::new(None),
                parts: UnsafeCell::new(RawParts {
                    images: std::ptr::null_mut(),
                    labels: std::ptr::null_mut(),
                    indices: std::ptr::null_mut(),
                    fingerprints: std::ptr::null_mut(),
                }),
                remaining: AtomicUsize::new(0),
                failures: Mutex::new(Vec::new()),
            })
            .collect();
        let workers = job.workers.max(1);
        let (out_tx, out_rx) = bounded(job.queue.max(1));
        let batches = job.batches;
        let shared = Arc::new(Shared {
            emit: Mutex::new(Emit {
                next: 0,
                opened: 0,
                done: vec![false; window],
                out: (batches > 0).then_some(out_tx),
            }),
            job,
            slots,
            next_unit: AtomicUsize::new(0),
            opened: AtomicUsize::new(0),
            gate: Mutex::new(()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            total,
            times: Mutex::new(StageTimes::default()),
        });
        {
            let mut st = shared.emit_state();
            while st.opened < batches.min(window) {
                shared.open(st.opened);
                st.opened += 1;
            }
            shared.publish(st.opened);
        }
        let mut threads = Vec::with_capacity(workers);
        for _ in 0..workers {
            let sh = Arc::clone(&shared);
            threads.push(std::thread::spawn(move || {
                let mut worker = Worker::new(sh.job.profile);
                let r = catch_unwind(AssertUnwindSafe(|| work(&sh, &mut worker)));
                if r.is_err() {
                    sh.halt();
                    let mut st = sh.emit_state();
                    if let Some(out) = st.out.take() {
                        let _ = out.send(Err(Error::Internal("a worker thread panicked".into())));
                    }
                }
                if let Ok(mut t) = sh.times.lock() {
                    t.merge(&worker.times);
                }
            }));
        }
        Epoch {
            rx: Some(out_rx),
            shared,
            threads,
            batches,
            state,
            start,
            batch_size: bs,
            repack,
        }
    }

    /// Batches this epoch yields from where it started (fewer if it stops on an error;
    /// with `on_error = "skip"`, fewer when samples are skipped).
    pub fn batches(&self) -> usize {
        self.batches
    }

    /// Where the run stands: this epoch and the batch the next call to `next` yields.
    pub fn state(&self) -> State {
        self.state
    }

    /// With `on_error = "skip"`: the bad samples of a last batch that was not yielded —
    /// dropped by `drop_remainder`, or left with no good sample at all (every other bad
    /// sample comes with a batch). Call it once the iteration has ended.
    pub fn dropped_tail_errors(&mut self) -> Vec<Error> {
        self.repack
            .as_mut()
            .map(|r| std::mem::take(&mut r.tail))
            .unwrap_or_default()
    }

    /// Stop (if still running), join every thread and return the summed per-stage times.
    pub fn finish(mut self) -> StageTimes {
        self.shutdown();
        self.shared
            .times
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default()
    }

    fn shutdown(&mut self) {
        self.shared.halt();
        self.rx = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// [`Epoch::next_timeout`] waited as long as it was asked to and no batch was ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedOut;

impl Epoch {
    /// The next item from the engine's queue, `None` once it is closed.
    fn pull(
        &mut self,
        deadline: Option<Instant>,
    ) -> std::result::Result<Option<Result<Batch>>, TimedOut> {
        let Some(rx) = self.rx.as_ref() else {
            return Ok(None);
        };
        match deadline {
            None => Ok(rx.recv().ok()),
            Some(d) => match rx.recv_deadline(d) {
                Ok(item) => Ok(Some(item)),
                Err(RecvTimeoutError::Timeout) => Err(TimedOut),
                Err(RecvTimeoutError::Disconnected) => Ok(None),
            },
        }
    }

    /// The next batch in skip mode: full batches, filled from the samples that follow a
    /// skipped one. A batch being filled stays in `repack` when the deadline passes.
    fn next_repacked(
        &mut self,
        deadline: Option<Instant>,
    ) -> Result<Option<Result<Batch>>, TimedOut> {
        let bs = self.batch_size;
        let drop_remainder = self.shared.job.drop_remainder;
        loop {
            let pulled = self.pull(deadline)?;
            let Some(r) = self.repack.as_mut() else {
                return Ok(None);
            };
            let mut b = match pulled {
                Some(Ok(b)) => b,
                Some(Err(e)) => return Ok(Some(Err(e))),
                None => {
                    let Some(carry) = r.carry.take() else {
                        return Ok(None);
                    };
                    // A last batch whose samples were all skipped is no batch: its
                    // errors are reported like those of a dropped last batch.
                    if carry.len == 0 || (drop_remainder && carry.len < bs) {
                        let mut carry = carry;
                        r.tail.append(&mut carry.skipped);
                        return Ok(None);
                    }
                    return Ok(Some(Ok(carry)));
                }
            };
            let pos0 = self.start + r.pulled * bs;
            r.pulled += 1;
            let Some(mut carry) = r.carry.take() else {
                if b.len == bs {
                    return Ok(Some(Ok(b)));
                }
                r.carry_first = b.position_of(0, pos0);
                r.carry = Some(b);
                continue;
            };
            let take = (bs - carry.len).min(b.len);
            carry.append_front_of(&b, take);
            carry.skipped.append(&mut b.skipped);
            if carry.len < bs {
                r.carry = Some(carry);
                continue;
            }
            if take < b.len {
                r.carry_first = b.position_of(take, pos0);
                b.drop_front(take);
                r.carry = Some(b);
            }
            return Ok(Some(Ok(carry)));
        }
    }

    /// Position of the next batch's first sample (skip mode).
    fn next_first_sample(&self) -> usize {
        match &self.repack {
            Some(r) if r.carry.is_some() => r.carry_first,
            Some(r) => self.start + r.pulled * self.batch_size,
            None => self.start,
        }
    }
}

impl Epoch {
    /// [`Iterator::next`], waiting at most `timeout` for the batch: `Err(TimedOut)` when
    /// none was ready by then (the epoch goes on; call again). A consumer that must stay
    /// responsive while it waits — a Python loop checking for Ctrl-C — polls with this.
    pub fn next_timeout(
        &mut self,
        timeout: Duration,
    ) -> std::result::Result<Option<Result<Batch>>, TimedOut> {
        self.next_until(Some(Instant::now() + timeout))
    }

    fn next_until(
        &mut self,
        deadline: Option<Instant>,
    ) -> std::result::Result<Option<Result<Batch>>, TimedOut> {
        let item = if self.repack.is_some() {
            self.next_repacked(deadline)?
        } else {
            self.pull(deadline)?
        };
        Ok(self.numbered(item))
    }

    /// Number a batch and move the state past it.
    fn numbered(&mut self, item: Option<Result<Batch>>) -> Option<Result<Batch>> {
        match item {
            Some(Ok(mut b)) => {
                b.number = self.state.batch;
                self.state.batch += 1;
                let done = self.state.batch - self.shared.job.first_batch;
                self.state.sample = Some(match self.repack {
                    Some(_) => self.next_first_sample(),
                    None => self.start + done * self.batch_size,
                });
                Some(Ok(b))
            }
            other => other,
        }
    }
}

impl Iterator for Epoch {
    type Item = Result<Batch>;
    fn next(&mut self) -> Option<Result<Batch>> {
        // Without a deadline the wait cannot time out.
        self.next_until(None).unwrap_or_default()
    }
}

impl std::fmt::Debug for Epoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Epoch")
            .field("state", &self.state)
            .field("batches", &self.batches)
            .finish()
    }
}

impl Drop for Epoch {
    fn drop(&mut self) {
        self.shutdown();
    }
}

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

/// Run one sample; a panic in a decoder or kernel fails this sample, not the epoch.
fn try_one(
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
fn replace(
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
    match job.one_hot {
        Some((on, off)) => {
            let k = shape.label_cols;
            let class = sample.labels[0] as usize;
            if class >= k {
                let why = format!("label {class} is not below one_hot's num_classes {k}");
                let fault = crate::error::Fault::new(crate::error::SampleErrorKind::Other, why);
                return Err(Error::at(
                    index,
                    job.source.sample_name(index),
                    "one_hot",
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

/// A worker's buffers for mixing the batches it completes, reused from batch to batch:
/// the 16-bit images widened to float32, and the mixing ops' scratch rows.
#[derive(Default)]
struct MixBuffers {
    wide: Vec<f32>,
    rows: Vec<f32>,
}

impl Shared {
    /// Run the mixing batch ops on engine batch `b`, just completed in `slot`, by the
    /// worker that completed it and before `complete` sends it: outside the emit lock, so
    /// other workers keep completing and sending batches meanwhile. (Mixing is refused with
    /// `on_error = "skip"`, so no sample of the batch is left out later.)
    fn mix(&self, slot: &Slot, b: usize, bufs: &mut MixBuffers) {
        if self.job.batch_ops.is_empty() {
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
            return; // the spec checks made sure of float labels (a one_hot)
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
        for op in self.job.batch_ops.iter() {
            op.apply(&mut view, &mut rng, rows);
        }
        if let ImageBuf::U16(v) = &mut buf.images {
            // `wide` is the batch's images, widened above: the lengths agree.
            let _ = narrow(wide, self.job.pool.shape.dtype, &mut v[..elems]);
        }
    }

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
