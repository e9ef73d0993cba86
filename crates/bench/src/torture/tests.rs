use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use super::*;

#[test]
fn a_value_names_its_write_and_an_altered_one_names_none() {
    for len in [1, 16, 100, 12_000] {
        let tag = Tag { cycle: 3, thread: 2, seq: 99, len };
        let value = tag.value();
        assert_eq!(value.len(), len.max(1) as usize);
        if len >= 16 {
            assert_eq!(Tag::parse(&value), Some(tag));
            let mut altered = value.clone();
            let last = altered.len() - 1;
            altered[last] ^= 1;
            assert_eq!(Tag::parse(&altered), None);
            assert_eq!(Tag::parse(&value[..value.len() - 1]), None);
        }
    }
}

#[test]
fn lines_round_trip() {
    let tag = |seq| Some(Tag { cycle: 1, thread: 4, seq, len: 100 });
    let write = WriteOp { thread: 4, seq: 7, changes: vec![(3, tag(7)), (9, None)] };
    assert_eq!(parse_line(&begin_line(&write)), Some(Line::Begin(write)));
    assert_eq!(parse_line("A 4 7\n"), Some(Line::Ack { thread: 4, seq: 7 }));
    assert_eq!(parse_line("READY\n"), Some(Line::Ready));
    assert_eq!(parse_line("B 4 7\n"), None, "a write changes something");
    assert_eq!(parse_line("A 4\n"), None);
    assert!(
        begin_line(&WriteOp {
            thread: 999,
            seq: u64::MAX,
            changes: (0..8)
                .map(|k| (
                    u32::MAX - k,
                    Some(Tag { cycle: u64::MAX, thread: 999, seq: u64::MAX, len: u32::MAX })
                ))
                .collect(),
        })
        .len()
            < 4096,
        "a line fits PIPE_BUF, so it is written whole"
    );
}

fn options(cycle: u64) -> WorkloadOptions {
    WorkloadOptions {
        threads: 3,
        keys_per_thread: 40,
        value_bytes: 64,
        large_value_bytes: 3000,
        seed: 11,
        cycle,
    }
}

fn db_options() -> tierkv::Options {
    tierkv::Options { cache_size: 4 << 20, ..tierkv::Options::default() }
}

/// The child's lines, fed to the model, describe the store: a run stopped between writes
/// (nothing in flight) checks clean, cycle after cycle, after each reopen.
#[test]
fn a_clean_stop_checks_clean_cycle_after_cycle() {
    let dir = tempfile::tempdir().expect("dir");
    let mut model = Model::default();
    for cycle in 0..3 {
        let db = Db::open(dir.path(), db_options()).expect("open");
        let out: Arc<Mutex<Vec<u8>>> = Arc::new(Mutex::new(Vec::new()));
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let writer = scope.spawn(|| run_child(&db, &options(cycle), &*out, &stop));
            std::thread::sleep(Duration::from_millis(150));
            stop.store(true, Ordering::Relaxed);
            writer.join().expect("join").expect("child");
        });
        drop(db);
        let text = String::from_utf8(out.lock().expect("lock").clone()).expect("utf-8");
        model.acks = 0;
        for line in text.lines() {
            model.take_line(line);
        }
        assert!(model.ready && model.protocol_errors.is_empty(), "{:?}", model.protocol_errors);
        assert!(model.acks > 0, "the child wrote nothing in cycle {cycle}");
        assert_eq!(model.in_flight(), 0);
        let db = Db::open(dir.path(), db_options()).expect("reopen");
        let report = check(&db, &mut model, 3, 40);
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert!(report.verify_problems.is_empty(), "{:?}", report.verify_problems);
        assert_eq!(report.keys_checked, 120);
        db.close().expect("close");
    }
}

/// The check catches what breaks the promise: a lost acknowledged write, a value nobody
/// wrote, a key nobody wrote, and a write in flight found in part; and it allows a write
/// in flight found in full or not at all.
#[test]
fn the_check_catches_every_kind_of_violation() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path(), db_options()).expect("open");
    let tag = |thread, seq| Tag { cycle: 0, thread, seq, len: 32 };
    let put = |thread, key, tag: Tag| db.put(key_bytes(thread, key), tag.value()).expect("put");
    let mut model = Model::default();
    let feed = |model: &mut Model, write: WriteOp, ack: bool| {
        let (thread, seq) = (write.thread, write.seq);
        model.take_line(&begin_line(&write));
        if ack {
            model.take_line(&format!("A {thread} {seq}"));
        }
    };
    // Acknowledged: key 0 of thread 0 holds 0.1; it reads back right.
    feed(&mut model, WriteOp { thread: 0, seq: 1, changes: vec![(0, Some(tag(0, 1)))] }, true);
    put(0, 0, tag(0, 1));
    // Acknowledged, then lost: key 1 of thread 0 should hold 0.2.
    feed(&mut model, WriteOp { thread: 0, seq: 2, changes: vec![(1, Some(tag(0, 2)))] }, true);
    // In flight and applied in full (thread 1), and in part (thread 2).
    let both = |thread, seq| vec![(0, Some(tag(thread, seq))), (1, Some(tag(thread, seq)))];
    feed(&mut model, WriteOp { thread: 1, seq: 1, changes: both(1, 1) }, false);
    put(1, 0, tag(1, 1));
    put(1, 1, tag(1, 1));
    feed(&mut model, WriteOp { thread: 2, seq: 1, changes: both(2, 1) }, false);
    put(2, 0, tag(2, 1));
    // A value nobody wrote, and a key outside every thread's keys.
    db.put(key_bytes(0, 5), b"garbage").expect("put");
    db.put(b"stray", b"x").expect("put");
    let report = check(&db, &mut model, 3, 10);
    let text = report.violations.join("\n");
    assert_eq!(report.violations.len(), 4, "{text}");
    assert!(
        text.contains(
            "t000k0000001: holds nothing where the last acknowledged write left 0.0.2.32"
        ),
        "{text}"
    );
    assert!(text.contains("t000k0000005: a value no write made"), "{text}");
    assert!(text.contains("a key no write made: \"stray\""), "{text}");
    assert!(text.contains("write 2.1 (2 changes) was in flight and is there in part"), "{text}");
    assert_eq!((report.in_flight_applied, report.in_flight_lost), (1, 0));
    db.close().expect("close");
}
