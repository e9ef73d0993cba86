//! What an open may make and where: a store is made only in a missing directory whose
//! parent exists or in an empty one, never beside other files; its identity file tells "not
//! a store", "a newer format", "damaged" and "a backup that did not finish" apart; it
//! remembers the log's place and backend and its page size, and refuses an open that asks
//! for others; a failed open leaves nothing new behind; a crash while making a store leaves
//! one the next open makes again. And read-only opens: they see every acknowledged write
//! (the log's too), change nothing (the simulation's op log stays empty), refuse writes,
//! share the store with other readers but not with a writer.

use std::path::{Path, PathBuf};

use tierkv::{Backend, Db, Durability, Error, Options, IDENTITY_FILE};
use tierkv_io::sim::{CrashModel, SimFs};
use tierkv_io::{AccessMethod, OpenOptions, Storage};

fn options() -> Options {
    Options { cache_size: 4 << 20, durability: Durability::Sync, ..Options::default() }
}

fn read_only() -> Options {
    Options { read_only: true, ..options() }
}

/// Every path under `root`, files and directories.
fn tree(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(at) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else { continue };
        for entry in entries {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path.clone());
            }
            found.push(path);
        }
    }
    found.sort();
    found
}

fn expect_err(result: tierkv::Result<Db>) -> Error {
    match result {
        Ok(_) => panic!("the open succeeded"),
        Err(error) => error,
    }
}

#[test]
fn a_store_is_made_only_where_nothing_else_is() {
    let root = tempfile::tempdir().expect("dir");
    let root = root.path();

    let deep = root.join("no/such/parent");
    let error = expect_err(Db::open(&deep, options()));
    assert!(matches!(error, Error::NotFound { .. }), "{error}");
    assert!(error.to_string().contains("parent"), "{error}");
    assert!(!root.join("no").exists(), "a missing parent was made");

    let foreign = root.join("app");
    std::fs::create_dir(&foreign).expect("mkdir");
    std::fs::write(foreign.join("data.sqlite"), b"SQLite format 3\0").expect("write");
    let before = tree(&foreign);
    let error = expect_err(Db::open(&foreign, options()));
    assert!(matches!(error, Error::NotAStore { .. }), "{error}");
    assert!(error.to_string().contains("data.sqlite"), "{error}");
    assert_eq!(tree(&foreign), before, "a store was put beside another program's files");

    let file = root.join("a-file");
    std::fs::write(&file, b"x").expect("write");
    assert!(matches!(expect_err(Db::open(&file, options())), Error::NotADirectory { .. }));

    let old = root.join("blocks-only");
    std::fs::create_dir_all(old.join("blocks")).expect("mkdir");
    let error = expect_err(Db::open(&old, options()));
    assert!(error.to_string().contains("salvage"), "{error}");

    let missing = root.join("missing");
    for refused in [read_only(), Options { create_if_missing: false, ..options() }] {
        let error = expect_err(Db::open(&missing, refused));
        assert!(matches!(error, Error::NotFound { .. }), "{error}");
        assert!(!missing.exists());
    }
    let invalid = Options { cache_size: 1, ..options() };
    assert!(matches!(expect_err(Db::open(&missing, invalid)), Error::InvalidOptions(_)));
    assert!(!missing.exists(), "invalid options made a directory");

    let empty = root.join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    assert!(matches!(expect_err(Db::open(&empty, read_only())), Error::NotFound { .. }));
    let db = Db::open(&empty, options()).expect("a store in an empty directory");
    db.put(b"k", b"v").expect("put");
    db.close().expect("close");
    assert!(empty.join(IDENTITY_FILE).is_file());
    let error = expect_err(Db::open(&empty, Options { error_if_exists: true, ..options() }));
    assert!(matches!(error, Error::AlreadyExists { .. }), "{error}");
    let db = Db::open(&missing, options()).expect("a store in a missing directory");
    db.close().expect("close");
}

