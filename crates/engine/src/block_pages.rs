//! The tree's pages on a block store: [`Pages`], shared by every reader, and
//! [`BlockPages`], one checkpoint's changes to them.
//!
//! A page is one block of a `BlockStore`, the block id being the page id. [`Pages`] holds
//! them in the buffer pool's frames (`buffer`), each frame the page's own image: readers
//! read it in place, optimistically (`tree::read`), and a miss reads the block into its
//! frame, checked there. An id is given out again only after its block is deleted, which
//! happens only once no tree version a reader holds names it (and its frame is dropped
//! then), so a resident page is the page for as long as any reader can reach it.
//!
//! [`BlockPages`] is the writer's side, copy on write (see `tree`): a page that existed
//! when the session began is never changed; its new version gets a new id and the old id is
//! *retired*: readers of older tree versions may still read it, so its block is deleted
//! only when the engine says no version needs it (`reclaim`). Pages created in the session
//! are changed in place, decoded, in the session's own map (their bytes count against the
//! pool's budget as reserved). `flush` writes every dirty page, the overflow blocks, the
//! deletions and optionally the meta record in one atomic group of the block store, so a
//! crash keeps all of them or none, and only then puts the written images in their frames,
//! clean, where the clock may evict them.
//!
//! **Page ids are given out again.** An id whose block a durable group deleted is
//! *reusable* (`Pages::reusable`; at open, every id below the meta block's `orphans_from`
//! that no block holds and no free list names): a session's new pages take the lowest
//! reusable ids first, then new ones from `next_id`. So the ids in use stay about as many as
//! the pages, however many checkpoints rewrite them (the frames are addressed by page id,
//! and each id costs a frame word). Until the session's last flush, whose meta record names
//! its tree, a page at a reused id is a block no meta record accounts for, so a session that
//! writes early (`flush_early`) hands its caller the reused ids it holds (`reused_ids`), and
//! the caller's early meta record lists them in its free list: a crash before the last flush
//! deletes them at open, as it deletes the orphans from `orphans_from` (new ids).
//!
//! A value too large for a leaf goes to overflow blocks (`write_overflow`: 1 MiB each, at
//! consecutive new ids), written with the next flush, in the same group as the leaf that
//! points at them; `free_overflow` retires a replaced or deleted value's blocks. Overflow
//! blocks never enter the frames.
//!
//! Must never: put a page in a frame before the group that holds it is durable;
//! acknowledge a flush before the block store's group is durable; return a page whose block
//! failed its check; change or delete a page that existed when the session began, except
//! through `reclaim`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use bytes::Bytes;
use tierkv_blockstore::{BlockError, BlockId, BlockStore, BlockWrite};
use tierkv_tiercache::{AdmitSource, TierCache, TierKey, TierOptions, TierStats};

use crate::buffer::{self, BufferError, BufferPool};
use crate::meta::{Meta, MetaError, META_BLOCK};
use crate::page::{self, OverflowRef, Page, PageError, Value};
use crate::tree::read::{self as tree_read, Chunk, Found, ReadError};
use crate::tree::{PageSource, PageStore};

/// Bytes of a value in each of its overflow blocks (the last one holds the rest).
pub const OVERFLOW_BLOCK_BYTES: usize = 1 << 20;

/// Address space the frames of one store take (1 TiB): the page ids a store can have are
/// this over the frame size (134 million at 8 KiB). It costs address space, not memory.
pub const FRAME_RESERVATION_BYTES: u64 = 1 << 40;

/// Why a page could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PagesError {
    /// The block store failed (I/O, corruption of the block, a poisoned store).
    #[error("page {page}: {source}")]
    Block {
        /// The page.
        page: u64,
        /// What the block store said.
        source: BlockError,
    },
    /// The block is intact but does not hold a valid page.
    #[error("page {page} is corrupt: {source}")]
    Corrupt {
        /// The page.
        page: u64,
        /// What is wrong with it.
        source: PageError,
    },
    /// The tree points at a page that was never written.
    #[error("page {page} is missing: the tree points at a block that does not exist")]
    Missing {
        /// The page.
        page: u64,
    },
    /// The tree points at a page id past what the frames can address.
    #[error(
        "page {page} is past the {pages} page ids the frames can address: the tree is \
         damaged, or the store outgrew its frame reservation"
    )]
    Beyond {
        /// The page.
        page: u64,
        /// The ids the frames address.
        pages: u64,
    },
    /// The tree under a root is deeper than any real tree.
    #[error(
        "the tree under page {root} is more than {} levels deep: it is damaged",
        tree_read::MAX_DEPTH
    )]
    TooDeep {
        /// The root.
        root: u64,
    },
    /// A value's overflow blocks do not add up to it.
    #[error("the overflow value at block {first} is damaged: {detail}")]
    Overflow {
        /// Its first block.
        first: u64,
        /// What is wrong.
        detail: String,
    },
    /// The meta block does not decode.
    #[error("{source}")]
    Meta {
        /// What is wrong with it.
        source: MetaError,
    },
}

