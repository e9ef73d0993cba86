use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::page::Value;

const PAGE: usize = 4096;

/// Pages whose one entry says which page they are, as a store would hold them.
#[derive(Default)]
struct Source {
    reads: AtomicU64,
    /// Pages evicted, with their images' first value byte (the generation).
    evicted: Mutex<Vec<(u64, u8)>>,
    installed: Mutex<Vec<u64>>,
    discarded: Mutex<Vec<u64>>,
    damaged: Mutex<Option<u64>>,
}

fn image_of(pid: u64, generation: u8) -> Vec<u8> {
    let entries = vec![(
        Bytes::from(format!("page{pid:08}")),
        Value::Inline(Bytes::from(vec![generation; 100 + pid as usize % 50])),
    )];
    slotted::encode_leaf(&entries, pid, 0, PAGE)
}

impl PageSource for Source {
    type Error = String;
    fn read_page(&self, pid: u64) -> Result<Vec<u8>, String> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let mut image = image_of(pid, 1);
        if *self.damaged.lock().expect("lock") == Some(pid) {
            image[0] = 9;
        }
        Ok(image)
    }
    fn evicted(&self, pid: u64, image: &[u8]) {
        assert_eq!(slotted::check(image, PAGE), Ok(slotted::Kind::Leaf), "a bad image demoted");
        let slotted::ValueAt::Inline { offset, .. } = Slotted::new(image).value(0).expect("value")
        else {
            panic!("an overflow value in a test page")
        };
        self.evicted.lock().expect("lock").push((pid, image[offset]));
    }
    fn installed(&self, pid: u64, image: &[u8]) {
        assert_eq!(slotted::check(image, PAGE), Ok(slotted::Kind::Leaf), "a bad image installed");
        self.installed.lock().expect("lock").push(pid);
    }
    fn discarded(&self, pid: u64) {
        self.discarded.lock().expect("lock").push(pid);
    }
}

/// Reads page `pid`'s one entry: its key and the value's first byte and length.
fn entry(pool: &BufferPool<Source>, pid: u64) -> (Vec<u8>, u8, usize) {
    pool.read(pid, |page| {
        let mut key = Vec::new();
        page.key_into(0, &mut key)?;
        let slotted::ValueAt::Inline { offset, len } = page.value(0)? else { return None };
        let mut value = Vec::new();
        page.inline_into(offset, len, &mut value)?;
        Some((key, *value.first()?, len))
    })
    .expect("a read")
}

fn frame_cost() -> usize {
    PAGE + CLOCK_ENTRY_BYTES
}

/// The budget of `frames` frames: theirs, and one kernel page of frame words (page ids below
/// 512).
fn frames(frames: usize) -> usize {
    frames * frame_cost() + WORDS + dirty_map()
}

const WORDS: usize = 4096;

/// What an empty dirty map of these tests' pools counts (all under one chunk of ids).
fn dirty_map() -> usize {
    DirtyMap::new(64).bytes()
}

#[test]
fn a_page_loads_once_and_then_reads_in_place() {
    let pool = BufferPool::new(64, PAGE, frames(16), Source::default()).expect("pool");
    assert_eq!(entry(&pool, 7), (b"page00000007".to_vec(), 1, 107));
    assert_eq!(entry(&pool, 7), (b"page00000007".to_vec(), 1, 107));
    let stats = pool.stats();
    assert_eq!((stats.misses, stats.lookups, stats.resident), (1, 2, 1));
    assert_eq!(pool.source().reads.load(Ordering::Relaxed), 1);
    let error = pool.read(64, |_| Some(())).expect_err("past the frames");
    assert!(matches!(error, BufferError::Beyond { pid: 64, pages: 64 }), "{error}");
}

#[test]
fn the_budget_holds_and_evicted_pages_go_to_the_source_as_they_are() {
    let pool = BufferPool::new(64, PAGE, frames(4), Source::default()).expect("pool");
    for pid in 1..=10 {
        assert_eq!(entry(&pool, pid).0, format!("page{pid:08}").into_bytes());
        assert!(pool.stats().resident <= 4, "{:?}", pool.stats());
        assert!(pool.used_bytes() <= frames(4));
    }
    let evicted = pool.source().evicted.lock().expect("lock").clone();
    assert_eq!(evicted.len(), 6);
    assert!(evicted.iter().all(|&(_, generation)| generation == 1), "{evicted:?}");
    // Read again, an evicted page loads again.
    let (pid, _) = evicted[0];
    let reads = pool.source().reads.load(Ordering::Relaxed);
    entry(&pool, pid);
    assert_eq!(pool.source().reads.load(Ordering::Relaxed), reads + 1);
}

