//! Crash sweeps on the simulated backend: a multi-threaded workload of `Sync` and `Buffered`
//! appends runs once, recording every write, flush and sync; then the log is recovered from
//! crash images taken before every recorded op, 16 or more per point, under torn writes
//! (8 B, 256 B, 4 KiB), random subsets, random prefixes, and all-or-nothing loss. For the pmem
//! backend, unpersisted cache lines are lost or kept line by line.
//!
//! The oracle: recovered records have LSNs 1, 2, 3, ... with no gap; each payload is the
//! one appended with that LSN; every `Sync` append acknowledged before the crash point is
//! there. After recovery the log takes a new record, and a second recovery returns it after
//! the first recovery's records.
//!
//! The file backend also runs with a thread that truncates below the durable LSN as the
//! appends go, so that segments are freed and recycled (their stale records left in place)
//! while crashes hit: then the recovered records start at any LSN up to the highest
//! truncation begun before the crash, and every acknowledged `Sync` append from there on is
//! there.
//!
//! CI runs a smaller instance; the full sweep is
//! `TIERKV_WAL_SWEEP=full cargo test --release -p tierkv-wal --test it crash -- --nocapture`.
//! A failure prints the seed; `TIERKV_SEED=<seed>` replays it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use tierkv_io::sim::{seed_from_env, CrashModel, SimFs, TearSize};
use tierkv_io::Storage;
use tierkv_wal::{Backend, Durability, Lsn, WalOptions};

use crate::{kind, open_collect, payload};

/// Crash models cycled over the images of each point: every tear size comes up in each run
/// of five images.
const MODELS: [CrashModel; 8] = [
    CrashModel::Torn(TearSize::B8),
    CrashModel::Torn(TearSize::B256),
    CrashModel::Torn(TearSize::K4),
    CrashModel::Subset,
    CrashModel::Prefix,
    CrashModel::Torn(TearSize::B8),
    CrashModel::Torn(TearSize::B256),
    CrashModel::Torn(TearSize::K4),
];

struct Sweep {
    threads: usize,
    appends_per_thread: usize,
    images_per_point: usize,
}

fn sweep_size() -> Sweep {
    match std::env::var("TIERKV_WAL_SWEEP").as_deref() {
        Ok("full") => Sweep { threads: 8, appends_per_thread: 32, images_per_point: 32 },
        _ => Sweep { threads: 4, appends_per_thread: 14, images_per_point: 16 },
    }
}

fn options(backend: Backend) -> WalOptions {
    // The smallest segments, so the workload rotates and prepares segments while it runs.
    WalOptions { segment_bytes: WalOptions::MIN_SEGMENT_BYTES, ..WalOptions::with_backend(backend) }
}

/// A `truncate_below(lsn)` call, begun at op `start_op`: a crash from there on may have
/// lost the records below `lsn`.
struct Truncation {
    lsn: Lsn,
    start_op: u64,
}

struct Acked {
    lsn: Lsn,
    sync: bool,
    /// `op_count()` after the append returned: a crash at or after this point keeps it.
    at_op: u64,
}

