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
//! **Batches.** Changes come in batches in key order (`Tree::apply`; `put` and `delete` are
//! batches of one). Each leaf with changes is rewritten once, merging its entries with the
//! batch's, and each internal page above once, so a checkpoint copies a page once for all
//! of its changes rather than once per key.
//!
//! **Shape.** The root is a leaf until it first splits; then internal pages route by
//! separators (`page::InternalPage::child_for`). A page whose encoded size exceeds
//! `max_page_bytes` after a batch is split into as few pages as fit, of about equal size
//! (`LeafPage::split_at_bytes`, `InternalPage::split_at_bytes`): keys appended in order fill
//! their pages, and one key too many splits a page in two. Its parent takes the separators;
//! a root that splits gets a new root above it, so every leaf stays at the same depth.
//!
//! **Removals** take the entry out of its leaf. A page left under a quarter of
//! `max_page_bytes` is merged with a sibling when both fit in one page (the parent loses
//! their separator), up the tree, and a root left with a single child gives way to it.
//! Pages that do not fit together stay underfull, which lookups and scans handle.
//!
//! Must never: lose or duplicate a key on a split; leave a page over `max_page_bytes` that
//! could split (a leaf of two entries or more, an internal page of three or more); change a
//! page in place that the store did not say may be changed in place.

use std::sync::Arc;

#[cfg(test)]
use bytes::Bytes;

#[cfg(test)]
use crate::page::InternalPage;
use crate::page::{LeafPage, Page, Value};

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
/// allocating an id cannot: a store keeps changed pages in memory (dirty, until a flush)
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

#[cfg(test)] // The copy-on-write writer: only its tests use it now.
/// One change of a batch (`Tree::apply`): a key and its new value, or `None` to remove it.
pub type Change = (Vec<u8>, Option<Value>);

/// The result of a tree operation on the store `S`.
pub type TreeResult<T, S> = Result<T, <S as PageSource>::Error>;

#[cfg(test)] // The copy-on-write writer: only its tests use it now.
/// What a put or delete did to one page: the id of its new version, the separators and ids
/// of the pages it split into after the first, and (deletes) whether it is underfull.
struct Changed {
    id: u64,
    splits: Vec<(Vec<u8>, u64)>,
    underfull: bool,
}

