//! The settings both RocksDB peers get, made from one memory budget in one place, so that
//! Debian's RocksDB (`rocksdb`, through `csrc/peers.c`, the `c-peers` feature) and the one the
//! `rocksdb` crate builds from source (`rocksdb-crate`, `rocksdb_crate.rs`, the
//! `rocksdb-crate` feature) differ only in their release. Built in every configuration, so
//! `cargo test` checks the split of the budget.
//!
//! - Memory: two memtables, each an eighth of the budget between 1 and 64 MiB; an LRU block
//!   cache of what is left (half the budget when the memtables would take it all), holding
//!   the index and filter blocks too so that they count against it.
//! - Tables: block-based, a full 10-bit Bloom filter per file, no compression.
//! - Two background jobs (flushes and compactions). `direct`: O_DIRECT reads, flushes and
//!   compactions.
//! - Durability: `sync` = WAL, `sync=true` per write; `buffered` = WAL, `sync=false` (written
//!   to the OS); `none` = `disableWAL` (durable at the next memtable flush).
//!
//! Every other option is the release's own default, so the two RocksDBs differ there as their
//! releases do.
//!
//! Must never: give one RocksDB a setting the other does not get.

use tierkv::Durability;

/// What a RocksDB peer is opened with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RocksConfig {
    /// The LRU block cache, index and filter blocks included.
    pub block_cache_bytes: usize,
    /// Each memtable (`write_buffer_size`).
    pub write_buffer_bytes: usize,
    /// Memtables at most (`max_write_buffer_number`).
    pub write_buffers: usize,
    /// Bits per key of the full Bloom filter.
    pub bloom_bits_per_key: u32,
    /// `max_background_jobs`.
    pub background_jobs: usize,
    /// O_DIRECT reads, flushes and compactions.
    pub direct: bool,
    /// Write with `sync=true`.
    pub sync: bool,
    /// Write with `disableWAL`.
    pub disable_wal: bool,
}

impl RocksConfig {
    /// The settings for a memory budget of `cache_bytes` (see the module header).
    pub fn for_budget(cache_bytes: usize, durability: Durability, direct: bool) -> RocksConfig {
        let write_buffers = 2;
        let write_buffer_bytes = (cache_bytes / 8).clamp(1 << 20, 64 << 20);
        let memtables = write_buffers * write_buffer_bytes;
        let block_cache_bytes =
            if cache_bytes > memtables { cache_bytes - memtables } else { cache_bytes / 2 };
        RocksConfig {
            block_cache_bytes,
            write_buffer_bytes,
            write_buffers,
            bloom_bits_per_key: 10,
            background_jobs: 2,
            direct,
            sync: durability == Durability::Sync,
            disable_wal: durability == Durability::None,
        }
    }

    /// The settings as the report's `settings` gives them.
    pub fn describe(&self) -> String {
        let mib = |bytes: usize| bytes as f64 / 1048576.0;
        format!(
            "LRU block cache {:.0} MiB with index and filter blocks, {} memtables of {:.0} MiB, \
             bloom {} bits, no compression, {} background jobs, direct I/O {}",
            mib(self.block_cache_bytes),
            self.write_buffers,
            mib(self.write_buffer_bytes),
            self.bloom_bits_per_key,
            self.background_jobs,
            self.direct
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_the_memtables_and_the_block_cache() {
        for budget in [256usize << 20, 3 << 30] {
            let config = RocksConfig::for_budget(budget, Durability::Buffered, false);
            assert_eq!(config.write_buffer_bytes, (budget / 8).min(64 << 20));
            assert_eq!(config.block_cache_bytes + 2 * config.write_buffer_bytes, budget);
            assert!(!config.sync && !config.disable_wal);
        }
        // A budget the two 1 MiB memtables would take: half of it goes to the block cache.
        let small = RocksConfig::for_budget(1 << 20, Durability::Sync, true);
        assert_eq!((small.write_buffer_bytes, small.block_cache_bytes), (1 << 20, 512 << 10));
        assert!(small.sync && !small.disable_wal && small.direct);
        assert!(RocksConfig::for_budget(8 << 20, Durability::None, false).disable_wal);
        let text = RocksConfig::for_budget(256 << 20, Durability::Sync, false).describe();
        assert!(text.starts_with("LRU block cache 192 MiB"), "{text}");
    }
}
