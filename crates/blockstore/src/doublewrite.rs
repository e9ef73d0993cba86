//! `DoublewriteStore`: the baseline the log store is measured against. Blocks live in fixed
//! slots updated in place, and every group is first written whole to a doublewrite file, the
//! way InnoDB protects its pages from torn writes.
//!
//! **Files** in the store directory:
//! - `pages.dat`: slot `i` holds block `i` at offset `i * slot_bytes`. A slot holds one encoded
//!   block (`format::encode_block`: a 64-byte header, the stored payload, zero padding to 64
//!   bytes); the rest of the slot is whatever was there before (zeros in a fresh file). An
//!   all-zero header is an empty slot, and a tombstone (`FLAG_TOMBSTONE`) a deleted block.
//! - `doublewrite.dat`: the batch of the group being written, at offset 0: a doublewrite
//!   header (`format::encode_doublewrite_header`: group, block count, body bytes) and the
//!   group's encoded blocks back to back, exactly the bytes that go into the slots.
//!
//! **Writing a group** (`apply_group`): payloads are validated and compressed with no lock
//! held. Under the writer mutex (one group at a time) the group gets the next `GroupId`; the
//! batch is written to `doublewrite.dat` and synced; `pages.dat` is extended if a slot lies
//! past its end; each block is written into its slot (one write per block) and the index is
//! updated, with the slot lock held in write mode; then `pages.dat` is synced. Two syncs and
//! every byte twice per group: that cost is what the baseline exists to show. Its writes are
//! made as well as the log store's, so that only the design differs: only headers are
//! encoded, each block written from the caller's buffer (`parts`), a large batch written in
//! pieces as it is encoded, and a large group's ranges handed to the write-back thread
//! (`writeback`) as they are written.
//!
//! **Reading** (`read`): the index (built at open, kept by the writer) says whether a slot is
//! live and how many stored bytes it holds, so an empty or deleted slot costs no I/O. A reader
//! holds the slot lock in read mode for its slot read, so it never sees a slot the writer is
//! rewriting: readers wait for the in-place phase of a group (never for its doublewrite phase
//! or its syncs). The read goes through a handle opened with `read_method`; when `pages.dat`
//! has outgrown that handle's view (`File::len` is per handle), a fresh handle replaces it.
//!
//! **Recovery** (`open`): if `doublewrite.dat` holds a complete batch (a valid header and every
//! block valid, of that group, in order, filling exactly the body), every block is written to
//! its slot again and `pages.dat` is synced ("redo"). An incomplete batch is ignored. Then
//! `doublewrite.dat` is emptied (truncated and synced), and every slot of `pages.dat` is read
//! and checked to build the index. A clean `close` empties `doublewrite.dat` too, so a clean
//! reopen has nothing to redo. `stats` counts from the end of recovery: the redo's writes and
//! syncs are reported in the `RecoveryReport`, not in the counters.
//!
//! Invariants:
//! 1. In-place writes of group `g` begin only after `g`'s complete batch is durable in
//!    `doublewrite.dat`, and the next batch overwrites it only after `pages.dat` is synced. So
//!    any slot that may be torn belongs to the batch in `doublewrite.dat`, and that batch is
//!    complete: recovery's redo repairs every torn slot.
//! 2. A batch found incomplete at recovery never reached `pages.dat`, so ignoring it loses
//!    nothing that was acknowledged and leaves every slot as the previous group left it.
//! 3. Redo is idempotent: it writes the same bytes the in-place phase wrote, and no later
//!    group can have touched `pages.dat` (its batch would have replaced this one).
//! 4. After recovery every slot is empty, a tombstone, or a block whose header names the
//!    slot's id and whose checksum holds; anything else is `BlockError::Corruption` from `open`.
//! 5. Group ids grow: the next id is above every group found in a slot or a batch header, and
//!    `doublewrite.dat` is emptied durably at open, so blocks of a discarded batch can never
//!    be mistaken for blocks of a later batch that reuses its id.
//! 6. The index changes only under the slot lock in write mode, together with the slots it
//!    describes, and names a group only once its batch is durable. Readers never take the
//!    writer mutex.
//! 7. `pages.dat` is always a whole number of slots long (so a multiple of 4096, which
//!    O_DIRECT reads of whole aligned ranges rely on).
//! 8. After a failed write or sync the store is poisoned: it acknowledges nothing more.
//!
//! Must never: write a slot before its group's batch is synced; return bytes whose checksum
//! was not verified; overwrite `doublewrite.dat` before the previous group's slots are synced.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use tierkv_io::{AccessMethod, File, OpenOptions, Storage};

