//! The state-and-version word of one frame (vmcache's `PageState`), and its protocol.
//!
//! ```text
//!  63        56 55                                   0
//! +------------+--------------------------------------+
//! |   state    |               version                |
//! +------------+--------------------------------------+
//! state: 0 evicted, 1 unlocked, 2..=MAX_SHARED+1 shared by n = state - 1 readers,
//!        0xFD marked (unlocked, chosen by the clock), 0xFE exclusive.
//! ```
//!
//! Zero is *evicted, version 0*, so a word array fresh from the kernel (all zero pages) says
//! that no page is resident, without touching it.
//!
//! - An exclusive holder ends with `unlock_exclusive` (unlocked, version + 1) or
//!   `unlock_evicted` (evicted, version + 1): every change of the bytes, and every eviction,
//!   moves the version on.
//! - An optimistic reader loads the word (`Acquire`), reads the frame with relaxed atomic
//!   loads, then `validate`s: an `Acquire` fence and a second load, which must show the same
//!   version and no exclusive holder. The exclusive locker puts a `Release` fence right after
//!   its compare-and-swap, so a reader that read any byte written under the lock also sees the
//!   lock (or later) in its second load (the seqlock argument of Boehm, "Can Seqlocks Get
//!   Along with Programming Language Memory Models?", MSPC 2012).
//! - Shared holders count in the state byte; an exclusive lock waits for them to leave.
//! - The clock marks an unlocked page (`try_mark`); any lock taken from marked clears the
//!   mark, and so does an optimistic reader (`touch`); the clock evicts a page it finds still
//!   marked, by locking it exclusively from marked.
//!
//! Invariants (checked by the loom model in `frames/loom_tests.rs`):
//! 1. At most one exclusive holder, and never together with a shared holder.
//! 2. A validated optimistic read saw no byte written by an exclusive holder whose unlock the
//!    reader's first load did not see, and no byte after the holder's lock: it saw exactly the
//!    frame as of one version.
//! 3. The version never goes back (56 bits: at 10^9 unlocks a second, 2 years to wrap).
//!
//! Must never: change the bytes of a frame without holding it exclusively.

// The loom build uses the protocol without the frames around it.
#![cfg_attr(loom, allow(dead_code))]

#[cfg(loom)]
use loom::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{fence, AtomicU64, Ordering};

const STATE_SHIFT: u32 = 56;
const VERSION_MASK: u64 = (1 << STATE_SHIFT) - 1;

const EVICTED: u64 = 0;
const UNLOCKED: u64 = 1;
/// The most shared holders at once; one more waits.
pub(crate) const MAX_SHARED: u64 = 250;
const MARKED: u64 = 0xFD;
const EXCLUSIVE: u64 = 0xFE;

/// One value of a word, as loaded.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Seen(u64);

/// What a word says about its frame.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FrameState {
    /// Not resident: the frame holds no page.
    Evicted,
    /// Resident, no holder.
    Unlocked,
    /// Resident, no holder, chosen by the clock for eviction unless it is used again first.
    Marked,
    /// Resident, read by this many shared holders.
    Shared(u32),
    /// Resident, held by one writer (or a loader filling it).
    Exclusive,
}

impl Seen {
    #[inline]
    fn state_byte(self) -> u64 {
        self.0 >> STATE_SHIFT
    }

    /// The version part.
    #[inline]
    pub(crate) fn version(self) -> u64 {
        self.0 & VERSION_MASK
    }

    /// The state part.
    #[inline]
    pub(crate) fn state(self) -> FrameState {
        match self.state_byte() {
            EVICTED => FrameState::Evicted,
            UNLOCKED => FrameState::Unlocked,
            MARKED => FrameState::Marked,
            EXCLUSIVE => FrameState::Exclusive,
            n => FrameState::Shared((n - 1) as u32),
        }
    }

    fn with(self, state: u64) -> u64 {
        (state << STATE_SHIFT) | self.version()
    }

    fn next(self, state: u64) -> u64 {
        (state << STATE_SHIFT) | ((self.version() + 1) & VERSION_MASK)
    }
}

