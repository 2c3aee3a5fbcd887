//! A reader's use of the cache folder's room across its epochs (`kept.rs`): the file
//! its previous epoch kept for this one, the one this epoch writes for the next, its place
//! among the readers of the folder, and the other readers' plans it writes into.
//!
//! Readers that fetch each sample's bytes on their own and hold them in memory only until
//! their read use it alike: range mode ([`super::RangeAhead`]) and an image tree in a
//! store read one GET per image (`crate::source::store_tree`). They tell it when an epoch
//! starts ([`Keeper::start_epoch`]), ask it first on each read ([`Keeper::read`]), tell it
//! of each sample read from the store ([`Keeper::passed`]), and skip the samples it serves
//! ([`Keeper::serves`], lock-free) when they fetch ahead.
//!
//! The next epoch's file is planned when the reads of this epoch's file are done, or at
//! the epoch's start when there is none; but at a process's first epoch, only after a
//! 64th of it, so that the ranks started with it have joined the folder and the first
//! plan does not take the whole room.

use super::forked;
use super::kept::{self, Kept};
use super::{stats, Cache, Orders};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The length of sample `i`'s bytes (`None`: not a sample).
pub type SampleLen = Box<dyn Fn(usize) -> Option<u64> + Send + Sync>;

/// Reads between two looks for other readers' kept files, and between two reports of how
/// far this reader is (a 64th of an epoch of `len`).
fn step(len: usize) -> usize {
    (len / 64).max(1)
}

/// A reader's kept samples (see the module).
pub struct Keeper {
    inner: Arc<Inner>,
}

/// What a [`Keeper`] keeps samples of.
pub struct Keeping {
    /// The cache folder whose room keeps them.
    pub cache: Cache,
    /// What the samples are (their files, sizes, versions): readers of a folder with the
    /// same key and the same orders write each other's kept samples (the orders' key is
    /// added).
    pub key: u64,
    /// The epochs' orders.
    pub orders: Orders,
    /// Samples an epoch of this rank reads.
    pub per_epoch: usize,
    /// Samples of the dataset.
    pub samples: usize,
    /// Each sample's length.
    pub len_of: SampleLen,
    /// Cached paths that must stay (an index beside the files).
    pub keep: Vec<PathBuf>,
}

struct Inner {
    of: Keeping,
    /// The samples the kept file of this epoch serves, a bit each: the readers' fetching
    /// ahead skips them without a lock.
    served: Vec<AtomicU64>,
    state: Mutex<State>,
    /// The process whose files and threads these are.
    pid: AtomicU32,
    /// The last epoch the run reads (`u64::MAX`: not said): none is kept for after it.
    last: AtomicU64,
}

