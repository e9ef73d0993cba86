//! `BlockPages`: the tree's pages kept in the `PageCache` and stored as blocks of a
//! `BlockStore`, one page per block, the block id being the page id.
//!
//! A page read that misses the cache reads its block, decodes it (`page::decode`) and caches
//! it. A page the tree changes is cached as dirty and remembered; `flush` writes every dirty
//! page in one atomic group of the block store (so a crash keeps all of them or none) and
//! only then marks them clean, so the cache can evict them. Clean pages leave the cache
//! under its budget and are read again when needed.
//!
//! A value too large for a leaf goes to overflow blocks (`write_overflow`: 1 MiB each, at
//! consecutive new ids), written with the next flush, in the same group as the leaf that
//! points at them; the blocks of a value replaced or deleted are deleted with the next flush
//! (`free_overflow`).
//!
//! Single-threaded for now: the tree takes it by `&mut` (issue 6's concurrency comes later).
//!
//! Must never: evict a dirty page (`Cached::evictable`); acknowledge a flush before the
//! block store's group is durable; return a page whose block failed to decode.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tierkv_blockstore::{BlockError, BlockId, BlockStore, BlockWrite};

use crate::cache::{Cached, PageCache};
use crate::meta::{Meta, MetaError, META_BLOCK};
use crate::page::{self, OverflowRef, Page, PageError};

/// Bytes of a value in each of its overflow blocks (the last one holds the rest).
pub const OVERFLOW_BLOCK_BYTES: usize = 1 << 20;
use crate::tree::PageStore;

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
}

impl Cached for CachedPage {
    fn weight(&self) -> usize {
        self.weight
    }
    fn evictable(&self) -> bool {
        !self.dirty.load(Ordering::Acquire)
    }
}

/// Bytes a decoded page is counted as in the cache: its encoded size and a fixed overhead
/// per entry for the vectors that hold it.
fn weight(page: &Page) -> usize {
    let entries = match page {
        Page::Leaf(leaf) => leaf.entries.len(),
        Page::Internal(internal) => internal.entries.len(),
    };
    page.encoded_len() + 48 * entries + 64
}

/// The pages of one tree on a block store (see the module header).
pub struct BlockPages<'a> {
    blocks: &'a dyn BlockStore,
    cache: &'a PageCache<CachedPage>,
    /// The pages changed since the last flush (also in the cache, where holding them here
    /// keeps them from being evicted, besides their dirty flag).
    dirty: BTreeMap<u64, Arc<CachedPage>>,
    /// Overflow blocks written since the last flush.
    overflow: BTreeMap<u64, Arc<Vec<u8>>>,
    /// Overflow blocks to delete with the next flush.
    freed: BTreeSet<u64>,
    next_id: u64,
}

impl<'a> BlockPages<'a> {
    /// Pages on `blocks`, cached in `cache`; new pages get ids from `next_id` on (never
    /// below `meta::FIRST_PAGE`: block 0 is the meta block).
    pub fn new(blocks: &'a dyn BlockStore, cache: &'a PageCache<CachedPage>, next_id: u64) -> Self {
        let next_id = next_id.max(crate::meta::FIRST_PAGE);
        BlockPages {
            blocks,
            cache,
            dirty: BTreeMap::new(),
            overflow: BTreeMap::new(),
            freed: BTreeSet::new(),
            next_id,
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
            self.overflow.insert(id, Arc::new(chunk));
        }
        OverflowRef { len: value.len() as u64, first, blocks: blocks as u32 }
    }

