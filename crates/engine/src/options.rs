//! Options of `Db::open`.

use std::path::PathBuf;
use std::time::Duration;

use tierkv_blockstore::Codec;
use tierkv_io::AccessMethod;
use tierkv_tiercache::TierOptions;
use tierkv_wal::{Backend, Durability};

use crate::Error;

/// How a store is opened: memory budgets, durability, placement and checkpoints.
#[derive(Clone, Debug)]
pub struct Options {
    /// The memory budget of the store's data, in bytes: the undo (the before-images
    /// snapshots read, up to twice `write_buffer_size`), counted as the allocations it
    /// makes, and the buffer pool (the rest): its page frames, each at least 4 KiB, dirty
    /// ones included, and overflow values not yet written. The pool takes what the undo does
    /// not hold (to an eighth of `write_buffer_size`), so a store that is only read caches
    /// in nearly all of it. Default 256 MiB.
    ///
    /// What the process holds besides depends on its allocator: with glibc's malloc and
    /// several arenas, memory freed in one thread's arena is not reused by another's, and
    /// the process can hold far more. jemalloc with one arena (the `tierkv` binary's), or
    /// glibc limited to one (`MALLOC_ARENA_MAX=1`), kept resident memory within
    /// `cache_size` + 64 MiB in `results/engine/`.
    pub cache_size: usize,
    /// The undo keeps up to twice this many bytes of before-images for snapshots, out of
    /// `cache_size`: a snapshot that needs older ones gets `Error::SnapshotTooOld`. (A
    /// checkpoint starts once a quarter of the buffer pool is dirty, or by
    /// `checkpoint_log_bytes` or `checkpoint_interval`; writers slow down past half, once
    /// the pool nears its budget.)
    /// Default (`None`): an eighth of `cache_size`, from 64 KiB to 64 MiB.
    pub write_buffer_size: Option<usize>,
    /// The page size: a power of two from 1 KiB to 64 KiB. Values over a quarter of it are
    /// kept in overflow blocks, and keys may be up to half of it less 32 bytes (4,064 bytes
    /// with 8 KiB pages, 4,096 from 16 KiB: `Options::max_key_bytes`), so that any two fit an
    /// internal page. A store keeps the size it was made with: `None` takes it (16 KiB for a
    /// new store), and a different size is refused with `Error::OptionMismatch`.
    pub max_page_bytes: Option<usize>,
    /// How `put`, `delete` and `write` make a write durable. Default `Sync`: durable on
    /// return.
    pub durability: Durability,
    /// Where the log goes (for example a DAX or `/dev/shm` mount). A store remembers where
    /// it was made to put its log: `None` finds it there (`log` inside the store's directory
    /// by default), and another place is refused with `Error::OptionMismatch`.
    pub log_dir: Option<PathBuf>,
    /// How the log makes appends durable: `File` (fdatasync, group commit) or `Pmem`
    /// (cache-line flushes and a fence on a mapping, seed 001). Remembered like `log_dir`:
    /// `None` takes the store's (`File` for a new store).
    pub log_backend: Option<Backend>,
    /// The largest log segment: segments are preallocated and zero-filled, and sized by
    /// the write rate from 512 KiB up to this. Default 64 MiB. With the `File` log, the
    /// files of segments a checkpoint made unneeded are kept (up to 64, as `.wal.free`)
    /// and reused for the next segments instead of zero-filling new ones, so the log's
    /// files stay at the largest size they reached since the store was opened (an open
    /// deletes them).
    pub log_segment_bytes: u64,
    /// How pages are read: `Syscall`, `Direct` (O_DIRECT) or `Mmap`. Default `Syscall`.
    pub read_method: AccessMethod,
    /// How pages are compressed on disk. Default `None`.
    pub compression: Codec,
    /// The largest block-store segment file: segments are allocated (not zero-filled: the
    /// write-back's groups are large) and sized by the write rate from 1 MiB up to this.
    /// Default 16 MiB.
    pub block_segment_bytes: u64,
    /// A checkpoint starts once this many bytes were logged since the last, and at least as
    /// many as the dirty pages it would write (so that checkpoints write no more page bytes
    /// than the log takes; recovery then replays at most the larger of the two). Default
    /// 64 MiB.
    pub checkpoint_log_bytes: u64,
    /// A checkpoint starts at least this often while there are writes. Default 60 s.
    pub checkpoint_interval: Duration,
    /// Bytes of pages a checkpoint copies and writes at a time, as one atomic group with a
    /// meta block. Default `None`: half the dirty bytes a checkpoint is due at (a quarter
    /// of the buffer pool), at most 8 MiB. At least four pages are taken.
    pub checkpoint_group_bytes: Option<usize>,
    /// Permission bits of new files. Default 0600.
    pub file_mode: u32,
    /// A secondary block cache on a memory tier (seed 002's NVCache): pages that miss the
    /// buffer pool are looked up there before the block files, and pages read or written may
    /// be admitted. Its memory is in addition to `cache_size`. Default none.
    pub tier: Option<TierOptions>,
    /// Open without writing anything: no file is created, changed, synced or removed, the
    /// log since the last checkpoint is replayed into memory, and writes, checkpoints and
    /// compactions fail with `Error::ReadOnly`. Works on files the process cannot write.
    /// Any number of read-only handles may hold a store at once (a shared lock), but not
    /// beside a handle that writes (`Error::AlreadyOpen` either way). Default false.
    pub read_only: bool,
    /// Make a new store when the directory is missing (its parent must exist) or empty.
    /// Default true.
    pub create_if_missing: bool,
    /// Refuse to open a store that exists already (`Error::AlreadyExists`). Default false.
    pub error_if_exists: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cache_size: 256 << 20,
            write_buffer_size: None,
            max_page_bytes: None,
            durability: Durability::Sync,
            log_dir: None,
            log_backend: None,
            log_segment_bytes: 64 << 20,
            read_method: AccessMethod::Syscall,
            compression: Codec::None,
            block_segment_bytes: 16 << 20,
            checkpoint_log_bytes: 64 << 20,
            checkpoint_interval: Duration::from_secs(60),
            checkpoint_group_bytes: None,
            file_mode: tierkv_io::DEFAULT_FILE_MODE,
            tier: None,
            read_only: false,
            create_if_missing: true,
            error_if_exists: false,
        }
    }
}

