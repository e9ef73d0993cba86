//! How a file is opened: the access method, growth chunk, persistence mode and permissions.
//!
//! Invariant: an `OpenOptions` value is only a request. What is actually in force (for example
//! which pmem mode a file system allowed) is read back from the opened `File`.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::stats::IoStats;

/// Default growth chunk: files grow by 64 MiB at a time, so that size changes (file system
/// metadata updates) are rare. Seed 000: batching fallocate cut file system calls tenfold.
pub const DEFAULT_CHUNK_BYTES: u64 = 64 << 20;

/// Default permission bits of new files: owner read and write only.
pub const DEFAULT_FILE_MODE: u32 = 0o600;

/// How a file's bytes are moved. Chosen at open; fixed for the life of the handle.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum AccessMethod {
    /// `pread`/`pwrite` through the page cache.
    Syscall,
    /// `pread`/`pwrite` with O_DIRECT: buffers, offsets and lengths must be aligned.
    Direct,
    /// A `MAP_SHARED` mapping used for reads and writes, with the lock-free remap protocol;
    /// `pread`/`pwrite` while a resize runs.
    Mmap,
    /// A mapping treated as persistent memory: stores, cache-line flushes and fences
    /// (DAX with `MAP_SYNC` where the file system allows it), or `msync` on ordinary files.
    Pmem,
}

impl AccessMethod {
    /// All methods, in the order tools list them.
    pub const ALL: [AccessMethod; 4] =
        [AccessMethod::Syscall, AccessMethod::Direct, AccessMethod::Mmap, AccessMethod::Pmem];

    /// The lower-case name used on command lines and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            AccessMethod::Syscall => "syscall",
            AccessMethod::Direct => "direct",
            AccessMethod::Mmap => "mmap",
            AccessMethod::Pmem => "pmem",
        }
    }

    /// True for the methods that read and write through a memory mapping.
    pub fn is_mapped(self) -> bool {
        matches!(self, AccessMethod::Mmap | AccessMethod::Pmem)
    }
}

impl fmt::Display for AccessMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AccessMethod {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        AccessMethod::ALL.into_iter().find(|method| method.name() == text).ok_or_else(|| {
            format!("unknown access method {text:?}; expected syscall, direct, mmap or pmem")
        })
    }
}

/// How `persist` makes bytes durable on a `pmem` file. Query it with `File::pmem_mode`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum PmemMode {
    /// The file is on a DAX file system and mapped with `MAP_SHARED_VALIDATE | MAP_SYNC`:
    /// a cache-line flush and a fence make stores durable, with no system call.
    DaxMapSync,
    /// The mapping is ordinary memory (tmpfs, ramfs): `persist` issues the real flush and
    /// fence instructions, but the memory is volatile. Data survives a process crash, not a
    /// power loss. This is the emulation used where no persistent memory exists.
    FlushOnly,
    /// The mapping is backed by the page cache of an ordinary file system: `persist` calls
    /// `msync(MS_SYNC)` on the pages of the range, which is durable.
    Msync,
}

impl PmemMode {
    /// Short lower-case name for tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            PmemMode::DaxMapSync => "dax_map_sync",
            PmemMode::FlushOnly => "flush_only",
            PmemMode::Msync => "msync",
        }
    }

    /// One line that says what durability this mode gives, for tools to print.
    pub fn describe(self) -> &'static str {
        match self {
            PmemMode::DaxMapSync => {
                "DAX + MAP_SYNC: stores made durable by cache-line flush + sfence, no system call"
            }
            PmemMode::FlushOnly => {
                "flush-only on non-DAX memory (EMULATED persistent memory): real clwb/clflushopt \
                 + sfence, but the backing memory is volatile; survives a process crash, not a \
                 power loss"
            }
            PmemMode::Msync => {
                "msync: page-cache mapping of an ordinary file; persist calls msync(MS_SYNC), \
                 durable"
            }
        }
    }
}

impl fmt::Display for PmemMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PmemMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "dax_map_sync" | "dax" => Ok(PmemMode::DaxMapSync),
            "flush_only" | "flush" => Ok(PmemMode::FlushOnly),
            "msync" => Ok(PmemMode::Msync),
            _ => Err(format!("unknown pmem mode {text:?}; expected dax, flush_only or msync")),
        }
    }
}

