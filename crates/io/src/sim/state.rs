//! The simulated file system's state: the base image, the live image and the operation log.
//!
//! Every mutating call appends one `LogOp` and applies the same op to the live image, through
//! the same `apply` functions the crash replay uses. That shared code is why a `KeepAll` crash
//! image equals the live state.
//!
//! Invariants:
//! 1. `live` == `base` with every op of `log` applied in order (failed syncs change nothing
//!    live; they only lose pending data in the replay).
//! 2. Inodes are never removed from `live.inodes`: an open handle keeps its inode after the
//!    name is removed or renamed, as on POSIX.
//! 3. Every file and directory of `live` has a parent directory in `live` (or the root).
//!
//! Must never: record an op for a call that failed (an injected fault has no effect), except
//! a failed sync or persist, whose loss of pending data is itself an effect.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::contents::Contents;
use super::{FaultPlan, SimOpInfo, SimOpKind};
use crate::{Error, Op, Result};

/// Identity of a simulated file, independent of its names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct InodeId(pub(crate) u64);

/// A shared slice of bytes: pieces of one write share the caller's copy.
#[derive(Clone)]
pub(crate) struct Bytes {
    data: Arc<[u8]>,
    start: usize,
    end: usize,
}

impl Bytes {
    pub(crate) fn new(data: &[u8]) -> Bytes {
        Bytes { data: Arc::from(data), start: 0, end: data.len() }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }

    /// The sub-slice `[from, to)`, relative to this slice.
    pub(crate) fn slice(&self, from: usize, to: usize) -> Bytes {
        assert!(from <= to && to <= self.len(), "slice {from}..{to} of {} bytes", self.len());
        Bytes { data: Arc::clone(&self.data), start: self.start + from, end: self.start + to }
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes", self.len())
    }
}

/// A change to one inode's bytes or size.
#[derive(Clone, Debug)]
pub(crate) enum DataOp {
    /// Bytes written at `offset`. `store` marks persistent-memory stores (a `pmem` handle's
    /// writes and 8-byte stores), which the crash models treat per cache line.
    Write { offset: u64, bytes: Bytes, store: bool },
    /// A size change. `grow` marks chunk growth (fallocate), which only ever extends; an exact
    /// `set_len` (ftruncate) may shrink.
    SetLen { len: u64, grow: bool },
}

impl DataOp {
    pub(crate) fn apply(&self, contents: &mut Contents) {
        match self {
            DataOp::Write { offset, bytes, .. } => contents.write(*offset, bytes.as_slice()),
            DataOp::SetLen { len, grow: true } => {
                if *len > contents.len() {
                    contents.set_len(*len);
                }
            }
            DataOp::SetLen { len, grow: false } => contents.set_len(*len),
        }
    }
}

/// A change to the namespace. Each names the inode it concerns, so that a replay in which an
/// earlier op was dropped never removes or moves a different file of the same name.
#[derive(Clone, Debug)]
pub(crate) enum NsOp {
    CreateDir { path: PathBuf },
    RemoveDir { path: PathBuf },
    Create { path: PathBuf, inode: InodeId },
    Rename { from: PathBuf, to: PathBuf, inode: InodeId },
    Remove { path: PathBuf, inode: InodeId },
}

impl NsOp {
    pub(crate) fn apply(&self, ns: &mut Namespace) {
        match self {
            NsOp::CreateDir { path } => {
                ns.dirs.insert(path.clone());
            }
            NsOp::RemoveDir { path } => {
                ns.dirs.remove(path);
            }
            NsOp::Create { path, inode } => {
                ns.files.insert(path.clone(), *inode);
            }
            NsOp::Rename { from, to, inode } => {
                if ns.files.get(from) == Some(inode) {
                    ns.files.remove(from);
                }
                ns.files.insert(to.clone(), *inode);
            }
            NsOp::Remove { path, inode } => {
                if ns.files.get(path) == Some(inode) {
                    ns.files.remove(path);
                }
            }
        }
    }

    /// The directory entries this op changes.
    pub(crate) fn paths(&self) -> [Option<&Path>; 2] {
        match self {
            NsOp::CreateDir { path }
            | NsOp::RemoveDir { path }
            | NsOp::Create { path, .. }
            | NsOp::Remove { path, .. } => [Some(path), None],
            NsOp::Rename { from, to, .. } => [Some(from), Some(to)],
        }
    }

    /// True when an fsync of `dir` makes this op durable: `dir` holds one of its entries.
    pub(crate) fn is_in_dir(&self, dir: &Path) -> bool {
        self.paths().into_iter().flatten().any(|path| parent_of(path) == Some(dir))
    }
}

