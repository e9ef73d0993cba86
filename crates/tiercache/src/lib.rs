//! `tierkv-tiercache`: a secondary block cache on a slower memory tier, with Overhead Bypass.
//!
//! Seed 002 (NVCache, in WiredTiger) keeps file blocks in Optane NVRAM used as volatile memory:
//! larger and cheaper than DRAM, slower, and with writes that hurt concurrent reads far more
//! than on DRAM. It sits beside the block manager: a read that misses the DRAM page cache
//! looks in the tier before the device, and the tier may admit what the device returned; new
//! blocks may be admitted as they are written; freed blocks are invalidated. Its answer to
//! "writes hurt reads" is **Overhead Bypass**: while (inserts + removals) / lookups exceeds
//! 10%, it admits nothing and evicts nothing.
//!
//! This crate is that cache for `tierkv-blockstore`:
//! - **Memory**: a `tierkv_io::MemoryRegion` of `capacity_bytes` (anonymous memory, optionally
//!   bound to a NUMA node, or a file on a DAX mount or a tmpfs, mapped). Blocks keep their
//!   stored form (the block store's header and compressed payload).
//! - **Lookup table**: a fixed array of hash buckets, each a short vector of entries under
//!   its own lock: O(1) lookups, and threads contend only when they hit the same bucket.
//!   A key is a block id *and the version of its content*; a version's content never
//!   changes, so an entry is that content or absent, and a block moved by cleaning (same
//!   version, new place) is still the same entry.
//! - **Space**: best fit over free extents of 256-byte units (`extents`).
//! - **Eviction**: a thread wakes every `eviction_interval` (1 s); once the blocks fill
//!   `full_target` (95%) of the tier, it evicts by recency, with a bonus for frequency, down
//!   to 90%.
//! - **Overhead Bypass**: admissions and eviction passes are skipped while the churn ratio is
//!   over `max_overhead`. The stats count what was skipped and for how long it was in force.
//! - **Slow-tier emulation** (`SlowTier`): an added delay per access and a bandwidth for reads
//!   and for writes on one emulated device; presets `optane` and `cxl`.
//!
//! Protocol (why a reader never sees bytes that are not its block's):
//! 1. An admission allocates an extent, copies the block into it with no lock held (no other
//!    thread can reach the extent), and only then publishes the entry under the bucket lock;
//!    if the key is there already, the extent is given back.
//! 2. A hit copies the block out under the bucket lock.
//! 3. Invalidation and eviction remove the entry under the bucket lock and only then give the
//!    extent back, so no later admission can write into it while a hit copies it.
//!
//! ```
//! use tierkv_tiercache::{AdmitSource, Admission, TierCache, TierKey, TierOptions};
//!
//! # fn main() -> Result<(), tierkv_tiercache::TierError> {
//! let tier = TierCache::open(TierOptions { overhead_bypass: false, ..TierOptions::new(1 << 20) })?;
//! let key = TierKey { id: 7, version: 1 };
//! assert_eq!(tier.admit(key, &[b"header", b"payload"], AdmitSource::Read), Admission::Admitted);
//! let mut block = Vec::new();
//! assert!(tier.get(key, &mut block));
//! assert_eq!(block, b"headerpayload");
//! assert!(tier.invalidate(key));
//! assert!(!tier.get(key, &mut block));
//! # Ok(())
//! # }
//! ```

#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

mod cache;
mod emulate;
mod extents;
mod options;
mod stats;

pub use cache::{Admission, AdmitSource, TierCache, TierKey};
pub use options::{SlowTier, TierOptions, MIN_CAPACITY_BYTES};
pub use stats::TierStats;
pub use tierkv_io::RegionBacking;

/// Why a tier could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TierError {
    /// Options out of range.
    #[error("invalid tier options: {0}")]
    InvalidOptions(String),
    /// Its memory could not be made (mapped, allocated, bound to the node).
    #[error("cannot make the tier's memory: {0}")]
    Region(#[from] tierkv_io::Error),
    /// Its eviction thread could not be started.
    #[error("cannot start the tier's eviction thread: {0}")]
    Thread(String),
}

#[cfg(test)]
mod tests;
