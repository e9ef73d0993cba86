//! Injected faults on the simulated backend: a failed fdatasync, write or persist poisons the
//! log; ENOSPC while preparing a segment is a typed error that loses nothing acknowledged.

use std::path::Path;
use std::time::Duration;

use tierkv_io::sim::{CrashModel, FaultPlan, SimFs};
use tierkv_io::{FaultErrno, Op, Storage};
use tierkv_wal::{Backend, Durability, Lsn, Wal, WalError, WalOptions};

use crate::{kind, open_collect, payload};

fn options(backend: Backend, segment_bytes: u64) -> WalOptions {
    WalOptions { segment_bytes, ..WalOptions::with_backend(backend) }
}

/// Waits until the background thread has prepared `count` segments in all.
fn wait_prepared(wal: &Wal, count: u64) {
    // A hang guard, not a speed check: up to 20,000 naps of 1 ms.
    let mut naps = 0;
    while wal.stats().segments_prepared < count {
        naps += 1;
        assert!(naps <= 20_000, "the preparer never prepared {count} segments");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Recovers a crash image that keeps only what was made durable, and checks `acked`.
fn check_durable(fs: &SimFs, dir: &Path, backend: Backend, acked: &[(Lsn, Vec<u8>)]) {
    let image = fs.crash_image(fs.op_count(), CrashModel::DropAll, 1);
    let (wal, records, _) = open_collect(&Storage::Sim(image), dir, options(backend, 64 << 10));
    for (lsn, bytes) in acked {
        let found = records.iter().find(|(got, _)| got == lsn);
        assert_eq!(found.map(|(_, b)| b), Some(bytes), "acknowledged LSN {lsn} lost");
    }
    // The recovered log is writable again.
    wal.append(kind(), b"after reopen", Durability::Sync).expect("append after reopen");
}

fn poison_case(backend: Backend, op: Op) {
    let fs = SimFs::new();
    let dir = Path::new("/wal");
    let (wal, _, _) = open_collect(&Storage::Sim(fs.clone()), dir, options(backend, 64 << 10));
    wal_prepared_then(&wal);
    let mut acked = Vec::new();
    for sequence in 0..5 {
        let bytes = payload(0, sequence, 64);
        acked.push((wal.append(kind(), &bytes, Durability::Sync).expect("append"), bytes));
    }
    fs.set_fault(Some(FaultPlan::once(fs.calls() + 1, FaultErrno::Eio).only(op)));
    let error =
        wal.append(kind(), b"doomed", Durability::Sync).expect_err("the fault must surface");
    // The appender that met the fault gets it, directly or as the poison's cause.
    assert!(
        matches!(&error, WalError::Io(_))
            || matches!(&error, WalError::Poisoned { cause, .. } if cause.contains("EIO")),
        "{backend}/{op}: {error}"
    );
    fs.set_fault(None);
    for _ in 0..3 {
        let error = wal.append(kind(), b"refused", Durability::Sync).expect_err("poisoned");
        let WalError::Poisoned { cause, .. } = &error else { panic!("{backend}/{op}: {error}") };
        assert!(cause.contains("EIO") || cause.contains("injected"), "{error}");
        assert!(error.to_string().contains("reopen"), "{error}");
    }
    assert!(matches!(wal.sync(), Err(WalError::Poisoned { .. })));
    drop(wal);
    check_durable(&fs, dir, backend, &acked);
}

fn wal_prepared_then(wal: &Wal) {
    // Segment 1 at open, segments 2 and 3 in the background: wait, so no preparation call
    // races with the faults below.
    wait_prepared(wal, 3);
}

/// The preparer keeps two segments ready ahead of the active one, and again after each
/// rotation; a crash while they hold no record loses no acknowledged record, and recovery
/// removes them.
#[test]
fn two_segments_stay_prepared_ahead_and_a_crash_keeps_every_record() {
    for backend in [Backend::File, Backend::Pmem] {
        let fs = SimFs::new();
        let dir = Path::new("/wal");
        let (wal, _, _) = open_collect(&Storage::Sim(fs.clone()), dir, options(backend, 64 << 10));
        wait_prepared(&wal, 3);
        let mut acked = Vec::new();
        while wal.stats().rotations < 2 {
            let bytes = payload(2, acked.len(), 900);
            acked.push((wal.append(kind(), &bytes, Durability::Sync).expect("append"), bytes));
            assert!(acked.len() < 10_000, "{backend}: the log never rotated");
        }
        // Two rotations took two prepared segments: two more follow them.
        wait_prepared(&wal, 5);
        let image = fs.crash_image(fs.op_count(), CrashModel::DropAll, 1);
        drop(wal);
        let (wal, records, report) =
            open_collect(&Storage::Sim(image), dir, options(backend, 64 << 10));
        assert_eq!(records, acked, "{backend}");
        assert_eq!(report.removed_segments.len(), 2, "{backend}: {report:?}");
        assert_eq!(report.discarded_bytes, 0, "{backend}: {report:?}");
        wal.append(kind(), b"after reopen", Durability::Sync).expect("append after reopen");
    }
}

#[test]
fn a_failed_fdatasync_poisons_the_log() {
    poison_case(Backend::File, Op::Sync);
}

#[test]
fn a_failed_write_poisons_the_log() {
    poison_case(Backend::File, Op::Write);
    poison_case(Backend::Pmem, Op::Write);
}

#[test]
fn a_failed_persist_poisons_the_pmem_log() {
    poison_case(Backend::Pmem, Op::Persist);
}

#[test]
fn enospc_while_growing_is_a_typed_error_and_loses_nothing() {
    for backend in [Backend::File, Backend::Pmem] {
        let fs = SimFs::new();
        let dir = Path::new("/wal");
        let segment_bytes = WalOptions::MIN_SEGMENT_BYTES;
        let (wal, _, _) =
            open_collect(&Storage::Sim(fs.clone()), dir, options(backend, segment_bytes));
        wal_prepared_then(&wal);
        fs.set_fault(Some(
            FaultPlan::from_call(fs.calls() + 1, FaultErrno::Enospc).only(Op::Allocate),
        ));
        let mut acked = Vec::new();
        let error = loop {
            let bytes = payload(1, acked.len(), 200);
            match wal.append(kind(), &bytes, Durability::Sync) {
                Ok(lsn) => acked.push((lsn, bytes)),
                Err(error) => break error,
            }
            assert!(acked.len() < 1000, "{backend}: the log never needed to grow");
        };
        let WalError::Io(io) = &error else { panic!("{backend}: {error}") };
        assert!(io.is_no_space(), "{backend}: {error}");
        assert!(
            acked.len() > 10,
            "{backend}: the prepared segment should have taken records first"
        );
        assert_eq!(
            wal.next_lsn(),
            acked.last().expect("acked").0.next(),
            "a failed append took no LSN"
        );
        // Not poisoned: once space is back, the next append succeeds.
        fs.set_fault(None);
        let bytes = b"after ENOSPC".to_vec();
        acked.push((
            wal.append(kind(), &bytes, Durability::Sync).expect("append after ENOSPC"),
            bytes,
        ));
        drop(wal);
        check_durable(&fs, dir, backend, &acked);
    }
}
