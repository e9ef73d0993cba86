//! The log on real files: round trips, rotation, oversized records, truncation, group commit,
//! the buffered flusher, the pmem backend's syscall-free commit path, and damaged files.

use std::sync::Arc;
use std::time::Duration;

use tierkv_io::{PmemMode, Storage};
use tierkv_wal::format::{MAX_PAYLOAD_BYTES, RECORDS_START};
use tierkv_wal::{Backend, Durability, Lsn, Wal, WalError, WalOptions};

use crate::{kind, open_collect, payload};

fn small(backend: Backend) -> WalOptions {
    WalOptions { segment_bytes: 64 << 10, ..WalOptions::with_backend(backend) }
}

/// A directory for a backend: the pmem one goes to /dev/shm where it exists (flush-only
/// emulation with real clwb and sfence), elsewhere to the temporary directory (msync).
fn dir_for(backend: Backend) -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if backend == Backend::Pmem && shm.is_dir() {
        tempfile::tempdir_in(shm).expect("a directory in /dev/shm")
    } else {
        tempfile::tempdir().expect("a temporary directory")
    }
}

#[test]
fn records_survive_reopen_across_rotations_on_both_backends() {
    for backend in [Backend::File, Backend::Pmem] {
        let dir = dir_for(backend);
        let (wal, records, report) = open_collect(&Storage::Os, dir.path(), small(backend));
        assert!(records.is_empty());
        assert_eq!(report.records, 0);
        let mut expected = Vec::new();
        for sequence in 0..600 {
            let bytes = payload(0, sequence, 700);
            let durability =
                [Durability::Sync, Durability::Buffered, Durability::None][sequence % 3];
            let lsn = wal.append(kind(), &bytes, durability).expect("append");
            assert_eq!(lsn, Lsn(sequence as u64 + 1));
            expected.push((lsn, bytes));
        }
        let stats = wal.stats();
        assert!(stats.rotations >= 3, "{backend}: {stats:?}");
        assert_eq!(stats.appends, 600);
        wal.close().expect("close");
        let (wal, records, report) = open_collect(&Storage::Os, dir.path(), small(backend));
        assert_eq!(records, expected, "{backend}");
        assert_eq!(report.discarded_bytes, 0, "{backend}: {report:?}");
        assert_eq!(report.stop, None, "{backend}");
        assert_eq!(report.lsn_range, Some((Lsn(1), Lsn(600))));
        assert_eq!(wal.next_lsn(), Lsn(601));
        // Appending continues the chain after reopening.
        assert_eq!(wal.append(kind(), b"after", Durability::Sync).expect("append"), Lsn(601));
        drop(wal);
        let (_wal, records, _) = open_collect(&Storage::Os, dir.path(), small(backend));
        assert_eq!(records.len(), 601);
        assert_eq!(records[600], (Lsn(601), b"after".to_vec()));
    }
}

#[test]
fn oversized_records_get_a_segment_of_their_own() {
    for backend in [Backend::File, Backend::Pmem] {
        let dir = dir_for(backend);
        let (wal, _, _) = open_collect(&Storage::Os, dir.path(), small(backend));
        let big = vec![0xa5u8; 300 << 10];
        wal.append(kind(), b"small", Durability::Sync).expect("append");
        wal.append(kind(), &big, Durability::Sync).expect("append a record larger than a segment");
        wal.append(kind(), b"next", Durability::Sync).expect("append");
        wal.close().expect("close");
        let (_wal, records, _) = open_collect(&Storage::Os, dir.path(), small(backend));
        let payloads: Vec<&[u8]> = records.iter().map(|(_, p)| p.as_slice()).collect();
        assert_eq!(payloads, vec![&b"small"[..], &big[..], &b"next"[..]], "{backend}");
    }
}

