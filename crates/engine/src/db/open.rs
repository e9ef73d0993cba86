//! Opening a store: what the directory holds, making a new store, checking the options
//! against the ones the store was made with, and recovery (the meta block's tree, then the
//! log's records after it replayed onto its pages, in place).
//!
//! A directory is one of: missing (a store may be made there if its parent exists), empty
//! (a store may be made in it), a store (its identity file `TIERKV` says so, see
//! `identity.rs`), or something else, which is refused and never written to.
//!
//! Making a store: the directory (if missing), the `LOCK`, the identity file in the
//! *creating* state, the block store with an empty tree, the log, then the identity file
//! again as *ready*. A failure on the way removes everything it made; a crash leaves the
//! *creating* state, which the next writable open clears and makes again (no write was
//! acknowledged before *ready*).
//!
//! Recovery reads the log read-only first: its records are applied to the tree, and a log
//! that ends before the checkpoint is refused before anything is written. Only then does a
//! writable open open the log for appends (repairing a torn tail, preparing a segment).
//!
//! Must never: write anything in a read-only open; create a store where the options say
//! not to, or in a directory that holds other files; leave files behind after a failed open
//! that it made.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Instant;

use arc_swap::ArcSwap;

use tierkv_blockstore::{LogStore, StoreOptions};
use tierkv_io::{FileLock, Storage};
use tierkv_wal::{RecoveryReport, Wal, WalOptions};

use super::checkpoint::{create_tree, decode_ids};
use super::write::{Apply, ApplyError};
use super::{
    batch_record, Checkpointer, Counters, Db, Epoch, Inner, ReleaseOnDrop, Trigger, Version,
    Visibility, LOCK_FILE,
};
use crate::batch::WriteBatch;
use crate::block_pages::Pages;
use crate::identity::{self, Identity, StoreState, BLOCKS_DIR, IDENTITY_FILE};
use crate::tree::write::Writer;
use crate::tree::Tree;
use crate::undo::Undo;
use crate::{Error, Options, Result};

/// The checkpoint thread's nice value (`tierkv_io::priority`): on a machine with fewer
/// cores than busy threads, the write-back takes what the threads serving requests leave
/// (RocksDB lowers its background pool's priority the same way). In YCSB on 2 cores, with
/// it at 10 against 0, three pairs of runs gave the load 1.18, 1.09 and 1.05 times the
/// ops/s, and D 1.23, 0.91 and 1.21 (A 0.87, 1.33, 0.96). Writers still slow down when
/// write-back falls behind (`Inner::slow_down`). 19 (ea51588) raised D further (687–820K
/// ops/s in four runs against 629–688K at 10), but starved checkpoints on a busy machine:
/// tests that wait for background checkpoints during their writes (`db_model`,
/// `compact`, the write-back's split race) failed with the test machine's cores taken.
const CHECKPOINT_NICE: i32 = 10;

/// What a store's directory holds.
enum Found {
    /// No store: one may be made there. `exists`: the directory is there (and empty).
    Nothing { exists: bool },
    /// A store whose making did not finish: it is made again, once its lock is held.
    Unfinished(Identity),
    /// A store, as its identity file describes it.
    Store(Identity),
}

/// Opens (or makes) the store in `dir` (see the module header).
pub(super) fn open(storage: &Storage, dir: &Path, options: Options) -> Result<Db> {
    options.validate()?;
    match inspect(storage, dir, &options)? {
        Found::Store(identity) => {
            let options = resolve(options, &identity, dir)?;
            options.validate()?;
            let lock = lock(storage, dir, &options)?;
            start(storage, dir, options, lock, false)
        }
        Found::Nothing { exists } => {
            let db = create(storage, dir, options, exists, None, StoreState::Creating, 0)?;
            mark_ready(storage, dir, &db.inner.options)?;
            Ok(db)
        }
        Found::Unfinished(found) => {
            // Under the lock, so that no other open is making it again meanwhile.
            let held = lock(storage, dir, &options)?;
            if Identity::read(storage, dir)?.as_ref() != Some(&found) {
                return Err(Error::AlreadyOpen { dir: dir.to_path_buf() });
            }
            // CRASH: nothing was acknowledged before the store was ready: start over.
            remove_made(storage, dir, false, true, &found)?;
            let db = create(storage, dir, options, true, held, StoreState::Creating, 0)?;
            mark_ready(storage, dir, &db.inner.options)?;
            Ok(db)
        }
    }
}