    /// The value kept in overflow blocks at `overflow`.
    pub fn read_overflow(&self, overflow: &OverflowRef) -> Result<Vec<u8>, PagesError> {
        // The length is only a claim until the blocks are read: reserve at most 64 MiB.
        let mut value = Vec::with_capacity(overflow.len.min(64 << 20) as usize);
        for id in overflow.first..overflow.first + u64::from(overflow.blocks) {
            match self.overflow.get(&id) {
                Some(chunk) => value.extend_from_slice(chunk),
                None => {
                    let chunk = self
                        .blocks
                        .read(BlockId(id))
                        .map_err(|source| PagesError::Block { page: id, source })?
                        .ok_or(PagesError::Missing { page: id })?;
                    value.extend_from_slice(&chunk);
                }
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

    /// Lets go of a value's overflow blocks (replaced or deleted): blocks not written yet are
    /// dropped, the others deleted with the next flush.
    pub fn free_overflow(&mut self, overflow: &OverflowRef) {
        for id in overflow.first..overflow.first + u64::from(overflow.blocks) {
            if self.overflow.remove(&id).is_none() {
                self.freed.insert(id);
            }
        }
    }

    /// Writes every dirty page in one atomic group and marks them clean once it is durable.
    /// On an error the pages stay dirty (a later flush may retry).
    pub fn flush(&mut self) -> Result<(), BlockError> {
        if self.dirty.is_empty() && self.overflow.is_empty() && self.freed.is_empty() {
            return Ok(());
        }
        self.write_dirty(None)
    }

    /// A checkpoint: every dirty page and the meta record `meta` in one atomic group, so
    /// that after a crash the meta block names a root whose pages are all there.
    pub fn flush_with_meta(&mut self, meta: &Meta) -> Result<(), BlockError> {
        self.write_dirty(Some(meta))
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

    fn write_dirty(&mut self, meta: Option<&Meta>) -> Result<(), BlockError> {
        let encoded: Vec<Vec<u8>> =
            self.dirty.values().map(|cached| page::encode(&cached.page)).collect();
        let meta = meta.map(Meta::encode);
        let group: Vec<BlockWrite<'_>> = self
            .dirty
            .keys()
            .zip(&encoded)
            .map(|(id, bytes)| BlockWrite::Put(BlockId(*id), bytes))
            .chain(self.overflow.iter().map(|(id, chunk)| BlockWrite::Put(BlockId(*id), chunk)))
            .chain(self.freed.iter().map(|id| BlockWrite::Delete(BlockId(*id))))
            .chain(meta.as_deref().map(|bytes| BlockWrite::Put(META_BLOCK, bytes)))
            .collect();
        self.blocks.apply_group(&group)?;
        self.overflow.clear();
        self.freed.clear();
        for cached in std::mem::take(&mut self.dirty).into_values() {
            cached.dirty.store(false, Ordering::Release);
        }
        // The pages just written may leave now, if the cache needs the room.
        self.cache.trim();
        Ok(())
    }
}

impl PageStore for BlockPages<'_> {
    type Error = PagesError;

    fn load(&self, id: u64) -> Result<Arc<Page>, PagesError> {
        if let Some(cached) = self.cache.get(id) {
            return Ok(Arc::clone(&cached.page));
        }
        let bytes = self
            .blocks
            .read(BlockId(id))
            .map_err(|source| PagesError::Block { page: id, source })?
            .ok_or(PagesError::Missing { page: id })?;
        let page =
            page::decode(&bytes).map_err(|source| PagesError::Corrupt { page: id, source })?;
        let cached = CachedPage {
            weight: weight(&page),
            page: Arc::new(page),
            dirty: AtomicBool::new(false),
        };
        Ok(Arc::clone(&self.cache.insert(id, Arc::new(cached)).page))
    }

    fn store(&mut self, id: u64, page: Page) {
        let cached = Arc::new(CachedPage {
            weight: weight(&page),
            page: Arc::new(page),
            dirty: AtomicBool::new(true),
        });
        self.cache.remove(id);
        self.cache.insert(id, Arc::clone(&cached));
        self.dirty.insert(id, cached);
    }

    fn allocate(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// The page's block is deleted with the next flush.
    fn free(&mut self, id: u64) {
        self.cache.remove(id);
        self.dirty.remove(&id);
        self.freed.insert(id);
    }
}

#[cfg(test)]
mod tests;