/// The word itself.
#[derive(Debug, Default)]
#[repr(transparent)]
pub(crate) struct PageWord(AtomicU64);

impl PageWord {
    #[cfg(loom)]
    pub(crate) fn new() -> PageWord {
        PageWord(AtomicU64::new(0))
    }

    /// The word now, `Acquire`: a reader's start.
    #[inline]
    pub(crate) fn load(&self) -> Seen {
        Seen(self.0.load(Ordering::Acquire))
    }

    /// True when nothing changed since `seen` and no writer holds the frame: the reads in
    /// between saw one version. Call after the reads.
    #[inline]
    pub(crate) fn validate(&self, seen: Seen) -> bool {
        fence(Ordering::Acquire);
        let now = Seen(self.0.load(Ordering::Relaxed));
        now.version() == seen.version() && !matches!(now.state(), FrameState::Exclusive)
    }

    fn swap_from(&self, seen: Seen, to: u64, success: Ordering) -> bool {
        self.0.compare_exchange(seen.0, to, success, Ordering::Relaxed).is_ok()
    }

    /// Locks a resident page exclusively, from `seen` (unlocked or marked, no shared holder).
    pub(crate) fn try_lock_exclusive(&self, seen: Seen) -> bool {
        if !matches!(seen.state(), FrameState::Unlocked | FrameState::Marked) {
            return false;
        }
        let locked = self.swap_from(seen, seen.with(EXCLUSIVE), Ordering::Acquire);
        if locked {
            // Orders the lock before every byte written under it, for optimistic readers.
            fence(Ordering::Release);
        }
        locked
    }

    /// `try_lock_exclusive` without its fence: the loom model shows what breaks.
    #[cfg(loom)]
    pub(crate) fn try_lock_exclusive_unfenced(&self, seen: Seen) -> bool {
        matches!(seen.state(), FrameState::Unlocked | FrameState::Marked)
            && self.swap_from(seen, seen.with(EXCLUSIVE), Ordering::Acquire)
    }

    /// Locks an evicted page exclusively, to fill its frame.
    pub(crate) fn try_lock_evicted(&self, seen: Seen) -> bool {
        if !matches!(seen.state(), FrameState::Evicted) {
            return false;
        }
        let locked = self.swap_from(seen, seen.with(EXCLUSIVE), Ordering::Acquire);
        if locked {
            fence(Ordering::Release);
        }
        locked
    }

    /// Upgrades an optimistic read to an exclusive lock, if nothing changed since `seen`.
    pub(crate) fn try_upgrade(&self, seen: Seen) -> bool {
        self.try_lock_exclusive(seen)
    }

    /// Ends an exclusive hold; the page stays resident, at the next version. Returns the
    /// word it stored: once stored, another thread may change the word at once, so what the
    /// caller checks is this, never a second load.
    pub(crate) fn unlock_exclusive(&self) -> Seen {
        let now = Seen(self.0.load(Ordering::Relaxed));
        assert_eq!(now.state(), FrameState::Exclusive, "unlock of a frame not held exclusively");
        let stored = now.next(UNLOCKED);
        self.0.store(stored, Ordering::Release);
        Seen(stored)
    }

    /// Ends an exclusive hold with the page gone from its frame, at the next version.
    /// Returns the word it stored (see [`PageWord::unlock_exclusive`]).
    pub(crate) fn unlock_evicted(&self) -> Seen {
        let now = Seen(self.0.load(Ordering::Relaxed));
        assert_eq!(now.state(), FrameState::Exclusive, "eviction of a frame not held exclusively");
        let stored = now.next(EVICTED);
        self.0.store(stored, Ordering::Release);
        Seen(stored)
    }

    /// Adds a shared holder to a resident page, from `seen`.
    pub(crate) fn try_lock_shared(&self, seen: Seen) -> bool {
        let to = match seen.state() {
            FrameState::Unlocked | FrameState::Marked => seen.with(UNLOCKED + 1),
            FrameState::Shared(n) if u64::from(n) < MAX_SHARED => seen.with(seen.state_byte() + 1),
            _ => return false,
        };
        self.swap_from(seen, to, Ordering::Acquire)
    }

