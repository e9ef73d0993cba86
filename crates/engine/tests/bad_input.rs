//! Bad input gets a typed error with a clear message, and nothing is lost: empty keys, keys
//! and values over the limits, invalid options, a path that is a file, a read-only file
//! system (simulated: the tests run as root, which permissions do not stop) and a full disk.

use tierkv::{Db, Durability, Error, Options, WriteBatch, MAX_KEY_BYTES, MAX_VALUE_BYTES};
use tierkv_io::sim::{FaultPlan, SimFs};
use tierkv_io::{FaultErrno, Op, Storage};

fn options() -> Options {
    Options { cache_size: 4 << 20, durability: Durability::Sync, ..Options::default() }
}

/// An open store holding `k` = `v`, on the simulated file system.
fn store() -> (SimFs, Db) {
    let fs = SimFs::new();
    let db = Db::open_on(&Storage::Sim(fs.clone()), "/db", options()).expect("open");
    db.put(b"k", b"v").expect("put");
    (fs, db)
}

fn unharmed(db: &Db) {
    assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    assert_eq!(db.range(..).count(), 1, "nothing else was written");
}

/// Empty keys are refused by writes and by reads alike: the store has no empty key, and a
/// read of one is a caller's bug to report, not a miss to hide.
#[test]
fn empty_keys_are_refused() {
    let (_fs, db) = store();
    for result in [
        db.put(b"", b"x"),
        db.delete(b""),
        db.write(WriteBatch::new().put(b"a", b"1").put(b"", b"2")),
        db.get(b"").map(|_| ()),
    ] {
        let error = result.expect_err("an empty key");
        assert!(matches!(error, Error::EmptyKey), "{error}");
        assert_eq!(error.to_string(), "empty keys are not allowed");
    }
    // The batch with one bad key wrote none of its keys.
    assert_eq!(db.get(b"a").expect("get"), None);
    unharmed(&db);
}

#[test]
fn keys_and_values_over_the_limits_are_refused() {
    let (_fs, db) = store();
    // The store's limit: half its page less 32 bytes (two keys fit an internal page).
    let limit = options().max_key_bytes();
    assert_eq!(limit, (options().page_bytes() / 2 - 32).min(MAX_KEY_BYTES));
    let longest = vec![b'k'; limit];
    db.put(&longest, b"fits").expect("a key at the limit");
    let error = db.put(vec![b'k'; limit + 1], b"x").expect_err("too long");
    assert!(
        matches!(error, Error::KeyTooLarge { len, max } if len == limit + 1 && max == limit),
        "{error}"
    );
    assert!(error.to_string().contains(&format!("limit of {limit} bytes")), "{error}");
    let error = db.get(vec![b'k'; MAX_KEY_BYTES + 1]).expect_err("too long to read");
    assert!(matches!(error, Error::KeyTooLarge { .. }), "{error}");
    let big = vec![7u8; MAX_VALUE_BYTES + 1];
    let error = db.put(b"big", &big).expect_err("too large");
    assert!(matches!(error, Error::ValueTooLarge { len, .. } if len == big.len()), "{error}");
    assert_eq!(db.get(b"big").expect("get"), None);
    db.delete(&longest).expect("delete");
    unharmed(&db);
}

/// Keys of every length up to the limit, many sharing long prefixes, many not: the pages
/// split and every one still fits (an internal page always holds two of them).
#[test]
fn keys_up_to_the_limit_make_pages_that_fit() {
    let (_fs, db) = store();
    let limit = options().max_key_bytes();
    let mut written = 1;
    for i in 0..60usize {
        let mut shared = vec![b'p'; limit - 8];
        shared.extend_from_slice(format!("{i:08}").as_bytes());
        let mut apart = vec![b'a' + (i % 26) as u8; limit];
        apart[1..9].copy_from_slice(format!("{i:08}").as_bytes());
        let short = vec![b'b'; 1 + i * (limit - 1) / 59];
        for key in [shared, apart, short] {
            db.put(&key, vec![i as u8; 100]).expect("a long key");
            written += 1;
        }
        if i % 20 == 19 {
            db.checkpoint().expect("checkpoint");
        }
    }
    let report = db.verify().expect("verify");
    assert!(report.entries <= written && report.entries > 100, "{report:?}");
    assert!(report.height >= 3, "the tree never grew internal levels: {report:?}");
    // A bulk load (compaction) of the same keys packs pages to the brim: they fit too.
    let before: Vec<_> = db.range(..).map(|entry| entry.expect("entry")).collect();
    db.compact().expect("compact");
    assert_eq!(db.verify().expect("verify").entries, report.entries);
    let after: Vec<_> = db.range(..).map(|entry| entry.expect("entry")).collect();
    assert_eq!(after, before);
}

