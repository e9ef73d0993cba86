//! `Db`: the store. Writes change the B+tree in place, in the buffer pool's frames; the
//! log makes them durable; checkpoints write the changed pages back as one atomic group.
//!
//! **Write path** (`write.rs`). A write (a `WriteBatch`; `put` and `delete` are batches of
//! one) latches its leaves, is appended to the log, which gives it its sequence number (the
//! LSN), records each key's before-image in the undo (not for a one-key write published
//! without waiting for the log while no snapshot lives: `snapshot::LiveSnapshots`), and
//! changes the leaves where they lie (`tree::write`), marking them dirty. For `Sync` the writer then waits for the log to make
//! it durable (group commit: one fdatasync for every writer waiting at that moment, or no
//! system call at all on the pmem backend), with no latch held. Only then is it
//! *published*: the visible sequence number passes it once every earlier write is
//! published too, so readers see writes in log order and a batch all at once.
//!
//! **Read path** (`snapshot.rs`). A reader takes the current `Version` (the tree's root and
//! a view of the undo) and the visible sequence number together, with no lock and no
//! reference count (`arc-swap`: the version loaded before and after the sequence, the same
//! both times): a snapshot (a point read borrows it for the read; `Snapshot` holds it). It
//! reads the tree's pages in place in their frames, optimistically, or loads one into a
//! frame itself on a miss; where a leaf changed after its sequence (the leaf's LSN is
//! above it), the undo gives what the keys held then. Readers never wait for a writer's
//! I/O or fsync, with one exception: a new `Snapshot` waits for the one-key writes that
//! recorded nothing to be published (right after they change their leaf, once every
//! earlier write is, so behind a `Sync` write in flight it waits for that write's fsync).
//!
//! **Checkpoints** (`checkpoint.rs`; background thread, on a dirty-page, log size or time
//! trigger, or on demand): the visible sequence number `S` (every change at or below it is
//! in its page), the log made durable up to the highest LSN of the pages copied, and then
//! every dirty page, the overflow blocks they name, the deletions no reader needs any more
//! and the meta record (root, `S`) in one atomic group of the block store; then the log is
//! truncated below `S`. Writers go on meanwhile; each page is copied under its shared latch.
//!
//! **Old blocks.** A replaced overflow value, or a compacted tree's pages, are *retired*,
//! not deleted: snapshots may still read them. Each version has an `Epoch`, held by every
//! `Version` (and so every snapshot) of it; a checkpoint deletes the blocks retired under
//! an epoch once it and every older one are gone. Retired blocks not yet deleted are listed
//! in the meta record, so that a restart (which has no readers) deletes them.
//!
//! **Recovery** (`open.rs`): the meta block gives the tree; log records after its sequence
//! number are replayed onto its pages (a page may hold some of them already; replay is
//! idempotent). A failed write, sync or checkpoint poisons the store: writes fail until it
//! is reopened.
//!
//! **Close** (`close(&self)`, so any holder of a shared store may close it; or the drop):
//! a last checkpoint (not on drop), then the checkpoint thread stops, later calls fail with
//! `Closed`, the block store and the log close, and only then the `LOCK` file goes, so a
//! new open never meets this one's threads or unsynced writes.
//!
//! Must never: acknowledge a `Sync` write before the log made it durable; write a page
//! whose changes the log has not made durable; let the meta record cover a sequence number
//! not every change of which is in the pages it writes; delete a block a live snapshot can
//! reach; let a reader see part of a batch.
//!
//! This file holds `Db`, its shared state (`Inner`, `Version`, `Visibility`, the
//! checkpointer's state) and the public methods. The sections live in `db/`: `open.rs`
//! (opening, recovery), `write.rs` (the write path), `checkpoint.rs` (the checkpoint thread
//! and checkpoints), `snapshot.rs` (snapshots and iterators), `compact.rs` and `backup.rs`
//! (both bulk loads, `bulk.rs`, written copy on write by `BlockPages`), `verify.rs`,
//! `stats.rs`.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

use arc_swap::ArcSwap;
use tierkv_io::{FileLock, Storage};
use tierkv_wal::{Durability, RecordType, Wal};

use crate::batch::{WriteBatch, BATCH_RECORD, MAX_BATCH_BYTES};
use crate::block_pages::Pages;
use crate::meta::Meta;
use crate::page::OverflowRef;
use crate::range::{self, KeyRange};
use crate::striped::Striped;
use crate::tree::write::Writer;
use crate::tree::Tree;
use crate::undo::{self, Undo};
use crate::{Error, Options, Result};