#[test]
fn the_identity_file_tells_other_formats_and_damage_apart() {
    let root = tempfile::tempdir().expect("dir");
    let dir = root.path().join("db");
    Db::open(&dir, options()).expect("make").close().expect("close");
    let path = dir.join(IDENTITY_FILE);
    let good = std::fs::read(&path).expect("read");
    let check = |bytes: &[u8], expect: fn(&Error) -> bool| {
        std::fs::write(&path, bytes).expect("write");
        let error = expect_err(Db::open(&dir, options()));
        assert!(expect(&error), "{error}");
        let error = expect_err(Db::open(&dir, read_only()));
        assert!(expect(&error), "{error}");
    };
    let mut newer = good.clone();
    newer[16] = 9;
    // A newer format: its last four bytes are still the checksum of the rest.
    let body = newer.len() - 4;
    let crc = tierkv_io::crc32c(&newer[..body]).to_le_bytes();
    newer[body..].copy_from_slice(&crc);
    check(&newer, |e| matches!(e, Error::NewerFormat { found: 9, .. }));
    let mut damaged = good.clone();
    damaged[25] ^= 1;
    check(&damaged, |e| matches!(e, Error::Corruption(_)));
    check(b"SQLite format 3\0 and more bytes of another file", |e| {
        matches!(e, Error::NotAStore { .. })
    });
    std::fs::write(&path, &good).expect("restore");
    Db::open(&dir, options()).expect("open again").close().expect("close");
}

#[test]
fn the_store_remembers_its_log_and_page_size_and_refuses_others() {
    let root = tempfile::tempdir().expect("dir");
    let dir = root.path().join("db");
    let log = root.path().join("elsewhere-log");
    let made = Options { log_dir: Some(log.clone()), max_page_bytes: Some(4096), ..options() };
    let db = Db::open(&dir, made).expect("make");
    db.put(b"k", b"v").expect("put");
    drop(db); // not closed: the write is only in the log
    assert!(!dir.join("log").exists(), "the log went inside the store");

    // Later opens find the log without being told.
    let db = Db::open(&dir, options()).expect("open without --log-dir");
    assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    db.close().expect("close");
    let db = Db::open(&dir, read_only()).expect("read-only without --log-dir");
    assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    drop(db);

    let before = tree(root.path());
    let other = root.path().join("other-log");
    for (wrong, name) in [
        (Options { log_dir: Some(other.clone()), ..options() }, "log_dir"),
        (Options { log_dir: Some(dir.join("log")), ..options() }, "log_dir"),
        (Options { log_backend: Some(Backend::Pmem), ..options() }, "log_backend"),
        (Options { max_page_bytes: Some(8192), ..options() }, "max_page_bytes"),
    ] {
        let error = expect_err(Db::open(&dir, wrong));
        assert!(matches!(error, Error::OptionMismatch { option, .. } if option == name), "{error}");
        assert!(error.to_string().contains(name), "{error}");
    }
    assert_eq!(tree(root.path()), before, "a refused open left something behind");
    // The same settings given again are fine.
    let same = Options { log_dir: Some(log), max_page_bytes: Some(4096), ..options() };
    Db::open(&dir, same).expect("the same settings").close().expect("close");
}

#[test]
fn a_failed_open_of_a_store_whose_log_is_lost_makes_nothing() {
    let root = tempfile::tempdir().expect("dir");
    let dir = root.path().join("db");
    let log = root.path().join("log-elsewhere");
    let db = Db::open(&dir, Options { log_dir: Some(log.clone()), ..options() }).expect("make");
    db.put(b"k", b"v").expect("put");
    db.checkpoint().expect("checkpoint");
    db.put(b"k2", b"v2").expect("put");
    drop(db);
    std::fs::remove_dir_all(&log).expect("lose the log (a tmpfs after a reboot)");
    // The block store's own recovery may write a map checkpoint in `blocks` (a repair of
    // what is there); nothing else may appear.
    let outside_blocks =
        |root: &Path| tree(root).into_iter().filter(|p| !p.starts_with(dir.join("blocks")));
    let segments = |dir: &Path| {
        tree(&dir.join("blocks"))
            .into_iter()
            .filter(|p| p.extension().is_some_and(|ext| ext == "blk"))
            .collect::<Vec<_>>()
    };
    let before: Vec<PathBuf> = outside_blocks(root.path()).collect();
    let segments_before = segments(&dir);
    for attempt in [read_only(), options()] {
        let error = expect_err(Db::open(&dir, attempt));
        assert!(matches!(error, Error::Corruption(_)), "{error}");
        assert!(error.to_string().contains("ends at record 0"), "{error}");
    }
    assert_eq!(outside_blocks(root.path()).collect::<Vec<_>>(), before, "a failed open made files");
    assert_eq!(segments(&dir), segments_before, "a failed open made block segments");
}