impl From<BufferError<PagesError>> for PagesError {
    fn from(error: BufferError<PagesError>) -> PagesError {
        match error {
            BufferError::Source(error) => error,
            BufferError::Corrupt { pid, source } => PagesError::Corrupt { page: pid, source },
            BufferError::Beyond { pid, pages } => PagesError::Beyond { page: pid, pages },
            BufferError::Unreadable { pid } => PagesError::Corrupt {
                page: pid,
                source: PageError {
                    offset: 0,
                    detail: "a page that passed its check could not be read".to_string(),
                },
            },
        }
    }
}

impl From<ReadError<PagesError>> for PagesError {
    fn from(error: ReadError<PagesError>) -> PagesError {
        match error {
            ReadError::Page(error) => error.into(),
            ReadError::TooDeep { root } => PagesError::TooDeep { root },
        }
    }
}

/// What lies below the frames: the tier cache (seed 002's NVCache), if the store has one,
/// then the block store. A miss looks in the tier, then reads the block (and may admit it:
/// `cache_on_read`); a clean page the clock evicts may go to the tier as its image, as it is
/// (`cache_on_evict`); a page a checkpoint wrote may too (`cache_on_checkpoint`). The tier
/// keys a page by its id alone: every change of a page id's content (`installed`,
/// `discarded`) first drops what the tier holds for it, and all of these run under the
/// frame's exclusive hold, so the tier never holds an image its page id no longer has. An
/// entry is the image and its CRC-32C, checked on every hit.
pub struct BlockSource {
    blocks: Arc<dyn BlockStore>,
    page_bytes: usize,
    tier: Option<TierCache>,
    /// Tier hits whose image failed its checksum (and were read from the block store).
    tier_rejected: AtomicU64,
}

impl BlockSource {
    fn key(pid: u64) -> TierKey {
        TierKey { id: pid, version: 0 }
    }

    /// Offers page `pid`'s image to the tier, from `source`.
    fn offer(&self, tier: &TierCache, pid: u64, image: &[u8], source: AdmitSource) {
        let key = BlockSource::key(pid);
        if tier.admission(key, image.len() + 4, source).is_none() {
            let crc = tierkv_io::crc32c(image).to_le_bytes();
            tier.admit(key, &[image, &crc], source);
        }
    }

    /// Page `pid`'s image from the tier, checked; `None` when the tier does not hold it or
    /// its copy failed the check (then dropped and counted).
    fn read_tier(&self, tier: &TierCache, pid: u64) -> Option<Vec<u8>> {
        let mut entry = Vec::new();
        if !tier.get(BlockSource::key(pid), &mut entry) {
            return None;
        }
        let good = entry.len() == self.page_bytes + 4 && {
            let (image, crc) = entry.split_at(self.page_bytes);
            crc == tierkv_io::crc32c(image).to_le_bytes()
        };
        if !good {
            tier.invalidate(BlockSource::key(pid));
            self.tier_rejected.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        entry.truncate(self.page_bytes);
        Some(entry)
    }
}

impl buffer::PageSource for BlockSource {
    type Error = PagesError;

    fn read_page(&self, pid: u64) -> Result<Vec<u8>, PagesError> {
        if let Some(image) = self.tier.as_ref().and_then(|tier| self.read_tier(tier, pid)) {
            return Ok(image);
        }
        let bytes = self
            .blocks
            .read(BlockId(pid))
            .map_err(|source| PagesError::Block { page: pid, source })?
            .ok_or(PagesError::Missing { page: pid })?;
        if bytes.len() != self.page_bytes {
            let detail = format!(
                "a page of {} bytes in a store of {}-byte pages",
                bytes.len(),
                self.page_bytes
            );
            return Err(PagesError::Corrupt { page: pid, source: PageError { offset: 0, detail } });
        }
        if let Some(tier) = &self.tier {
            self.offer(tier, pid, &bytes, AdmitSource::Read);
        }
        Ok(bytes)
    }

