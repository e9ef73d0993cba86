//! The tree's meta block: where the tree starts and what a checkpoint covered. It is block
//! `META_BLOCK` of the block store and is written in the same atomic group as the pages of
//! each checkpoint (`BlockPages::flush_with_meta`), so the root it names and the pages under
//! it are durable together or not at all. The layout is in `docs/format.md` ("Meta block").
//!
//! Must never: decode a meta block that names page 0 as the root or a next page id at or
//! below the root.

use tierkv_blockstore::BlockId;

/// The block that holds the meta record; page ids start above it.
pub const META_BLOCK: BlockId = BlockId(0);

/// The first page id.
pub const FIRST_PAGE: u64 = 1;

const MAGIC: [u8; 8] = *b"TKVMETA\x01";
const VERSION: u32 = 1;

/// Bytes of an encoded meta record.
pub const META_BYTES: usize = 48;

/// What a checkpoint leaves behind for the next open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The root page.
    pub root: u64,
    /// The id the next new page gets.
    pub next_page: u64,
    /// Pages larger than this (encoded) split.
    pub max_page_bytes: u32,
    /// The checkpoint's sequence number (the log position it covers, once there is a log).
    pub sequence: u64,
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
        out.extend_from_slice(&[0u8; 8]);
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
        let meta = Meta {
            max_page_bytes: u32_at(12),
            root: u64_at(16),
            next_page: u64_at(24),
            sequence: u64_at(32),
        };
        if bytes[40..48] != [0u8; 8] {
            return Err(MetaError("reserved bytes are not zero".into()));
        }
        if meta.root < FIRST_PAGE || meta.next_page <= meta.root {
            return Err(MetaError(format!(
                "root {} and next page {} are not a valid pair",
                meta.root, meta.next_page
            )));
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
        let meta = Meta { root: 17, next_page: 90, max_page_bytes: 16384, sequence: 5 };
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
                if !(12..40).contains(&at) {
                    assert!(result.is_err(), "flip at {at} bit {bit} accepted");
                }
            }
        }
        assert!(Meta::decode(&bytes[..40]).is_err());
        let bad = Meta { root: 0, ..meta }.encode();
        assert!(Meta::decode(&bad).is_err());
        let bad = Meta { next_page: 17, ..meta }.encode();
        assert!(Meta::decode(&bad).is_err());
    }
}