/// A log's first record larger than its first segment goes to the next segment, grown for it,
/// and leaves the first one empty. Recovery used to stop at that empty segment (no LSN to
/// expect yet) and delete every record after it, acknowledged `Sync` ones included.
#[test]
fn a_first_record_larger_than_the_first_segment_survives_reopening() {
    for backend in [Backend::File, Backend::Pmem] {
        let dir = dir_for(backend);
        let (wal, _, _) = open_collect(&Storage::Os, dir.path(), small(backend));
        let big = vec![0x5au8; 200 << 10];
        assert_eq!(wal.append(kind(), &big, Durability::Sync).expect("append"), Lsn(1));
        assert_eq!(wal.append(kind(), b"after", Durability::Sync).expect("append"), Lsn(2));
        assert!(wal.segment_paths().len() >= 2, "{backend}: the first segment was skipped");
        drop(wal);
        let (wal, records, report) = open_collect(&Storage::Os, dir.path(), small(backend));
        assert_eq!(report.discarded_bytes, 0, "{backend}: {report:?}");
        assert_eq!(report.lsn_range, Some((Lsn(1), Lsn(2))), "{backend}");
        assert_eq!(records, vec![(Lsn(1), big.clone()), (Lsn(2), b"after".to_vec())]);
        assert_eq!(wal.append(kind(), b"third", Durability::Sync).expect("append"), Lsn(3));
    }
}

/// Oversized records back to back: each pops the prepared segment and grows it outside the
/// lock while the preparer makes the next. The preparer once numbered its segment from the
/// queue and the active segment, where the one being grown is in neither: it either tripped
/// its ordering assertion (found by the `store_dir` fuzz target) and died, leaving appenders
/// waiting for a rotation forever, or reused the grown segment's number and renamed a fresh
/// file over it. Every record must come back, in order, from distinct segment files.
#[test]
fn oversized_records_back_to_back_while_segments_are_prepared() {
    for backend in [Backend::File, Backend::Pmem] {
        let dir = dir_for(backend);
        let (wal, _, _) = open_collect(&Storage::Os, dir.path(), small(backend));
        // In a thread, so that a preparer that died fails the test instead of hanging it.
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut expected = Vec::new();
            for round in 0..32usize {
                let mut big = payload(round, round, 64);
                // Each larger than any segment before it, so each rotation grows one.
                big.resize((70 << 10) * (round + 1), round as u8);
                let durability =
                    [Durability::Sync, Durability::Buffered, Durability::None][round % 3];
                let lsn = wal.append(kind(), &big, durability).expect("append an oversized record");
                expected.push((lsn, big));
                let small = payload(round, round + 1000, 300);
                let lsn = wal.append(kind(), &small, Durability::None).expect("append");
                expected.push((lsn, small));
            }
            let _ = sender.send((wal, expected));
        });
        let (wal, expected) = receiver
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("{backend}: appends stopped (the preparer died?)"));
        let paths = wal.segment_paths();
        let mut names = paths.clone();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), paths.len(), "{backend}: a segment number used twice: {paths:?}");
        assert!(wal.stats().rotations >= 32, "{backend}: {:?}", wal.stats());
        wal.close().expect("close");
        let (_wal, records, report) = open_collect(&Storage::Os, dir.path(), small(backend));
        assert_eq!(report.discarded_bytes, 0, "{backend}: {report:?}");
        assert_eq!(records.len(), expected.len(), "{backend}");
        assert!(records == expected, "{backend}: records differ after reopening");
    }
}

#[test]
fn truncate_below_removes_only_segments_wholly_below_the_lsn() {
    let dir = tempfile::tempdir().expect("dir");
    let (wal, _, _) = open_collect(&Storage::Os, dir.path(), small(Backend::File));
    for sequence in 0..400 {
        wal.append(kind(), &payload(1, sequence, 900), Durability::None).expect("append");
    }
    wal.sync().expect("sync");
    let before = wal.segment_paths();
    assert!(before.len() >= 4, "{before:?}");
    let removed = wal.truncate_below(Lsn(250)).expect("truncate");
    assert!(removed >= 1);
    let after = wal.segment_paths();
    assert_eq!(after.len(), before.len() - removed);
    for path in &before[..removed] {
        assert!(!path.exists(), "{} should be gone", path.display());
    }
    drop(wal);
    let (_wal, records, report) = open_collect(&Storage::Os, dir.path(), small(Backend::File));
    let first = records.first().expect("records remain").0;
    assert!(first <= Lsn(250), "LSN 250 must survive; the first left is {first}");
    assert_eq!(records.last().expect("records").0, Lsn(400));
    assert_eq!(report.discarded_bytes, 0);
    for pair in records.windows(2) {
        assert_eq!(pair[1].0, pair[0].0.next());
    }
}

