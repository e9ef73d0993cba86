//! The peers of the YCSB driver that are C libraries, built only with the `c-peers` feature
//! (never by `cargo test`): RocksDB, LMDB and WiredTiger through the shim in
//! `csrc/peers.c`, linked against Debian's librocksdb-dev, liblmdb-dev and libwiredtiger-dev
//! (`scripts/install-tools.sh`), and SQLite through rusqlite on the system's libsqlite3.
//!
//! Every adapter gets the same memory budget (`cache_bytes`) and the same durability:
//!
//! | durability | RocksDB | LMDB | WiredTiger | SQLite (WAL mode) |
//! |---|---|---|---|---|
//! | `sync` | WAL, `sync=true` per write | fsync at each commit | log on, `transaction_sync=(enabled=true,method=fsync)` | `synchronous=FULL` |
//! | `buffered` | WAL, `sync=false` (written to the OS) | `MDB_NOSYNC` | log on, written at commit, not synced | `synchronous=NORMAL` (WAL written, not synced) |
//! | `none` | `disableWAL` (durable at the next flush) | `MDB_NOSYNC` + `MDB_WRITEMAP` | no log (durable at the next checkpoint) | `synchronous=OFF` |
//!
//! Memory and I/O, per engine:
//! - RocksDB 7.8: the settings of `rocksdb_config::RocksConfig`, which the RocksDB the
//!   `rocksdb` crate builds (`rocksdb_crate`) gets too: an LRU block cache of the budget less
//!   its two memtables (each an eighth of the budget, at most 64 MiB), index and filter blocks
//!   kept in the cache so they count against it, 10-bit bloom filters, no compression, two
//!   background jobs. `direct` turns on O_DIRECT reads, flushes and compactions.
//! - LMDB 0.9: no cache of its own; it reads through its mapping, so the OS page cache is its
//!   cache and only a memory cgroup bounds it. One write transaction per write (LMDB has a
//!   single writer), one read transaction per read or scan, read-ahead off.
//! - WiredTiger 3.2: `cache_size` is the budget; checkpoints every 60 s; no block
//!   compression (its default). Sessions are single-threaded, so the adapter keeps a pool
//!   and each operation borrows one. `direct` sets `direct_io=[data]`.
//! - SQLite 3: one table `kv(key BLOB PRIMARY KEY, value BLOB) WITHOUT ROWID`, WAL journal,
//!   no mmap. A connection is single-threaded, so the adapter keeps a pool of `connections`,
//!   each with a page cache of the budget divided among them. No direct I/O.
//!
//! Each adapter's `version` is the library's own, read at run time: RocksDB's from the OPTIONS
//! file it writes (`versions::rocksdb_version_in`), LMDB's `mdb_version`, WiredTiger's
//! `wiredtiger_version`, SQLite's `sqlite3_libversion`.
//!
//! Must never: claim a durability the engine was not asked for, or let a C pointer outlive
//! the handle that owns it.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Mutex;

use tierkv::Durability;

use super::driver::{materialize, Store};
use super::rocksdb_config::RocksConfig;
use super::versions;

mod ffi {
    use std::ffi::{c_char, c_int, c_void};

    /// The shim's `visit_fn`: one scanned entry, valid during the call.
    pub type Visit = extern "C" fn(*mut c_void, *const u8, usize, *const u8, usize);

