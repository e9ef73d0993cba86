//! Options of a log, and the durability of one append.

use std::time::Duration;

use tierkv_io::PmemModeRequest;

use crate::format::{Backend, RECORDS_START};
use crate::WalError;

/// When an append is durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Durability {
    /// `append` returns once the record is durable (fdatasync, or flush + fence + commit word).
    #[default]
    Sync,
    /// `append` returns once the record is written; the background flusher makes it durable
    /// within `WalOptions::flush_interval`. On the pmem backend every append is durable on
    /// return: the copy is persisted before the commit word may pass it.
    Buffered,
    /// `append` returns once the record is written and never asks for a sync. A later `Sync`
    /// append, `Wal::sync` or flusher pass makes it durable with everything before it.
    None,
}

impl Durability {
    /// The name used in output.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Sync => "sync",
            Durability::Buffered => "buffered",
            Durability::None => "none",
        }
    }
}

/// Options of `Wal::open`.
#[derive(Clone, Debug)]
pub struct WalOptions {
    /// How appends are made durable. Default `File`.
    pub backend: Backend,
    /// The largest segment file. Segments are preallocated and zero-filled before use, and
    /// sized by how fast the last one filled (`tierkv_io::RateSizing`: about two seconds of
    /// writes each, growing at most fourfold from one segment to the next, so that zeroing
    /// the next keeps ahead of appends filling the current one), from
    /// `first_segment_bytes` up to this. Default 64 MiB. A record larger
    /// than a segment gets a segment of its own.
    pub segment_bytes: u64,
    /// The first segment of a new log, and the smallest (capped at `segment_bytes`), so
    /// that a log that takes few writes stays small. Default 512 KiB.
    pub first_segment_bytes: u64,
    /// Longest time a `Buffered` append waits before the flusher syncs it. Default 20 ms.
    pub flush_interval: Duration,
    /// The pmem mode for the pmem backend (see `tierkv_io::PmemMode`). Default `Auto`:
    /// MAP_SYNC on DAX, flush-only emulation on tmpfs, msync elsewhere.
    pub pmem_mode: PmemModeRequest,
    /// Permission bits of new segment files. Default 0600.
    pub file_mode: u32,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            backend: Backend::File,
            segment_bytes: 64 << 20,
            first_segment_bytes: 512 << 10,
            flush_interval: Duration::from_millis(20),
            pmem_mode: PmemModeRequest::Auto,
            file_mode: 0o600,
        }
    }
}

impl WalOptions {
    /// Options with the given backend and the other defaults.
    pub fn with_backend(backend: Backend) -> WalOptions {
        WalOptions { backend, ..WalOptions::default() }
    }

    /// The smallest segment size accepted: a header block and one page of records.
    pub const MIN_SEGMENT_BYTES: u64 = RECORDS_START + 4096;

    /// How segments are sized (see `segment_bytes`).
    pub fn sizing(&self) -> tierkv_io::RateSizing {
        tierkv_io::RateSizing::new(self.first_segment_bytes, self.segment_bytes)
    }

    /// Checks the options; the log checks them again when it opens.
    pub fn validate(&self) -> Result<(), WalError> {
        if self.segment_bytes < Self::MIN_SEGMENT_BYTES || !self.segment_bytes.is_multiple_of(4096)
        {
            return Err(WalError::InvalidOptions(format!(
                "segment_bytes is {}; it must be a multiple of 4096 and at least {}",
                self.segment_bytes,
                Self::MIN_SEGMENT_BYTES
            )));
        }
        let first = self.first_segment_bytes;
        if first < Self::MIN_SEGMENT_BYTES || !first.is_multiple_of(4096) {
            return Err(WalError::InvalidOptions(format!(
                "first_segment_bytes is {first}; it must be a multiple of 4096 and at least {}",
                Self::MIN_SEGMENT_BYTES
            )));
        }
        if self.flush_interval.is_zero() {
            return Err(WalError::InvalidOptions(
                "flush_interval is 0; use Durability::Sync for appends that must not wait".into(),
            ));
        }
        Ok(())
    }
}