mod ahead;
mod backup;
mod bulk;
mod checkpoint;
mod compact;
mod open;
mod snapshot;
mod stats;
#[cfg(test)]
mod tests;
mod transaction;
mod verify;
mod write;

pub use snapshot::{Iter, Snapshot};
pub use stats::{CacheStats, Stats};
pub use transaction::{CompareAndSwapError, Transaction};
pub use verify::VerifyReport;

/// The store (see the module header). `Send + Sync`: share it with an `Arc`, or by
/// reference across scoped threads.
pub struct Db {
    inner: Arc<Inner>,
    /// The same `Inner`, for snapshots to hold without a shared reference count: an
    /// `arc-swap` guard takes a slot of its thread's own (`Snapshot`). Never swapped;
    /// dropped with the `Db`, when it turns the guards still out into reference counts.
    shared: ArcSwap<Inner>,
    /// `Some` while the store is open, until the first `close` (or the drop); inside, the
    /// checkpoint thread, which a read-only store does not have.
    checkpoint_thread: Mutex<Option<Option<JoinHandle<()>>>>,
}

/// A tree version is alive while any `Version` of it is: blocks retired while it was
/// current (a replaced overflow value, a compacted tree's pages) are deleted once it and
/// every older one are gone.
struct Epoch;

/// What readers read: the tree (changed in place) and the before-images of its changes.
struct Version {
    tree: Tree,
    /// The before-images a reader at a sequence this version was current for may need.
    undo: undo::View,
    epoch: Arc<Epoch>,
}

struct Inner {
    options: Options,
    /// Where the store's files live (a backup is made on the same).
    storage: Storage,
    dir: PathBuf,
    pages: Pages,
    /// The log, for appends; `None` when the store was opened read-only.
    wal: Option<Wal>,
    /// The version readers read: loaded without a lock or a reference count (`arc-swap`);
    /// changed only under `publishing`.
    current: ArcSwap<Version>,
    /// Held to publish a version.
    publishing: Mutex<()>,
    /// Writers share it for as long as they change the tree; `compact`, which replaces the
    /// tree, takes it alone.
    switch: RwLock<()>,
    /// Changes the tree in place.
    writer: Writer,
    /// The before-images of the changes, for snapshots.
    undo: Undo,
    /// The snapshots alive, and which writes left their before-images out
    /// (`snapshot::LiveSnapshots`).
    live: snapshot::LiveSnapshots,
    /// The id the next new page or overflow block gets.
    next_page: AtomicU64,
    /// Overflow values replaced or removed, each with the LSN of the change: their blocks
    /// are retired by the first checkpoint that covers the change.
    freed: Mutex<Vec<(u64, OverflowRef)>>,
    visible: Visibility,
    checkpointer: Mutex<Checkpointer>,
    /// What `stats` reports of the checkpointer's state, copied out whenever it changes, so
    /// that `stats` never waits for a checkpoint's I/O.
    summary: Mutex<CheckpointSummary>,
    /// The thread that faults in frames ahead of the writers (`ahead`).
    populator: ahead::Populator,
    /// Wakes the checkpoint thread.
    trigger: Mutex<Trigger>,
    trigger_cv: Condvar,
    failure: Mutex<Option<String>>,
    failed: AtomicBool,
    closed: AtomicBool,
    /// Log bytes appended since the last freeze.
    log_bytes: AtomicU64,
    /// What the buffer pool's budget leaves the before-images now
    /// (`Options::undo_reserve`).
    undo_reserve: AtomicUsize,
    /// Held by the one thread setting the pool's budget (`Inner::rebudget`).
    rebudgeting: Mutex<()>,
    counters: Counters,
    /// The store's `LOCK` file, held while the store is open (shared when read-only; none
    /// for a read-only copy that has no lock file): until it is closed, or the `Db` and
    /// every snapshot of it are dropped.
    file_lock: Mutex<Option<FileLock>>,
    /// Last, so that it drops after everything above has been freed.
    _release: ReleaseOnDrop,
}

/// The file in a store's directory whose lock says the store is open.
pub const LOCK_FILE: &str = "LOCK";

