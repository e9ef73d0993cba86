//! Unit tests of `Db` that need its insides: a range delete over a lowered batch limit.

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
