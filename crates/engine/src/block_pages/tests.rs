use std::collections::BTreeMap;
use std::sync::Arc;

use tierkv_blockstore::{LogStore, StoreOptions};
use tierkv_io::Storage;

use super::*;
use crate::page::OverflowRef;
use crate::page::Value;
use crate::tree::Tree;

fn shared(blocks: LogStore, budget: usize, page_bytes: usize) -> Pages {
    Pages::new(Arc::new(blocks), budget, page_bytes, None).expect("frames")
}

fn meta(tree: &Tree, pages: &BlockPages<'_>, sequence: u64) -> Meta {
    Meta {
        root: tree.root,
        next_page: pages.next_id(),
        max_page_bytes: tree.max_page_bytes as u32,
        sequence,
        orphans_from: pages.next_id(),
        free_list: None,
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:06}", (i.wrapping_mul(2_654_435_761)) % 1_000_000).into_bytes()
}

fn all(tree: &Tree, pages: &impl PageSource<Error = PagesError>) -> Vec<(Vec<u8>, Value)> {
    let mut found = Vec::new();
    tree.scan(pages, b"", &mut |k, v| {
        found.push((k.to_vec(), v.clone()));
        true
    })
    .expect("scan");
    found
}

/// A tree of 6,000 keys on a log store, with frames far fewer than its pages: clean pages
/// are evicted and read back from their blocks, dirty ones stay with the session until a
/// flush, and a reopened store holds everything the last flush wrote.
#[test]
fn a_tree_larger_than_its_cache_reads_pages_back_and_survives_a_reopen() {
    let dir = tempfile::tempdir().expect("dir");
    let options = StoreOptions { segment_bytes: 1 << 20, ..StoreOptions::default() };
    // Sixteen frames (a 1 KiB page takes a 4 KiB frame).
    let budget = 16 * (4 << 10) + (8 << 10);
    let mut model: BTreeMap<Vec<u8>, Value> = BTreeMap::new();
    let (root, next_id, stats) = {
        let blocks = LogStore::open(&Storage::Os, dir.path(), options.clone()).expect("open");
        let shared = shared(blocks, budget, 1024);
        let pool = shared.pool();
        let mut pages = BlockPages::new(&shared, 1);
        let mut tree = Tree::create(&mut pages, 1024);
        for i in 0..6_000u32 {
            let value = Value::inline(i.to_le_bytes().repeat(4));
            if i % 5 == 4 {
                let gone = key(i / 2);
                assert_eq!(tree.delete(&mut pages, &gone).expect("delete"), model.remove(&gone));
            } else {
                let old = tree.put(&mut pages, &key(i), value.clone()).expect("put");
                assert_eq!(old, model.insert(key(i), value));
            }
            if i % 250 == 249 {
                pages.flush(None).expect("flush");
                assert_eq!(pages.dirty_count(), 0);
                // Only clean pages are in frames, and no more than the budget's worth.
                assert!(pool.used_bytes() <= budget, "{} bytes in frames", pool.used_bytes());
            }
        }
        pages.flush(None).expect("flush");
        assert_eq!(all(&tree, &pages), model.clone().into_iter().collect::<Vec<_>>());
        (tree.root, pages.next_id(), pool.stats())
    };
    assert!(stats.evictions > 100, "{stats:?}: the frames never had to evict");
    assert!(stats.misses > 100, "{stats:?}: no page was read back from its block");

    let blocks = LogStore::open(&Storage::Os, dir.path(), options).expect("reopen");
    let pages = shared(blocks, budget, 1024);
    let tree = Tree { root, max_page_bytes: 1024 };
    assert!(next_id > root);
    assert!(tree.height(&pages).expect("height") >= 3);
    assert_eq!(all(&tree, &pages), model.into_iter().collect::<Vec<_>>());
}