/// Makes a new store for a backup of a store at `source_sequence`, in `dir` (missing, with a
/// parent, or empty), and opens it. Its identity says *backup in progress*, so that it never
/// opens as a store until `mark_ready`.
pub(super) fn create_backup(
    storage: &Storage,
    dir: &Path,
    options: Options,
    source_sequence: u64,
) -> Result<Db> {
    assert!(!options.read_only && options.log_dir.is_none());
    options.validate()?;
    match inspect(storage, dir, &Options { error_if_exists: true, ..options.clone() })? {
        Found::Nothing { exists } => {
            let state = StoreState::BackupInProgress;
            create(storage, dir, options, exists, None, state, source_sequence)
        }
        Found::Store(_) | Found::Unfinished(_) => {
            Err(Error::AlreadyExists { path: dir.to_path_buf() })
        }
    }
}

/// Marks the store in `dir` ready: its identity file's last change, once everything it
/// holds is durable.
pub(super) fn mark_ready(storage: &Storage, dir: &Path, options: &Options) -> Result<()> {
    let Some(identity) = Identity::read(storage, dir)? else {
        return Err(Error::Corruption(format!("{IDENTITY_FILE} vanished from {}", dir.display())));
    };
    assert!(identity.state != StoreState::Ready, "a store made ready twice");
    // CRASH: before this rename the store is unfinished (made again, or a refused backup);
    // after it, ready.
    Identity { state: StoreState::Ready, ..identity }.write(storage, dir, options.file_mode)
}

/// What `dir` holds, and whether the options let the open go on.
fn inspect(storage: &Storage, dir: &Path, options: &Options) -> Result<Found> {
    let may_create = options.create_if_missing && !options.read_only;
    let refuse_nothing = |detail: &str| Error::NotFound {
        path: dir.to_path_buf(),
        detail: match options.read_only {
            true => format!("{detail}, and a read-only open makes none"),
            false => format!("{detail}, and create_if_missing is off"),
        },
    };
    if !storage.exists(dir)? {
        if !may_create {
            return Err(refuse_nothing("nothing is there"));
        }
        let parent = dir.parent().filter(|parent| !parent.as_os_str().is_empty());
        if let Some(parent) = parent {
            if !storage.is_dir(parent)? {
                return Err(Error::NotFound {
                    path: dir.to_path_buf(),
                    detail: format!(
                        "its parent {} is not a directory; tierkv makes the store's directory, \
                         never its parents",
                        parent.display()
                    ),
                });
            }
        }
        return Ok(Found::Nothing { exists: false });
    }
    if !storage.is_dir(dir)? {
        return Err(Error::NotADirectory { path: dir.to_path_buf() });
    }
    let entries = storage.list_dir(dir)?;
    if entries.iter().any(|name| name == IDENTITY_FILE) {
        let Some(found) = Identity::read(storage, dir)? else {
            return Err(Error::Corruption(format!("{} vanished while opening", IDENTITY_FILE)));
        };
        return match found.state {
            StoreState::BackupInProgress => {
                Err(Error::IncompleteBackup { path: dir.to_path_buf() })
            }
            StoreState::Creating if options.read_only => Err(Error::NotFound {
                path: dir.to_path_buf(),
                detail: "the store's creation did not finish; a writable open makes it again"
                    .into(),
            }),
            StoreState::Creating => Ok(Found::Unfinished(found)),
            StoreState::Ready if options.error_if_exists => {
                Err(Error::AlreadyExists { path: dir.to_path_buf() })
            }
            StoreState::Ready => Ok(Found::Store(found)),
        };
    }
    // A lock file, or an identity file that never got its name, is all an interrupted
    // creation can leave before its identity file.
    let foreign: Vec<&String> =
        entries.iter().filter(|name| !matches!(name.as_str(), LOCK_FILE | "TIERKV.tmp")).collect();
    if foreign.is_empty() {
        if !may_create {
            return Err(refuse_nothing("the directory is empty"));
        }
        return Ok(Found::Nothing { exists: true });
    }
    let reason = if foreign.iter().any(|name| name.as_str() == BLOCKS_DIR) {
        format!(
            "it holds a {BLOCKS_DIR} directory but no {IDENTITY_FILE} file (a store made before \
             format version {}, or a damaged one; `tierkv salvage` copies what it holds into a \
             new store)",
            identity::FORMAT_VERSION
        )
    } else {
        let shown: Vec<&str> = foreign.iter().take(5).map(|name| name.as_str()).collect();
        let more = foreign.len().saturating_sub(shown.len());
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        format!(
            "it holds files tierkv did not make ({}{more}); a store goes in a new or empty \
             directory",
            shown.join(", ")
        )
    };
    Err(Error::NotAStore { path: dir.to_path_buf(), reason })
}

