use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::*;

const PAGE: usize = 4096;

fn load_with(frames: &Frames, pid: u64, fill: u64) -> Exclusive<'_> {
    let mut loading = frames.try_load(pid).expect("in range").expect("evicted");
    let image: Vec<u8> = (0..PAGE / 8).flat_map(|_| fill.to_le_bytes()).collect();
    loading.write().put_all(&image);
    assert_eq!(&loading.bytes()[..8], &fill.to_le_bytes());
    loading.finish()
}

#[test]
fn reservations_refuse_sizes_that_cannot_work() {
    for (pages, page_bytes) in [(1, 1000), (1, 2048), (1, 2 << 20), (0, PAGE), (1 << 40, PAGE)] {
        let error = Frames::reserve(pages, page_bytes).expect_err("a bad reservation");
        assert!(matches!(error, Error::InvalidOptions { .. }), "{pages} × {page_bytes}: {error}");
    }
    let frames = Frames::reserve(1 << 20, PAGE).expect("4 GiB of address space");
    assert_eq!((frames.pages(), frames.page_bytes()), (1 << 20, PAGE));
    assert!(frames.reserved_bytes() >= 4 << 30);
}

#[test]
fn a_page_loads_reads_changes_and_leaves_its_frame() {
    let frames = Frames::reserve(64, PAGE).expect("reserve");
    assert_eq!(frames.state(3), Ok(FrameState::Evicted));
    assert_eq!(frames.optimistic(3).err(), Some(FrameError::Evicted));
    assert_eq!(frames.optimistic(64).err(), Some(FrameError::Beyond { pid: 64, pages: 64 }));
    assert_eq!(frames.state(u64::MAX).err(), Some(FrameError::Beyond { pid: u64::MAX, pages: 64 }));
    assert!(frames.try_lock_marked(64).is_none());

    drop(load_with(&frames, 3, 0xAB));
    assert_eq!(frames.state(3), Ok(FrameState::Unlocked));
    assert!(frames.try_load(3).expect("in range").is_none(), "a resident page loaded again");
    let read = frames.optimistic(3).expect("resident");
    assert_eq!(read.read().u64(PAGE - 8), Some(0xAB));
    assert_eq!(read.validate(), Ok(()));

    let mut writer = frames.lock_exclusive(3).expect("resident");
    assert_eq!(read.validate(), Err(Restart), "validated while a writer held the page");
    writer.write().put_u64(16, 99);
    drop(writer);
    assert_eq!(read.validate(), Err(Restart), "validated across a write");
    let again = frames.optimistic(3).expect("resident");
    assert_eq!(again.read().u64(16), Some(99));
    let mut upgraded = again.upgrade().expect("nothing changed");
    upgraded.write().put_u64(24, 7);
    drop(upgraded);

    {
        let shared = frames.lock_shared(3).expect("resident");
        assert_eq!(&shared.bytes()[24..32], &7u64.to_le_bytes());
        let during = frames.optimistic(3).expect("shared holders let readers in");
        assert_eq!(during.validate(), Ok(()));
    }

    let version = frames.version(3).expect("in range");
    assert_eq!(frames.mark(3), Ok(true));
    let _ = frames.optimistic(3).expect("resident"); // a use takes the mark away
    assert!(frames.try_lock_marked(3).is_none(), "evicted a page used after its mark");
    assert_eq!(frames.mark(3), Ok(true));
    frames.try_lock_marked(3).expect("still marked").evict();
    assert_eq!(frames.state(3), Ok(FrameState::Evicted));
    assert_eq!(frames.version(3), Ok(version + 1));

    // A failed load leaves the page evicted, and its frame reads as zero next time.
    let mut loading = frames.try_load(3).expect("in range").expect("evicted");
    loading.write().put_u64(0, 5);
    drop(loading);
    assert_eq!(frames.state(3), Ok(FrameState::Evicted));
    let loading = frames.try_load(3).expect("in range").expect("evicted");
    assert!(loading.bytes().iter().all(|&b| b == 0), "an evicted frame kept its bytes");
    drop(loading);

    // A prefetch is a hint: of an evicted page, a resident one or an id past the
    // reservation, it changes nothing.
    let states = |frames: &Frames| (0..64).map(|pid| frames.state(pid)).collect::<Vec<_>>();
    drop(load_with(&frames, 5, 0xCD));
    let before = (states(&frames), frames.version(5));
    for pid in [3, 5, 63, 64, u64::MAX] {
        frames.prefetch(pid);
        for lines in [0, 1, 4, usize::MAX] {
            frames.prefetch_head(pid, lines);
        }
    }
    let resident = frames.optimistic(5).expect("resident");
    for (from, to) in [(0, 0), (0, 1), (60, 200), (100, usize::MAX), (usize::MAX - 1, usize::MAX)] {
        resident.read().prefetch(from, to);
    }
    assert_eq!((states(&frames), frames.version(5)), before);
    assert_eq!(frames.optimistic(5).expect("resident").read().u64(8), Some(0xCD));
}

