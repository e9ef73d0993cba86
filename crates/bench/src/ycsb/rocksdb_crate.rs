//! RocksDB at a current release behind the YCSB driver's `Store`: the `rocksdb` crate, which
//! builds the RocksDB sources bundled in `librocksdb-sys` into this binary (no compression
//! library: the adapter turns compression off). Built only with the `rocksdb-crate` feature,
//! never by `cargo test`: the build needs clang and libclang (`scripts/install-tools.sh`) and
//! compiles RocksDB's C++ for a long while.
//!
//! It runs beside Debian's RocksDB 7.8 (`c_peers::RocksStore`) under the engine name
//! `rocksdb-crate`, with the same settings (`rocksdb_config::RocksConfig`: block cache,
//! memtables, bloom filter, no compression, background jobs, direct I/O, and the durability
//! of each write), so the two differ only in their release. Reads, writes and scans are the
//! shim's: a `get` that copies the value out, a `put` with the shared write options, and an
//! iterator from a seek, each entry copied out by `materialize`.
//!
//! Must never: claim a durability the engine was not asked for.

use std::path::Path;

use tierkv::Durability;

use super::driver::{materialize, Store};
use super::rocksdb_config::RocksConfig;
use super::versions;

fn text(error: rocksdb::Error) -> String {
    error.to_string()
}

/// The `rocksdb` crate's RocksDB behind the driver.
pub struct RocksCrateStore {
    db: rocksdb::DB,
    write: rocksdb::WriteOptions,
    read: rocksdb::ReadOptions,
    version: String,
}

impl RocksCrateStore {
    /// Opens (creating) a database in `dir` with the settings `RocksConfig::for_budget`
    /// makes.
    pub fn open(
        dir: &Path,
        cache_bytes: usize,
        durability: Durability,
        direct: bool,
    ) -> Result<Self, String> {
        let config = RocksConfig::for_budget(cache_bytes, durability, direct);
        Self::open_with(dir, &config)
    }

    /// Opens (creating) a database in `dir` with `config`.
    pub fn open_with(dir: &Path, config: &RocksConfig) -> Result<Self, String> {
        let as_c_int = |n: usize| i32::try_from(n).map_err(|e| e.to_string());
        let mut options = rocksdb::Options::default();
        options.create_if_missing(true);
        options.set_write_buffer_size(config.write_buffer_bytes);
        options.set_max_write_buffer_number(as_c_int(config.write_buffers)?);
        options.set_compression_type(rocksdb::DBCompressionType::None);
        options.set_max_background_jobs(as_c_int(config.background_jobs)?);
        options.set_use_direct_reads(config.direct);
        options.set_use_direct_io_for_flush_and_compaction(config.direct);
        let cache = rocksdb::Cache::new_lru_cache(config.block_cache_bytes);
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_cache_index_and_filter_blocks(true);
        // A full filter (not the old block-based one), as the shim's bloom_full.
        table.set_bloom_filter(f64::from(config.bloom_bits_per_key), false);
        options.set_block_based_table_factory(&table);
        let mut write = rocksdb::WriteOptions::default();
        write.set_sync(config.sync);
        write.disable_wal(config.disable_wal);
        let db = rocksdb::DB::open(&options, dir).map_err(text)?;
        let version = format!(
            "RocksDB {} (rocksdb crate {}, built from source)",
            versions::rocksdb_version_in(dir).unwrap_or_else(|| "of unknown release".into()),
            versions::ROCKSDB_CRATE
        );
        // The crate keeps the cache and the table options alive as long as the database.
        Ok(RocksCrateStore { db, write, read: rocksdb::ReadOptions::default(), version })
    }

    /// The RocksDB release that runs, as the library wrote it in its OPTIONS file, and the
    /// crate's version.
    pub fn version(&self) -> &str {
        &self.version
    }
}

impl Store for RocksCrateStore {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.db.get_opt(key, &self.read).map_err(text)
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.db.put_opt(key, value, &self.write).map_err(text)
    }

    fn scan(&self, from: &[u8], count: usize) -> Result<usize, String> {
        let mut iterator = self.db.raw_iterator_opt(rocksdb::ReadOptions::default());
        let mut read = 0;
        iterator.seek(from);
        while read < count && iterator.valid() {
            if let (Some(key), Some(value)) = (iterator.key(), iterator.value()) {
                materialize(key, value);
                read += 1;
            }
            iterator.next();
        }
        iterator.status().map_err(text)?;
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::super::driver::{round_trip, run_all, YcsbConfig};
    use super::*;

    #[test]
    fn rocksdb_crate_runs_every_core_workload() {
        let dir = tempfile::tempdir().expect("dir");
        let store =
            RocksCrateStore::open(dir.path(), 8 << 20, Durability::None, false).expect("open");
        round_trip(&store);
        let config = YcsbConfig {
            records: 1_000,
            operations: 1_000,
            threads: 2,
            seed: 3,
            ..YcsbConfig::default()
        };
        let phases = run_all(&store, &config).expect("run");
        assert_eq!(phases.len(), 7);
        for phase in &phases {
            assert_eq!(phase.not_found, 0, "{phase:?}");
        }
    }

    #[test]
    fn the_running_rocksdb_is_the_one_librocksdb_sys_bundles() {
        let dir = tempfile::tempdir().expect("dir");
        let store =
            RocksCrateStore::open(dir.path(), 8 << 20, Durability::None, false).expect("open");
        let release = versions::rocksdb_version_in(dir.path()).expect("an OPTIONS file");
        assert_eq!(release, versions::rocksdb_bundled());
        assert!(store.version().contains(versions::ROCKSDB_CRATE), "{}", store.version());
    }
}
