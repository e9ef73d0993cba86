//! The tree's pages on a block store: [`Pages`], shared by every reader, and
//! [`BlockPages`], one checkpoint's changes to them.
//!
//! A page is one block of a `BlockStore`, the block id being the page id. [`Pages`] reads
//! them through the `PageCache`: a read that misses decodes the block (`page::decode`) and
//! caches it. An id is given out again only after its block is deleted, which happens only
//! once no tree version a reader holds names it (and the cache lets go of it then), so a
//! cached page is the page for as long as any reader can reach it, and many threads read at
//! once without any lock but the cache shard's.
//!
//! [`BlockPages`] is the writer's side, copy on write (see `tree`): a page that existed
//! when the session began is never changed; its new version gets a new id and the old id is
//! *retired*: readers of older tree versions may still read it, so its block is deleted
//! only when the engine says no version needs it (`reclaim`). Pages created in the session
//! are changed in place. `flush` writes every dirty page, the overflow blocks, the
//! deletions and optionally the meta record in one atomic group of the block store, so a
//! crash keeps all of them or none, and only then marks the pages clean, so the cache can
//! evict them.
//!
//! **Page ids are given out again.** An id whose block a durable group deleted is
//! *reusable* (`Pages::reusable`; at open, every id below the meta block's `orphans_from`
//! that no block holds): a session's new pages take the lowest reusable ids first, then new
//! ones from `next_id`. So the ids in use stay about as many as the pages, however many
//! checkpoints rewrite them (the frames of the buffer pool are addressed by page id). A page
//! at a reused id is written only by the session's last flush, the one with the meta record
//! that names its tree: a crash before it leaves no block at a reused id that no meta
//! record accounts for. Early flushes (`flush_early`) write only pages at new ids, which
//! the meta record calls orphans (from `orphans_from`) until the last flush; once a session
//! has flushed early, it takes no more reused ids, so the pages it keeps back are at most
//! what it held at its first early flush.
//!
//! A value too large for a leaf goes to overflow blocks (`write_overflow`: 1 MiB each, at
//! consecutive new ids), written with the next flush, in the same group as the leaf that
//! points at them; `free_overflow` retires a replaced or deleted value's blocks.
//!
//! Must never: evict a dirty page (`Cached::evictable`); acknowledge a flush before the
//! block store's group is durable; return a page whose block failed to decode; change or
//! delete a page that existed when the session began, except through `reclaim`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use tierkv_blockstore::{BlockError, BlockId, BlockStore, BlockWrite, GroupId};

use crate::cache::{allocation_bytes, Cached, PageCache};
use crate::meta::{Meta, MetaError, META_BLOCK};
use crate::page::{self, OverflowRef, Page, PageError, Value};
use crate::tree::{PageSource, PageStore};

/// Bytes of a value in each of its overflow blocks (the last one holds the rest).
pub const OVERFLOW_BLOCK_BYTES: usize = 1 << 20;

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

/// A decoded page in the cache.
pub struct CachedPage {
    page: Arc<Page>,
    weight: usize,
    dirty: AtomicBool,
    /// The block store's version of the page's block (`NO_VERSION` until it is known: a
    /// page not written yet, or read from a store that keeps none), for demotion.
    version: AtomicU64,
}

/// `CachedPage::version` of a page whose block's version is not known.
const NO_VERSION: u64 = u64::MAX;

impl CachedPage {
    fn new(page: Page, dirty: bool, version: Option<GroupId>) -> CachedPage {
        CachedPage {
            weight: weight(&page),
            page: Arc::new(page),
            dirty: AtomicBool::new(dirty),
            version: AtomicU64::new(version.map_or(NO_VERSION, |version| version.0)),
        }
    }

    /// Offers the page to the block store's tier as it leaves the cache: a clean leaf
    /// whose version is known, encoded again as its block holds it. Internal pages stay
    /// out: they are few and hot.
    fn demote(&self, id: u64, blocks: &dyn BlockStore, page_bytes: usize) {
        let version = self.version.load(Ordering::Acquire);
        if version == NO_VERSION || self.dirty.load(Ordering::Acquire) {
            return;
        }
        if let Page::Leaf(_) = &*self.page {
            let image = page::encode(&self.page, page_bytes);
            blocks.offer_evicted(BlockId(id), GroupId(version), &image);
        }
    }
}