    fn evicted(&self, pid: u64, image: &[u8]) {
        if let Some(tier) = &self.tier {
            self.offer(tier, pid, image, AdmitSource::Evict);
        }
    }

    fn installed(&self, pid: u64, image: &[u8]) {
        if let Some(tier) = &self.tier {
            tier.invalidate(BlockSource::key(pid));
            self.offer(tier, pid, image, AdmitSource::Checkpoint);
        }
    }

    fn discarded(&self, pid: u64) {
        if let Some(tier) = &self.tier {
            tier.invalidate(BlockSource::key(pid));
        }
    }
}

/// The pages on a block store, in the buffer pool's frames; shared by every reader.
pub struct Pages {
    pool: BufferPool<BlockSource>,
    /// The store's page size: every page's encoded size.
    page_bytes: usize,
    /// Ids no block holds and no tree version names (see the module header).
    reusable: Mutex<BTreeSet<u64>>,
    /// The block store's index bytes, as last counted in the pool's budget.
    index_counted: Mutex<usize>,
    /// Overflow blocks of values written in place and not yet in the block store (the next
    /// checkpoint writes them), by block id; their bytes are reserved in the pool's budget.
    pending: RwLock<BTreeMap<u64, Arc<Vec<u8>>>>,
}

impl Pages {
    /// Pages of `page_bytes` on `blocks`, in frames of at most `budget` bytes, over a tier
    /// cache made with `tier` if given.
    ///
    /// # Errors
    ///
    /// When the frames' address space cannot be reserved, or the tier cannot be made.
    pub fn new(
        blocks: Arc<dyn BlockStore>,
        budget: usize,
        page_bytes: usize,
        tier: Option<TierOptions>,
    ) -> crate::Result<Pages> {
        let stride = page_bytes.max(tierkv_io::frames::MIN_FRAME_BYTES) as u64;
        let tier = tier.map(TierCache::open).transpose()?;
        let source = BlockSource { blocks, page_bytes, tier, tier_rejected: AtomicU64::new(0) };
        let pool = BufferPool::new(FRAME_RESERVATION_BYTES / stride, page_bytes, budget, source)?;
        let pages = Pages {
            pool,
            page_bytes,
            reusable: Mutex::new(BTreeSet::new()),
            index_counted: Mutex::new(0),
            pending: RwLock::new(BTreeMap::new()),
        };
        pages.count_index();
        Ok(pages)
    }

    /// Counts the block store's records of its blocks (its id → location map) in the pool's
    /// budget, as they are now: they grow with the pages, so the frames give them room.
    pub fn count_index(&self) {
        let now = usize::try_from(self.blocks().stats().index_bytes).unwrap_or(usize::MAX);
        let mut counted = self.index_counted.lock().unwrap_or_else(PoisonError::into_inner);
        if now > *counted {
            self.pool.reserve(now - *counted);
        } else {
            self.pool.unreserve(*counted - now);
        }
        *counted = now;
    }

    fn reusable(&self) -> std::sync::MutexGuard<'_, BTreeSet<u64>> {
        // A set changed by single inserts and removals: consistent even after a panic.
        self.reusable.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes reusable every id from `FIRST_PAGE` below `below` that no block holds and
    /// `except` does not name (at open: `below` is the meta block's `orphans_from`, under
    /// which every block is the tree's or listed for deletion, and `except` what the first
    /// checkpoint deletes). Returns how many.
    pub fn find_reusable(&self, below: u64, except: &[u64]) -> Result<usize, PagesError> {
        let except: BTreeSet<u64> = except.iter().copied().collect();
        let live =
            self.blocks().live_ids().map_err(|source| PagesError::Block { page: 0, source })?;
        let mut live = live.into_iter().map(|id| id.0).peekable();
        let mut found = BTreeSet::new();
        for id in crate::meta::FIRST_PAGE..below {
            while live.next_if(|&held| held < id).is_some() {}
            if live.peek() != Some(&id) && !except.contains(&id) {
                found.insert(id);
            }
        }
        let count = found.len();
        self.reusable().extend(found);
        Ok(count)
    }

    /// An id for a new page (`tree::write::Space`): the lowest reusable one, else the next
    /// new one from `next`.
    pub fn allocate(&self, next: &AtomicU64) -> u64 {
        if let Some(id) = self.reusable().pop_first() {
            debug_assert!(id >= crate::meta::FIRST_PAGE && id < next.load(Ordering::Relaxed));
            return id;
        }
        next.fetch_add(1, Ordering::Relaxed)
    }

