//! The ordered executor: items `0..n` claimed one at a time by N worker threads (one
//! `fetch_add` a claim, no lock per item), each worker with state of its own (decoder,
//! buffers), a panic on an item failing that item only (the worker's state is made anew),
//! a stop flag, and the results handed to the calling thread in index order with at most
//! `window` of them in flight — claimed, done or waiting for an earlier one — so memory is
//! bounded whatever the speed of the slowest item.
//!
//! Each in-flight item holds a token that carries a reusable buffer: the consumer gives
//! the buffer back with the token, so a conversion allocates `window` output buffers in
//! all, not one per sample.
//!
//! Shards conversion and `validate` run on it. The batch engine (`engine::Epoch`) keeps its
//! own scheduling on the same principles: its results are not values handed back but
//! samples written in place into the slots of pooled batch buffers, several batches open
//! at once, and it runs for a whole epoch behind an iterator the trainer pulls, not within
//! a call; it shares the panic isolation below ([`isolate`]).
//!
//! Threads are the engine's own (`std::thread::scope`), not rayon's: ordering, the bounded
//! window and per-worker state are the whole point, and rayon's work stealing gives none
//! of them.

use crossbeam_channel::bounded;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Run `f` on `state`; a panic becomes `on_panic()`, after `reset` made `state` usable
/// again (a panic can leave a decoder or a buffer half-way).
pub(crate) fn isolate<S, T>(
    state: &mut S,
    f: impl FnOnce(&mut S) -> T,
    reset: impl FnOnce(&mut S),
    on_panic: impl FnOnce() -> T,
) -> T {
    match catch_unwind(AssertUnwindSafe(|| f(state))) {
        Ok(t) => t,
        Err(_) => {
            reset(state);
            on_panic()
        }
    }
}

/// How an ordered run is set up.
pub(crate) struct Ordered<'a> {
    /// Worker threads (at least 1).
    pub(crate) workers: usize,
    /// Items in flight at most (at least 1).
    pub(crate) window: usize,
    /// Raised by anyone: the run ends early.
    pub(crate) stop: &'a AtomicBool,
}

/// Why an ordered run ended before its last item.
#[derive(Debug)]
pub(crate) enum Ended<E> {
    /// `stop` was raised.
    Stopped,
    /// The consumer returned an error.
    Failed(E),
}

impl Ordered<'_> {
    /// Run `work(state, index, buffer)` on every index of `0..n` and give each result to
    /// `consume(index, result)` on the calling thread, in index order; `consume` returns
    /// the buffer for reuse. `init` makes a worker's state, `fresh` a buffer, `panicked`
    /// the result of an item whose `work` panicked.
    pub(crate) fn run<S, B, T, E>(
        &self,
        n: usize,
        init: impl Fn() -> S + Sync,
        fresh: impl Fn() -> B,
        work: impl Fn(&mut S, usize, B) -> T + Sync,
        panicked: impl Fn(usize) -> T + Sync,
        mut consume: impl FnMut(usize, T) -> Result<B, E>,
    ) -> Result<(), Ended<E>>
    where
        B: Send,
        T: Send,
    {
        let window = self.window.max(1);
        let (free_tx, free_rx) = bounded::<B>(window);
        for _ in 0..window {
            let _ = free_tx.send(fresh());
        }
        let (done_tx, done_rx) = bounded::<(usize, T)>(window);
        let next = AtomicUsize::new(0);
        // Raised when the consumer is done (an error included): no more claims.
        let quit = AtomicBool::new(false);
        let stop = self.stop;
        std::thread::scope(|s| {
            for _ in 0..self.workers.max(1) {
                let (free_rx, done_tx) = (free_rx.clone(), done_tx.clone());
                let (init, work, panicked, next, quit) = (&init, &work, &panicked, &next, &quit);
                s.spawn(move || {
                    let mut state = init();
                    while let Ok(buf) = free_rx.recv() {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n || stop.load(Ordering::Relaxed) || quit.load(Ordering::Relaxed) {
                            return;
                        }
                        let work = |st: &mut S| work(st, i, buf);
                        let r = isolate(&mut state, work, |st| *st = init(), || panicked(i));
                        if done_tx.send((i, r)).is_err() {
                            return;
                        }
                    }
                });
            }
            drop((free_rx, done_tx));
            // Owned here: dropping them on return (an error included) ends the workers
            // before the scope waits for them.
            let (free_tx, done_rx) = (free_tx, done_rx);
            let ended = (|| {
                let mut pending = BTreeMap::new();
                let mut want = 0;
                while want < n {
                    if stop.load(Ordering::Relaxed) {
                        return Err(Ended::Stopped);
                    }
                    let Ok((i, r)) = done_rx.recv() else {
                        return Err(Ended::Stopped);
                    };
                    pending.insert(i, r);
                    while let Some(r) = pending.remove(&want) {
                        if stop.load(Ordering::Relaxed) {
                            return Err(Ended::Stopped);
                        }
                        let buf = consume(want, r).map_err(Ended::Failed)?;
                        let _ = free_tx.send(buf);
                        want += 1;
                    }
                }
                Ok(())
            })();
            quit.store(true, Ordering::Relaxed);
            ended
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Results come in index order for any worker count, a panic fails its item only, and
    /// no more than `window` items are ever in flight.
    #[test]
    fn in_order_isolated_and_bounded() {
        for workers in [1, 2, 5] {
            let stop = AtomicBool::new(false);
            let in_flight = AtomicUsize::new(0);
            let most = AtomicUsize::new(0);
            let mut got = Vec::new();
            let run = Ordered {
                workers,
                window: 3,
                stop: &stop,
            };
            let r: Result<(), Ended<()>> = run.run(
                50,
                || 0usize,
                || (),
                |done: &mut usize, i, ()| {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    // uneven work: later items often finish first
                    std::thread::sleep(std::time::Duration::from_micros((50 - i as u64) * 20));
                    if i == 7 {
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        panic!("item 7");
                    }
                    *done += 1;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    Some(i * 10)
                },
                |_| None,
                |i, r| {
                    got.push((i, r));
                    Ok(())
                },
            );
            assert!(r.is_ok());
            let want: Vec<_> = (0..50).map(|i| (i, (i != 7).then_some(i * 10))).collect();
            assert_eq!(got, want, "{workers} workers");
            assert!(most.load(Ordering::SeqCst) <= 3, "{:?}", most);
        }
    }

    /// A consumer error or a raised stop ends the run early.
    #[test]
    fn errors_and_stop_end_the_run() {
        let stop = AtomicBool::new(false);
        let run = Ordered {
            workers: 2,
            window: 4,
            stop: &stop,
        };
        let mut seen = 0;
        let r = run.run(
            1000,
            || (),
            || (),
            |_, i, ()| i,
            |_| usize::MAX,
            |i, _| {
                seen += 1;
                if i == 10 {
                    Err("bad")
                } else {
                    Ok(())
                }
            },
        );
        assert!(matches!(r, Err(Ended::Failed("bad"))));
        assert_eq!(seen, 11);
        let mut count = 0;
        let r: Result<(), Ended<()>> = run.run(
            1000,
            || (),
            || (),
            |_, i, ()| i,
            |_| 0,
            |_, _| {
                count += 1;
                if count == 5 {
                    stop.store(true, Ordering::Relaxed);
                }
                Ok(())
            },
        );
        assert!(matches!(r, Err(Ended::Stopped)));
        assert_eq!(count, 5);
    }
}