impl Cached for CachedPage {
    fn weight(&self) -> usize {
        self.weight
    }
    fn evictable(&self) -> bool {
        !self.dirty.load(Ordering::Acquire)
    }
}

/// Bytes of the cache's own records of a page (its map entry and queue slots), roughly.
const CACHE_ENTRY_BYTES: usize = 64;

/// Bytes of the count `Bytes` keeps for a buffer its slices share.
const SHARED_BUFFER_BYTES: usize = 48;

/// Bytes a decoded page is counted as in the cache: the allocations that hold it (the
/// entries' vector at its capacity, each key and inline value), the page's own records in
/// their `Arc`s, and the cache's map entry and queue slot for it.
fn weight(page: &Page) -> usize {
    let arc = 2 * size_of::<usize>();
    let fixed = allocation_bytes(arc + size_of::<CachedPage>())
        + allocation_bytes(arc + size_of::<Page>())
        + CACHE_ENTRY_BYTES;
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

/// The pages on a block store, read through the page cache; shared by every reader.
pub struct Pages {
    blocks: Arc<dyn BlockStore>,
    cache: PageCache<CachedPage>,
    /// The store's page size: every page's encoded size.
    page_bytes: usize,
    /// Ids no block holds and no tree version names (see the module header).
    reusable: Mutex<BTreeSet<u64>>,
}

impl Pages {
    /// Pages of `page_bytes` on `blocks`, cached in `cache`; the clean leaves the cache
    /// evicts are offered to the block store's tier (`BlockStore::offer_evicted`).
    pub fn new(
        blocks: Arc<dyn BlockStore>,
        cache: PageCache<CachedPage>,
        page_bytes: usize,
    ) -> Pages {
        let demote_to = Arc::clone(&blocks);
        let cache = cache.with_eviction_hook(Box::new(move |id, cached: &CachedPage| {
            cached.demote(id, &*demote_to, page_bytes);
        }));
        Pages { blocks, cache, page_bytes, reusable: Mutex::new(BTreeSet::new()) }
    }

    fn reusable(&self) -> std::sync::MutexGuard<'_, BTreeSet<u64>> {
        // A set changed by single inserts and removals: consistent even after a panic.
        self.reusable.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes reusable every id from `FIRST_PAGE` below `below` that no block holds (at open:
    /// `below` is the meta block's `orphans_from`, under which every block is the tree's or
    /// listed for deletion). Returns how many.
    pub fn find_reusable(&self, below: u64) -> Result<usize, PagesError> {
        let live =
            self.blocks.live_ids().map_err(|source| PagesError::Block { page: 0, source })?;
        let mut live = live.into_iter().map(|id| id.0).peekable();
        let mut found = BTreeSet::new();
        for id in crate::meta::FIRST_PAGE..below {
            while live.next_if(|&held| held < id).is_some() {}
            if live.peek() != Some(&id) {
                found.insert(id);
            }
        }
        let count = found.len();
        self.reusable().extend(found);
        Ok(count)
    }

    /// How many ids are reusable now.
    pub fn reusable_count(&self) -> usize {
        self.reusable().len()
    }

    /// The block store.
    pub fn blocks(&self) -> &dyn BlockStore {
        &*self.blocks
    }

    /// The page cache.
    pub fn cache(&self) -> &PageCache<CachedPage> {
        &self.cache
    }

    /// The value kept in overflow blocks at `overflow`.
    pub fn read_overflow(&self, overflow: &OverflowRef) -> Result<Vec<u8>, PagesError> {
        read_overflow(overflow, |id| self.read_block(id))
    }

    fn read_block(&self, id: u64) -> Result<Vec<u8>, PagesError> {
        self.blocks
            .read(BlockId(id))
            .map_err(|source| PagesError::Block { page: id, source })?
            .ok_or(PagesError::Missing { page: id })
    }

    /// Reads the meta record: `None` for a store that never took a checkpoint.
    pub fn read_meta(&self) -> Result<Option<Meta>, PagesError> {
        let page = META_BLOCK.0;
        let Some(bytes) =
            self.blocks.read(META_BLOCK).map_err(|source| PagesError::Block { page, source })?
        else {
            return Ok(None);
        };
        Meta::decode(&bytes).map(Some).map_err(|source| PagesError::Meta { source })
    }
}

impl PageSource for Pages {
    type Error = PagesError;

    fn load(&self, id: u64) -> Result<Arc<Page>, PagesError> {
        if let Some(cached) = self.cache.get(id) {
            return Ok(Arc::clone(&cached.page));
        }
        let (bytes, version) = self
            .blocks
            .read_versioned(BlockId(id))
            .map_err(|source| PagesError::Block { page: id, source })?
            .ok_or(PagesError::Missing { page: id })?;
        let page =
            page::decode(&bytes).map_err(|source| PagesError::Corrupt { page: id, source })?;
        if bytes.len() != self.page_bytes {
            let detail = format!(
                "a page of {} bytes in a store of {}-byte pages",
                bytes.len(),
                self.page_bytes
            );
            return Err(PagesError::Corrupt { page: id, source: PageError { offset: 0, detail } });
        }
        let cached = CachedPage::new(page, false, version);
        Ok(Arc::clone(&self.cache.insert(id, Arc::new(cached)).page))
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

/// One writer's changes to the pages (see the module header).
pub struct BlockPages<'a> {
    pages: &'a Pages,
    /// The pages changed since the last flush (also in the cache, where holding them here
    /// keeps them from being evicted, besides their dirty flag).
    dirty: BTreeMap<u64, Arc<CachedPage>>,
    /// Overflow blocks written since the last flush.
    overflow: BTreeMap<u64, Arc<Vec<u8>>>,
    /// Blocks to delete with the next flush.
    deleted: BTreeSet<u64>,
    /// Reused ids this session gave its new pages (written only by its last flush).
    reused: BTreeSet<u64>,
    /// Bytes of the dirty pages at reused ids.
    reused_bytes: usize,
    /// Whether the session flushed early (and so takes no more reused ids).
    flushed_early: bool,
    /// Pages and overflow blocks that existed when the session began and are no longer
    /// part of the tree it builds.
    retired: Vec<u64>,
    /// Ids from here on were created in this session.
    fresh_from: u64,
    next_id: u64,
    /// Bytes `dirty` and `overflow` hold (kept as they change: the checkpoint asks after
    /// every key).
    dirty_bytes: usize,
}

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
            reused_bytes: 0,
            flushed_early: false,
            retired: Vec::new(),
            fresh_from: next_id,
            next_id,
            dirty_bytes: 0,
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

    /// Whether the pages an early flush could write pass `budget`: all dirty bytes until
    /// the first early flush, then those at new ids (pages at reused ids wait for the last
    /// flush, and no more are taken).
    pub fn needs_early_flush(&self, budget: usize) -> bool {
        let held_back = if self.flushed_early { self.reused_bytes } else { 0 };
        self.dirty_bytes - held_back > budget
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
            self.pages.cache.remove(id);
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
        self.pages.cache.remove(id);
        let page = self.dirty.remove(&id).map(|cached| cached.weight);
        let chunk = self.overflow.remove(&id).map(|chunk| chunk.len());
        let unwritten = page.is_some() | chunk.is_some();
        self.dirty_bytes -= page.unwrap_or(0) + chunk.unwrap_or(0);
        if self.reused.remove(&id) {
            self.reused_bytes -= page.unwrap_or(0);
        }
        if unwritten {
            // Never on disk and named by nothing: another page may have it.
            self.pages.reusable().insert(id);
        } else {
            // A flush wrote it.
            self.deleted.insert(id);
        }
        debug_assert!(self.reused_bytes <= self.dirty_bytes);
    }

    /// Writes every dirty page and overflow block and every deletion in one atomic group,
    /// with the meta record `meta` if given, and marks the pages clean once it is durable.
    /// On an error the pages stay dirty (a later flush may retry).
    pub fn flush(&mut self, meta: Option<&Meta>) -> Result<(), BlockError> {
        self.flush_some(meta, true)?;
        // The pages at reused ids are on disk with the meta record that names them.
        self.reused.clear();
        self.reused_bytes = 0;
        Ok(())
    }

    /// `flush`, of the pages at new ids only (see the module header): what a session
    /// writes before its last flush, with a meta record that calls those pages orphans.
    pub fn flush_early(&mut self, meta: &Meta) -> Result<(), BlockError> {
        assert!(meta.next_page >= self.next_id, "an early meta record that misses new pages");
        self.flush_some(Some(meta), false)?;
        self.flushed_early = true;
        Ok(())
    }

    fn flush_some(&mut self, meta: Option<&Meta>, with_reused: bool) -> Result<(), BlockError> {
        let writes: Vec<u64> = self
            .dirty
            .keys()
            .copied()
            .filter(|id| with_reused || !self.reused.contains(id))
            .collect();
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
        // CRASH: the group lands whole or not at all; a page at a reused id goes only with
        // the meta record naming its tree (`with_reused`), so none is left unaccounted for.
        let version = self.pages.blocks.apply_checkpoint_group(&group)?;
        let overflow_bytes: usize = self.overflow.values().map(|chunk| chunk.len()).sum();
        self.overflow.clear();
        self.dirty_bytes -= overflow_bytes;
        // Deleted by a durable group and named by no tree version: given out again.
        self.pages.reusable().extend(std::mem::take(&mut self.deleted));
        for id in writes {
            let cached = self.dirty.remove(&id).expect("invariant: a written page was dirty");
            self.dirty_bytes -= cached.weight;
            cached.version.store(version.0, Ordering::Release);
            cached.dirty.store(false, Ordering::Release);
        }
        debug_assert!(with_reused || self.dirty.keys().all(|id| self.reused.contains(id)));
        debug_assert_eq!(self.dirty.is_empty(), self.dirty_bytes == 0);
        // The pages just written may leave now, if the cache needs the room.
        self.pages.cache.trim();
        Ok(())
    }
}

impl Drop for BlockPages<'_> {
    /// Pages never written (a session given up after an error) leave the cache: nothing
    /// points at them, and their reused ids are free again.
    fn drop(&mut self) {
        for id in self.dirty.keys() {
            self.pages.cache.remove(*id);
        }
        let unwritten = std::mem::take(&mut self.reused);
        self.pages.reusable().extend(unwritten);
    }
}

impl PageSource for BlockPages<'_> {
    type Error = PagesError;

    fn load(&self, id: u64) -> Result<Arc<Page>, PagesError> {
        self.pages.load(id)
    }
}

