//! The simulated backend: an in-memory file system that records every write, size change,
//! sync, persist and namespace change, so tests can build crash images and inject faults.
//!
//! Modelled on SQLite's crash VFS (test6.c) and RocksDB's FaultInjectionTestFS. A `SimFs` keeps
//! a base image (empty, or the crash image it was made from), a live image that reads see, and
//! an ordered log of ops. A crash image replays a prefix of the log (`replay`), tracking what
//! was made durable by `sync_data`, `persist` and `sync_dir`, and keeps, drops or tears the
//! rest according to a `CrashModel` and a seed.
//!
//! Each `SimFile` behaves like the OS backend's (the `File` contract in `file.rs`): exact reads,
//! growth in chunks, the same errors, and the same `IoStats` counters. Its `len` is always the
//! live size (there is no stale per-handle view to model), and `direct` enforces 4 KiB
//! alignment whatever the file system would allow.
//!
//! Invariants:
//! 1. One mutex orders everything: the log order is the order calls took the lock, and each
//!    call is counted, checked against the fault plan and applied under that one lock.
//! 2. A call that fails (injected fault or bad argument) changes nothing, except that a failed
//!    sync or persist loses the inode's pending data in the replay (Linux marks pages clean
//!    after a failed fsync), while reads still see it.
//! 3. The same log prefix, model and seed give the same image, byte for byte.
//!
//! Must never: claim durability the real backend would not give (a persist of a range makes
//! only that range durable, a create or rename is durable only after `sync_dir` of its
//! directory), or panic on any call a test can make through `Storage` and `File`.

mod contents;
mod replay;
mod state;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::pmem::{CACHE_LINE_BYTES, NT_THRESHOLD_BYTES};
use crate::{
    checked_end, checked_size, checked_u64_slot, chunk_target, AccessMethod, AlignedItem, Error,
    FaultErrno, GrowthStrategy, IoStats, Op, OpenOptions, PmemMode, Result,
};
use replay::Replay;
use state::{os_error, Bytes, DataOp, Image, InodeId, LogOp, NsOp, State};

/// O_DIRECT alignment the simulated `direct` method enforces (buffer address, offset, length),
/// the strictest common value, so code that passes here passes on 4 KiB-sector devices.
const DIRECT_ALIGN_BYTES: u64 = 4096;

/// Persist granularity of the `pmem` method: one cache line.
const PMEM_GRANULARITY_BYTES: u64 = CACHE_LINE_BYTES as u64;

/// Persist granularity of every other method: msync and writeback work on 4 KiB pages.
const PAGE_GRANULARITY_BYTES: u64 = 4096;

/// Name of the environment variable that overrides test seeds (`seed_from_env`).
const SEED_ENV: &str = "TIERKV_SEED";

/// A simulated file system. Clones share one file system.
#[derive(Clone, Debug, Default)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
}

/// A fault to inject: simulated call number `call` (1-based, counted since the `SimFs` was
/// made; see `SimFs::calls`) fails, and with `persistent` every later call fails too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultPlan {
    /// The 1-based call number to fail.
    pub call: u64,
    /// Fail every call from `call` on, not just that one.
    pub persistent: bool,
    /// The error.
    pub errno: FaultErrno,
    /// Only calls doing this op can fail (all calls are still counted); `None`: any call.
    pub only: Option<Op>,
}

impl FaultPlan {
    /// Fails call `call` only; earlier and later calls succeed.
    pub fn once(call: u64, errno: FaultErrno) -> FaultPlan {
        assert!(call >= 1, "simulated call numbers start at 1");
        FaultPlan { call, persistent: false, errno, only: None }
    }

    /// Fails call `call` and every call after it (a device that died).
    pub fn from_call(call: u64, errno: FaultErrno) -> FaultPlan {
        assert!(call >= 1, "simulated call numbers start at 1");
        FaultPlan { call, persistent: true, errno, only: None }
    }

    /// `from_call` when `persistent`, else `once`: for sweeps that try both.
    pub fn at(call: u64, errno: FaultErrno, persistent: bool) -> FaultPlan {
        if persistent {
            FaultPlan::from_call(call, errno)
        } else {
            FaultPlan::once(call, errno)
        }
    }

    /// Restricts the plan to calls doing `op` (every call is still counted): with `once`, the
    /// first such call at or after `call` fails; with `from_call`, every such call from `call`
    /// on fails (for example, `Op::Allocate` for a file system that has run out of space for
    /// growth while writes into allocated blocks still work).
    pub fn only(mut self, op: Op) -> FaultPlan {
        self.only = Some(op);
        self
    }
}

