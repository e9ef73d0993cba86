//! Unit tests of `Db` that need its insides: a range delete over a lowered batch limit, and
//! a crash after a checkpoint that wrote a change above its sequence number, and the
//! populator thread.

use tierkv_io::sim::SimFs;
use tierkv_io::Storage;

use super::*;

fn open(storage: &Storage) -> Db {
    Db::open_on(storage, "/db", Options::default()).expect("open")
}

/// A range whose deletes would make a batch over the limit is refused before anything is
/// written: every key is still there, and the store took no write.
#[test]
fn a_range_delete_over_the_batch_limit_writes_nothing() {
    let storage = Storage::Sim(SimFs::new());
    let db = open(&storage);
    for i in 0..100u32 {
        db.put(format!("key{i:03}"), b"value").expect("put");
    }
    db.checkpoint().expect("checkpoint");
    db.put("key100", b"in the memtable").expect("put");
    let sequence = db.stats().expect("stats").sequence;
    // Each delete of a 6-byte key takes 11 bytes of the record, after its 4-byte count.
    let limit = 4 + 11 * 50;
    let refused = db.delete_range_within(.., limit);
    assert!(
        matches!(refused, Err(Error::BatchTooLarge { len, max }) if len > max && max == limit),
        "{refused:?}"
    );
    assert_eq!(db.stats().expect("stats").sequence, sequence, "nothing was written");
    assert_eq!(db.range(..).count(), 101);
    // Fifty keys fit exactly.
    assert_eq!(db.delete_range_within(.."key050", limit).expect("fits"), 50);
    assert_eq!(db.first().expect("first").map(|(key, _)| key), Some(b"key050".to_vec()));
    db.close().expect("close");
}

/// Live blocks no tree page, overflow value or free list names (the store must be at rest:
/// checkpointed, with no reader holding retired blocks).
fn unnamed_blocks(db: &Db) -> i64 {
    let report = db.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    let list = lock(&db.inner.checkpointer).meta.free_list.map_or(0, |list| list.blocks);
    let named = report.pages + report.overflow_blocks + 1 + u64::from(list);
    report.blocks as i64 - named as i64
}

/// A value replaced by a change logged after a checkpoint's sequence number, whose leaf
/// the checkpoint wrote with the new value: after a crash, replay replaces the value again
/// and frees what the leaf names (the new value's blocks); the old value's blocks are named
/// only by the checkpoint's free list, and the restart deletes them, so no block leaks.
#[test]
fn a_crash_after_a_fuzzy_checkpoint_leaks_no_replaced_value() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let db = open(&storage);
    db.put("k", vec![1u8; 20_000]).expect("put");
    db.put("small", b"v").expect("put");
    db.checkpoint().expect("checkpoint");
    db.checkpoint().expect("checkpoint");
    assert_eq!(unnamed_blocks(&db), 0, "at rest before the test");

    // The replacement is logged (durably) and made in the leaf, but not published: a
    // checkpoint now takes a sequence number below it, yet copies the leaf holding it.
    let inner = &db.inner;
    let log = inner.log().expect("a log");
    let mut batch = WriteBatch::new();
    batch.put("k", vec![2u8; 20_000]);
    let payload = batch.encode();
    let root = inner.current.load().tree.root;
    let number = || log.append(batch_record(), &payload, Durability::Sync).map(|lsn| lsn.0);
    let lsn = match inner.apply(Durability::Sync).batch(root, &batch, number) {
        Ok(lsn) => lsn,
        Err(_) => panic!("the replacement was refused"),
    };
    let sequence = inner.visible.get();
    assert!(lsn > sequence, "the checkpoint's sequence number is below the change");
    inner.checkpoint_locked(&mut lock(&inner.checkpointer)).expect("checkpoint");
    assert_eq!(lock(&inner.checkpointer).meta.sequence, sequence);

    // A crash keeping only what was made durable.
    let image = fs.crash_image(fs.op_count(), tierkv_io::sim::CrashModel::DropAll, 0);
    drop(db);
    let storage = Storage::Sim(image);
    let db = open(&storage);
    assert_eq!(db.get("k").expect("get"), Some(vec![2u8; 20_000]), "the logged change");
    for _ in 0..3 {
        db.checkpoint().expect("checkpoint");
    }
    assert_eq!(unnamed_blocks(&db), 0, "blocks leaked by the crash");
    db.close().expect("close");
}

/// A write that finds less than a huge page's worth of frames faulted in ahead of the next
/// page id (and more than a split needs) wakes the populator thread and goes on; the thread
/// faults them in (at the latest before it stops). Closing the store stops and joins it.
#[test]
fn the_populator_thread_faults_frames_in_ahead_of_the_writers_and_stops_at_close() {
    use crate::buffer::Ahead;
    let storage = Storage::Sim(SimFs::new());
    let db = open(&storage);
    db.put("a", b"1").expect("put");
    let inner = &db.inner;
    let pool = inner.pages.pool();
    assert!(inner.populator.thread.get().is_some(), "started with the store");
    let next = inner.next_page.load(Ordering::Relaxed);
    assert_eq!(pool.populate_due(next), Ahead::Enough, "the first write faulted them in");
    // As if the writers had added pages up to where the thread is due and the writer not.
    let soon = (next..next + (1 << 16))
        .find(|&next| pool.populate_due(next) == Ahead::Soon)
        .expect("a next page id with work for the thread");
    inner.next_page.store(soon, Ordering::Relaxed);
    inner.populate_before_write();
    assert_eq!(db.get("a").expect("get").as_deref(), Some(&b"1"[..]));
    // The stop at close serves the request first, then joins the thread.
    db.close().expect("close");
    assert_eq!(pool.populate_due(soon), Ahead::Enough, "the thread faulted the frames in");
    inner.next_page.store(next, Ordering::Relaxed);
    assert!(inner.populator.handle.lock().expect("handle").is_none(), "joined at close");
    assert!(inner.populator.stop.load(Ordering::Acquire));
}