#[test]
fn a_page_used_again_outlives_a_scan_of_pages_read_once() {
    let pool = BufferPool::new(256, PAGE, frames(8), Source::default()).expect("pool");
    entry(&pool, 1);
    for pid in 10..200 {
        entry(&pool, 1); // the hot page, used between every two scan reads
        entry(&pool, pid);
    }
    let reads = pool.source().reads.load(Ordering::Relaxed);
    assert_eq!(reads, 1 + 190, "the hot page was evicted by the scan");
}

#[test]
fn installs_replace_a_page_and_discards_drop_it() {
    let pool = BufferPool::new(64, PAGE, frames(8), Source::default()).expect("pool");
    assert_eq!(entry(&pool, 3).1, 1);
    pool.install(3, &image_of(3, 2)).expect("install over a resident page");
    assert_eq!(entry(&pool, 3).1, 2);
    pool.install(5, &image_of(5, 3)).expect("install of a page not resident");
    assert_eq!(entry(&pool, 5).1, 3);
    assert_eq!(pool.source().reads.load(Ordering::Relaxed), 1, "an installed page was read");
    pool.discard(5);
    assert!(pool.source().evicted.lock().expect("lock").is_empty(), "a discard demoted");
    assert_eq!(*pool.source().installed.lock().expect("lock"), vec![3, 5]);
    assert_eq!(*pool.source().discarded.lock().expect("lock"), vec![5]);
    assert_eq!(pool.stats().kept, 1, "the discarded page's frame was not kept");
    assert_eq!(entry(&pool, 5).1, 1, "a discarded page is read from the source again");
    assert_eq!((pool.stats().kept, pool.stats().resident), (0, 2));
    pool.discard(6);
    assert_eq!(*pool.source().discarded.lock().expect("lock"), vec![5, 6], "not resident");
    assert_eq!(pool.stats().installs, 2);
    assert_eq!(pool.stats().kept, 0, "a page not resident left a frame kept");
}

/// Discarded pages' frames stay counted while kept; a new page at a kept id fills it; when
/// room is needed the kept frames go before any resident page, highest ids first.
#[test]
fn kept_frames_are_counted_reused_by_their_id_and_given_back_before_any_page() {
    let pool = BufferPool::new(64, PAGE, frames(6), Source::default()).expect("pool");
    for pid in 1..=6 {
        pool.install(pid, &image_of(pid, 2)).expect("install");
    }
    let full = pool.used_bytes();
    for pid in [4, 5, 6] {
        pool.discard(pid);
    }
    assert_eq!((pool.stats().resident, pool.stats().kept), (3, 3));
    assert_eq!(pool.used_bytes(), full, "kept frames left the count");
    pool.install(4, &image_of(4, 3)).expect("install at a kept id");
    assert_eq!((pool.stats().resident, pool.stats().kept), (4, 2));
    assert_eq!(pool.used_bytes(), full);
    assert_eq!(entry(&pool, 4).1, 3);
    // Two new ids need two frames: the kept ones (6, then 5) go, no resident page does.
    pool.install(10, &image_of(10, 4)).expect("install");
    pool.install(11, &image_of(11, 4)).expect("install");
    assert_eq!((pool.stats().resident, pool.stats().kept, pool.stats().evictions), (6, 0, 0));
    assert!(pool.used_bytes() <= frames(6) + PAGE, "{} over {}", pool.used_bytes(), frames(6));
    for pid in [1, 2, 3, 4, 10, 11] {
        assert_eq!(entry(&pool, pid).0, format!("page{pid:08}").into_bytes());
    }
    assert_eq!(pool.source().reads.load(Ordering::Relaxed), 0, "a page was read back");
    // A smaller budget gives kept frames back too.
    pool.discard(11);
    pool.set_budget(frames(5));
    assert_eq!((pool.stats().resident, pool.stats().kept, pool.stats().evictions), (5, 0, 0));
}