    /// Ids given back: deleted by a durable group (or never written) and named by no tree
    /// version a reader holds.
    pub fn give_back(&self, ids: impl IntoIterator<Item = u64>) {
        self.reusable().extend(ids);
    }

    /// Keeps `value` in overflow blocks at consecutive new ids from `next`, held in memory
    /// (pending) until a checkpoint writes them (`pending_blocks`, `written`).
    pub fn add_overflow(&self, value: &[u8], next: &AtomicU64) -> OverflowRef {
        let blocks = value.len().div_ceil(OVERFLOW_BLOCK_BYTES).max(1);
        let first = next.fetch_add(blocks as u64, Ordering::Relaxed);
        let mut pending = self.pending.write().unwrap_or_else(PoisonError::into_inner);
        let mut ids = first..;
        if value.is_empty() {
            pending.insert(first, Arc::new(Vec::new()));
        }
        for chunk in value.chunks(OVERFLOW_BLOCK_BYTES) {
            let id = ids.next().expect("ids");
            pending.insert(id, Arc::new(chunk.to_vec()));
        }
        drop(pending);
        self.pool.reserve(value.len());
        let overflow = OverflowRef { len: value.len() as u64, first, blocks: blocks as u32 };
        debug_assert!(self.is_pending(overflow.first));
        overflow
    }

    /// Whether block `id` is an overflow block not yet written.
    pub fn is_pending(&self, id: u64) -> bool {
        self.pending.read().unwrap_or_else(PoisonError::into_inner).contains_key(&id)
    }

    /// Overflow block `id`'s bytes, if it is not yet written.
    pub fn pending_chunk(&self, id: u64) -> Option<Arc<Vec<u8>>> {
        self.pending.read().unwrap_or_else(PoisonError::into_inner).get(&id).cloned()
    }

    /// Forgets pending overflow blocks `ids`: written by a durable group, or dropped
    /// unwritten (a value replaced before any checkpoint, or a batch that failed). Returns
    /// how many were pending.
    pub fn drop_pending(&self, ids: impl IntoIterator<Item = u64>) -> usize {
        let mut pending = self.pending.write().unwrap_or_else(PoisonError::into_inner);
        let (mut count, mut bytes) = (0, 0);
        for id in ids {
            if let Some(chunk) = pending.remove(&id) {
                count += 1;
                bytes += chunk.len();
            }
        }
        drop(pending);
        self.pool.unreserve(bytes);
        count
    }

    /// Bytes of overflow blocks not yet written.
    pub fn pending_bytes(&self) -> usize {
        let pending = self.pending.read().unwrap_or_else(PoisonError::into_inner);
        pending.values().map(|chunk| chunk.len()).sum()
    }

    /// How many ids are reusable now.
    pub fn reusable_count(&self) -> usize {
        self.reusable().len()
    }

    /// The block store.
    pub fn blocks(&self) -> &dyn BlockStore {
        &*self.pool.source().blocks
    }

    /// The tier's counters, when the store has one.
    pub fn tier_stats(&self) -> Option<TierStats> {
        self.pool.source().tier.as_ref().map(TierCache::stats)
    }

    /// Tier hits whose image failed its check (and were read from the block store).
    pub fn tier_rejected(&self) -> u64 {
        self.pool.source().tier_rejected.load(Ordering::Relaxed)
    }

    /// Stops the tier's eviction thread (at close).
    pub fn close_tier(&self) {
        if let Some(tier) = &self.pool.source().tier {
            tier.close();
        }
    }

    /// The buffer pool.
    pub fn pool(&self) -> &BufferPool<BlockSource> {
        &self.pool
    }

    /// Looks `key` up in the tree under `root` (an inline value is copied into `value`),
    /// with the LSN of the leaf it read.
    pub fn get_at(
        &self,
        root: u64,
        key: &[u8],
        value: &mut Vec<u8>,
    ) -> Result<(Found, u64), PagesError> {
        Ok(tree_read::get_at(&self.pool, root, key, value)?)
    }

    /// The entries at or above `from` of the leaf under `root` that holds `from`, and where
    /// the next leaf starts (`tree::read::chunk_forward`).
    pub fn chunk_forward(
        &self,
        root: u64,
        from: &[u8],
        limit: usize,
        chunk: &mut Chunk,
    ) -> Result<(), PagesError> {
        Ok(tree_read::chunk_forward(&self.pool, root, from, limit, chunk)?)
    }

