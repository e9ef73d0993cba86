//! The errors of the log.

use std::path::PathBuf;

/// Errors of `tierkv-wal`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    /// A storage call failed (the message names the call, the file and the cause).
    #[error(transparent)]
    Io(#[from] tierkv_io::Error),

    /// An earlier write, sync or persist failed (or a background thread of the log stopped),
    /// so what follows it cannot be made durable.
    #[error(
        "the log in {} refuses appends after a failure ({cause}); reopen it to recover \
         every record that was made durable",
        dir.display()
    )]
    Poisoned {
        /// The log directory.
        dir: PathBuf,
        /// The failure that poisoned it.
        cause: String,
    },

    /// A payload over `format::MAX_PAYLOAD_BYTES`.
    #[error("a record of {len} bytes is over the limit of {max} bytes")]
    RecordTooLarge {
        /// The payload's length.
        len: usize,
        /// The limit.
        max: usize,
    },

    /// A segment that cannot be part of the log (bad header, wrong backend) or a record that
    /// breaks the format where the log says it is committed.
    #[error("corrupt log segment {} at offset {offset}: {detail}", file.display())]
    Corruption {
        /// The segment file.
        file: PathBuf,
        /// The byte offset in it.
        offset: u64,
        /// What is wrong.
        detail: String,
    },

    /// Options that cannot work.
    #[error("invalid log options: {0}")]
    InvalidOptions(String),

    /// The log was closed.
    #[error("the log in {} is closed", dir.display())]
    Closed {
        /// The log directory.
        dir: PathBuf,
    },
}
