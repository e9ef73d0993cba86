//! Checkpoints asked for by callers run on the checkpoint thread (so that their pages come
//! from that thread's allocator arena). Their errors must still reach the caller, poison the
//! store, and leave every acknowledged `Sync` write to the next open.

use tierkv::{Db, Durability, Error, Options};
use tierkv_io::sim::{FaultPlan, SimFs};
use tierkv_io::{FaultErrno, Storage};

fn options() -> Options {
    Options {
        cache_size: 1 << 20,
        write_buffer_size: Some(256 << 10),
        max_page_bytes: Some(2048),
        log_segment_bytes: 1 << 20,
        block_segment_bytes: 1 << 20,
        durability: Durability::Sync,
        ..Options::default()
    }
}

#[test]
fn a_failed_checkpoint_reaches_its_caller_and_poisons_the_store() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let db = Db::open_on(&storage, "/db", options()).expect("open");
    for i in 0..200u32 {
        db.put(format!("key{i:04}"), vec![i as u8; 40]).expect("put");
    }
    // Every call from here on fails, as a device that died.
    fs.set_fault(Some(FaultPlan::from_call(fs.calls() + 1, FaultErrno::Eio)));
    let error = db.checkpoint().expect_err("the checkpoint cannot write");
    assert!(!matches!(error, Error::Poisoned { .. }), "the first caller gets the cause: {error}");
    // The store refuses writes and checkpoints until reopened, and says why.
    let refused = db.put(b"after", b"x").expect_err("poisoned");
    assert!(matches!(refused, Error::Poisoned { .. }), "{refused}");
    let again = db.checkpoint().expect_err("poisoned");
    assert!(matches!(again, Error::Poisoned { .. }), "{again}");
    // Reads and counters still work.
    assert_eq!(db.get(b"key0007").expect("get"), Some(vec![7u8; 40]));
    db.stats().expect("stats");
    drop(db);
    fs.set_fault(None);
    let db = Db::open_on(&storage, "/db", options()).expect("reopen");
    for i in 0..200u32 {
        let value = db.get(format!("key{i:04}")).expect("get");
        assert_eq!(value, Some(vec![i as u8; 40]), "key{i:04}");
    }
    assert_eq!(db.get(b"after").expect("get"), None);
    db.close().expect("close");
}

#[test]
fn checkpoints_asked_for_by_many_threads_all_complete() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let db = Db::open_on(&storage, "/db", options()).expect("open");
    std::thread::scope(|scope| {
        for thread in 0..4u8 {
            let db = &db;
            scope.spawn(move || {
                for i in 0..50u32 {
                    db.put(format!("t{thread}/{i:03}"), [thread; 30]).expect("put");
                    if i % 10 == 9 {
                        db.checkpoint().expect("checkpoint");
                    }
                }
            });
        }
    });
    let stats = db.stats().expect("stats");
    assert!(stats.checkpoints >= 1, "{stats:?}");
    // Every write before a caller's checkpoint returned is written back: a last checkpoint
    // leaves no page dirty.
    db.checkpoint().expect("checkpoint");
    let stats = db.stats().expect("stats");
    assert_eq!(stats.dirty_pages, 0, "{stats:?}");
    assert_eq!(stats.checkpoint_sequence, stats.sequence, "{stats:?}");
    db.close().expect("close");
    let db = Db::open_on(&storage, "/db", options()).expect("reopen");
    assert_eq!(db.range(..).count(), 200);
    db.close().expect("close");
}
