//! Integration tests of `tierkv-wal`: real files, the simulated backend's crash sweeps, and
//! injected faults.

mod basic;
mod crash;
mod faults;

use std::path::Path;

use tierkv_io::Storage;
use tierkv_wal::{Lsn, RecordType, RecoveryReport, Wal, WalOptions};

/// Record type used by the tests.
pub fn kind() -> RecordType {
    RecordType::new(1).expect("non-zero")
}

/// Opens the log in `dir`, collecting what recovery hands out.
pub fn open_collect(
    storage: &Storage,
    dir: &Path,
    options: WalOptions,
) -> (Wal, Vec<(Lsn, Vec<u8>)>, RecoveryReport) {
    let mut records = Vec::new();
    let recovered = Wal::open(storage, dir, options, |record| {
        records.push((record.lsn, record.payload.to_vec()));
    })
    .unwrap_or_else(|e| panic!("open {}: {e}", dir.display()));
    (recovered.wal, records, recovered.report)
}

/// A payload that names its writer and sequence, of a length that varies with both.
pub fn payload(thread: usize, sequence: usize, max_len: usize) -> Vec<u8> {
    let len = 8 + (thread * 131 + sequence * 37) % max_len.max(1);
    let mut bytes = vec![0u8; len];
    bytes[..4].copy_from_slice(&(thread as u32).to_le_bytes());
    bytes[4..8].copy_from_slice(&(sequence as u32).to_le_bytes());
    for (i, byte) in bytes[8..].iter_mut().enumerate() {
        *byte = (thread as u8).wrapping_mul(31).wrapping_add((sequence + i) as u8);
    }
    bytes
}
