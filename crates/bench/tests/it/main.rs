//! Integration tests of tierkv-bench: one binary, one module per benchmark.

mod device;
mod wal;