/// The granularity at which `CrashModel::Torn` tears a pending write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TearSize {
    /// 8 bytes: no atomicity beyond a machine word.
    B8,
    /// 256 bytes.
    B256,
    /// 512 bytes: one legacy sector.
    B512,
    /// 4 KiB: one page or modern sector.
    K4,
}

impl TearSize {
    /// Every tear size, smallest first.
    pub const ALL: [TearSize; 4] = [TearSize::B8, TearSize::B256, TearSize::B512, TearSize::K4];

    /// The size in bytes.
    pub fn bytes(self) -> u64 {
        match self {
            TearSize::B8 => 8,
            TearSize::B256 => 256,
            TearSize::B512 => 512,
            TearSize::K4 => 4096,
        }
    }
}

/// What happens at a crash to what was not yet durable. Pmem stores follow a per-cache-line
/// model under every model but `KeepAll` and `DropAll` (see the variants).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CrashModel {
    /// Every pending op survives, as after a process crash.
    KeepAll,
    /// No pending op survives: only what was synced, persisted or dir-synced.
    DropAll,
    /// Each pending op (data or namespace) independently survives with probability 1/2.
    Subset,
    /// A random cut over the global order of pending ops: ops before it survive.
    Prefix,
    /// Each pending write is torn into pieces aligned to this size; each piece is old or new.
    /// Pending size changes and namespace ops survive with probability 1/2.
    Torn(TearSize),
}

impl CrashModel {
    /// Every model, with every tear size.
    pub const ALL: [CrashModel; 8] = [
        CrashModel::KeepAll,
        CrashModel::DropAll,
        CrashModel::Subset,
        CrashModel::Prefix,
        CrashModel::Torn(TearSize::B8),
        CrashModel::Torn(TearSize::B256),
        CrashModel::Torn(TearSize::B512),
        CrashModel::Torn(TearSize::K4),
    ];

    /// The models a crash sweep of block-sized writes cycles over the images of each point:
    /// tears at 512 B and 4 KiB twice as often as the others, then 8 B, subsets, prefixes
    /// and nothing kept.
    pub const SWEEP: [CrashModel; 8] = [
        CrashModel::Torn(TearSize::B512),
        CrashModel::Torn(TearSize::K4),
        CrashModel::Torn(TearSize::B8),
        CrashModel::Subset,
        CrashModel::Prefix,
        CrashModel::Torn(TearSize::B512),
        CrashModel::Torn(TearSize::K4),
        CrashModel::DropAll,
    ];
}

impl fmt::Display for CrashModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CrashModel::KeepAll => f.write_str("keep-all"),
            CrashModel::DropAll => f.write_str("drop-all"),
            CrashModel::Subset => f.write_str("subset"),
            CrashModel::Prefix => f.write_str("prefix"),
            CrashModel::Torn(size) => write!(f, "torn-{}", size.bytes()),
        }
    }
}

/// The kind of a recorded op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SimOpKind {
    /// A file was created.
    Create,
    /// A directory was created (one op per missing component).
    CreateDir,
    /// An empty directory was removed.
    RemoveDir,
    /// Bytes written through a non-pmem handle.
    Write,
    /// Bytes stored through a pmem handle (writes and `store_u64`).
    Store,
    /// A size change: chunk growth, `reserve` or `set_len`.
    SetLen,
    /// `sync_data` or `sync_all`.
    Sync,
    /// `persist` of a range.
    Persist,
    /// A rename.
    Rename,
    /// A file removal.
    Remove,
    /// `sync_dir`.
    SyncDir,
}

/// One recorded op, for tests that choose crash points by kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimOpInfo {
    /// Position in the log: crashing at `index` replays the ops before this one.
    pub index: u64,
    /// What the op was.
    pub kind: SimOpKind,
    /// The file or directory (for a rename, the source; for data ops, the path the handle
    /// was opened with).
    pub path: PathBuf,
    /// A sync or persist that failed by injection: it lost the inode's pending data.
    pub failed: bool,
}

/// The visible contents of a simulated file system, for comparing images.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SimSnapshot {
    /// Every directory except the root.
    pub dirs: BTreeSet<PathBuf>,
    /// Every file and its bytes.
    pub files: BTreeMap<PathBuf, Vec<u8>>,
}

