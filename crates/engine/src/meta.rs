//! The tree's meta block: where the tree starts and what a checkpoint covered. It is block
//! `META_BLOCK` of the block store and is written in the same atomic group as the pages of
//! each checkpoint (`BlockPages::flush_with_meta`), so the root it names and the pages under
//! it are durable together or not at all. The layout is in `docs/format.md` ("Meta block").
//!
//! Must never: decode a meta block that names page 0 as the root or a next page id at or
//! below the root.

use tierkv_blockstore::BlockId;

use crate::page::OverflowRef;

/// The block that holds the meta record; page ids start above it.
pub const META_BLOCK: BlockId = BlockId(0);

/// The first page id.
pub const FIRST_PAGE: u64 = 1;

const MAGIC: [u8; 8] = *b"TKVMETA\x01";
const VERSION: u32 = 2;

/// Bytes of an encoded meta record.
pub const META_BYTES: usize = 72;

/// What a checkpoint leaves behind for the next open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The root page.
    pub root: u64,
    /// The id the next new page gets.
    pub next_page: u64,
    /// Pages larger than this (encoded) split.
    pub max_page_bytes: u32,
    /// The checkpoint's sequence number: every log record up to it is in the tree.
    pub sequence: u64,
    /// Blocks from this id up to `next_page` are not part of the tree: a checkpoint that
    /// had written some of its pages when it stopped. Deleted by the next checkpoint.
    pub orphans_from: u64,
    /// Where the list of retired blocks is kept (u64 ids, little-endian): blocks an older
    /// tree version used, not deleted yet because a reader might still have needed them.
    /// No reader survives a restart, so the next checkpoint deletes them (and the list).
    pub free_list: Option<OverflowRef>,
}

/// Why a meta block does not decode.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid meta block: {0}")]
pub struct MetaError(pub String);

impl Meta {
    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(META_BYTES);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.max_page_bytes.to_le_bytes());
        out.extend_from_slice(&self.root.to_le_bytes());
        out.extend_from_slice(&self.next_page.to_le_bytes());
        out.extend_from_slice(&self.sequence.to_le_bytes());
        out.extend_from_slice(&self.orphans_from.to_le_bytes());
        let list = self.free_list.unwrap_or(OverflowRef { len: 0, first: 0, blocks: 0 });
        out.extend_from_slice(&list.len.to_le_bytes());
        out.extend_from_slice(&list.first.to_le_bytes());
        out.extend_from_slice(&list.blocks.to_le_bytes());
        out.extend_from_slice(&[0u8; 4]);
        debug_assert_eq!(out.len(), META_BYTES);
        out
    }

    /// Decodes and checks a record.
    pub fn decode(bytes: &[u8]) -> Result<Meta, MetaError> {
        if bytes.len() != META_BYTES {
            return Err(MetaError(format!("{} bytes, not {META_BYTES}", bytes.len())));
        }
        if bytes[..8] != MAGIC {
            return Err(MetaError("bad magic".into()));
        }
        let u32_at = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let u64_at = |at: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(word)
        };
        let version = u32_at(8);
        if version != VERSION {
            return Err(MetaError(format!("unknown version {version}")));
        }
        let list = OverflowRef { len: u64_at(48), first: u64_at(56), blocks: u32_at(64) };
        let meta = Meta {
            max_page_bytes: u32_at(12),
            root: u64_at(16),
            next_page: u64_at(24),
            sequence: u64_at(32),
            orphans_from: u64_at(40),
            free_list: (list.blocks != 0).then_some(list),
        };
        if bytes[68..72] != [0u8; 4] {
            return Err(MetaError("reserved bytes are not zero".into()));
        }
        if meta.root < FIRST_PAGE || meta.next_page <= meta.root {
            return Err(MetaError(format!(
                "root {} and next page {} are not a valid pair",
                meta.root, meta.next_page
            )));
        }
        if !(FIRST_PAGE..=meta.next_page).contains(&meta.orphans_from) {
            return Err(MetaError(format!(
                "orphans from {} lie outside the pages 1..{}",
                meta.orphans_from, meta.next_page
            )));
        }
        if let Some(list) = meta.free_list {
            let end = list.first.checked_add(u64::from(list.blocks));
            if list.first < FIRST_PAGE || end.is_none_or(|end| end > meta.next_page) {
                return Err(MetaError(format!(
                    "the free list's {} blocks from {} lie outside the pages 1..{}",
                    list.blocks, list.first, meta.next_page
                )));
            }
        } else if list.len != 0 || list.first != 0 {
            return Err(MetaError("an empty free list with a length or a place".into()));
        }
        if meta.max_page_bytes < 64 {
            return Err(MetaError(format!("page size {} too small", meta.max_page_bytes)));
        }
        Ok(meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_every_damaged_byte_is_caught_or_harmless() {
        let list = OverflowRef { len: 800, first: 80, blocks: 1 };
        for free_list in [None, Some(list)] {
            let meta = Meta {
                root: 17,
                next_page: 90,
                max_page_bytes: 16384,
                sequence: 5,
                orphans_from: 85,
                free_list,
            };
            let bytes = meta.encode();
            assert_eq!(Meta::decode(&bytes), Ok(meta));
            for at in 0..bytes.len() {
                for bit in 0..8 {
                    let mut damaged = bytes.clone();
                    damaged[at] ^= 1 << bit;
                    // A flip in a field may give another valid record (the block checksum
                    // catches those); it never panics, and the magic, version and reserved
                    // bytes are always checked.
                    let result = Meta::decode(&damaged);
                    if !(12..68).contains(&at) {
                        assert!(result.is_err(), "flip at {at} bit {bit} accepted");
                    }
                }
            }
            assert!(Meta::decode(&bytes[..40]).is_err());
            for bad in [
                Meta { root: 0, ..meta },
                Meta { next_page: 17, ..meta },
                Meta { orphans_from: 91, ..meta },
                Meta { free_list: Some(OverflowRef { first: 89, blocks: 2, ..list }), ..meta },
            ] {
                assert!(Meta::decode(&bad.encode()).is_err(), "{bad:?} accepted");
            }
        }
    }
}
