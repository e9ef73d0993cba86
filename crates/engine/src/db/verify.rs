//! `verify`'s report and its walk of the tree: key order and bounds, leaf depth, overflow
//! values (each page's layout was checked when it was read into its frame), no page
//! reachable twice; then every block of the block store checked.

use super::{Inner, Pages, Version};
use crate::page::{Page, Value};
use crate::tree::PageSource;
use crate::Result;

/// What `Db::verify` found.
#[derive(Clone, Debug, Default)]
pub struct VerifyReport {
    /// Pages of the tree.
    pub pages: u64,
    /// Of which leaves.
    pub leaves: u64,
    /// Levels from the root to the leaves.
    pub height: usize,
    /// Entries a reader of the store sees.
    pub entries: u64,
    /// Bytes of their keys.
    pub key_bytes: u64,
    /// Bytes of their values (overflow values at full length).
    pub value_bytes: u64,
    /// Entries in the tree's leaves (as of the last checkpoint).
    pub tree_entries: u64,
    /// Values kept in overflow blocks.
    pub overflow_values: u64,
    /// The blocks holding them.
    pub overflow_blocks: u64,
    /// Live blocks of the block store read and checked.
    pub blocks: u64,
    /// Their bytes on disk.
    pub block_bytes: u64,
    /// Everything wrong, one line each; empty when the store is clean.
    pub problems: Vec<String>,
}

impl VerifyReport {
    /// Whether nothing is wrong.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

impl Inner {
    /// Checks the tree of `version` and every block (see `VerifyReport`).
    pub(super) fn verify(&self, version: &Version) -> Result<VerifyReport> {
        let mut report = VerifyReport::default();
        let mut walk = Walk { pages: &self.pages, report: &mut report, seen: Default::default() };
        walk.page(version.tree.root, None, None, 1);
        match self.pages.blocks().verify() {
            Ok(blocks) => {
                report.blocks = blocks.blocks;
                report.block_bytes = blocks.bytes;
            }
            Err(error) => report.problems.push(format!("block store: {error}")),
        }
        Ok(report)
    }
}

/// The tree walk of `verify`.
pub(super) struct Walk<'a> {
    pub(super) pages: &'a Pages,
    pub(super) report: &'a mut VerifyReport,
    pub(super) seen: std::collections::HashSet<u64>,
}

impl Walk<'_> {
    /// Checks the subtree at `id`, whose keys must lie in `low..high`, at `depth`.
    pub(super) fn page(&mut self, id: u64, low: Option<&[u8]>, high: Option<&[u8]>, depth: usize) {
        if self.report.problems.len() >= 100 {
            return;
        }
        if !self.seen.insert(id) {
            self.report.problems.push(format!("page {id} is reachable twice"));
            return;
        }
        let page = match self.pages.load(id) {
            Ok(page) => page,
            Err(error) => {
                self.report.problems.push(error.to_string());
                return;
            }
        };
        self.report.pages += 1;
        let in_bounds =
            |key: &[u8]| low.is_none_or(|low| key >= low) && high.is_none_or(|high| key < high);
        match &*page {
            Page::Leaf(leaf) => {
                self.report.leaves += 1;
                if self.report.height == 0 {
                    self.report.height = depth;
                } else if self.report.height != depth {
                    self.report.problems.push(format!(
                        "leaf {id} is at depth {depth}, others at {}",
                        self.report.height
                    ));
                }
                for (key, value) in &leaf.entries {
                    if !in_bounds(key) {
                        self.report
                            .problems
                            .push(format!("leaf {id} holds a key outside its range"));
                    }
                    self.report.tree_entries += 1;
                    if let Value::Overflow(overflow) = value {
                        self.report.overflow_values += 1;
                        self.report.overflow_blocks += u64::from(overflow.blocks);
                        if let Err(error) = self.pages.read_overflow(overflow) {
                            self.report
                                .problems
                                .push(format!("the value of a key in leaf {id}: {error}"));
                        }
                    }
                }
            }
            Page::Internal(internal) => {
                let mut bound = low.map(<[u8]>::to_vec);
                let mut child = internal.first_child;
                for (separator, next) in &internal.entries {
                    if !in_bounds(separator) {
                        self.report.problems.push(format!(
                            "internal page {id} holds a separator outside its range"
                        ));
                    }
                    self.page(child, bound.as_deref(), Some(separator), depth + 1);
                    bound = Some(separator.clone());
                    child = *next;
                }
                self.page(child, bound.as_deref(), high, depth + 1);
            }
        }
    }
}