impl fmt::Debug for SimSnapshot {
    /// Files as length and CRC32C: a failed comparison of megabyte files stays readable.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let files: BTreeMap<&Path, String> = self
            .files
            .iter()
            .map(|(path, bytes)| {
                (
                    path.as_path(),
                    format!("{} bytes, crc32c {:08x}", bytes.len(), crate::crc32c(bytes)),
                )
            })
            .collect();
        f.debug_struct("SimSnapshot").field("dirs", &self.dirs).field("files", &files).finish()
    }
}

impl SimFs {
    /// An empty file system: only the root directory exists.
    pub fn new() -> SimFs {
        SimFs::default()
    }

    fn from_image(image: Image) -> SimFs {
        SimFs { state: Arc::new(Mutex::new(State::from_image(image))) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic under the lock is an assertion failure in a test; the state is still
        // readable for the report, so poisoning is ignored.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets or clears the fault plan. Call numbers count from the creation of this `SimFs`.
    pub fn set_fault(&self, plan: Option<FaultPlan>) {
        self.lock().fault = plan;
    }

    /// Mounts `dir` read-only (or read-write again): from now on, creating, opening for
    /// writing, renaming or removing anything at or under it fails with EROFS, as on a
    /// read-only file system. Handles open already keep working.
    pub fn set_read_only(&self, dir: impl AsRef<Path>, read_only: bool) {
        let mut state = self.lock();
        let dir = dir.as_ref().to_path_buf();
        if read_only {
            state.read_only.insert(dir);
        } else {
            state.read_only.remove(&dir);
        }
    }

    /// The calls the fault plan failed so far (the first 64): number, op and path.
    pub fn injected(&self) -> Vec<(u64, Op, PathBuf)> {
        self.lock().injected.clone()
    }

    /// The number of simulated I/O calls made so far, failed ones included.
    pub fn calls(&self) -> u64 {
        self.lock().calls
    }

    /// The number of recorded ops. Crash points are `0..=op_count()`.
    pub fn op_count(&self) -> u64 {
        self.lock().log.len() as u64
    }

    /// Every recorded op, in log order.
    pub fn ops(&self) -> Vec<SimOpInfo> {
        let state = self.lock();
        state.log.iter().zip(0u64..).map(|(op, index)| op.info(index)).collect()
    }

    /// The current contents of a file, as reads see them. Not counted as a call.
    pub fn read_file(&self, path: impl AsRef<Path>) -> Result<Vec<u8>> {
        let path = path.as_ref();
        let state = self.lock();
        match state.live.ns.files.get(path) {
            Some(&inode) => Ok(state.live.contents(inode).to_vec()),
            None if state.live.ns.is_dir(path) => Err(os_error(Op::Read, path, libc::EISDIR)),
            None => Err(Error::NotFound { op: Op::Read, path: path.to_path_buf() }),
        }
    }

    /// Every directory and file with its current contents. Not counted as a call.
    pub fn snapshot(&self) -> SimSnapshot {
        let state = self.lock();
        let ns = &state.live.ns;
        SimSnapshot {
            dirs: ns.dirs.clone(),
            files: ns
                .files
                .iter()
                .map(|(path, &inode)| (path.clone(), state.live.contents(inode).to_vec()))
                .collect(),
        }
    }

    /// The file system after a crash just before op `at_op` (`0..=op_count()`): ops
    /// `[0, at_op)` are replayed, and what they left pending is kept, dropped or torn by
    /// `model` with `seed`. The result has this image as its base, an empty log, no calls
    /// counted and no fault plan.
    ///
    /// # Panics
    /// If `at_op > op_count()`: a crash point past the log is a bug in the test.
    pub fn crash_image(&self, at_op: u64, model: CrashModel, seed: u64) -> SimFs {
        let mut replay = self.crash_replay();
        assert!(
            at_op <= replay.len(),
            "crash point {at_op} is past the end of the log ({} ops)",
            replay.len()
        );
        for _ in 0..at_op {
            replay.advance();
        }
        replay.image(model, seed)
    }

    /// A replay of the log as it is now, positioned before the first op. Advancing it op by op
    /// and taking images is cheaper than calling `crash_image` at every point.
    pub fn crash_replay(&self) -> CrashReplay {
        let state = self.lock();
        CrashReplay { replay: Replay::new(&state.base), log: state.log.clone(), position: 0 }
    }

    /// Locks `path` as `Storage::lock_file` (exclusive: opened, created when missing) or
    /// `Storage::lock_file_shared` (shared: opened read-only, never created) do on the OS:
    /// `Locked` while a lock that conflicts is held.
    pub(crate) fn lock_file(&self, path: &Path, shared: bool) -> Result<()> {
        let open = OpenOptions::new(AccessMethod::Syscall);
        let open = if shared { open.read_only(true) } else { open.create(true) };
        drop(self.open(path, &open)?);
        let mut state = self.lock();
        let holders = state.locks.entry(path.to_path_buf()).or_insert(0);
        // A count of shared holders, or -1 for the one exclusive holder.
        match (shared, *holders) {
            (true, count) if count >= 0 => *holders = count + 1,
            (false, 0) => *holders = -1,
            _ => return Err(Error::Locked { path: path.to_path_buf() }),
        }
        Ok(())
    }

    /// Releases a lock `lock_file` took.
    pub(crate) fn unlock_file(&self, path: &Path, shared: bool) {
        let mut state = self.lock();
        if let Some(holders) = state.locks.get_mut(path) {
            assert!(
                if shared { *holders > 0 } else { *holders == -1 },
                "unlock of a lock not held"
            );
            *holders = if shared { *holders - 1 } else { 0 };
            if *holders == 0 {
                state.locks.remove(path);
            }
        }
    }

    pub(crate) fn open(&self, path: &Path, options: &OpenOptions) -> Result<SimFile> {
        let mut state = self.lock();
        state.begin_call(Op::Open, path)?;
        if !options.read_only {
            state.check_writable(Op::Open, path)?;
        }
        let ns = &state.live.ns;
        if path.file_name().is_none() || ns.is_dir(path) {
            return Err(os_error(Op::Open, path, libc::EISDIR));
        }
        if !ns.has_parent(path) {
            return Err(parent_error(ns, Op::Open, path));
        }
        let inode = match ns.files.get(path) {
            Some(_) if options.create_new => return Err(os_error(Op::Open, path, libc::EEXIST)),
            Some(&inode) => inode,
            None if options.create || options.create_new => {
                let inode = state.new_inode();
                // CRASH: the name stays pending until `sync_dir` of the parent.
                state.record(LogOp::Ns(NsOp::Create { path: path.to_path_buf(), inode }));
                inode
            }
            None => return Err(Error::NotFound { op: Op::Open, path: path.to_path_buf() }),
        };
        drop(state);
        Ok(SimFile {
            fs: self.clone(),
            inode,
            path: Arc::from(path),
            method: options.method,
            read_only: options.read_only,
            chunk_bytes: options.chunk_bytes,
            growth: options.growth,
            stats: options.stats.clone().unwrap_or_default(),
        })
    }

    pub(crate) fn create_dir_all(&self, path: &Path) -> Result<()> {
        let mut state = self.lock();
        state.begin_call(Op::CreateDir, path)?;
        // Outermost first; the root (no parent) always exists.
        let mut missing: Vec<&Path> = Vec::new();
        for dir in path.ancestors().filter(|dir| dir.parent().is_some()) {
            if state.live.ns.is_dir(dir) {
                break;
            }
            if state.live.ns.is_file(dir) {
                let errno = if dir == path { libc::EEXIST } else { libc::ENOTDIR };
                return Err(os_error(Op::CreateDir, dir, errno));
            }
            missing.push(dir);
        }
        if let Some(first) = missing.last() {
            state.check_writable(Op::CreateDir, first)?;
        }
        for dir in missing.into_iter().rev() {
            state.record(LogOp::Ns(NsOp::CreateDir { path: dir.to_path_buf() }));
        }
        Ok(())
    }

    pub(crate) fn remove_dir(&self, path: &Path) -> Result<()> {
        let mut state = self.lock();
        state.begin_call(Op::RemoveDir, path)?;
        state.check_writable(Op::RemoveDir, path)?;
        let ns = &state.live.ns;
        if !ns.is_dir(path) {
            if ns.is_file(path) {
                return Err(os_error(Op::RemoveDir, path, libc::ENOTDIR));
            }
            return Err(Error::NotFound { op: Op::RemoveDir, path: path.to_path_buf() });
        }
        let occupied = ns.files.keys().chain(ns.dirs.iter()).any(|p| p.parent() == Some(path));
        if occupied {
            return Err(os_error(Op::RemoveDir, path, libc::ENOTEMPTY));
        }
        // CRASH: until `sync_dir` of its parent, a crash may bring the directory back.
        state.record(LogOp::Ns(NsOp::RemoveDir { path: path.to_path_buf() }));
        Ok(())
    }

    pub(crate) fn remove_file(&self, path: &Path) -> Result<()> {
        let mut state = self.lock();
        state.begin_call(Op::Remove, path)?;
        state.check_writable(Op::Remove, path)?;
        let Some(&inode) = state.live.ns.files.get(path) else {
            if state.live.ns.is_dir(path) {
                return Err(os_error(Op::Remove, path, libc::EISDIR));
            }
            return Err(Error::NotFound { op: Op::Remove, path: path.to_path_buf() });
        };
        // CRASH: until `sync_dir`, a crash may bring the file back.
        state.record(LogOp::Ns(NsOp::Remove { path: path.to_path_buf(), inode }));
        Ok(())
    }

    pub(crate) fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut state = self.lock();
        state.begin_call(Op::Rename, from)?;
        state.check_writable(Op::Rename, from)?;
        state.check_writable(Op::Rename, to)?;
        let ns = &state.live.ns;
        let Some(&inode) = ns.files.get(from) else {
            if ns.is_dir(from) {
                return Err(Error::Io {
                    op: Op::Rename,
                    path: from.to_path_buf(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::Unsupported,
                        "the simulated backend renames files only, not directories",
                    ),
                });
            }
            return Err(Error::NotFound { op: Op::Rename, path: from.to_path_buf() });
        };
        if to.file_name().is_none() || ns.is_dir(to) {
            return Err(os_error(Op::Rename, from, libc::EISDIR));
        }
        if !ns.has_parent(to) {
            return Err(parent_error(ns, Op::Rename, to));
        }
        if from == to {
            // POSIX: renaming a file onto itself does nothing.
            return Ok(());
        }
        // CRASH: until `sync_dir` of a parent, a crash may undo the rename.
        state.record(LogOp::Ns(NsOp::Rename {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            inode,
        }));
        Ok(())
    }

    pub(crate) fn sync_dir(&self, path: &Path) -> Result<()> {
        let mut state = self.lock();
        state.begin_call(Op::SyncDir, path)?;
        if !state.live.ns.is_dir(path) {
            if state.live.ns.is_file(path) {
                return Err(os_error(Op::SyncDir, path, libc::ENOTDIR));
            }
            return Err(Error::NotFound { op: Op::SyncDir, path: path.to_path_buf() });
        }
        // CRASH: from here the entries of `path` (and what they depend on) are durable.
        state.record(LogOp::SyncDir { path: path.to_path_buf() });
        Ok(())
    }

    pub(crate) fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        let mut state = self.lock();
        state.begin_call(Op::ListDir, path)?;
        let ns = &state.live.ns;
        if !ns.is_dir(path) {
            if ns.is_file(path) {
                return Err(os_error(Op::ListDir, path, libc::ENOTDIR));
            }
            return Err(Error::NotFound { op: Op::ListDir, path: path.to_path_buf() });
        }
        let is_child = |entry: &&PathBuf| entry.parent() == Some(path);
        let mut names: Vec<String> = ns
            .dirs
            .iter()
            .chain(ns.files.keys())
            .filter(is_child)
            .filter_map(|entry| entry.file_name())
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    pub(crate) fn exists(&self, path: &Path) -> Result<bool> {
        let mut state = self.lock();
        state.begin_call(Op::Stat, path)?;
        Ok(state.live.ns.is_file(path) || state.live.ns.is_dir(path))
    }

    pub(crate) fn is_dir(&self, path: &Path) -> Result<bool> {
        let mut state = self.lock();
        state.begin_call(Op::Stat, path)?;
        Ok(state.live.ns.is_dir(path))
    }
}

/// The error for a path whose parent is missing (ENOENT) or is a file (ENOTDIR).
fn parent_error(ns: &state::Namespace, op: Op, path: &Path) -> Error {
    let parent_is_file = path.parent().is_some_and(|parent| ns.is_file(parent));
    if parent_is_file {
        return os_error(op, path, libc::ENOTDIR);
    }
    Error::NotFound { op, path: path.to_path_buf() }
}

/// An incremental crash replay over a snapshot of the log (see `SimFs::crash_replay`).
/// Clone it to branch: both copies advance independently.
#[derive(Clone)]
pub struct CrashReplay {
    replay: Replay,
    log: Vec<Arc<LogOp>>,
    position: u64,
}

impl CrashReplay {
    /// How many ops have been applied: an image now is a crash just before op `position()`.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The number of ops in the log snapshot.
    pub fn len(&self) -> u64 {
        self.log.len() as u64
    }

