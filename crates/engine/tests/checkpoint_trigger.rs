//! When checkpoints come by log size: once the log since the last holds
//! `checkpoint_log_bytes`, and no less than the dirty pages the checkpoint would write, so
//! that random writes which dirty a page each do not have every page written back again and
//! again.

use std::time::Duration;

use tierkv::{Db, Durability, Options};
use tierkv_io::sim::SimFs;
use tierkv_io::Storage;

const PAGE: usize = 4096;

#[test]
fn log_size_checkpoints_write_no_more_page_bytes_than_the_log_took() {
    let storage = Storage::Sim(SimFs::new());
    let options = Options {
        cache_size: 16 << 20,
        max_page_bytes: Some(PAGE),
        checkpoint_log_bytes: 16 << 10,
        checkpoint_interval: Duration::from_secs(3600),
        durability: Durability::Buffered,
        ..Options::default()
    };
    let db = Db::open_on(&storage, "/db", options).expect("open");
    // 20,000 keys in order, then a checkpoint: a few hundred clean leaves.
    for i in 0..20_000u32 {
        db.put(format!("key{i:06}"), [1u8; 16]).expect("put");
    }
    db.checkpoint().expect("checkpoint");
    let before = db.stats().expect("stats");
    assert_eq!(before.dirty_pages, 0, "{before:?}");
    let leaves_bytes = before.next_page as usize * PAGE;
    // Overwrites of random keys: each dirties a leaf for about 40 bytes of log. With a
    // checkpoint every 16 KiB of log, each would write most leaves again.
    let mut rng = fastrand::Rng::with_seed(26);
    for _ in 0..60_000 {
        db.put(format!("key{:06}", rng.u32(..20_000)), [2u8; 16]).expect("put");
    }
    let logged = db.stats().expect("stats").log.append_bytes - before.log.append_bytes;
    // The checkpoint thread runs at the lowest priority: on a busy machine the one the log
    // called for may still be running when the writes end. Its end is waited for (a
    // trigger that never fires fails here after a minute).
    let waited = std::time::Instant::now();
    let mut after = db.stats().expect("stats");
    while after.checkpoints == before.checkpoints && waited.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
        after = db.stats().expect("stats");
    }
    let checkpoints = after.checkpoints - before.checkpoints;
    let written = (after.pages_written - before.pages_written) as usize * PAGE;
    assert!(logged as usize > 2 * leaves_bytes, "the log took {logged}, the tree {leaves_bytes}");
    assert!(checkpoints >= 1, "no checkpoint by log size: {after:?}");
    eprintln!("{checkpoints} checkpoints wrote {written} bytes of pages for {logged} bytes of log");
    // Each checkpoint writes the pages dirty when it starts, which a few writes after its
    // trigger may add to: a quarter over the log is slack for them, far below the many
    // times the log that checkpoints every 16 KiB would write.
    assert!(
        written as u64 <= logged + logged / 4,
        "{checkpoints} checkpoints wrote {written} bytes of pages for {logged} bytes of log"
    );
    // Nothing was lost on the way.
    assert_eq!(db.get(b"key000000").expect("get").map(|v| v.len()), Some(16));
    db.close().expect("close");
}