    extern "C" {
        pub fn peer_free(pointer: *mut c_void);

        pub fn peer_rocksdb_open(
            dir: *const c_char,
            block_cache_bytes: usize,
            write_buffer_bytes: usize,
            write_buffers: c_int,
            bloom_bits: c_int,
            background_jobs: c_int,
            direct: c_int,
            sync: c_int,
            disable_wal: c_int,
            err: *mut *mut c_char,
        ) -> *mut c_void;
        pub fn peer_rocksdb_put(
            db: *mut c_void,
            key: *const u8,
            key_len: usize,
            value: *const u8,
            value_len: usize,
            err: *mut *mut c_char,
        ) -> c_int;
        pub fn peer_rocksdb_get(
            db: *mut c_void,
            key: *const u8,
            key_len: usize,
            value: *mut *mut u8,
            value_len: *mut usize,
            err: *mut *mut c_char,
        ) -> c_int;
        pub fn peer_rocksdb_scan(
            db: *mut c_void,
            key: *const u8,
            key_len: usize,
            count: usize,
            visit: Visit,
            context: *mut c_void,
            read: *mut usize,
            err: *mut *mut c_char,
        ) -> c_int;
        pub fn peer_rocksdb_close(db: *mut c_void);

        pub fn peer_lmdb_open(
            dir: *const c_char,
            map_bytes: usize,
            durability: c_int,
            max_readers: c_int,
            err: *mut *mut c_char,
        ) -> *mut c_void;
        pub fn peer_lmdb_put(
            db: *mut c_void,
            key: *const u8,
            key_len: usize,
            value: *const u8,
            value_len: usize,
            err: *mut *mut c_char,
        ) -> c_int;
        pub fn peer_lmdb_get(
            db: *mut c_void,
            key: *const u8,
            key_len: usize,
            value: *mut *mut u8,
            value_len: *mut usize,
            err: *mut *mut c_char,
        ) -> c_int;
        pub fn peer_lmdb_scan(
            db: *mut c_void,
            key: *const u8,
            key_len: usize,
            count: usize,
            visit: Visit,
            context: *mut c_void,
            read: *mut usize,
            err: *mut *mut c_char,
        ) -> c_int;
        pub fn peer_lmdb_close(db: *mut c_void);

        pub fn peer_wt_open(
            dir: *const c_char,
            cache_bytes: usize,
            durability: c_int,
            direct: c_int,
            sessions: c_int,
            err: *mut *mut c_char,
        ) -> *mut c_void;
        pub fn peer_wt_session(conn: *mut c_void, err: *mut *mut c_char) -> *mut c_void;
        pub fn peer_wt_put(
            session: *mut c_void,
            key: *const u8,
            key_len: usize,
            value: *const u8,
            value_len: usize,
            err: *mut *mut c_char,
        ) -> c_int;
        pub fn peer_wt_get(
            session: *mut c_void,
            key: *const u8,
            key_len: usize,
            value: *mut *mut u8,
            value_len: *mut usize,
            err: *mut *mut c_char,
        ) -> c_int;
        pub fn peer_wt_scan(
            session: *mut c_void,
            key: *const u8,
            key_len: usize,
            count: usize,
            visit: Visit,
            context: *mut c_void,
            read: *mut usize,
            err: *mut *mut c_char,
        ) -> c_int;
        pub fn peer_wt_session_close(session: *mut c_void);
        pub fn peer_wt_close(conn: *mut c_void, err: *mut *mut c_char) -> c_int;

        // The libraries' own, called directly: each returns a static string and sets the
        // numbers.
        pub fn mdb_version(
            major: *mut c_int,
            minor: *mut c_int,
            patch: *mut c_int,
        ) -> *const c_char;
        pub fn wiredtiger_version(
            major: *mut c_int,
            minor: *mut c_int,
            patch: *mut c_int,
        ) -> *const c_char;
    }
}

/// The shim's durability codes.
fn durability_code(durability: Durability) -> c_int {
    match durability {
        Durability::Sync => 0,
        Durability::Buffered => 1,
        Durability::None => 2,
    }
}

fn c_path(dir: &Path) -> Result<CString, String> {
    CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| format!("{} has a NUL byte", dir.display()))
}

/// Takes the shim's error message (and frees it).
fn take_error(err: *mut c_char) -> String {
    if err.is_null() {
        return "unknown error".into();
    }
    // SAFETY: the shim hands out NUL-terminated strings from strdup, freed here once.
    let text = unsafe { CStr::from_ptr(err) }.to_string_lossy().into_owned();
    // SAFETY: allocated by the shim's malloc, not used after this.
    unsafe { ffi::peer_free(err.cast()) };
    text
}

/// A status from the shim: 0 (or 1, "found") is success, -1 an error in `err`.
fn check(rc: c_int, err: *mut c_char) -> Result<c_int, String> {
    if rc < 0 {
        Err(take_error(err))
    } else {
        Ok(rc)
    }
}

/// A shim `get`: 1 with a malloc'ed copy of the value, 0 when absent, -1 on an error.
type GetFn = unsafe extern "C" fn(
    *mut c_void,
    *const u8,
    usize,
    *mut *mut u8,
    *mut usize,
    *mut *mut c_char,
) -> c_int;

/// A shim `put`.
type PutFn = unsafe extern "C" fn(
    *mut c_void,
    *const u8,
    usize,
    *const u8,
    usize,
    *mut *mut c_char,
) -> c_int;

/// A shim `scan`.
type ScanFn = unsafe extern "C" fn(
    *mut c_void,
    *const u8,
    usize,
    usize,
    ffi::Visit,
    *mut c_void,
    *mut usize,
    *mut *mut c_char,
) -> c_int;