#[test]
fn concurrent_sync_appenders_share_fdatasyncs() {
    let dir = tempfile::tempdir().expect("dir");
    let (wal, _, _) = open_collect(&Storage::Os, dir.path(), WalOptions::default());
    let wal = Arc::new(wal);
    let threads = 8;
    let per_thread = 50;
    std::thread::scope(|scope| {
        for thread in 0..threads {
            let wal = Arc::clone(&wal);
            scope.spawn(move || {
                for sequence in 0..per_thread {
                    let lsn = wal
                        .append(kind(), &payload(thread, sequence, 200), Durability::Sync)
                        .expect("append");
                    assert!(
                        wal.durable_lsn() >= lsn,
                        "a Sync append returned before it was durable"
                    );
                }
            });
        }
    });
    let stats = wal.stats();
    assert_eq!(stats.appends, (threads * per_thread) as u64);
    assert_eq!(stats.synced_records, stats.appends);
    assert!(
        stats.sync_rounds < stats.appends,
        "group commit: {} appends took {} fdatasync rounds",
        stats.appends,
        stats.sync_rounds
    );
    let wal = Arc::into_inner(wal).expect("the only reference");
    wal.close().expect("close");
    let (_wal, records, _) = open_collect(&Storage::Os, dir.path(), WalOptions::default());
    assert_eq!(records.len(), threads * per_thread);
}

/// Group commit's hand-offs (the gathering leader, the futex that wakes waiters, the peak of
/// waiters decaying as appenders leave) never strand an appender: threads of different
/// lengths mix `Sync`, `Buffered` and `None` with a busy flusher, and every one finishes.
#[test]
fn mixed_durabilities_from_threads_that_come_and_go_all_finish() {
    let dir = tempfile::tempdir().expect("dir");
    let options = WalOptions {
        segment_bytes: 64 << 10,
        flush_interval: Duration::from_millis(1),
        ..WalOptions::default()
    };
    let (wal, _, _) = open_collect(&Storage::Os, dir.path(), options.clone());
    let wal = Arc::new(wal);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let threads = 8;
    let mut expected = 0;
    for thread in 0..threads {
        // Thread t appends 10 * (t + 1) records, so appenders leave one by one.
        let count = 10 * (thread + 1);
        expected += count;
        let wal = Arc::clone(&wal);
        let done_tx = done_tx.clone();
        // Not scoped: a stranded appender must fail the test below, not hang it.
        std::thread::spawn(move || {
            let mut synced = Vec::new();
            for sequence in 0..count {
                let durability = match sequence % 3 {
                    0 => Durability::Sync,
                    1 => Durability::Buffered,
                    _ => Durability::None,
                };
                let lsn =
                    wal.append(kind(), &payload(thread, sequence, 64), durability).expect("append");
                if durability == Durability::Sync {
                    assert!(wal.durable_lsn() >= lsn, "a Sync append returned before durable");
                    synced.push(lsn);
                }
            }
            // The clone goes before the report, so the test's own handle is the last one.
            drop(wal);
            done_tx.send(synced.len()).expect("report");
        });
    }
    drop(done_tx);
    // A hang guard, not a speed check: each thread gets up to 600 waits of 100 ms.
    let mut finished = 0;
    let mut naps = 0;
    while finished < threads {
        match done_rx.recv_timeout(Duration::from_millis(100)) {
            Ok(_) => finished += 1,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                naps += 1;
                assert!(
                    naps <= 600,
                    "{} of {threads} appenders never finished",
                    threads - finished
                );
            }
            Err(error) => panic!("an appender panicked: {error}"),
        }
    }
    assert_eq!(wal.stats().appends, expected as u64);
    wal.sync().expect("sync");
    let wal = Arc::into_inner(wal).expect("the only reference");
    wal.close().expect("close");
    let (_wal, records, _) = open_collect(&Storage::Os, dir.path(), options);
    assert_eq!(records.len(), expected);
}

