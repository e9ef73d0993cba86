//! Peer engines behind the YCSB driver's `Store`, built only with the `rust-peers` feature
//! (never by `cargo test`): redb and fjall, from the package registry. Each adapter takes the
//! same memory budget (its cache) and the same durability as tierkv's:
//!
//! | durability | tierkv | redb | fjall |
//! |---|---|---|---|
//! | `sync` | log fdatasync per write (group commit) | `Durability::Immediate` commit per write | `persist(SyncAll)` after each write |
//! | `buffered` | log written, flushed within 20 ms | `Durability::Eventual` (durable at the next immediate commit) | `persist(Buffer)`: written to the OS |
//! | `none` | in memory until a checkpoint | `Durability::None` | nothing asked |
//!
//! - redb: one table of byte keys and values; one write transaction per write, one read
//!   transaction per read or scan; `set_cache_size` takes the budget.
//! - fjall: one partition; the block cache takes the budget; compression left at its default
//!   (lz4), where tierkv's runs use none unless asked.
//!
//! Must never: claim a durability the engine was not asked for.

use std::path::Path;

use tierkv::Durability;

use super::driver::{materialize, Store};

fn text(error: impl std::fmt::Display) -> String {
    error.to_string()
}

const TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("ycsb");

/// redb behind the driver.
pub struct RedbStore {
    db: redb::Database,
    durability: redb::Durability,
}

impl RedbStore {
    /// Creates a database file at `path` with a cache of `cache_bytes`.
    pub fn create(path: &Path, cache_bytes: usize, durability: Durability) -> Result<Self, String> {
        let db = redb::Builder::new().set_cache_size(cache_bytes).create(path).map_err(text)?;
        // The table exists before the first read transaction looks for it.
        let txn = db.begin_write().map_err(text)?;
        txn.open_table(TABLE).map_err(text)?;
        txn.commit().map_err(text)?;
        let durability = match durability {
            Durability::Sync => redb::Durability::Immediate,
            Durability::Buffered => redb::Durability::Eventual,
            Durability::None => redb::Durability::None,
        };
        Ok(RedbStore { db, durability })
    }
}

impl Store for RedbStore {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let txn = self.db.begin_read().map_err(text)?;
        let table = txn.open_table(TABLE).map_err(text)?;
        let value = table.get(key).map_err(text)?;
        Ok(value.map(|value| value.value().to_vec()))
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        let mut txn = self.db.begin_write().map_err(text)?;
        txn.set_durability(self.durability);
        {
            let mut table = txn.open_table(TABLE).map_err(text)?;
            table.insert(key, value).map_err(text)?;
        }
        txn.commit().map_err(text)
    }

    fn scan(&self, from: &[u8], count: usize) -> Result<usize, String> {
        let txn = self.db.begin_read().map_err(text)?;
        let table = txn.open_table(TABLE).map_err(text)?;
        let mut read = 0;
        for entry in table.range(from..).map_err(text)?.take(count) {
            let (key, value) = entry.map_err(text)?;
            materialize(key.value(), value.value());
            read += 1;
        }
        Ok(read)
    }
}

/// fjall behind the driver.
pub struct FjallStore {
    keyspace: fjall::Keyspace,
    partition: fjall::PartitionHandle,
    persist: Option<fjall::PersistMode>,
}

impl FjallStore {
    /// Opens a keyspace in `dir` with a block cache of `cache_bytes`.
    pub fn open(dir: &Path, cache_bytes: usize, durability: Durability) -> Result<Self, String> {
        let keyspace =
            fjall::Config::new(dir).cache_size(cache_bytes as u64).open().map_err(text)?;
        let partition = keyspace
            .open_partition("ycsb", fjall::PartitionCreateOptions::default())
            .map_err(text)?;
        let persist = match durability {
            Durability::Sync => Some(fjall::PersistMode::SyncAll),
            Durability::Buffered => Some(fjall::PersistMode::Buffer),
            Durability::None => None,
        };
        Ok(FjallStore { keyspace, partition, persist })
    }
}

impl Store for FjallStore {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        Ok(self.partition.get(key).map_err(text)?.map(|value| value.to_vec()))
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.partition.insert(key, value).map_err(text)?;
        match self.persist {
            Some(mode) => self.keyspace.persist(mode).map_err(text),
            None => Ok(()),
        }
    }

    fn scan(&self, from: &[u8], count: usize) -> Result<usize, String> {
        let mut read = 0;
        for entry in self.partition.range(from.to_vec()..).take(count) {
            let (key, value) = entry.map_err(text)?;
            materialize(&key, &value);
            read += 1;
        }
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::super::driver::{run_all, YcsbConfig};
    use super::*;

    fn config() -> YcsbConfig {
        YcsbConfig {
            records: 1_000,
            operations: 1_000,
            threads: 2,
            seed: 3,
            ..YcsbConfig::default()
        }
    }

    fn check(store: &dyn Store) {
        let phases = run_all(store, &config()).expect("run");
        assert_eq!(phases.len(), 7);
        for phase in &phases {
            assert_eq!(phase.not_found, 0, "{phase:?}");
        }
    }

    #[test]
    fn redb_runs_every_core_workload() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("ycsb.redb");
        check(&RedbStore::create(&path, 4 << 20, Durability::None).expect("create"));
    }

    #[test]
    fn fjall_runs_every_core_workload() {
        let dir = tempfile::tempdir().expect("dir");
        check(&FjallStore::open(dir.path(), 4 << 20, Durability::None).expect("open"));
    }
}
