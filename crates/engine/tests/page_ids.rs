//! Page ids are given out again: checkpoints that rewrite the same pages over and over keep
//! the ids in use near the number of pages (the buffer pool addresses frames by page id), and
//! a reopened store finds the free ids again.

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
fn rewriting_every_page_many_times_keeps_the_ids_near_the_page_count() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db");
    let keys = 3000;
    let db = Db::open(&path, options()).expect("open");
    update_all(&db, keys, 0);
    let pages = db.verify().expect("verify").pages;
    for round in 1..=20 {
        update_all(&db, keys, round);
    }
    let stats = db.stats().expect("stats");
    let verified = db.verify().expect("verify");
    assert_eq!(verified.entries, u64::from(keys));
    // Each checkpoint rewrites about every page: without reuse the ids would pass 20 × pages.
    assert!(
        stats.next_page < 4 * pages,
        "next page id {} for a tree of {pages} pages after 20 rewrites",
        stats.next_page
    );
    assert!(stats.reusable_page_ids > 0, "no id waits to be reused: {stats:?}");
    db.close().expect("close");

    // Reopened, the store finds its free ids and goes on reusing them.
    let db = Db::open(&path, options()).expect("reopen");
    let found = db.stats().expect("stats").reusable_page_ids;
    assert!(found > 0, "a reopen found no reusable ids");
    let before = db.stats().expect("stats").next_page;
    for round in 21..=25 {
        update_all(&db, keys, round);
    }
    let after = db.stats().expect("stats").next_page;
    assert!(after < before + pages, "ids {before} -> {after} after a reopen: not reused");
    for i in (0..keys).step_by(97) {
        let key = format!("key{:06}", i.wrapping_mul(2_654_435_761) % 1_000_000);
        assert_eq!(db.get(&key).expect("get"), Some(format!("value {i} of round 25").into_bytes()));
    }
    assert_eq!(db.verify().expect("verify").entries, u64::from(keys));
}

/// With a cache so small that every checkpoint writes its pages early, in several groups,
/// the ids are reused all the same (an early group's meta record lists the reused ids it
/// wrote, for an open to delete should the checkpoint not finish), and a store closed and
/// reopened after such checkpoints holds every key.
#[test]
fn checkpoints_that_write_early_reuse_ids_too() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db");
    let options = Options { cache_size: 1 << 20, write_buffer_size: Some(256 << 10), ..options() };
    let keys = 4000;
    let db = Db::open(&path, options.clone()).expect("open");
    update_all(&db, keys, 0);
    let pages = db.verify().expect("verify").pages;
    for round in 1..=12 {
        update_all(&db, keys, round);
    }
    let stats = db.stats().expect("stats");
    assert!(stats.early_flushes > 12, "checkpoints did not write early: {stats:?}");
    // Without reuse, 13 rewrites of every page take at least 13 × `pages` ids. With it, the
    // ids in use at once are the tree's, the retired ones not yet reclaimed, and those the
    // early groups of the checkpoint under way hold until it finishes: a few trees' worth,
    // more when the writer runs ahead of the checkpoints (a loaded CI machine reached 4.04×).
    assert!(
        stats.next_page < 6 * pages,
        "next page id {} for a tree of {pages} pages after 12 rewrites written early",
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