/// Reads `key` through `get` on `handle` (open, and used by this thread alone when the
/// engine's handles are single-threaded) and copies the value out.
fn c_read(handle: *mut c_void, get: GetFn, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut value: *mut u8 = std::ptr::null_mut();
    let mut len = 0usize;
    let mut err = std::ptr::null_mut();
    // SAFETY: the handle is open (the caller's contract); the key outlives the call and the
    // out pointers are ours.
    let rc = unsafe { get(handle, key.as_ptr(), key.len(), &mut value, &mut len, &mut err) };
    if check(rc, err)? == 0 {
        return Ok(None);
    }
    // SAFETY: on "found" the shim set `value` to a malloc'ed copy of `len` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(value, len) }.to_vec();
    // SAFETY: that copy is ours and freed once.
    unsafe { ffi::peer_free(value.cast()) };
    Ok(Some(bytes))
}

/// Writes `key` = `value` through `put` on `handle` (as `c_read`).
fn c_write(handle: *mut c_void, put: PutFn, key: &[u8], value: &[u8]) -> Result<(), String> {
    let mut err = std::ptr::null_mut();
    // SAFETY: as in `c_read`; the shim copies key and value before it returns.
    let rc = unsafe { put(handle, key.as_ptr(), key.len(), value.as_ptr(), value.len(), &mut err) };
    check(rc, err).map(drop)
}

/// Copies one scanned entry out, as `materialize` does for every adapter.
extern "C" fn visit_entry(
    _context: *mut c_void,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
) {
    // SAFETY: the shim passes the engine's bytes, valid for the call.
    let (key, value) = unsafe {
        (std::slice::from_raw_parts(key, key_len), std::slice::from_raw_parts(value, value_len))
    };
    materialize(key, value);
}

/// Scans up to `count` entries from `from` through `scan` on `handle` (as `c_read`), each
/// copied out by `visit_entry`; returns how many it read.
fn c_scan(handle: *mut c_void, scan: ScanFn, from: &[u8], count: usize) -> Result<usize, String> {
    let mut read = 0usize;
    let mut err = std::ptr::null_mut();
    let context = std::ptr::null_mut();
    // SAFETY: as in `c_read`; `visit_entry` only reads the bytes it is passed.
    let rc = unsafe {
        scan(handle, from.as_ptr(), from.len(), count, visit_entry, context, &mut read, &mut err)
    };
    check(rc, err)?;
    Ok(read)
}

/// A library's version from its `(major, minor, patch)` function.
type VersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int, *mut c_int) -> *const c_char;

/// `major.minor.patch` as `version` reports it.
fn library_version(version: VersionFn) -> String {
    let (mut major, mut minor, mut patch) = (0, 0, 0);
    // SAFETY: the three out pointers are ours; the returned static string is not used.
    unsafe { version(&mut major, &mut minor, &mut patch) };
    format!("{major}.{minor}.{patch}")
}

/// RocksDB behind the driver.
pub struct RocksStore {
    db: *mut c_void,
    version: String,
}

// SAFETY: a rocksdb_t and the read and write options the shim keeps beside it are safe to
// use from many threads at once (RocksDB's documented thread safety); nothing else is shared.
unsafe impl Send for RocksStore {}
// SAFETY: as above.
unsafe impl Sync for RocksStore {}

impl RocksStore {
    /// Opens (creating) a database in `dir` with the settings `RocksConfig::for_budget`
    /// makes.
    pub fn open(
        dir: &Path,
        cache_bytes: usize,
        durability: Durability,
        direct: bool,
    ) -> Result<Self, String> {
        Self::open_with(dir, &RocksConfig::for_budget(cache_bytes, durability, direct))
    }

    /// Opens (creating) a database in `dir` with `config`.
    pub fn open_with(dir: &Path, config: &RocksConfig) -> Result<Self, String> {
        let path = c_path(dir)?;
        let as_c_int = |n: usize| c_int::try_from(n).map_err(|e| e.to_string());
        let mut err = std::ptr::null_mut();
        // SAFETY: a valid C string and an out pointer; the shim copies what it keeps.
        let db = unsafe {
            ffi::peer_rocksdb_open(
                path.as_ptr(),
                config.block_cache_bytes,
                config.write_buffer_bytes,
                as_c_int(config.write_buffers)?,
                as_c_int(config.bloom_bits_per_key as usize)?,
                as_c_int(config.background_jobs)?,
                c_int::from(config.direct),
                c_int::from(config.sync),
                c_int::from(config.disable_wal),
                &mut err,
            )
        };
        if db.is_null() {
            return Err(take_error(err));
        }
        let version = format!(
            "RocksDB {} (Debian's librocksdb)",
            versions::rocksdb_version_in(dir).unwrap_or_else(|| "of unknown release".into())
        );
        Ok(RocksStore { db, version })
    }

