//! Peer engines behind the YCSB driver's `Store`, built only with the `rust-peers` feature
//! (never by `cargo test`): redb 4 and fjall 3, from the package registry (their versions in
//! the report come from `versions`, checked against `Cargo.lock`). Each adapter takes the
//! same memory budget (its cache) and the same durability as tierkv's:
//!
//! | durability | tierkv | redb | fjall |
//! |---|---|---|---|
//! | `sync` | log fdatasync per write (group commit) | `Durability::Immediate` commit per write | `persist(SyncAll)` after each write |
//! | `buffered` | log written, flushed within 20 ms | `Durability::Immediate` commit per write: stronger than asked (see below) | `persist(Buffer)`: written to the OS |
//! | `none` | in memory until a checkpoint | `Durability::None` | nothing asked (each write still reaches the OS: fjall's default) |
//!
//! - redb: one table of byte keys and values; one write transaction per write, one read
//!   transaction per read or scan; `set_cache_size` takes the budget. redb 3 removed
//!   `Durability::Eventual` (a commit written to the file but not synced, which `buffered`
//!   used with redb 2), and redb has no other commit that reaches the OS without an fsync:
//!   `Durability::None` keeps the commit in redb's memory, which a process crash loses. So
//!   `buffered` commits with `Immediate`, never less than asked, and redb's `buffered`
//!   figures are its `sync` ones.
//! - fjall: one keyspace (fjall 2's partition) in one database; the block cache takes the
//!   budget; compression left at its default (none on the first two levels, lz4 below),
//!   where tierkv's runs use none unless asked.
//!
//! Must never: claim a durability the engine was not asked for.

use std::path::Path;

use redb::ReadableDatabase;
use tierkv::Durability;

use super::driver::{materialize, Store};
use super::versions;

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
        // No commit in redb 4 reaches the OS without an fsync (see the module header).
        let durability = match durability {
            Durability::Sync | Durability::Buffered => redb::Durability::Immediate,
            Durability::None => redb::Durability::None,
        };
        Ok(RedbStore { db, durability })
    }

    /// redb's version, as `Cargo.lock` has it.
    pub fn version() -> String {
        format!("redb {}", versions::REDB)
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
        txn.set_durability(self.durability).map_err(text)?;
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
    db: fjall::Database,
    keyspace: fjall::Keyspace,
    persist: Option<fjall::PersistMode>,
}

impl FjallStore {
    /// Opens a database in `dir` with a block cache of `cache_bytes`, and its one keyspace.
    pub fn open(dir: &Path, cache_bytes: usize, durability: Durability) -> Result<Self, String> {
        let db =
            fjall::Database::builder(dir).cache_size(cache_bytes as u64).open().map_err(text)?;
        let keyspace = db.keyspace("ycsb", fjall::KeyspaceCreateOptions::default).map_err(text)?;
        let persist = match durability {
            Durability::Sync => Some(fjall::PersistMode::SyncAll),
            Durability::Buffered => Some(fjall::PersistMode::Buffer),
            Durability::None => None,
        };
        Ok(FjallStore { db, keyspace, persist })
    }

    /// fjall's version, as `Cargo.lock` has it.
    pub fn version() -> String {
        format!("fjall {}", versions::FJALL)
    }
}

impl Store for FjallStore {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        Ok(self.keyspace.get(key).map_err(text)?.map(|value| value.to_vec()))
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.keyspace.insert(key, value).map_err(text)?;
        match self.persist {
            Some(mode) => self.db.persist(mode).map_err(text),
            None => Ok(()),
        }
    }

    fn scan(&self, from: &[u8], count: usize) -> Result<usize, String> {
        let mut read = 0;
        for entry in self.keyspace.range(from..).take(count) {
            let (key, value) = entry.into_inner().map_err(text)?;
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
        let store = RedbStore::create(&path, 4 << 20, Durability::None).expect("create");
        crate::ycsb::driver::round_trip(&store);
        check(&store);
    }

    #[test]
    fn redb_commits_buffered_writes_durably() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("ycsb.redb");
        let store = RedbStore::create(&path, 4 << 20, Durability::Buffered).expect("create");
        assert!(matches!(store.durability, redb::Durability::Immediate));
        crate::ycsb::driver::round_trip(&store);
    }

    #[test]
    fn fjall_runs_every_core_workload() {
        let dir = tempfile::tempdir().expect("dir");
        let store = FjallStore::open(dir.path(), 4 << 20, Durability::Buffered).expect("open");
        crate::ycsb::driver::round_trip(&store);
        check(&store);
    }
}