#[test]
fn a_damaged_or_missing_page_is_a_typed_error() {
    let storage = Storage::Sim(tierkv_io::sim::SimFs::new());
    let blocks = LogStore::open(&storage, "/db", StoreOptions::default()).expect("open");
    blocks.write_group(&[(BlockId(7), b"not a page")]).expect("write");
    let pages = shared(blocks, 1 << 20, 4096);
    match pages.load(7) {
        Err(PagesError::Corrupt { page: 7, source }) => {
            assert!(source.to_string().contains("a page of 10 bytes"), "{source}")
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(matches!(pages.load(8), Err(PagesError::Missing { page: 8 })));
    let tree = Tree { root: 7, max_page_bytes: 4096 };
    let error = tree.get(&pages, b"k").expect_err("a lookup through a damaged page fails");
    assert!(error.to_string().contains("page 7 is corrupt"), "{error}");
}

#[test]
fn dirty_pages_stay_with_the_session_and_reach_the_frames_only_once_durable() {
    let storage = Storage::Sim(tierkv_io::sim::SimFs::new());
    let blocks = LogStore::open(&storage, "/db", StoreOptions::default()).expect("open");
    // Frames for about sixteen pages, besides the frames' words and the block store's map:
    // far too few for the tree, whose dirty pages the session keeps.
    let budget = 16 * (4 << 10) + (48 << 10);
    let shared = Pages::new(Arc::new(blocks), budget, 512, None).expect("frames");
    let pool = shared.pool();
    let mut pages = BlockPages::new(&shared, 1);
    let mut tree = Tree::create(&mut pages, 512);
    for i in 0..2_000u32 {
        tree.put(&mut pages, &key(i), Value::inline(vec![1; 30])).expect("put");
    }
    assert!(pages.dirty_count() > 50);
    assert_eq!(pool.stats().resident, 0, "a page reached a frame before it was written");
    let overflow = pages.write_overflow(&[7u8; 5000]);
    let summed = |pages: &BlockPages<'_>| {
        pages.dirty.values().map(|dirty| dirty.weight).sum::<usize>()
            + pages.overflow.values().map(|chunk| chunk.len()).sum::<usize>()
    };
    assert_eq!(pages.dirty_bytes(), summed(&pages), "the running total drifted");
    pages.free_overflow(&overflow);
    assert_eq!(pages.dirty_bytes(), summed(&pages), "the running total drifted");
    // The session's bytes count against the pool's budget, to within a step.
    assert!(pages.dirty_bytes() > budget);
    assert!(pool.used_bytes() + RESERVE_STEP > pages.dirty_bytes(), "{}", pool.used_bytes());
    // Nothing has been written yet, so every page must come from the session.
    assert_eq!(all(&tree, &pages).len(), 2_000);
    assert_eq!(pool.stats().misses, 0);
    pages.flush(None).expect("flush");
    assert_eq!(pages.dirty_bytes(), 0);
    // Written, they were put in frames, of which the budget keeps a few, and the rest are
    // read back from their blocks when needed.
    assert!(pool.used_bytes() <= budget, "{} bytes in frames", pool.used_bytes());
    assert!(pool.stats().installs > 50, "{:?}", pool.stats());
    let misses = pool.stats().misses;
    assert_eq!(all(&tree, &pages).len(), 2_000);
    assert!(pool.stats().misses > misses + 50, "the pages came back from their blocks");
}

#[test]
fn a_64_mib_value_goes_to_overflow_blocks_survives_a_reopen_and_is_freed_when_replaced() {
    let dir = tempfile::tempdir().expect("dir");
    let big: Vec<u8> = (0..(64usize << 20) + 123).map(|i| (i % 251) as u8).collect();
    let (meta, old) = {
        let blocks =
            LogStore::open(&Storage::Os, dir.path(), StoreOptions::default()).expect("open");
        let shared = shared(blocks, 1 << 20, 4096);
        let mut pages = BlockPages::new(&shared, 1);
        let mut tree = Tree::create(&mut pages, 4096);
        let overflow = pages.write_overflow(&big);
        assert_eq!((overflow.len, overflow.blocks), (big.len() as u64, 65));
        tree.put(&mut pages, b"big", Value::Overflow(overflow)).expect("put");
        tree.put(&mut pages, b"small", Value::inline(b"s".to_vec())).expect("put");
        // Before the flush it is read from memory.
        assert!(pages.read_overflow(&overflow).expect("read") == big);
        let meta = meta(&tree, &pages, 1);
        pages.flush(Some(&meta)).expect("checkpoint");
        (meta, overflow)
    };
    let blocks = LogStore::open(&Storage::Os, dir.path(), StoreOptions::default()).expect("reopen");
    let shared = shared(blocks, 1 << 20, 4096);
    assert_eq!(shared.read_meta().expect("meta"), Some(meta));
    let mut pages = BlockPages::new(&shared, meta.next_page);
    let mut tree = Tree { root: meta.root, max_page_bytes: 4096 };
    let Some(Value::Overflow(found)) = tree.get(&pages, b"big").expect("get") else {
        panic!("the big value is not an overflow reference");
    };
    assert_eq!(found, old);
    assert!(shared.read_overflow(&found).expect("read back") == big);
    // Replace it: its blocks were published, so they are retired, and deleted once reclaimed.
    let replaced = tree.put(&mut pages, b"big", Value::inline(b"now small".to_vec())).expect("put");
    assert_eq!(replaced, Some(Value::Overflow(old)));
    pages.free_overflow(&old);
    let retired = pages.take_retired();
    assert!(retired.len() >= 66, "the 65 blocks and the old root: {retired:?}");
    pages.flush(None).expect("flush");
    assert!(shared.read_overflow(&old).expect("still there for older readers") == big);
    pages.reclaim(retired);
    pages.flush(None).expect("flush");
    for id in old.first..old.first + u64::from(old.blocks) {
        let read = shared.blocks().read(BlockId(id)).expect("read");
        assert_eq!(read, None, "block {id} was not freed");
    }
    assert!(matches!(shared.read_overflow(&old), Err(PagesError::Missing { .. })));
    let wrong = OverflowRef { len: 5, first: tree.root, blocks: 1 };
    assert!(matches!(shared.read_overflow(&wrong), Err(PagesError::Overflow { .. })));
}

#[test]
fn pages_of_this_session_change_in_place_and_older_ones_are_copied() {
    let storage = Storage::Sim(tierkv_io::sim::SimFs::new());
    let blocks = LogStore::open(&storage, "/db", StoreOptions::default()).expect("open");
    let shared = shared(blocks, 1 << 20, 4096);
    let mut pages = BlockPages::new(&shared, 1);
    let mut tree = Tree::create(&mut pages, 4096);
    let first_root = tree.root;
    tree.put(&mut pages, b"a", Value::inline(b"1".to_vec())).expect("put");
    assert_eq!(tree.root, first_root, "a page of this session keeps its id");
    pages.flush(None).expect("flush");
    let published = tree.clone();
    let mut pages = BlockPages::new(&shared, pages.next_id());
    tree.put(&mut pages, b"a", Value::inline(b"2".to_vec())).expect("put");
    assert_ne!(tree.root, first_root, "a published page is copied");
    assert_eq!(pages.take_retired(), vec![first_root]);
    assert_eq!(published.get(&shared, b"a").expect("get"), Some(Value::inline(b"1".to_vec())));
    assert_eq!(tree.get(&pages, b"a").expect("get"), Some(Value::inline(b"2".to_vec())));
}

#[test]
fn an_overflow_value_freed_before_its_flush_is_never_written() {
    let storage = Storage::Sim(tierkv_io::sim::SimFs::new());
    let blocks = LogStore::open(&storage, "/db", StoreOptions::default()).expect("open");
    let shared = shared(blocks, 1 << 20, 4096);
    let mut pages = BlockPages::new(&shared, 1);
    let overflow = pages.write_overflow(&vec![9u8; 3 << 20]);
    let empty = pages.write_overflow(b"");
    assert_eq!((empty.len, empty.blocks), (0, 1));
    assert_eq!(pages.read_overflow(&empty).expect("read"), Vec::<u8>::new());
    pages.free_overflow(&overflow);
    pages.flush(None).expect("flush");
    for id in overflow.first..overflow.first + u64::from(overflow.blocks) {
        assert_eq!(shared.blocks().read(BlockId(id)).expect("read"), None);
    }
    assert!(pages.take_retired().is_empty());
    let written = shared.blocks().stats().payload_bytes;
    assert!(written < 100, "the freed value's bytes were written: {written}");
}

/// A page the tier holds is checked on every hit: a copy whose bytes changed in the tier's
/// memory is dropped, counted, and read from the block store instead.
#[test]
fn a_damaged_tier_copy_is_rejected_and_the_block_read_instead() {
    let storage = Storage::Sim(tierkv_io::sim::SimFs::new());
    let blocks = LogStore::open(&storage, "/db", StoreOptions::default()).expect("open");
    let tier = tierkv_tiercache::TierOptions {
        overhead_bypass: false,
        ..tierkv_tiercache::TierOptions::new(1 << 20)
    };
    let shared = Pages::new(Arc::new(blocks), 1 << 20, 4096, Some(tier)).expect("pages");
    let mut pages = BlockPages::new(&shared, 1);
    let mut tree = Tree::create(&mut pages, 4096);
    tree.put(&mut pages, b"k", Value::inline(b"the value".to_vec())).expect("put");
    pages.flush(None).expect("flush");
    let root = tree.root;
    let source = shared.pool().source();
    let tier_cache = source.tier.as_ref().expect("a tier");
    let key = BlockSource::key(root);
    assert!(tier_cache.contains(key), "the checkpoint's page is in the tier");
    // Out of the frames, so the next read goes below them.
    shared.pool().set_budget(0);
    assert_eq!(shared.pool().stats().resident, 0);
    assert_eq!(shared.tier_rejected(), 0);
    // The tier's copy changes under it: one byte of the image, the checksum as it was.
    let mut entry = Vec::new();
    assert!(tier_cache.get(key, &mut entry));
    entry[100] ^= 0x40;
    tier_cache.invalidate(key);
    tier_cache.admit(key, &[&entry], tierkv_tiercache::AdmitSource::Checkpoint);
    assert_eq!(tree.get(&shared, b"k").expect("get"), Some(Value::inline(b"the value".to_vec())));
    assert_eq!(shared.tier_rejected(), 1, "the damaged copy went unnoticed");
    assert_eq!(shared.pool().stats().misses, 1);
    // The block read put a good copy in the tier (`cache_on_read`), which the next miss
    // is served from, with no block read.
    let reads = shared.blocks().stats().reads;
    let hits = tier_cache.stats().hits;
    shared.pool().set_budget(0);
    assert_eq!(shared.pool().stats().resident, 0);
    assert_eq!(tree.get(&shared, b"k").expect("get"), Some(Value::inline(b"the value".to_vec())));
    assert_eq!(shared.tier_rejected(), 1);
    assert_eq!(shared.blocks().stats().reads, reads, "a tier hit read the block");
    assert_eq!(tier_cache.stats().hits, hits + 1);
}
