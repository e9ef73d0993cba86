//! Optimistic transactions and compare-and-swap (issue 26, item 5).
//!
//! A [`Transaction`] reads through a snapshot taken when it began, and keeps its writes to
//! itself until it commits (reads see its own writes first). Every key it read, and every
//! key it writes, is remembered with the value the snapshot gave it. The commit is one
//! checked batch (`Inner::write_checked`): with the leaves of all those keys latched, each
//! must still hold the value remembered, or the commit fails with [`Error::Conflict`] and
//! writes nothing; else the writes are applied as one atomic batch, in the same critical
//! section. Validation is by value, at the commit: a committed transaction is equivalent to
//! running it alone at its commit's sequence number (serializable for the keys it reads
//! with `get`; a scan inside a transaction is not offered, as its phantoms would not be
//! checked). This is optimistic concurrency control in the sense of RocksDB's
//! `OptimisticTransactionDB` and fjall's optimistic transactions: nothing is locked until
//! the commit, and a loser retries.
//!
//! [`Db::compare_and_swap`] is the one-key case, with no snapshot: one checked batch.
//!
//! Must never: commit a transaction whose read or written key changed after its snapshot
//! saw it (to a different value); write part of a transaction.

use std::collections::BTreeMap;

use tierkv_wal::Durability;

use super::{Db, Snapshot};
use crate::batch::WriteBatch;
use crate::{Error, Result};

/// Why a [`Db::compare_and_swap`] did not swap: the key held `current`, not the value
/// expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompareAndSwapError {
    /// The key's value when the swap was tried (`None`: no value).
    pub current: Option<Vec<u8>>,
}

impl std::fmt::Display for CompareAndSwapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.current {
            Some(value) => write!(f, "the key held another value ({} bytes)", value.len()),
            None => write!(f, "the key held no value"),
        }
    }
}

impl std::error::Error for CompareAndSwapError {}

/// An optimistic transaction (see [`Db::transaction`]): reads as of its start, writes
/// kept until [`commit`](Self::commit), which applies them atomically only if nothing it
/// read or writes changed meanwhile. Dropping it without committing discards it.
///
/// It holds a snapshot: keep it short, as a snapshot held across more changes than the
/// store keeps older values for reads `Error::SnapshotTooOld`.
pub struct Transaction {
    snapshot: Snapshot,
    /// Each key read or written, with the value the snapshot gave it (what the commit
    /// checks). Keys written but not read are looked up at the commit.
    seen: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// The writes, by key: the last one wins.
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl Transaction {
    /// The sequence number its reads see up to.
    pub fn sequence(&self) -> u64 {
        self.snapshot.sequence()
    }

    /// The value of `key`: this transaction's own write of it if any, else as of its
    /// start. The commit fails if the key changes before it.
    ///
    /// # Errors
    ///
    /// As [`Snapshot::get`].
    pub fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        if let Some(value) = self.writes.get(key) {
            return Ok(value.clone());
        }
        if let Some(value) = self.seen.get(key) {
            return Ok(value.clone());
        }
        let value = self.snapshot.get(key)?;
        self.seen.insert(key.to_vec(), value.clone());
        Ok(value)
    }