/// One recorded operation.
#[derive(Clone, Debug)]
pub(crate) enum LogOp {
    Ns(NsOp),
    Data {
        inode: InodeId,
        path: Arc<Path>,
        op: DataOp,
    },
    /// fdatasync or fsync. A failed sync loses the inode's pending data for good.
    Sync {
        inode: InodeId,
        path: Arc<Path>,
        failed: bool,
    },
    /// Makes `[offset, offset + len)`, widened to `granularity_bytes`, durable.
    /// `sizes_durable`: the persist also makes pending size changes durable, as msync and
    /// fdatasync do and a cache-line flush does not.
    Persist {
        inode: InodeId,
        path: Arc<Path>,
        offset: u64,
        len: u64,
        granularity_bytes: u64,
        sizes_durable: bool,
        failed: bool,
    },
    SyncDir {
        path: PathBuf,
    },
}

impl LogOp {
    pub(crate) fn info(&self, index: u64) -> SimOpInfo {
        let (kind, path, failed) = match self {
            LogOp::Ns(NsOp::CreateDir { path }) => (SimOpKind::CreateDir, &**path, false),
            LogOp::Ns(NsOp::RemoveDir { path }) => (SimOpKind::RemoveDir, &**path, false),
            LogOp::Ns(NsOp::Create { path, .. }) => (SimOpKind::Create, &**path, false),
            LogOp::Ns(NsOp::Rename { from, .. }) => (SimOpKind::Rename, &**from, false),
            LogOp::Ns(NsOp::Remove { path, .. }) => (SimOpKind::Remove, &**path, false),
            LogOp::Data { path, op: DataOp::Write { store: true, .. }, .. } => {
                (SimOpKind::Store, &**path, false)
            }
            LogOp::Data { path, op: DataOp::Write { store: false, .. }, .. } => {
                (SimOpKind::Write, &**path, false)
            }
            LogOp::Data { path, op: DataOp::SetLen { .. }, .. } => {
                (SimOpKind::SetLen, &**path, false)
            }
            LogOp::Sync { path, failed, .. } => (SimOpKind::Sync, &**path, *failed),
            LogOp::Persist { path, failed, .. } => (SimOpKind::Persist, &**path, *failed),
            LogOp::SyncDir { path } => (SimOpKind::SyncDir, &**path, false),
        };
        SimOpInfo { index, kind, path: path.to_path_buf(), failed }
    }
}

/// The parent directory of an entry; `None` for the root. A relative single name has the
/// empty path as parent, which `Namespace::is_dir` treats as the root.
pub(crate) fn parent_of(path: &Path) -> Option<&Path> {
    path.parent()
}

/// Names: directories and files (path to inode).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Namespace {
    pub(crate) dirs: BTreeSet<PathBuf>,
    pub(crate) files: BTreeMap<PathBuf, InodeId>,
}

impl Namespace {
    /// The root (`/`, or the empty path that relative names hang from) always exists.
    pub(crate) fn is_dir(&self, path: &Path) -> bool {
        path.parent().is_none() || self.dirs.contains(path)
    }

    pub(crate) fn is_file(&self, path: &Path) -> bool {
        self.files.contains_key(path)
    }

    /// True when `path`'s parent directory exists.
    pub(crate) fn has_parent(&self, path: &Path) -> bool {
        parent_of(path).is_none_or(|parent| self.is_dir(parent))
    }

    /// Drops every entry that cannot be reached from the root (its directory was not made
    /// durable), and a file whose name is also a directory. Used on crash images only.
    pub(crate) fn prune_unreachable(&mut self) {
        // Sorted order visits a directory before anything beneath it.
        let mut kept = BTreeSet::new();
        for dir in &self.dirs {
            if parent_of(dir)
                .is_none_or(|parent| parent.parent().is_none() || kept.contains(parent))
            {
                kept.insert(dir.clone());
            }
        }
        self.dirs = kept;
        let dirs = &self.dirs;
        self.files.retain(|path, _| {
            !dirs.contains(path)
                && parent_of(path)
                    .is_none_or(|parent| parent.parent().is_none() || dirs.contains(parent))
        });
    }
}

/// A whole file system: names plus the bytes of every inode.
#[derive(Clone, Debug, Default)]
pub(crate) struct Image {
    pub(crate) ns: Namespace,
    pub(crate) inodes: BTreeMap<InodeId, Contents>,
}

impl Image {
    /// Drops inodes no name refers to. Only for images no handle is open on.
    pub(crate) fn collect_garbage(&mut self) {
        let live: BTreeSet<InodeId> = self.ns.files.values().copied().collect();
        self.inodes.retain(|inode, _| live.contains(inode));
    }

    pub(crate) fn contents(&self, inode: InodeId) -> &Contents {
        match self.inodes.get(&inode) {
            Some(contents) => contents,
            None => panic!("simulated inode {} has no contents (invariant 2)", inode.0),
        }
    }