    /// The RocksDB release that runs, as the library wrote it in its OPTIONS file.
    pub fn version(&self) -> &str {
        &self.version
    }
}

impl Drop for RocksStore {
    fn drop(&mut self) {
        // SAFETY: opened by the shim, closed once, never used after.
        unsafe { ffi::peer_rocksdb_close(self.db) }
    }
}

impl Store for RocksStore {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        c_read(self.db, ffi::peer_rocksdb_get, key)
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        c_write(self.db, ffi::peer_rocksdb_put, key, value)
    }

    fn scan(&self, from: &[u8], count: usize) -> Result<usize, String> {
        c_scan(self.db, ffi::peer_rocksdb_scan, from, count)
    }
}

/// LMDB behind the driver.
pub struct LmdbStore {
    env: *mut c_void,
}

// SAFETY: an MDB_env opened with MDB_NOTLS is used from many threads, each operation in its
// own transaction begun and ended on one thread; LMDB serialises writers itself.
unsafe impl Send for LmdbStore {}
// SAFETY: as above.
unsafe impl Sync for LmdbStore {}

impl LmdbStore {
    /// Opens (creating) an environment in `dir` with a mapping of `map_bytes` (reserved, not
    /// allocated) and room for `readers` concurrent readers.
    pub fn open(
        dir: &Path,
        map_bytes: usize,
        durability: Durability,
        readers: usize,
    ) -> Result<Self, String> {
        let path = c_path(dir)?;
        let readers = c_int::try_from(readers.max(1) + 8).map_err(|e| e.to_string())?;
        let mut err = std::ptr::null_mut();
        // SAFETY: a valid C string and an out pointer.
        let env = unsafe {
            ffi::peer_lmdb_open(
                path.as_ptr(),
                map_bytes,
                durability_code(durability),
                readers,
                &mut err,
            )
        };
        if env.is_null() {
            return Err(take_error(err));
        }
        Ok(LmdbStore { env })
    }

    /// The linked LMDB's version (`mdb_version`).
    pub fn version() -> String {
        format!("LMDB {}", library_version(ffi::mdb_version))
    }
}

impl Drop for LmdbStore {
    fn drop(&mut self) {
        // SAFETY: opened by the shim, closed once, after every transaction ended.
        unsafe { ffi::peer_lmdb_close(self.env) }
    }
}

impl Store for LmdbStore {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        c_read(self.env, ffi::peer_lmdb_get, key)
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        c_write(self.env, ffi::peer_lmdb_put, key, value)
    }

    fn scan(&self, from: &[u8], count: usize) -> Result<usize, String> {
        c_scan(self.env, ffi::peer_lmdb_scan, from, count)
    }
}

/// A WiredTiger session and its cursor, used by one thread at a time.
struct WtSession(*mut c_void);

// SAFETY: a WT_SESSION may move between threads as long as one thread uses it at a time;
// the pool hands each to one operation.
unsafe impl Send for WtSession {}

/// WiredTiger behind the driver.
pub struct WiredTigerStore {
    conn: *mut c_void,
    sessions: Mutex<Vec<WtSession>>,
}

// SAFETY: a WT_CONNECTION's methods are thread-safe; sessions are only reached through the
// pool's lock.
unsafe impl Send for WiredTigerStore {}
// SAFETY: as above.
unsafe impl Sync for WiredTigerStore {}

impl WiredTigerStore {
    /// Opens (creating) a database in `dir` for up to `threads` client threads.
    pub fn open(
        dir: &Path,
        cache_bytes: usize,
        durability: Durability,
        direct: bool,
        threads: usize,
    ) -> Result<Self, String> {
        let path = c_path(dir)?;
        let sessions = c_int::try_from(threads.max(1)).map_err(|e| e.to_string())?;
        let mut err = std::ptr::null_mut();
        // SAFETY: a valid C string and an out pointer.
        let conn = unsafe {
            ffi::peer_wt_open(
                path.as_ptr(),
                cache_bytes,
                durability_code(durability),
                c_int::from(direct),
                sessions,
                &mut err,
            )
        };
        if conn.is_null() {
            return Err(take_error(err));
        }
        Ok(WiredTigerStore { conn, sessions: Mutex::new(Vec::new()) })
    }

