//! `tierkv-bench`: the measurement tools of tierkv.
//!
//! - `device`: the device lab (`tierkv bench device`): raw bandwidth and latency by access
//!   method, operation, pattern, transfer size, threads and page-cache state, through the same
//!   `tierkv-io` code paths the engine uses, with an optional side-by-side run of fio.
//! - `wal`: the WAL benchmark (`tierkv bench wal`): commits/s and latency of the log's
//!   backends, the device's fdatasync limit, and RocksDB and SQLite beside them.
//! - `blocks`: the block benchmark (`tierkv bench blocks`): seed 003's 64-block write latency
//!   and bandwidth tables (sync, 64 writes + one fdatasync, one atomic group), and a page-update
//!   workload comparing the log store's atomic groups with the doublewrite baseline.
//! - `engine`: db_bench's workloads on the engine (`tierkv bench engine`).
//! - `ycsb`: YCSB's core workloads A–F (`tierkv bench ycsb`): their request streams, a driver
//!   with load and run phases, a duration, a target rate and a warm-up, and its plots.
//! - `tier`: the tier cache's experiments (`tierkv bench tier`): YCSB through the engine in
//!   six configurations, and the read throughput of tier readers as writers are added.
//!
//! - `torture`: the kill -9 crash torture (`tierkv torture crash`): a child process's
//!   workload protocol, the model of what it acknowledged, and the check after reopening.
//! - `stress`: the remap stress (`tierkv stress`): workers read and write self-verifying
//!   blocks through a mapping while a resizer grows and truncates the file.
//! - `machine` (the machine and process a measurement ran on, page-cache eviction) and
//!   `cgroup` (a memory cgroup for side-by-side runs under one limit): what the tools share.
//!
//! Benchmarks report figures (JSON, CSV, SVG plots, tables); they never assert on speed. Every
//! benchmark also runs as a test with tiny parameters, so it cannot rot.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

mod bars;
pub mod blocks;
mod canvas;
pub mod cgroup;
pub mod device;
pub mod engine;
mod lines;
pub mod machine;
pub mod scratch;
pub mod stress;
mod summary;
pub mod tier;
pub mod torture;
pub mod wal;
pub mod ycsb;