/// A page evicted keeping its memory is evicted to readers, and its frame still holds the
/// old bytes for the next load; released, it reads as zero; a release of a frame that is
/// resident or being loaded does nothing.
#[test]
fn an_eviction_that_keeps_the_memory_is_an_eviction_to_readers_and_reused_by_the_next_load() {
    let frames = Frames::reserve(64, PAGE).expect("reserve");
    drop(load_with(&frames, 7, 0x11));
    let read = frames.optimistic(7).expect("resident");
    let version = frames.version(7).expect("in range");
    frames.lock_exclusive(7).expect("resident").evict_keeping();
    assert_eq!(frames.state(7), Ok(FrameState::Evicted));
    assert_eq!(frames.version(7), Ok(version + 1));
    assert_eq!(read.validate(), Err(Restart), "validated across an eviction");
    assert_eq!(frames.optimistic(7).err(), Some(FrameError::Evicted));

    let loading = frames.try_load(7).expect("in range").expect("evicted");
    assert_eq!(&loading.bytes()[..8], &0x11u64.to_le_bytes(), "the kept frame was zeroed");
    assert!(!frames.release_kept(7), "released a frame being loaded");
    let exclusive = loading.finish();
    assert!(!frames.release_kept(7), "released a resident frame");
    exclusive.evict_keeping();

    assert!(frames.release_kept(7));
    assert_eq!(frames.state(7), Ok(FrameState::Evicted));
    let loading = frames.try_load(7).expect("in range").expect("evicted");
    assert!(loading.bytes().iter().all(|&b| b == 0), "a released frame kept its bytes");
    drop(loading);
    assert!(!frames.release_kept(64), "an id past the reservation");
}

/// The frames of ids given huge pages start on a huge page's boundary and never give
/// their memory back (an eviction, a release, a failed load keep the bytes: giving back part
/// of a huge page would split it); the others still do. A range of broken huge pages is
/// refused.
#[test]
fn frames_on_huge_pages_keep_their_memory_and_the_others_do_not() {
    let per_huge = (HUGE_BYTES / PAGE) as u64;
    let frames = Frames::reserve(3 * per_huge, PAGE).expect("reserve");
    assert_eq!(frames.base.as_ptr() as usize % HUGE_BYTES, 0, "an unaligned reservation");
    assert!(frames.advise_huge(per_huge + 1).is_err(), "a broken huge page");
    assert!(frames.advise_huge(4 * per_huge).is_err(), "past the reservation");
    assert_eq!(frames.huge_pages(), 0);
    frames.advise_huge(0).expect("none");
    frames.advise_huge(per_huge).expect("one huge page");
    assert_eq!(frames.huge_pages(), per_huge);
    assert!(frames.advise_huge(0).is_err(), "a range that shrinks");
    let (inside, outside) = (per_huge - 1, per_huge);
    for pid in [inside, outside] {
        drop(load_with(&frames, pid, 0x22));
        frames.lock_exclusive(pid).expect("resident").evict();
        assert_eq!(frames.state(pid), Ok(FrameState::Evicted));
        let loading = frames.try_load(pid).expect("in range").expect("evicted");
        let kept = loading.bytes()[..8] == 0x22u64.to_le_bytes();
        assert_eq!(kept, pid == inside, "page {pid}: kept {kept}");
        drop(loading);
        assert!(frames.release_kept(pid));
        let loading = frames.try_load(pid).expect("in range").expect("evicted");
        assert_eq!(loading.bytes()[..8] == 0x22u64.to_le_bytes(), pid == inside, "page {pid}");
    }
}