/// Gives the heap memory a store freed back to the kernel when it drops (`Inner`'s last
/// field): glibc keeps what was freed in the middle of an arena resident, and a process that
/// closes a store and opens another would hold both.
struct ReleaseOnDrop;

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        tierkv_io::heap::release_free_heap();
    }
}

#[derive(Default)]
struct Trigger {
    kicked: bool,
    stop: bool,
    /// Checkpoints asked for by callers (`Inner::checkpoint_on_thread`), numbered from 1.
    requested: u64,
    /// The highest request served: a checkpoint that began after it was made has ended.
    served: u64,
    /// The error of the checkpoint that served the last requests, for the first caller.
    error: Option<Error>,
    /// Whether the checkpoint thread is running; once it has returned (or panicked),
    /// callers checkpoint on their own thread.
    running: bool,
}

/// The checkpoint writer's state, under its own lock (one checkpoint at a time).
struct Checkpointer {
    /// The last meta record a session's end wrote (or open read), with the `next_page` of
    /// the early flushes since (whose own records carry `early_list`).
    meta: Meta,
    /// The free list the running session's last early flush wrote: the ids of `meta`'s free
    /// list, its blocks, and the session's reused ids (`block_pages`).
    early_list: Option<OverflowRef>,
    /// Blocks retired by each checkpoint, with the epoch of the tree before it: deletable
    /// once that epoch and every older one are gone. Oldest first.
    retired: VecDeque<(Weak<Epoch>, Vec<u64>)>,
    /// Blocks the next checkpoint deletes whatever the readers: those a restart found
    /// retired or orphaned.
    reclaim_now: Vec<u64>,
    /// The highest LSN a checkpoint's pages held, all durable in the log: the values
    /// replaced up to it may be named by no page on disk any more (see `checkpoint_locked`).
    durable_to: u64,
    last: Instant,
}

impl Checkpointer {
    /// Every block retired and not yet deleted, with `now` (retired by the checkpoint being
    /// written): the meta record lists them, for a restart (which has no readers) to delete.
    fn still_retired(&self, now: &[u64]) -> Vec<u64> {
        self.retired.iter().flat_map(|(_, ids)| ids.iter()).chain(now).copied().collect()
    }

    fn summary(&self) -> CheckpointSummary {
        CheckpointSummary {
            sequence: self.meta.sequence,
            next_page: self.meta.next_page,
            blocks_retired: self.retired.iter().map(|(_, ids)| ids.len()).sum(),
        }
    }
}

/// See `Inner::summary`.
#[derive(Clone, Copy)]
struct CheckpointSummary {
    sequence: u64,
    next_page: u64,
    blocks_retired: usize,
}

#[derive(Default)]
struct Counters {
    gets: Striped,
    writes: AtomicU64,
    write_ops: AtomicU64,
    stalls: AtomicU64,
    checkpoints: AtomicU64,
    checkpoint_groups: AtomicU64,
    early_flushes: AtomicU64,
    pages_written: AtomicU64,
    blocks_reclaimed: AtomicU64,
}

/// The sequence number readers may see: every write at or below it is published.
struct Visibility {
    visible: AtomicU64,
    /// Published numbers above `visible`, waiting for the ones below them.
    ahead: Mutex<std::collections::BTreeSet<u64>>,
    advanced: Condvar,
    /// Threads in `wait`, changed with `ahead` held: a publish wakes them only when there
    /// are some (a `notify_all` is a system call even with no one waiting).
    waiting: AtomicUsize,
}

impl Visibility {
    fn new(visible: u64) -> Visibility {
        Visibility {
            visible: AtomicU64::new(visible),
            ahead: Mutex::new(Default::default()),
            advanced: Condvar::new(),
            waiting: AtomicUsize::new(0),
        }
    }

    fn get(&self) -> u64 {
        self.visible.load(Ordering::Acquire)
    }

    /// Makes `sequence` visible in a store that has published nothing (a backup, whose
    /// numbering goes on after its source's).
    fn start_at(&self, sequence: u64) {
        let ahead = lock(&self.ahead);
        assert!(ahead.is_empty() && self.get() == 0, "start_at on a store with writes");
        self.visible.store(sequence, Ordering::Release);
        self.advanced.notify_all();
    }