/// `options` with the store's settings filled in, or the first that disagrees.
fn resolve(mut options: Options, identity: &Identity, dir: &Path) -> Result<Options> {
    let stored_page = identity.page_bytes as usize;
    if let Some(given) = options.max_page_bytes.filter(|&given| given != stored_page) {
        return Err(Error::OptionMismatch {
            option: "max_page_bytes",
            stored: stored_page.to_string(),
            given: given.to_string(),
        });
    }
    options.max_page_bytes = Some(stored_page);
    if let Some(given) = options.log_backend.filter(|&given| given != identity.log_backend) {
        return Err(Error::OptionMismatch {
            option: "log_backend",
            stored: identity.log_backend.to_string(),
            given: given.to_string(),
        });
    }
    options.log_backend = Some(identity.log_backend);
    let given = options.log_dir.as_deref().map(|given| outside_log_dir(given, dir)).transpose()?;
    if let Some(given) = given.filter(|given| *given != identity.log_dir) {
        let show = |place: &Option<PathBuf>| match place {
            Some(path) => path.display().to_string(),
            None => "`log` inside the store".into(),
        };
        return Err(Error::OptionMismatch {
            option: "log_dir",
            stored: show(&identity.log_dir),
            given: show(&given),
        });
    }
    options.log_dir = Some(identity.log_dir_in(dir));
    Ok(options)
}

/// Where a log directory lies, as the identity file records it: `None` for `log` inside
/// the store, else the absolute path.
fn outside_log_dir(log_dir: &Path, dir: &Path) -> Result<Option<PathBuf>> {
    let absolute = |path: &Path| {
        std::path::absolute(path)
            .map_err(|error| Error::InvalidOptions(format!("log_dir {}: {error}", path.display())))
    };
    let log_dir = absolute(log_dir)?;
    let inside = absolute(&dir.join(identity::LOG_DIR))?;
    Ok((log_dir != inside).then_some(log_dir))
}

/// Takes the store's lock: exclusive to write, shared to read. A read-only open of a store
/// with no lock file (a copy) reads without a lock, since it can make none.
fn lock(storage: &Storage, dir: &Path, options: &Options) -> Result<Option<FileLock>> {
    let path = dir.join(LOCK_FILE);
    let held = match options.read_only {
        false => storage.lock_file(&path, options.file_mode).map(Some),
        true => match storage.lock_file_shared(&path) {
            Err(tierkv_io::Error::NotFound { .. }) => Ok(None),
            other => other.map(Some),
        },
    };
    held.map_err(|error| match error {
        tierkv_io::Error::Locked { .. } => Error::AlreadyOpen { dir: dir.to_path_buf() },
        other => Error::from(other),
    })
}

/// Makes a new store in `dir` (missing, or empty when `exists`) in `state`, and opens it;
/// on failure removes what it made. `held`: its lock, when the caller took it already. The
/// caller marks it ready.
fn create(
    storage: &Storage,
    dir: &Path,
    options: Options,
    exists: bool,
    held: Option<FileLock>,
    state: StoreState,
    source_sequence: u64,
) -> Result<Db> {
    assert!(state != StoreState::Ready);
    let log_outside =
        options.log_dir.as_deref().map(|log| outside_log_dir(log, dir)).transpose()?;
    let identity = Identity {
        state,
        page_bytes: options.page_bytes() as u32,
        log_backend: options.backend(),
        log_dir: log_outside.flatten(),
        source_sequence,
    };
    // The log of a new store starts empty: a log directory elsewhere that holds anything
    // would be replayed into it.
    if let Some(log_dir) = &identity.log_dir {
        if storage.exists(log_dir)? && !storage.list_dir(log_dir)?.is_empty() {
            return Err(Error::InvalidOptions(format!(
                "log_dir {} is not empty; a new store's log goes in a new or empty directory",
                log_dir.display()
            )));
        }
    }
    let log_existed = match &identity.log_dir {
        Some(log_dir) => storage.exists(log_dir)?,
        None => false,
    };
    if !exists {
        storage.create_dir_all(dir)?;
        // CRASH: the directory's entry in its parent is durable only once the parent is
        // synced; without it a crash could lose the whole store.
        if let Some(parent) = dir.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            storage.sync_dir(parent)?;
        }
    }
    let options = Options { log_dir: Some(identity.log_dir_in(dir)), ..options };
    let made = (|| {
        let lock = match held {
            Some(held) => Some(held),
            None => lock(storage, dir, &options)?,
        };
        // CRASH: from here until the identity says ready, a crash leaves a store that the
        // next open makes again, or (a backup) one that never opens.
        identity.write(storage, dir, options.file_mode)?;
        start(storage, dir, options.clone(), lock, true)
    })();
    if made.is_err() {
        // Best effort: what stays behind is an empty store the next open makes again.
        let _ = remove_made(storage, dir, !exists, false, &identity);
        if let Some(log_dir) = identity.log_dir.as_deref().filter(|_| !log_existed) {
            let _ = storage.remove_dir(log_dir);
        }
    }
    made
}

