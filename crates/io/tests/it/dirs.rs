//! `remove_dir`: only an empty directory goes; a file or a missing path is an error. The same
//! on the OS and on the simulation, where a crash before the parent's sync may bring it back.

use tierkv_io::sim::{CrashModel, SimFs};
use tierkv_io::{AccessMethod, Error, OpenOptions, Storage};

fn check_remove_dir(storage: &Storage, root: &std::path::Path) {
    let dir = root.join("d");
    storage.create_dir_all(&dir).expect("mkdir");
    let file = dir.join("f");
    drop(storage.open(&file, &OpenOptions::new(AccessMethod::Syscall).create(true)).expect("f"));
    assert!(storage.remove_dir(&dir).is_err(), "a directory with a file must stay");
    assert!(storage.remove_dir(&file).is_err(), "a file is not a directory");
    storage.remove_file(&file).expect("rm f");
    storage.remove_dir(&dir).expect("an empty directory goes");
    assert!(!storage.exists(&dir).expect("exists"));
    assert!(matches!(storage.remove_dir(&dir), Err(Error::NotFound { .. })));
}

#[test]
fn remove_dir_on_the_os() {
    let root = tempfile::tempdir().expect("temp dir");
    check_remove_dir(&Storage::Os, root.path());
}

#[test]
fn remove_dir_on_the_simulation_is_pending_until_the_parent_is_synced() {
    let sim = SimFs::new();
    let storage = Storage::Sim(sim.clone());
    let root = std::path::Path::new("/root");
    storage.create_dir_all(root).expect("mkdir");
    storage.sync_dir("/").expect("sync /");
    check_remove_dir(&storage, root);
    // Create and sync `e`, then remove it without a sync: a crash may keep it, a sync may not.
    let kept = root.join("e");
    storage.create_dir_all(&kept).expect("mkdir e");
    storage.sync_dir(root).expect("sync");
    storage.remove_dir(&kept).expect("rmdir e");
    let before_sync = sim.crash_image(sim.op_count(), CrashModel::DropAll, 1);
    assert!(Storage::Sim(before_sync).is_dir(&kept).expect("is_dir"), "unsynced removal undone");
    storage.sync_dir(root).expect("sync");
    let after_sync = sim.crash_image(sim.op_count(), CrashModel::DropAll, 1);
    assert!(!Storage::Sim(after_sync).exists(&kept).expect("exists"));
}
