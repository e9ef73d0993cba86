//! Integration tests of tierkv-bench: one binary, one module per benchmark.

mod blocks;
mod device;
mod machine;
mod stress;
mod wal;