    /// The entries below `before` of the leaf under `root` that holds the keys just below
    /// it, and where that leaf starts (`tree::read::chunk_backward`).
    pub fn chunk_backward(
        &self,
        root: u64,
        before: Option<&[u8]>,
        limit: usize,
        chunk: &mut Chunk,
    ) -> Result<(), PagesError> {
        Ok(tree_read::chunk_backward(&self.pool, root, before, limit, chunk)?)
    }

    /// The value kept in overflow blocks at `overflow`.
    pub fn read_overflow(&self, overflow: &OverflowRef) -> Result<Vec<u8>, PagesError> {
        read_overflow(overflow, |id| self.read_block(id))
    }

    fn read_block(&self, id: u64) -> Result<Vec<u8>, PagesError> {
        let pending = self.pending.read().unwrap_or_else(PoisonError::into_inner).get(&id).cloned();
        if let Some(chunk) = pending {
            return Ok(chunk.to_vec());
        }
        self.blocks()
            .read(BlockId(id))
            .map_err(|source| PagesError::Block { page: id, source })?
            .ok_or(PagesError::Missing { page: id })
    }

    /// Reads the meta record: `None` for a store that never took a checkpoint.
    pub fn read_meta(&self) -> Result<Option<Meta>, PagesError> {
        let page = META_BLOCK.0;
        let Some(bytes) =
            self.blocks().read(META_BLOCK).map_err(|source| PagesError::Block { page, source })?
        else {
            return Ok(None);
        };
        Meta::decode(&bytes).map(Some).map_err(|source| PagesError::Meta { source })
    }
}

impl PageSource for Pages {
    type Error = PagesError;

    /// Page `id`, copied out of its frame into the writer's form (`tree::read::copy_page`:
    /// the writer's and the checker's way; readers read frames in place).
    fn load(&self, id: u64) -> Result<Arc<Page>, PagesError> {
        Ok(Arc::new(tree_read::copy_page(&self.pool, id)?))
    }
}

/// Reads a value's overflow blocks through `read` and checks they add up to it.
fn read_overflow(
    overflow: &OverflowRef,
    mut read: impl FnMut(u64) -> Result<Vec<u8>, PagesError>,
) -> Result<Vec<u8>, PagesError> {
    // The length is only a claim until the blocks are read: reserve at most 64 MiB.
    let mut value = Vec::with_capacity(overflow.len.min(64 << 20) as usize);
    for id in overflow.first..overflow.first + u64::from(overflow.blocks) {
        value.extend_from_slice(&read(id)?);
        if value.len() as u64 > overflow.len {
            break;
        }
    }
    if value.len() as u64 != overflow.len {
        return Err(PagesError::Overflow {
            first: overflow.first,
            detail: format!("{} bytes in its blocks, {} expected", value.len(), overflow.len),
        });
    }
    Ok(value)
}

/// Bytes of a `Bytes` buffer's shared count, for the slices of one buffer.
const SHARED_BUFFER_BYTES: usize = 48;

/// Bytes a decoded page of the writer's is counted as: the allocations that hold it (the
/// entries' vector at its capacity, each key and inline value, or the one buffer they are
/// slices of) and the page's own record in its `Arc`.
fn weight(page: &Page) -> usize {
    let fixed = allocation_bytes(2 * size_of::<usize>() + size_of::<Page>());
    fixed
        + match page {
            Page::Leaf(leaf) => {
                let slots = allocation_bytes(leaf.entries.capacity() * size_of::<(Bytes, Value)>());
                // One buffer (and its shared count), or else an allocation per key and value.
                let bytes = match leaf.buffer_bytes() {
                    0 => leaf
                        .entries
                        .iter()
                        .map(|(key, value)| {
                            allocation_bytes(key.len())
                                + match value {
                                    Value::Inline(bytes) => allocation_bytes(bytes.len()),
                                    Value::Overflow(_) => 0,
                                }
                        })
                        .sum::<usize>(),
                    buffer => allocation_bytes(buffer) + SHARED_BUFFER_BYTES,
                };
                slots + bytes + allocation_bytes(leaf.heads_bytes())
            }
            Page::Internal(internal) => {
                allocation_bytes(internal.entries.capacity() * size_of::<(Vec<u8>, u64)>())
                    + internal
                        .entries
                        .iter()
                        .map(|(key, _)| allocation_bytes(key.capacity()))
                        .sum::<usize>()
                    + allocation_bytes(internal.heads_bytes())
            }
        }
}

/// Bytes an allocation of `len` bytes takes from the heap, by the more costly of the two
/// kinds of allocator a process may have:
/// - glibc's: an 8-byte header, rounding to 16, at least 32;
/// - a size-class one (jemalloc, the `tierkv` binary's; tcmalloc and mimalloc alike): 16-byte
///   classes up to 128, then four classes to each doubling (160, 192, 224, 256, 320, …,
///   4096, 5120, 6144, 7168, 8192, 10240, …), so up to a quarter more than asked for.
///
/// Counting this rather than `len` keeps a budget honest: a 16-byte key costs 32 bytes, and a
/// page image of 4,500 bytes costs 5,120.
pub fn allocation_bytes(len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let header_rounded = (len + 8).next_multiple_of(16).max(32);
    let size_class = match len {
        ..=128 => len.next_multiple_of(16),
        // Four classes between each power of two and the next: steps of an eighth of the
        // upper one.
        _ => len.next_multiple_of(len.next_power_of_two() / 8),
    };
    header_rounded.max(size_class)
}

/// A page the session changed and has not written.
struct Dirty {
    page: Arc<Page>,
    weight: usize,
}

/// One writer's changes to the pages (see the module header).
pub struct BlockPages<'a> {
    pages: &'a Pages,
    /// The pages changed since the last flush, decoded.
    dirty: BTreeMap<u64, Dirty>,
    /// Overflow blocks written since the last flush.
    overflow: BTreeMap<u64, Arc<Vec<u8>>>,
    /// Blocks to delete with the next flush.
    deleted: BTreeSet<u64>,
    /// Reused ids this session gave its new pages (named by no meta record until its last
    /// flush).
    reused: BTreeSet<u64>,
    /// Ids of this session's pages that an early flush wrote (so freeing one deletes a
    /// block).
    written: BTreeSet<u64>,
    /// Pages and overflow blocks that existed when the session began and are no longer
    /// part of the tree it builds.
    retired: Vec<u64>,
    /// Ids from here on were created in this session.
    fresh_from: u64,
    next_id: u64,
    /// Bytes `dirty` and `overflow` hold (kept as they change: the checkpoint asks after
    /// every key).
    dirty_bytes: usize,
    /// Bytes this session has reserved in the pool's budget (`dirty_bytes`, as of the last
    /// time the difference was worth telling the pool).
    reserved: usize,
}

