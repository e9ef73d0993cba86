//! Space in the tier's region, handed out in units of `UNIT` bytes: best fit from a set of
//! free extents, merged with their neighbours when freed. Blocks are mostly a few KiB (the
//! engine's pages) with some of a MiB (its overflow values), so a size-class allocator would
//! waste up to half of each; best fit wastes less than one unit per block.
//!
//! Must never: hand out a unit that is already handed out, or lose one (free + used is
//! always the total).

use std::collections::{BTreeMap, BTreeSet};

/// Bytes per allocation unit.
pub(crate) const UNIT: u64 = 256;

/// Units needed for `bytes`.
pub(crate) fn units_for(bytes: u64) -> u64 {
    bytes.div_ceil(UNIT)
}

/// Free extents, by start and by (length, start).
#[derive(Debug)]
pub(crate) struct Extents {
    by_start: BTreeMap<u64, u64>,
    by_len: BTreeSet<(u64, u64)>,
    free_units: u64,
    total_units: u64,
}

impl Extents {
    /// `total_units` units, all free.
    pub(crate) fn new(total_units: u64) -> Extents {
        let mut extents = Extents {
            by_start: BTreeMap::new(),
            by_len: BTreeSet::new(),
            free_units: 0,
            total_units,
        };
        if total_units > 0 {
            extents.insert(0, total_units);
        }
        extents
    }

    fn insert(&mut self, start: u64, len: u64) {
        self.by_start.insert(start, len);
        self.by_len.insert((len, start));
        self.free_units += len;
    }

    fn remove(&mut self, start: u64, len: u64) {
        self.by_start.remove(&start);
        self.by_len.remove(&(len, start));
        self.free_units -= len;
    }

    /// The start of `units` free units (the smallest extent that holds them, lowest start
    /// first), or `None` when no extent is that long.
    pub(crate) fn allocate(&mut self, units: u64) -> Option<u64> {
        debug_assert!(units > 0);
        let &(len, start) = self.by_len.range((units, 0)..).next()?;
        self.remove(start, len);
        if len > units {
            self.insert(start + units, len - units);
        }
        Some(start)
    }

    /// Gives back `units` units at `start`, merged with free neighbours.
    pub(crate) fn free(&mut self, start: u64, units: u64) {
        debug_assert!(start + units <= self.total_units);
        let (mut start, mut len) = (start, units);
        let before = self.by_start.range(..=start).next_back().map(|(&s, &l)| (s, l));
        let after = self.by_start.range(start..).next().map(|(&s, _)| s);
        debug_assert!(before.is_none_or(|(s, l)| s + l <= start), "unit {start} freed twice");
        debug_assert!(after.is_none_or(|s| s >= start + units), "unit {start} freed twice");
        if let Some((s, l)) = before.filter(|&(s, l)| s + l == start) {
            self.remove(s, l);
            start = s;
            len += l;
        }
        if let Some(&l) = self.by_start.get(&(start + len)) {
            self.remove(start + len, l);
            len += l;
        }
        self.insert(start, len);
    }

    /// Units free.
    #[cfg(test)]
    pub(crate) fn free_units(&self) -> u64 {
        self.free_units
    }

    /// The longest free extent, in units.
    #[cfg(test)]
    pub(crate) fn largest(&self) -> u64 {
        self.by_len.last().map_or(0, |&(len, _)| len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn best_fit_takes_the_smallest_extent_that_holds_the_request() {
        let mut extents = Extents::new(100);
        let a = extents.allocate(10).expect("a");
        let b = extents.allocate(5).expect("b");
        let c = extents.allocate(20).expect("c");
        assert_eq!((a, b, c), (0, 10, 15));
        extents.free(a, 10); // a hole of 10 at 0, and 65 free at 35
        assert_eq!(extents.allocate(8), Some(0)); // fits the hole, not the tail
        assert_eq!(extents.allocate(70), None);
        extents.free(0, 8);
        extents.free(b, 5);
        extents.free(c, 20);
        assert_eq!((extents.free_units(), extents.largest()), (100, 100));
        assert_eq!(units_for(1), 1);
        assert_eq!(units_for(UNIT), 1);
        assert_eq!(units_for(UNIT + 1), 2);
    }

    proptest! {
        /// Any sequence of allocations and frees: handed-out ranges never overlap, free plus
        /// used is the total, and once all is freed it is one extent again.
        #[test]
        fn ranges_never_overlap_and_nothing_is_lost(
            steps in proptest::collection::vec((1u64..40, any::<bool>(), any::<u16>()), 1..300)
        ) {
            let total = 1000;
            let mut extents = Extents::new(total);
            let mut owned: Vec<(u64, u64)> = Vec::new();
            let mut used = vec![false; total as usize];
            for (units, free, pick) in steps {
                if free && !owned.is_empty() {
                    let (start, len) = owned.swap_remove(pick as usize % owned.len());
                    for unit in start..start + len {
                        used[unit as usize] = false;
                    }
                    extents.free(start, len);
                } else if let Some(start) = extents.allocate(units) {
                    for unit in start..start + units {
                        prop_assert!(!used[unit as usize], "unit {} handed out twice", unit);
                        used[unit as usize] = true;
                    }
                    owned.push((start, units));
                }
                let in_use: u64 = owned.iter().map(|&(_, len)| len).sum();
                prop_assert_eq!(extents.free_units() + in_use, total);
            }
            for (start, len) in owned {
                extents.free(start, len);
            }
            prop_assert_eq!(extents.largest(), total);
        }
    }
}