    /// True when the log snapshot has no ops.
    pub fn is_empty(&self) -> bool {
        self.log.is_empty()
    }

    /// Applies the next op; false (and nothing applied) at the end of the log.
    pub fn advance(&mut self) -> bool {
        let Some(op) = usize::try_from(self.position).ok().and_then(|at| self.log.get(at)) else {
            return false;
        };
        self.replay.apply(self.position, op);
        self.position += 1;
        true
    }

    /// The crash image at the current position (see `SimFs::crash_image`).
    pub fn image(&self, model: CrashModel, seed: u64) -> SimFs {
        SimFs::from_image(self.replay.image(model, seed))
    }
}

impl fmt::Debug for CrashReplay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CrashReplay {{ position: {}, len: {} }}", self.position, self.log.len())
    }
}

/// The seed in the `TIERKV_SEED` environment variable if set, else `default`. Panics when the
/// variable is set but not a number: silently ignoring a requested seed would rerun the wrong
/// case.
pub fn seed_from_env(default: u64) -> u64 {
    match std::env::var(SEED_ENV) {
        Ok(text) => {
            let text = text.trim();
            let parsed = match text.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => text.parse(),
            };
            match parsed {
                Ok(seed) => seed,
                Err(error) => panic!("{SEED_ENV}={text:?} is not a u64 seed: {error}"),
            }
        }
        Err(_) => default,
    }
}

