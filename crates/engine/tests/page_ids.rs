//! Page ids stay put: pages change in place and checkpoints write them back at their own
//! ids, so rewriting every page over and over keeps the ids in use at the number of pages
//! (the buffer pool addresses frames by page id), before and after a reopen.

use tierkv::{Db, Durability, Options};

fn options() -> Options {
    Options {
        cache_size: 8 << 20,
        max_page_bytes: Some(1024),
        durability: Durability::None,
        block_segment_bytes: 1 << 20,
        ..Options::default()
    }
}

fn update_all(db: &Db, keys: u32, round: u32) {
    for i in 0..keys {
        let key = format!("key{:06}", i.wrapping_mul(2_654_435_761) % 1_000_000);
        db.put(key, format!("value {i} of round {round}")).expect("put");
    }
    db.checkpoint().expect("checkpoint");
}

#[test]
fn rewriting_every_page_many_times_keeps_every_page_at_its_id() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db");
    let keys = 3000;
    let db = Db::open(&path, options()).expect("open");
    update_all(&db, keys, 0);
    let first = db.stats().expect("stats").next_page;
    let pages = db.verify().expect("verify").pages;
    for round in 1..=20 {
        update_all(&db, keys, round);
    }
    let stats = db.stats().expect("stats");
    let verified = db.verify().expect("verify");
    assert_eq!(verified.entries, u64::from(keys));
    // Each checkpoint writes about every page back at its own id: the ids grow only with
    // the splits of values grown by a few bytes, not with the rewrites.
    assert!(stats.pages_written >= 20 * pages / 2, "{stats:?}");
    assert!(
        stats.next_page < first + pages / 4,
        "next page id {} (from {first}) for a tree of {pages} pages after 20 rewrites",
        stats.next_page
    );
    db.close().expect("close");

    // Reopened, the store goes on from the same ids.
    let db = Db::open(&path, options()).expect("reopen");
    let before = db.stats().expect("stats").next_page;
    assert_eq!(before, stats.next_page);
    for round in 21..=25 {
        update_all(&db, keys, round);
    }
    let after = db.stats().expect("stats").next_page;
    assert!(after < before + pages / 4, "ids {before} -> {after} after a reopen");
    for i in (0..keys).step_by(97) {
        let key = format!("key{:06}", i.wrapping_mul(2_654_435_761) % 1_000_000);
        assert_eq!(db.get(&key).expect("get"), Some(format!("value {i} of round 25").into_bytes()));
    }
    assert_eq!(db.verify().expect("verify").entries, u64::from(keys));
}

/// With a cache so small that pages are evicted and read back between rewrites, the pages
/// keep their ids all the same, and a store closed and reopened holds every key.
#[test]
fn pages_evicted_and_read_back_keep_their_ids_too() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db");
    let options = Options { cache_size: 1 << 20, write_buffer_size: Some(256 << 10), ..options() };
    // Frames of 1 KiB pages count a kernel page (4 KiB) each: 6,000 keys take about 350
    // pages, more than the budget holds, with or without before-images beside them.
    let keys = 6000;
    let db = Db::open(&path, options.clone()).expect("open");
    update_all(&db, keys, 0);
    let first = db.stats().expect("stats").next_page;
    let pages = db.verify().expect("verify").pages;
    for round in 1..=12 {
        update_all(&db, keys, round);
    }
    let stats = db.stats().expect("stats");
    assert!(stats.cache.evictions > 0 && stats.cache.misses > 0, "nothing was evicted: {stats:?}");
    assert!(
        stats.next_page < first + pages / 4,
        "next page id {} (from {first}) for a tree of {pages} pages after 12 rewrites",
        stats.next_page
    );
    db.close().expect("close");
    let db = Db::open(&path, options).expect("reopen");
    update_all(&db, keys, 13);
    let verified = db.verify().expect("verify");
    assert!(verified.problems.is_empty(), "{:?}", verified.problems);
    assert_eq!(verified.entries, u64::from(keys));
    for i in (0..keys).step_by(89) {
        let key = format!("key{:06}", i.wrapping_mul(2_654_435_761) % 1_000_000);
        assert_eq!(db.get(&key).expect("get"), Some(format!("value {i} of round 13").into_bytes()));
    }
}

/// Every page size a store takes, 1 KiB to 64 KiB, makes a store that writes, splits,
/// checkpoints, reopens and reads back (the empty root leaf of a new store included).
#[test]
fn every_page_size_makes_a_working_store() {
    for shift in 10..=16 {
        let page = 1usize << shift;
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("db");
        let options = Options { max_page_bytes: Some(page), cache_size: 32 << 20, ..options() };
        let db = Db::open(&path, options.clone()).expect("open");
        let long = options.max_key_bytes();
        for i in 0..2000u32 {
            db.put(format!("key{i:06}"), vec![i as u8; 40 + (i as usize % 300)]).expect("put");
        }
        db.put(vec![b'z'; long], vec![7u8; page / 2]).expect("a longest key, an overflow value");
        db.close().expect("close");
        let db = Db::open(&path, options).expect("reopen");
        assert_eq!(db.get("key001234").expect("get"), Some(vec![1234u32 as u8; 40 + 1234 % 300]));
        assert_eq!(db.get(vec![b'z'; long]).expect("get"), Some(vec![7u8; page / 2]));
        let report = db.verify().expect("verify");
        assert_eq!(report.entries, 2001, "{page}-byte pages");
    }
}