    /// Marks `sequence` published; the visible number passes it once all below it are.
    fn publish(&self, sequence: u64) {
        let mut ahead = lock(&self.ahead);
        let mut visible = self.visible.load(Ordering::Acquire);
        if sequence != visible + 1 {
            ahead.insert(sequence);
            return;
        }
        visible = sequence;
        while ahead.remove(&(visible + 1)) {
            visible += 1;
        }
        self.visible.store(visible, Ordering::Release);
        // A waiter counts itself with `ahead` held, before it checks the number: held here
        // too, so one that has not counted itself yet will see the new number.
        if self.waiting.load(Ordering::Relaxed) > 0 {
            self.advanced.notify_all();
        }
        drop(ahead);
    }

    /// Waits until `sequence` is visible; gives up when `failed` is set (a write below it
    /// will never be published; `wake_all` tells the waiters).
    fn wait(&self, sequence: u64, failed: &AtomicBool) -> bool {
        if self.get() >= sequence {
            return true;
        }
        let mut ahead = lock(&self.ahead);
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let mut published = true;
        while self.get() < sequence {
            if failed.load(Ordering::Acquire) {
                published = false;
                break;
            }
            ahead = self.advanced.wait(ahead).unwrap_or_else(PoisonError::into_inner);
        }
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        drop(ahead);
        published
    }

    /// Wakes every waiter to look again (after a failure was recorded).
    fn wake_all(&self) {
        let _ahead = lock(&self.ahead);
        self.advanced.notify_all();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

fn batch_record() -> RecordType {
    RecordType::new(BATCH_RECORD).expect("invariant: the batch record type is not 0")
}

impl Db {
    /// Opens the store in `dir`, creating it when missing, on the operating system's files.
    /// Opening recovers: every write acknowledged before a crash is there, and no part of
    /// a batch that was not.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// use tierkv::{Db, Options};
    ///
    /// let path = dir.path().join("kv");
    /// let db = Db::open(&path, Options { cache_size: 64 << 20, ..Options::default() })?;
    /// db.put("apple", "red")?;
    /// db.close()?;
    /// let db = Db::open(&path, Options::default())?;
    /// assert_eq!(db.get("apple")?, Some(b"red".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOptions`] for options that cannot work; [`Error::NotADirectory`]
    /// when `dir` is a file; [`Error::AlreadyOpen`] when the store is open already, in this
    /// process or another; [`Error::Io`] when a file cannot be made or read (a read-only
    /// or full file system, permissions); [`Error::Corruption`], [`Error::Log`],
    /// [`Error::Blocks`] or [`Error::Pages`] when recovery finds the files damaged or not
    /// a store's; [`Error::Thread`] when the checkpoint thread cannot start.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Db> {
        Db::open_on(&Storage::Os, dir, options)
    }

    /// Opens the store in `dir` on `storage` (the simulated file system in crash tests).
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub fn open_on(storage: &Storage, dir: impl AsRef<Path>, options: Options) -> Result<Db> {
        open::open(storage, dir.as_ref(), options)
    }

    /// The value of `key`.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// # let db = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
    /// db.put("apple", "red")?;
    /// assert_eq!(db.get("apple")?, Some(b"red".to_vec()));
    /// assert_eq!(db.get("pear")?, None);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::EmptyKey`] or [`Error::KeyTooLarge`] for a key outside the limits,
    /// [`Error::Closed`] once the store is closed, and [`Error::Pages`] when a page or an
    /// overflow value cannot be read (I/O, or damage the checksums caught).
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner.counters.gets.add(1);
        self.inner.with_view(|view| view.get(key.as_ref()))
    }

    /// Calls `read` with the value of `key`, borrowed, and returns what it returns: no
    /// copy of the value is made, unless it lives in overflow blocks (over a quarter of a
    /// page), which are read into a buffer first.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// # let db = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
    /// db.put("apple", "red")?;
    /// assert_eq!(db.get_with("apple", |value| value.len())?, Some(3));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    pub fn get_with<T>(
        &self,
        key: impl AsRef<[u8]>,
        read: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>> {
        self.inner.counters.gets.add(1);
        self.inner.with_view(|view| view.get_with(key.as_ref(), read))
    }