#[test]
fn invalid_options_are_refused_before_anything_is_made() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let cases = [
        Options { cache_size: 1024, ..options() },
        Options { max_page_bytes: Some(100), ..options() },
        Options { write_buffer_size: Some(10), ..options() },
        Options { log_segment_bytes: 1000, ..options() },
        Options { block_segment_bytes: 12345, ..options() },
        Options { checkpoint_interval: std::time::Duration::ZERO, ..options() },
    ];
    for bad in cases {
        let error = Db::open_on(&storage, "/db", bad.clone()).map(|_| ()).expect_err("invalid");
        assert!(matches!(error, Error::InvalidOptions(_)), "{error} for {bad:?}");
        assert!(error.to_string().starts_with("invalid options: "), "{error}");
    }
    assert!(!storage.exists("/db").expect("exists"), "an invalid open made the directory");
}

#[test]
fn a_path_that_is_a_file_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a store").expect("write");
    let error = Db::open(&file, options()).map(|_| ()).expect_err("a file");
    assert!(matches!(&error, Error::NotADirectory { path } if path == &file), "{error}");
    assert!(error.to_string().contains("it is not a directory"), "{error}");
    assert_eq!(std::fs::read(&file).expect("read"), b"not a store", "the file was changed");
    // Below a file, the same.
    let error = Db::open(file.join("db"), options()).map(|_| ()).expect_err("under a file");
    assert!(!error.to_string().is_empty());
}

/// On a read-only file system a new store cannot be made and an existing one cannot be
/// opened for writing; both say so. The existing store is intact once writable again.
#[test]
fn a_read_only_file_system_is_refused_and_harms_nothing() {
    let (fs, db) = store();
    db.close().expect("close");
    let storage = Storage::Sim(fs.clone());
    fs.set_read_only("/", true);
    for dir in ["/db", "/new"] {
        let error = Db::open_on(&storage, dir, options()).map(|_| ()).expect_err("read-only");
        let message = error.to_string();
        assert!(message.contains("read-only"), "{dir}: {message}");
        assert!(
            matches!(error, Error::Io(tierkv_io::Error::ReadOnlyFileSystem { .. })),
            "{error:?}"
        );
    }
    fs.set_read_only("/", false);
    let db = Db::open_on(&storage, "/db", options()).expect("open once writable");
    unharmed(&db);
    assert!(!storage.exists("/new").expect("exists"));
}

/// A full disk: writes fail with an error that names ENOSPC, the store refuses writes until
/// reopened, and after reopening (with room again) every acknowledged write is there. Two
/// ways to be full: growth refused (a new log or block segment cannot be allocated, while
/// writes into allocated space still work), and every call refused.
#[test]
fn a_full_disk_is_a_typed_error_and_loses_nothing() {
    for growth_only in [true, false] {
        let fs = SimFs::new();
        let small = Options {
            log_segment_bytes: 64 << 10,
            block_segment_bytes: 64 << 10,
            write_buffer_size: Some(64 << 10),
            ..options()
        };
        let storage = Storage::Sim(fs.clone());
        let db = Db::open_on(&storage, "/db", small.clone()).expect("open");
        for i in 0..50u32 {
            db.put(format!("acked{i:03}"), vec![b'a'; 300]).expect("put");
        }
        let plan = FaultPlan::from_call(fs.calls() + 1, FaultErrno::Enospc);
        fs.set_fault(Some(if growth_only { plan.only(Op::Allocate) } else { plan }));
        let mut refused = None;
        for i in 0..20_000u32 {
            if let Err(error) = db.put(format!("more{i:05}"), vec![b'm'; 300]) {
                refused = Some((i, error));
                break;
            }
        }
        let (written, error) = refused.expect("the disk never filled");
        assert!(error.to_string().contains("ENOSPC"), "{error}");
        let again = db.put(b"after", b"x").expect_err("refused until reopened");
        assert!(matches!(again, Error::Poisoned { .. }), "{again}");
        assert!(again.to_string().contains("ENOSPC"), "the refusal names the cause: {again}");
        drop(db);
        fs.set_fault(None);
        let db = Db::open_on(&storage, "/db", small).expect("reopen");
        for i in 0..50u32 {
            assert_eq!(db.get(format!("acked{i:03}")).expect("get"), Some(vec![b'a'; 300]));
        }
        for i in 0..written {
            let value = db.get(format!("more{i:05}")).expect("get");
            assert_eq!(value, Some(vec![b'm'; 300]), "more{i:05}, growth only: {growth_only}");
        }
        assert_eq!(db.get(b"after").expect("get"), None);
        db.put(b"room-again", b"y").expect("a write with room again");
        db.close().expect("close");
    }
}