#[test]
fn a_new_store_refuses_a_log_directory_that_holds_files() {
    let root = tempfile::tempdir().expect("dir");
    let log = root.path().join("log");
    std::fs::create_dir(&log).expect("mkdir");
    std::fs::write(log.join("0000000000000001.wal"), b"someone else's").expect("write");
    let dir = root.path().join("db");
    let error = expect_err(Db::open(&dir, Options { log_dir: Some(log), ..options() }));
    assert!(matches!(error, Error::InvalidOptions(_)), "{error}");
    assert!(!dir.exists());
}

/// A crash at any point while a store is made: the next writable open makes (or finds) a
/// working store, and a read-only open finds it or says there is none; nothing else.
#[test]
fn a_crash_while_making_a_store_leaves_one_the_next_open_makes_again() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let dir = Path::new("/stores/db");
    storage.create_dir_all("/stores").expect("mkdir");
    storage.sync_dir("/").expect("sync");
    let start = fs.op_count();
    let db = Db::open_on(&storage, dir, options()).expect("make");
    let made_at = fs.op_count();
    db.put(b"k", b"v").expect("put");
    db.close().expect("close");
    // Every point before an op that is not a plain write (namespace ops, syncs, size
    // changes: where the meaning of the files changes), and every 97th write.
    let ops = fs.ops();
    let points: Vec<u64> = (start..=made_at)
        .filter(|&at| {
            at == made_at
                || ops[at as usize].kind != tierkv_io::sim::SimOpKind::Write
                || at % 97 == 0
        })
        .collect();
    let mut remade = 0;
    for &point in &points {
        for (index, model) in
            [CrashModel::KeepAll, CrashModel::DropAll, CrashModel::Subset].into_iter().enumerate()
        {
            let image = Storage::Sim(fs.crash_image(point, model, point * 3 + index as u64));
            let context = format!("crash before op {point} of {made_at}, {model}");
            match Db::open_on(&image, dir, read_only()) {
                Ok(db) => assert_eq!(db.get(b"k").expect("get"), None, "{context}"),
                Err(Error::NotFound { .. }) => remade += 1,
                Err(other) => panic!("read-only open: {other}: {context}"),
            }
            let db = Db::open_on(&image, dir, options())
                .unwrap_or_else(|e| panic!("writable open: {e}: {context}"));
            db.put(b"after", b"crash").expect("put");
            db.close().expect("close");
            let db = Db::open_on(&image, dir, read_only()).expect("read-only after the remake");
            assert_eq!(db.get(b"after").expect("get").as_deref(), Some(&b"crash"[..]));
            assert!(db.verify().expect("verify").is_clean(), "{context}");
        }
    }
    assert!(remade > 0, "no crash image left an unfinished store: the test tests nothing");
}

/// A store with writes in its tree and in its log only (dropped without a close).
fn store_needing_replay(storage: &Storage, dir: &Path) {
    let db = Db::open_on(storage, dir, options()).expect("make");
    for i in 0..300u32 {
        db.put(format!("tree{i:04}"), vec![i as u8; 200]).expect("put");
    }
    db.checkpoint().expect("checkpoint");
    for i in 0..50u32 {
        db.put(format!("log{i:03}"), vec![i as u8; 50]).expect("put");
    }
    db.delete("tree0000").expect("delete");
    drop(db);
}