    /// The linked WiredTiger's version (`wiredtiger_version`).
    pub fn version() -> String {
        format!("WiredTiger {}", library_version(ffi::wiredtiger_version))
    }

    /// Runs `op` on a pooled session (opening one when none is free).
    fn with_session<T>(
        &self,
        op: impl FnOnce(*mut c_void) -> Result<T, String>,
    ) -> Result<T, String> {
        let pooled = self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        let session = match pooled {
            Some(session) => session,
            None => {
                let mut err = std::ptr::null_mut();
                // SAFETY: the connection is open until drop.
                let session = unsafe { ffi::peer_wt_session(self.conn, &mut err) };
                if session.is_null() {
                    return Err(take_error(err));
                }
                WtSession(session)
            }
        };
        let result = op(session.0);
        self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(session);
        result
    }
}

impl Drop for WiredTigerStore {
    fn drop(&mut self) {
        let sessions = self.sessions.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        for session in sessions.drain(..) {
            // SAFETY: each session was opened by the shim and is closed once.
            unsafe { ffi::peer_wt_session_close(session.0) };
        }
        let mut err = std::ptr::null_mut();
        // SAFETY: every session is closed; the connection is closed once.
        if unsafe { ffi::peer_wt_close(self.conn, &mut err) } != 0 {
            eprintln!("wiredtiger: {}", take_error(err));
        }
    }
}

impl Store for WiredTigerStore {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.with_session(|session| c_read(session, ffi::peer_wt_get, key))
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.with_session(|session| c_write(session, ffi::peer_wt_put, key, value))
    }

    fn scan(&self, from: &[u8], count: usize) -> Result<usize, String> {
        self.with_session(|session| c_scan(session, ffi::peer_wt_scan, from, count))
    }
}

/// SQLite behind the driver.
pub struct SqliteStore {
    path: std::path::PathBuf,
    durability: Durability,
    cache_kib_per_connection: i64,
    connections: Mutex<Vec<rusqlite::Connection>>,
}

fn sql_error(error: rusqlite::Error) -> String {
    error.to_string()
}

impl SqliteStore {
    /// Creates a database file at `path`, for up to `connections` client threads sharing
    /// `cache_bytes` of page cache.
    pub fn create(
        path: &Path,
        cache_bytes: usize,
        durability: Durability,
        connections: usize,
    ) -> Result<Self, String> {
        let per_connection = cache_bytes / connections.max(1) / 1024;
        let store = SqliteStore {
            path: path.to_path_buf(),
            durability,
            cache_kib_per_connection: i64::try_from(per_connection).map_err(|e| e.to_string())?,
            connections: Mutex::new(Vec::new()),
        };
        let connection = store.connect()?;
        connection
            .execute_batch(
                "CREATE TABLE IF NOT EXISTS kv (key BLOB PRIMARY KEY, value BLOB NOT NULL) \
                 WITHOUT ROWID;",
            )
            .map_err(sql_error)?;
        store
            .connections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(connection);
        Ok(store)
    }

    /// The linked SQLite's version (`sqlite3_libversion`).
    pub fn version() -> String {
        format!("SQLite {}", rusqlite::version())
    }

    fn connect(&self) -> Result<rusqlite::Connection, String> {
        let connection = rusqlite::Connection::open(&self.path).map_err(sql_error)?;
        let synchronous = match self.durability {
            Durability::Sync => "FULL",
            Durability::Buffered => "NORMAL",
            Durability::None => "OFF",
        };
        connection
            .execute_batch(&format!(
                "PRAGMA journal_mode=WAL; PRAGMA synchronous={synchronous}; \
                 PRAGMA cache_size=-{}; PRAGMA mmap_size=0; PRAGMA busy_timeout=60000;",
                self.cache_kib_per_connection
            ))
            .map_err(sql_error)?;
        Ok(connection)
    }

    fn with_connection<T>(
        &self,
        op: impl FnOnce(&rusqlite::Connection) -> Result<T, rusqlite::Error>,
    ) -> Result<T, String> {
        let pooled =
            self.connections.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        let connection = match pooled {
            Some(connection) => connection,
            None => self.connect()?,
        };
        let result = op(&connection).map_err(sql_error);
        self.connections.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(connection);
        result
    }
}