    /// Sets `key` to `value` when the transaction commits.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.writes.insert(key.as_ref().to_vec(), Some(value.as_ref().to_vec()));
        self
    }

    /// Removes `key` when the transaction commits.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.writes.insert(key.as_ref().to_vec(), None);
        self
    }

    /// Commits with the store's default durability; see [`commit_with`](Self::commit_with).
    ///
    /// # Errors
    ///
    /// As [`commit_with`](Self::commit_with).
    pub fn commit(self) -> Result<u64> {
        let durability = self.snapshot.inner.options.durability;
        self.commit_with(durability)
    }

    /// Applies the writes as one atomic batch if every key read or written still holds
    /// the value this transaction saw, and returns the batch's sequence number (a
    /// transaction with no writes returns its snapshot's, having nothing to check: its
    /// reads were consistent as of then).
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] when a key changed since this transaction saw it (nothing is
    /// written; run the transaction again); [`Error::SnapshotTooOld`] when a written key's
    /// value as of the start can no longer be read; and those of [`Db::write`].
    pub fn commit_with(mut self, durability: Durability) -> Result<u64> {
        if self.writes.is_empty() {
            return Ok(self.snapshot.sequence());
        }
        // Keys written blind: what the snapshot holds for them is what must still hold.
        let blind: Vec<Vec<u8>> =
            self.writes.keys().filter(|key| !self.seen.contains_key(*key)).cloned().collect();
        for key in blind {
            let value = self.snapshot.get(&key)?;
            self.seen.insert(key, value);
        }
        let mut batch = WriteBatch::new();
        for (key, value) in &self.writes {
            match value {
                Some(value) => batch.put(key, value),
                None => batch.delete(key),
            };
        }
        let expect: Vec<(&[u8], Option<&[u8]>)> =
            self.seen.iter().map(|(key, value)| (key.as_slice(), value.as_deref())).collect();
        debug_assert!(self.writes.keys().all(|key| self.seen.contains_key(key)));
        let inner = &self.snapshot.inner;
        match inner.write_checked(&batch, durability, &expect)? {
            Ok(sequence) => {
                assert!(sequence > self.snapshot.sequence(), "a commit after its snapshot");
                Ok(sequence)
            }
            Err(mismatch) => Err(Error::Conflict { key: expect[mismatch.index].0.to_vec() }),
        }
    }

    /// Discards the transaction (as dropping it does).
    pub fn rollback(self) {}
}

impl Db {
    /// Begins an optimistic transaction: its reads see the store as of now (and its own
    /// writes), its writes wait for [`Transaction::commit`], which fails with
    /// [`Error::Conflict`] if a key it read or writes changed meanwhile.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// # let db = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
    /// db.put("balance", "10")?;
    /// let mut first = db.transaction();
    /// let mut second = db.transaction();
    /// for tx in [&mut first, &mut second] {
    ///     let balance: u32 = String::from_utf8_lossy(&tx.get("balance")?.unwrap()).parse().unwrap();
    ///     tx.put("balance", (balance - 3).to_string());
    /// }
    /// first.commit()?;
    /// let error = second.commit().unwrap_err();
    /// assert!(matches!(error, tierkv::Error::Conflict { .. }));
    /// assert_eq!(db.get("balance")?, Some(b"7".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn transaction(&self) -> Transaction {
        Transaction { snapshot: self.snapshot(), seen: BTreeMap::new(), writes: BTreeMap::new() }
    }

    /// Sets `key` to `new` (`None`: removes it) only if it holds `expected` now (`None`:
    /// no value), atomically, with the store's default durability. Returns the inner
    /// `Err` with the key's value when it held something else, and then writes nothing.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// # let db = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
    /// assert!(db.compare_and_swap("lock", None, Some(b"me"))?.is_ok());
    /// let taken = db.compare_and_swap("lock", None, Some(b"you"))?;
    /// assert_eq!(taken.unwrap_err().current, Some(b"me".to_vec()));
    /// assert!(db.compare_and_swap("lock", Some(b"me"), None)?.is_ok());
    /// assert_eq!(db.get("lock")?, None);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Db::write`].
    pub fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<std::result::Result<(), CompareAndSwapError>> {
        let key = key.as_ref();
        let mut batch = WriteBatch::new();
        match new {
            Some(value) => batch.put(key, value),
            None => batch.delete(key),
        };
        let durability = self.inner.options.durability;
        match self.inner.write_checked(&batch, durability, &[(key, expected)])? {
            Ok(_) => Ok(Ok(())),
            Err(mismatch) => {
                assert_eq!(mismatch.index, 0, "one key checked");
                assert_ne!(mismatch.current.as_deref(), expected, "a refusal of a match");
                Ok(Err(CompareAndSwapError { current: mismatch.current }))
            }
        }
    }
}
