//! `compact`: after a checkpoint, the tree rewritten with full pages (a bulk load of its
//! entries in order, `bulk.rs`) under the checkpoint lock, with writers waiting (they change
//! the tree in place, and the new tree must hold every change), the old tree's pages
//! retired, and the block store's files cleaned back to their size before.
//!
//! Must never: delete a page a snapshot taken before the compaction still reads (the old
//! pages are retired like a checkpoint's, and go once no reader holds them).

use super::bulk::BulkLoad;
use super::{lock, write, Checkpointer, Inner};
use crate::block_pages::{BlockPages, Pages};
use crate::page::Page;
use crate::tree::{PageSource, PageStore, Tree};
use crate::{Error, Result};

impl Inner {
    /// Checkpoints, then rewrites the tree with full pages (a bulk load of its entries in
    /// order), so that pages left half full by splits and deletes are packed again.
    pub(super) fn compact(&self) -> Result<()> {
        self.check_writable()?;
        // Writers wait while the tree is replaced: the new one holds every change made.
        let _switch = write(&self.switch);
        let mut checkpointer = lock(&self.checkpointer);
        // Again under the lock: a close waits for this lock once it refuses new calls.
        self.check_writable()?;
        let before = self.pages.blocks().stats().file_bytes;
        let result = self.checkpoint_locked(&mut checkpointer);
        let result = result.and_then(|()| self.compact_locked(&mut checkpointer)).and_then(|()| {
            // The old tree's pages go at the next checkpoint once no reader holds them (a
            // snapshot taken before the compaction keeps them), then their space goes back.
            self.checkpoint_locked(&mut checkpointer)?;
            Ok(self.pages.blocks().shrink_to(before)?)
        });
        drop(checkpointer);
        result.map(|_| ()).map_err(|error| self.fail(error))
    }

    fn compact_locked(&self, cp: &mut Checkpointer) -> Result<()> {
        // Under the checkpoint lock and `switch` nothing else changes the tree, and the
        // checkpoint before left no page dirty.
        let base = self.current.load_full();
        let old = base.tree.clone();
        let max = old.max_page_bytes;
        let dirty_budget = self.options.dirty_budget();
        debug_assert_eq!(self.pages.pool().dirty_count(), 0);
        let next_page = self.next_page.load(std::sync::atomic::Ordering::Relaxed);
        let mut bulk = BulkLoad::new(BlockPages::new(&self.pages, next_page), max);
        let mut failure: Option<Error> = None;
        old.scan(&self.pages, b"", &mut |key, value| {
            bulk.push(key, value.clone());
            if bulk.session.needs_early_flush(dirty_budget) {
                if let Err(error) = self.flush_early(cp, &mut bulk.session) {
                    failure = Some(error);
                    return false;
                }
            }
            true
        })?;
        if let Some(error) = failure {
            return Err(error);
        }
        let (mut session, root) = bulk.finish();
        // Every page of the old tree is replaced (overflow blocks are kept as they are).
        let mut old_pages = Vec::new();
        collect_pages(&self.pages, old.root, &mut old_pages)?;
        for id in old_pages {
            session.free(id);
        }
        let tree = Tree { root, max_page_bytes: max };
        self.finish(cp, session, tree, cp.meta.sequence)?;
        Ok(())
    }
}

/// Ids of every page of the tree at `root` (internal pages are read; leaves are not).
fn collect_pages(pages: &Pages, root: u64, out: &mut Vec<u64>) -> Result<()> {
    out.push(root);
    if let Page::Internal(internal) = &*pages.load(root)? {
        for index in 0..internal.children() {
            collect_pages(pages, internal.child_at(index), out)?;
        }
    }
    Ok(())
}