#[test]
fn buffered_appends_become_durable_within_the_flush_interval() {
    let dir = tempfile::tempdir().expect("dir");
    let options = WalOptions { flush_interval: Duration::from_millis(10), ..WalOptions::default() };
    let (wal, _, _) = open_collect(&Storage::Os, dir.path(), options);
    let lsn = wal.append(kind(), b"buffered", Durability::Buffered).expect("append");
    // A hang guard, not a speed check: up to 10,000 naps of 1 ms.
    let mut naps = 0;
    while wal.durable_lsn() < lsn {
        naps += 1;
        assert!(naps <= 10_000, "the flusher never synced LSN {lsn}");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(wal.stats().flusher_rounds >= 1);
    // `None` appends are not synced by the flusher.
    let none = wal.append(kind(), b"none", Durability::None).expect("append");
    std::thread::sleep(Duration::from_millis(60));
    assert!(wal.durable_lsn() < none, "the flusher synced a Durability::None record");
    wal.sync().expect("sync");
    assert_eq!(wal.durable_lsn(), none);
}

#[test]
fn pmem_commits_make_no_system_call() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("note: no /dev/shm; the syscall-free pmem commit path is not checked here");
        return;
    }
    let dir = tempfile::tempdir_in(shm).expect("dir");
    let (wal, _, _) =
        open_collect(&Storage::Os, dir.path(), WalOptions::with_backend(Backend::Pmem));
    assert_eq!(wal.pmem_mode(), Some(PmemMode::FlushOnly));
    let before = wal.active_io_stats();
    for sequence in 0..2000 {
        wal.append(kind(), &payload(2, sequence, 128), Durability::Sync).expect("append");
    }
    let delta = wal.active_io_stats().since(&before);
    assert_eq!(delta.writes, 2000, "{delta:?}");
    assert_eq!(delta.write_bytes_syscall, 0, "{delta:?}");
    assert_eq!(delta.syncs + delta.msyncs + delta.resize_syscalls, 0, "{delta:?}");
    assert_eq!(delta.fallbacks_resizing + delta.fallbacks_outside_map, 0, "{delta:?}");
    // One appender is never behind a predecessor: record and commit word share one fence.
    assert_eq!(delta.persists, 2000, "{delta:?}");
    assert_eq!(delta.fences, 2000, "one fence per commit: {delta:?}");
    assert_eq!(delta.atomic_stores, 2000);
    assert_eq!(wal.durable_lsn(), Lsn(2000));
}

#[test]
fn a_torn_tail_is_reported_zeroed_and_never_comes_back() {
    let dir = tempfile::tempdir().expect("dir");
    let (wal, _, _) = open_collect(&Storage::Os, dir.path(), small(Backend::File));
    let mut offsets = Vec::new();
    let mut offset = RECORDS_START;
    for sequence in 0..10 {
        let bytes = payload(3, sequence, 100);
        offsets.push(offset);
        offset += tierkv_wal::format::record_bytes(bytes.len());
        wal.append(kind(), &bytes, Durability::Sync).expect("append");
    }
    let segment = wal.segment_paths()[0].clone();
    wal.close().expect("close");
    // Tear record 7 (LSN 7): flip a payload byte.
    let mut bytes = std::fs::read(&segment).expect("read");
    let at = offsets[6] as usize + 30;
    bytes[at] ^= 0xff;
    std::fs::write(&segment, &bytes).expect("write");
    let (wal, records, report) = open_collect(&Storage::Os, dir.path(), small(Backend::File));
    assert_eq!(records.len(), 6);
    let stop = report.stop.clone().expect("a stop point");
    assert_eq!(stop.offset, offsets[6]);
    assert_eq!(stop.file, segment);
    assert!(stop.reason.contains("checksum"), "{}", stop.reason);
    assert_eq!(report.discarded_lsn_range, Some((Lsn(7), Lsn(10))));
    assert!(
        report.discarded_bytes > 0 && report.discarded_bytes <= offset - offsets[6],
        "{report:?}"
    );
    // New records take LSN 7 on; the old LSNs 8..10 must not come back after them.
    assert_eq!(wal.append(kind(), &payload(3, 6, 100), Durability::Sync).expect("append"), Lsn(7));
    drop(wal);
    let (_wal, records, report) = open_collect(&Storage::Os, dir.path(), small(Backend::File));
    assert_eq!(records.len(), 7);
    assert_eq!(report.discarded_bytes, 0, "{report:?}");
}

