//! Scratch directories and child processes that do not outlive a run: a `ScratchDir` is a
//! `tempfile` directory, removed when it is dropped (at the end, on an error return, and on a
//! panic, which unwinds); and every live one, with every `WatchedChild` and every
//! `EmptyDirOnInterrupt` (a memory cgroup's directory, which only `rmdir` removes), is in a
//! registry that `remove_all` empties, for the binary's Ctrl-C handler to call before it
//! exits (a signal's default action would kill the process without running a destructor).
//!
//! Invariants:
//! - A directory is in the registry from its creation until it is removed.
//! - `remove_all` stops the registered children before it removes the directories, since a
//!   child writes into its parent's scratch directory.
//!
//! Must never: remove a directory it did not make, or hold the registry's lock while it
//! waits for anything but a child that was just killed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How often a wait polls its child: the child sits in a mutex the Ctrl-C handler must be
/// able to take, so the wait cannot block inside it.
const CHILD_POLL: Duration = Duration::from_millis(20);

/// Attempts `remove_all` makes at each directory: the run's threads may still be creating
/// files in it while it is removed.
const REMOVE_ATTEMPTS: usize = 5;

#[derive(Default)]
struct Registry {
    dirs: Vec<PathBuf>,
    empty_dirs: Vec<PathBuf>,
    children: Vec<(u32, Arc<Mutex<Child>>)>,
}

/// Set by `remove_all`: from then on no scratch directory is made and no child started (the
/// process is about to exit, and nothing would remove them).
static CLOSED: AtomicBool = AtomicBool::new(false);

fn refuse_when_closed() -> std::io::Result<()> {
    match CLOSED.load(Ordering::Acquire) {
        true => Err(std::io::Error::new(std::io::ErrorKind::Interrupted, "interrupted")),
        false => Ok(()),
    }
}

static REGISTRY: Mutex<Registry> =
    Mutex::new(Registry { dirs: Vec::new(), empty_dirs: Vec::new(), children: Vec::new() });

/// The registry, even if a thread panicked while it held the lock (the lists stay valid).
fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn lock(child: &Mutex<Child>) -> MutexGuard<'_, Child> {
    child.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A directory of scratch files, made under a parent, removed with everything in it when
/// dropped.
#[derive(Debug)]
pub struct ScratchDir {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
}

impl ScratchDir {
    /// Makes `parent` (if missing) and a new directory in it named `prefix` and random
    /// characters.
    pub fn new_in(parent: &Path, prefix: &str) -> std::io::Result<ScratchDir> {
        std::fs::create_dir_all(parent)?;
        let mut registry = registry();
        refuse_when_closed()?;
        let dir = tempfile::Builder::new().prefix(prefix).tempdir_in(parent)?;
        let path = dir.path().to_path_buf();
        registry.dirs.push(path.clone());
        Ok(ScratchDir { dir: Some(dir), path })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory now and says whether that worked (a drop says nothing).
    pub fn remove(mut self) -> std::io::Result<()> {
        self.unregister();
        match self.dir.take() {
            Some(dir) => dir.close(),
            None => Ok(()),
        }
    }

    fn unregister(&self) {
        registry().dirs.retain(|dir| dir != &self.path);
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        self.unregister();
        // The TempDir's own drop removes the directory.
    }
}

/// A child process that `remove_all` kills (and waits for) before it removes the scratch
/// directories.
pub struct WatchedChild {
    id: u32,
    child: Arc<Mutex<Child>>,
}

impl WatchedChild {
    /// Starts `command` and registers the child.
    pub fn spawn(command: &mut Command) -> std::io::Result<WatchedChild> {
        // Under the lock, so `remove_all` sees every child started before it closed.
        let mut registry = registry();
        refuse_when_closed()?;
        let child = command.spawn()?;
        let id = child.id();
        let child = Arc::new(Mutex::new(child));
        registry.children.push((id, Arc::clone(&child)));
        Ok(WatchedChild { id, child })
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Its exit status if it has exited.
    pub fn try_wait(&self) -> std::io::Result<Option<ExitStatus>> {
        lock(&self.child).try_wait()
    }

    /// Waits for it to exit.
    pub fn wait(&self) -> std::io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(CHILD_POLL);
        }
    }
}

