//! A bulk load: a tree built bottom-up from entries in key order, leaves filled to fifteen
//! sixteenths of a page, then each internal level, until one page is left. `compact` loads
//! the store's own entries into a new tree; `backup` loads a snapshot's into a new store.
//!
//! Invariants: keys come strictly ascending; every page is at most a page (a single entry
//! over it stays alone); an internal page routes at least two children.
//!
//! Must never: reorder or drop an entry; leave the session's pages unwritten (the caller
//! writes them, early when they outgrow its budget, and finishes the checkpoint).

use bytes::Bytes;

use crate::block_pages::BlockPages;
use crate::page::{shortest_separator, slotted, InternalPage, LeafPage, Page, Value, HEADER_BYTES};
use crate::tree::PageStore;

/// A tree being built (see the module header).
pub(super) struct BulkLoad<'a> {
    /// The checkpoint session the pages go to; the caller writes it early as it grows.
    pub session: BlockPages<'a>,
    /// Bytes a page is filled to.
    target: usize,
    /// Bytes a page may not pass.
    page_bytes: usize,
    /// The leaves made so far, each with the separator before it (empty for the first).
    level: Vec<(Vec<u8>, u64)>,
    leaf: LeafPage,
    last_key: Vec<u8>,
    separator: Vec<u8>,
    entries: u64,
}

impl<'a> BulkLoad<'a> {
    /// A load into `session`, of pages up to `max_page_bytes`.
    pub fn new(session: BlockPages<'a>, max_page_bytes: usize) -> BulkLoad<'a> {
        assert!(max_page_bytes >= crate::MIN_PAGE_BYTES);
        BulkLoad {
            session,
            target: max_page_bytes - max_page_bytes / 16,
            page_bytes: max_page_bytes,
            level: Vec::new(),
            leaf: LeafPage::default(),
            last_key: Vec::new(),
            separator: Vec::new(),
            entries: 0,
        }
    }

    /// Adds the next entry: its key above every key before it.
    pub fn push(&mut self, key: &[u8], value: Value) {
        assert!(self.entries == 0 || key > self.last_key.as_slice(), "keys out of order");
        let entry = LeafPage::new(vec![(Bytes::copy_from_slice(key), value)]);
        let grown = self.leaf.encoded_len() + entry.encoded_len() - HEADER_BYTES;
        if !self.leaf.entries.is_empty() && grown > self.target {
            let next = shortest_separator(&self.last_key, key);
            let leaf = std::mem::take(&mut self.leaf);
            let separator = std::mem::replace(&mut self.separator, next);
            self.emit(leaf, separator);
        }
        self.leaf.entries.extend(entry.entries);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.entries += 1;
    }

    fn emit(&mut self, leaf: LeafPage, separator: Vec<u8>) {
        let id = self.session.allocate();
        let id = self.session.store(id, Page::Leaf(leaf));
        self.level.push((separator, id));
    }

    /// Ends the load: the last leaf, then the internal levels. Returns the session and the
    /// new root (an empty leaf when no entry came).
    pub fn finish(mut self) -> (BlockPages<'a>, u64) {
        let (leaf, separator) =
            (std::mem::take(&mut self.leaf), std::mem::take(&mut self.separator));
        self.emit(leaf, separator);
        let target = self.target;
        let mut level = std::mem::take(&mut self.level);
        // Bounded: each pass makes a level at least twice as narrow, until one page is left.
        while level.len() > 1 {
            let mut parents: Vec<(Vec<u8>, u64)> = Vec::new();
            let mut children = level.into_iter();
            while let Some((up, first_child)) = children.next() {
                let mut page = InternalPage::new(first_child, Vec::new());
                let grown = |page: &InternalPage, separator: &[u8]| {
                    page.encoded_len() + slotted::SLOT_BYTES + separator.len() + 8
                };
                // To the target; but two separators at least, which always fit a page
                // (`Options::max_key_bytes`), so that a page can always split.
                for (separator, child) in children.as_slice() {
                    let size = grown(&page, separator);
                    if size > self.page_bytes || (size > target && page.entries.len() >= 2) {
                        break;
                    }
                    page.entries.push((separator.clone(), *child));
                }
                for _ in 0..page.entries.len() {
                    children.next();
                }
                // A last page of one child would route nothing: take it here, or, if it
                // does not fit, hand this page's last separator to that page.
                if children.len() == 1 {
                    let last = children.as_slice()[0].0.clone();
                    if grown(&page, &last) <= self.page_bytes {
                        page.entries.extend(children.next());
                    } else {
                        let (separator, child) =
                            page.entries.pop().expect("invariant: two separators were taken");
                        let rest = children.next().expect("one child is left");
                        let tail = InternalPage::new(child, vec![rest]);
                        let id = self.session.allocate();
                        let tail_id = self.session.store(id, Page::Internal(tail));
                        let id = self.session.allocate();
                        let id = self.session.store(id, Page::Internal(page));
                        parents.push((up, id));
                        parents.push((separator, tail_id));
                        continue;
                    }
                }
                debug_assert!(page.encoded_len() <= self.page_bytes && !page.entries.is_empty());
                let id = self.session.allocate();
                let id = self.session.store(id, Page::Internal(page));
                parents.push((up, id));
            }
            level = parents;
        }
        let (_, root) = level.pop().expect("invariant: the last leaf makes a level of one");
        (self.session, root)
    }
}
