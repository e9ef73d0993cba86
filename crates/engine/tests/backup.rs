//! `Db::backup`: a copy as of one sequence number, taken while writers run, that opens as a
//! store of its own and passes `verify`; refused where a store may not be made; and under a
//! crash at every point of a backup (the simulation's images), the source is intact and the
//! copy either opens whole or refuses to open.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use tierkv::{Db, Durability, Error, Options};
use tierkv_io::sim::{CrashModel, SimFs};
use tierkv_io::Storage;

fn options() -> Options {
    Options {
        // The undo keeps up to twice the write buffer of before-images: room for what the
        // writers below change while a backup and the checks read their snapshots.
        cache_size: 40 << 20,
        write_buffer_size: Some(16 << 20),
        max_page_bytes: Some(2048),
        durability: Durability::Buffered,
        ..Options::default()
    }
}

fn read_only() -> Options {
    Options { read_only: true, ..options() }
}

fn entries(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.range(..).map(|entry| entry.expect("entry")).collect()
}

/// The value writer `thread` puts under its `n`th key: large (overflow) every 50th.
fn value(thread: usize, n: u32) -> Vec<u8> {
    vec![(thread as u8) ^ (n as u8); if n.is_multiple_of(50) { 1500 } else { 40 }]
}

#[test]
fn a_backup_taken_while_writers_run_holds_the_store_as_of_its_sequence() {
    let root = tempfile::tempdir().expect("dir");
    let db = Db::open(root.path().join("db"), options()).expect("open");
    for i in 0..2000u32 {
        db.put(format!("base{i:05}"), vec![7u8; 60]).expect("put");
    }
    db.checkpoint().expect("checkpoint");
    let stop = AtomicBool::new(false);
    /// Stops the writers however the checks below end (a failed one too, which would
    /// otherwise wait for them forever).
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|scope| {
        let _stop = StopOnDrop(&stop);
        for thread in 0..3usize {
            let (db, stop) = (&db, &stop);
            scope.spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    db.put(format!("w{thread}-{n:06}"), value(thread, n)).expect("put");
                    // Each thread also rewrites and deletes base keys, so the tree changes.
                    if n.is_multiple_of(7) {
                        db.delete(format!("base{:05}", (n as usize * 13 + thread) % 2000))
                            .expect("delete");
                    }
                    n += 1;
                    if n.is_multiple_of(16) {
                        // Paced, so the store stays small enough to copy five times in CI.
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                }
            });
        }
        let mut raced = 0;
        for round in 0..5 {
            std::thread::sleep(std::time::Duration::from_millis(30));
            let before = db.snapshot();
            let dir = root.path().join(format!("copy{round}"));
            let sequence = db.backup(&dir).expect("backup");
            let after = db.snapshot();
            assert!(before.sequence() <= sequence && sequence <= after.sequence());
            raced += usize::from(before.sequence() < after.sequence());
            let copy = Db::open(&dir, read_only()).expect("the copy opens");
            let report = copy.verify().expect("verify");
            assert!(report.is_clean(), "{:?}", report.problems);
            let got = entries(&copy);
            assert_eq!(report.entries, got.len() as u64);
            let first: BTreeMap<_, _> = before.range(..).map(|e| e.expect("entry")).collect();
            let last: BTreeMap<_, _> = after.range(..).map(|e| e.expect("entry")).collect();
            // Inserts seen before are there; nothing is there that was not there after.
            for (key, value) in &first {
                if key.starts_with(b"w") {
                    assert_eq!(got.get(key), Some(value), "round {round}");
                }
            }
            for (key, value) in &got {
                assert_eq!(last.get(key).or(first.get(key)), Some(value), "round {round}");
            }
            // Each writer's keys are a prefix of what it wrote: one moment, not a blend.
            for thread in 0..3 {
                let prefix = format!("w{thread}-");
                let mine: Vec<u32> = got
                    .keys()
                    .filter_map(|k| {
                        std::str::from_utf8(k).ok()?.strip_prefix(&prefix)?.parse().ok()
                    })
                    .collect();
                assert!(mine.iter().enumerate().all(|(at, n)| *n == at as u32), "round {round}");
                for n in &mine {
                    assert_eq!(got[format!("{prefix}{n:06}").as_bytes()], value(thread, *n));
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(raced > 0, "no write ran during a backup: the test tests nothing");
    });
    db.close().expect("close");
}

