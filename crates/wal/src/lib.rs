//! `tierkv-wal`: the write-ahead log of tierkv, on `tierkv-io`.
//!
//! A log is a directory of segment files (`format`). Every append gets the next log sequence
//! number (`Lsn`, from 1) and is copied into the active segment at a reserved offset. Two
//! backends make appends durable (`Backend`):
//!
//! - `file`: pwrite, then one fdatasync shared by every `Sync` appender waiting at that moment
//!   (group commit, `log` module). Segments are zero-filled ahead of use, so a commit's
//!   fdatasync writes data blocks only, with no allocation to journal.
//! - `pmem` (FLEX, seed 001): the record is copied into a mapping and persisted with cache-line
//!   flushes and a fence, then the segment's 8-byte commit word is stored and persisted, in
//!   LSN order. The commit path makes no system call: segments are prepared (allocated, mapped
//!   and zeroed) by a background thread before they are needed.
//!
//! `Wal::open` recovers: it returns every complete record in LSN order, stops at the first
//! torn or invalid one, removes what lies after it, and reports what it discarded
//! (`RecoveryReport`). A failed write, sync or persist poisons the log: appends fail until it is
//! reopened.
//!
//! ```
//! use tierkv_io::Storage;
//! use tierkv_wal::{Durability, RecordType, Wal, WalOptions};
//!
//! # fn main() -> Result<(), tierkv_wal::WalError> {
//! # let dir = tempfile::tempdir().expect("a temporary directory");
//! let kind = RecordType::new(1).expect("non-zero");
//! let wal = Wal::open(&Storage::Os, dir.path(), WalOptions::default(), |_| {})?.wal;
//! let lsn = wal.append(kind, b"put k1 v1", Durability::Sync)?; // durable on return
//! wal.close()?;
//!
//! let mut replayed = Vec::new();
//! let recovered = Wal::open(&Storage::Os, dir.path(), WalOptions::default(), |record| {
//!     replayed.push((record.lsn, record.payload.to_vec()));
//! })?;
//! assert_eq!(replayed, vec![(lsn, b"put k1 v1".to_vec())]);
//! assert_eq!(recovered.report.discarded_bytes, 0);
//! # Ok(())
//! # }
//! ```

#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

mod error;
pub mod format;
mod log;
mod options;
mod recovery;
mod segment;
mod stats;

pub use error::WalError;
pub use format::Backend;
pub use log::{Recovered, Wal};
pub use options::{Durability, WalOptions};
pub use recovery::{Record, RecoveryReport};
pub use stats::WalStats;

/// A log sequence number. The first record of a log has LSN 1; each append takes the next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

impl Lsn {
    /// The LSN before any record: nothing is written, durable or committed.
    pub const ZERO: Lsn = Lsn(0);

    /// The next LSN.
    pub fn next(self) -> Lsn {
        Lsn(self.0 + 1)
    }

    /// The value as stored.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for Lsn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The type byte of a record, chosen by the caller (1..=255; 0 marks unwritten space).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecordType(std::num::NonZeroU8);

impl RecordType {
    /// A record type; `None` for 0, which is reserved.
    pub fn new(value: u8) -> Option<RecordType> {
        std::num::NonZeroU8::new(value).map(RecordType)
    }

    /// The byte as stored.
    pub fn get(self) -> u8 {
        self.0.get()
    }
}
