//! File locks: an exclusive lock (`lock_file`) excludes every other lock; shared locks
//! (`lock_file_shared`) coexist with each other and exclude an exclusive one; a shared lock
//! never creates its file. The same on the OS and on the simulation. On the OS a refusal is
//! tried again for a moment before it is reported.

use tierkv_io::sim::SimFs;
use tierkv_io::{Error, Storage};

fn check_lock_rules(storage: &Storage, dir: &std::path::Path) {
    let path = dir.join("LOCK");
    assert!(
        matches!(storage.lock_file_shared(&path), Err(Error::NotFound { .. })),
        "a shared lock must not create its file"
    );
    assert!(!storage.exists(&path).expect("exists"));

    let exclusive = storage.lock_file(&path, 0o600).expect("the first exclusive lock");
    assert!(matches!(storage.lock_file(&path, 0o600), Err(Error::Locked { .. })));
    assert!(matches!(storage.lock_file_shared(&path), Err(Error::Locked { .. })));
    drop(exclusive);

    let first = storage.lock_file_shared(&path).expect("a shared lock");
    let second = storage.lock_file_shared(&path).expect("a second shared lock");
    assert!(matches!(storage.lock_file(&path, 0o600), Err(Error::Locked { .. })));
    drop(first);
    assert!(matches!(storage.lock_file(&path, 0o600), Err(Error::Locked { .. })));
    drop(second);
    let again = storage.lock_file(&path, 0o600).expect("exclusive once the shared ones are gone");
    assert_eq!(again.path(), path.as_path());
}

#[test]
fn shared_and_exclusive_locks_on_the_os() {
    let dir = tempfile::tempdir().expect("temp dir");
    check_lock_rules(&Storage::Os, dir.path());
}

#[test]
fn shared_and_exclusive_locks_on_the_simulation() {
    let sim = SimFs::new();
    let storage = Storage::Sim(sim.clone());
    storage.create_dir_all("/store").expect("mkdir");
    check_lock_rules(&storage, std::path::Path::new("/store"));
}

/// A lock dropped while another open is being refused is taken by that open: a refusal is
/// tried again for a moment (a forked child holds a copy of the descriptor until its exec),
/// so a store closed a few milliseconds before reopens.
#[test]
fn a_lock_released_a_moment_later_is_taken_on_the_os() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("LOCK");
    let storage = Storage::Os;
    let held = storage.lock_file(&path, 0o600).expect("the first lock");
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(held);
    });
    let taken = storage.lock_file(&path, 0o600).expect("taken once the holder lets go");
    releaser.join().expect("releaser");
    assert_eq!(taken.path(), path.as_path());
    assert!(matches!(storage.lock_file_shared(&path), Err(Error::Locked { .. })));
}