    /// Drops a shared holder. The version stays: shared holders change nothing.
    pub(crate) fn unlock_shared(&self) {
        let before = Seen(self.0.fetch_sub(1 << STATE_SHIFT, Ordering::Release));
        assert!(
            matches!(before.state(), FrameState::Shared(n) if n >= 1),
            "shared unlock of a frame in state {:?}",
            before.state()
        );
    }

    /// The clock's first pass: marks an unlocked page. False when it was not unlocked at
    /// `seen` or changed since.
    pub(crate) fn try_mark(&self, seen: Seen) -> bool {
        matches!(seen.state(), FrameState::Unlocked)
            && self.swap_from(seen, seen.with(MARKED), Ordering::Relaxed)
    }

    /// A use clears the clock's mark, so the page survives the clock's next pass.
    #[inline]
    pub(crate) fn touch(&self, seen: Seen) {
        if matches!(seen.state(), FrameState::Marked) {
            // Lost to another toucher, a lock or an eviction: each settles the mark.
            let _ = self.swap_from(seen, seen.with(UNLOCKED), Ordering::Relaxed);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_zero_word_is_an_evicted_page_at_version_zero() {
        let word = PageWord::default();
        let seen = word.load();
        assert_eq!(seen.state(), FrameState::Evicted);
        assert_eq!(seen.version(), 0);
        assert!(!word.try_lock_exclusive(seen), "an evicted page was locked as resident");
        assert!(!word.try_lock_shared(seen));
        assert!(word.try_lock_evicted(seen));
        assert_eq!(word.load().state(), FrameState::Exclusive);
        word.unlock_exclusive();
        let seen = word.load();
        assert_eq!((seen.state(), seen.version()), (FrameState::Unlocked, 1));
    }

    #[test]
    fn every_exclusive_unlock_moves_the_version_and_fails_older_reads() {
        let word = PageWord::default();
        assert!(word.try_lock_evicted(word.load()));
        word.unlock_exclusive();
        let read = word.load();
        assert!(word.validate(read));
        assert!(word.try_lock_exclusive(word.load()));
        assert!(!word.validate(read), "a read validated while a writer held the frame");
        word.unlock_exclusive();
        assert!(!word.validate(read), "a read validated across a write");
        assert_eq!(word.load().version(), read.version() + 1);
        assert!(word.try_lock_exclusive(word.load()));
        word.unlock_evicted();
        let gone = word.load();
        assert_eq!((gone.state(), gone.version()), (FrameState::Evicted, read.version() + 2));
    }

    #[test]
    fn shared_holders_count_keep_the_version_and_keep_writers_out() {
        let word = PageWord::default();
        assert!(word.try_lock_evicted(word.load()));
        word.unlock_exclusive();
        let before = word.load();
        for n in 1..=MAX_SHARED {
            assert!(word.try_lock_shared(word.load()), "shared holder {n} refused");
        }
        assert_eq!(word.load().state(), FrameState::Shared(MAX_SHARED as u32));
        assert!(!word.try_lock_shared(word.load()), "more shared holders than the state holds");
        assert!(!word.try_lock_exclusive(word.load()));
        for _ in 0..MAX_SHARED {
            word.unlock_shared();
        }
        let after = word.load();
        assert_eq!(after, before, "shared holders changed the word");
        assert!(word.validate(before), "shared holders failed an optimistic read");
    }

    #[test]
    fn the_clock_marks_a_use_unmarks_and_a_stale_mark_fails() {
        let word = PageWord::default();
        assert!(word.try_lock_evicted(word.load()));
        word.unlock_exclusive();
        let seen = word.load();
        assert!(word.try_mark(seen));
        assert_eq!(word.load().state(), FrameState::Marked);
        assert!(!word.try_mark(seen), "marked twice from one stale value");
        word.touch(word.load());
        assert_eq!(word.load().state(), FrameState::Unlocked);
        assert!(word.try_mark(word.load()));
        let marked = word.load();
        assert!(word.try_lock_exclusive(marked), "the clock could not evict a marked page");
        word.unlock_evicted();
        assert_eq!(word.load().state(), FrameState::Evicted);
    }
}