#[test]
fn a_read_only_open_replays_the_log_in_memory_and_records_no_op() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let dir = Path::new("/db");
    store_needing_replay(&storage, dir);
    let image = fs.crash_image(fs.op_count(), CrashModel::KeepAll, 0);
    let storage = Storage::Sim(image.clone());
    // A read-only mount, as well: any write would fail.
    image.set_read_only(dir, true);
    let db = Db::open_on(&storage, dir, read_only()).expect("read-only open");
    assert_eq!(db.get("tree0000").expect("get"), None);
    assert_eq!(db.get("tree0299").expect("get"), Some(vec![43u8; 200]));
    assert_eq!(db.get("log049").expect("get"), Some(vec![49u8; 50]));
    assert_eq!(db.range(..).count(), 299 + 50);
    let report = db.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    let stats = db.stats().expect("stats");
    assert_eq!(stats.sequence, 300 + 50 + 1);
    for refused in [db.put("x", "y"), db.delete("x"), db.checkpoint(), db.compact(), db.sync()] {
        assert!(matches!(refused, Err(Error::ReadOnly { .. })), "{refused:?}");
    }
    db.close().expect("close of a read-only store");
    assert_eq!(image.op_count(), 0, "a read-only open changed the files: {:?}", image.ops());
    image.set_read_only(dir, false);
    // Readers share the store, and keep a writer out.
    let first = Db::open_on(&storage, dir, read_only()).expect("a reader");
    let second = Db::open_on(&storage, dir, read_only()).expect("a second reader");
    assert_eq!(second.get("log000").expect("get"), Some(vec![0u8; 50]));
    assert!(matches!(expect_err(Db::open_on(&storage, dir, options())), Error::AlreadyOpen { .. }));
    drop((first, second));
    // And a writer keeps readers out until it closes.
    let writer = Db::open_on(&storage, dir, options()).expect("writer");
    assert!(matches!(
        expect_err(Db::open_on(&storage, dir, read_only())),
        Error::AlreadyOpen { .. }
    ));
    assert_eq!(writer.get("log049").expect("get"), Some(vec![49u8; 50]));
    writer.close().expect("close");
}

#[test]
fn a_read_only_open_of_a_copy_without_a_lock_file_reads_it() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    store_needing_replay(&storage, Path::new("/db"));
    // The copy: every file but LOCK.
    let copy = Path::new("/copy");
    for (path, bytes) in fs.snapshot().files {
        let Ok(rest) = path.strip_prefix("/db") else { continue };
        if rest == Path::new("LOCK") {
            continue;
        }
        let to = copy.join(rest);
        storage.create_dir_all(to.parent().expect("parent")).expect("mkdir");
        let options = OpenOptions::new(AccessMethod::Syscall).create(true);
        let file = storage.open(&to, &options).expect("create");
        file.set_len(bytes.len() as u64).expect("size");
        if !bytes.is_empty() {
            file.write_at(&bytes, 0).expect("write");
        }
    }
    let ops = fs.op_count();
    let db = Db::open_on(&storage, copy, read_only()).expect("read-only open of the copy");
    assert_eq!(db.range(..).count(), 299 + 50);
    drop(db);
    assert_eq!(fs.op_count(), ops, "the read-only open of the copy wrote");
    assert!(!storage.exists(copy.join("LOCK")).expect("exists"));
}

/// The block store falls back to an older checkpoint (here: its files from before the last
/// checkpoint put back) while the log was truncated for the newer one: records between the
/// two are in neither, and the open says so instead of serving a store without them.
#[test]
fn an_open_refuses_a_log_that_starts_past_the_checkpoint_in_use() {
    let root = tempfile::tempdir().expect("dir");
    let dir = root.path().join("db");
    let small = Options { log_segment_bytes: 64 << 10, ..options() };
    let db = Db::open(&dir, small.clone()).expect("make");
    for i in 0..200u32 {
        db.put(format!("first{i:04}"), vec![1u8; 300]).expect("put");
    }
    db.close().expect("close");
    let old_blocks = root.path().join("old-blocks");
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(dir.join("blocks"))
        .arg(&old_blocks)
        .status()
        .expect("cp");
    assert!(copied.success());
    let db = Db::open(&dir, small.clone()).expect("reopen");
    for i in 0..2000u32 {
        db.put(format!("second{i:04}"), vec![2u8; 300]).expect("put");
    }
    db.checkpoint().expect("a checkpoint that truncates the log");
    drop(db);
    std::fs::remove_dir_all(dir.join("blocks")).expect("rm");
    std::fs::rename(&old_blocks, dir.join("blocks")).expect("put the old blocks back");
    for attempt in [read_only(), small] {
        let error = expect_err(Db::open(&dir, attempt));
        assert!(matches!(error, Error::Corruption(_)), "{error}");
        assert!(error.to_string().contains("starts at record"), "{error}");
    }
}