#[cfg(test)] // The copy-on-write writer: only its tests use it now.
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

    /// The value of `key`. (Readers go through `tree::read`; this is for tests.)
    #[cfg(test)]
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

    /// Sets `key` to `value`; returns the value it replaced. (The engine changes the tree
    /// in batches, with `apply`; this is for tests.)
    #[cfg(test)]
    pub fn put<S: PageStore>(
        &mut self,
        store: &mut S,
        key: &[u8],
        value: Value,
    ) -> TreeResult<Option<Value>, S> {
        let mut old = None;
        self.apply(store, &mut [(key.to_vec(), Some(value))], &mut |value| {
            old = Some(value.clone());
        })?;
        Ok(old)
    }

    /// Removes `key`; returns its value. (For tests, as `put`.)
    #[cfg(test)]
    pub fn delete<S: PageStore>(
        &mut self,
        store: &mut S,
        key: &[u8],
    ) -> TreeResult<Option<Value>, S> {
        let mut old = None;
        self.apply(store, &mut [(key.to_vec(), None)], &mut |value| old = Some(value.clone()))?;
        Ok(old)
    }

    #[cfg(test)] // The copy-on-write writer: only its tests use it now.
    /// Applies `changes`, in strictly ascending key order: each sets its key to the value, or
    /// removes the key (`None`). Each leaf is rewritten once for all of its changes, and each
    /// page on the paths to them once. `replaced` sees every value a change replaced or
    /// removed. The changes' keys and values are moved out.
    ///
    /// A leaf that grows too large is split into as few pages as fit, of about equal size
    /// (so keys appended in order fill their pages); a page left under a quarter full is
    /// merged with a sibling when the two fit in one page, and a root left with a single
    /// child gives way to it.
    ///
    /// A single change reads every page on its path before it changes any, so when it fails
    /// nothing has changed. A failure part way through several may leave some of them made
    /// in pages created since the store last published (never in a published page): the
    /// caller gives up the session (the engine poisons the store).
    pub fn apply<S: PageStore>(
        &mut self,
        store: &mut S,
        changes: &mut [Change],
        replaced: &mut impl FnMut(&Value),
    ) -> TreeResult<(), S> {
        debug_assert!(changes.windows(2).all(|pair| pair[0].0 < pair[1].0));
        if changes.is_empty() {
            return Ok(());
        }
        let changed = self.apply_in(store, self.root, changes, replaced)?;
        self.root = changed.id;
        let mut splits = changed.splits;
        // The root split: a new root above the pieces, which may have to split in turn.
        while !splits.is_empty() {
            let id = store.allocate();
            let page = InternalPage::new(self.root, splits);
            let root = self.store_fitted(store, id, page);
            self.root = root.id;
            splits = root.splits;
        }
        // A root with a single child is replaced by it (repeatedly, after merges). A root
        // that cannot be read is left as it is: the changes are made, and a root with one
        // child is still a valid tree.
        while let Ok(root) = store.load(self.root) {
            match &*root {
                Page::Internal(internal) if internal.entries.is_empty() => {
                    let old = self.root;
                    self.root = internal.first_child;
                    store.free(old);
                }
                _ => break,
            }
        }
        Ok(())
    }

    #[cfg(test)] // The copy-on-write writer: only its tests use it now.
    /// Applies `changes` (non-empty, all within page `id`'s key range) to the subtree at
    /// `id`; returns what became of page `id`.
    fn apply_in<S: PageStore>(
        &self,
        store: &mut S,
        id: u64,
        changes: &mut [Change],
        replaced: &mut impl FnMut(&Value),
    ) -> TreeResult<Changed, S> {
        let page = store.load(id)?;
        match &*page {
            Page::Leaf(leaf) => {
                let Some(merged) = merge_leaf(leaf, changes, replaced) else {
                    return Ok(Changed::unchanged(id));
                };
                let underfull = merged.encoded_len() < self.max_page_bytes / 4;
                let mut changed = self.store_fitted(store, id, merged);
                changed.underfull = underfull;
                Ok(changed)
            }
            Page::Internal(internal) => {
                // The new version of this page, child by child: each child with changes is
                // replaced by what it became, followed by the pages it split into.
                let mut next = InternalPage::new(
                    internal.first_child,
                    Vec::with_capacity(internal.entries.len() + 1),
                );
                let mut underfull = Vec::new();
                let mut any = false;
                let mut rest = changes;
                for index in 0..internal.children() {
                    let child = internal.child_at(index);
                    let take = match internal.entries.get(index) {
                        Some((upper, _)) => rest.partition_point(|(key, _)| key < upper),
                        None => rest.len(),
                    };
                    let (mine, after) = std::mem::take(&mut rest).split_at_mut(take);
                    rest = after;
                    let changed = if mine.is_empty() {
                        Changed::unchanged(child)
                    } else {
                        self.apply_in(store, child, mine, replaced)?
                    };
                    any |= changed.id != child || !changed.splits.is_empty() || changed.underfull;
                    if index == 0 {
                        next.first_child = changed.id;
                    } else {
                        next.entries.push((internal.entries[index - 1].0.clone(), changed.id));
                    }
                    if changed.underfull {
                        // The child's number in `next` (0 is the first child).
                        underfull.push(next.entries.len());
                    }
                    next.entries.extend(changed.splits);
                }
                if !any {
                    // Every child with changes was changed in place.
                    return Ok(Changed::unchanged(id));
                }
                drop(page);
                // Merge each underfull child with its right sibling, or its left one if it is
                // the last; from the last, so the numbers of those not merged yet hold.
                let mut merged = false;
                for at in underfull.into_iter().rev() {
                    if next.entries.is_empty() {
                        break;
                    }
                    let left = if at < next.entries.len() { at } else { at - 1 };
                    merged |= self.merge_children(store, &mut next, left);
                }
                let underfull = merged
                    && (next.entries.is_empty() || next.encoded_len() < self.max_page_bytes / 4);
                let mut changed = self.store_fitted(store, id, next);
                changed.underfull = underfull && changed.splits.is_empty();
                Ok(changed)
            }
        }
    }

    #[cfg(test)] // The copy-on-write writer: only its tests use it now.
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

    #[cfg(test)] // The copy-on-write writer: only its tests use it now.
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
    /// key order, until it returns false. (Iterators read leaves through `tree::read`;
    /// this is for tests.)
    #[cfg(test)]
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

#[cfg(test)] // The copy-on-write writer: only its tests use it now.
/// A page kind that splits when it grows too large.
trait Splits: Sized {
    /// Larger than `max` bytes encoded, with entries enough to split.
    fn too_big(&self, max: usize) -> bool;
    /// Bytes of the encoded page.
    fn encoded_len(&self) -> usize;
    /// Keeps the lower part, of about `target` bytes; returns the separator and the upper
    /// part.
    fn split_upper_at(&mut self, target: usize) -> (Vec<u8>, Self);
    /// Lets go of spare capacity.
    fn shrink(&mut self);
    fn into_page(self) -> Page;
}

