//! The B+tree's algorithms over a `PageStore`: lookups, inserts that split full pages up to
//! the root, deletes that merge underfull siblings, and ordered scans in both directions.
//!
//! **Copy on write.** A change never alters a page that a reader may be looking at: the
//! store decides (`PageStore::store`) whether the new version of a page keeps its id (a page
//! created since the tree was last published, which no reader can see) or gets a new one,
//! in which case the parent is changed to point at it, and so on up to the root. So a
//! `Tree` value is a version: its root, and every page under it, stay readable and unchanged
//! for as long as the store keeps the pages a later version replaced (the engine keeps them
//! while a snapshot of the older version lives). The engine changes the tree only at
//! checkpoints, so each path is copied once per checkpoint, not once per write.
//!
//! **Shape.** The root is a leaf until it first splits; then internal pages route by
//! separators (`page::InternalPage::child_for`). A page whose encoded size exceeds
//! `max_page_bytes` after an insert splits (`LeafPage::split`, `InternalPage::split`), again
//! and again while a piece is still too large (large entries), and its parent takes the
//! separators; a root that splits gets a new root above it, so every leaf stays at the same
//! depth.
//!
//! **Deletes** remove the entry from its leaf. A page left under a quarter of
//! `max_page_bytes` is merged with a sibling when both fit in one page (the parent loses
//! their separator), up the tree, and a root left with a single child gives way to it.
//! Pages that do not fit together stay underfull, which lookups and scans handle.
//!
//! Must never: lose or duplicate a key on a split; leave a page over `max_page_bytes` that
//! could split (a leaf of two entries or more, an internal page of three or more); change a
//! page in place that the store did not say may be changed in place.

use std::sync::Arc;

use crate::page::{InternalPage, LeafPage, Page, Value};

/// Where pages are read from, by id.
pub trait PageSource {
    /// Why a page could not be read.
    type Error;
    /// The page `id`.
    fn load(&self, id: u64) -> Result<Arc<Page>, Self::Error>;
}

/// Where pages are read and written. A page is shared (`Arc`) for reading; the tree clones
/// one to change it and stores the new version.
///
/// Only reading a page can fail (a page not in memory is read from disk). Storing one and
/// allocating an id cannot: a store keeps changed pages in memory (dirty in the page cache)
/// until a checkpoint writes them. Every operation reads the pages on its path before it
/// changes any, so an operation that fails has changed nothing.
pub trait PageStore: PageSource {
    /// Stores `page` as the new version of page `id`; returns the id it is now under:
    /// `id` itself where the store allows changing it in place, else a new id (the old
    /// version stays readable until the store reclaims it).
    fn store(&mut self, id: u64, page: Page) -> u64;
    /// A new, unused page id, to `store` a new page under (which keeps it).
    fn allocate(&mut self) -> u64;
    /// Page `id` is no longer part of the tree (merged away, or replaced by a root below it).
    fn free(&mut self, id: u64);
}

/// The result of a tree operation on the store `S`.
pub type TreeResult<T, S> = Result<T, <S as PageSource>::Error>;

/// What a put or delete did to one page: the id of its new version, the separators and ids
/// of the pages it split into after the first, and (deletes) whether it is underfull.
struct Changed {
    id: u64,
    splits: Vec<(Vec<u8>, u64)>,
    underfull: bool,
}

impl Changed {
    fn unchanged(id: u64) -> Changed {
        Changed { id, splits: Vec::new(), underfull: false }
    }
}

/// A B+tree: its root page and how large a page may grow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    /// The root page's id.
    pub root: u64,
    /// Pages larger than this when encoded split.
    pub max_page_bytes: usize,
}

impl Tree {
    /// A new tree: an empty leaf as the root.
    pub fn create(store: &mut impl PageStore, max_page_bytes: usize) -> Tree {
        let id = store.allocate();
        let root = store.store(id, Page::Leaf(LeafPage::default()));
        Tree { root, max_page_bytes }
    }

    /// The value of `key`.
    pub fn get<S: PageSource>(&self, store: &S, key: &[u8]) -> TreeResult<Option<Value>, S> {
        let mut id = self.root;
        loop {
            match &*store.load(id)? {
                Page::Internal(internal) => id = internal.child_for(key),
                Page::Leaf(leaf) => {
                    return Ok(leaf.search(key).ok().map(|at| leaf.entries[at].1.clone()));
                }
            }
        }
    }

    /// Sets `key` to `value`; returns the value it replaced.
    pub fn put<S: PageStore>(
        &mut self,
        store: &mut S,
        key: &[u8],
        value: Value,
    ) -> TreeResult<Option<Value>, S> {
        let (old, changed) = self.put_in(store, self.root, key, value)?;
        self.root = changed.id;
        let mut splits = changed.splits;
        // The root split: a new root above the pieces, which may have to split in turn.
        while !splits.is_empty() {
            let id = store.allocate();
            let page = InternalPage { first_child: self.root, entries: splits };
            let root = self.store_fitted(store, id, page);
            self.root = root.id;
            splits = root.splits;
        }
        Ok(old)
    }