/// Removes a backup that did not finish (see `create_backup`): what it made in `dir`, and
/// `dir` itself when `whole` (the backup made it).
pub(super) fn discard_backup(storage: &Storage, dir: &Path, whole: bool) -> Result<()> {
    let identity = Identity::read(storage, dir)?;
    assert!(identity.as_ref().is_none_or(|identity| identity.state != StoreState::Ready));
    let inside = Identity {
        state: StoreState::BackupInProgress,
        page_bytes: 0,
        log_backend: tierkv_wal::Backend::File,
        log_dir: None,
        source_sequence: 0,
    };
    remove_made(storage, dir, whole, false, &identity.unwrap_or(inside))
}

/// Removes what making a store puts in `dir` (and in its log directory elsewhere), but the
/// lock file when `keep_lock` (the caller holds it), and `dir` itself when `whole`.
fn remove_made(
    storage: &Storage,
    dir: &Path,
    whole: bool,
    keep_lock: bool,
    identity: &Identity,
) -> Result<()> {
    assert!(!(whole && keep_lock), "a directory goes with its lock file");
    if let Some(log_dir) = &identity.log_dir {
        if storage.exists(log_dir)? {
            for name in storage.list_dir(log_dir)? {
                remove_tree(storage, &log_dir.join(name))?;
            }
            storage.sync_dir(log_dir)?;
        }
    }
    // CRASH: the identity file goes last, after everything else is durably gone, so that a
    // removal cut short leaves a directory that still says what it was (an unfinished store
    // or backup), never store files without one.
    for name in storage.list_dir(dir)? {
        let removable = identity::is_store_entry(&name) && name != IDENTITY_FILE;
        if removable && !(keep_lock && name == LOCK_FILE) {
            remove_tree(storage, &dir.join(name))?;
        }
    }
    storage.sync_dir(dir)?;
    if storage.exists(dir.join(IDENTITY_FILE))? {
        storage.remove_file(dir.join(IDENTITY_FILE))?;
        storage.sync_dir(dir)?;
    }
    if whole {
        storage.remove_dir(dir)?;
        if let Some(parent) = dir.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            storage.sync_dir(parent)?;
        }
    }
    Ok(())
}

/// Removes a file, or a directory and everything under it (bounded by the tree's depth).
fn remove_tree(storage: &Storage, path: &Path) -> Result<()> {
    if !storage.is_dir(path)? {
        return Ok(storage.remove_file(path)?);
    }
    for name in storage.list_dir(path)? {
        remove_tree(storage, &path.join(name))?;
    }
    Ok(storage.remove_dir(path)?)
}