#[test]
fn a_damaged_segment_header_is_a_corruption_error() {
    let dir = tempfile::tempdir().expect("dir");
    let (wal, _, _) = open_collect(&Storage::Os, dir.path(), small(Backend::File));
    wal.append(kind(), b"x", Durability::Sync).expect("append");
    let segment = wal.segment_paths()[0].clone();
    wal.close().expect("close");
    let mut bytes = std::fs::read(&segment).expect("read");
    bytes[3] ^= 1;
    std::fs::write(&segment, &bytes).expect("write");
    let error =
        Wal::open(&Storage::Os, dir.path(), small(Backend::File), |_| {}).expect_err("corrupt");
    let WalError::Corruption { file, offset, detail } = &error else { panic!("{error}") };
    assert_eq!((file, *offset), (&segment, 0));
    assert!(detail.contains("magic"), "{error}");
    // Opening with the wrong backend is refused with a message that names the right one.
    bytes[3] ^= 1;
    std::fs::write(&segment, &bytes).expect("write");
    let error =
        Wal::open(&Storage::Os, dir.path(), small(Backend::Pmem), |_| {}).expect_err("backend");
    assert!(error.to_string().contains("file backend"), "{error}");
}

#[test]
fn bad_arguments_are_typed_errors() {
    let dir = tempfile::tempdir().expect("dir");
    let bad = WalOptions { segment_bytes: 1000, ..WalOptions::default() };
    let error = Wal::open(&Storage::Os, dir.path(), bad, |_| {}).expect_err("bad options");
    assert!(matches!(error, WalError::InvalidOptions(_)), "{error}");
    let bad = WalOptions { flush_interval: Duration::ZERO, ..WalOptions::default() };
    assert!(Wal::open(&Storage::Os, dir.path(), bad, |_| {}).is_err());
    let (wal, _, _) = open_collect(&Storage::Os, dir.path(), small(Backend::File));
    let huge = vec![0u8; MAX_PAYLOAD_BYTES + 1];
    let error = wal.append(kind(), &huge, Durability::Sync).expect_err("too large");
    assert!(matches!(error, WalError::RecordTooLarge { .. }), "{error}");
    assert!(error.to_string().contains("over the limit"), "{error}");
    assert_eq!(wal.next_lsn(), Lsn(1), "a refused append takes no LSN");
}