#[derive(Default)]
struct State {
    announced: bool,
    stop: bool,
    /// The epoch announced.
    epoch: u64,
    /// Its order, from where it starts (a resumed epoch's, further on).
    order: Vec<usize>,
    /// Reads of this epoch so far (about the position the readers are at).
    reads: usize,
    /// This epoch's samples kept on disk by the previous one.
    kept: Option<Kept>,
    /// The next epoch's, written as this one reads them.
    keeping: Option<Kept>,
    /// This process's place among those sharing the cache folder's room ([`kept::join`]).
    member: Option<kept::Member>,
    /// The count of reads at which to plan the next epoch's file (again: others held the
    /// room; or at all: the process's first epoch).
    retry: Option<usize>,
    /// Where the samples other readers of the folder keep for their next epoch go, by
    /// sample: this process writes those it reads ([`kept::peer_plans`]).
    peers: HashMap<usize, kept::Target>,
    /// The other readers' kept files looked at this epoch (and handles to them).
    peers_seen: HashMap<PathBuf, Arc<std::fs::File>>,
    /// The count of reads at which to look for other readers' kept files again.
    scan_at: usize,
    /// A look is under way.
    scanning: bool,
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Keeper {
    /// The kept samples of `of`.
    pub fn new(mut of: Keeping) -> Keeper {
        of.key ^= of.orders.key;
        let words = of.samples.div_ceil(64);
        Keeper {
            inner: Arc::new(Inner {
                of,
                served: (0..words).map(|_| AtomicU64::new(0)).collect(),
                state: Mutex::new(State::default()),
                pid: AtomicU32::new(std::process::id()),
                last: AtomicU64::new(u64::MAX),
            }),
        }
    }

    /// In a process forked from the one that holds the files (a DataLoader worker): they
    /// and its place in the folder are the parent's, left alone; this process takes a
    /// place of its own when its epoch starts.
    fn forked(&self) {
        if !forked::first_call_in_child(&self.inner.pid) {
            return;
        }
        let mut st = lock(&self.inner.state);
        for k in [st.kept.take(), st.keeping.take()].into_iter().flatten() {
            k.forget();
        }
        if let Some(m) = st.member.take() {
            m.leave();
        }
        let stop = st.stop;
        *st = State {
            stop,
            ..State::default()
        };
        drop(st);
        self.inner.clear_served();
    }

    /// Epoch `epoch` reads the samples `order` (a resumed epoch's from where it resumes):
    /// the samples the previous epoch kept for it are read from their file, anything else
    /// kept is dropped (its file removed), and the next epoch's file is planned.
    pub fn start_epoch(&self, epoch: u64, order: &[usize]) {
        self.forked();
        let inner = &self.inner;
        // Where this epoch starts in the rank's order (a resumed one, further on).
        let position = inner.of.per_epoch.saturating_sub(order.len());
        let mut st = lock(&inner.state);
        let mut said = None;
        let first = st.member.is_none();
        if first {
            // Counted among the readers sharing the folder's room from its first epoch
            // (a process that only opened the dataset, a DataLoader's main process whose
            // workers read, takes no share).
            st.member = kept::join(
                &inner.of.cache,
                inner.of.key,
                inner.of.orders.rank,
                epoch,
                position,
            );
        } else {
            said = st.member.as_ref().map(kept::Member::handle);
        }
        // The other readers' files are let go of outside the lock (closing the last
        // handle of a removed file frees its blocks).
        let peers = (
            std::mem::take(&mut st.peers),
            std::mem::take(&mut st.peers_seen),
        );
        st.scan_at = step(order.len());
        st.scanning = false;
        st.epoch = epoch;
        st.reads = 0;
        st.order.clear();
        st.order.extend_from_slice(order);
        st.announced = true;
        let mut released = Vec::new();
        released.extend(st.kept.take().map(Kept::release));
        inner.clear_served();
        st.kept = match st.keeping.take() {
            Some(mut k) if k.epoch() == epoch => {
                if k.start(order) {
                    for &i in order {
                        if k.serves(i) {
                            inner.set_served(i);
                        }
                    }
                    Some(k)
                } else {
                    released.push(k.release());
                    None
                }
            }
            other => {
                released.extend(other.map(Kept::release));
                None
            }
        };
        // Nothing kept for this epoch: plan the next one's file now, or a 64th into the
        // process's first epoch (the ranks started with it join the folder meanwhile).
        let plan_now = st.kept.is_none() && !first;
        st.retry = (st.kept.is_none() && first).then(|| step(order.len()));
        drop(st);
        drop(released);
        drop(peers);
        if let Some(m) = said {
            m.at(epoch, position);
        }
        if plan_now {
            // On a thread: the reader's fetching ahead starts now.
            Inner::plan_next(inner, epoch);
        }
    }

    /// Read sample `index` (`len` bytes) into `scratch` from the kept file, when it is
    /// there: `Some(whether another reader wrote it)`, the read counted (see
    /// [`Keeper::passed`]); `None`: the reader fetches it, then says so.
    pub fn read(&self, index: usize, len: usize, scratch: &mut Vec<u8>) -> Option<bool> {
        self.forked();
        let inner = &self.inner;
        let (served, next) = inner.read_kept(index, len, scratch);
        if let Some(epoch) = next {
            Inner::plan_next(inner, epoch);
        }
        if let Some(by_other) = served {
            stats::kept(by_other);
            Inner::passed(inner, index, scratch);
        }
        served
    }

    /// Sample `index` was read (`bytes`, from the store): count the read, and write it to
    /// the next epoch's kept file when it is one of the samples kept there, or to another
    /// reader's when it is one of theirs.
    pub fn passed(&self, index: usize, bytes: &[u8]) {
        self.forked();
        Inner::passed(&self.inner, index, bytes);
    }

    /// The run reads no epoch after `epoch`: nothing is kept for one (the last epoch of a
    /// run, a one-pass `bench` or conversion, plans no file and takes no room). A hint:
    /// an epoch read after it anyway is fetched, as one with nothing kept.
    pub fn last_epoch(&self, epoch: u64) {
        self.inner.last.store(epoch, Ordering::Relaxed);
    }

    /// Whether sample `index` is read from the kept file this epoch: fetching ahead skips
    /// it. Lock-free.
    pub fn serves(&self, index: usize) -> bool {
        self.inner.serves(index)
    }
}

impl Keeper {
    /// Let go of the kept files (removed) and of this process's place in the folder; in a
    /// forked child, leave them to the parent. The reader calls it when it closes, not
    /// when its last thread lets go of it (the process may end first).
    pub fn close(&self) {
        let mut st = lock(&self.inner.state);
        st.stop = true;
        let kept = [st.kept.take(), st.keeping.take()];
        let member = st.member.take();
        let peers = (
            std::mem::take(&mut st.peers),
            std::mem::take(&mut st.peers_seen),
        );
        drop(st);
        drop(peers);
        let child = forked::first_call_in_child(&self.inner.pid);
        for k in kept.into_iter().flatten() {
            if child {
                k.forget();
            } else {
                drop(k.release());
            }
        }
        match member {
            Some(m) if child => m.leave(),
            m => drop(m),
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.close();
    }
}

impl Inner {
    fn serves(&self, index: usize) -> bool {
        self.served
            .get(index / 64)
            .is_some_and(|w| w.load(Ordering::Relaxed) & (1 << (index % 64)) != 0)
    }

