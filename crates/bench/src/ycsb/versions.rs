//! The versions of the YCSB peers that the report records (`EngineRun::version`), and where
//! each comes from. Built in every configuration, so that `cargo test` checks the constants
//! below against `Cargo.lock` even though it never builds the peers themselves.
//!
//! | engine | version from |
//! |---|---|
//! | `rocksdb` (Debian's librocksdb) | the library at run time: the `rocksdb_version` it writes in its OPTIONS file |
//! | `rocksdb-crate` | `ROCKSDB_CRATE` and, for the RocksDB it bundles, the library at run time as above |
//! | `lmdb`, `wiredtiger`, `sqlite` | the library at run time: `mdb_version`, `wiredtiger_version`, `sqlite3_libversion` |
//! | `redb`, `fjall` | `REDB`, `FJALL` |
//!
//! The crates offer no version at run time, so their versions are constants here, and a test
//! fails when `Cargo.lock` moves away from them (after a `cargo update`, say).
//!
//! Must never: report a version that was not read from the library or checked against
//! `Cargo.lock`.

use std::path::Path;

/// The `fjall` crate's version in `Cargo.lock`.
pub const FJALL: &str = "3.1.13";

/// The `redb` crate's version in `Cargo.lock`.
pub const REDB: &str = "4.6.0";

/// The `rocksdb` crate's version in `Cargo.lock` (the `rocksdb-crate` engine).
pub const ROCKSDB_CRATE: &str = "0.25.0";

/// The `librocksdb-sys` crate's version in `Cargo.lock`: after the `+`, the RocksDB release
/// whose sources it bundles and builds.
pub const LIBROCKSDB_SYS: &str = "0.19.0+11.8.1";

/// The RocksDB release `librocksdb-sys` bundles (`LIBROCKSDB_SYS` after the `+`).
pub fn rocksdb_bundled() -> &'static str {
    LIBROCKSDB_SYS.split_once('+').map_or("", |(_, release)| release)
}

/// The RocksDB release that made the database in `dir`: the `rocksdb_version` line of its
/// newest OPTIONS file, which RocksDB writes at every open from its own version macros. None
/// when there is no OPTIONS file or it has no such line.
pub fn rocksdb_version_in(dir: &Path) -> Option<String> {
    // OPTIONS-<file number>; a `.dbtmp` one is being written.
    let (_, newest) = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.to_string();
            let number: u64 = name.strip_prefix("OPTIONS-")?.parse().ok()?;
            Some((number, name))
        })
        .max()?;
    let text = std::fs::read_to_string(dir.join(newest)).ok()?;
    rocksdb_version_of_options(&text)
}

/// The `rocksdb_version` of an OPTIONS file's text.
fn rocksdb_version_of_options(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("rocksdb_version="))
        .map(|version| version.trim().to_string())
        .find(|version| !version.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every version `Cargo.lock` holds for the package `name`.
    fn locked_versions(lock: &str, name: &str) -> Vec<String> {
        let mut versions = Vec::new();
        for package in lock.split("[[package]]").skip(1) {
            let field = |key: &str| {
                package.lines().find_map(|line| {
                    let value = line.strip_prefix(key)?.trim().strip_prefix('=')?.trim();
                    Some(value.trim_matches('"').to_string())
                })
            };
            if field("name").as_deref() == Some(name) {
                versions.extend(field("version"));
            }
        }
        versions
    }

    #[test]
    fn the_crate_versions_are_cargo_locks() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock");
        let lock = std::fs::read_to_string(path).expect("the workspace's Cargo.lock");
        for (name, version) in [
            ("fjall", FJALL),
            ("redb", REDB),
            ("rocksdb", ROCKSDB_CRATE),
            ("librocksdb-sys", LIBROCKSDB_SYS),
        ] {
            assert_eq!(
                locked_versions(&lock, name),
                [version],
                "Cargo.lock's {name} is not the one versions.rs reports: update the constant"
            );
        }
        assert_eq!(rocksdb_bundled().split('.').count(), 3, "{LIBROCKSDB_SYS}");
    }

    #[test]
    fn the_rocksdb_version_comes_from_the_newest_options_file() {
        let dir = tempfile::tempdir().expect("dir");
        assert_eq!(rocksdb_version_in(dir.path()), None);
        let options = |version: &str| {
            format!("[Version]\n  rocksdb_version={version}\n  options_file_version=1.1\n")
        };
        std::fs::write(dir.path().join("OPTIONS-000005"), options("7.8.3")).expect("write");
        std::fs::write(dir.path().join("OPTIONS-000012"), options("11.8.1")).expect("write");
        std::fs::write(dir.path().join("OPTIONS-000009"), options("10.0.0")).expect("write");
        std::fs::write(dir.path().join("OPTIONS-000013.dbtmp"), "partial").expect("write");
        assert_eq!(rocksdb_version_in(dir.path()).as_deref(), Some("11.8.1"));
        assert_eq!(rocksdb_version_of_options("[DBOptions]\n  x=1\n"), None);
    }
}
