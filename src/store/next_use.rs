//! Each file's next use in an epoch's known order (then the next epoch's): what the
//! fetch-ahead ([`super::ahead`]) evicts by (the file needed furthest away goes first,
//! Belady's rule, which is optimal when the future is known, as a seeded order is) and
//! what it prefetches by (the file needed soonest that is not cached).

/// A reader more than this many samples ahead of the lowest position not yet read moves
/// the position used for next uses (a process reading only some of the order, a forked
/// worker, must not leave it behind for good).
const LAG: usize = 1 << 14;

/// The next use of a file never used again (before one the owner does not list).
pub(super) const NEVER: u64 = u64::MAX - 1;

/// The epoch's future as eviction and prefetching rank it.
#[derive(Default)]
pub(super) struct Plan {
    /// The epoch.
    pub(super) epoch: u64,
    /// Positions in its order.
    pub(super) len: usize,
    /// The positions at which each file is read, ascending.
    uses: Vec<Vec<u32>>,
    /// Each sample's position (`u32::MAX`: not read this epoch).
    pos_of: Vec<u32>,
    /// Each file's first position in the next epoch (`u32::MAX`: none).
    next_first: Vec<u32>,
    /// Positions read, and the lowest one not read yet, and one past the highest read.
    read: Vec<u64>,
    low: usize,
    high: usize,
}

impl Plan {
    /// The plan of `epoch` reading `order`, followed by `next` (the next epoch's order).
    pub(super) fn new(
        epoch: u64,
        order: &[usize],
        next: &[usize],
        file_of: &[u32],
        files: usize,
    ) -> Plan {
        let mut uses = vec![Vec::new(); files];
        let mut pos_of = vec![u32::MAX; file_of.len()];
        for (k, &i) in order.iter().enumerate() {
            if let Some(p) = pos_of.get_mut(i) {
                if *p == u32::MAX {
                    *p = k as u32;
                }
            }
            if let Some(u) = file_of.get(i).and_then(|&f| uses.get_mut(f as usize)) {
                u.push(k as u32);
            }
        }
        let mut next_first = vec![u32::MAX; files];
        for (k, &i) in next.iter().enumerate() {
            if let Some(n) = file_of.get(i).and_then(|&f| next_first.get_mut(f as usize)) {
                if *n == u32::MAX {
                    *n = k as u32;
                }
            }
        }
        Plan {
            epoch,
            len: order.len(),
            uses,
            pos_of,
            next_first,
            read: vec![0; order.len().div_ceil(64)],
            low: 0,
            high: 0,
        }
    }

    /// Sample `index` was read.
    pub(super) fn mark(&mut self, index: usize) {
        let Some(&p) = self.pos_of.get(index) else {
            return;
        };
        let p = p as usize;
        if p >= self.len {
            return;
        }
        if let Some(w) = self.read.get_mut(p / 64) {
            *w |= 1 << (p % 64);
        }
        self.high = self.high.max(p + 1);
        while self.low < self.len
            && self
                .read
                .get(self.low / 64)
                .is_some_and(|w| w & (1 << (self.low % 64)) != 0)
        {
            self.low += 1;
        }
    }

    /// The position next uses are counted from.
    pub(super) fn cursor(&self) -> usize {
        self.low.max(self.high.saturating_sub(LAG))
    }

    /// How many positions from now file `f` is next read ([`NEVER`]: not in this epoch
    /// or the next).
    pub(super) fn next_use(&self, f: usize) -> u64 {
        let c = self.cursor();
        if let Some(u) = self.uses.get(f) {
            let i = u.partition_point(|&p| (p as usize) < c);
            if let Some(&p) = u.get(i) {
                return (p as usize - c) as u64;
            }
        }
        match self.next_first.get(f) {
            Some(&n) if n != u32::MAX => (self.len - c.min(self.len)) as u64 + u64::from(n),
            _ => NEVER,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_uses_follow_the_epoch_and_then_the_next_one() {
        // Positions: e a b a c (d is not read).
        let plan = Plan::new(0, &[4, 0, 1, 0, 2], &[2, 0, 1, 3, 4], &[0, 1, 2, 3, 4], 5);
        assert_eq!(plan.next_use(4), 0);
        assert_eq!(plan.next_use(0), 1);
        assert_eq!(plan.next_use(2), 4);
        // d: not this epoch; the next one's position 3, after the 5 left here.
        assert_eq!(plan.next_use(3), 5 + 3);
        let mut plan = plan;
        plan.mark(4);
        plan.mark(0);
        // a's next use is now its second read, b is next.
        assert_eq!((plan.next_use(0), plan.next_use(1)), (1, 0));
        // A reader still on position 1 keeps the cursor there though 3 is read.
        let mut p2 = Plan::new(0, &[0, 1, 2, 3, 4], &[], &[0, 1, 2, 3, 4], 5);
        p2.mark(0);
        p2.mark(3);
        assert_eq!(p2.cursor(), 1);
        assert_eq!(p2.next_use(1), 0);
        assert_eq!(p2.next_use(0), NEVER);
    }
}