/// How far `dirty_bytes` may drift from what the pool was told before it is told again (at
/// most; a thirty-second of the pool's budget when that is less).
const RESERVE_STEP: usize = 256 << 10;

impl<'a> BlockPages<'a> {
    /// A session on `pages` whose new pages get ids from `next_id` on (never below
    /// `meta::FIRST_PAGE`: block 0 is the meta block). Every page below `next_id` is
    /// published: copied on write, never changed.
    pub fn new(pages: &'a Pages, next_id: u64) -> Self {
        let next_id = next_id.max(crate::meta::FIRST_PAGE);
        BlockPages {
            pages,
            dirty: BTreeMap::new(),
            overflow: BTreeMap::new(),
            deleted: BTreeSet::new(),
            reused: BTreeSet::new(),
            written: BTreeSet::new(),
            retired: Vec::new(),
            fresh_from: next_id,
            next_id,
            dirty_bytes: 0,
            reserved: 0,
        }
    }

    /// The id the next new page will get (to persist with the tree's root).
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Pages changed since the last flush.
    pub fn dirty_count(&self) -> usize {
        self.dirty.len()
    }

    /// Bytes the dirty pages and unwritten overflow blocks hold.
    #[cfg(test)]
    pub fn dirty_bytes(&self) -> usize {
        self.dirty_bytes
    }

    /// Tells the pool what the session holds outside the frames, when it moved by a step
    /// (or `exact`).
    fn reserve(&mut self, exact: bool) {
        let (now, told) = (self.dirty_bytes, self.reserved);
        let step = RESERVE_STEP.min(self.pages.pool().budget() / 32);
        if now == told || (!exact && now.abs_diff(told) < step) {
            return;
        }
        let pool = self.pages.pool();
        if now > told {
            pool.reserve(now - told);
        } else {
            pool.unreserve(told - now);
        }
        self.reserved = now;
    }

    /// Whether the session's unwritten pages pass `budget` (time for an early flush).
    pub fn needs_early_flush(&self, budget: usize) -> bool {
        self.dirty_bytes > budget
    }

