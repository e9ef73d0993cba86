//! The `tierkv` binary's allocator, chosen so that the process's resident memory keeps close
//! to what the engine counts against `cache_size` (`results/engine/README.md` has the
//! measurements behind the choice).
//!
//! The engine frees and allocates page images and memtable entries without pause, from
//! several threads. glibc's malloc gives each thread an arena and keeps an arena's freed
//! memory for that arena alone, so the process comes to hold the sum of every arena's peak:
//! well past the bound with two arenas, and with one the lock between the writers and the
//! checkpoint thread costs a third of the write throughput.
//!
//! - With the `jemalloc` feature (the default): jemalloc, one arena (its per-thread caches
//!   spare the lock), freed pages given back to the kernel within 30 ms by its background
//!   thread. (Within a second, the 10× bounded-memory run peaked at 123.6 MiB against its
//!   96 MiB bound once the engine wrote 35K records a second: freed pages waiting out the
//!   decay, not the engine's; within 0.1 s at 96.5 MiB, within 30 ms at 81.2 MiB, at the
//!   same speed.)
//! - Without: glibc's malloc limited to one arena (`tierkv_io::heap::limit_malloc_arenas`),
//!   unless `MALLOC_ARENA_MAX` is set.
//!
//! With the `c-peers` feature, jemalloc's symbols are unprefixed: it replaces `malloc` in the
//! whole process, so RocksDB, LMDB, WiredTiger and SQLite allocate with it as well, and a
//! comparison's allocator is the same for every engine. (Under glibc's malloc, WiredTiger's
//! resident memory reached 3× its `cache_size` in the out-of-memory YCSB regime.)

/// jemalloc's options, read when it starts (`_rjem_` is the crate's symbol prefix, absent
/// when the C peers are built in). A thin pointer to a NUL-terminated string, as jemalloc's
/// `const char *malloc_conf` is.
#[cfg(feature = "jemalloc")]
#[allow(non_upper_case_globals)]
#[cfg_attr(not(feature = "c-peers"), export_name = "_rjem_malloc_conf")]
#[cfg_attr(feature = "c-peers", export_name = "malloc_conf")]
pub static malloc_conf: &[u8; JEMALLOC_OPTIONS.len()] = JEMALLOC_OPTIONS;

/// The variable jemalloc reads its options from, after `malloc_conf`.
#[cfg(all(feature = "jemalloc", not(feature = "c-peers")))]
const OPTIONS_VARIABLE: &str = "_RJEM_MALLOC_CONF";
#[cfg(all(feature = "jemalloc", feature = "c-peers"))]
const OPTIONS_VARIABLE: &str = "MALLOC_CONF";

#[cfg(feature = "jemalloc")]
const JEMALLOC_OPTIONS: &[u8; 68] =
    b"narenas:1,background_thread:true,dirty_decay_ms:30,muzzy_decay_ms:0\0";

#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Sets the allocator up (glibc's arena limit; jemalloc reads its options itself) and
/// describes it for reports.
pub fn configure() -> String {
    #[cfg(feature = "jemalloc")]
    {
        // The options in words (`JEMALLOC_OPTIONS` has them exactly).
        let mut options = "1 arena, freed pages purged within 30 ms".to_string();
        if cfg!(feature = "c-peers") {
            options += ", for the C libraries too";
        }
        match std::env::var(OPTIONS_VARIABLE) {
            Ok(set) => format!("jemalloc, {options}, then {OPTIONS_VARIABLE}={set}"),
            Err(_) => format!("jemalloc, {options}"),
        }
    }
    #[cfg(not(feature = "jemalloc"))]
    {
        tierkv_io::heap::limit_malloc_arenas(1)
    }
}

/// Bytes the allocator has handed out and not had back: jemalloc's `stats.allocated`, or
/// glibc's `mallinfo2` (`tierkv_io::measure::malloc_in_use_bytes`).
pub fn in_use_bytes() -> Option<u64> {
    #[cfg(feature = "jemalloc")]
    {
        // The statistics are a snapshot taken when the epoch advances.
        tikv_jemalloc_ctl::epoch::advance().ok()?;
        tikv_jemalloc_ctl::stats::allocated::read().ok().map(|bytes| bytes as u64)
    }
    #[cfg(not(feature = "jemalloc"))]
    {
        tierkv_io::measure::malloc_in_use_bytes()
    }
}