    pub(crate) fn contents_mut(&mut self, inode: InodeId) -> &mut Contents {
        match self.inodes.get_mut(&inode) {
            Some(contents) => contents,
            None => panic!("simulated inode {} has no contents (invariant 2)", inode.0),
        }
    }
}

/// Injected failures `State::injected` keeps, at most (a persistent plan fails every later
/// call).
const MAX_INJECTED_KEPT: usize = 64;

/// Everything behind one `SimFs`.
#[derive(Default)]
pub(crate) struct State {
    /// Where replays start: empty, or the crash image this file system was made from.
    pub(crate) base: Arc<Image>,
    /// What reads see.
    pub(crate) live: Image,
    pub(crate) log: Vec<Arc<LogOp>>,
    /// Calls counted so far (see `SimFs::calls`).
    pub(crate) calls: u64,
    pub(crate) fault: Option<FaultPlan>,
    pub(crate) next_inode: u64,
    /// Files a `FileLock` holds (`SimFs::lock_file`): the number of shared holders, or -1
    /// for an exclusive one; a crash image starts with none, as a process that died holds
    /// none.
    pub(crate) locks: BTreeMap<PathBuf, i64>,
    /// The calls the fault plan failed: number, op and path, in order.
    pub(crate) injected: Vec<(u64, Op, PathBuf)>,
    /// Directories mounted read-only (`SimFs::set_read_only`): nothing at or under them may
    /// be created, opened for writing, renamed or removed.
    pub(crate) read_only: BTreeSet<PathBuf>,
}

impl State {
    pub(crate) fn from_image(image: Image) -> State {
        let next_inode = image.inodes.keys().next_back().map_or(0, |inode| inode.0 + 1);
        State {
            base: Arc::new(image.clone()),
            live: image,
            log: Vec::new(),
            calls: 0,
            fault: None,
            next_inode,
            locks: BTreeMap::new(),
            injected: Vec::new(),
            read_only: BTreeSet::new(),
        }
    }

    /// Counts one call and fails it if the fault plan says so. Every simulated I/O call starts
    /// here, before checking its arguments, so call N of a plan always fails with `Injected`.
    pub(crate) fn begin_call(&mut self, op: Op, path: &Path) -> Result<()> {
        self.calls += 1;
        let call = self.calls;
        let Some(plan) = self.fault else { return Ok(()) };
        let hit = match plan.only {
            None => call == plan.call || (plan.persistent && call > plan.call),
            Some(only) => only == op && call >= plan.call,
        };
        if hit {
            if plan.only.is_some() && !plan.persistent {
                // `once` restricted to an op: the first such call at or after `call` fails.
                self.fault = None;
            }
            if self.injected.len() < MAX_INJECTED_KEPT {
                self.injected.push((call, op, path.to_path_buf()));
            }
            return Err(Error::Injected { op, path: path.to_path_buf(), errno: plan.errno, call });
        }
        Ok(())
    }

    /// EROFS when `path` lies in a directory mounted read-only.
    pub(crate) fn check_writable(&self, op: Op, path: &Path) -> Result<()> {
        if self.read_only.iter().any(|dir| path.starts_with(dir)) {
            return Err(Error::from_errno(op, path, libc::EROFS));
        }
        Ok(())
    }

    /// Records an op and applies it to the live image.
    pub(crate) fn record(&mut self, op: LogOp) {
        match &op {
            LogOp::Ns(ns_op) => ns_op.apply(&mut self.live.ns),
            LogOp::Data { inode, op: data_op, .. } => {
                data_op.apply(self.live.contents_mut(*inode));
            }
            LogOp::Sync { .. } | LogOp::Persist { .. } | LogOp::SyncDir { .. } => {}
        }
        self.log.push(Arc::new(op));
    }

    pub(crate) fn new_inode(&mut self) -> InodeId {
        let inode = InodeId(self.next_inode);
        self.next_inode += 1;
        let previous = self.live.inodes.insert(inode, Contents::default());
        assert!(previous.is_none(), "simulated inode {} allocated twice", inode.0);
        inode
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimState")
            .field("dirs", &self.live.ns.dirs.len())
            .field("files", &self.live.ns.files.len())
            .field("ops", &self.log.len())
            .field("calls", &self.calls)
            .field("fault", &self.fault)
            .finish()
    }
}

/// An `Error::Io` carrying a raw OS error number, for the errors that have no variant of their
/// own (EEXIST, EISDIR, ENOTDIR).
pub(crate) fn os_error(op: Op, path: &Path, errno: i32) -> Error {
    Error::Io { op, path: path.to_path_buf(), source: std::io::Error::from_raw_os_error(errno) }
}
