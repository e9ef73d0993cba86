//! `Db::backup`: a consistent copy of the store as of one snapshot, made while writers go on,
//! as a new store of its own.
//!
//! The copy is a bulk load of the snapshot's entries into a new store (`bulk.rs`): full
//! pages, overflow values copied, its meta block covering the snapshot's sequence number, and
//! its log numbered after it (one empty record at the next number), so that the copy reads
//! as the source did at that sequence and takes writes after it. The copy's identity file
//! says *backup in progress* from before anything else is made until everything is durable,
//! and only then *ready*: a backup killed on the way leaves a directory that refuses to open
//! (`Error::IncompleteBackup`). A backup that fails removes what it made.
//!
//! Must never: write to the source (it reads a snapshot, so it works on a read-only store);
//! let a half-made copy open as a store.

use std::path::Path;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use tierkv_wal::{Backend, Durability, Lsn};

use super::{batch_record, bulk::BulkLoad, lock, open, Db, Inner, Snapshot};
use crate::block_pages::BlockPages;
use crate::page::Value;
use crate::tree::{PageStore, Tree};
use crate::{Options, Result, WriteBatch};

/// The memory budget of the copy while it is made.
const BACKUP_CACHE_BYTES: usize = 32 << 20;

impl Db {
    /// Copies the store, as of this moment, into a new store at `dir` (missing, with an
    /// existing parent, or empty), and returns the sequence number the copy covers: it
    /// holds exactly what a snapshot taken at that sequence sees. Writers and readers go on
    /// meanwhile. The copy is self-contained (its log inside it, on the file backend) and
    /// opens as a store of its own once this returns; a backup killed on the way leaves a
    /// directory that refuses to open (`Error::IncompleteBackup`), and one that fails
    /// removes what it made. Works on a store opened read-only.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// let db = tierkv::Db::open(dir.path().join("db"), tierkv::Options::default())?;
    /// db.put("k", "v")?;
    /// let sequence = db.backup(dir.path().join("copy"))?;
    /// db.put("k", "newer")?;
    /// assert_eq!(sequence, 1, "the copy holds the store as of its first write");
    /// let copy = tierkv::Db::open(dir.path().join("copy"), tierkv::Options::default())?;
    /// assert_eq!(copy.get("k")?.as_deref(), Some(&b"v"[..]));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// What `Db::open` gives for `dir` (`Error::NotAStore` for a directory that holds
    /// files, `Error::AlreadyExists` for a store, `Error::NotFound` for a missing parent);
    /// a read of the source that fails (`Error::Pages`, `Error::Blocks`); a write of the
    /// copy that fails; `Error::Closed` when the store is closed.
    pub fn backup(&self, dir: impl AsRef<Path>) -> Result<u64> {
        let inner = &self.inner;
        inner.check_open()?;
        let dir = dir.as_ref();
        let snapshot = self.snapshot();
        let sequence = snapshot.sequence();
        let options = Options {
            cache_size: BACKUP_CACHE_BYTES,
            write_buffer_size: None,
            max_page_bytes: Some(inner.options.page_bytes()),
            log_dir: None,
            log_backend: Some(Backend::File),
            read_method: tierkv_io::AccessMethod::Syscall,
            tier: None,
            read_only: false,
            create_if_missing: true,
            error_if_exists: true,
            ..inner.options.clone()
        };
        let existed = inner.storage.exists(dir)?;
        let copy = open::create_backup(&inner.storage, dir, options.clone(), sequence)?;
        let made = copy
            .inner
            .load_snapshot(&snapshot)
            .and_then(|()| copy.close())
            .and_then(|()| open::mark_ready(&inner.storage, dir, &options));
        drop(copy);
        if let Err(error) = made {
            // Best effort: what stays is a directory that refuses to open.
            let _ = open::discard_backup(&inner.storage, dir, !existed);
            return Err(error);
        }
        Ok(sequence)
    }
}

impl Inner {
    /// Loads `source`'s entries into this new, empty store (see the module header).
    fn load_snapshot(&self, source: &Snapshot) -> Result<()> {
        let mut cp = lock(&self.checkpointer);
        let old = self.current.load().tree.clone();
        assert_eq!(cp.meta.sequence, 0, "a backup goes into a new store");
        let inline_max = self.options.max_inline_value();
        let dirty_budget = self.options.dirty_budget();
        let mut bulk = BulkLoad::new(
            BlockPages::new(&self.pages, self.next_page.load(Ordering::Relaxed)),
            old.max_page_bytes,
        );
        for entry in source.range(..) {
            let (key, value) = entry?;
            let value = match value.len() > inline_max {
                true => Value::Overflow(bulk.session.write_overflow(&value)),
                false => Value::inline(Bytes::from(value)),
            };
            bulk.push(&key, value);
            if bulk.session.needs_early_flush(dirty_budget) {
                self.flush_early(&mut cp, &mut bulk.session)?;
            }
        }
        let (mut session, root) = bulk.finish();
        // The new store's empty root leaf is replaced.
        session.free(old.root);
        let tree = Tree { root, max_page_bytes: old.max_page_bytes };
        self.finish(&mut cp, session, tree, source.sequence())?;
        // The copy's log goes on after the source's sequence: one empty record there, so a
        // log that ends before the checkpoint is still told from one that was lost.
        let wal = self.log()?;
        wal.start_after(Lsn(source.sequence()))?;
        let next = wal.append(batch_record(), &WriteBatch::new().encode(), Durability::Sync)?;
        assert_eq!(next.0, source.sequence() + 1);
        self.visible.start_at(next.0);
        assert_eq!(cp.meta.sequence, source.sequence());
        Ok(())
    }
}
