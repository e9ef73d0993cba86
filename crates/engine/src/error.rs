//! The engine's errors.

use tierkv_blockstore::BlockError;
use tierkv_wal::WalError;

use crate::block_pages::PagesError;

/// Errors of `tierkv`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The write-ahead log failed (I/O, a damaged segment, a poisoned log).
    #[error("log: {0}")]
    Log(#[from] WalError),

    /// The block store failed (I/O, a damaged block, a poisoned store).
    #[error("block store: {0}")]
    Blocks(#[from] BlockError),

    /// A page or the meta block could not be read or is damaged.
    #[error("{0}")]
    Pages(#[from] PagesError),

    /// A storage call failed.
    #[error(transparent)]
    Io(#[from] tierkv_io::Error),

    /// The files are not a tierkv store, or disagree with each other.
    #[error("corrupt store: {0}")]
    Corruption(String),

    /// Options that cannot work.
    #[error("invalid options: {0}")]
    InvalidOptions(String),

    /// Keys must hold at least one byte.
    #[error("empty keys are not allowed")]
    EmptyKey,

    /// A key over `MAX_KEY_BYTES`.
    #[error("a key of {len} bytes is over the limit of {max} bytes")]
    KeyTooLarge {
        /// The key's length.
        len: usize,
        /// The limit.
        max: usize,
    },

    /// A value over `MAX_VALUE_BYTES`.
    #[error("a value of {len} bytes is over the limit of {max} bytes")]
    ValueTooLarge {
        /// The value's length.
        len: usize,
        /// The limit.
        max: usize,
    },

    /// A batch whose log record would be over `MAX_BATCH_BYTES`.
    #[error("a batch of {len} bytes is over the limit of {max} bytes")]
    BatchTooLarge {
        /// The record's length.
        len: usize,
        /// The limit.
        max: usize,
    },

    /// An earlier write, sync or checkpoint failed; the store refuses writes until it is
    /// reopened, which recovers every acknowledged write.
    #[error("the store refuses writes after a failure ({cause}); reopen it to recover")]
    Poisoned {
        /// The failure.
        cause: String,
    },

    /// The store's path names something that is not a directory (a file).
    #[error("{} cannot hold a store: it is not a directory", path.display())]
    NotADirectory {
        /// The path.
        path: std::path::PathBuf,
    },

    /// The store is open already, in this process or another: its `LOCK` file is held.
    #[error(
        "the store at {} is already open (its LOCK file is held by this or another \
         process); close it first",
        dir.display()
    )]
    AlreadyOpen {
        /// The store's directory.
        dir: std::path::PathBuf,
    },

    /// The checkpoint thread could not be started.
    #[error("cannot start the checkpoint thread: {0}")]
    Thread(String),

    /// The store was closed.
    #[error("the store is closed")]
    Closed,
}

/// The result of an engine operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;