/// The page size of a new store when `max_page_bytes` is `None`.
pub const DEFAULT_PAGE_BYTES: usize = 16 << 10;

/// The smallest `write_buffer_size`.
const MIN_WRITE_BUFFER: usize = 64 << 10;

/// The largest default `write_buffer_size`.
const MAX_DEFAULT_WRITE_BUFFER: usize = 64 << 20;

/// The smallest page: room for a few entries of the largest key.
pub const MIN_PAGE_BYTES: usize = 1 << 10;

/// The largest page (offsets in a slotted page are 16 bits).
pub const MAX_PAGE_BYTES: usize = 64 << 10;

impl Options {
    pub(crate) fn validate(&self) -> Result<(), Error> {
        let invalid = |detail: String| Err(Error::InvalidOptions(detail));
        let page = self.page_bytes();
        if !(MIN_PAGE_BYTES..=MAX_PAGE_BYTES).contains(&page) || !page.is_power_of_two() {
            return invalid(format!(
                "max_page_bytes is {page}; it must be a power of two from {MIN_PAGE_BYTES} to \
                 {MAX_PAGE_BYTES}"
            ));
        }
        if self.read_only && self.error_if_exists {
            return invalid("read_only with error_if_exists can never open a store".into());
        }
        if let Some(size) = self.write_buffer_size {
            if size < MIN_WRITE_BUFFER {
                return invalid(format!("write_buffer_size {size} is under the minimum of 64 KiB"));
            }
        }
        if self.page_cache_bytes() < 16 * self.page_bytes() {
            return invalid(format!(
                "cache_size {} leaves {} bytes for pages after the undo (twice \
                 write_buffer_size); it must leave at least 16 pages of {} bytes",
                self.cache_size,
                self.page_cache_bytes(),
                self.page_bytes()
            ));
        }
        if self.checkpoint_log_bytes == 0 {
            return invalid("checkpoint_log_bytes must not be 0".into());
        }
        if self.checkpoint_interval.is_zero() {
            return invalid("checkpoint_interval must not be 0".into());
        }
        if self.read_method == AccessMethod::Pmem {
            return invalid(
                "read_method pmem is not a read method; use syscall, direct or mmap".into(),
            );
        }
        // The log's and the block store's own checks, before anything is made on disk.
        let log = tierkv_wal::WalOptions {
            segment_bytes: self.log_segment_bytes,
            ..tierkv_wal::WalOptions::default()
        };
        if let Err(tierkv_wal::WalError::InvalidOptions(detail)) = log.validate() {
            return invalid(format!("log_{detail}"));
        }
        let blocks = tierkv_blockstore::StoreOptions {
            segment_bytes: self.block_segment_bytes,
            ..tierkv_blockstore::StoreOptions::default()
        };
        if let Err(tierkv_blockstore::BlockError::InvalidOptions(detail)) = blocks.validate() {
            return invalid(format!("block_{detail}"));
        }
        if let Some(tier) = &self.tier {
            if let Err(error) = tier.validate() {
                return invalid(error.to_string());
            }
        }
        Ok(())
    }

