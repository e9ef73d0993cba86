//! The one error type of `tierkv-io`.
//!
//! Every variant names the file and the operation, and where it matters the offset and length,
//! so a message read in a log is enough to know what failed and what to do about it. Expected
//! conditions that callers branch on (a read past the end of a file, a file shrunk behind our
//! back, an injected fault) have their own variants rather than hiding in `Io`.
//!
//! Must never: format with `{:?}` in `Display`, or lose the OS error code of a real failure.

use std::fmt;
use std::path::PathBuf;

/// What the caller was doing when an error happened. Shown in every message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Opening or creating a file.
    Open,
    /// Reading bytes.
    Read,
    /// Writing bytes.
    Write,
    /// Changing the file size exactly (truncate or extend).
    SetLen,
    /// Growing the file ahead of writes (fallocate, posix_fallocate or ftruncate).
    Allocate,
    /// Mapping the file into memory.
    Map,
    /// fdatasync or fsync.
    Sync,
    /// Making a byte range durable (cache-line flush and fence, or msync).
    Persist,
    /// An 8-byte atomic store.
    StoreU64,
    /// Asking the kernel to drop or prefetch cached pages.
    Advise,
    /// Asking the kernel to start writing dirty pages back (no durability).
    Writeback,
    /// Reading file metadata.
    Stat,
    /// Renaming a file.
    Rename,
    /// Removing a file.
    Remove,
    /// Creating a directory.
    CreateDir,
    /// Removing an empty directory.
    RemoveDir,
    /// fsync of a directory, which makes creates and renames in it durable.
    SyncDir,
    /// Listing a directory.
    ListDir,
    /// Taking or releasing an advisory lock.
    Lock,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = match self {
            Op::Open => "open",
            Op::Read => "read",
            Op::Write => "write",
            Op::SetLen => "set the length of",
            Op::Allocate => "grow",
            Op::Map => "map",
            Op::Sync => "sync",
            Op::Persist => "persist",
            Op::StoreU64 => "store 8 bytes atomically in",
            Op::Advise => "advise the kernel about",
            Op::Writeback => "start writing back",
            Op::Stat => "stat",
            Op::Rename => "rename",
            Op::Remove => "remove",
            Op::RemoveDir => "remove the directory",
            Op::CreateDir => "create directory",
            Op::SyncDir => "sync directory",
            Op::ListDir => "list directory",
            Op::Lock => "lock",
        };
        f.write_str(word)
    }
}

/// Which quantity broke an O_DIRECT or atomic-store alignment rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlignedItem {
    /// The memory address of the caller's buffer.
    BufferAddress,
    /// The file offset.
    Offset,
    /// The transfer length.
    Length,
}

impl fmt::Display for AlignedItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AlignedItem::BufferAddress => "buffer address",
            AlignedItem::Offset => "offset",
            AlignedItem::Length => "length",
        })
    }
}

/// The error a simulated fault returns (see `SimFs::set_fault`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultErrno {
    /// EIO: an I/O error.
    Eio,
    /// ENOSPC: no space left on device.
    Enospc,
}

impl FaultErrno {
    /// The raw OS error number this fault stands for.
    pub fn raw_os_error(self) -> i32 {
        match self {
            FaultErrno::Eio => libc::EIO,
            FaultErrno::Enospc => libc::ENOSPC,
        }
    }
}

impl fmt::Display for FaultErrno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultErrno::Eio => "EIO",
            FaultErrno::Enospc => "ENOSPC",
        })
    }
}