#[test]
fn a_backup_goes_only_where_a_store_may_be_made_and_works_from_a_read_only_store() {
    let root = tempfile::tempdir().expect("dir");
    let db = Db::open(root.path().join("db"), options()).expect("open");
    db.put("k", "v").expect("put");
    let taken = root.path().join("taken");
    std::fs::create_dir(&taken).expect("mkdir");
    std::fs::write(taken.join("notes.txt"), b"mine").expect("write");
    assert!(matches!(db.backup(&taken), Err(Error::NotAStore { .. })));
    assert_eq!(std::fs::read_dir(&taken).expect("list").count(), 1);
    assert!(matches!(db.backup(root.path().join("no/parent")), Err(Error::NotFound { .. })));
    let copy = root.path().join("copy");
    db.backup(&copy).expect("backup");
    assert!(matches!(db.backup(&copy), Err(Error::AlreadyExists { .. })));
    db.close().expect("close");
    let reader = Db::open(root.path().join("db"), read_only()).expect("read-only");
    let second = root.path().join("second");
    assert_eq!(reader.backup(&second).expect("a backup of a read-only store"), 1);
    let copy = Db::open(&second, options()).expect("open the copy");
    assert_eq!(copy.get("k").expect("get").as_deref(), Some(&b"v"[..]));
    // The copy takes writes of its own, numbered after the source's.
    copy.put("k2", "v2").expect("put");
    assert!(copy.stats().expect("stats").sequence > 1);
}

/// A crash at any point of a backup on the simulation: the source opens with everything it
/// had, and the copy opens whole or refuses to open (an unfinished backup, or no store).
#[test]
fn a_crash_during_a_backup_leaves_the_source_whole_and_the_copy_whole_or_refused() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let (source, copy) = (Path::new("/db"), Path::new("/copy"));
    let db = Db::open_on(&storage, source, options()).expect("open");
    let mut expected = BTreeMap::new();
    for i in 0..400u32 {
        let (key, value) = (format!("key{i:04}").into_bytes(), value(0, i));
        db.put(&key, &value).expect("put");
        expected.insert(key, value);
    }
    db.sync().expect("sync");
    let start = fs.op_count();
    db.backup(copy).expect("backup");
    let end = fs.op_count();
    drop(db);
    let (mut whole, mut refused) = (0, 0);
    for point in start..=end {
        for (index, model) in [CrashModel::KeepAll, CrashModel::Subset].into_iter().enumerate() {
            let image = Storage::Sim(fs.crash_image(point, model, point * 2 + index as u64));
            let context = format!("crash before op {point} ({start}..{end}), {model}");
            let source_db = Db::open_on(&image, source, read_only())
                .unwrap_or_else(|e| panic!("the source: {e}: {context}"));
            assert_eq!(entries(&source_db), expected, "{context}");
            drop(source_db);
            match Db::open_on(&image, copy, read_only()) {
                Ok(copy_db) => {
                    assert_eq!(entries(&copy_db), expected, "a partial copy opened: {context}");
                    assert!(copy_db.verify().expect("verify").is_clean(), "{context}");
                    whole += 1;
                }
                Err(Error::IncompleteBackup { .. } | Error::NotFound { .. }) => refused += 1,
                Err(other) => panic!("the copy: {other}: {context}"),
            }
        }
    }
    assert!(whole > 0 && refused > 0, "{whole} whole, {refused} refused: the sweep missed a case");
}