#[test]
fn a_damaged_page_is_an_error_and_never_resident() {
    let pool = BufferPool::new(64, PAGE, frames(8), Source::default()).expect("pool");
    *pool.source().damaged.lock().expect("lock") = Some(4);
    let error = pool.read(4, |_| Some(())).expect_err("a damaged page");
    assert!(matches!(error, BufferError::Corrupt { pid: 4, .. }), "{error}");
    assert_eq!(pool.stats().resident, 0);
    *pool.source().damaged.lock().expect("lock") = None;
    assert_eq!(entry(&pool, 4).1, 1);
}

#[test]
fn readers_under_constant_eviction_and_installs_always_see_whole_pages() {
    let pool = Arc::new(BufferPool::new(64, PAGE, frames(6), Source::default()).expect("pool"));
    let threads: Vec<_> = (0..3u64)
        .map(|seed| {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || {
                let mut rng = fastrand::Rng::with_seed(seed);
                for _ in 0..3000 {
                    let pid = rng.u64(1..40);
                    if seed == 0 && rng.u8(0..10) == 0 {
                        // Installed pages hold generation 2: the same key and length.
                        pool.install(pid, &image_of(pid, 2)).expect("install");
                        continue;
                    }
                    let (key, generation, len) = entry(&pool, pid);
                    assert_eq!(key, format!("page{pid:08}").into_bytes());
                    assert!(generation == 1 || generation == 2, "generation {generation}");
                    assert_eq!(len, 100 + pid as usize % 50);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("reader");
    }
    let stats = pool.stats();
    assert!(stats.evictions > 0 && stats.resident <= 6, "{stats:?}");
}

#[test]
fn a_smaller_budget_or_more_reserved_bytes_evict_at_once() {
    let pool = BufferPool::new(64, PAGE, frames(10), Source::default()).expect("pool");
    assert_eq!(pool.page_bytes(), PAGE);
    for pid in 1..=8 {
        entry(&pool, pid);
    }
    assert_eq!(pool.stats().resident, 8);
    // The room for pages is the budget less the words, the dirty map and what is reserved,
    // whatever the pages resident take of it.
    assert_eq!(pool.room_for_pages(), 10 * frame_cost());
    pool.set_budget(frames(5));
    assert_eq!(pool.stats().resident, 5);
    assert_eq!(pool.room_for_pages(), 5 * frame_cost());
    pool.reserve(2 * frame_cost());
    assert_eq!(pool.stats().resident, 3);
    assert_eq!(pool.room_for_pages(), 3 * frame_cost());
    assert!(pool.used_bytes() <= frames(5));
    pool.reserve(8 * frame_cost());
    let stats = pool.stats();
    assert_eq!(stats.resident, 0);
    assert!(stats.over_budget > 0, "a budget nothing fits in went uncounted");
    assert_eq!(pool.room_for_pages(), 0, "more reserved than the budget leaves no room");
    pool.unreserve(10 * frame_cost());
    assert_eq!(pool.used_bytes(), WORDS + dirty_map(), "the words are all that is left");
    entry(&pool, 1);
    assert_eq!(pool.stats().resident, 1, "room given back is used again");
}

/// The lowest page ids go on huge pages while the store fits in half the budget: each huge
/// page counts whole from its first frame on, its frames never leave for room (nor give
/// memory back when discarded), and once a page lies past the range it grows no more, and
/// the budget holds with the other pages evicted around it.
#[test]
fn the_lowest_ids_go_on_huge_pages_counted_whole_and_never_evicted_for_room() {
    let per_huge = (HUGE_BYTES / PAGE) as u64;
    // Half of it holds one huge page, not two.
    let budget = 3 * HUGE_BYTES;
    let pool = BufferPool::new(4 * per_huge, PAGE, budget, Source::default()).expect("pool");
    for pid in 0..300 {
        pool.install(pid, &image_of(pid, 2)).expect("install");
    }
    let stats = pool.stats();
    assert_eq!((stats.huge_pages, stats.resident, stats.kept), (1, 300, 0));
    let words = (300 * 8usize).next_multiple_of(4096);
    assert_eq!(pool.used_bytes(), HUGE_BYTES + 300 * CLOCK_ENTRY_BYTES + words + dirty_map());
    // A discarded page's memory stays with its huge page: nothing kept, nothing counted twice.
    pool.discard(10);
    assert_eq!((pool.stats().resident, pool.stats().kept), (299, 0));
    assert_eq!(pool.used_bytes(), HUGE_BYTES + 299 * CLOCK_ENTRY_BYTES + words + dirty_map());
    // Past the range (a second huge page would pass half the budget): frames of their own.
    for pid in per_huge..per_huge + 40 {
        pool.install(pid, &image_of(pid, 3)).expect("install");
    }
    assert_eq!(pool.stats().huge_pages, 1, "the range grew past half the budget");
    // A page of the range, never touched before, still counts nothing more than its record.
    let before = pool.used_bytes();
    pool.install(400, &image_of(400, 2)).expect("install");
    assert_eq!(pool.used_bytes(), before + CLOCK_ENTRY_BYTES);
    // Less budget: only pages off the huge page leave, and the budget holds.
    pool.set_budget(HUGE_BYTES + 400 * CLOCK_ENTRY_BYTES + 12 * PAGE);
    let stats = pool.stats();
    assert!(stats.evictions > 0 && stats.over_budget == 0, "{stats:?}");
    assert!(pool.used_bytes() <= pool.budget(), "{} over {}", pool.used_bytes(), pool.budget());
    let evicted = pool.source().evicted.lock().expect("lock").clone();
    assert!(
        evicted.iter().all(|&(pid, _)| pid >= per_huge),
        "a huge page's frame left: {evicted:?}"
    );
    for pid in (0..300).filter(|&pid| pid != 10) {
        assert_eq!(entry(&pool, pid).1, 2);
    }
    assert_eq!(pool.source().reads.load(Ordering::Relaxed), 0, "a page on the huge page was read");
    // Room for more than the huge page holds: over the budget, counted, never a huge frame.
    pool.set_budget(HUGE_BYTES / 2);
    assert!(pool.stats().over_budget > 0);
    assert_eq!(pool.stats().resident, 300, "a page on the huge page left");
}

/// A store larger than half the budget never gets huge pages: its first page already lies
/// past what the range may grow to.
#[test]
fn no_huge_pages_when_the_first_page_lies_past_half_the_budget() {
    let per_huge = (HUGE_BYTES / PAGE) as u64;
    let pool = BufferPool::new(8 * per_huge, PAGE, frames(64), Source::default()).expect("pool");
    entry(&pool, 5 * per_huge);
    entry(&pool, 1);
    let stats = pool.stats();
    assert_eq!((stats.huge_pages, stats.resident), (0, 2));
    assert_eq!(
        pool.used_bytes(),
        2 * frame_cost() + (5 * per_huge as usize * 8 + 8).next_multiple_of(4096) + dirty_map()
    );
}

/// Frames faulted in ahead of the next page id (`populate_ahead`) cost nothing in the
/// budget until a page fills them, go on huge pages where the huge range may grow over
/// them (and never close it), and take pages like any other frame.
#[test]
fn frames_populated_ahead_count_nothing_until_filled_and_keep_the_huge_range_open() {
    let per_huge = (HUGE_BYTES / PAGE) as u64;
    let pool =
        BufferPool::new(16 * per_huge, PAGE, 16 * HUGE_BYTES, Source::default()).expect("pool");
    for pid in 0..10 {
        pool.install(pid, &image_of(pid, 2)).expect("install");
    }
    let used = pool.used_bytes();
    assert_eq!(pool.stats().huge_pages, 1);
    pool.populate_ahead(10, By::Writer);
    assert_eq!(pool.populated.load(Ordering::Relaxed), 3 * per_huge);
    assert_eq!(pool.clock().huge_pids, 3 * per_huge, "advised before the first touch");
    assert_eq!((pool.used_bytes(), pool.stats().huge_pages), (used, 1), "counted unfilled");
    // Far enough ahead: nothing more.
    pool.populate_ahead(per_huge, By::Writer);
    assert_eq!(pool.populated.load(Ordering::Relaxed), 3 * per_huge);
    for pid in 10..3 * per_huge {
        pool.install(pid, &image_of(pid, 3)).expect("install");
    }
    assert_eq!(pool.stats().huge_pages, 3);
    assert_eq!(entry(&pool, 10).1, 3);
    assert_eq!(entry(&pool, 3 * per_huge - 1).1, 3);
    pool.populate_ahead(3 * per_huge, By::Writer);
    assert_eq!(pool.populated.load(Ordering::Relaxed), 5 * per_huge);

    // Where the huge range may not grow (past half the budget), it is left open and
    // nothing is faulted in ahead: those frames are marked done, to fault at their first
    // use. A page installed there closes it as before.
    let pool =
        BufferPool::new(8 * per_huge, PAGE, 3 * HUGE_BYTES, Source::default()).expect("pool");
    pool.install(0, &image_of(0, 2)).expect("install");
    assert_eq!(pool.populate_due(1), Ahead::Now);
    pool.populate_ahead(1, By::Writer);
    assert_eq!(pool.populated.load(Ordering::Relaxed), 3 * per_huge, "done, not faulted in");
    assert_eq!(pool.populate_due(1), Ahead::Enough);
    let clock = pool.clock();
    assert_eq!((clock.huge_pids, clock.huge_closed), (per_huge, false));
    drop(clock);
    assert_eq!(pool.stats().huge_pages, 1);
    pool.install(per_huge + 1, &image_of(per_huge + 1, 2)).expect("install");
    assert!(pool.clock().huge_closed);
    // Closed, the frames ahead are faulted in on pages of their own.
    assert_eq!(pool.populate_due(2 * per_huge + 2), Ahead::Soon);
    pool.populate_ahead(2 * per_huge + 2, By::Writer);
    assert_eq!(pool.populated.load(Ordering::Relaxed), 5 * per_huge);
    assert_eq!(pool.clock().huge_pids, per_huge);
    assert_eq!(pool.stats().huge_pages, 1);
    // Past the reservation's end there is nothing to fault in, ever: no one is asked again.
    pool.populate_ahead(8 * per_huge, By::Writer);
    assert_eq!(pool.populated.load(Ordering::Relaxed), u64::MAX);
    assert_eq!(pool.populate_due(8 * per_huge), Ahead::Enough);
}

/// `populate_due` says, from the one word, whether the frames ahead of the next page id
/// need nothing, work for the populator thread, or work for the writer before it latches.
#[test]
fn populate_due_asks_the_thread_early_and_the_writer_only_when_almost_none_are_left() {
    let per_huge = (HUGE_BYTES / PAGE) as u64;
    let pool =
        BufferPool::new(16 * per_huge, PAGE, 16 * HUGE_BYTES, Source::default()).expect("pool");
    assert_eq!(pool.populate_due(0), Ahead::Now, "nothing faulted in yet");
    pool.populate_ahead(0, By::Writer);
    let populated = pool.populated.load(Ordering::Relaxed);
    assert_eq!(populated, 2 * per_huge);
    assert_eq!(pool.populate_due(populated - per_huge), Ahead::Enough);
    assert_eq!(pool.populate_due(populated - per_huge + 1), Ahead::Soon);
    assert_eq!(pool.populate_due(populated - URGENT_LEAD), Ahead::Soon);
    assert_eq!(pool.populate_due(populated - URGENT_LEAD + 1), Ahead::Now);
    assert_eq!(pool.populate_due(populated + 5), Ahead::Now);
}

/// Writers fault frames in ahead one at a time, the others going on; the populator thread
/// does it beside them, so a writer holding the lock never keeps it waiting, nor it them.
#[test]
fn the_populator_thread_faults_frames_in_while_a_writer_holds_the_writers_lock() {
    let per_huge = (HUGE_BYTES / PAGE) as u64;
    let pool =
        BufferPool::new(16 * per_huge, PAGE, 16 * HUGE_BYTES, Source::default()).expect("pool");
    let writer = pool.populating.lock().expect("the writers' lock");
    pool.populate_ahead(0, By::Writer);
    assert_eq!(pool.populated.load(Ordering::Relaxed), 0, "another writer is at it");
    pool.populate_ahead(0, By::Thread);
    assert_eq!(pool.populated.load(Ordering::Relaxed), 2 * per_huge);
    drop(writer);
    // A writer that ends after the thread never lowers the mark.
    pool.populated.store(5 * per_huge, Ordering::Relaxed);
    pool.populate_ahead(4 * per_huge + 1, By::Writer);
    assert_eq!(pool.populated.load(Ordering::Relaxed), 7 * per_huge);
    assert_eq!(pool.populate_due(4 * per_huge + 1), Ahead::Enough);
}