use crate::format::{
    self, BlockHeader, Codec, DoublewriteHeader, BLOCK_HEADER_BYTES, DOUBLEWRITE_HEADER_BYTES,
    FLAG_LAST_IN_GROUP, FLAG_TOMBSTONE, MAX_GROUP_BLOCKS,
};
use crate::options::DoublewriteOptions;
use crate::parts::{write_parts, Part};
use crate::read;
use crate::stats::{Counters, RecoveryReport, StoreStats, VerifyReport};
use crate::writeback::{Hints, Writeback};
use crate::{BlockError, BlockId, BlockStore, BlockWrite, GroupId, StoreKind};

mod recover;
use recover::{recover_batch, scan_slots};

/// The slot file.
pub const PAGES_FILE: &str = "pages.dat";

/// The doublewrite batch file.
pub const DOUBLEWRITE_FILE: &str = "doublewrite.dat";

/// The smallest slot: one 4 KiB page.
const SLOT_BYTES_MIN: u64 = 4096;

/// The largest slot: its payload (slot minus header) stays under `format::MAX_BLOCK_BYTES`.
const SLOT_BYTES_MAX: u64 = 16 << 20;

/// Block ids must be below this: 2^32 slots. With `SLOT_BYTES_MAX` the largest slot offset is
/// below 2^56, far inside `tierkv_io::MAX_FILE_END`.
const SLOT_COUNT_MAX: u64 = 1 << 32;

/// The largest batch (header and blocks): a group is written to the doublewrite file in one
/// pwrite and held in memory while it is built.
const BATCH_BYTES_MAX: u64 = 1 << 30;

/// Growth chunk of `doublewrite.dat`.
const DOUBLEWRITE_CHUNK_BYTES: u64 = 64 << 10;

/// A large batch goes to doublewrite.dat, and a large group's ranges to the write-back
/// thread, in pieces of this size (see `writeback`). The best of 64 KiB to 1 MiB for this
/// store in 16 KiB page updates on the development machine (6 trials of 5 s each): 128 and
/// 256 KiB were within noise of each other, 64 KiB cost it 15-20%.
const WRITEBACK_CHUNK_BYTES: u64 = 128 << 10;

/// `pages.dat` grows by at least this much (rounded to whole slots), so a reader handle is
/// replaced once per megabyte of growth, not once per group.
const PAGES_GROWTH_BYTES: u64 = 1 << 20;

/// Recovery reads `pages.dat` this many bytes at a time (rounded to whole slots).
const SCAN_READ_BYTES: u64 = 1 << 20;

/// One live slot, as the index knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SlotEntry {
    /// The group that wrote the slot's content.
    group: GroupId,
    /// Payload bytes on disk.
    stored_len: u32,
}

impl SlotEntry {
    fn footprint(&self) -> u64 {
        format::block_footprint(self.stored_len as usize)
    }
}

/// The live slots. Changed only under the slot lock in write mode.
#[derive(Debug, Default)]
struct SlotIndex {
    live: HashMap<BlockId, SlotEntry>,
    /// Sum of the live entries' footprints.
    live_bytes: u64,
}

impl SlotIndex {
    /// Records what `id`'s slot now holds (`None`: empty or a tombstone).
    fn set(&mut self, id: BlockId, entry: Option<SlotEntry>) {
        let old = match entry {
            Some(entry) => {
                self.live_bytes += entry.footprint();
                self.live.insert(id, entry)
            }
            None => self.live.remove(&id),
        };
        if let Some(old) = old {
            debug_assert!(self.live_bytes >= old.footprint());
            self.live_bytes -= old.footprint();
        }
    }
}

