//! Options of the two stores.

use tierkv_io::AccessMethod;

use crate::format::{Codec, MAX_BLOCK_BYTES};
use crate::BlockError;

/// Options of a `LogStore`.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// How blocks are read: `Syscall`, `Direct` (O_DIRECT) or `Mmap`. Writes always use
    /// pwrite and fdatasync. Default `Syscall`.
    pub read_method: AccessMethod,
    /// How new blocks are compressed. Default `None`.
    pub codec: Codec,
    /// The largest segment file. Segments are zero-filled at creation and sized by how fast
    /// the stream's last one filled (`tierkv_io::RateSizing`: about two seconds of writes),
    /// from `first_segment_bytes` up to this (a group larger than that gets a segment of its
    /// own). Default 16 MiB.
    pub segment_bytes: u64,
    /// A stream's first segment, and the smallest (capped at `segment_bytes`), so that a
    /// store that takes few writes stays small. Default 1 MiB.
    pub first_segment_bytes: u64,
    /// A map checkpoint is written after this many bytes of log, which bounds recovery's scan.
    /// Default 256 MiB.
    pub checkpoint_bytes: u64,
    /// The cleaner works while the segment files hold more than this many times the live
    /// bytes. Default 1.3, which keeps a sustained overwrite workload under 1.5.
    pub space_target: f64,
    /// Run the background cleaner. Default true; tests turn it off to clean by hand.
    pub background_cleaning: bool,
    /// Write zeros over a new segment before it takes blocks (a second write of each byte).
    /// With them, a block write never changes the file's extent map, so the fdatasync after
    /// a small group writes no metadata; without them, the space is only allocated
    /// (fallocate: reads of it return zeros all the same) and the first write into each
    /// extent converts it. Zeros suit many small synced groups (the default, true); a
    /// writer of large background groups (the engine's write-back) turns them off, since
    /// they double its writes and the group that needs a new segment waits for them.
    pub zero_fill_segments: bool,
    /// Permission bits of new files. Default 0600.
    pub file_mode: u32,
    /// Open without writing anything (`LogStore` only): every file is opened read-only,
    /// recovery rebuilds the map in memory and repairs nothing (a torn tail is skipped, not
    /// cut), nothing is created, and writes fail with `BlockError::ReadOnly`. Default false.
    pub read_only: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            read_method: AccessMethod::Syscall,
            codec: Codec::None,
            segment_bytes: 16 << 20,
            first_segment_bytes: 1 << 20,
            checkpoint_bytes: 256 << 20,
            space_target: 1.3,
            background_cleaning: true,
            zero_fill_segments: true,
            file_mode: tierkv_io::DEFAULT_FILE_MODE,
            read_only: false,
        }
    }
}

/// The smallest segment: a header and room for blocks of a few KiB.
pub const MIN_SEGMENT_BYTES: u64 = 64 << 10;

impl StoreOptions {
    /// How segments are sized (see `segment_bytes`).
    pub fn sizing(&self) -> tierkv_io::RateSizing {
        tierkv_io::RateSizing::new(self.first_segment_bytes, self.segment_bytes)
    }

    /// Checks the options; a store checks them again when it opens.
    pub fn validate(&self) -> Result<(), BlockError> {
        if self.read_method == AccessMethod::Pmem {
            return Err(BlockError::InvalidOptions(
                "read_method pmem is not a read method; use syscall, direct or mmap".into(),
            ));
        }
        if self.segment_bytes < MIN_SEGMENT_BYTES || !self.segment_bytes.is_multiple_of(4096) {
            return Err(BlockError::InvalidOptions(format!(
                "segment_bytes {} must be a multiple of 4096 and at least {MIN_SEGMENT_BYTES}",
                self.segment_bytes
            )));
        }
        let first = self.first_segment_bytes;
        if first < MIN_SEGMENT_BYTES || !first.is_multiple_of(4096) {
            return Err(BlockError::InvalidOptions(format!(
                "first_segment_bytes {first} must be a multiple of 4096 and at least \
                 {MIN_SEGMENT_BYTES}"
            )));
        }
        if !(self.space_target.is_finite() && self.space_target > 1.0) {
            return Err(BlockError::InvalidOptions(format!(
                "space_target {} must be a number above 1",
                self.space_target
            )));
        }
        if self.checkpoint_bytes == 0 {
            return Err(BlockError::InvalidOptions("checkpoint_bytes must not be 0".into()));
        }
        Ok(())
    }

    /// The largest block payload: the block limit, or what fits in a segment.
    pub fn max_block_bytes(&self) -> usize {
        MAX_BLOCK_BYTES
    }
}

/// Options of a `DoublewriteStore`.
#[derive(Clone, Debug)]
pub struct DoublewriteOptions {
    /// How pages are read: `Syscall`, `Direct` or `Mmap`. Default `Syscall`.
    pub read_method: AccessMethod,
    /// How blocks are compressed inside their slot. Default `None`.
    pub codec: Codec,
    /// Bytes of each in-place slot, header included: the largest block is this minus 64.
    /// Default 16 KiB (InnoDB's page size). A multiple of 4096.
    pub slot_bytes: u64,
    /// Permission bits of new files. Default 0600.
    pub file_mode: u32,
}

impl Default for DoublewriteOptions {
    fn default() -> Self {
        DoublewriteOptions {
            read_method: AccessMethod::Syscall,
            codec: Codec::None,
            slot_bytes: 16 << 10,
            file_mode: tierkv_io::DEFAULT_FILE_MODE,
        }
    }
}
