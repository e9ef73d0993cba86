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
) -> (Vec<Acked>, HashMap<Lsn, Vec<u8>>) {
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
    std::thread::scope(|scope| {
        for thread in 0..sweep.threads {
            let (wal, acked, payloads) = (&wal, &acked, &payloads);
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
            });
        }
    });
    wal.close().expect("close");
    (acked.into_inner().expect("lock"), payloads.into_inner().expect("lock"))
}

/// A payload larger than the sweep's segments (`options`), distinct for each append.
fn oversized(thread: usize, sequence: usize) -> Vec<u8> {
    let mut bytes = payload(thread % 1000, sequence, 64);
    bytes.resize(2 * WalOptions::MIN_SEGMENT_BYTES as usize, sequence as u8);
    bytes
}

fn run_sweep(backend: Backend, seed: u64) {
    let sweep = sweep_size();
    let dir = Path::new("/wal");
    let fs = SimFs::new();
    let (acked, payloads) = run_workload(&fs, dir, backend, &sweep);
    let total = sweep.threads * sweep.appends_per_thread + 1;
    assert_eq!(acked.len(), total);
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
            for (index, (lsn, bytes)) in records.iter().enumerate() {
                assert_eq!(*lsn, Lsn(index as u64 + 1), "a gap in the recovered LSNs: {context}");
                assert_eq!(
                    Some(bytes),
                    payloads.get(lsn),
                    "LSN {lsn} has the wrong payload: {context}"
                );
            }
            let last = records.last().map_or(Lsn::ZERO, |(lsn, _)| *lsn);
            for ack in acked.iter().filter(|ack| ack.sync && ack.at_op <= point) {
                assert!(
                    ack.lsn <= last,
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
                let (_wal, again, report) = open_collect(&storage, dir, options(backend));
                assert_eq!(again.len(), records.len() + 1, "{context}");
                assert_eq!(
                    again.last().map(|(lsn, bytes)| (*lsn, bytes.as_slice())),
                    Some((lsn, &b"after the crash"[..])),
                    "{context}"
                );
                assert_eq!(report.discarded_bytes, 0, "discarded bytes came back: {context}");
            }
            images += 1;
        }
        if point < ops {
            assert!(replay.advance());
        }
    }
    eprintln!(
        "{backend} sweep: {total} appends, {ops} crash points, {images} images, {} records recovered on average, {discarded_images} images with a discarded tail",
        recovered_total / images.max(1)
    );
    assert!(discarded_images > 0, "no image ever had a torn tail: the sweep tests nothing");
}

#[test]
fn file_backend_crash_sweep() {
    run_sweep(Backend::File, seed_from_env(0x5eed_0f11));
}

#[test]
fn pmem_backend_crash_sweep_with_cache_line_loss() {
    run_sweep(Backend::Pmem, seed_from_env(0x5eed_9e33));
}
