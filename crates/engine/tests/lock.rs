//! One open handle per store: the `LOCK` file (an exclusive `flock`, or the simulation's own
//! lock) refuses a second open, from this process or another, with `Error::AlreadyOpen`, and
//! is free again once the first handle closes or drops. New files get mode 0600 unless the
//! options say otherwise. (The other-process case is in the CLI's tests.)

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use tierkv::{Db, Durability, Error, Options};
use tierkv_io::sim::SimFs;
use tierkv_io::Storage;

fn options() -> Options {
    Options { cache_size: 4 << 20, durability: Durability::None, ..Options::default() }
}

fn second_open_is_refused(storage: &Storage, dir: &Path) {
    let db = Db::open_on(storage, dir, options()).expect("open");
    db.put(b"k", b"v").expect("put");
    match Db::open_on(storage, dir, options()) {
        Err(Error::AlreadyOpen { dir: locked }) => {
            assert_eq!(locked, dir);
            let message = Error::AlreadyOpen { dir: locked }.to_string();
            assert!(message.contains("already open") && message.contains("LOCK"), "{message}");
        }
        Err(other) => panic!("a second open failed otherwise: {other}"),
        Ok(_) => panic!("a second open of the same store succeeded"),
    }
    // The first handle is unharmed.
    assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    db.close().expect("close");
    let db = Db::open_on(storage, dir, options()).expect("open again once closed");
    assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    drop(db);
    // Dropped without close: the lock goes with it.
    Db::open_on(storage, dir, options()).expect("open again once dropped").close().expect("close");
}

#[test]
fn a_second_open_in_the_same_process_is_refused_on_the_os() {
    let dir = tempfile::tempdir().expect("dir");
    second_open_is_refused(&Storage::Os, &dir.path().join("db"));
}

#[test]
fn a_second_open_is_refused_on_the_simulation_too() {
    second_open_is_refused(&Storage::Sim(SimFs::new()), Path::new("/db"));
}

#[test]
fn new_files_are_private_unless_the_options_say_otherwise() {
    let dir = tempfile::tempdir().expect("dir");
    let modes = |db: &Path| {
        let mut modes = Vec::new();
        let mut stack = vec![db.to_path_buf()];
        while let Some(at) = stack.pop() {
            for entry in std::fs::read_dir(&at).expect("list") {
                let entry = entry.expect("entry");
                let meta = entry.metadata().expect("metadata");
                if meta.is_dir() {
                    stack.push(entry.path());
                } else {
                    modes.push((entry.path(), meta.permissions().mode() & 0o777));
                }
            }
        }
        assert!(modes.iter().any(|(path, _)| path.ends_with("LOCK")), "{modes:?}");
        modes
    };
    let private = dir.path().join("private");
    let db = Db::open(&private, options()).expect("open");
    db.put(b"k", b"v").expect("put");
    db.close().expect("close");
    for (path, mode) in modes(&private) {
        assert_eq!(mode, 0o600, "{}", path.display());
    }
    let shared = dir.path().join("shared");
    let db = Db::open(&shared, Options { file_mode: 0o640, ..options() }).expect("open");
    db.put(b"k", b"v").expect("put");
    db.close().expect("close");
    for (path, mode) in modes(&shared) {
        // The process's umask may take bits away, never add them.
        assert_eq!(mode & !0o640, 0, "{}: {mode:o}", path.display());
    }
}
