//! The errors of the block store.

use std::path::PathBuf;

use crate::BlockId;

/// Errors of `tierkv-blockstore`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlockError {
    /// A storage call failed (the message names the call, the file and the cause).
    #[error(transparent)]
    Io(#[from] tierkv_io::Error),

    /// Stored bytes that break the format: a bad magic, a checksum that does not match, a
    /// length out of range, or a block that is not the one the map points to.
    #[error(
        "corrupt block store file {} at offset {offset}{}: {detail}",
        file.display(),
        block.map(|id| format!(" (block {id})")).unwrap_or_default()
    )]
    Corruption {
        /// The file.
        file: PathBuf,
        /// The byte offset in it.
        offset: u64,
        /// The block being read, where one was.
        block: Option<BlockId>,
        /// What is wrong.
        detail: String,
    },

    /// An earlier write or sync failed, so later groups cannot be made durable.
    #[error(
        "the block store in {} refuses writes after an I/O failure ({cause}); reopen it to \
         recover every group that was made durable",
        dir.display()
    )]
    Poisoned {
        /// The store directory.
        dir: PathBuf,
        /// The failure that poisoned it.
        cause: String,
    },

    /// A block over the store's limit.
    #[error("block {id} has {len} bytes, over the limit of {max} bytes")]
    BlockTooLarge {
        /// The block.
        id: BlockId,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },

    /// A group that cannot be written as asked (empty, a block id twice, an id out of range).
    #[error("invalid write group: {0}")]
    InvalidGroup(String),

    /// Options that cannot work.
    #[error("invalid block store options: {0}")]
    InvalidOptions(String),

    /// A write to a store opened read-only.
    #[error("the block store in {} was opened read-only", dir.display())]
    ReadOnly {
        /// The store directory.
        dir: PathBuf,
    },

    /// The store was closed.
    #[error("the block store in {} is closed", dir.display())]
    Closed {
        /// The store directory.
        dir: PathBuf,
    },
}