    fn set_served(&self, index: usize) {
        if let Some(w) = self.served.get(index / 64) {
            w.fetch_or(1 << (index % 64), Ordering::Relaxed);
        }
    }

    fn unset_served(&self, index: usize) {
        if let Some(w) = self.served.get(index / 64) {
            w.fetch_and(!(1 << (index % 64)), Ordering::Relaxed);
        }
    }

    fn clear_served(&self) {
        for w in &self.served {
            w.store(0, Ordering::Relaxed);
        }
    }

    /// [`Inner::keep_next`] on a thread of its own: planning computes epochs' orders, not
    /// work for a reader.
    fn plan_next(inner: &Arc<Inner>, epoch: u64) {
        let moved = Arc::clone(inner);
        let spawned = std::thread::Builder::new()
            .name("imgfeed-kept".into())
            .spawn(move || moved.keep_next(epoch));
        if spawned.is_err() {
            inner.keep_next(epoch);
        }
    }

    /// Reserve the file that keeps epoch `epoch + 1`'s first samples (see
    /// [`super::kept`]), unless there is no room or another epoch was announced
    /// meanwhile.
    fn keep_next(&self, epoch: u64) {
        if epoch >= self.last.load(Ordering::Relaxed) {
            return;
        }
        let orders = &self.of.orders;
        let next = orders.of(epoch + 1);
        // Only the samples a reader of the folder has still to read this epoch pass by
        // before the next: not those read already, nor those no rank of this node reads
        // (another node's: nobody here could write them). This process's own by its
        // reads; the other ranks' (which write what they read of the plan) by where they
        // said they are in the folder.
        let mut read = vec![true; self.of.samples];
        {
            let st = lock(&self.state);
            if st.epoch != epoch || st.stop {
                return;
            }
            for &i in st.order.iter().skip(st.reads) {
                if let Some(r) = read.get_mut(i) {
                    *r = false;
                }
            }
        }
        let readers = kept::readers(&self.of.cache, self.of.key);
        for peer in &readers.peers {
            if peer.rank == orders.rank || peer.rank >= orders.ranks || peer.epoch > epoch {
                continue;
            }
            let theirs = orders.of_rank(epoch, peer.rank);
            // From where it said it is (it says so every 64th of its epoch, and finds
            // this plan within the next 64th): a 32nd further on.
            let from = if peer.epoch < epoch {
                0
            } else {
                peer.position
                    .saturating_add(theirs.len() / 32 + 1)
                    .min(theirs.len())
            };
            for &i in &theirs[from..] {
                if let Some(r) = read.get_mut(i) {
                    *r = false;
                }
            }
        }
        let Some(k) = Kept::reserve(
            &self.of.cache,
            &self.of.keep,
            epoch + 1,
            &next,
            &self.of.len_of,
            &read,
            &readers,
            self.of.key,
        ) else {
            // Others sharing the folder may hold the room (a rank that planned before
            // this one joined): try again later in the epoch, at reads doubling from a
            // 64th of it, up to three quarters of it.
            let mut st = lock(&self.state);
            if st.epoch == epoch && st.keeping.is_none() && !st.stop {
                let len = st.order.len();
                let at = (st.reads * 2).max(st.reads + step(len));
                st.retry = (at < len * 3 / 4).then_some(at);
            }
            return;
        };
        let mut st = lock(&self.state);
        let stale = if st.epoch == epoch && st.keeping.is_none() && !st.stop {
            st.keeping = Some(k);
            None
        } else {
            Some(k.release())
        };
        drop(st);
        drop(stale);
    }