/// Opens the store's parts: the block store, the tree (made when `fresh`), the log's
/// records replayed onto the tree, the log for appends and the checkpoint thread
/// (unless read-only). `options` carry the store's own settings.
fn start(
    storage: &Storage,
    dir: &Path,
    options: Options,
    lock: Option<FileLock>,
    fresh: bool,
) -> Result<Db> {
    let read_only = options.read_only;
    let log_dir = options.log_dir.clone().unwrap_or_else(|| dir.join(identity::LOG_DIR));
    assert!(!(fresh && read_only), "a read-only open makes no store");
    let blocks_dir = dir.join(BLOCKS_DIR);
    if !fresh && !storage.is_dir(&blocks_dir)? {
        return Err(Error::Corruption(format!(
            "the store has no {BLOCKS_DIR} directory ({} is missing)",
            blocks_dir.display()
        )));
    }
    let store_options = StoreOptions {
        read_method: options.read_method,
        codec: options.compression,
        segment_bytes: options.block_segment_bytes,
        file_mode: options.file_mode,
        read_only,
        // The write-back writes large groups in the background: zeros would double its
        // writes (in three pairs of YCSB loads, without them: 1.19, 0.94, 1.03 times the
        // ops/s).
        zero_fill_segments: false,
        ..StoreOptions::default()
    };
    let blocks = LogStore::open(storage, &blocks_dir, store_options)?;
    let pages = Pages::new(
        Arc::new(blocks),
        options.page_cache_bytes(),
        options.page_bytes(),
        options.tier.clone(),
    )?;
    let (meta, reclaim_now) = match pages.read_meta()? {
        Some(meta) => {
            let mut reclaim: Vec<u64> = (meta.orphans_from..meta.next_page).collect();
            if let Some(list) = meta.free_list {
                reclaim.extend(decode_ids(&pages.read_overflow(&list)?)?);
                reclaim.extend(list.first..list.first + u64::from(list.blocks));
            }
            (meta, reclaim)
        }
        None if fresh => (create_tree(&pages, options.page_bytes())?, Vec::new()),
        None => {
            return Err(Error::Corruption(format!(
                "the block store in {} holds no meta block",
                blocks_dir.display()
            )))
        }
    };
    if !read_only {
        // Ids below the orphans that no block holds are given out again (`block_pages`),
        // but for those the first checkpoint deletes (a free list may name an id whose block
        // is gone already).
        pages.find_reusable(meta.orphans_from, &reclaim_now)?;
    }
    let tree = Tree { root: meta.root, max_page_bytes: meta.max_page_bytes as usize };

    // The log's records after the checkpoint are replayed onto the pages, in place: a
    // page may hold some of them already (written back before the crash), and each change
    // is a whole value or a removal, so applying it again leaves the same.
    let next_page = AtomicU64::new(meta.next_page);
    let writer = Writer::new();
    let freed = Mutex::new(Vec::new());
    let undo = Undo::new(options.undo_segment_bytes(), options.undo_limit());
    let apply = Apply {
        pages: &pages,
        writer: &writer,
        next_page: &next_page,
        freed: &freed,
        undo: None,
        live: None,
        inline_max: options.max_inline_value(),
    };
    let mut replay_error: Option<Error> = None;
    let mut replayed_bytes = 0u64;
    let wal_options = WalOptions {
        backend: options.backend(),
        segment_bytes: options.log_segment_bytes,
        file_mode: options.file_mode,
        ..WalOptions::default()
    };
    let report = Wal::read_only(storage, &log_dir, &wal_options, |record| {
        if record.lsn.0 <= meta.sequence || replay_error.is_some() {
            return;
        }
        if record.kind != batch_record() {
            replay_error = Some(Error::Corruption(format!(
                "log record {} has type {}",
                record.lsn,
                record.kind.get()
            )));
            return;
        }
        let batch = match WriteBatch::decode(record.payload) {
            Ok(batch) => batch,
            Err(detail) => {
                replay_error =
                    Some(Error::Corruption(format!("log record {}: {detail}", record.lsn)));
                return;
            }
        };
        replayed_bytes += record.payload.len() as u64;
        if batch.is_empty() {
            // A backup's first record: it only numbers.
            return;
        }
        let number = || Ok::<u64, std::convert::Infallible>(record.lsn.0);
        match apply.batch(meta.root, &batch, number) {
            Ok(lsn) => debug_assert_eq!(lsn, record.lsn.0),
            Err(ApplyError::Tree(error)) => replay_error = Some(error),
            Err(ApplyError::Refused(never)) => match never {},
        }
    })?;
    if let Some(error) = replay_error {
        return Err(error);
    }
    // A value replaced after the checkpoint may be listed for deletion already (the
    // checkpoint's page held the new one): the first checkpoint deletes it, not a retire.
    let listed: std::collections::HashSet<u64> = reclaim_now.iter().copied().collect();
    let mut freed = freed.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    freed.retain(|(_, overflow)| {
        let ids = overflow.first..overflow.first + u64::from(overflow.blocks);
        let gone = listed.contains(&overflow.first);
        assert!(ids.clone().all(|id| listed.contains(&id) == gone), "a value listed in part");
        !gone
    });
    let freed = Mutex::new(freed);
    let last = report.lsn_range.map_or(0, |(_, last)| last.0);
    check_log_covers(&report, last, meta.sequence, &log_dir)?;
    let wal = match read_only {
        true => None,
        false => {
            // The records were replayed above; this pass finds where appends resume and
            // repairs a torn tail. It must find the same records.
            let mut records = 0u64;
            let recovered = Wal::open(storage, &log_dir, wal_options, |_| records += 1)?;
            if records != report.records || recovered.wal.next_lsn().0 != last + 1 {
                return Err(Error::Corruption(format!(
                    "the log in {} changed while it was opened ({} records, then {records})",
                    log_dir.display(),
                    report.records
                )));
            }
            Some(recovered.wal)
        }
    };
    // The buffer pool was made with its least budget; it gets what the undo leaves.
    let memtable_max = options.undo_limit();
    let version = Version { tree, undo: undo.view(), epoch: Arc::new(Epoch) };
    let state = Checkpointer {
        meta,
        early_list: None,
        retired: VecDeque::new(),
        reclaim_now,
        durable_to: 0,
        last: Instant::now(),
    };
    let summary = state.summary();
    let inner = Arc::new(Inner {
        options,
        storage: storage.clone(),
        dir: dir.to_path_buf(),
        pages,
        wal,
        current: ArcSwap::from_pointee(version),
        publishing: Mutex::new(()),
        switch: RwLock::new(()),
        writer,
        undo,
        live: Default::default(),
        next_page,
        freed,
        visible: Visibility::new(last),
        checkpointer: Mutex::new(state),
        summary: Mutex::new(summary),
        populator: Default::default(),
        trigger: Mutex::new(Trigger { running: !read_only, ..Trigger::default() }),
        trigger_cv: Condvar::new(),
        failure: Mutex::new(None),
        failed: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        log_bytes: AtomicU64::new(replayed_bytes),
        undo_reserve: AtomicUsize::new(memtable_max),
        rebudgeting: Mutex::new(()),
        counters: Counters::default(),
        file_lock: Mutex::new(lock),
        _release: ReleaseOnDrop,
    });
    inner.rebudget();
    let checkpointer = match read_only {
        true => None,
        false => {
            let background = Arc::clone(&inner);
            let thread = std::thread::Builder::new()
                .name("tierkv-checkpoint".into())
                .spawn(move || {
                    // Best effort: refused, the thread shares cores evenly, as before.
                    tierkv_io::priority::lower_this_thread(CHECKPOINT_NICE);
                    background.checkpoint_loop()
                })
                .map_err(|error| Error::Thread(error.to_string()))?;
            super::ahead::Populator::start(&inner);
            Some(thread)
        }
    };
    let shared = ArcSwap::new(Arc::clone(&inner));
    Ok(Db { inner, shared, checkpoint_thread: Mutex::new(Some(checkpointer)) })
}

