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

    /// The tier cache could not be made (`Options::tier`).
    #[error(transparent)]
    Tier(#[from] tierkv_tiercache::TierError),

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

    /// No store is there, and the open may not create one (read-only, or
    /// `create_if_missing` off), or the path cannot hold one.
    #[error("no tierkv store at {}: {detail}", path.display())]
    NotFound {
        /// The store's directory.
        path: std::path::PathBuf,
        /// What is missing.
        detail: String,
    },

    /// The directory holds something other than a tierkv store.
    #[error("{} is not a tierkv store: {reason}", path.display())]
    NotAStore {
        /// The directory.
        path: std::path::PathBuf,
        /// What is there instead.
        reason: String,
    },

    /// The store was written by a newer tierkv, in a format this one does not read.
    #[error(
        "{} was written in format version {found}; this tierkv reads versions up to \
         {supported}: open it with a newer tierkv",
        path.display()
    )]
    NewerFormat {
        /// The identity file.
        path: std::path::PathBuf,
        /// The version found.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },

    /// A store of an older format than this build reads (no migration before 1.0).
    #[error(
        "{} belongs to a store of format {found}, which this build no longer reads (it reads \
         format {supported}): dump it with the tierkv that made it, and load the dump into a \
         new store",
        path.display()
    )]
    OlderFormat {
        /// The identity file.
        path: std::path::PathBuf,
        /// The version found.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },

    /// A backup that did not finish: its copy is incomplete and never opens.
    #[error(
        "{} is a backup that did not finish (killed or failed while copying); remove it and \
         take the backup again",
        path.display()
    )]
    IncompleteBackup {
        /// The backup's directory.
        path: std::path::PathBuf,
    },

    /// `error_if_exists` was set and a store is there.
    #[error("a tierkv store already exists at {}", path.display())]
    AlreadyExists {
        /// The store's directory.
        path: std::path::PathBuf,
    },

    /// An option disagrees with what the store was made with.
    #[error(
        "{option} is {given}, but the store was made with {stored}; leave the option out to \
         use the store's, or give the same"
    )]
    OptionMismatch {
        /// The option's name.
        option: &'static str,
        /// What the store has.
        stored: String,
        /// What the open asked for.
        given: String,
    },

    /// A write, checkpoint or compaction of a store opened read-only.
    #[error("the store at {} was opened read-only", path.display())]
    ReadOnly {
        /// The store's directory.
        path: std::path::PathBuf,
    },

    /// The checkpoint thread could not be started.
    #[error("cannot start the checkpoint thread: {0}")]
    Thread(String),

    /// A snapshot (or an iterator of one) needed the values keys had when it was taken,
    /// and they were dropped: the writes since it was taken passed the memory kept for them.
    #[error(
        "the snapshot is too old: the writes since it was taken changed more than the {limit} \
         bytes of older values the store keeps for snapshots; take a new one"
    )]
    SnapshotTooOld {
        /// Bytes of older values the store keeps.
        limit: usize,
    },

    /// A transaction's commit found a key it read or writes changed since it saw it;
    /// nothing was written. Run the transaction again.
    #[error("transaction conflict: key {} changed since the transaction saw it; nothing was written, retry", key.escape_ascii())]
    Conflict {
        /// The first key found changed.
        key: Vec<u8>,
    },

    /// The store was closed.
    #[error("the store is closed")]
    Closed,
}

/// What kind of failure an `Error` is, for callers that act on it rather than print it
/// (the `tierkv` tool's exit codes come from it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Bad input: options, keys, values, batches, or options that disagree with the store's.
    InvalidInput,
    /// No store where one was asked for, something else there, or a store this build cannot
    /// open (a newer format, an unfinished backup).
    NoStore,
    /// The store is open in another handle or process.
    Busy,
    /// Damaged files: a checksum, a page, a log that ends before the checkpoint.
    Corruption,
    /// The operating system refused or failed a call (permissions, a full disk, an I/O
    /// error), or the store refuses writes after such a failure until it is reopened.
    Io,
    /// A write to a store opened read-only.
    ReadOnly,
    /// The store was closed.
    Closed,
    /// A transaction lost to another that changed what it read; retry it.
    Conflict,
}

impl ErrorKind {
    /// A short name: `invalid-input`, `no-store`, `busy`, `corruption`, `io`, `read-only`,
    /// `closed`, `conflict`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid-input",
            ErrorKind::NoStore => "no-store",
            ErrorKind::Busy => "busy",
            ErrorKind::Corruption => "corruption",
            ErrorKind::Io => "io",
            ErrorKind::ReadOnly => "read-only",
            ErrorKind::Closed => "closed",
            ErrorKind::Conflict => "conflict",
        }
    }
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Log(error) => wal_kind(error),
            Error::Blocks(error) => block_kind(error),
            Error::Pages(PagesError::Block { source, .. }) => block_kind(source),
            Error::Pages(_) | Error::Corruption(_) => ErrorKind::Corruption,
            Error::Io(error) => io_kind(error),
            Error::Tier(tierkv_tiercache::TierError::InvalidOptions(_)) => ErrorKind::InvalidInput,
            Error::Tier(tierkv_tiercache::TierError::Region(error)) => io_kind(error),
            Error::Tier(tierkv_tiercache::TierError::Thread(_)) => ErrorKind::Io,
            Error::InvalidOptions(_)
            | Error::EmptyKey
            | Error::KeyTooLarge { .. }
            | Error::ValueTooLarge { .. }
            | Error::BatchTooLarge { .. }
            | Error::OptionMismatch { .. }
            | Error::SnapshotTooOld { .. } => ErrorKind::InvalidInput,
            Error::Poisoned { .. } | Error::Thread(_) => ErrorKind::Io,
            Error::NotADirectory { .. }
            | Error::NotFound { .. }
            | Error::NotAStore { .. }
            | Error::NewerFormat { .. }
            | Error::OlderFormat { .. }
            | Error::IncompleteBackup { .. }
            | Error::AlreadyExists { .. } => ErrorKind::NoStore,
            Error::AlreadyOpen { .. } => ErrorKind::Busy,
            Error::ReadOnly { .. } => ErrorKind::ReadOnly,
            Error::Closed => ErrorKind::Closed,
            Error::Conflict { .. } => ErrorKind::Conflict,
        }
    }
}

fn io_kind(error: &tierkv_io::Error) -> ErrorKind {
    match error {
        tierkv_io::Error::Locked { .. } => ErrorKind::Busy,
        _ => ErrorKind::Io,
    }
}

fn wal_kind(error: &WalError) -> ErrorKind {
    match error {
        WalError::Io(error) => io_kind(error),
        WalError::Corruption { .. } => ErrorKind::Corruption,
        WalError::RecordTooLarge { .. } | WalError::InvalidOptions(_) => ErrorKind::InvalidInput,
        WalError::Closed { .. } => ErrorKind::Closed,
        _ => ErrorKind::Io,
    }
}

fn block_kind(error: &BlockError) -> ErrorKind {
    match error {
        BlockError::Io(error) => io_kind(error),
        BlockError::Corruption { .. } => ErrorKind::Corruption,
        BlockError::BlockTooLarge { .. }
        | BlockError::InvalidGroup(_)
        | BlockError::InvalidOptions(_) => ErrorKind::InvalidInput,
        BlockError::ReadOnly { .. } => ErrorKind::ReadOnly,
        BlockError::Closed { .. } => ErrorKind::Closed,
        _ => ErrorKind::Io,
    }
}

/// The result of an engine operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;
