//! `tierkv`: an embedded, crash-safe, ordered key-value store (issue 6).
//!
//! [`Db`] joins the layers below it: writes are made durable by the write-ahead log
//! (`tierkv-wal`) and kept in a memtable; checkpoints move them into a copy-on-write B+tree
//! whose pages are decoded in a DRAM page cache and written back as new blocks in atomic
//! groups of `tierkv-blockstore`, so a page is never overwritten in place. See `db` for the
//! write and read paths, checkpoints, snapshots and recovery.
//!
//! ```
//! use tierkv::{Db, Options, WriteBatch};
//!
//! # fn main() -> tierkv::Result<()> {
//! # let dir = tempfile::tempdir().expect("a temporary directory");
//! let db = Db::open(dir.path(), Options::default())?;
//! db.put(b"apple", b"red")?; // durable on return (Durability::Sync)
//! let mut batch = WriteBatch::new();
//! batch.put(b"banana", b"yellow").delete(b"apple");
//! db.write(&batch)?; // all or nothing
//! let snapshot = db.snapshot();
//! db.put(b"cherry", b"dark red")?;
//! assert_eq!(snapshot.get(b"apple")?, None);
//! assert_eq!(snapshot.range::<&[u8]>(..).count(), 1); // the snapshot does not see cherry
//! let keys: Vec<Vec<u8>> = db.range_back::<&[u8]>(..).map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
//! assert_eq!(keys, vec![b"cherry".to_vec(), b"banana".to_vec()]);
//! db.close()?;
//! # Ok(())
//! # }
//! ```
//!
//! Limits: keys of 1 to [`MAX_KEY_BYTES`] bytes (empty keys are refused); values up to
//! [`MAX_VALUE_BYTES`] (values over a quarter of a page go to overflow blocks); a batch's
//! log record up to [`MAX_BATCH_BYTES`].
//!
//! The layers inside:
//!
//! - [`page`]: the B+tree page format (leaf and internal pages, overflow references), with
//!   a decoder that checks every length, order and limit, so that a damaged page is an error
//!   and never a panic or garbage; and the page-level steps of tree changes.
//! - [`cache`]: the DRAM page cache: a byte budget, S3-FIFO eviction (scan-resistant),
//!   pages that are dirty or in use never evicted, shards with a lock each.
//! - [`tree`]: the B+tree's algorithms (lookup, insert with splits, delete with merges,
//!   scans both ways), copy on write, over any `PageStore`.
//! - [`block_pages`]: the tree's pages on a block store, read through the cache by many
//!   readers, changed by one checkpoint at a time and written in atomic groups; overflow
//!   blocks for large values.
//! - [`meta`]: the meta block each checkpoint writes with its pages.
//! - [`memtable`]: the writes since the last checkpoint, versioned by sequence number.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![warn(missing_docs)]

mod batch;
pub mod block_pages;
pub mod cache;
mod db;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod identity;
pub mod memtable;
pub mod meta;
mod options;
pub mod page;
pub mod tree;

pub use batch::{WriteBatch, MAX_BATCH_BYTES, MAX_KEY_BYTES, MAX_VALUE_BYTES};
pub use db::{Db, Iter, Snapshot, Stats, VerifyReport};
pub use error::{Error, ErrorKind, Result};
pub use identity::{FORMAT_VERSION, IDENTITY_FILE};
pub use options::{Options, DEFAULT_PAGE_BYTES, MAX_PAGE_BYTES, MIN_PAGE_BYTES};
pub use tierkv_blockstore::Codec;
pub use tierkv_io::AccessMethod;
pub use tierkv_tiercache::{RegionBacking, SlowTier, TierOptions, TierStats};
pub use tierkv_wal::{Backend, Durability};