impl Drop for WatchedChild {
    fn drop(&mut self) {
        registry().children.retain(|(id, _)| *id != self.id);
    }
}

/// A directory someone else made and removes (a memory cgroup's), which `remove_all` also
/// removes, with `rmdir` only, once the children are gone. Registered until dropped.
pub struct EmptyDirOnInterrupt {
    path: PathBuf,
}

impl EmptyDirOnInterrupt {
    /// Registers `path`.
    pub fn register(path: &Path) -> EmptyDirOnInterrupt {
        registry().empty_dirs.push(path.to_path_buf());
        EmptyDirOnInterrupt { path: path.to_path_buf() }
    }
}

impl Drop for EmptyDirOnInterrupt {
    fn drop(&mut self) {
        registry().empty_dirs.retain(|dir| dir != &self.path);
    }
}

/// Kills every registered child, waits for it, then removes every registered scratch
/// directory (and empty directory); returns the directories it could not remove. For an interrupt handler: the
/// process exits right after.
pub fn remove_all() -> Vec<PathBuf> {
    let mut registry = registry();
    CLOSED.store(true, Ordering::Release);
    for (_, child) in registry.children.drain(..) {
        let mut child = lock(&child);
        // SIGKILL: an exited child makes these fail, which is fine.
        let _ = child.kill();
        let _ = child.wait();
    }
    let mut left = Vec::new();
    for dir in registry.dirs.drain(..) {
        let removed = (0..REMOVE_ATTEMPTS).any(|attempt| {
            if attempt > 0 {
                std::thread::sleep(CHILD_POLL);
            }
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => true,
                Err(e) => e.kind() == std::io::ErrorKind::NotFound,
            }
        });
        if !removed {
            left.push(dir);
        }
    }
    for dir in registry.empty_dirs.drain(..) {
        match std::fs::remove_dir(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => left.push(dir),
            _ => {}
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;

    // `remove_all` empties the registry of the whole process, other tests' directories
    // included: crates/cli/tests/interrupt.rs checks it on a process of its own.
    #[test]
    fn a_scratch_dir_goes_on_drop_on_remove_and_on_a_panic() {
        let parent = tempfile::tempdir().expect("parent");
        let dropped = ScratchDir::new_in(parent.path(), "tierkv-test-").expect("scratch");
        let path = dropped.path().to_path_buf();
        std::fs::write(path.join("file"), b"x").expect("write");
        assert!(path.file_name().expect("name").to_string_lossy().starts_with("tierkv-test-"));
        drop(dropped);
        assert!(!path.exists());
        let removed = ScratchDir::new_in(parent.path(), "tierkv-test-").expect("scratch");
        let path = removed.path().to_path_buf();
        removed.remove().expect("remove");
        assert!(!path.exists());
        let in_panic = std::panic::catch_unwind(|| {
            let scratch = ScratchDir::new_in(parent.path(), "tierkv-test-").expect("scratch");
            std::fs::create_dir(scratch.path().join("store")).expect("mkdir");
            panic!("{}", scratch.path().display());
        });
        let message = in_panic.expect_err("panicked");
        let path = message.downcast_ref::<String>().expect("message");
        assert!(!Path::new(path).exists(), "{path}");
        assert!(!registry().dirs.iter().any(|dir| dir.starts_with(parent.path())));
    }

    #[test]
    fn an_empty_dir_is_registered_until_dropped() {
        let parent = tempfile::tempdir().expect("parent");
        let registered = EmptyDirOnInterrupt::register(parent.path());
        assert!(registry().empty_dirs.iter().any(|dir| dir == parent.path()));
        drop(registered);
        assert!(!registry().empty_dirs.iter().any(|dir| dir == parent.path()));
    }

    #[test]
    fn a_watched_child_is_registered_until_dropped() {
        let child = WatchedChild::spawn(&mut Command::new("true")).expect("true");
        assert!(registry().children.iter().any(|(id, _)| *id == child.id()));
        assert!(child.wait().expect("wait").success());
        let id = child.id();
        drop(child);
        assert!(!registry().children.iter().any(|(other, _)| *other == id));
    }
}
