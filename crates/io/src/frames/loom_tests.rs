//! The loom model of the frame word's protocol: run with
//! `RUSTFLAGS="--cfg loom" cargo test -p tierkv-io --release --lib loom`.
//!
//! The frame's bytes are loom atomics (as the real frame's are `AtomicU64` words) or a loom
//! `UnsafeCell` where a lock must make access exclusive; loom explores the interleavings and
//! the weak-memory outcomes of the relaxed accesses.

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::frame_word::{FrameState, PageWord};

/// A resident, unlocked page at version 1.
fn resident() -> PageWord {
    let word = PageWord::new();
    assert!(word.try_lock_evicted(word.load()));
    word.unlock_exclusive();
    word
}

fn lock_exclusive(word: &PageWord) {
    loop {
        if word.try_lock_exclusive(word.load()) {
            return;
        }
        thread::yield_now();
    }
}

#[test]
fn loom_a_validated_optimistic_read_saw_exactly_one_version() {
    optimistic_read_against_one_writer(true);
}

#[test]
#[should_panic(expected = "a validated read saw")]
fn loom_finds_the_torn_read_without_the_release_fence() {
    optimistic_read_against_one_writer(false);
}

fn optimistic_read_against_one_writer(fenced: bool) {
    loom::model(move || {
        let word = Arc::new(resident());
        // The page: two words a writer keeps equal, each the number of writes so far.
        let data = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let writer = {
            let (word, data) = (Arc::clone(&word), Arc::clone(&data));
            thread::spawn(move || {
                if fenced {
                    lock_exclusive(&word);
                } else {
                    while !word.try_lock_exclusive_unfenced(word.load()) {
                        thread::yield_now();
                    }
                }
                data[0].store(1, Ordering::Relaxed);
                data[1].store(1, Ordering::Relaxed);
                word.unlock_exclusive();
            })
        };
        let seen = word.load();
        if seen.state() != FrameState::Exclusive {
            let first = data[0].load(Ordering::Relaxed);
            let second = data[1].load(Ordering::Relaxed);
            if word.validate(seen) {
                assert_eq!(first, second, "a validated read saw half a write");
                // Version 1 is the page before the write, version 2 after it.
                assert_eq!(first, seen.version() - 1, "a validated read saw another version");
            }
        }
        writer.join().expect("writer");
    });
}

#[test]
fn loom_exclusive_holders_exclude_each_other_and_shared_holders() {
    // Each thread tries its lock once (spinning lockers make the model endless): whoever gets
    // one must be alone with the page, which loom checks on the cell.
    loom::model(|| {
        let word = Arc::new(resident());
        let page = Arc::new(UnsafeCell::new(0u64));
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let (word, page) = (Arc::clone(&word), Arc::clone(&page));
                thread::spawn(move || {
                    if !word.try_lock_exclusive(word.load()) {
                        return 0;
                    }
                    // SAFETY: loom checks that no other access overlaps this one.
                    page.with_mut(|value| unsafe { *value += 1 });
                    word.unlock_exclusive();
                    1
                })
            })
            .collect();
        if word.try_lock_shared(word.load()) {
            // SAFETY: loom checks that no write overlaps this read.
            let seen = page.with(|value| unsafe { *value });
            assert!(seen <= 2);
            word.unlock_shared();
        }
        let writes: u64 = writers.into_iter().map(|w| w.join().expect("writer")).sum();
        let end = word.load();
        assert_eq!(end.state(), FrameState::Unlocked);
        assert_eq!(end.version(), 1 + writes, "each exclusive hold moves the version once");
        // SAFETY: every thread has finished.
        assert_eq!(page.with(|value| unsafe { *value }), writes);
    });
}

#[test]
fn loom_the_clock_evicts_only_a_page_nobody_used_after_the_mark() {
    loom::model(|| {
        let word = Arc::new(resident());
        assert!(word.try_mark(word.load()));
        let data = Arc::new(AtomicU64::new(7));
        let evictor = {
            let (word, data) = (Arc::clone(&word), Arc::clone(&data));
            thread::spawn(move || {
                let seen = word.load();
                if seen.state() == FrameState::Marked && word.try_lock_exclusive(seen) {
                    // The memory goes back to the kernel and reads as zero.
                    data.store(0, Ordering::Relaxed);
                    word.unlock_evicted();
                    true
                } else {
                    false
                }
            })
        };
        // A reader uses the page: it touches the mark away, reads, validates.
        let seen = word.load();
        let read = match seen.state() {
            FrameState::Evicted => None,
            FrameState::Exclusive => None,
            _ => {
                word.touch(seen);
                let value = data.load(Ordering::Relaxed);
                word.validate(seen).then_some(value)
            }
        };
        let evicted = evictor.join().expect("evictor");
        if let Some(value) = read {
            assert_eq!(value, 7, "a validated read saw an evicted frame's zeroes");
        }
        let end = word.load();
        if evicted {
            assert_eq!((end.state(), end.version()), (FrameState::Evicted, 2));
        } else {
            assert!(matches!(end.state(), FrameState::Unlocked), "{:?}", end.state());
            assert_eq!(end.version(), 1);
        }
    });
}

#[test]
fn loom_one_loader_fills_an_evicted_frame_and_readers_wait_for_it() {
    loom::model(|| {
        let word = Arc::new(PageWord::new());
        let data = Arc::new(AtomicU64::new(0));
        let loaders: Vec<_> = (0..2)
            .map(|_| {
                let (word, data) = (Arc::clone(&word), Arc::clone(&data));
                thread::spawn(move || {
                    let seen = word.load();
                    if word.try_lock_evicted(seen) {
                        data.store(42, Ordering::Relaxed);
                        word.unlock_exclusive();
                        1
                    } else {
                        0
                    }
                })
            })
            .collect();
        let seen = word.load();
        if matches!(seen.state(), FrameState::Unlocked) {
            let value = data.load(Ordering::Relaxed);
            if word.validate(seen) {
                assert_eq!(value, 42, "a resident page read before its load finished");
            }
        }
        let loads: u32 = loaders.into_iter().map(|l| l.join().expect("loader")).sum();
        assert_eq!(loads, 1, "an evicted page was loaded twice, or never");
        assert_eq!(word.load().version(), 1);
    });
}