    /// Look for the other readers' kept files of the epoch after `epoch` (their plans),
    /// so that this process writes the samples of them it reads; let go of those their
    /// readers removed.
    fn scan_peers(&self, epoch: u64) {
        let (seen, files, own) = {
            let mut st = lock(&self.state);
            if st.epoch != epoch || st.stop {
                st.scanning = false;
                return;
            }
            let own = st
                .keeping
                .as_ref()
                .and_then(|k| k.path().map(Path::to_path_buf));
            let seen: HashSet<PathBuf> = st.peers_seen.keys().cloned().collect();
            let files: Vec<Arc<std::fs::File>> = st.peers_seen.values().cloned().collect();
            (seen, files, own)
        };
        // Files their readers removed (read already): let go of them.
        let gone: Vec<Arc<std::fs::File>> =
            files.into_iter().filter(|f| !kept::linked(f)).collect();
        // This process's own files (its kept file, or the next one being reserved) are
        // not another reader's.
        let pid = format!(".tmp.{}.", std::process::id());
        let mine = |p: &Path| {
            own.as_deref() == Some(p)
                || p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.contains(&pid))
        };
        let found = kept::peer_plans(
            &self.of.cache,
            self.of.key,
            epoch + 1,
            self.of.samples,
            &seen,
            &mine,
        );
        let mut st = lock(&self.state);
        st.scanning = false;
        let stale = if st.epoch != epoch || st.stop {
            Some(found)
        } else {
            if !gone.is_empty() {
                let held = |f: &Arc<std::fs::File>| !gone.iter().any(|g| Arc::ptr_eq(g, f));
                st.peers.retain(|_, t| held(t.file()));
                st.peers_seen.retain(|_, f| held(f));
            }
            for plan in found {
                st.peers_seen.insert(plan.path, plan.file);
                for (i, t) in plan.targets {
                    st.peers.entry(i).or_insert(t);
                }
            }
            None
        };
        drop(st);
        drop((stale, gone));
    }

    /// Read sample `index` (`len` bytes) from the kept file into `scratch`, when it is
    /// there: `Some(whether another reader wrote it)` when it was, and `Some(epoch)` when
    /// that was the file's last read to come (or a failed one gave up the last ones; the
    /// file is removed): plan the next file for the epoch after `epoch`.
    fn read_kept(
        &self,
        index: usize,
        len: usize,
        scratch: &mut Vec<u8>,
    ) -> (Option<bool>, Option<u64>) {
        if !self.serves(index) {
            return (None, None);
        }
        let Some((file, offset, by_other)) = lock(&self.state)
            .kept
            .as_ref()
            .and_then(|k| k.source(index, len))
        else {
            return (None, None);
        };
        let ok = kept::read(&file, offset, len, scratch);
        let mut st = lock(&self.state);
        let released = st.kept.as_mut().and_then(|k| k.used(index, &file, ok));
        if !ok {
            // Fetched like any sample from now on.
            self.unset_served(index);
        }
        let epoch = st.epoch;
        drop(st);
        let last = released.is_some();
        drop(released);
        (ok.then_some(by_other), last.then_some(epoch))
    }