    /// Reads the value of `key` into `buffer`, reusing its allocation, and returns whether
    /// the key was found. `buffer` is cleared first either way.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// # let db = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
    /// db.put("apple", "red")?;
    /// let mut value = Vec::with_capacity(64);
    /// assert!(db.get_into("apple", &mut value)?);
    /// assert_eq!(value, b"red");
    /// assert!(!db.get_into("pear", &mut value)?);
    /// assert!(value.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get); `buffer` is left empty.
    pub fn get_into(&self, key: impl AsRef<[u8]>, buffer: &mut Vec<u8>) -> Result<bool> {
        self.inner.counters.gets.add(1);
        self.inner.with_view(|view| view.get_into(key.as_ref(), buffer))
    }

    /// Whether `key` has a value. A value in overflow blocks is not read.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.inner.counters.gets.add(1);
        self.inner.with_view(|view| view.contains_key(key.as_ref()))
    }

    /// The entry with the smallest key, or `None` when the store is empty.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// # let db = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
    /// assert_eq!(db.first()?, None);
    /// db.put("b", "2")?;
    /// db.put("a", "1")?;
    /// assert_eq!(db.first()?, Some((b"a".to_vec(), b"1".to_vec())));
    /// assert_eq!(db.last()?, Some((b"b".to_vec(), b"2".to_vec())));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] once the store is closed, and [`Error::Pages`] when a page or an
    /// overflow value cannot be read.
    pub fn first(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.snapshot().first()
    }

    /// The entry with the largest key, or `None` when the store is empty.
    ///
    /// # Errors
    ///
    /// As [`first`](Self::first).
    pub fn last(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.snapshot().last()
    }

    /// Sets `key` to `value`, with the store's default durability.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// # let db = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
    /// db.put(b"apple", b"red")?; // keys and values: anything that is AsRef<[u8]>
    /// db.put("apple", String::from("green"))?;
    /// assert_eq!(db.get("apple")?, Some(b"green".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.write(&batch)
    }

    /// Removes `key`, with the store's default durability. Removing a key that has no
    /// value is not an error.
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write(&batch)
    }

    /// Removes every key in `range` atomically, in one batch with the store's default
    /// durability, and returns how many keys it removed. Readers see all of the removals
    /// or none, and so does the store after a crash.
    ///
    /// The keys removed are those the range held when the call began (as of a snapshot;
    /// the log and the pages have no range deletions, so the batch names each key). A
    /// write by another thread into the range while it runs is not ordered with it as a
    /// whole: a key new to the range survives, as if written after; a key the range already
    /// held is removed, as if written before. Keep other writers out of the range meanwhile
    /// if that matters.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// # let db = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
    /// for key in ["user:1", "user:2", "video:1"] {
    ///     db.put(key, "")?;
    /// }
    /// assert_eq!(db.delete_range("user:".."user;")?, 2);
    /// assert_eq!(db.first()?.map(|(key, _)| key), Some(b"video:1".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::BatchTooLarge`] when the removals would make a batch over
    /// [`MAX_BATCH_BYTES`](crate::MAX_BATCH_BYTES), found before anything is written
    /// (remove such a range in parts); the errors of [`Iter`] while it reads the keys; and
    /// those of [`write`](Self::write).
    pub fn delete_range(&self, range: impl KeyRange) -> Result<u64> {
        self.delete_range_within(range, MAX_BATCH_BYTES)
    }

    /// `delete_range`, refusing a batch over `max_bytes` (tests lower it).
    fn delete_range_within(&self, range: impl KeyRange, max_bytes: usize) -> Result<u64> {
        let mut keys = self.snapshot().range(range);
        let mut batch = WriteBatch::new();
        // Bounded by the range and, before that, by `MAX_BATCH_BYTES`.
        while let Some(key) = keys.next_key() {
            batch.delete(key?);
            if batch.record_bytes() > max_bytes {
                return Err(Error::BatchTooLarge { len: batch.record_bytes(), max: max_bytes });
            }
        }
        drop(keys);
        assert!(batch.record_bytes() <= max_bytes && batch.ops().all(|(_, value)| value.is_none()));
        self.write(&batch)?;
        Ok(batch.len() as u64)
    }

    /// Applies `batch` atomically, with the store's default durability: readers see all
    /// of it or none, and so does the store after a crash.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// # let db = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
    /// use tierkv::WriteBatch;
    ///
    /// db.put("from", "10")?;
    /// let mut batch = WriteBatch::new();
    /// batch.delete("from").put("to", "10");
    /// db.write(&batch)?;
    /// assert_eq!((db.get("from")?, db.get("to")?), (None, Some(b"10".to_vec())));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::EmptyKey`], [`Error::KeyTooLarge`], [`Error::ValueTooLarge`] or
    /// [`Error::BatchTooLarge`] for a batch outside the limits (nothing is written);
    /// [`Error::Closed`] once the store is closed; [`Error::Poisoned`] after an earlier
    /// failure; and [`Error::Log`] when the log cannot take or sync it, which poisons the
    /// store (reopen it to recover every acknowledged write).
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        self.write_with(batch, self.inner.options.durability)
    }

    /// Applies `batch` atomically with the given durability: `Sync` returns once it is
    /// durable, `Buffered` once the log has it (durable within the log's flush interval,
    /// or at once on the pmem backend), `None` leaves it to the next sync.
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write).
    pub fn write_with(&self, batch: &WriteBatch, durability: Durability) -> Result<()> {
        self.inner.write(batch, durability)
    }

    /// A consistent view: every read through it sees the store as of this moment, whatever
    /// is written later.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// # let db = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
    /// db.put("apple", "red")?;
    /// let snapshot = db.snapshot();
    /// db.put("apple", "green")?;
    /// assert_eq!(snapshot.get("apple")?, Some(b"red".to_vec()));
    /// assert_eq!(db.get("apple")?, Some(b"green".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn snapshot(&self) -> Snapshot {
        // Counted in first: every write from here on records its before-images; those that
        // may not have are below `unrecorded`, whose publication the sequence waits for
        // (`snapshot::LiveSnapshots`). A failed store publishes nothing more, and the
        // snapshot's reads fail with it.
        let inner = self.shared.load();
        debug_assert!(Arc::ptr_eq(&inner, &self.inner), "the shared handle is the store's");
        let (taken, unrecorded) = inner.live.enter();
        if !inner.visible.wait(unrecorded, &inner.failed) {
            debug_assert!(inner.failed.load(Ordering::Acquire));
        }
        let (version, sequence) = inner.pinned_view();
        debug_assert!(sequence >= unrecorded || inner.failed.load(Ordering::Acquire));
        Snapshot::new(inner, version, sequence, taken)
    }

    /// The entries in `range`, ascending, as of this moment (the iterator reads a
    /// snapshot); `rev()` or `next_back` take them descending. See [`Iter`] for its errors.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// # let db = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
    /// for key in ["a", "b", "c", "d"] {
    ///     db.put(key, key.to_uppercase())?;
    /// }
    /// let keys = |iter: tierkv::Iter| -> tierkv::Result<Vec<Vec<u8>>> {
    ///     iter.map(|entry| entry.map(|(key, _)| key)).collect()
    /// };
    /// assert_eq!(keys(db.range("b".."d"))?, [b"b", b"c"]);
    /// assert_eq!(keys(db.range(..))?.len(), 4);
    /// let last_two: Vec<_> = db.range(b"b"..).rev().take(2).collect::<Result<_, _>>()?;
    /// assert_eq!(last_two[0], (b"d".to_vec(), b"D".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn range(&self, range: impl KeyRange) -> Iter {
        self.snapshot().into_iter(range.key_bounds(), false)
    }

    /// The entries in `range`, descending, as of this moment: `range(range).rev()`, but an
    /// [`Iter`], so it can [`seek`](Iter::seek).
    pub fn range_back(&self, range: impl KeyRange) -> Iter {
        self.snapshot().into_iter(range.key_bounds(), true)
    }

    /// The entries whose keys start with `prefix`, ascending, as of this moment.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// # let db = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
    /// for key in ["user:1", "user:2", "video:1"] {
    ///     db.put(key, "")?;
    /// }
    /// assert_eq!(db.prefix("user:").count(), 2);
    /// let newest = db.prefix("user:").next_back().transpose()?;
    /// assert_eq!(newest.map(|(key, _)| key), Some(b"user:2".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        self.snapshot().into_iter(range::prefix_bounds(prefix.as_ref()), false)
    }

    /// The entries whose keys start with `prefix`, descending, as of this moment.
    pub fn prefix_back(&self, prefix: impl AsRef<[u8]>) -> Iter {
        self.snapshot().into_iter(range::prefix_bounds(prefix.as_ref()), true)
    }

    /// Makes every write made so far durable (those with `Buffered` or `None` too).
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] once the store is closed, and [`Error::Log`] when the log cannot
    /// sync, which poisons the store.
    pub fn sync(&self) -> Result<()> {
        self.inner.check_open()?;
        self.inner.log()?.sync().map_err(|error| self.inner.fail(error.into()))
    }

    /// Writes every changed page back now and truncates the log behind it.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] once the store is closed, [`Error::Poisoned`] after an earlier
    /// failure, and the error of the checkpoint when it fails ([`Error::Log`],
    /// [`Error::Blocks`], [`Error::Pages`]), which poisons the store.
    pub fn checkpoint(&self) -> Result<()> {
        self.inner.checkpoint_on_thread()
    }

    /// Counters and sizes.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] once the store is closed, and [`Error::Pages`] when a page of the
    /// tree's leftmost path cannot be read (for its height).
    pub fn stats(&self) -> Result<Stats> {
        self.inner.check_open()?;
        self.inner.stats()
    }

    /// Checks every page of the tree (decoding, key order and bounds, leaf depth, sizes,
    /// overflow values) and every block's checksum, and counts the entries a reader sees
    /// (the tree's and the writes since the last checkpoint). Problems are listed in the
    /// report, not returned as errors.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] once the store is closed: an error means the check could not run.
    pub fn verify(&self) -> Result<VerifyReport> {
        self.inner.check_open()?;
        let snapshot = self.snapshot();
        let mut report = self.inner.verify(&snapshot.version)?;
        for entry in snapshot.range(..) {
            match entry {
                Ok((key, value)) => {
                    report.entries += 1;
                    report.key_bytes += key.len() as u64;
                    report.value_bytes += value.len() as u64;
                }
                Err(error) => {
                    report.problems.push(format!("a scan of every entry stopped: {error}"));
                    break;
                }
            }
        }
        Ok(report)
    }

    /// Checkpoints, then rewrites the tree with full pages, so that space left by splits
    /// and deletes is given back: the old tree's pages are deleted, and the block store
    /// cleans until its files are no larger than before (unless a snapshot taken before
    /// still holds the old pages). Reads and writes go on meanwhile.
    ///
    /// # Errors
    ///
    /// As [`checkpoint`](Self::checkpoint); a failure while it writes the new tree poisons
    /// the store too.
    pub fn compact(&self) -> Result<()> {
        self.inner.compact()
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Takes a last checkpoint (so the next open replays nothing), stops the checkpoint
    /// thread, syncs and closes. It takes `&self`, so a store shared in an `Arc` can be
    /// closed by any of its holders: later calls on the store, its snapshots and their
    /// iterators fail with [`Error::Closed`]. Closing a closed store does nothing and
    /// returns `Ok`; of two closes at once, the second waits for the first, and only the
    /// first reports a failure. Calls running while it closes may fail with
    /// [`Error::Closed`] or an error of the closed block store; their acknowledged writes
    /// are in the log, for the next open to replay.
    ///
    /// Once it returns, the store's files are free: `Db::open` may open them again, though
    /// this `Db` (an `Arc` of it elsewhere, a snapshot, an iterator) still lives. Dropping
    /// a `Db` without closing it is safe too: it does the same but the checkpoint, and the
    /// next open replays the log since the last checkpoint.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// use std::sync::Arc;
    ///
    /// let db = Arc::new(tierkv::Db::open(dir.path(), tierkv::Options::default())?);
    /// let writer = Arc::clone(&db);
    /// std::thread::spawn(move || writer.put("a", "1")).join().expect("a thread")?;
    /// db.close()?;
    /// assert!(matches!(db.get("a"), Err(tierkv::Error::Closed)));
    /// db.close()?; // closed already: nothing to do
    /// let reopened = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
    /// assert_eq!(reopened.get("a")?, Some(b"1".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The error of the last checkpoint ([`Error::Log`], [`Error::Blocks`],
    /// [`Error::Pages`]), or of the final sync of the log or the block store. The store is
    /// closed even then, and the next open recovers every acknowledged write.
    pub fn close(&self) -> Result<()> {
        // Held until the close is done, so that a second close waits for the first.
        let mut thread = lock(&self.checkpoint_thread);
        let Some(handle) = thread.take() else {
            return Ok(());
        };
        let result = if self.inner.failed.load(Ordering::Acquire) || self.inner.wal.is_none() {
            Ok(())
        } else {
            self.inner.checkpoint_on_thread()
        };
        result.and(self.inner.shut(handle))
    }
}