/// Refuses a log that ends before the checkpoint, saying where it ends: appending would
/// reuse record numbers the checkpoint covers, and the next recovery would skip those
/// writes.
fn check_log_covers(
    report: &RecoveryReport,
    last: u64,
    sequence: u64,
    log_dir: &Path,
) -> Result<()> {
    // A log is truncated only below a durable checkpoint, so its first record is at most the
    // one after the checkpoint's sequence. Past it, records the tree does not hold are gone:
    // the checkpoint in use is older than one the log was truncated for (a damaged block
    // store fell back to it).
    if let Some((first, _)) = report.lsn_range.filter(|(first, _)| first.0 > sequence + 1) {
        return Err(Error::Corruption(format!(
            "the log in {} starts at record {first}, but the checkpoint covers records only up \
             to {sequence}: records {} to {} are in neither (the block store lost a newer \
             checkpoint); `tierkv salvage` copies what is left into a new store",
            log_dir.display(),
            sequence + 1,
            first.0 - 1
        )));
    }
    if last >= sequence {
        return Ok(());
    }
    let why = match &report.stop {
        Some(stop) => format!(
            "its recovery stopped at {} offset {} ({})",
            stop.file.display(),
            stop.offset,
            stop.reason
        ),
        None => match &report.end {
            Some((file, offset)) => format!(
                "its last record ends at {} offset {offset}: the log was cut short there, or \
                 it is not this store's log",
                file.display()
            ),
            None => "it is empty: it was lost, or it is not this store's log".into(),
        },
    };
    Err(Error::Corruption(format!(
        "the log in {} ends at record {last}, but the checkpoint covers records up to \
         {sequence}: {why}",
        log_dir.display()
    )))
}