impl PageStore for BlockPages<'_> {
    /// A page of this session is changed in place; an older one gets a new id, and is
    /// retired.
    fn store(&mut self, id: u64, mut page: Page) -> u64 {
        match &mut page {
            // The cache keeps it as one buffer, not slices of the pages it was made from
            // (and with its search heads, as `pack` builds them).
            Page::Leaf(leaf) => leaf.pack(),
            // Cached pages do not change, so their separators can have search heads too.
            Page::Internal(internal) => internal.build_heads(),
        }
        let id = if self.is_fresh(id) {
            id
        } else {
            self.retired.push(id);
            self.allocate()
        };
        let cached = Arc::new(CachedPage::new(page, true, None));
        let cache = &self.pages.cache;
        cache.remove(id);
        cache.insert(id, Arc::clone(&cached));
        let reused = self.reused.contains(&id);
        self.dirty_bytes += cached.weight;
        self.reused_bytes += if reused { cached.weight } else { 0 };
        if let Some(old) = self.dirty.insert(id, cached) {
            self.dirty_bytes -= old.weight;
            self.reused_bytes -= if reused { old.weight } else { 0 };
        }
        id
    }

    fn allocate(&mut self) -> u64 {
        if !self.flushed_early {
            let reused = self.pages.reusable().pop_first();
            if let Some(id) = reused {
                debug_assert!(id < self.next_id && id >= crate::meta::FIRST_PAGE);
                self.reused.insert(id);
                return id;
            }
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
