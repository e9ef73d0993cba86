//! A data set ten times the cache size: every write lands, every key reads back (most from
//! disk), scans see everything, and the page cache never holds more than its budget (the
//! cache size less the memtables' share) once a checkpoint has written its pages. The resident-memory figure at 10× data is measured by
//! `tierkv bench engine` (results/engine/).

use tierkv::{Db, Durability, Options};

#[test]
fn a_data_set_ten_times_the_cache_works_within_the_budget() {
    let dir = tempfile::tempdir().expect("dir");
    let options = Options {
        // 2 MiB: the memtables take up to 512 KiB of it, and the block store's map and the
        // frames' words, which grow with the data, about a fifth at ten times the data.
        cache_size: 2 << 20,
        write_buffer_size: Some(256 << 10),
        max_page_bytes: Some(4096),
        durability: Durability::None,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).expect("open");
    let keys = 180_000u64; // 116-byte entries: about 20 MiB of keys and values.
    let key = |i: u64| format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).into_bytes();
    let value = |i: u64| {
        let mut value = i.to_le_bytes().repeat(12);
        value.extend_from_slice(&[b'v'; 4]);
        value
    };
    for i in 0..keys {
        db.put(key(i), value(i)).expect("put");
    }
    db.checkpoint().expect("checkpoint");
    let stats = db.stats().expect("stats");
    let data = stats.blocks.live_bytes;
    assert!(data >= 10 * options.cache_size as u64, "only {data} bytes of pages");
    assert!(stats.cache_bytes <= stats.cache_budget, "{stats:?}");
    let mut rng = fastrand::Rng::with_seed(3);
    for _ in 0..20_000 {
        let i = rng.u64(..keys);
        assert_eq!(db.get(key(i)).expect("get"), Some(value(i)));
    }
    assert_eq!(db.get(b"absent").expect("get"), None);
    let mut count = 0u64;
    let mut last: Option<Vec<u8>> = None;
    for entry in db.range(..) {
        let (k, _) = entry.expect("entry");
        assert!(last.as_ref().is_none_or(|last| *last < k));
        last = Some(k);
        count += 1;
    }
    assert_eq!(count, keys);
    let stats = db.stats().expect("stats");
    assert!(stats.cache_bytes <= stats.cache_budget, "{stats:?}");
    assert!(stats.cache.misses > 10_000, "reads did not go to disk: {stats:?}");
    assert_eq!(stats.cache.over_budget, 0, "{stats:?}");
    eprintln!(
        "bounded: {keys} keys, {data} bytes of pages for a {} byte cache; {} misses, {} evictions",
        options.cache_size, stats.cache.misses, stats.cache.evictions
    );
    db.close().expect("close");
}

/// `verify` finds a damaged page: a byte flipped inside a block file of a closed store is
/// reported as a problem (or the open fails with an error), never missed.
#[test]
fn verify_reports_a_flipped_byte() {
    let dir = tempfile::tempdir().expect("dir");
    let options = Options { durability: Durability::None, ..Options::default() };
    let db = Db::open(dir.path(), options.clone()).expect("open");
    for i in 0..5_000u32 {
        db.put(format!("key{i:06}"), vec![b'x'; 200]).expect("put");
    }
    db.close().expect("close");
    let clean = Db::open(dir.path(), options.clone()).expect("reopen");
    let report = clean.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.entries, 5_000);
    drop(clean);
    // The largest block file holds the pages; damage a byte in its middle.
    let files = std::fs::read_dir(dir.path().join("blocks")).expect("list");
    let (path, len) = files
        .map(|entry| entry.expect("entry").path())
        .map(|path| {
            let len = std::fs::metadata(&path).expect("stat").len();
            (path, len)
        })
        .max_by_key(|(_, len)| *len)
        .expect("a block file");
    let mut bytes = std::fs::read(&path).expect("read");
    let used = bytes.iter().rposition(|b| *b != 0).expect("data");
    bytes[used / 2] ^= 0x40;
    std::fs::write(&path, &bytes).expect("write");
    assert!(used / 2 < len as usize);
    match Db::open(dir.path(), options) {
        Err(error) => eprintln!("open refused the damaged store: {error}"),
        Ok(db) => {
            let report = db.verify().expect("verify runs");
            assert!(!report.is_clean(), "a flipped byte went unnoticed");
            eprintln!("verify: {:?}", report.problems);
        }
    }
}

/// The page cache takes what the before-images (the undo) leave of `cache_size`: nearly all
/// of it while they are few, less while writes add them, and never more than the budget.
#[test]
fn the_page_cache_takes_the_room_the_undo_leaves() {
    let dir = tempfile::tempdir().expect("dir");
    let options = Options {
        cache_size: 4 << 20,
        write_buffer_size: Some(512 << 10),
        durability: Durability::None,
        ..Options::default()
    };
    let step = (512 << 10) / 8;
    let db = Db::open(dir.path(), options.clone()).expect("open");
    let empty = db.stats().expect("stats");
    assert_eq!(empty.cache_budget, options.cache_size - step, "{empty:?}");
    let mut least = empty.cache_budget;
    // A snapshot held through the writes keeps every before-image: the undo grows.
    let held_open = db.snapshot();
    for i in 0..3_000u64 {
        db.put(i.to_be_bytes(), [b'v'; 200]).expect("put");
        let stats = db.stats().expect("stats");
        least = least.min(stats.cache_budget);
        // Set aside: what the undo holds, rounded up to a step, up to the most it may take
        // (twice the write buffer; it can pass it by what is written before the next trim).
        let held = stats.undo_bytes.min(2 * (512 << 10));
        assert!(
            stats.cache_budget + held <= options.cache_size + step,
            "budget {} with {held} bytes of undo",
            stats.cache_budget
        );
        assert!(stats.cache_budget >= options.page_cache_bytes(), "{stats:?}");
    }
    assert!(least < empty.cache_budget - 4 * step, "the budget never gave the undo room");
    assert_eq!(held_open.get(0u64.to_be_bytes()).expect("get"), None);
    // Let go, the old segments go at the next rotations: the pool takes their room back.
    drop(held_open);
    for i in 0..3_000u64 {
        db.put(i.to_be_bytes(), [b'v'; 200]).expect("put");
    }
    db.checkpoint().expect("checkpoint");
    for i in (0..3_000u64).step_by(7) {
        assert_eq!(db.get(i.to_be_bytes()).expect("get").as_deref(), Some(&[b'v'; 200][..]));
    }
    let after = db.stats().expect("stats");
    // What is left is the segment in use (a quarter of the write buffer) and the one
    // before it, at most.
    assert!(after.cache_budget >= options.cache_size - 5 * step, "{after:?}");
    assert!(after.cache_bytes <= after.cache_budget, "{after:?}");
    db.close().expect("close");
}