/// Every file under `dir`: its name, length and a hash of its bytes.
fn file_contents(dir: &std::path::Path) -> Vec<(String, usize, u64)> {
    use std::hash::{Hash, Hasher};
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("list")
        .map(|entry| {
            let entry = entry.expect("entry");
            let bytes = std::fs::read(entry.path()).expect("read");
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            bytes.hash(&mut hasher);
            (entry.file_name().to_string_lossy().into_owned(), bytes.len(), hasher.finish())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_read_only_scan_returns_the_records_and_changes_no_file() {
    for backend in [Backend::File, Backend::Pmem] {
        let dir = dir_for(backend);
        let (wal, _, _) = open_collect(&Storage::Os, dir.path(), small(backend));
        let mut expected = Vec::new();
        for sequence in 0..200 {
            let bytes = payload(1, sequence, 900);
            let lsn = wal.append(kind(), &bytes, Durability::Sync).expect("append");
            expected.push((lsn, bytes));
        }
        // Its threads stopped, so that only the scans below could change the files.
        drop(wal);
        let scan = |dir: &std::path::Path| {
            let mut records = Vec::new();
            let report = Wal::read_only(&Storage::Os, dir, &small(backend), |record| {
                records.push((record.lsn, record.payload.to_vec()));
            })
            .expect("read-only scan");
            (records, report)
        };
        let before = file_contents(dir.path());
        let (records, report) = scan(dir.path());
        assert_eq!(records, expected, "{backend}");
        assert_eq!(report.lsn_range, Some((Lsn(1), Lsn(200))), "{backend}");
        assert_eq!(report.stop, None, "{backend}");
        assert_eq!(file_contents(dir.path()), before, "{backend}: a read-only scan wrote");
        // A torn record where the next would go: the scan stops there, says so, and leaves it.
        let (file, end) = report.end.expect("where the records end");
        let torn = std::fs::OpenOptions::new().write(true).open(&file).expect("open");
        std::os::unix::fs::FileExt::write_all_at(&torn, &[0x5a; 48], end).expect("tear");
        drop(torn);
        let before = file_contents(dir.path());
        let (records, report) = scan(dir.path());
        assert_eq!(records, expected, "{backend}");
        // On pmem the commit word ends the records, so bytes past it are not even looked at.
        let stop = report.stop.as_ref().map(|stop| (&stop.file, stop.offset));
        let expected_stop = (backend == Backend::File).then_some((&file, end));
        assert_eq!(stop, expected_stop, "{backend}");
        assert!(report.removed_segments.is_empty() && report.removed_prepare_files == 0);
        assert_eq!(file_contents(dir.path()), before, "{backend}: a read-only scan repaired");
    }
}

#[test]
fn a_read_only_scan_of_a_missing_directory_is_an_empty_log_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("log");
    let report = Wal::read_only(&Storage::Os, &missing, &small(Backend::File), |_| {
        panic!("no record expected")
    })
    .expect("scan");
    assert_eq!(report.records, 0);
    assert!(!missing.exists());
}

#[test]
fn start_after_numbers_a_new_log_from_a_given_lsn_and_refuses_a_log_with_records() {
    let dir = dir_for(Backend::File);
    let (wal, _, _) = open_collect(&Storage::Os, dir.path(), small(Backend::File));
    wal.start_after(Lsn(41)).expect("an empty log starts anywhere");
    assert_eq!(wal.next_lsn(), Lsn(42));
    assert_eq!(wal.append(kind(), b"first", Durability::Sync).expect("append"), Lsn(42));
    assert!(matches!(wal.start_after(Lsn(100)), Err(WalError::InvalidOptions(_))));
    wal.close().expect("close");
    let (wal, records, _) = open_collect(&Storage::Os, dir.path(), small(Backend::File));
    assert_eq!(records, vec![(Lsn(42), b"first".to_vec())]);
    assert_eq!(wal.next_lsn(), Lsn(43));
}

/// A log written fast grows its segments from the first size towards the largest, at most
/// four times per segment (the next segment is zeroed while the current one fills; a jump
/// from 512 KiB to 64 MiB made appends wait for the zeroing).
#[test]
fn segments_grow_at_most_fourfold_each() {
    let dir = tempfile::tempdir().expect("dir");
    let options = WalOptions { segment_bytes: 16 << 20, ..WalOptions::default() };
    let wal = Wal::open(&Storage::Os, dir.path(), options, |_| {}).expect("open").wal;
    let record = vec![7u8; 4000];
    for _ in 0..6_000 {
        wal.append(kind(), &record, Durability::None).expect("append");
    }
    let sizes: Vec<u64> = file_contents(dir.path()).iter().map(|(_, len, _)| *len as u64).collect();
    wal.close().expect("close");
    assert!(sizes.len() >= 4, "too few segments: {sizes:?}");
    assert_eq!(sizes[0], 512 << 10, "{sizes:?}");
    for pair in sizes.windows(2) {
        assert!(pair[1] <= 4 * pair[0], "a segment grew more than fourfold: {sizes:?}");
    }
    assert!(sizes.iter().any(|size| *size > 2 << 20), "the segments never grew: {sizes:?}");
}

/// This process's file-backed resident memory (`RssFile` of /proc/self/status), bytes.
fn rss_file_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("RssFile:")).expect("RssFile line");
    line.split_whitespace().nth(1).and_then(|n| n.parse::<u64>().ok()).expect("kB") * 1024
}

