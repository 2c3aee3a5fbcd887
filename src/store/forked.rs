//! Whether a call comes from a process forked since the last one (a DataLoader worker
//! forked after the dataset was opened): what the fetch-aheads check before every read, to
//! start their own prefetchers in the child. One atomic load when nothing forked.

use std::sync::atomic::{AtomicU32, Ordering};

/// True once per new process: when `owner` (the process that started the threads) is not
/// this one, it becomes this one and the caller must start afresh; false otherwise (and
/// for every other thread of the child racing the first).
pub(crate) fn first_call_in_child(owner: &AtomicU32) -> bool {
    let pid = std::process::id();
    let was = owner.load(Ordering::Acquire);
    was != pid
        && owner
            .compare_exchange(was, pid, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_call_from_another_process_says_so() {
        let owner = AtomicU32::new(std::process::id().wrapping_add(1));
        assert!(first_call_in_child(&owner));
        assert!(!first_call_in_child(&owner));
        assert_eq!(owner.load(Ordering::Relaxed), std::process::id());
    }
}