    /// [`Keeper::passed`]; then, when it is time, plan the next file (again), or look for
    /// other readers' files and say how far this one is.
    fn passed(inner: &Arc<Inner>, index: usize, bytes: &[u8]) {
        let (mut again, mut scan) = (None, None);
        let (own, theirs) = {
            let mut st = lock(&inner.state);
            st.reads += 1;
            if st.retry.is_some_and(|at| st.reads >= at) {
                st.retry = None;
                again = Some(st.epoch);
            }
            if st.announced && st.reads >= st.scan_at && !st.scanning && !st.stop {
                let len = st.order.len();
                st.scan_at = st.reads + step(len);
                st.scanning = true;
                let position = inner.of.per_epoch.saturating_sub(len) + st.reads;
                scan = Some((
                    st.epoch,
                    position,
                    st.member.as_ref().map(kept::Member::handle),
                ));
            }
            let own = st
                .keeping
                .as_ref()
                .and_then(|k| k.wants(index, bytes.len()));
            let theirs = if own.is_none() && !st.peers.is_empty() {
                st.peers.remove(&index)
            } else {
                None
            };
            (own, theirs)
        };
        if let Some(t) = own {
            if t.write(bytes) {
                stats::keeping();
                if let Some(k) = lock(&inner.state).keeping.as_mut() {
                    k.written(index, t.file());
                }
            }
        }
        if let Some(t) = theirs {
            if t.write(bytes) {
                stats::keeping();
            }
        }
        if let Some(epoch) = again {
            Inner::plan_next(inner, epoch);
        }
        if let Some((epoch, position, member)) = scan {
            // Say how far this reader is, for the others' plans.
            if let Some(m) = member {
                m.at(epoch, position);
            }
            let moved = Arc::clone(inner);
            let spawned = std::thread::Builder::new()
                .name("imgfeed-kept".into())
                .spawn(move || moved.scan_peers(epoch));
            if spawned.is_err() {
                lock(&inner.state).scanning = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wait (at most 10 s) for `done`.
    fn until(done: impl Fn() -> bool) -> bool {
        let t0 = std::time::Instant::now();
        while !done() {
            if t0.elapsed() > std::time::Duration::from_secs(10) {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        true
    }

    /// The order of every epoch of [`eight_samples`].
    const ORDER: [usize; 8] = [5, 2, 7, 0, 3, 6, 1, 4];

    /// A cache folder in `dir` and a keeper of 8 samples of 10 bytes in it, read in
    /// [`ORDER`] every epoch.
    fn eight_samples(dir: &Path) -> (Cache, Keeper) {
        let url = super::super::StoreUrl::parse("http://127.0.0.1:9/ds").expect("url");
        let open = || Cache::open(Some(dir), 10_000, &url, None).expect("cache");
        let keeper = Keeper::new(Keeping {
            cache: open(),
            key: 1,
            orders: Orders::fixed(ORDER.to_vec()),
            per_epoch: 8,
            samples: 8,
            len_of: Box::new(|i| (i < 8).then_some(10)),
            keep: Vec::new(),
        });
        (open(), keeper)
    }

    #[test]
    fn an_epoch_keeps_the_next_ones_first_samples_which_it_then_serves_and_close_removes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cache, keeper) = eight_samples(dir.path());
        let order = ORDER.to_vec();
        let kept_files = || cache.held("ranges-kept").len();
        let bytes = |i: usize| vec![i as u8; 10];
        keeper.start_epoch(0, &order);
        // A process's first plan waits for its first 64th (here one read).
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(kept_files(), 0, "no plan before the first read");
        assert!(order.iter().all(|&i| !keeper.serves(i)));
        keeper.passed(order[0], &bytes(order[0]));
        assert!(
            until(|| lock(&keeper.inner.state).keeping.is_some()),
            "planned after it"
        );
        assert_eq!(kept_files(), 1);
        // The samples of the next order's first half not read yet (2, 7, 0) are written
        // as they pass by.
        for &i in &order[1..] {
            keeper.passed(i, &bytes(i));
        }
        keeper.start_epoch(1, &order);
        let served: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| keeper.serves(i))
            .collect();
        assert_eq!(served, [2, 7, 0]);
        let mut scratch = Vec::new();
        assert_eq!(keeper.read(5, 10, &mut scratch), None, "not kept: fetched");
        assert_eq!(keeper.read(2, 10, &mut scratch), Some(false));
        assert_eq!(scratch, bytes(2));
        keeper.close();
        assert_eq!(kept_files(), 0);
        assert_eq!(cache.used().expect("used"), 0, "the folder is left empty");
    }

    #[test]
    fn the_runs_last_epoch_keeps_nothing_for_an_epoch_that_never_comes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cache, keeper) = eight_samples(dir.path());
        let order = ORDER.to_vec();
        // The same reads as the test above, where epoch 0 plans a file for epoch 1 after
        // its first read; but epoch 0 is the run's last.
        keeper.last_epoch(0);
        keeper.start_epoch(0, &order);
        keeper.passed(order[0], &[order[0] as u8; 10]);
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(lock(&keeper.inner.state).keeping.is_none(), "no plan");
        assert_eq!(cache.held("ranges-kept").len(), 0, "no file");
        for &i in &order[1..] {
            keeper.passed(i, &[i as u8; 10]);
        }
        // An epoch read after it anyway reads every sample from the store.
        keeper.start_epoch(1, &order);
        assert!(order.iter().all(|&i| !keeper.serves(i)));
        let mut scratch = Vec::new();
        assert!(order
            .iter()
            .all(|&i| keeper.read(i, 10, &mut scratch).is_none()));
        keeper.close();
        assert_eq!(cache.used().expect("used"), 0);
    }
}