    /// Puts into the subtree at `id`; returns the replaced value and what became of page `id`.
    fn put_in<S: PageStore>(
        &self,
        store: &mut S,
        id: u64,
        key: &[u8],
        value: Value,
    ) -> TreeResult<(Option<Value>, Changed), S> {
        match Arc::unwrap_or_clone(store.load(id)?) {
            Page::Leaf(mut leaf) => {
                let old = match leaf.search(key) {
                    Ok(at) => Some(std::mem::replace(&mut leaf.entries[at].1, value)),
                    Err(at) => {
                        leaf.entries.insert(at, (key.to_vec(), value));
                        None
                    }
                };
                Ok((old, self.store_fitted(store, id, leaf)))
            }
            Page::Internal(mut internal) => {
                let index = internal.child_index(key);
                let child = internal.child_at(index);
                let (old, changed) = self.put_in(store, child, key, value)?;
                if changed.id == child && changed.splits.is_empty() {
                    return Ok((old, Changed::unchanged(id)));
                }
                internal.set_child(index, changed.id);
                for (separator, right) in changed.splits {
                    internal.insert(separator, right);
                }
                Ok((old, self.store_fitted(store, id, internal)))
            }
        }
    }

    /// Stores `page` as the new version of `id`, split into as many pages as it takes to fit.
    fn store_fitted<P: Splits>(&self, store: &mut impl PageStore, id: u64, page: P) -> Changed {
        let (page, rest) = fit(page, self.max_page_bytes);
        let id = store.store(id, page.into_page());
        let mut splits = Vec::with_capacity(rest.len());
        for (separator, page) in rest {
            let right = store.allocate();
            let right = store.store(right, page.into_page());
            splits.push((separator, right));
        }
        Changed { id, splits, underfull: false }
    }

    /// Removes `key`; returns its value. A page left under a quarter full is merged with a
    /// sibling when the two fit in one page, and a root left with one child gives way to it.
    pub fn delete<S: PageStore>(
        &mut self,
        store: &mut S,
        key: &[u8],
    ) -> TreeResult<Option<Value>, S> {
        let (value, changed) = self.delete_in(store, self.root, key)?;
        self.root = changed.id;
        // A root with a single child is replaced by it (repeatedly, after merges).
        loop {
            let Ok(root) = store.load(self.root) else { break };
            match &*root {
                Page::Internal(internal) if internal.entries.is_empty() => {
                    let old = self.root;
                    self.root = internal.first_child;
                    store.free(old);
                }
                _ => break,
            }
        }
        Ok(value)
    }

    /// Deletes from the subtree at `id`; returns the value and what became of page `id`.
    fn delete_in<S: PageStore>(
        &self,
        store: &mut S,
        id: u64,
        key: &[u8],
    ) -> TreeResult<(Option<Value>, Changed), S> {
        let page = store.load(id)?;
        match &*page {
            Page::Leaf(leaf) => {
                let Ok(at) = leaf.search(key) else { return Ok((None, Changed::unchanged(id))) };
                let mut leaf = leaf.clone();
                let (_, value) = leaf.entries.remove(at);
                let underfull = leaf.encoded_len() < self.max_page_bytes / 4;
                let id = store.store(id, Page::Leaf(leaf));
                Ok((Some(value), Changed { id, splits: Vec::new(), underfull }))
            }
            Page::Internal(internal) => {
                let index = internal.child_index(key);
                let child = internal.child_at(index);
                let (value, changed) = self.delete_in(store, child, key)?;
                if value.is_none() {
                    return Ok((None, Changed::unchanged(id)));
                }
                let mut internal = internal.clone();
                internal.set_child(index, changed.id);
                // Merge the child with its right sibling, or its left one if it is the last.
                let merged = changed.underfull && !internal.entries.is_empty() && {
                    let left = if index < internal.entries.len() { index } else { index - 1 };
                    self.merge_children(store, &mut internal, left)
                };
                let underfull = merged
                    && (internal.entries.is_empty()
                        || internal.encoded_len() < self.max_page_bytes / 4);
                let id = store.store(id, Page::Internal(internal));
                Ok((value, Changed { id, splits: Vec::new(), underfull }))
            }
        }
    }

    /// Merges children `left` and `left + 1` of `parent` into the left one when they fit in
    /// one page; returns whether it did. A sibling that cannot be read is left alone: the
    /// delete has been made already, and an underfull page is still a valid one.
    fn merge_children<S: PageStore>(
        &self,
        store: &mut S,
        parent: &mut InternalPage,
        left: usize,
    ) -> bool {
        let left_id = parent.child_at(left);
        let (separator, right_id) = parent.entries[left].clone();
        let (Ok(left_page), Ok(right_page)) = (store.load(left_id), store.load(right_id)) else {
            return false;
        };
        let merged = match (Arc::unwrap_or_clone(left_page), Arc::unwrap_or_clone(right_page)) {
            (Page::Leaf(mut a), Page::Leaf(b)) => {
                a.merge(b);
                Page::Leaf(a)
            }
            (Page::Internal(mut a), Page::Internal(b)) => {
                a.merge(separator, b);
                Page::Internal(a)
            }
            // Siblings are at the same depth; a mismatch would be damage. Leave it.
            _ => return false,
        };
        if merged.encoded_len() > self.max_page_bytes {
            return false;
        }
        parent.entries.remove(left);
        let merged_id = store.store(left_id, merged);
        parent.set_child(left, merged_id);
        store.free(right_id);
        true
    }

