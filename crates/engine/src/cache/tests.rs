use std::sync::atomic::AtomicBool;

use proptest::prelude::*;

use super::*;

struct TestPage {
    weight: usize,
    dirty: AtomicBool,
}

impl TestPage {
    fn new(weight: usize) -> Arc<TestPage> {
        Arc::new(TestPage { weight, dirty: AtomicBool::new(false) })
    }
}

impl Cached for TestPage {
    fn weight(&self) -> usize {
        self.weight
    }
    fn evictable(&self) -> bool {
        !self.dirty.load(Ordering::Relaxed)
    }
}

/// Bytes of the cached pages counted from scratch, to check the running figure against.
fn counted(cache: &PageCache<TestPage>) -> usize {
    cache.shards.iter().map(|shard| lock(shard).map.values().map(|e| e.weight).sum::<usize>()).sum()
}

#[test]
fn the_budget_holds_when_pages_can_leave() {
    let cache = PageCache::new(10_000, 4);
    for id in 0..1_000 {
        cache.insert(id, TestPage::new(100));
        assert!(cache.used_bytes() <= 10_000, "over budget after {id}");
    }
    assert!(cache.len() <= 100 && cache.len() >= 80, "{} pages cached", cache.len());
    assert_eq!(cache.stats().over_budget, 0);
    assert_eq!(cache.stats().evictions as usize, 1_000 - cache.len());
}

/// A smaller budget evicts at once, down to it, handing every evicted page to the hook; a
/// larger one lets the cache grow again. Pages taken out with `remove` are not evicted.
#[test]
fn a_new_budget_evicts_at_once_and_the_hook_sees_each_evicted_page() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook_seen = Arc::clone(&seen);
    let cache = PageCache::new(20_000, 2).with_eviction_hook(Box::new(move |id, page| {
        let page: &TestPage = page;
        lock(&hook_seen).push((id, page.weight));
    }));
    for id in 0..100 {
        cache.insert(id, TestPage::new(100));
    }
    assert_eq!((cache.len(), cache.budget()), (100, 20_000));
    assert!(cache.remove(0).is_some());
    assert!(lock(&seen).is_empty(), "a removal is not an eviction");
    cache.set_budget(4_000);
    assert_eq!(cache.budget(), 4_000);
    assert!(cache.used_bytes() <= 4_000 && cache.used_bytes() == counted(&cache));
    let evicted = lock(&seen).clone();
    assert_eq!(evicted.len(), 99 - cache.len());
    assert_eq!(cache.stats().evictions as usize, evicted.len());
    assert!(evicted.iter().all(|&(id, weight)| id != 0 && weight == 100), "{evicted:?}");
    cache.set_budget(10_000);
    for id in 100..200 {
        cache.insert(id, TestPage::new(100));
    }
    assert!(cache.len() > 80, "{} pages after the budget grew back", cache.len());
}

#[test]
fn a_scan_does_not_flush_the_pages_read_again() {
    // One shard with room for 100 pages. 30 hot pages are read in turn, one per round, while
    // a scan reads 3 pages per round that it never reads again: 120 pages come in between
    // two reads of a hot page. Under plain FIFO it would be gone before its turn came again
    // (every read a miss); here, once the hot pages have come back from the ghost queue,
    // every read hits.
    let cache = PageCache::new(100 * 100, 1);
    let (mut hot_reads, mut hot_misses) = (0u64, 0u64);
    for round in 0..6_000u64 {
        let hot = round % 30;
        let warm = round >= 600;
        if cache.get(hot).is_none() {
            hot_misses += u64::from(warm);
            cache.insert(hot, TestPage::new(100));
        }
        hot_reads += u64::from(warm);
        for i in 0..3 {
            let cold = 1_000 + 3 * round + i;
            assert!(cache.get(cold).is_none());
            cache.insert(cold, TestPage::new(100));
        }
    }
    assert_eq!(hot_misses, 0, "{hot_misses} of {hot_reads} hot reads missed during the scan");
    assert!(cache.len() <= 100);
}

#[test]
fn pages_in_use_or_dirty_never_leave_and_the_shortfall_is_counted() {
    let cache = PageCache::new(1_000, 1);
    let held: Vec<Arc<TestPage>> = (0..5).map(|id| cache.insert(id, TestPage::new(100))).collect();
    let dirty = cache.insert(5, TestPage::new(100));
    dirty.dirty.store(true, Ordering::Relaxed);
    drop(dirty);
    for id in 6..200 {
        cache.insert(id, TestPage::new(100));
    }
    for id in 0..6 {
        assert!(cache.get(id).is_some(), "page {id} left while held or dirty");
    }
    // Ten pages of room, six of them unmovable: the others come and go.
    assert!(cache.used_bytes() <= 1_000);
    // Fill the rest with held pages too: now nothing can leave, and the cache says so.
    let more: Vec<Arc<TestPage>> =
        (1_000..1_010).map(|id| cache.insert(id, TestPage::new(100))).collect();
    assert!(cache.used_bytes() > 1_000);
    assert!(cache.stats().over_budget > 0);
    drop((held, more));
    cache.insert(2_000, TestPage::new(100));
    assert!(cache.used_bytes() <= 1_000, "released pages left once they could");
}

