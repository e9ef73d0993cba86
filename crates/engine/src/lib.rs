//! `tierkv`: an embedded, crash-safe, ordered key-value store.
//!
//! [`Db`] joins the layers below it: writes are made durable by the write-ahead log
//! (`tierkv-wal`) and kept in a memtable; checkpoints move them into a copy-on-write B+tree
//! whose pages live in the frames of a buffer pool, read in place, and are written back as
//! new blocks in atomic groups of `tierkv-blockstore`, so a page is never overwritten in
//! place. Readers see a
//! [`Snapshot`]: the store as of one moment, whatever is written or checkpointed after.
//!
//! The README's example, as a test:
//!
//! ```
//! use std::sync::Arc;
//! use tierkv::{Db, Durability, Options, WriteBatch};
//!
//! # fn main() -> tierkv::Result<()> {
//! # let dir = tempfile::tempdir().expect("a temporary directory");
//! let db = Arc::new(Db::open(dir.path(), Options::default())?); // created when missing
//! db.put(b"user:1", b"ada")?; // durable on return (Durability::Sync)
//! let mut batch = WriteBatch::new();
//! batch.put(b"user:2", b"grace").put(b"user:3", b"edsger").delete(b"user:1");
//! db.write_with(&batch, Durability::Buffered)?; // atomic; durable within 20 ms
//! let mut value = Vec::new();
//! assert!(db.get_into(b"user:2", &mut value)?); // into a buffer you reuse; or get, get_with
//! let snapshot = db.snapshot(); // a consistent view
//! db.put(b"user:4", b"barbara")?; // the snapshot does not see it
//! for entry in snapshot.prefix(b"user:").rev() { // or range(..), range(b"a"..b"c"), seek
//!     let (key, value) = entry?;
//!     assert!(key.starts_with(b"user:") && !value.is_empty());
//! }
//! assert_eq!(snapshot.range(..).count(), 2);
//! assert_eq!(db.last()?, Some((b"user:4".to_vec(), b"barbara".to_vec()))); // and first()
//! assert_eq!(db.delete_range(b"user:3"..b"user:5")?, 2); // atomic
//! db.checkpoint()?; // also runs on its own (size, log, time)
//! db.close()?; // &self: any holder of the Arc may close
//! # Ok(())
//! # }
//! ```
//!
//! Limits: keys of 1 to `Options::max_key_bytes` bytes (half the page size less 32, never
//! over [`MAX_KEY_BYTES`]: 4,096 with the default 16 KiB pages; empty keys are refused);
//! values up to [`MAX_VALUE_BYTES`] (values over a quarter of a page go to overflow
//! blocks); a batch's log record up to [`MAX_BATCH_BYTES`].
//!
//! The layers inside, private modules of `crates/engine/src/` (each file's header says
//! more):
//!
//! - `page`: the B+tree page format (leaf and internal pages, overflow references), with
//!   a decoder that checks every length, order and limit, so that a damaged page is an error
//!   and never a panic or garbage; and the page-level steps of tree changes.
//! - `buffer`: the buffer pool: pages in frames addressed by page id, read optimistically
//!   in place, loaded and checked on a miss, evicted by a clock under a byte budget.
//! - `tree`: the B+tree's algorithms (lookup, insert with splits, delete with merges,
//!   scans both ways), copy on write, over any `PageStore`.
//! - `block_pages`: the tree's pages on a block store, read through the pool by many
//!   readers, changed by one checkpoint at a time and written in atomic groups; overflow
//!   blocks for large values.
//! - `meta`: the meta block each checkpoint writes with its pages.
//! - `memtable`: the writes since the last checkpoint, versioned by sequence number.
//! - `db`: [`Db`]'s write and read paths, checkpoints, snapshots and recovery.
//! - `salvage`: [`salvage`] copies what can still be read from a damaged store (the tree,
//!   leaf pages it no longer reaches, the log) into a new one, and a [`SalvageReport`]
//!   says, by key range, what it could not recover and what it copied without being sure.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![warn(missing_docs)]
#![warn(clippy::missing_errors_doc)]

mod batch;
mod block_pages;
mod buffer;
mod db;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod identity;
mod memtable;
mod meta;
mod options;
mod page;
mod range;
mod salvage;
mod striped;
mod tree;
// The before-images of changes in place (issue 26): built and tested ahead of the write
// path that will record them, which is not in yet.
#[allow(dead_code)]
mod undo;
// Write-back of pages changed in place (issue 26): built and tested ahead of its use.
#[allow(dead_code)]
mod writeback;

pub use batch::{WriteBatch, MAX_BATCH_BYTES, MAX_KEY_BYTES, MAX_VALUE_BYTES};
pub use block_pages::PagesError;
pub use db::{
    CacheStats, CompareAndSwapError, Db, Iter, Snapshot, Stats, Transaction, VerifyReport,
};
pub use error::{Error, ErrorKind, Result};
pub use identity::{FORMAT_VERSION, IDENTITY_FILE};
pub use meta::MetaError;
pub use options::{Options, DEFAULT_PAGE_BYTES, MAX_PAGE_BYTES, MIN_PAGE_BYTES};
pub use page::PageError;
pub use range::KeyRange;
pub use salvage::{
    salvage, salvage_on, DoubtfulRange, KeySpan, LogSalvage, LostRange, LostRecords, LostValue,
    SalvageOptions, SalvageReport,
};
pub use tierkv_blockstore::Codec;
pub use tierkv_io::AccessMethod;
pub use tierkv_tiercache::{RegionBacking, SlowTier, TierOptions, TierStats};
pub use tierkv_wal::{Backend, Durability};
