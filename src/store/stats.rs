//! Counters of the traffic with object storage in this process: requests, bytes and
//! retries, shown by `run` and `bench` (and the library's [`snapshot`]).

use std::sync::atomic::{AtomicU64, Ordering};

static REQUESTS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static RETRIES: AtomicU64 = AtomicU64::new(0);
static DOWNLOADS: AtomicU64 = AtomicU64::new(0);
static CACHE_HITS: AtomicU64 = AtomicU64::new(0);
static WAITED_NS: AtomicU64 = AtomicU64::new(0);
static SENT: AtomicU64 = AtomicU64::new(0);
static UPLOADS: AtomicU64 = AtomicU64::new(0);
static REFETCHED: AtomicU64 = AtomicU64::new(0);
static REFETCHED_BYTES: AtomicU64 = AtomicU64::new(0);
static RANGED: AtomicU64 = AtomicU64::new(0);
static KEPT: AtomicU64 = AtomicU64::new(0);
static KEPT_BY_OTHERS: AtomicU64 = AtomicU64::new(0);
static KEEPING: AtomicU64 = AtomicU64::new(0);

/// The counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Requests sent (retries included).
    pub requests: u64,
    /// Body bytes received.
    pub bytes: u64,
    /// Requests repeated after a timeout, a reset, a 5xx or throttling.
    pub retries: u64,
    /// Files downloaded whole into the cache.
    pub downloads: u64,
    /// Files found complete in the cache (no request).
    pub cache_hits: u64,
    /// Nanoseconds that reads spent waiting for objects (all workers together): the
    /// time the store held the pipeline up.
    pub waited_ns: u64,
    /// Body bytes sent (uploads).
    pub sent: u64,
    /// Objects written (files uploaded, small objects put).
    pub uploads: u64,
    /// Files downloaded again by this process after the cache had evicted them (the cost
    /// of a cache smaller than the sampling needs).
    pub refetched: u64,
    /// Bytes of those downloads.
    pub refetched_bytes: u64,
    /// Range requests of samples' bytes (range mode, `fetch = "ranges"`; retries
    /// included), counted in `requests` too.
    pub ranged: u64,
    /// Samples read from the cache folder's copies that range mode kept for this epoch
    /// while the previous one read them (no request).
    pub kept: u64,
    /// Of those, the samples another reader of the folder wrote there (a rank of the
    /// node that read them in the epoch before).
    pub kept_by_others: u64,
    /// Samples written to the cache folder for a later epoch (this reader's kept file and
    /// the other ranks'): the disk writes keeping costs. None for the epoch after a run's
    /// last.
    pub keeping: u64,
}

impl Traffic {
    /// The traffic between `earlier` and this.
    pub fn since(&self, earlier: &Traffic) -> Traffic {
        Traffic {
            requests: self.requests.saturating_sub(earlier.requests),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            retries: self.retries.saturating_sub(earlier.retries),
            downloads: self.downloads.saturating_sub(earlier.downloads),
            cache_hits: self.cache_hits.saturating_sub(earlier.cache_hits),
            waited_ns: self.waited_ns.saturating_sub(earlier.waited_ns),
            sent: self.sent.saturating_sub(earlier.sent),
            uploads: self.uploads.saturating_sub(earlier.uploads),
            refetched: self.refetched.saturating_sub(earlier.refetched),
            refetched_bytes: self.refetched_bytes.saturating_sub(earlier.refetched_bytes),
            ranged: self.ranged.saturating_sub(earlier.ranged),
            kept: self.kept.saturating_sub(earlier.kept),
            kept_by_others: self.kept_by_others.saturating_sub(earlier.kept_by_others),
            keeping: self.keeping.saturating_sub(earlier.keeping),
        }
    }

    /// True when nothing was asked of a store or its cache.
    pub fn is_empty(&self) -> bool {
        *self == Traffic::default()
    }
}

impl std::fmt::Display for Traffic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "object store: {} requests, {:.1} MB received, {} retries, {} files downloaded, {} \
             from the cache, reads waited {:.3} s for objects",
            self.requests,
            self.bytes as f64 / 1e6,
            self.retries,
            self.downloads,
            self.cache_hits,
            self.waited_ns as f64 / 1e9
        )?;
        if self.uploads > 0 {
            write!(
                f,
                ", {} objects written ({:.1} MB sent)",
                self.uploads,
                self.sent as f64 / 1e6
            )?;
        }
        if self.refetched > 0 {
            write!(
                f,
                ", {} files fetched again after eviction ({:.1} MB: the cache is smaller than \
                 the sampling needs)",
                self.refetched,
                self.refetched_bytes as f64 / 1e6
            )?;
        }
        if self.ranged > 0 {
            write!(f, ", {} range requests", self.ranged)?;
        }
        if self.kept > 0 {
            write!(f, ", {} samples from the kept ranges", self.kept)?;
            if self.kept_by_others > 0 {
                write!(f, ", {} written by other ranks", self.kept_by_others)?;
            }
        }
        if self.keeping > 0 {
            write!(f, ", {} samples kept for a later epoch", self.keeping)?;
        }
        Ok(())
    }
}

/// The counters now.
pub fn snapshot() -> Traffic {
    Traffic {
        requests: REQUESTS.load(Ordering::Relaxed),
        bytes: BYTES.load(Ordering::Relaxed),
        retries: RETRIES.load(Ordering::Relaxed),
        downloads: DOWNLOADS.load(Ordering::Relaxed),
        cache_hits: CACHE_HITS.load(Ordering::Relaxed),
        waited_ns: WAITED_NS.load(Ordering::Relaxed),
        sent: SENT.load(Ordering::Relaxed),
        uploads: UPLOADS.load(Ordering::Relaxed),
        refetched: REFETCHED.load(Ordering::Relaxed),
        refetched_bytes: REFETCHED_BYTES.load(Ordering::Relaxed),
        ranged: RANGED.load(Ordering::Relaxed),
        kept: KEPT.load(Ordering::Relaxed),
        kept_by_others: KEPT_BY_OTHERS.load(Ordering::Relaxed),
        keeping: KEEPING.load(Ordering::Relaxed),
    }
}

pub(crate) fn request() {
    REQUESTS.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn bytes(n: u64) {
    BYTES.fetch_add(n, Ordering::Relaxed);
}

pub(crate) fn retry() {
    RETRIES.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn download() {
    DOWNLOADS.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn cache_hit() {
    CACHE_HITS.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn waited(d: std::time::Duration) {
    WAITED_NS.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
}

pub(crate) fn sent(n: u64) {
    SENT.fetch_add(n, Ordering::Relaxed);
}

pub(crate) fn upload() {
    UPLOADS.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn refetched(bytes: u64) {
    REFETCHED.fetch_add(1, Ordering::Relaxed);
    REFETCHED_BYTES.fetch_add(bytes, Ordering::Relaxed);
}

pub(crate) fn ranged() {
    RANGED.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn keeping() {
    KEEPING.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn kept(by_other: bool) {
    KEPT.fetch_add(1, Ordering::Relaxed);
    if by_other {
        KEPT_BY_OTHERS.fetch_add(1, Ordering::Relaxed);
    }
}