/// Runs the workload on `fs`; returns every acknowledgement and the payload of every LSN.
fn run_workload(
    fs: &SimFs,
    dir: &Path,
    backend: Backend,
    sweep: &Sweep,
    truncate: bool,
) -> (Vec<Acked>, HashMap<Lsn, Vec<u8>>, Vec<Truncation>) {
    let storage = Storage::Sim(fs.clone());
    let (wal, records, _) = open_collect(&storage, dir, options(backend));
    assert!(records.is_empty());
    let acked = Mutex::new(Vec::new());
    let payloads = Mutex::new(HashMap::new());
    // The log's first record larger than its first segment: it goes to a segment grown for
    // it and leaves the first one empty, which recovery must read past.
    let first = oversized(usize::MAX, 0);
    let lsn = wal.append(kind(), &first, Durability::Sync).expect("append the first record");
    assert_eq!(lsn, Lsn(1));
    acked.lock().expect("lock").push(Acked { lsn, sync: true, at_op: fs.op_count() });
    payloads.lock().expect("lock").insert(lsn, first);
    let truncations = Mutex::new(Vec::new());
    let appending = std::sync::atomic::AtomicUsize::new(sweep.threads);
    std::thread::scope(|scope| {
        if truncate {
            let (wal, truncations, appending) = (&wal, &truncations, &appending);
            scope.spawn(move || {
                let mut below = Lsn(1);
                while appending.load(std::sync::atomic::Ordering::Acquire) > 0 {
                    // A few records behind the durable end: segments wholly below go.
                    let durable = wal.durable_lsn();
                    if durable.get() >= below.get() + 12 {
                        below = Lsn(durable.get() - 4);
                        let start_op = fs.op_count();
                        wal.truncate_below(below).expect("truncate on the live file system");
                        truncations.lock().expect("lock").push(Truncation { lsn: below, start_op });
                    }
                    std::thread::yield_now();
                }
            });
        }
        for thread in 0..sweep.threads {
            let (wal, acked, payloads, appending) = (&wal, &acked, &payloads, &appending);
            scope.spawn(move || {
                for sequence in 0..sweep.appends_per_thread {
                    // One in seven of thread 0's is larger than a segment: it is grown for
                    // the record, outside the lock, while the others append and prepare.
                    let bytes = match thread == 0 && sequence % 7 == 3 {
                        true => oversized(thread, sequence),
                        false => payload(thread, sequence, 300),
                    };
                    let sync = (thread + sequence) % 3 != 0;
                    let durability = if sync { Durability::Sync } else { Durability::Buffered };
                    let lsn = wal
                        .append(kind(), &bytes, durability)
                        .expect("append on the live file system");
                    let at_op = fs.op_count();
                    acked.lock().expect("lock").push(Acked { lsn, sync, at_op });
                    payloads.lock().expect("lock").insert(lsn, bytes);
                }
                appending.fetch_sub(1, std::sync::atomic::Ordering::Release);
            });
        }
    });
    if truncate {
        // The threads' timing decides how much the truncations free: go on, one appender
        // truncating behind itself, until recycled segments have taken records.
        let (mut acked, mut payloads) =
            (acked.lock().expect("lock"), payloads.lock().expect("lock"));
        let mut sequence = 0;
        while wal.stats().segments_recycled < 2 || sequence < 8 {
            assert!(sequence < 500, "nothing was recycled: {:?}", wal.stats());
            let bytes = match sequence % 4 {
                3 => oversized(sweep.threads, sequence),
                _ => payload(sweep.threads, sequence, 300),
            };
            let lsn = wal.append(kind(), &bytes, Durability::Sync).expect("append");
            acked.push(Acked { lsn, sync: true, at_op: fs.op_count() });
            payloads.insert(lsn, bytes);
            let below = Lsn(lsn.get().saturating_sub(3).max(1));
            let start_op = fs.op_count();
            wal.truncate_below(below).expect("truncate");
            truncations.lock().expect("lock").push(Truncation { lsn: below, start_op });
            sequence += 1;
        }
    }
    wal.close().expect("close");
    (
        acked.into_inner().expect("lock"),
        payloads.into_inner().expect("lock"),
        truncations.into_inner().expect("lock"),
    )
}

/// A payload larger than the sweep's segments (`options`), distinct for each append.
fn oversized(thread: usize, sequence: usize) -> Vec<u8> {
    let mut bytes = payload(thread % 1000, sequence, 64);
    bytes.resize(2 * WalOptions::MIN_SEGMENT_BYTES as usize, sequence as u8);
    bytes
}