#[test]
fn the_file_backend_lets_go_of_the_pages_appends_are_done_with() {
    let dir = tempfile::tempdir().expect("dir");
    let options = WalOptions {
        segment_bytes: 16 << 20,
        flush_interval: Duration::from_millis(5),
        ..WalOptions::default()
    };
    let before = rss_file_bytes();
    let wal = Wal::open(&Storage::Os, dir.path(), options, |_| {}).expect("open").wal;
    let record = vec![5u8; 4000];
    // 64 MiB of records through the segments' mappings, none truncated.
    for _ in 0..16_000 {
        wal.append(kind(), &record, Durability::Buffered).expect("append");
    }
    assert!(wal.file_bytes() >= 64 << 20, "{} bytes of segments", wal.file_bytes());
    // The flusher lets go of them within a few of its rounds.
    let mut held = u64::MAX;
    for _ in 0..500 {
        held = rss_file_bytes().saturating_sub(before);
        if held < 8 << 20 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(held < 8 << 20, "the log still maps {held} bytes of 64 MiB written");
    wal.close().expect("close");
    let (_wal, records, _) = open_collect(&Storage::Os, dir.path(), WalOptions::default());
    assert_eq!(records.len(), 16_000, "every record is still in the files");
    assert!(records.iter().all(|(_, bytes)| *bytes == record));
}

#[test]
fn the_file_backend_copies_unsynced_records_and_writes_synced_ones() {
    let dir = tempfile::tempdir().expect("dir");
    let wal = Wal::open(&Storage::Os, dir.path(), WalOptions::default(), |_| {}).expect("open").wal;
    let record = vec![3u8; 1000];
    let start = wal.active_io_stats();
    for durability in [Durability::Buffered, Durability::None] {
        wal.append(kind(), &record, durability).expect("append");
    }
    let copied = wal.active_io_stats().since(&start);
    assert!(copied.write_bytes_mapped >= 2000, "{copied:?}");
    assert_eq!(copied.write_bytes_syscall, 0, "{copied:?}");
    let start = wal.active_io_stats();
    wal.append(kind(), &record, Durability::Sync).expect("append");
    let lsn = wal.append_for_sync(kind(), &record).expect("append");
    assert_eq!(lsn, Lsn(4));
    wal.sync_to(lsn).expect("sync");
    assert!(wal.durable_lsn() >= lsn);
    let written = wal.active_io_stats().since(&start);
    assert!(written.write_bytes_syscall >= 2000, "{written:?}");
    assert_eq!(written.write_bytes_mapped, 0, "{written:?}");
    wal.close().expect("close");
    let (_wal, records, _) = open_collect(&Storage::Os, dir.path(), WalOptions::default());
    assert_eq!(records.len(), 4);
    assert!(records.iter().all(|(_, bytes)| *bytes == record));
}

/// Truncated segments' files come back as recycled segments (no zero-fill), and the stale
/// records they hold past the log's own never come back: a clean reopen finds every
/// record from the first kept one on, in order, reports no stop and discards nothing.
#[test]
fn truncated_segments_are_recycled_and_their_stale_records_never_come_back() {
    let dir = tempfile::tempdir().expect("dir");
    let options = small(Backend::File);
    let (wal, _, _) = open_collect(&Storage::Os, dir.path(), options.clone());
    let mut kept_from = Lsn(1);
    let mut appended = Vec::new();
    for round in 0..12 {
        for sequence in 0..120 {
            let bytes = payload(round, sequence, 900);
            let lsn = wal.append(kind(), &bytes, Durability::Buffered).expect("append");
            appended.push((lsn, bytes));
        }
        wal.sync().expect("sync");
        // Keep the last 60 records: every segment wholly below goes.
        kept_from = Lsn(appended.len() as u64 - 60);
        wal.truncate_below(kept_from).expect("truncate");
    }
    let stats = wal.stats();
    assert!(stats.segments_recycled >= 4, "{stats:?}");
    assert!(stats.segments_removed >= stats.segments_recycled, "{stats:?}");
    wal.close().expect("close");
    drop(wal);
    // What the preparer had not taken yet (counted once its thread stopped).
    let free = std::fs::read_dir(dir.path())
        .expect("list")
        .filter(|entry| {
            entry.as_ref().expect("entry").file_name().to_string_lossy().ends_with(".wal.free")
        })
        .count();
    let (wal, records, report) = open_collect(&Storage::Os, dir.path(), options.clone());
    assert_eq!(report.stop, None, "{report:?}");
    assert_eq!(report.discarded_bytes, 0, "{report:?}");
    assert_eq!(report.removed_free_files, free, "{report:?}");
    let first = records.first().expect("records remain").0;
    assert!(first <= kept_from, "LSN {kept_from} must survive; the first left is {first}");
    let expected: Vec<_> = appended.iter().filter(|(lsn, _)| *lsn >= first).cloned().collect();
    assert!(records == expected, "the records kept, in order, and nothing stale");
    // The reopened log appends into a recycled segment, after its own records and before
    // stale ones, and the next reopen still finds exactly its records.
    let lsn = wal.append(kind(), b"after the reopen", Durability::Sync).expect("append");
    assert_eq!(lsn, appended.last().expect("appended").0.next());
    drop(wal);
    let (_wal, again, report) = open_collect(&Storage::Os, dir.path(), options);
    assert_eq!(again.len(), records.len() + 1);
    assert_eq!(
        again.last().map(|(lsn, bytes)| (*lsn, bytes.as_slice())),
        Some((lsn, &b"after the reopen"[..]))
    );
    assert_eq!((report.stop, report.discarded_bytes), (None, 0));
}