/// Runs `f(seed)`. If it panics, prints the seed and how to rerun it to stderr, then resumes
/// the panic, so every failure of a seeded test says how to reproduce it.
pub fn with_seed<T>(label: &str, seed: u64, f: impl FnOnce(u64) -> T) -> T {
    match panic::catch_unwind(AssertUnwindSafe(|| f(seed))) {
        Ok(value) => value,
        Err(payload) => {
            eprintln!("sim failure in {label}: seed {seed} (rerun with {SEED_ENV}={seed})");
            panic::resume_unwind(payload)
        }
    }
}

/// A simulated open file. Holds its inode, so it keeps working after rename or removal.
#[derive(Debug)]
pub(crate) struct SimFile {
    fs: SimFs,
    inode: InodeId,
    path: Arc<Path>,
    method: AccessMethod,
    read_only: bool,
    chunk_bytes: u64,
    growth: GrowthStrategy,
    stats: Arc<IoStats>,
}

impl SimFile {
    /// Locks the file system, counts the call and applies the fault plan.
    fn begin(&self, op: Op) -> Result<MutexGuard<'_, State>> {
        let mut state = self.fs.lock();
        state.begin_call(op, &self.path)?;
        Ok(state)
    }

    fn check_writable(&self, op: Op) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnlyHandle { op, path: self.path.to_path_buf() });
        }
        Ok(())
    }

    /// The same rule as the OS backend's O_DIRECT check, with 4096 for every alignment.
    fn check_direct(&self, op: Op, address: usize, offset: u64, len: u64) -> Result<()> {
        if self.method != AccessMethod::Direct {
            return Ok(());
        }
        let unaligned = |item, value| Error::Unaligned {
            op,
            path: self.path.to_path_buf(),
            item,
            value,
            required: DIRECT_ALIGN_BYTES,
            reason: "O_DIRECT on this file",
        };
        if !(address as u64).is_multiple_of(DIRECT_ALIGN_BYTES) {
            return Err(unaligned(AlignedItem::BufferAddress, address as u64));
        }
        if !offset.is_multiple_of(DIRECT_ALIGN_BYTES) {
            return Err(unaligned(AlignedItem::Offset, offset));
        }
        if !len.is_multiple_of(DIRECT_ALIGN_BYTES) {
            return Err(unaligned(AlignedItem::Length, len));
        }
        Ok(())
    }

    fn data_op(&self, op: DataOp) -> LogOp {
        LogOp::Data { inode: self.inode, path: Arc::clone(&self.path), op }
    }

    /// Grows the file to the chunk boundary past `end` if it is shorter, then writes.
    fn write_locked(&self, state: &mut State, bytes: &[u8], offset: u64, end: u64) {
        let current = state.live.contents(self.inode).len();
        if end > current {
            let target = chunk_target(end, self.chunk_bytes);
            assert!(target >= end, "growth target {target} below the write end {end}");
            IoStats::bump(&self.stats.resize_syscalls);
            self.count_growth_call();
            state.record(self.data_op(DataOp::SetLen { len: target, grow: true }));
        }
        let store = self.method == AccessMethod::Pmem;
        state.record(self.data_op(DataOp::Write { offset, bytes: Bytes::new(bytes), store }));
        debug_assert!(state.live.contents(self.inode).len() >= end);
    }

    /// Counts one growth call the way the OS backend's strategy would make it.
    fn count_growth_call(&self) {
        match self.growth {
            GrowthStrategy::Allocate => IoStats::bump(&self.stats.fallocate_calls),
            GrowthStrategy::Truncate => IoStats::bump(&self.stats.ftruncate_calls),
        }
    }

    pub(crate) fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let state = self.begin(Op::Read)?;
        let len = buf.len() as u64;
        let end = checked_end(Op::Read, &self.path, offset, len)?;
        self.check_direct(Op::Read, buf.as_ptr() as usize, offset, len)?;
        let contents = state.live.contents(self.inode);
        if end > contents.len() {
            return Err(Error::ReadPastEnd {
                path: self.path.to_path_buf(),
                offset,
                len,
                file_len: contents.len(),
            });
        }
        contents.read(offset, buf);
        drop(state);
        IoStats::bump(&self.stats.reads);
        if self.method.is_mapped() {
            IoStats::add(&self.stats.read_bytes_mapped, len);
        } else {
            IoStats::add(&self.stats.read_bytes_syscall, len);
        }
        Ok(())
    }

    pub(crate) fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut state = self.begin(Op::Write)?;
        self.check_writable(Op::Write)?;
        let len = buf.len() as u64;
        let end = checked_end(Op::Write, &self.path, offset, len)?;
        self.check_direct(Op::Write, buf.as_ptr() as usize, offset, len)?;
        self.write_locked(&mut state, buf, offset, end);
        drop(state);
        IoStats::bump(&self.stats.writes);
        match self.method {
            AccessMethod::Syscall | AccessMethod::Direct => {
                IoStats::add(&self.stats.write_bytes_syscall, len);
            }
            AccessMethod::Mmap => IoStats::add(&self.stats.write_bytes_mapped, len),
            AccessMethod::Pmem => {
                IoStats::add(&self.stats.write_bytes_mapped, len);
                let nontemporal = pmem_nontemporal_bytes(offset, len);
                IoStats::add(&self.stats.write_bytes_nontemporal, nontemporal);
                // A copy that streamed ends with a fence, as in `pmem::copy_to_pmem`.
                IoStats::add(&self.stats.fences, u64::from(nontemporal > 0));
            }
        }
        Ok(())
    }

    pub(crate) fn len(&self) -> u64 {
        self.fs.lock().live.contents(self.inode).len()
    }

    pub(crate) fn set_len(&self, len: u64) -> Result<()> {
        let mut state = self.begin(Op::SetLen)?;
        self.check_writable(Op::SetLen)?;
        checked_size(Op::SetLen, &self.path, len)?;
        // CRASH: a shrink cuts pending writes for good; the size itself is pending until a
        // sync (or a non-pmem persist).
        state.record(self.data_op(DataOp::SetLen { len, grow: false }));
        IoStats::bump(&self.stats.resize_syscalls);
        IoStats::bump(&self.stats.ftruncate_calls);
        Ok(())
    }

    pub(crate) fn reserve(&self, len: u64) -> Result<()> {
        let mut state = self.begin(Op::Allocate)?;
        self.check_writable(Op::Allocate)?;
        checked_size(Op::Allocate, &self.path, len)?;
        if len > state.live.contents(self.inode).len() {
            let target = chunk_target(len, self.chunk_bytes);
            state.record(self.data_op(DataOp::SetLen { len: target, grow: true }));
            IoStats::bump(&self.stats.resize_syscalls);
            self.count_growth_call();
        }
        Ok(())
    }

    /// fdatasync and fsync: the simulated file has no metadata beyond its size, which both
    /// make durable.
    fn sync(&self) -> Result<()> {
        IoStats::bump(&self.stats.syncs);
        let mut state = self.fs.lock();
        let outcome = state.begin_call(Op::Sync, &self.path);
        // CRASH: a successful sync makes every pending write and size change of the inode
        // durable; a failed one loses them (invariant 2).
        let failed = outcome.is_err();
        state.record(LogOp::Sync { inode: self.inode, path: Arc::clone(&self.path), failed });
        outcome
    }

    pub(crate) fn sync_data(&self) -> Result<()> {
        self.sync()
    }

    pub(crate) fn sync_all(&self) -> Result<()> {
        self.sync()
    }

    pub(crate) fn persist(&self, offset: u64, len: u64) -> Result<()> {
        let mut state = self.fs.lock();
        let granularity_bytes = if self.method == AccessMethod::Pmem {
            PMEM_GRANULARITY_BYTES
        } else {
            PAGE_GRANULARITY_BYTES
        };
        let persist = |failed| LogOp::Persist {
            inode: self.inode,
            path: Arc::clone(&self.path),
            offset,
            len,
            granularity_bytes,
            // msync and fdatasync write the inode's size; a cache-line flush does not.
            sizes_durable: self.method != AccessMethod::Pmem,
            failed,
        };
        if let Err(error) = state.begin_call(Op::Persist, &self.path) {
            state.record(persist(true));
            return Err(error);
        }
        checked_end(Op::Persist, &self.path, offset, len)?;
        // CRASH: the range, widened to the granularity, is durable from here.
        state.record(persist(false));
        drop(state);
        IoStats::bump(&self.stats.persists);
        match self.method {
            AccessMethod::Pmem => {
                IoStats::add(&self.stats.lines_flushed, lines_touched(offset, len));
                IoStats::bump(&self.stats.fences);
            }
            AccessMethod::Mmap => IoStats::bump(&self.stats.msyncs),
            AccessMethod::Syscall | AccessMethod::Direct => IoStats::bump(&self.stats.syncs),
        }
        Ok(())
    }

    /// Each range is persisted as its own op: a crash between two of them is one the real
    /// flush order allows (lines are written back in any order until the fence).
    pub(crate) fn persist_ranges(&self, ranges: &[(u64, u64)]) -> Result<()> {
        ranges.iter().try_for_each(|&(offset, len)| self.persist(offset, len))
    }

    pub(crate) fn store_u64(&self, offset: u64, value: u64) -> Result<()> {
        let mut state = self.begin(Op::StoreU64)?;
        self.check_writable(Op::StoreU64)?;
        let end = checked_u64_slot(Op::StoreU64, &self.path, offset)?;
        // The OS backend checks a direct store as an 8-byte transfer, which O_DIRECT refuses.
        self.check_direct(Op::StoreU64, 0, offset, 8)?;
        self.write_locked(&mut state, &value.to_le_bytes(), offset, end);
        drop(state);
        IoStats::bump(&self.stats.atomic_stores);
        if !self.method.is_mapped() {
            // The syscall methods store with one pwrite, counted as a write.
            IoStats::bump(&self.stats.writes);
            IoStats::add(&self.stats.write_bytes_syscall, 8);
        }
        Ok(())
    }

    /// A hint changes nothing a crash may leave (unsynced writes may be on the device either
    /// way), so it is not an I/O point: it never crashes, fails or counts as a call.
    pub(crate) fn start_writeback(&self, offset: u64, len: u64) -> Result<()> {
        crate::checked_end(Op::Writeback, &self.path, offset, len)?;
        Ok(())
    }

    /// Resident memory is not simulated: only the range is checked.
    pub(crate) fn release_pages(&self, offset: u64, len: u64) -> Result<()> {
        crate::checked_end(Op::Advise, &self.path, offset, len)?;
        Ok(())
    }

    pub(crate) fn advise_dontneed(&self) -> Result<()> {
        let _state = self.begin(Op::Advise)?;
        Ok(())
    }

    pub(crate) fn method(&self) -> AccessMethod {
        self.method
    }

    /// The simulation models real persistent memory, where flush + fence is durable.
    pub(crate) fn pmem_mode(&self) -> Option<PmemMode> {
        (self.method == AccessMethod::Pmem).then_some(PmemMode::DaxMapSync)
    }

    pub(crate) fn direct_alignment(&self) -> Option<u64> {
        (self.method == AccessMethod::Direct).then_some(DIRECT_ALIGN_BYTES)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn stats_handle(&self) -> &Arc<IoStats> {
        &self.stats
    }
}

/// Cache lines overlapping `[offset, offset + len)`.
fn lines_touched(offset: u64, len: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    let line = PMEM_GRANULARITY_BYTES;
    let last = offset.saturating_add(len - 1) / line;
    last - offset / line + 1
}

/// The non-temporal bytes `pmem::copy_to_pmem` would report for a copy to file offset
/// `offset` (mappings are page aligned, so file offsets and addresses agree modulo a cache
/// line): the 64-byte aligned body of a copy of 256 B or more.
fn pmem_nontemporal_bytes(offset: u64, len: u64) -> u64 {
    let line = PMEM_GRANULARITY_BYTES;
    if len < NT_THRESHOLD_BYTES as u64 {
        return 0;
    }
    let head = ((line - offset % line) % line).min(len);
    (len - head) / line * line
}