/// What only the writer touches, under the writer mutex.
#[derive(Debug)]
struct WriterState {
    next_group: GroupId,
    /// Why the store refuses writes, once a write or sync failed.
    poisoned: Option<String>,
}

/// One change, validated and compressed, waiting for its group id.
struct Prepared<'a> {
    id: BlockId,
    /// `None` for a delete.
    stored: Option<(Codec, Cow<'a, [u8]>, u32)>,
}

impl Prepared<'_> {
    fn stored_len(&self) -> usize {
        self.stored.as_ref().map_or(0, |(_, stored, _)| stored.len())
    }
}

/// The batch found in `doublewrite.dat` at open.
enum Batch {
    /// The file is empty: the last close emptied it, or no group was ever written.
    Absent,
    /// Not a complete batch: its in-place phase never began (invariant 1).
    Incomplete {
        /// The group its header names, if the header decodes.
        group: Option<GroupId>,
        /// Blocks its header announces.
        count: u32,
        /// Where the problem is in `doublewrite.dat`.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
    /// Complete: every block valid, in order.
    Complete {
        group: GroupId,
        /// The header and the encoded bytes (footprint) of each block.
        blocks: Vec<(BlockHeader, Vec<u8>)>,
    },
}

/// Blocks in fixed slots, updated in place behind a doublewrite file. See the module header.
#[derive(Debug)]
pub struct DoublewriteStore {
    storage: Storage,
    dir: PathBuf,
    pages_path: PathBuf,
    options: DoublewriteOptions,
    /// Write handle of `pages.dat` (syscall); only the writer and recovery resize it.
    pages: Arc<File>,
    /// Write handle of `doublewrite.dat` (syscall).
    doublewrite: Arc<File>,
    /// Read handle of `pages.dat` with `read_method`, replaced when the file outgrew it.
    reader: RwLock<Arc<File>>,
    /// The index of live slots, and the lock that keeps readers out of slots being rewritten.
    slots: RwLock<SlotIndex>,
    /// Serializes groups. Readers never take it.
    writer: Mutex<WriterState>,
    closed: AtomicBool,
    counters: Counters,
    /// Mirror of `SlotIndex::live_bytes`, so `stats` never waits for the slot lock.
    live_bytes: AtomicU64,
    /// What recovery found at open.
    report: RecoveryReport,
    /// Starts the write-back of a large group's batch pieces and slots while the rest is
    /// being written, as the log store does.
    writeback: Writeback,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read_lock<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write_lock<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

fn validate_options(options: &DoublewriteOptions) -> Result<(), BlockError> {
    if options.read_method == AccessMethod::Pmem {
        return Err(BlockError::InvalidOptions(
            "read_method pmem is not a read method; use syscall, direct or mmap".into(),
        ));
    }
    let slot = options.slot_bytes;
    if !slot.is_multiple_of(4096) || !(SLOT_BYTES_MIN..=SLOT_BYTES_MAX).contains(&slot) {
        return Err(BlockError::InvalidOptions(format!(
            "slot_bytes {slot} must be a multiple of 4096 from {SLOT_BYTES_MIN} to {SLOT_BYTES_MAX}"
        )));
    }
    Ok(())
}

/// Options of the read handle of `pages.dat`.
fn reader_options(options: &DoublewriteOptions) -> OpenOptions {
    OpenOptions::new(options.read_method).read_only(true)
}

/// Creates `dir` and makes its entry (and those of any parents it created) durable.
fn create_dir_durably(storage: &Storage, dir: &Path) -> Result<(), BlockError> {
    let mut missing = Vec::new();
    // Bounded by the number of path components.
    for ancestor in dir.ancestors() {
        if ancestor.as_os_str().is_empty() || storage.exists(ancestor)? {
            break;
        }
        missing.push(ancestor);
    }
    storage.create_dir_all(dir)?;
    let parent_of = |path: &Path| -> Option<PathBuf> {
        match path.parent() {
            None => None,
            Some(parent) if parent.as_os_str().is_empty() => Some(PathBuf::from(".")),
            Some(parent) => Some(parent.to_path_buf()),
        }
    };
    // CRASH: a new directory's entry is durable once its parent is synced; before that a
    // crash may lose it, with nothing in it that was acknowledged.
    let mut to_sync: Vec<PathBuf> = missing.iter().rev().filter_map(|dir| parent_of(dir)).collect();
    if to_sync.is_empty() {
        to_sync.extend(parent_of(dir));
    }
    for parent in to_sync {
        storage.sync_dir(parent)?;
    }
    Ok(())
}

/// The offset of `id`'s slot, or why the id is out of range.
fn slot_offset(id: BlockId, slot_bytes: u64) -> Result<u64, String> {
    if id.0 >= SLOT_COUNT_MAX {
        return Err(format!("block id {id} is out of range: ids must be below {SLOT_COUNT_MAX}"));
    }
    id.0.checked_mul(slot_bytes)
        .filter(|&offset| offset.saturating_add(slot_bytes) <= tierkv_io::MAX_FILE_END)
        .ok_or_else(|| format!("block id {id} puts its slot past the largest file offset"))
}

/// The size `pages.dat` must have to hold every slot up to `end`: whole slots, grown by at
/// least `PAGES_GROWTH_BYTES`.
fn pages_target(current: u64, end: u64, slot_bytes: u64) -> u64 {
    let step = PAGES_GROWTH_BYTES.next_multiple_of(slot_bytes);
    let target = end.next_multiple_of(step).max(current.next_multiple_of(slot_bytes));
    debug_assert!(target.is_multiple_of(slot_bytes) && target >= end);
    target
}

impl DoublewriteStore {
    /// Opens (creating if needed) the store in `dir` and recovers it: redoes a complete
    /// doublewrite batch, empties the doublewrite file, and checks every slot.
    pub fn open(
        storage: &Storage,
        dir: impl AsRef<Path>,
        options: DoublewriteOptions,
    ) -> Result<DoublewriteStore, BlockError> {
        let started = Instant::now();
        validate_options(&options)?;
        let dir = dir.as_ref().to_path_buf();
        let slot_bytes = options.slot_bytes;
        create_dir_durably(storage, &dir)?;
        let pages_path = dir.join(PAGES_FILE);
        let doublewrite_path = dir.join(DOUBLEWRITE_FILE);
        let write_options =
            OpenOptions::new(AccessMethod::Syscall).create(true).mode(options.file_mode);
        let pages = storage.open(&pages_path, &write_options.clone().chunk_bytes(slot_bytes))?;
        let doublewrite =
            storage.open(&doublewrite_path, &write_options.chunk_bytes(DOUBLEWRITE_CHUNK_BYTES))?;
        // CRASH: until this sync a crash may lose the two names; no group was acknowledged
        // yet, and the next open creates them again.
        storage.sync_dir(&dir)?;

        let mut report = RecoveryReport::default();
        let batch_group = recover_batch(&pages, &doublewrite, slot_bytes, &mut report)?;
        let (index, scanned_group) = scan_slots(&pages, &pages_path, slot_bytes, &mut report)?;
        let max_group = batch_group.max(scanned_group);
        let reader = storage.open(&pages_path, &reader_options(&options))?;
        report.elapsed = started.elapsed();
        let live_bytes = index.live_bytes;
        let store = DoublewriteStore {
            storage: storage.clone(),
            dir,
            pages_path,
            options,
            pages: Arc::new(pages),
            doublewrite: Arc::new(doublewrite),
            reader: RwLock::new(Arc::new(reader)),
            slots: RwLock::new(index),
            writer: Mutex::new(WriterState {
                next_group: GroupId(max_group.0 + 1),
                poisoned: None,
            }),
            closed: AtomicBool::new(false),
            counters: Counters::default(),
            live_bytes: AtomicU64::new(live_bytes),
            report,
            writeback: Writeback::start("tierkv-doublewrite", WRITEBACK_CHUNK_BYTES),
        };
        Ok(store)
    }