    /// The reused ids the session holds: an early flush's meta record lists them for
    /// deletion should the session not finish (see the module header).
    pub fn reused_ids(&self) -> Vec<u64> {
        self.reused.iter().copied().collect()
    }

    /// Whether `id` was made in this session (and so may change in place).
    fn is_fresh(&self, id: u64) -> bool {
        id >= self.fresh_from || self.reused.contains(&id)
    }

    /// The ids retired so far (see the module header); the caller deletes them with
    /// `reclaim` once no reader needs them.
    pub fn take_retired(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.retired)
    }

    /// Deletes blocks that no tree version needs any more, with the next flush.
    pub fn reclaim(&mut self, ids: impl IntoIterator<Item = u64>) {
        for id in ids {
            self.pages.pool().discard(id);
            self.deleted.insert(id);
        }
    }

    /// Keeps a value too large for a leaf in overflow blocks: `OVERFLOW_BLOCK_BYTES` a
    /// block, at consecutive new ids. They are written with the next flush; until then they
    /// are read from memory.
    pub fn write_overflow(&mut self, value: &[u8]) -> OverflowRef {
        let blocks = value.len().div_ceil(OVERFLOW_BLOCK_BYTES).max(1);
        let first = self.next_id;
        self.next_id += blocks as u64;
        let chunks = value.chunks(OVERFLOW_BLOCK_BYTES).map(<[u8]>::to_vec);
        let chunks: Vec<Vec<u8>> =
            if value.is_empty() { vec![Vec::new()] } else { chunks.collect() };
        for (id, chunk) in (first..).zip(chunks) {
            self.dirty_bytes += chunk.len();
            self.overflow.insert(id, Arc::new(chunk));
        }
        self.reserve(false);
        OverflowRef { len: value.len() as u64, first, blocks: blocks as u32 }
    }

    /// The value kept in overflow blocks at `overflow`, written or not.
    #[cfg(test)]
    pub fn read_overflow(&self, overflow: &OverflowRef) -> Result<Vec<u8>, PagesError> {
        read_overflow(overflow, |id| match self.overflow.get(&id) {
            Some(chunk) => Ok(chunk.to_vec()),
            None => self.pages.read_block(id),
        })
    }

    /// Lets go of a value's overflow blocks (replaced or deleted): blocks of this session
    /// are dropped (or deleted, if a flush wrote them), older ones retired.
    pub fn free_overflow(&mut self, overflow: &OverflowRef) {
        for id in overflow.first..overflow.first + u64::from(overflow.blocks) {
            self.forget(id);
        }
    }

    /// Drops block `id` from the tree being built.
    fn forget(&mut self, id: u64) {
        if !self.is_fresh(id) {
            self.retired.push(id);
            return;
        }
        let page = self.dirty.remove(&id).map(|dirty| dirty.weight);
        let chunk = self.overflow.remove(&id).map(|chunk| chunk.len());
        debug_assert!(page.is_some() || chunk.is_some() || self.written.contains(&id));
        self.dirty_bytes -= page.unwrap_or(0) + chunk.unwrap_or(0);
        self.reused.remove(&id);
        if !self.written.remove(&id) {
            // Never on disk, never in a frame, and named by nothing: another page may have it.
            self.pages.reusable().insert(id);
        } else {
            // A flush wrote it (and put it in its frame, if a page).
            self.pages.pool().discard(id);
            self.deleted.insert(id);
        }
    }

    /// Writes every dirty page and overflow block and every deletion in one atomic group,
    /// with the meta record `meta` if given, and puts the pages in their frames, clean,
    /// once it is durable. On an error the pages stay dirty (a later flush may retry).
    pub fn flush(&mut self, meta: Option<&Meta>) -> Result<(), BlockError> {
        self.flush_some(meta)?;
        // The pages at reused ids are on disk with the meta record that names them.
        self.reused.clear();
        Ok(())
    }

    /// `flush`, before the session's last flush (see the module header): `meta` calls the
    /// new ids orphans (`orphans_from` at or below the first) and lists every reused id the
    /// session holds (`reused_ids`) in its free list, so that a crash before the last flush
    /// deletes them all. The pages stay the session's, changed in place from here on.
    pub fn flush_early(&mut self, meta: &Meta) -> Result<(), BlockError> {
        assert!(meta.next_page >= self.next_id, "an early meta record that misses new pages");
        assert!(meta.orphans_from <= self.fresh_from, "an early meta record that owns new pages");
        assert!(
            self.reused.is_empty() || meta.free_list.is_some(),
            "an early meta record that does not list the reused ids"
        );
        self.flush_some(Some(meta))
    }

    /// Writes what `flush` and `flush_early` write; the ids written are the session's
    /// `written` from then on.
    fn flush_some(&mut self, meta: Option<&Meta>) -> Result<(), BlockError> {
        let writes: Vec<u64> = self.dirty.keys().copied().collect();
        let nothing = writes.is_empty() && self.overflow.is_empty() && self.deleted.is_empty();
        if nothing && meta.is_none() {
            return Ok(());
        }
        let page_bytes = self.pages.page_bytes;
        let encoded: Vec<Vec<u8>> =
            writes.iter().map(|id| page::encode(&self.dirty[id].page, page_bytes)).collect();
        let meta = meta.map(Meta::encode);
        let group: Vec<BlockWrite<'_>> = writes
            .iter()
            .zip(&encoded)
            .map(|(id, bytes)| BlockWrite::Put(BlockId(*id), bytes))
            .chain(self.overflow.iter().map(|(id, chunk)| BlockWrite::Put(BlockId(*id), chunk)))
            .chain(self.deleted.iter().map(|id| BlockWrite::Delete(BlockId(*id))))
            .chain(meta.as_deref().map(|bytes| BlockWrite::Put(META_BLOCK, bytes)))
            .collect();
        // CRASH: the group lands whole or not at all; a page at a reused id goes with the
        // meta record naming its tree, or with an early one whose free list names the id,
        // so none is left unaccounted for.
        self.pages.blocks().apply_group(&group)?;
        let overflow_bytes: usize = self.overflow.values().map(|chunk| chunk.len()).sum();
        self.written.extend(self.overflow.keys().chain(&writes));
        self.overflow.clear();
        self.dirty_bytes -= overflow_bytes;
        // Deleted by a durable group and named by no tree version: given out again.
        self.pages.reusable().extend(std::mem::take(&mut self.deleted));
        let pool = self.pages.pool();
        for (id, image) in writes.into_iter().zip(&encoded) {
            let dirty = self.dirty.remove(&id).expect("invariant: a written page was dirty");
            self.dirty_bytes -= dirty.weight;
            // Durable now, so it may be read from its frame. A page the frames cannot hold
            // (an id past the reservation) is left to the block store: its readers get the
            // same error from the pool that this install got.
            let installed = pool.install(id, image);
            debug_assert!(
                matches!(installed, Ok(()) | Err(BufferError::Beyond { .. })),
                "installing page {id}: {installed:?}"
            );
        }
        debug_assert!(self.dirty.is_empty() && self.dirty_bytes == 0);
        self.reserve(true);
        self.pages.count_index();
        Ok(())
    }
}

