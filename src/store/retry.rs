//! Bounded retries with exponential backoff and full jitter, for the faults that a later
//! attempt can get past: timeouts, connection resets (also in the middle of a body), 5xx and
//! throttling (429, 503 SlowDown). Anything else fails at once; a fault still there after
//! the bound fails naming the object, the attempts and the last fault. Every retry is
//! counted ([`super::stats`]).

use super::{stats, StoreError};
use std::time::{Duration, Instant};

/// How long to keep trying one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all (the first included).
    pub max_attempts: u32,
    /// Backoff before the second attempt; it doubles after every failure…
    pub base: Duration,
    /// …up to this.
    pub cap: Duration,
    /// No new attempt starts after this much time since the first.
    pub deadline: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 10,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(5),
            deadline: Duration::from_secs(120),
        }
    }
}

/// How one attempt failed.
#[derive(Debug)]
pub enum Failure {
    /// A fault worth another attempt (what happened, for the final error).
    Transient(String),
    /// A fault that another attempt cannot fix.
    Fatal(StoreError),
}

/// A small xorshift generator for the jitter, seeded from the clock and the thread.
fn jitter_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish() | 1
}

impl RetryPolicy {
    /// The sleep before attempt `attempt + 1` (full jitter: uniform in [0, backoff]).
    fn backoff(&self, attempt: u32, rng: &mut u64) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        let top = exp.min(self.cap).as_nanos() as u64;
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        Duration::from_nanos(if top == 0 { 0 } else { *rng % (top + 1) })
    }

    /// Run `op` (given the attempt number, from 1) until it succeeds, fails fatally, or the
    /// bound is reached.
    pub fn run<T>(
        &self,
        object: &str,
        mut op: impl FnMut(u32) -> Result<T, Failure>,
    ) -> Result<T, StoreError> {
        let start = Instant::now();
        let mut rng = jitter_seed();
        let mut attempt = 1;
        loop {
            match op(attempt) {
                Ok(v) => return Ok(v),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Transient(last)) => {
                    let sleep = self.backoff(attempt, &mut rng);
                    if attempt >= self.max_attempts || start.elapsed() + sleep > self.deadline {
                        return Err(StoreError::GaveUp {
                            object: object.to_string(),
                            attempts: attempt,
                            secs: start.elapsed().as_secs_f64(),
                            last,
                        });
                    }
                    stats::retry();
                    std::thread::sleep(sleep);
                    attempt += 1;
                }
            }
        }
    }

    /// [`RetryPolicy::run`] for a request run on the client's runtime among others (the
    /// backoff sleeps there, not on a thread).
    pub async fn run_async<T, F, Fut>(&self, object: &str, mut op: F) -> Result<T, StoreError>
    where
        F: FnMut(u32) -> Fut,
        Fut: std::future::Future<Output = Result<T, Failure>>,
    {
        let start = Instant::now();
        let mut rng = jitter_seed();
        let mut attempt = 1;
        loop {
            match op(attempt).await {
                Ok(v) => return Ok(v),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Transient(last)) => {
                    let sleep = self.backoff(attempt, &mut rng);
                    if attempt >= self.max_attempts || start.elapsed() + sleep > self.deadline {
                        return Err(StoreError::GaveUp {
                            object: object.to_string(),
                            attempts: attempt,
                            secs: start.elapsed().as_secs_f64(),
                            last,
                        });
                    }
                    stats::retry();
                    tokio::time::sleep(sleep).await;
                    attempt += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_faults_are_retried_within_the_bound_and_fatal_ones_are_not() {
        let p = RetryPolicy {
            max_attempts: 4,
            base: Duration::from_millis(1),
            cap: Duration::from_millis(2),
            deadline: Duration::from_secs(5),
        };
        let mut calls = 0;
        let r = p.run("s3://b/k", |_| {
            calls += 1;
            if calls < 3 {
                Err(Failure::Transient("503".into()))
            } else {
                Ok(calls)
            }
        });
        assert_eq!(r.ok(), Some(3));
        let mut calls = 0;
        let e = p
            .run("s3://b/k", |_| -> Result<(), _> {
                calls += 1;
                Err(Failure::Transient("reset".into()))
            })
            .expect_err("gives up");
        assert_eq!(calls, 4);
        assert!(
            e.to_string().contains("s3://b/k: failed after 4 attempts"),
            "{e}"
        );
        let mut calls = 0;
        let e = p
            .run("s3://b/k", |_| -> Result<(), _> {
                calls += 1;
                Err(Failure::Fatal(StoreError::NotFound {
                    object: "s3://b/k".into(),
                    hint: String::new(),
                }))
            })
            .expect_err("fatal");
        assert_eq!(calls, 1);
        assert!(matches!(e, StoreError::NotFound { .. }));
    }

    #[test]
    fn backoff_is_jittered_below_the_exponential_cap() {
        let p = RetryPolicy::default();
        let mut rng = 12345;
        for attempt in 1..30 {
            let d = p.backoff(attempt, &mut rng);
            let top = p.base.saturating_mul(1 << (attempt - 1).min(20)).min(p.cap);
            assert!(d <= top, "{attempt}: {d:?} > {top:?}");
        }
    }
}