    /// What recovery found when the store was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &DoublewriteOptions {
        &self.options
    }

    fn check_open(&self) -> Result<(), BlockError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(BlockError::Closed { dir: self.dir.clone() });
        }
        Ok(())
    }

    /// Validates a group and compresses its payloads (no lock held).
    fn prepare<'a>(&self, changes: &[BlockWrite<'a>]) -> Result<Vec<Prepared<'a>>, BlockError> {
        if changes.is_empty() {
            return Err(BlockError::InvalidGroup("a group needs at least one change".into()));
        }
        if changes.len() > MAX_GROUP_BLOCKS {
            return Err(BlockError::InvalidGroup(format!(
                "{} changes in one group, over the limit of {MAX_GROUP_BLOCKS}",
                changes.len()
            )));
        }
        let max = self.max_block_bytes();
        let mut seen = HashSet::with_capacity(changes.len());
        let mut prepared = Vec::with_capacity(changes.len());
        let mut batch_bytes = DOUBLEWRITE_HEADER_BYTES as u64;
        for change in changes {
            let id = change.id();
            slot_offset(id, self.options.slot_bytes).map_err(BlockError::InvalidGroup)?;
            if !seen.insert(id) {
                return Err(BlockError::InvalidGroup(format!("block {id} appears twice")));
            }
            let stored = match *change {
                BlockWrite::Delete(_) => None,
                BlockWrite::Put(_, bytes) => {
                    if bytes.len() > max {
                        return Err(BlockError::BlockTooLarge { id, len: bytes.len(), max });
                    }
                    let (codec, stored) = format::compress(self.options.codec, bytes);
                    // compress only keeps a smaller encoding, so the slot still fits it.
                    assert!(stored.len() <= bytes.len());
                    Some((codec, stored, bytes.len() as u32))
                }
            };
            let change = Prepared { id, stored };
            batch_bytes += format::block_footprint(change.stored_len());
            prepared.push(change);
        }
        if batch_bytes > BATCH_BYTES_MAX {
            return Err(BlockError::InvalidGroup(format!(
                "the group encodes to {batch_bytes} bytes, over the doublewrite limit of \
                 {BATCH_BYTES_MAX}; split it"
            )));
        }
        Ok(prepared)
    }

    /// Writes one group: doublewrite, sync, in place, sync. Any error leaves the caller to
    /// poison the store.
    fn write_group(&self, group: GroupId, prepared: &[Prepared]) -> Result<(), BlockError> {
        let slot_bytes = self.options.slot_bytes;
        let count = u32::try_from(prepared.len())
            .map_err(|_| BlockError::InvalidGroup("too many changes".into()))?;
        let body_bytes: u64 =
            prepared.iter().map(|change| format::block_footprint(change.stored_len())).sum();
        let batch_header =
            format::encode_doublewrite_header(&DoublewriteHeader { group, count, body_bytes });
        // The blocks' headers; payloads are written from where they are (`parts`).
        let mut headers = Vec::with_capacity(prepared.len() * BLOCK_HEADER_BYTES);
        // In a large group, the batch goes to doublewrite.dat in pieces as it is encoded and
        // the slots are handed to the write-back thread as they are written (see
        // `writeback`), as in the log store.
        let mut hints = self.writeback.hints();
        // The batch written so far: bytes, and blocks.
        let (mut batch_bytes, mut batch_written, mut parts_written) = (0u64, 0u64, 0usize);
        // Per block: its encoded parts, and what its slot will hold.
        let mut parts: Vec<Part<'_>> = Vec::with_capacity(prepared.len());
        let mut entries = Vec::with_capacity(prepared.len());
        for (index, change) in (0u32..).zip(prepared) {
            let mut flags = if index + 1 == count { FLAG_LAST_IN_GROUP } else { 0 };
            let (codec, stored, raw_len): (Codec, &[u8], u32) = match &change.stored {
                Some((codec, stored, raw_len)) => (*codec, stored, *raw_len),
                None => {
                    flags |= FLAG_TOMBSTONE;
                    (Codec::None, &[], 0)
                }
            };
            let header = BlockHeader {
                flags,
                codec,
                id: change.id,
                group,
                version: group,
                stored_len: stored.len() as u32,
                raw_len,
                index,
                count,
                remote: None,
            };
            let part = Part::encode(&mut headers, &header, stored);
            // Checked right before it is written, as recovery will check it after.
            assert!(part.footprint() <= slot_bytes, "a block outgrew its slot");
            debug_assert_eq!(format::decode_header(&headers[part.header..]), Ok(header));
            batch_bytes += part.footprint();
            parts.push(part);
            entries.push(
                (change.stored.is_some())
                    .then_some(SlotEntry { group, stored_len: header.stored_len }),
            );
            if batch_bytes - batch_written >= self.writeback.chunk_bytes() {
                // CRASH: as for the write below.
                self.write_batch_piece(
                    &batch_header,
                    &headers,
                    &parts[parts_written..],
                    batch_written,
                    &mut hints,
                )?;
                (batch_written, parts_written) = (batch_bytes, parts.len());
            }
        }
        assert_eq!(batch_bytes, body_bytes);

        // CRASH: until the sync below returns, doublewrite.dat may hold this batch in part,
        // in full, or not at all (the previous, complete batch, whose slots are durable).
        // Recovery redoes only a complete batch: this group entirely, or the previous one
        // again (idempotent, invariant 3). pages.dat has not been touched.
        if parts_written < parts.len() || batch_written == 0 {
            self.write_batch_piece(
                &batch_header,
                &headers,
                &parts[parts_written..],
                batch_written,
                &mut hints,
            )?;
        }
        self.count_write(batch_header.len() as u64 + body_bytes, &self.counters.doublewrite_bytes);
        drop(hints);
        self.doublewrite.sync_data()?;
        Counters::add(&self.counters.syncs, 1);
        // CRASH: from here the group is durable: recovery finds its complete batch and
        // writes it in place, whatever state the slots are in.

        let end =
            prepared.iter().map(|change| change.id.0 * slot_bytes + slot_bytes).max().unwrap_or(0);
        let pages_len = self.pages.len();
        if end > pages_len {
            // CRASH: the extension is zeros (empty slots); if the new size is lost, redo
            // extends the file again.
            self.pages.set_len(pages_target(pages_len, end, slot_bytes))?;
        }

        let mut slots = write_lock(&self.slots);
        let mut hints = self.writeback.hints();
        let mut written = Ok(());
        for (change, part) in prepared.iter().zip(&parts) {
            // CRASH: a slot may be torn from here until the sync below; recovery repairs it
            // from the batch (invariant 1).
            let at = change.id.0 * slot_bytes;
            written =
                write_parts(&self.pages, &[], &headers, std::slice::from_ref(part), at, &mut hints);
            if written.is_err() {
                break;
            }
            self.count_write(part.footprint(), &self.counters.in_place_bytes);
        }
        // The index names the group even if an in-place write failed: the group is durable in
        // doublewrite.dat and a reopen puts it in place. Until then a slot left old or torn
        // fails its group or checksum check and reads as Corruption, never as other content.
        for (change, entry) in prepared.iter().zip(&entries) {
            slots.set(change.id, *entry);
        }
        self.live_bytes.store(slots.live_bytes, Ordering::Release);
        drop(slots);
        drop(hints);
        written?;

        self.pages.sync_data()?;
        Counters::add(&self.counters.syncs, 1);
        // CRASH: the group's slots are durable; the next group may overwrite the batch.
        Ok(())
    }

    /// Writes the batch's blocks `parts` at `offset` of the batch (after its header, which
    /// goes first when `offset` is 0) to doublewrite.dat.
    fn write_batch_piece(
        &self,
        batch_header: &[u8],
        headers: &[u8],
        parts: &[Part<'_>],
        offset: u64,
        hints: &mut Hints<'_>,
    ) -> Result<(), BlockError> {
        let (prefix, at) = match offset {
            0 => (batch_header, 0),
            _ => (&[][..], batch_header.len() as u64 + offset),
        };
        write_parts(&self.doublewrite, prefix, headers, parts, at, hints)?;
        Ok(())
    }

    fn count_write(&self, bytes: u64, kind: &AtomicU64) {
        Counters::add(&self.counters.device_bytes_written, bytes);
        Counters::add(kind, bytes);
    }

    /// A read handle that covers `end`, opening a fresh one if `pages.dat` grew past the
    /// current handle's view.
    fn reader_for(&self, end: u64) -> Result<Arc<File>, BlockError> {
        let current = Arc::clone(&read_lock(&self.reader));
        if current.len() >= end {
            return Ok(current);
        }
        let mut reader = write_lock(&self.reader);
        if reader.len() >= end {
            return Ok(Arc::clone(&reader));
        }
        // The writer grew pages.dat before the index named a slot past the old end.
        let fresh = Arc::new(self.storage.open(&self.pages_path, &reader_options(&self.options))?);
        *reader = Arc::clone(&fresh);
        Ok(fresh)
    }

    /// Reads, checks and decompresses a live slot; `None` if the slot is empty.
    fn read_slot(&self, id: BlockId) -> Result<Option<(Vec<u8>, SlotEntry)>, BlockError> {
        let slot_bytes = self.options.slot_bytes;
        let Ok(offset) = slot_offset(id, slot_bytes) else { return Ok(None) };
        let slots = read_lock(&self.slots);
        let Some(entry) = slots.live.get(&id).copied() else { return Ok(None) };
        assert!(BLOCK_HEADER_BYTES as u64 + u64::from(entry.stored_len) <= slot_bytes);
        let end = offset + BLOCK_HEADER_BYTES as u64 + u64::from(entry.stored_len);
        let file = self.reader_for(end)?;
        let (header, stored) =
            read::read_block(&file, &self.pages_path, offset, id, entry.stored_len)?;
        // The slot lock kept the writer out for the read; the bytes are ours.
        drop(slots);
        if header.group != entry.group || header.is_tombstone() {
            return Err(BlockError::Corruption {
                file: self.pages_path.clone(),
                offset,
                block: Some(id),
                detail: format!(
                    "the slot holds group {}{}, the index says group {} wrote it",
                    header.group,
                    if header.is_tombstone() { " (a tombstone)" } else { "" },
                    entry.group
                ),
            });
        }
        let raw = read::decode_payload(&header, stored, &self.pages_path, offset)?;
        debug_assert_eq!(raw.len(), header.raw_len as usize);
        Ok(Some((raw, entry)))
    }
}

