//! `tierkv`: the embedded, ordered key-value store that joins the layers below it (issue 6).
//!
//! **Being built.** The engine will keep a B+tree whose pages are decoded in a DRAM page
//! cache, make writes durable through `tierkv-wal`, and write dirty pages back as new blocks
//! in atomic groups of `tierkv-blockstore`. What exists so far:
//!
//! - [`page`]: the B+tree page format (leaf and internal pages, overflow references), with
//!   a decoder that checks every length, order and limit, so that a damaged page is an error
//!   and never a panic or garbage; and the page-level steps of tree changes: splitting a
//!   leaf by size with the shortest separator, splitting an internal page, inserting a split
//!   child's separator, and merging siblings.
//! - [`cache`]: the DRAM page cache: a byte budget, S3-FIFO eviction (scan-resistant),
//!   pages that are dirty or in use never evicted, shards with a lock each.
//! - [`tree`]: the B+tree's algorithms (lookup, insert with splits up to the root, delete
//!   with merges of underfull siblings, ordered scan) over any `PageStore`, single-threaded and without versions yet.
//! - [`block_pages`]: `BlockPages`, the tree's pages in the page cache and stored one per
//!   block of a `tierkv-blockstore` store; `flush` writes every changed page in one atomic
//!   group, and `flush_with_meta` adds the [`meta`] record (root, next page id) to it;
//!   values too large for a leaf go to overflow blocks (tested up to 64 MiB).
//!
//! There is no `Db` yet: nothing here stores data on its own.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![warn(missing_docs)]

pub mod block_pages;
pub mod cache;
pub mod meta;
pub mod page;
pub mod tree;