fn run_sweep(backend: Backend, seed: u64, truncate: bool) {
    let sweep = sweep_size();
    let dir = Path::new("/wal");
    let fs = SimFs::new();
    let (acked, payloads, truncations) = run_workload(&fs, dir, backend, &sweep, truncate);
    let total = acked.len();
    assert!(total > sweep.threads * sweep.appends_per_thread, "{total} appends acknowledged");
    assert!(total >= 50, "the sweep needs at least 50 appends");
    let ops = fs.op_count();
    let mut replay = fs.crash_replay();
    let mut images = 0u64;
    let mut recovered_total = 0u64;
    let mut discarded_images = 0u64;
    for point in 0..=ops {
        for image_index in 0..sweep.images_per_point {
            let model = MODELS[image_index % MODELS.len()];
            let image_seed = seed ^ (point << 20) ^ image_index as u64;
            let image = replay.image(model, image_seed);
            let context = format!(
                "{backend} backend, crash before op {point} of {ops}, model {model}, image seed {image_seed} (TIERKV_SEED={seed})"
            );
            let storage = Storage::Sim(image.clone());
            let (wal, records, report) = open_collect(&storage, dir, options(backend));
            // Records below a truncation begun before the crash may be gone.
            let floor = truncations
                .iter()
                .filter(|truncation| truncation.start_op < point)
                .map(|truncation| truncation.lsn)
                .max()
                .unwrap_or(Lsn(1));
            let first = records.first().map_or(Lsn(1), |(lsn, _)| *lsn);
            assert!(
                first <= floor.max(Lsn(1)) || records.is_empty(),
                "LSNs from {floor} lost: the first recovered is {first}: {context}"
            );
            for (index, (lsn, bytes)) in records.iter().enumerate() {
                assert_eq!(
                    *lsn,
                    Lsn(first.get() + index as u64),
                    "a gap in the recovered LSNs: {context}"
                );
                assert_eq!(
                    Some(bytes),
                    payloads.get(lsn),
                    "LSN {lsn} has the wrong payload: {context}"
                );
            }
            let last = records.last().map_or(Lsn::ZERO, |(lsn, _)| *lsn);
            for ack in acked.iter().filter(|ack| ack.sync && ack.at_op <= point && ack.lsn >= floor)
            {
                assert!(
                    first <= ack.lsn && ack.lsn <= last,
                    "acknowledged Sync LSN {} lost (recovered up to {last}): {context}",
                    ack.lsn
                );
            }
            recovered_total += records.len() as u64;
            discarded_images += u64::from(report.discarded_bytes > 0);
            // The repaired log takes new records, and they come back after the old ones.
            if image_index == 0 || report.discarded_bytes > 0 {
                let lsn = wal.append(kind(), b"after the crash", Durability::Sync).expect(&context);
                assert_eq!(lsn, last.next(), "{context}");
                wal.close().expect(&context);
                let first_report = report;
                let (_wal, again, report) = open_collect(&storage, dir, options(backend));
                assert_eq!(again.len(), records.len() + 1, "{context}");
                assert_eq!(
                    again.last().map(|(lsn, bytes)| (*lsn, bytes.as_slice())),
                    Some((lsn, &b"after the crash"[..])),
                    "{context}"
                );
                assert_eq!(report.discarded_bytes, 0, "discarded bytes came back: {context}");
                assert_eq!(
                    report.stop, None,
                    "a clean reopen reported a stop: {context}; the first recovery: {first_report:?}"
                );
            }
            images += 1;
        }
        if point < ops {
            assert!(replay.advance());
        }
    }
    eprintln!(
        "{backend} sweep{truncated}: {total} appends, {ops} crash points, {images} images, {} records recovered on average, {discarded_images} images with a discarded tail",
        recovered_total / images.max(1),
        truncated = if truncate { " with truncation" } else { "" },
    );
    assert!(discarded_images > 0, "no image ever had a torn tail: the sweep tests nothing");
}

#[test]
fn file_backend_crash_sweep() {
    run_sweep(Backend::File, seed_from_env(0x5eed_0f11), false);
}

#[test]
fn file_backend_crash_sweep_with_truncation_and_recycled_segments() {
    run_sweep(Backend::File, seed_from_env(0x5eed_0f12), true);
}

#[test]
fn pmem_backend_crash_sweep_with_cache_line_loss() {
    run_sweep(Backend::Pmem, seed_from_env(0x5eed_9e33), false);
}