impl Drop for BlockPages<'_> {
    /// Pages never written (a session given up after an error) are dropped: nothing points
    /// at them, their reused ids are free again, and their bytes leave the pool's budget.
    fn drop(&mut self) {
        // Reused ids an early flush wrote hold blocks: the early meta record lists them, and
        // the next open deletes them.
        let unwritten: Vec<u64> =
            self.reused.iter().copied().filter(|id| !self.written.contains(id)).collect();
        self.pages.reusable().extend(unwritten);
        self.pages.pool().unreserve(self.reserved);
    }
}

impl PageSource for BlockPages<'_> {
    type Error = PagesError;

    fn load(&self, id: u64) -> Result<Arc<Page>, PagesError> {
        match self.dirty.get(&id) {
            Some(dirty) => Ok(Arc::clone(&dirty.page)),
            None => self.pages.load(id),
        }
    }
}

impl PageStore for BlockPages<'_> {
    /// A page of this session is changed in place; an older one gets a new id, and is
    /// retired.
    fn store(&mut self, id: u64, page: Page) -> u64 {
        let id = if self.is_fresh(id) {
            id
        } else {
            self.retired.push(id);
            self.allocate()
        };
        let weight = weight(&page);
        self.dirty_bytes += weight;
        if let Some(old) = self.dirty.insert(id, Dirty { page: Arc::new(page), weight }) {
            self.dirty_bytes -= old.weight;
        }
        self.reserve(false);
        id
    }

    fn allocate(&mut self) -> u64 {
        let reused = self.pages.reusable().pop_first();
        if let Some(id) = reused {
            debug_assert!(id < self.next_id && id >= crate::meta::FIRST_PAGE);
            self.reused.insert(id);
            return id;
        }
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn free(&mut self, id: u64) {
        self.forget(id);
    }
}

#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod tests;