/// Writers keep every word of a page equal to one counter; loaders fill pages the same way;
/// the clock evicts; readers check that every validated read saw one counter throughout.
#[test]
fn validated_reads_never_see_a_torn_page_under_writers_loaders_and_eviction() {
    const PAGES: u64 = 8;
    const READS: u64 = 20_000;
    let frames = Arc::new(Frames::reserve(PAGES, PAGE).expect("reserve"));
    for pid in 0..PAGES {
        drop(load_with(&frames, pid, 1));
    }
    let stamp = Arc::new(AtomicU64::new(1));
    let stop = Arc::new(AtomicBool::new(false));
    let fill = |frames: &Frames, pid: u64, stamp: &AtomicU64| {
        let value = stamp.fetch_add(1, Ordering::Relaxed);
        if let Ok(Some(loading)) = frames.try_load(pid) {
            let mut loading = loading;
            let image: Vec<u8> = (0..PAGE / 8).flat_map(|_| value.to_le_bytes()).collect();
            loading.write().put_all(&image);
            drop(loading.finish());
        }
    };
    let mut threads = Vec::new();
    for seed in 0..2u64 {
        let (frames, stamp, stop) = (Arc::clone(&frames), Arc::clone(&stamp), Arc::clone(&stop));
        threads.push(std::thread::spawn(move || {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut changes = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let pid = rng.u64(0..PAGES);
                match rng.u8(0..4) {
                    0 => fill(&frames, pid, &stamp),
                    1 => {
                        if frames.mark(pid) == Ok(true) {
                            if let Some(victim) = frames.try_lock_marked(pid) {
                                victim.evict();
                            }
                        }
                    }
                    _ => {
                        if let Ok(mut writer) = frames.lock_exclusive(pid) {
                            let value = stamp.fetch_add(1, Ordering::Relaxed);
                            let mut write = writer.write();
                            for word in 0..PAGE / 8 {
                                write.put_u64(word * 8, value);
                            }
                            changes += 1;
                        }
                    }
                }
            }
            changes
        }));
    }
    let mut rng = fastrand::Rng::with_seed(99);
    let (mut validated, mut restarts) = (0u64, 0u64);
    for _ in 0..READS * 100 {
        if validated >= READS {
            break;
        }
        let pid = rng.u64(0..PAGES);
        let Ok(read) = frames.optimistic(pid) else { continue };
        let view = read.read();
        let first = view.u64(0).expect("in the frame");
        let torn = (1..PAGE / 8).any(|word| view.u64(word * 8) != Some(first));
        match read.validate() {
            Ok(()) => {
                assert!(!torn, "a validated read of page {pid} saw two versions");
                assert_ne!(first, 0, "a validated read saw an evicted frame");
                validated += 1;
            }
            Err(Restart) => restarts += 1,
        }
    }
    // The workers run a while whatever share of the cores they got (on CI's two, shared
    // with other tests, the reads could end before a worker ran).
    while stamp.load(Ordering::Relaxed) < 1_000 {
        std::thread::yield_now();
    }
    stop.store(true, Ordering::Relaxed);
    let changes: u64 = threads.into_iter().map(|t| t.join().expect("worker")).sum();
    assert_eq!(validated, READS, "too few reads validated ({restarts} restarts)");
    assert!(changes > 0, "the writers changed nothing");
}

/// How many of the frames `from..to` have memory under them (`mincore`).
fn backed(frames: &Frames, from: u64, to: u64) -> usize {
    let len = (to - from) as usize * frames.page_bytes;
    let mut residency = vec![0u8; len.div_ceil(PAGE)];
    // SAFETY: a range inside the reservation, only passed to mincore, never dereferenced.
    let base = unsafe { frames.base.as_ptr().add(from as usize * frames.page_bytes) };
    // SAFETY: `residency` has one byte per 4 KiB page of the range.
    let rc = unsafe { libc::mincore(base.cast(), len, residency.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore");
    let per_frame = frames.page_bytes / PAGE;
    residency.chunks(per_frame).filter(|pages| pages.iter().all(|p| p & 1 == 1)).count()
}

#[test]
fn populate_backs_frames_ahead_without_changing_a_byte_or_a_state() {
    let frames = Frames::reserve(64, PAGE).expect("reserve");
    drop(load_with(&frames, 3, 0xAB));
    assert_eq!(backed(&frames, 2, 20), 1, "only the loaded frame has memory");
    assert!(frames.populate(2, 20));
    assert_eq!(backed(&frames, 2, 20), 18);
    assert_eq!(backed(&frames, 20, 64), 0, "nothing past the range");
    // The loaded frame keeps its bytes and its state; the others stay evicted.
    assert_eq!(frames.state(3), Ok(FrameState::Unlocked));
    let read = frames.optimistic(3).expect("resident");
    assert_eq!(read.read().u64(0), Some(0xAB));
    assert_eq!(read.read().u64(PAGE - 8), Some(0xAB));
    assert_eq!(frames.state(10), Ok(FrameState::Evicted));
    // A frame populated ahead loads like any other, and reads what was loaded.
    drop(load_with(&frames, 10, 0xCD));
    assert_eq!(frames.optimistic(10).expect("resident").read().u64(8), Some(0xCD));
    // Ranges are cut to the reservation; an empty one does nothing.
    assert!(frames.populate(60, 1 << 40));
    assert_eq!(backed(&frames, 60, 64), 4);
    assert!(frames.populate(30, 30));
    assert_eq!(backed(&frames, 30, 31), 0);
}