impl BlockStore for DoublewriteStore {
    fn apply_group(&self, changes: &[BlockWrite<'_>]) -> Result<GroupId, BlockError> {
        self.check_open()?;
        let prepared = self.prepare(changes)?;
        let mut writer = lock(&self.writer);
        // Closed or poisoned while this group waited for the writer.
        self.check_open()?;
        if let Some(cause) = &writer.poisoned {
            return Err(BlockError::Poisoned { dir: self.dir.clone(), cause: cause.clone() });
        }
        let group = writer.next_group;
        writer.next_group = GroupId(group.0 + 1);
        if let Err(error) = self.write_group(group, &prepared) {
            writer.poisoned = Some(error.to_string());
            return Err(error);
        }
        drop(writer);
        Counters::add(&self.counters.groups, 1);
        Counters::add(&self.counters.blocks, prepared.len() as u64);
        let payload: u64 = changes
            .iter()
            .map(|change| match change {
                BlockWrite::Put(_, bytes) => bytes.len() as u64,
                BlockWrite::Delete(_) => 0,
            })
            .sum();
        Counters::add(&self.counters.payload_bytes, payload);
        Ok(group)
    }

    fn read(&self, id: BlockId) -> Result<Option<Vec<u8>>, BlockError> {
        self.check_open()?;
        let Some((raw, entry)) = self.read_slot(id)? else { return Ok(None) };
        Counters::add(&self.counters.reads, 1);
        Counters::add(
            &self.counters.read_bytes,
            BLOCK_HEADER_BYTES as u64 + u64::from(entry.stored_len),
        );
        Ok(Some(raw))
    }

    fn checkpoint(&self) -> Result<(), BlockError> {
        // Slots are the checkpoint: recovery reads pages.dat, whatever was written.
        self.check_open()
    }

    fn stats(&self) -> StoreStats {
        let file_bytes = self.pages.len() + self.doublewrite.len();
        let index_bytes =
            crate::hash_table_bytes::<BlockId, SlotEntry>(read_lock(&self.slots).live.capacity());
        self.counters.snapshot(self.live_bytes.load(Ordering::Acquire), file_bytes, index_bytes)
    }

    fn live_ids(&self) -> Result<Vec<BlockId>, BlockError> {
        self.check_open()?;
        let mut ids: Vec<BlockId> = read_lock(&self.slots).live.keys().copied().collect();
        ids.sort_unstable();
        Ok(ids)
    }

    fn verify(&self) -> Result<VerifyReport, BlockError> {
        self.check_open()?;
        let mut ids: Vec<BlockId> = read_lock(&self.slots).live.keys().copied().collect();
        ids.sort_unstable();
        let mut report = VerifyReport::default();
        // Bounded by the ids live when verify began; a block deleted since is skipped.
        for id in ids {
            if let Some((_, entry)) = self.read_slot(id)? {
                report.blocks += 1;
                report.bytes += entry.footprint();
            }
        }
        Ok(report)
    }

    fn max_block_bytes(&self) -> usize {
        (self.options.slot_bytes as usize) - BLOCK_HEADER_BYTES
    }

    fn kind(&self) -> StoreKind {
        StoreKind::Doublewrite
    }

    fn close(&self) -> Result<(), BlockError> {
        let mut writer = lock(&self.writer);
        if self.closed.swap(true, Ordering::AcqRel) {
            return Err(BlockError::Closed { dir: self.dir.clone() });
        }
        if writer.poisoned.is_some() || self.doublewrite.is_empty() {
            // A poisoned store leaves its batch for recovery to redo.
            return Ok(());
        }
        // CRASH: every group's slots are durable. A crash before the truncation is durable
        // leaves the last complete batch, which the next open redoes (invariant 3); after,
        // the next open has nothing to redo.
        let emptied = self.doublewrite.set_len(0).and_then(|()| self.doublewrite.sync_data());
        if let Err(error) = emptied {
            writer.poisoned = Some(error.to_string());
            return Err(error.into());
        }
        Counters::add(&self.counters.syncs, 1);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_offsets_are_bounded() {
        assert_eq!(slot_offset(BlockId(3), 4096), Ok(3 * 4096));
        assert!(slot_offset(BlockId(SLOT_COUNT_MAX - 1), SLOT_BYTES_MAX).is_ok());
        assert!(slot_offset(BlockId(SLOT_COUNT_MAX), 4096).is_err());
        assert!(slot_offset(BlockId(u64::MAX), 4096).is_err());
    }

    #[test]
    fn pages_grow_in_whole_slots_and_never_shrink() {
        assert_eq!(pages_target(0, 4096, 4096), 1 << 20);
        assert_eq!(pages_target(0, 3 << 20, 3 << 20), 3 << 20);
        assert_eq!(pages_target(8 << 20, 4096, 16 << 10), 8 << 20);
        assert_eq!(pages_target(5000, 8192, 4096), 1 << 20);
        assert_eq!(pages_target(2 << 20, 4096, 4096), 2 << 20);
    }

    #[test]
    fn options_are_checked() {
        let bad = |options: DoublewriteOptions| validate_options(&options).is_err();
        let base = DoublewriteOptions::default();
        assert!(!bad(base.clone()));
        assert!(bad(DoublewriteOptions { slot_bytes: 1000, ..base.clone() }));
        assert!(bad(DoublewriteOptions { slot_bytes: 0, ..base.clone() }));
        assert!(bad(DoublewriteOptions { slot_bytes: 32 << 20, ..base.clone() }));
        assert!(bad(DoublewriteOptions { read_method: AccessMethod::Pmem, ..base }));
    }
}