/// A recycled segment left as the log's only one with no record of its own (every
/// segment before it truncated, its own records not yet durable at the crash) is removed
/// at recovery: the log then starts again from any LSN (1, or where `start_after` puts
/// it), below the segment's stale bound, and records appended into it could line up with
/// its stale ones, which a later recovery would take as the chain's next records. (With
/// the removal left out, the reopen below returned 11 stale records after the 3 new ones.)
#[test]
fn a_recycled_segment_with_no_record_of_its_own_is_removed() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let dir = Path::new("/wal");
    // Segments of 32 KiB: room for stale records past the first 4 KiB a recycling zeroes.
    let options = WalOptions {
        segment_bytes: 32 << 10,
        first_segment_bytes: 32 << 10,
        ..WalOptions::with_backend(Backend::File)
    };
    let (wal, _, _) = open_collect(&storage, dir, options.clone());
    // Same-sized records, so that a new chain from LSN 1 lines up with the stale ones.
    let record = |lsn: u64| {
        let mut bytes = payload(0, lsn as usize, 1);
        bytes.resize(2000, lsn as u8);
        bytes
    };
    let mut lsn = Lsn::ZERO;
    while wal.stats().segments_recycled == 0 || wal.stats().rotations < 6 {
        lsn = wal.append(kind(), &record(lsn.get() + 1), Durability::Sync).expect("append");
        wal.truncate_below(Lsn(lsn.get().saturating_sub(2))).expect("truncate");
        assert!(lsn < Lsn(10_000), "no segment was recycled: {:?}", wal.stats());
    }
    // Rotate into the next prepared segment with a record not made durable, until that
    // segment is a recycled one (its header's flag, byte 33; the preparer zero-fills a
    // new file when no free one is large enough).
    let recycled = |path: &Path| fs.read_file(path).expect("read")[33] == 1;
    let active = loop {
        let rotations = wal.stats().rotations;
        while wal.stats().rotations == rotations {
            lsn = wal.append(kind(), &record(lsn.get() + 1), Durability::None).expect("append");
        }
        let active = wal.segment_paths().pop().expect("an active segment");
        if recycled(&active) {
            break active;
        }
        wal.sync().expect("sync");
        wal.truncate_below(Lsn(lsn.get() - 2)).expect("truncate");
        assert!(lsn < Lsn(10_000), "no recycled segment became active: {:?}", wal.stats());
    };
    // Every segment before the active one goes: the active one holds the last record.
    wal.truncate_below(lsn).expect("truncate");
    assert_eq!(wal.segment_paths(), std::slice::from_ref(&active));
    let image = fs.crash_image(fs.op_count(), CrashModel::DropAll, 1);
    drop(wal);
    // The file's stale records: its earlier life's, 2,024 bytes each from offset 4096; the
    // recycling zeroed the first 4 KiB of them, so the fourth (at 10,168) is whole.
    let stale_at = 4096 + 3 * 2024;
    let bytes = image.read_file(&active).expect("read the recycled segment");
    let fourth =
        Lsn(u64::from_le_bytes(bytes[stale_at + 8..stale_at + 16].try_into().expect("8 bytes")));
    assert!(fourth > Lsn(3), "no stale record at {stale_at}");
    let storage = Storage::Sim(image);
    let (wal, records, report) = open_collect(&storage, dir, options.clone());
    assert!(records.is_empty(), "{report:?}");
    assert!(report.removed_segments.contains(&active), "{report:?}");
    // A log that starts again where the stale records' LSNs are (a copy's new log, as
    // `start_after` is for) writes three records that end where the stale fourth starts:
    // in the kept segment, the next recovery would take that stale record as the fourth.
    let first = Lsn(fourth.get() - 3);
    wal.start_after(Lsn(first.get() - 1)).expect("start after");
    let fresh = |lsn: Lsn| {
        let mut bytes = record(lsn.get());
        bytes.fill(0xEE);
        bytes
    };
    for offset in 0..3 {
        let lsn = Lsn(first.get() + offset);
        assert_eq!(wal.append(kind(), &fresh(lsn), Durability::Sync).expect("append"), lsn);
    }
    drop(wal);
    let (_wal, again, report) = open_collect(&storage, dir, options);
    let lsns: Vec<Lsn> = again.iter().map(|(lsn, _)| *lsn).collect();
    assert_eq!(
        lsns,
        (0..3).map(|offset| Lsn(first.get() + offset)).collect::<Vec<_>>(),
        "{report:?}"
    );
    assert!(again.iter().all(|(lsn, bytes)| *bytes == fresh(*lsn)), "a stale record came back");
}