    /// The page size: `max_page_bytes`, or the default.
    pub fn page_bytes(&self) -> usize {
        self.max_page_bytes.unwrap_or(DEFAULT_PAGE_BYTES)
    }

    /// The log's backend: `log_backend`, or the default.
    pub fn backend(&self) -> Backend {
        self.log_backend.unwrap_or(Backend::File)
    }

    /// `write_buffer_size`, or its default.
    pub fn write_buffer_bytes(&self) -> usize {
        self.write_buffer_size
            .unwrap_or((self.cache_size / 8).clamp(MIN_WRITE_BUFFER, MAX_DEFAULT_WRITE_BUFFER))
    }

    /// Bytes of before-images the undo keeps at most (twice `write_buffer_bytes`): past it,
    /// the oldest are dropped and snapshots that needed them get `Error::SnapshotTooOld`.
    pub(crate) fn undo_limit(&self) -> usize {
        2 * self.write_buffer_bytes()
    }

    /// Bytes of one segment of before-images (`undo`): a quarter of `write_buffer_size`, at
    /// most 1 MiB, so that the segment writers insert into stays in the CPU's caches (a
    /// 16 MiB one made its skip list's search the largest cost of a random insert).
    pub(crate) fn undo_segment_bytes(&self) -> usize {
        (self.write_buffer_bytes() / 4).clamp(16 << 10, 1 << 20)
    }

    /// Bytes of the buffer pool at the least: `cache_size` less what the undo may take.
    pub fn page_cache_bytes(&self) -> usize {
        self.cache_size.saturating_sub(self.undo_limit())
    }

    /// Bytes the undo is set aside while it holds `undo_bytes`: the next multiple of
    /// `undo_step` above it, the room it grows into before a writer moves the page cache's
    /// budget again; never more than it may take.
    pub(crate) fn undo_reserve(&self, undo_bytes: usize) -> usize {
        let step = self.undo_step();
        (undo_bytes / step + 1).saturating_mul(step).min(self.undo_limit())
    }

    /// How far the undo grows between two changes of the buffer pool's budget: an eighth
    /// of `write_buffer_size`.
    pub(crate) fn undo_step(&self) -> usize {
        (self.write_buffer_bytes() / 8).max(1)
    }

    /// Bytes of pages a bulk load (a compaction, a backup's load) keeps before it writes
    /// them early: a quarter of the buffer pool, so that clean pages can still be evicted.
    pub(crate) fn dirty_budget(&self) -> usize {
        self.page_cache_bytes() / 4
    }

    /// Values longer than this go to overflow blocks.
    pub(crate) fn max_inline_value(&self) -> usize {
        self.page_bytes() / 4
    }

    /// The longest key: half the page less 32 bytes, at most `MAX_KEY_BYTES`. Then an
    /// internal page always holds two separators (header, and two slots, keys and children),
    /// so one that overflows has three and can split; and a leaf of one entry (with the
    /// largest inline value, a quarter page) always fits.
    pub fn max_key_bytes(&self) -> usize {
        crate::MAX_KEY_BYTES.min(self.page_bytes() / 2 - 32)
    }
}

#[cfg(test)]
mod tests;