impl Store for SqliteStore {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        use rusqlite::OptionalExtension;
        self.with_connection(|c| {
            c.prepare_cached("SELECT value FROM kv WHERE key = ?1")?
                .query_row([key], |row| row.get(0))
                .optional()
        })
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.with_connection(|c| {
            c.prepare_cached("INSERT OR REPLACE INTO kv (key, value) VALUES (?1, ?2)")?
                .execute([key, value])
                .map(drop)
        })
    }

    fn scan(&self, from: &[u8], count: usize) -> Result<usize, String> {
        let limit = i64::try_from(count).unwrap_or(i64::MAX);
        self.with_connection(|c| {
            let mut statement = c.prepare_cached(
                "SELECT key, value FROM kv WHERE key >= ?1 ORDER BY key LIMIT ?2",
            )?;
            let mut rows = statement.query(rusqlite::params![from, limit])?;
            let mut read = 0;
            while let Some(row) = rows.next()? {
                materialize(row.get_ref(0)?.as_blob()?, row.get_ref(1)?.as_blob()?);
                read += 1;
            }
            Ok(read)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::driver::{run_all, YcsbConfig};
    use super::*;

    fn check(store: &dyn Store) {
        let config = YcsbConfig {
            records: 1_000,
            operations: 1_000,
            threads: 2,
            seed: 3,
            ..YcsbConfig::default()
        };
        let phases = run_all(store, &config).expect("run");
        assert_eq!(phases.len(), 7);
        for phase in &phases {
            assert_eq!(phase.not_found, 0, "{phase:?}");
        }
    }

    #[test]
    fn rocksdb_runs_every_core_workload() {
        let dir = tempfile::tempdir().expect("dir");
        let store = RocksStore::open(dir.path(), 8 << 20, Durability::None, false).expect("open");
        crate::ycsb::driver::round_trip(&store);
        check(&store);
        assert!(!store.version().contains("unknown"), "{}", store.version());
    }

    /// With the `rocksdb-crate` feature the binary holds two RocksDBs; each adapter must run
    /// its own (the shim loads Debian's at run time, so the linker cannot merge the two).
    #[cfg(feature = "rocksdb-crate")]
    #[test]
    fn the_two_rocksdbs_stay_apart() {
        use super::super::rocksdb_crate::RocksCrateStore;
        let debian_dir = tempfile::tempdir().expect("dir");
        let crate_dir = tempfile::tempdir().expect("dir");
        let debian =
            RocksStore::open(debian_dir.path(), 8 << 20, Durability::None, false).expect("open");
        let bundled = RocksCrateStore::open(crate_dir.path(), 8 << 20, Durability::None, false)
            .expect("open");
        crate::ycsb::driver::round_trip(&debian);
        crate::ycsb::driver::round_trip(&bundled);
        let bundled_release = versions::rocksdb_version_in(crate_dir.path());
        assert_eq!(bundled_release.as_deref(), Some(versions::rocksdb_bundled()));
        let debian_release = versions::rocksdb_version_in(debian_dir.path()).expect("OPTIONS");
        assert_ne!(debian_release, versions::rocksdb_bundled(), "{}", debian.version());
    }

    #[test]
    fn lmdb_runs_every_core_workload() {
        let dir = tempfile::tempdir().expect("dir");
        let store = LmdbStore::open(dir.path(), 1 << 30, Durability::None, 2).expect("open");
        crate::ycsb::driver::round_trip(&store);
        check(&store);
    }

    #[test]
    fn wiredtiger_runs_every_core_workload() {
        let dir = tempfile::tempdir().expect("dir");
        let store = WiredTigerStore::open(dir.path(), 8 << 20, Durability::Buffered, false, 2)
            .expect("open");
        crate::ycsb::driver::round_trip(&store);
        check(&store);
    }

    #[test]
    fn the_libraries_report_their_versions() {
        for version in [LmdbStore::version(), WiredTigerStore::version(), SqliteStore::version()] {
            let (_, number) = version.split_once(' ').expect("name and number");
            assert_eq!(number.split('.').count(), 3, "{version}");
            assert!(number.split('.').all(|part| part.parse::<u32>().is_ok()), "{version}");
            assert_ne!(number, "0.0.0", "{version}");
        }
    }

    #[test]
    fn sqlite_runs_every_core_workload() {
        let dir = tempfile::tempdir().expect("dir");
        let store =
            SqliteStore::create(&dir.path().join("ycsb.sqlite"), 8 << 20, Durability::None, 2)
                .expect("create");
        crate::ycsb::driver::round_trip(&store);
        check(&store);
    }
}
