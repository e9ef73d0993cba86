//! `EngineArgs`: the engine's settings on the command line (memory budget, read method, log
//! placement and backend, compression, the tier), shared by the key-value subcommands,
//! `bench engine` and `bench ycsb`.

use std::path::PathBuf;

use clap::Args;
use tierkv::{AccessMethod, Backend, Codec, Options, RegionBacking, SlowTier, TierOptions};

use crate::flags::{parse_size, ByteSize, SIZE};

/// How the engine is set up: its memory budget, placement and compression. Shared by the
/// key-value subcommands and `bench engine`.
#[derive(Args, Clone)]
pub struct EngineArgs {
    /// The engine's memory budget: the page cache and the memtables together.
    #[arg(long, default_value = "256m", value_name = SIZE, value_parser = parse_size)]
    pub cache_size: ByteSize,
    /// Read method: syscall, direct or mmap.
    #[arg(long, default_value = "syscall")]
    pub read_method: AccessMethod,
    /// Directory of the write-ahead log (for example on /dev/shm or a DAX mount), for a new
    /// store; a store remembers it, so later commands need not give it (default: `log`
    /// inside the store).
    #[arg(long)]
    pub log_dir: Option<PathBuf>,
    /// How the log persists appends, for a new store: file (fdatasync, group commit) or pmem
    /// (cache-line flushes and a fence on a mapping); remembered like --log-dir (default:
    /// file).
    #[arg(long)]
    pub log_backend: Option<Backend>,
    /// The largest page of a new store (a power of two from 1k to 64k; default 16k). A
    /// store keeps the size it was made with: a different one given later is refused.
    #[arg(long, value_name = SIZE, value_parser = parse_size)]
    pub page_size: Option<ByteSize>,
    /// Page compression on disk: none, lz4 or zstd.
    #[arg(long, default_value = "none")]
    pub compression: Codec,
    /// Size of a tier cache (seed 002's NVCache) on a memory tier, besides --cache-size;
    /// 0: none.
    #[arg(long, default_value = "0", value_name = SIZE, value_parser = parse_size)]
    pub tier_size: ByteSize,
    /// Where the tier's memory comes from: `anonymous`, or a path (a file to create, or a
    /// directory such as /dev/shm or a DAX mount to create it in; unlinked once mapped).
    #[arg(long, default_value = "anonymous")]
    pub tier_backing: String,
    /// Bind the tier's memory to this NUMA node (a CXL or KMEM-DAX node).
    #[arg(long)]
    pub tier_numa_node: Option<u32>,
    /// Overhead Bypass threshold: admissions and evictions pause while (inserts + removals)
    /// / lookups is above it. 0 turns the bypass off.
    #[arg(long, default_value_t = 0.10)]
    pub tier_max_overhead: f64,
    /// Emulate a slow tier: optane, cxl, or read_ns=N,write_ns=N,read_mbps=N,write_mbps=N.
    #[arg(long, value_parser = SlowTier::parse)]
    pub tier_emulate: Option<SlowTier>,
    /// Admit each block a device read returns (cache_on_read, NVCache's read path).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub tier_cache_on_read: bool,
    /// Admit the pages the page cache evicts clean (cache_on_evict, a demotion: the tier
    /// holds what the page cache does not).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub tier_cache_on_evict: bool,
    /// A tier hit moves the block out (exclusive: the page cache keeps it, and
    /// --tier-cache-on-evict brings it back); for a tier without Overhead Bypass.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub tier_exclusive: bool,
    /// Admit the pages checkpoints write (cache_on_checkpoint).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub tier_cache_on_checkpoint: bool,
    /// Admit blocks written outside checkpoints (cache_on_write).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub tier_cache_on_write: bool,
}

impl EngineArgs {
    /// `options` with these settings.
    pub fn apply(&self, options: Options) -> Options {
        Options {
            // A budget past the address space is no budget: the most there is.
            cache_size: usize::try_from(self.cache_size.bytes()).unwrap_or(usize::MAX),
            read_method: self.read_method,
            log_dir: self.log_dir.clone(),
            log_backend: self.log_backend,
            compression: self.compression,
            max_page_bytes: self
                .page_size
                .map(|size| usize::try_from(size.bytes()).unwrap_or(usize::MAX))
                .or(options.max_page_bytes),
            tier: self.tier(),
            ..options
        }
    }

    /// The tier's options, when --tier-size asks for one.
    pub fn tier(&self) -> Option<TierOptions> {
        if self.tier_size.bytes() == 0 {
            return None;
        }
        let backing = match self.tier_backing.as_str() {
            "anonymous" => RegionBacking::Anonymous,
            path => RegionBacking::File(path.into()),
        };
        Some(TierOptions {
            backing,
            numa_node: self.tier_numa_node,
            overhead_bypass: self.tier_max_overhead > 0.0,
            max_overhead: if self.tier_max_overhead > 0.0 { self.tier_max_overhead } else { 0.10 },
            cache_on_evict: self.tier_cache_on_evict,
            exclusive: self.tier_exclusive,
            cache_on_read: self.tier_cache_on_read,
            cache_on_checkpoint: self.tier_cache_on_checkpoint,
            cache_on_write: self.tier_cache_on_write,
            emulation: self.tier_emulate.clone(),
            ..TierOptions::new(self.tier_size.bytes())
        })
    }
}