impl Drop for Db {
    /// Stops the checkpoint thread, unless `close` did. Writes made durable stay so; the
    /// next open replays the log since the last checkpoint.
    fn drop(&mut self) {
        let thread = self.checkpoint_thread.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(handle) = thread.take() {
            // Errors here have no one to go to; `close` reports them.
            let _ = self.inner.shut(handle);
        }
    }
}

impl Inner {
    /// Closes the store: stops the checkpoint thread `handle`, refuses later calls, waits
    /// for a checkpoint or compaction running on a caller's thread, closes the block store
    /// and the log (which syncs it), and only then lets the `LOCK` file go, so that another
    /// open never meets this one's threads or unsynced writes. Snapshots may still hold
    /// `Inner`; they read nothing more.
    fn shut(&self, handle: Option<JoinHandle<()>>) -> Result<()> {
        assert!(!self.closed.load(Ordering::Acquire), "a store closed twice");
        {
            let mut trigger = lock(&self.trigger);
            trigger.stop = true;
            self.trigger_cv.notify_all();
        }
        if let Some(handle) = handle {
            // A checkpoint thread that panicked has nothing left to clean up.
            let _ = handle.join();
        }
        self.populator.stop();
        self.closed.store(true, Ordering::Release);
        assert!(!lock(&self.trigger).running, "the checkpoint thread outlived its join");
        // Every checkpoint or compaction that starts from now on sees `closed` under this
        // lock; one that started before has ended once it is free.
        drop(lock(&self.checkpointer));
        self.pages.close_tier();
        let blocks = self.pages.blocks().close().map_err(Error::from);
        // CRASH: a write racing the close may have appended after the last checkpoint; the
        // log's close makes it durable, and the next open replays it.
        let log = self.wal.as_ref().map_or(Ok(()), |wal| wal.close().map_err(Error::from));
        drop(lock(&self.file_lock).take());
        log.and(blocks)
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if self.wal.is_none() {
            return Err(Error::ReadOnly { path: self.dir.clone() });
        }
        if self.failed.load(Ordering::Acquire) {
            let cause = lock(&self.failure).clone().unwrap_or_default();
            return Err(Error::Poisoned { cause });
        }
        Ok(())
    }

