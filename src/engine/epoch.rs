//! One epoch in flight ([`Epoch`]): the ordered iterator of batches the consumer reads, skip
//! mode's refilling of short batches, waiting with a deadline, and shutdown on drop.

use super::worker::Worker;
use super::*;
use crate::error::{Error, Result};
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};
use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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

    /// The worlds this epoch was split among so far, the one running it last (one, unless
    /// it resumed a `JobState` (`pipeline::JobState`) of another world): with [`Epoch::state`],
    /// what [`crate::Pipeline::job_state`] needs.
    pub fn worlds(&self) -> &[crate::resume::World] {
        &self.shared.job.worlds
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
