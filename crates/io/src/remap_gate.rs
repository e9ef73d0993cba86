//! The lock-free remap protocol of seed 000 (WiredTiger's `mmap_resizing` / `mmap_use_count`).
//!
//! Users of a mapping (readers and writers copying bytes) and resizers (threads that change the
//! file size and replace the mapping) coordinate through two atomics and no lock:
//!
//! ```text
//! user:    use_count += 1            resizer: until CAS(resizing, 0 -> 1) succeeds: back off
//!          if resizing {                      wait while use_count > 0
//!              use_count -= 1                 change the file size, unmap, map again
//!              use pread/pwrite               resizing = 0
//!          } else {
//!              copy through the mapping
//!              use_count -= 1
//!          }
//! ```
//!
//! Invariants (checked by the loom model in this file and the stress test):
//! 1. While a resizer holds `resizing`, no user is inside the mapping: the resizer saw
//!    `use_count == 0` after setting the flag, and any user that incremented the count later
//!    re-checks the flag and leaves without touching the mapping.
//! 2. At most one resizer at a time: the flag is claimed by compare-and-swap.
//! 3. Users never wait: they either enter or fall back to system calls, which the kernel
//!    orders with the size change. Only resizers wait, and only for copies already in flight.
//!
//! The user's increment and re-check, and the resizer's claim and count check, are `SeqCst`:
//! this is a store-then-load handshake on two locations (Dekker), which weaker orderings do not
//! make safe. The re-check is the fix of WiredTiger's WT-12099; the loom test below shows that
//! without it a user and a resizer can touch the mapping at the same time.
//!
//! Must never: wait for a resize while holding a `UseGuard` (the resizer would wait forever).

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::backoff::Backoff;

/// The pair of atomics guarding one mapping.
#[derive(Debug, Default)]
pub(crate) struct RemapGate {
    resizing: AtomicBool,
    use_count: AtomicUsize,
}

/// Proof that the caller may use the mapping; leaving drops the count.
#[must_use]
#[derive(Debug)]
pub(crate) struct UseGuard<'gate> {
    gate: &'gate RemapGate,
}

/// Proof that the caller alone may replace the mapping; dropping it clears `resizing`.
#[must_use]
#[derive(Debug)]
pub(crate) struct ResizeGuard<'gate> {
    gate: &'gate RemapGate,
}

impl RemapGate {
    pub(crate) fn new() -> RemapGate {
        RemapGate { resizing: AtomicBool::new(false), use_count: AtomicUsize::new(0) }
    }

    /// Enters the mapping, or returns `None` when a resize is running and the caller must use
    /// system calls instead.
    pub(crate) fn enter(&self) -> Option<UseGuard<'_>> {
        // Cheap early exit while a resize is known to run; the re-check below is what matters.
        if self.resizing.load(Ordering::Acquire) {
            return None;
        }
        self.use_count.fetch_add(1, Ordering::SeqCst);
        loom_seqcst_fence();
        if self.resizing.load(Ordering::SeqCst) {
            self.use_count.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(UseGuard { gate: self })
    }

    /// Claims the right to resize, then waits for users already inside to leave.
    pub(crate) fn begin_resize(&self) -> ResizeGuard<'_> {
        // A compare-and-swap always reads the latest value, so a waiting resizer cannot spin on
        // a stale `true`; resizers are rare, so the cache-line traffic of retrying is harmless.
        let mut backoff = Backoff::default();
        while self
            .resizing
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            backoff.snooze();
        }
        loom_seqcst_fence();
        // Read the count with a read-modify-write: like the CAS above it always sees the latest
        // value, so the wait ends as soon as the last user leaves (a plain load may, in the
        // memory model, keep returning an older value, and loom explores exactly that).
        let mut backoff = Backoff::default();
        while self.use_count.fetch_add(0, Ordering::SeqCst) > 0 {
            backoff.snooze();
        }
        ResizeGuard { gate: self }
    }

    /// True while a resize runs (for assertions).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn is_resizing(&self) -> bool {
        self.resizing.load(Ordering::Acquire)
    }

    /// Users inside the mapping now (for assertions).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn users(&self) -> usize {
        self.use_count.load(Ordering::SeqCst)
    }
}

impl Drop for UseGuard<'_> {
    fn drop(&mut self) {
        let previous = self.gate.use_count.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(previous > 0, "use_count underflow");
    }
}

impl ResizeGuard<'_> {
    /// Asserts what the resizer holds: the flag. Not `use_count == 0`: a user that enters
    /// now raises the count before it sees the flag and leaves, so the count may read 1
    /// while nobody is in the mapping (a CI run's stress test failed on exactly that; the
    /// loom model checks the real invariant, no access to the mapping during a remap).
    pub(crate) fn assert_exclusive(&self) {
        debug_assert!(self.gate.resizing.load(Ordering::Relaxed));
    }
}

impl Drop for ResizeGuard<'_> {
    fn drop(&mut self) {
        // Release (as part of SeqCst) publishes the new mapping to users that see the flag clear.
        self.gate.resizing.store(false, Ordering::SeqCst);
    }
}