    /// The log, for appends and syncs; `Error::ReadOnly` when the store was opened read-only.
    fn log(&self) -> Result<&Wal> {
        self.wal.as_ref().ok_or_else(|| Error::ReadOnly { path: self.dir.clone() })
    }

    /// Poisons the store with `error` (writes fail until reopen) and returns it.
    fn fail(&self, error: Error) -> Error {
        let mut failure = lock(&self.failure);
        if failure.is_none() {
            *failure = Some(error.to_string());
        }
        self.failed.store(true, Ordering::Release);
        drop(failure);
        self.trigger_cv.notify_all();
        self.visible.wake_all();
        error
    }

    /// The current version and the visible sequence number, taken together without a lock,
    /// a reference count or any other write to memory another thread reads (the version is
    /// held by an `arc-swap` guard: a slot of this thread's own). The version is loaded
    /// before and after the sequence: the same both times, it was the current one when the
    /// sequence was read, and so its view of the undo reaches every before-image of a
    /// change above that sequence (a version's view starts at the oldest segment holding a
    /// change above the visible sequence when it was published, and the sequence read
    /// after it is no lower); and a compaction publishes its tree with writers held off, so
    /// the tree holds every write at or below the sequence.
    fn pinned_view(&self) -> (arc_swap::Guard<Arc<Version>>, u64) {
        // Bounded in practice: the version changes at most twice a checkpoint, and a retry
        // needs a change between two loads nanoseconds apart.
        for _ in 0..1024 {
            let version = self.current.load();
            let sequence = self.visible.get();
            let again = self.current.load();
            if Arc::ptr_eq(&version, &again) {
                return (version, sequence);
            }
        }
        // Versions change only under `publishing`: holding it, one load is enough.
        let _held = lock(&self.publishing);
        let version = self.current.load();
        let sequence = self.visible.get();
        (version, sequence)
    }

    /// Runs `read` on the current version and the visible sequence number (`pinned_view`).
    fn with_view<R>(&self, read: impl FnOnce(snapshot::View<'_>) -> R) -> R {
        let (version, sequence) = self.pinned_view();
        read(snapshot::View { inner: self, version: &version, sequence })
    }
}