#[test]
fn the_first_insert_wins_a_race() {
    let cache = PageCache::new(1_000, 1);
    let first = cache.insert(7, TestPage::new(10));
    let second = cache.insert(7, TestPage::new(20));
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!(cache.used_bytes(), 10);
}

#[test]
fn removed_pages_leave_no_trace_in_the_queues() {
    let cache = PageCache::new(1 << 30, 1);
    for round in 0..10_000u64 {
        cache.insert(round, TestPage::new(1));
        cache.remove(round);
    }
    let shard = lock(&cache.shards[0]);
    assert!(shard.small.len() + shard.main.len() <= 64 + 2, "stale ids pile up");
    assert_eq!(shard.used, 0);
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u64, usize),
    Get(u64),
    Remove(u64),
    Reweigh(u64, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u64..64, 1usize..300).prop_map(|(id, w)| Op::Insert(id, w)),
        (0u64..64).prop_map(Op::Get),
        (0u64..64).prop_map(Op::Remove),
        (0u64..64, 1usize..300).prop_map(|(id, w)| Op::Reweigh(id, w)),
    ]
}

/// A page whose weight can change in place, for `reweigh`.
struct Growing(std::sync::atomic::AtomicUsize);

impl Cached for Growing {
    fn weight(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

proptest! {
    #[test]
    fn the_byte_count_is_always_the_sum_of_the_cached_pages(ops in prop::collection::vec(op(), 1..300)) {
        let cache: PageCache<Growing> = PageCache::new(4_000, 2);
        for op in ops {
            match op {
                Op::Insert(id, weight) => {
                    cache.insert(id, Arc::new(Growing(weight.into())));
                }
                Op::Get(id) => {
                    cache.get(id);
                }
                Op::Remove(id) => {
                    cache.remove(id);
                }
                Op::Reweigh(id, weight) => {
                    if let Some(page) = cache.get(id) {
                        page.0.store(weight, Ordering::Relaxed);
                        drop(page);
                        cache.reweigh(id);
                    }
                }
            }
            let counted: usize = cache
                .shards
                .iter()
                .map(|shard| lock(shard).map.values().map(|e| e.weight).sum::<usize>())
                .sum();
            prop_assert_eq!(cache.used_bytes(), counted);
            prop_assert!(cache.used_bytes() <= 4_000 + 300, "over budget by more than a page");
            for shard in &cache.shards {
                let shard = lock(shard);
                let small: usize = shard.map.values().filter(|e| e.queue == Queue::Small).map(|e| e.weight).sum();
                prop_assert_eq!(shard.small_bytes, small);
            }
        }
    }
}

#[test]
fn threads_sharing_the_cache_keep_its_accounting_exact() {
    let cache: Arc<PageCache<TestPage>> = Arc::new(PageCache::new(50_000, 4));
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let cache = Arc::clone(&cache);
            scope.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(thread);
                for _ in 0..20_000 {
                    let id = rng.u64(..2_000);
                    match rng.u8(..3) {
                        0 => {
                            cache.insert(id, TestPage::new(rng.usize(50..150)));
                        }
                        1 => {
                            cache.get(id);
                        }
                        _ => {
                            cache.remove(id);
                        }
                    }
                }
            });
        }
    });
    assert_eq!(cache.used_bytes(), counted(&cache));
    assert!(cache.used_bytes() <= 50_000);
    let stats = cache.stats();
    assert!(stats.hits > 0 && stats.misses > 0 && stats.evictions > 0);
}

#[test]
fn an_allocation_costs_its_header_rounding_and_size_class() {
    assert_eq!(allocation_bytes(0), 0);
    assert_eq!(allocation_bytes(1), 32);
    assert_eq!(allocation_bytes(24), 32);
    assert_eq!(allocation_bytes(25), 48);
    assert_eq!(allocation_bytes(100), 112);
    assert_eq!(allocation_bytes(129), 160);
    assert_eq!(allocation_bytes(4096), 4112);
    assert_eq!(allocation_bytes(4097), 5120);
    assert_eq!(allocation_bytes(4500), 5120);
    assert_eq!(allocation_bytes(8192), 8208);
    assert_eq!(allocation_bytes(8193), 10240);
}