    /// Calls `visit` with the entries from `start` on, in key order, until it returns false.
    pub fn scan<S: PageSource>(
        &self,
        store: &S,
        start: &[u8],
        visit: &mut impl FnMut(&[u8], &Value) -> bool,
    ) -> TreeResult<(), S> {
        scan_in(store, self.root, start, visit).map(|_| ())
    }

    /// Calls `visit` with the entries below `end` (all of them for `None`), in descending
    /// key order, until it returns false.
    pub fn scan_back<S: PageSource>(
        &self,
        store: &S,
        end: Option<&[u8]>,
        visit: &mut impl FnMut(&[u8], &Value) -> bool,
    ) -> TreeResult<(), S> {
        scan_back_in(store, self.root, end, visit).map(|_| ())
    }

    /// Levels from the root to the leaves (1 for a leaf root).
    pub fn height<S: PageSource>(&self, store: &S) -> TreeResult<usize, S> {
        let mut id = self.root;
        let mut height = 1;
        while let Page::Internal(internal) = &*store.load(id)? {
            id = internal.first_child;
            height += 1;
        }
        Ok(height)
    }
}

/// A page kind that splits when it grows too large.
trait Splits: Sized {
    /// Larger than `max` bytes encoded, with entries enough to split.
    fn too_big(&self, max: usize) -> bool;
    /// Keeps the lower part; returns the separator and the upper part.
    fn split_upper(&mut self) -> (Vec<u8>, Self);
    fn into_page(self) -> Page;
}

impl Splits for LeafPage {
    fn too_big(&self, max: usize) -> bool {
        self.encoded_len() > max && self.entries.len() >= 2
    }
    fn split_upper(&mut self) -> (Vec<u8>, Self) {
        self.split()
    }
    fn into_page(self) -> Page {
        Page::Leaf(self)
    }
}

/// Internal pages split from three separators on.
impl Splits for InternalPage {
    fn too_big(&self, max: usize) -> bool {
        self.encoded_len() > max && self.entries.len() >= 3
    }
    fn split_upper(&mut self) -> (Vec<u8>, Self) {
        self.split()
    }
    fn into_page(self) -> Page {
        Page::Internal(self)
    }
}

/// Splits `page` until every piece fits `max` bytes or cannot split: the first piece, then
/// the others with their separators, in key order.
fn fit<P: Splits>(mut page: P, max: usize) -> (P, Vec<(Vec<u8>, P)>) {
    if !page.too_big(max) {
        return (page, Vec::new());
    }
    let (separator, right) = page.split_upper();
    let (left, mut pieces) = fit(page, max);
    let (right, right_pieces) = fit(right, max);
    pieces.push((separator, right));
    pieces.extend(right_pieces);
    (left, pieces)
}

/// Scans the subtree at `id`; returns false once `visit` asked to stop.
fn scan_in<S: PageSource>(
    store: &S,
    id: u64,
    start: &[u8],
    visit: &mut impl FnMut(&[u8], &Value) -> bool,
) -> TreeResult<bool, S> {
    match &*store.load(id)? {
        Page::Leaf(leaf) => {
            let from = leaf.search(start).unwrap_or_else(|at| at);
            Ok(leaf.entries[from..].iter().all(|(key, value)| visit(key, value)))
        }
        Page::Internal(internal) => {
            for index in internal.child_index(start)..internal.children() {
                if !scan_in(store, internal.child_at(index), start, visit)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
    }
}

/// Scans the subtree at `id` backwards from below `end`; returns false once `visit` asked
/// to stop.
fn scan_back_in<S: PageSource>(
    store: &S,
    id: u64,
    end: Option<&[u8]>,
    visit: &mut impl FnMut(&[u8], &Value) -> bool,
) -> TreeResult<bool, S> {
    match &*store.load(id)? {
        Page::Leaf(leaf) => {
            let below = match end {
                Some(end) => leaf.search(end).unwrap_or_else(|at| at),
                None => leaf.entries.len(),
            };
            Ok(leaf.entries[..below].iter().rev().all(|(key, value)| visit(key, value)))
        }
        Page::Internal(internal) => {
            // The child holding `end` may hold keys below it; the ones after it cannot.
            let last = match end {
                Some(end) => internal.child_index(end),
                None => internal.children() - 1,
            };
            for index in (0..=last).rev() {
                if !scan_back_in(store, internal.child_at(index), end, visit)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests;