/// Errors of the storage access layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The path does not exist.
    #[error("cannot {op} {}: no such file or directory", path.display())]
    NotFound {
        /// What was being done.
        op: Op,
        /// The file or directory.
        path: PathBuf,
    },

    /// The OS refused access (EACCES or EPERM).
    #[error("cannot {op} {}: permission denied; check the file's mode and owner", path.display())]
    PermissionDenied {
        /// What was being done.
        op: Op,
        /// The file or directory.
        path: PathBuf,
    },

    /// Another open handle holds the lock on the file, in this process or another.
    #[error(
        "cannot lock {}: it is locked by another open handle (this process or another one \
         has the store open); close that first",
        path.display()
    )]
    Locked {
        /// The lock file.
        path: PathBuf,
    },

    /// The file lives on a read-only file system (EROFS).
    #[error("cannot {op} {}: the file system is mounted read-only", path.display())]
    ReadOnlyFileSystem {
        /// What was being done.
        op: Op,
        /// The file or directory.
        path: PathBuf,
    },

    /// A modifying operation on a handle opened with `read_only(true)`.
    #[error("cannot {op} {}: the file was opened read-only", path.display())]
    ReadOnlyHandle {
        /// What was being done.
        op: Op,
        /// The file.
        path: PathBuf,
    },

    /// The file system refused O_DIRECT when the file was opened.
    #[error(
        "cannot open {} with O_DIRECT: the {fs_type} file system refuses direct I/O; \
         use the syscall method without `direct`, or the mmap method",
        path.display()
    )]
    DirectIoUnsupported {
        /// The file.
        path: PathBuf,
        /// The file system's type, as named by statfs (for example `tmpfs`, `proc`).
        fs_type: String,
    },

    /// An O_DIRECT transfer or an atomic store broke an alignment rule.
    #[error(
        "cannot {op} {}: {item} {value} is not a multiple of {required} bytes, which {reason} needs",
        path.display()
    )]
    Unaligned {
        /// What was being done.
        op: Op,
        /// The file.
        path: PathBuf,
        /// Which quantity is misaligned.
        item: AlignedItem,
        /// Its value.
        value: u64,
        /// The alignment required.
        required: u64,
        /// Why the alignment is required ("O_DIRECT on this file", "an atomic 8-byte store").
        reason: &'static str,
    },

    /// A read asked for bytes at or past the end of the file.
    #[error(
        "cannot read {len} bytes at offset {offset} of {}: the file is {file_len} bytes long",
        path.display()
    )]
    ReadPastEnd {
        /// The file.
        path: PathBuf,
        /// Start of the requested range.
        offset: u64,
        /// Length of the requested range.
        len: u64,
        /// The file's length when the read came up short.
        file_len: u64,
    },

    /// A zero-length request. tierkv never issues one on purpose, so it is a caller bug.
    #[error("cannot {op} {}: zero-length request at offset {offset}", path.display())]
    ZeroLength {
        /// What was being done.
        op: Op,
        /// The file.
        path: PathBuf,
        /// The offset given.
        offset: u64,
    },

    /// `offset + len` is beyond the largest file offset the OS accepts (2^63 - 1). For
    /// `set_len` and `reserve`, `offset` is the size asked for and `len` is 0.
    #[error("{}", too_large_message(*op, path, *offset, *len, *max))]
    OffsetTooLarge {
        /// What was being done.
        op: Op,
        /// The file.
        path: PathBuf,
        /// The offset given.
        offset: u64,
        /// The length given.
        len: u64,
        /// The largest end offset accepted.
        max: u64,
    },

    /// The file became shorter than tierkv knew it to be, because something outside this
    /// handle truncated it. Detected without SIGBUS; see the `mapped` module.
    #[error(
        "cannot {op} {len} bytes at offset {offset} of {}: the file shrank from {expected_len} to \
         {actual_len} bytes behind tierkv's back (another process or handle truncated it)",
        path.display()
    )]
    FileShrunk {
        /// What was being done.
        op: Op,
        /// The file.
        path: PathBuf,
        /// Start of the range touched.
        offset: u64,
        /// Length of the range touched.
        len: u64,
        /// The length this handle had mapped.
        expected_len: u64,
        /// The length found after the fault.
        actual_len: u64,
    },

    /// The device is full (ENOSPC) or the quota is exhausted (EDQUOT).
    #[error("cannot {op} {}: no space left on the device", path.display())]
    NoSpace {
        /// What was being done.
        op: Op,
        /// The file.
        path: PathBuf,
    },

    /// The file would exceed the file system's maximum file size (EFBIG).
    #[error("cannot {op} {}: the file would exceed the file system's maximum size", path.display())]
    FileTooLarge {
        /// What was being done.
        op: Op,
        /// The file.
        path: PathBuf,
    },

    /// A fault injected by the simulated backend, standing for a real EIO or ENOSPC.
    #[error(
        "cannot {op} {}: injected {errno} at simulated I/O call {call}",
        path.display()
    )]
    Injected {
        /// What was being done.
        op: Op,
        /// The file or directory.
        path: PathBuf,
        /// Which error is simulated.
        errno: FaultErrno,
        /// The simulated call number that failed (1-based).
        call: u64,
    },

    /// Options that cannot work together, or a value out of range.
    #[error("invalid options for {}: {detail}", path.display())]
    InvalidOptions {
        /// The file the options were for.
        path: PathBuf,
        /// What is wrong and how to fix it.
        detail: String,
    },

    /// An access to a `MemoryRegion` outside its bytes: a bug in the caller.
    #[error("cannot {op} {len} bytes at offset {offset} of a memory region of {region_len} bytes")]
    OutOfRegion {
        /// What was being done.
        op: Op,
        /// Start of the range.
        offset: u64,
        /// Length of the range.
        len: u64,
        /// The region's size.
        region_len: u64,
    },

    /// Any other OS error.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: Op,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Maps an OS error number to the most specific variant.
    pub(crate) fn from_errno(op: Op, path: impl Into<PathBuf>, errno: i32) -> Error {
        let path = path.into();
        match errno {
            libc::ENOENT => Error::NotFound { op, path },
            libc::EACCES | libc::EPERM => Error::PermissionDenied { op, path },
            libc::EROFS => Error::ReadOnlyFileSystem { op, path },
            libc::ENOSPC | libc::EDQUOT => Error::NoSpace { op, path },
            libc::EFBIG => Error::FileTooLarge { op, path },
            _ => Error::Io { op, path, source: std::io::Error::from_raw_os_error(errno) },
        }
    }

    pub(crate) fn from_rustix(op: Op, path: impl Into<PathBuf>, errno: rustix::io::Errno) -> Error {
        Error::from_errno(op, path, errno.raw_os_error())
    }

    /// Maps the error of a `std` call on `path` to the most specific variant: by its OS
    /// error number when it has one (as `from_errno`), or else as `Io`.
    pub fn from_std(op: Op, path: impl Into<PathBuf>, error: std::io::Error) -> Error {
        match error.raw_os_error() {
            Some(errno) => Error::from_errno(op, path, errno),
            None => Error::Io { op, path: path.into(), source: error },
        }
    }

    /// True for ENOSPC, whether real or injected.
    pub fn is_no_space(&self) -> bool {
        matches!(self, Error::NoSpace { .. })
            || matches!(self, Error::Injected { errno: FaultErrno::Enospc, .. })
    }

    /// True when the path did not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// The operation that failed.
    pub fn op(&self) -> Option<Op> {
        match self {
            Error::NotFound { op, .. }
            | Error::PermissionDenied { op, .. }
            | Error::ReadOnlyFileSystem { op, .. }
            | Error::ReadOnlyHandle { op, .. }
            | Error::Unaligned { op, .. }
            | Error::ZeroLength { op, .. }
            | Error::OffsetTooLarge { op, .. }
            | Error::FileShrunk { op, .. }
            | Error::NoSpace { op, .. }
            | Error::FileTooLarge { op, .. }
            | Error::Injected { op, .. }
            | Error::OutOfRegion { op, .. }
            | Error::Io { op, .. } => Some(*op),
            Error::DirectIoUnsupported { .. } => Some(Op::Open),
            Error::Locked { .. } => Some(Op::Lock),
            Error::ReadPastEnd { .. } => Some(Op::Read),
            Error::InvalidOptions { .. } => None,
        }
    }
}

fn too_large_message(op: Op, path: &std::path::Path, offset: u64, len: u64, max: u64) -> String {
    if len == 0 {
        format!("cannot {op} {}: size {offset} exceeds the largest file size {max}", path.display())
    } else {
        format!(
            "cannot {op} {}: offset {offset} plus length {len} exceeds the largest file offset {max}",
            path.display()
        )
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