/// Which pmem mode to use when opening with `AccessMethod::Pmem`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PmemModeRequest {
    /// Try `MAP_SYNC`; if the file system refuses it, use `FlushOnly` on memory file systems
    /// (tmpfs, ramfs) and `Msync` everywhere else.
    #[default]
    Auto,
    /// Use this mode or fail. `DaxMapSync` fails unless the file system supports `MAP_SYNC`.
    /// `FlushOnly` on a disk file gives no durability across power loss; it exists to measure.
    Exactly(PmemMode),
}

/// How a file grows ahead of its writes (see `os/growth.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GrowthStrategy {
    /// Allocate blocks: fallocate, else posix_fallocate, else ftruncate. The default.
    #[default]
    Allocate,
    /// Only extend the size with ftruncate (a sparse hole, blocks allocated on first write):
    /// seed 000's "restricted" configuration, kept to measure what allocation saves.
    Truncate,
}

/// Options for `Storage::open`.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    pub(crate) method: AccessMethod,
    pub(crate) create: bool,
    pub(crate) create_new: bool,
    pub(crate) read_only: bool,
    pub(crate) mode: u32,
    pub(crate) chunk_bytes: u64,
    pub(crate) growth: GrowthStrategy,
    pub(crate) pmem_mode: PmemModeRequest,
    pub(crate) stats: Option<Arc<IoStats>>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions::new(AccessMethod::Syscall)
    }
}

impl OpenOptions {
    /// Options for an existing file, read-write, with the given method.
    pub fn new(method: AccessMethod) -> Self {
        OpenOptions {
            method,
            create: false,
            create_new: false,
            read_only: false,
            mode: DEFAULT_FILE_MODE,
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            growth: GrowthStrategy::Allocate,
            pmem_mode: PmemModeRequest::Auto,
            stats: None,
        }
    }

    /// Creates the file if it is missing.
    pub fn create(mut self, create: bool) -> Self {
        self.create = create;
        self
    }

    /// Creates the file and fails if it exists.
    pub fn create_new(mut self, create_new: bool) -> Self {
        self.create_new = create_new;
        self
    }

    /// Opens for reading only; every modifying call returns `Error::ReadOnlyHandle`.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Permission bits for a newly created file (default 0600).
    pub fn mode(mut self, mode: u32) -> Self {
        self.mode = mode;
        self
    }

    /// Growth chunk: a write past the end grows the file to the next multiple of this many
    /// bytes. 1 grows exactly to the end of each write. Default 64 MiB.
    pub fn chunk_bytes(mut self, chunk_bytes: u64) -> Self {
        self.chunk_bytes = chunk_bytes;
        self
    }

    /// How growth is done: allocate blocks (default) or only extend the size.
    pub fn growth(mut self, growth: GrowthStrategy) -> Self {
        self.growth = growth;
        self
    }

    /// Which pmem mode to use (only with `AccessMethod::Pmem`).
    pub fn pmem_mode(mut self, request: PmemModeRequest) -> Self {
        self.pmem_mode = request;
        self
    }

    /// Counts this file's I/O into a shared set of counters (for example, one per store).
    pub fn stats(mut self, stats: Arc<IoStats>) -> Self {
        self.stats = Some(stats);
        self
    }

    /// The access method requested.
    pub fn method(&self) -> AccessMethod {
        self.method
    }

    pub(crate) fn validate(&self, path: &std::path::Path) -> crate::Result<()> {
        let invalid = |detail: &str| {
            Err(crate::Error::InvalidOptions { path: path.to_path_buf(), detail: detail.into() })
        };
        if self.chunk_bytes == 0 {
            return invalid("chunk_bytes is 0; use 1 for exact growth or a chunk such as 64 MiB");
        }
        if self.read_only && (self.create || self.create_new) {
            return invalid("read_only cannot be combined with create or create_new");
        }
        if self.method != AccessMethod::Pmem && self.pmem_mode != PmemModeRequest::Auto {
            return invalid("pmem_mode applies only to the pmem access method");
        }
        if self.mode & !0o7777 != 0 {
            return invalid("mode has bits outside 0o7777");
        }
        Ok(())
    }
}