#[cfg(test)] // The copy-on-write writer: only its tests use it now.
impl Splits for LeafPage {
    fn too_big(&self, max: usize) -> bool {
        self.encoded_len() > max && self.entries.len() >= 2
    }
    fn encoded_len(&self) -> usize {
        LeafPage::encoded_len(self)
    }
    fn split_upper_at(&mut self, target: usize) -> (Vec<u8>, Self) {
        self.split_at_bytes(target)
    }
    fn shrink(&mut self) {
        self.entries.shrink_to_fit();
    }
    fn into_page(self) -> Page {
        Page::Leaf(self)
    }
}

#[cfg(test)] // The copy-on-write writer: only its tests use it now.
/// Internal pages split from three separators on.
impl Splits for InternalPage {
    fn too_big(&self, max: usize) -> bool {
        self.encoded_len() > max && self.entries.len() >= 3
    }
    fn encoded_len(&self) -> usize {
        InternalPage::encoded_len(self)
    }
    fn split_upper_at(&mut self, target: usize) -> (Vec<u8>, Self) {
        self.split_at_bytes(target)
    }
    fn shrink(&mut self) {
        self.entries.shrink_to_fit();
    }
    fn into_page(self) -> Page {
        Page::Internal(self)
    }
}

#[cfg(test)] // The copy-on-write writer: only its tests use it now.
/// Splits `page` until every piece fits `max` bytes or cannot split: into as few pieces as
/// its size needs, of about equal size. Returns the first piece, then the others with their
/// separators, in key order.
fn fit<P: Splits>(page: P, max: usize) -> (P, Vec<(Vec<u8>, P)>) {
    let mut pages = Vec::new();
    let mut separators = Vec::new();
    fit_into(page, max, &mut pages, &mut separators);
    let rest = pages.split_off(1);
    // `fit_into` pushes at least one page.
    let first = pages.remove(0);
    (first, separators.into_iter().zip(rest).collect())
}

#[cfg(test)] // The copy-on-write writer: only its tests use it now.
/// Pushes the pieces of `page` onto `pages`, and the separators between them onto
/// `separators` (one fewer).
fn fit_into<P: Splits>(page: P, max: usize, pages: &mut Vec<P>, separators: &mut Vec<Vec<u8>>) {
    let mut rest = page;
    while rest.too_big(max) {
        let size = rest.encoded_len();
        let target = size.div_ceil(size.div_ceil(max));
        let (separator, upper) = rest.split_upper_at(target);
        let mut lower = std::mem::replace(&mut rest, upper);
        lower.shrink();
        // Large entries can leave the lower piece too big still; it has fewer entries than
        // `rest` had, so this ends.
        fit_into(lower, max, pages, separators);
        separators.push(separator);
    }
    pages.push(rest);
}

#[cfg(test)] // The copy-on-write writer: only its tests use it now.
/// A leaf's entries with `changes` (within its key range, ascending) made, or `None` when
/// they change nothing (removals of keys it does not hold). Moves the changes' keys and
/// values out; `replaced` sees each value replaced or removed.
fn merge_leaf(
    leaf: &LeafPage,
    changes: &mut [Change],
    replaced: &mut impl FnMut(&Value),
) -> Option<LeafPage> {
    let puts = changes.iter().filter(|(_, value)| value.is_some()).count();
    let mut entries = Vec::with_capacity(leaf.entries.len() + puts);
    let mut old = leaf.entries.iter().peekable();
    let mut changed = false;
    for (key, value) in changes.iter_mut() {
        while let Some(entry) = old.next_if(|(old_key, _)| old_key < key) {
            entries.push(entry.clone());
        }
        if let Some((_, old_value)) = old.next_if(|(old_key, _)| old_key == key) {
            replaced(old_value);
            changed = true;
        }
        if let Some(value) = value.take() {
            entries.push((Bytes::from(std::mem::take(key)), value));
            changed = true;
        }
    }
    if !changed {
        return None;
    }
    entries.extend(old.cloned());
    entries.shrink_to_fit();
    Some(LeafPage::new(entries))
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
#[cfg(test)]
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

pub(crate) mod read;
// Changes in place (issue 26): built and tested ahead of the engine's use of them.
#[allow(dead_code)]
pub(crate) mod write;

#[cfg(test)]
mod tests;