/// Loom models SeqCst loads and stores as AcqRel (loom's README, "Unsupported features"),
/// which is too weak for a store-then-load handshake on two locations: under loom alone the
/// correct protocol would be reported as racy. The C++20 single total order of SeqCst
/// operations is what makes the real build correct; under loom an explicit `fence(SeqCst)`
/// between the two operations of each side expresses that same guarantee, since loom does model
/// SeqCst fences. In the real build this is nothing: a fence there would add an mfence (about
/// 3 ns) to every mapped access.
#[inline(always)]
fn loom_seqcst_fence() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn users_fall_back_while_a_resize_runs_and_reenter_after() {
        let gate = RemapGate::new();
        {
            let _user = gate.enter().expect("no resize runs");
            assert_eq!(gate.users(), 1);
        }
        assert_eq!(gate.users(), 0);
        let resize = gate.begin_resize();
        resize.assert_exclusive();
        assert!(gate.enter().is_none(), "a user entered during a resize");
        assert_eq!(gate.users(), 0, "a refused user left its count behind");
        drop(resize);
        assert!(gate.enter().is_some());
    }

    #[test]
    fn a_resizer_waits_for_users_inside() {
        use std::sync::atomic::AtomicBool as StdBool;
        use std::sync::Arc;
        let gate = Arc::new(RemapGate::new());
        let user = gate.enter().expect("no resize runs");
        let resized = Arc::new(StdBool::new(false));
        let thread = {
            let (gate, resized) = (Arc::clone(&gate), Arc::clone(&resized));
            std::thread::spawn(move || {
                let _resize = gate.begin_resize();
                resized.store(true, std::sync::atomic::Ordering::SeqCst);
            })
        };
        // The resizer has claimed the flag or is about to; either way it cannot finish.
        while !gate.is_resizing() {
            std::thread::yield_now();
        }
        for _ in 0..1000 {
            assert!(!resized.load(std::sync::atomic::Ordering::SeqCst));
            std::thread::yield_now();
        }
        drop(user);
        thread.join().expect("resizer thread");
        assert!(resized.load(std::sync::atomic::Ordering::SeqCst));
    }
}

/// The loom model: run with `RUSTFLAGS="--cfg loom" cargo test -p tierkv-io --lib loom`.
///
/// The "mapping" is a loom `UnsafeCell`: users read it, resizers write it. Loom explores every
/// interleaving of the threads (within the preemption bound) and fails if a read and a write of
/// the cell can overlap, which is exactly a user touching the mapping during a remap.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    struct Mapping {
        gate: RemapGate,
        /// Stands for (address, length) of the mapping; a remap replaces it.
        region: UnsafeCell<u64>,
    }

    // SAFETY: access to `region` is what the model checks; loom reports any race.
    unsafe impl Sync for Mapping {}

    fn user(mapping: &Mapping, enter: impl Fn(&RemapGate) -> Option<UseGuard<'_>>) -> bool {
        match enter(&mapping.gate) {
            Some(_guard) => {
                // SAFETY: the gate promises no resizer writes the region now; loom checks it.
                let generation = mapping.region.with(|region| unsafe { *region });
                assert!(generation < 10);
                true
            }
            None => false,
        }
    }

    fn resizer(mapping: &Mapping) {
        let guard = mapping.gate.begin_resize();
        guard.assert_exclusive();
        // SAFETY: the gate promises exclusivity; loom checks it.
        mapping.region.with_mut(|region| unsafe { *region += 1 });
        drop(guard);
    }

    fn model(users: usize, resizers: usize, enter: fn(&RemapGate) -> Option<UseGuard<'_>>) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(move || {
            let mapping = Arc::new(Mapping { gate: RemapGate::new(), region: UnsafeCell::new(0) });
            let mut threads = Vec::new();
            for _ in 0..users {
                let mapping = Arc::clone(&mapping);
                threads.push(loom::thread::spawn(move || {
                    user(&mapping, enter);
                }));
            }
            for _ in 1..resizers {
                let mapping = Arc::clone(&mapping);
                threads.push(loom::thread::spawn(move || resizer(&mapping)));
            }
            if resizers > 0 {
                resizer(&mapping);
            }
            for thread in threads {
                thread.join().expect("model thread");
            }
            assert_eq!(mapping.gate.use_count.load(Ordering::SeqCst), 0);
            assert!(!mapping.gate.resizing.load(Ordering::SeqCst));
            // SAFETY: all threads joined.
            let generation = mapping.region.with(|region| unsafe { *region });
            assert_eq!(generation, resizers as u64);
        });
    }

    #[test]
    fn loom_two_users_one_resizer() {
        model(2, 1, RemapGate::enter);
    }

    #[test]
    fn loom_two_resizers_exclude_each_other() {
        model(0, 2, RemapGate::enter);
    }

    #[test]
    fn loom_one_user_one_resizer() {
        model(1, 1, RemapGate::enter);
    }

    /// WiredTiger before WT-12099: check the flag, then increment, with no re-check. Loom must
    /// find the interleaving where the user reads the mapping while the resizer replaces it.
    fn enter_without_recheck(gate: &RemapGate) -> Option<UseGuard<'_>> {
        if gate.resizing.load(Ordering::SeqCst) {
            return None;
        }
        gate.use_count.fetch_add(1, Ordering::SeqCst);
        loom_seqcst_fence();
        Some(UseGuard { gate })
    }

    #[test]
    #[should_panic(expected = "Causality violation")]
    fn loom_finds_the_race_without_the_recheck() {
        model(1, 1, enter_without_recheck);
    }

    /// A resizer that claims the flag but does not wait for users already inside: loom must
    /// find the user still reading while the region is replaced.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn loom_finds_the_race_without_the_drain() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let mapping = Arc::new(Mapping { gate: RemapGate::new(), region: UnsafeCell::new(0) });
            let reader = {
                let mapping = Arc::clone(&mapping);
                loom::thread::spawn(move || {
                    user(&mapping, RemapGate::enter);
                })
            };
            while mapping
                .gate
                .resizing
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed)
                .is_err()
            {
                loom::thread::yield_now();
            }
            // SAFETY: deliberately unsafe: no drain of use_count; loom must report the race.
            mapping.region.with_mut(|region| unsafe { *region += 1 });
            mapping.gate.resizing.store(false, Ordering::SeqCst);
            reader.join().expect("reader");
        });
    }
}
