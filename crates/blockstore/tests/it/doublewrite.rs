//! Tests of `DoublewriteStore`: round trips on real files with every codec and read method,
//! a crash sweep on the simulated backend, torn in-place writes repaired by the doublewrite
//! redo, bit flips reported as `Corruption`, and injected faults that poison the store.
//!
//! The sweep's oracle is the log store's: the recovered content equals the content after some
//! prefix of the groups, at least as long as the groups acknowledged before the crash point.
//! CI runs a small instance; the full one is
//! `TIERKV_BLOCKS_SWEEP=full cargo test --release -p tierkv-blockstore --test it doublewrite -- --nocapture`.
//! A failure prints the seed; `TIERKV_SEED=<seed>` replays it.

use std::path::{Path, PathBuf};

use tierkv_blockstore::format::{self, HeaderProblem, BLOCK_HEADER_BYTES};
use tierkv_blockstore::{
    BlockError, BlockId, BlockStore, BlockWrite, Codec, DoublewriteOptions, DoublewriteStore,
    StoreKind,
};
use tierkv_io::sim::{seed_from_env, CrashModel, FaultPlan, SimFs, SimOpKind, TearSize};
use tierkv_io::{AccessMethod, FaultErrno, Op, OpenOptions, Storage};

use crate::{content, prefix_states, Content, Group, MODELS};

/// `groups` random groups of `min..=max` changes over ids `0..ids`; every fifth change after
/// the first two groups deletes. Payloads run from empty to `max_bytes`.
fn make_groups(
    seed: u64,
    groups: usize,
    blocks: (usize, usize),
    ids: &[u64],
    max_bytes: usize,
) -> Vec<Group> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..groups)
        .map(|g| {
            let size = rng.usize(blocks.0..=blocks.1).min(ids.len());
            let mut pool = ids.to_vec();
            rng.shuffle(&mut pool);
            let changes = pool[..size]
                .iter()
                .map(|&id| {
                    let id = BlockId(id);
                    if g > 1 && rng.usize(..5) == 0 {
                        (id, None)
                    } else {
                        let len = match rng.usize(..8) {
                            0 => 0,
                            1 => max_bytes,
                            _ => rng.usize(1..=max_bytes),
                        };
                        (id, Some(content(id, g as u64 + 1, len)))
                    }
                })
                .collect();
            Group { changes }
        })
        .collect()
}

fn read_all(store: &DoublewriteStore, ids: &[u64]) -> Result<Content, BlockError> {
    let mut found = Content::new();
    for &id in ids {
        if let Some(bytes) = store.read(BlockId(id))? {
            found.insert(BlockId(id), bytes);
        }
    }
    Ok(found)
}

fn open(storage: &Storage, dir: &Path, options: &DoublewriteOptions) -> DoublewriteStore {
    DoublewriteStore::open(storage, dir, options.clone()).expect("open")
}

/// Opens on the OS, or `None` where the file system refuses O_DIRECT (tmpfs).
fn open_os(dir: &Path, options: &DoublewriteOptions) -> Option<DoublewriteStore> {
    match DoublewriteStore::open(&Storage::Os, dir, options.clone()) {
        Ok(store) => {
            let report = store.recovery_report().clone();
            assert!(!report.doublewrite_redone, "a fresh store has nothing to redo");
            Some(store)
        }
        Err(BlockError::Io(tierkv_io::Error::DirectIoUnsupported { fs_type, .. }))
            if options.read_method == AccessMethod::Direct =>
        {
            eprintln!("skipping O_DIRECT: the {fs_type} file system under {dir:?} refuses it");
            None
        }
        Err(error) => panic!("open {dir:?}: {error}"),
    }
}

fn round_trip(read_method: AccessMethod, codec: Codec) {
    let temp = tempfile::tempdir().expect("a temporary directory");
    let dir = temp.path().join("store").join("dw");
    let options = DoublewriteOptions {
        read_method,
        codec,
        slot_bytes: 8192,
        ..DoublewriteOptions::default()
    };
    let Some(store) = open_os(&dir, &options) else { return };
    let context = format!("{read_method} {codec}");
    assert_eq!(store.kind(), StoreKind::Doublewrite);
    assert_eq!(store.max_block_bytes(), 8192 - BLOCK_HEADER_BYTES);
    // Ids far apart grow pages.dat past its first megabyte while readers hold a handle.
    let ids: Vec<u64> = (0..24).chain([130, 131, 400, 401, 1000]).collect();
    let groups = make_groups(0xd0b1e, 14, (3, 8), &ids, store.max_block_bytes());
    let mut model = Content::new();
    let mut puts = 0u64;
    let mut payload = 0u64;
    for group in &groups {
        let id = store.apply_group(&group.writes()).expect("apply_group");
        assert!(id.0 >= 1);
        group.apply_to(&mut model);
        assert_eq!(read_all(&store, &ids).expect("read"), model, "{context}");
        puts += group.changes.len() as u64;
        payload +=
            group.changes.iter().map(|(_, b)| b.as_ref().map_or(0, Vec::len) as u64).sum::<u64>();
    }
    let stats = store.stats();
    assert_eq!(stats.groups, groups.len() as u64, "{context}");
    assert_eq!(stats.blocks, puts, "{context}");
    assert_eq!(stats.payload_bytes, payload, "{context}");
    assert_eq!(stats.syncs, 2 * groups.len() as u64, "two syncs per group: {context}");
    assert_eq!(stats.device_bytes_written, stats.doublewrite_bytes + stats.in_place_bytes);
    // The batch is every slot write plus a 64-byte header per group.
    assert_eq!(stats.doublewrite_bytes, stats.in_place_bytes + 64 * groups.len() as u64);
    assert!(stats.reads > 0 && stats.read_bytes > 0, "{context}");
    assert!(stats.live_bytes > 0 && stats.file_bytes >= 1001 * 8192, "{stats:?}");
    if codec != Codec::None {
        assert!(stats.in_place_bytes < payload, "{codec} saved nothing: {stats:?}");
    }
    let verified = store.verify().expect("verify");
    assert_eq!(verified.blocks, model.len() as u64, "{context}");
    assert_eq!(verified.bytes, stats.live_bytes, "{context}");
    assert!(store.checkpoint().is_ok());
    store.close().expect("close");
    assert!(matches!(store.read(BlockId(0)), Err(BlockError::Closed { .. })));
    assert!(matches!(store.write_group(&[(BlockId(0), b"x")]), Err(BlockError::Closed { .. })));
    assert!(matches!(store.close(), Err(BlockError::Closed { .. })));
    drop(store);

    // A clean close empties the doublewrite file: nothing to redo.
    let store = DoublewriteStore::open(&Storage::Os, &dir, options.clone()).expect("reopen");
    let report = store.recovery_report().clone();
    assert!(!report.doublewrite_redone && report.stop.is_none(), "{report:?}");
    assert_eq!(read_all(&store, &ids).expect("read after reopen"), model, "{context}");
    assert_eq!(store.stats().live_bytes, stats.live_bytes);
    let last = Group {
        changes: vec![
            (BlockId(0), Some(content(BlockId(0), 99, 5000))),
            (BlockId(1), None),
            (BlockId(2000), Some(content(BlockId(2000), 99, 100))),
        ],
    };
    store.apply_group(&last.writes()).expect("a group after reopen");
    last.apply_to(&mut model);
    // Dropped without close, as a process that died after the group: its batch is redone.
    drop(store);
    let store = DoublewriteStore::open(&Storage::Os, &dir, options).expect("reopen");
    let report = store.recovery_report().clone();
    assert!(report.doublewrite_redone && report.blocks_applied == 3, "{report:?}");
    let ids: Vec<u64> = ids.into_iter().chain([2000]).collect();
    assert_eq!(read_all(&store, &ids).expect("read after redo"), model, "{context}");
    let live: Vec<BlockId> = model.keys().copied().collect();
    assert_eq!(store.live_ids().expect("live ids"), live, "{context}");
    store.close().expect("close");
}

#[test]
fn doublewrite_round_trip_syscall() {
    for codec in [Codec::None, Codec::Lz4, Codec::Zstd] {
        round_trip(AccessMethod::Syscall, codec);
    }
}

#[test]
fn doublewrite_round_trip_direct() {
    for codec in [Codec::None, Codec::Lz4, Codec::Zstd] {
        round_trip(AccessMethod::Direct, codec);
    }
}

#[test]
fn doublewrite_round_trip_mmap() {
    for codec in [Codec::None, Codec::Lz4, Codec::Zstd] {
        round_trip(AccessMethod::Mmap, codec);
    }
}

#[test]
fn doublewrite_rejects_bad_groups_and_options() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs);
    let options = DoublewriteOptions { slot_bytes: 4096, ..DoublewriteOptions::default() };
    let store = open(&storage, Path::new("/dw"), &options);
    let max = store.max_block_bytes();
    assert_eq!(max, 4096 - 64);
    let big = vec![7u8; max + 1];
    let exact = vec![7u8; max];
    assert!(matches!(store.apply_group(&[]), Err(BlockError::InvalidGroup(_))));
    assert!(matches!(
        store.apply_group(&[BlockWrite::Put(BlockId(1), b"a"), BlockWrite::Delete(BlockId(1))]),
        Err(BlockError::InvalidGroup(_))
    ));
    assert!(matches!(
        store.write_group(&[(BlockId(1 << 32), b"a")]),
        Err(BlockError::InvalidGroup(_))
    ));
    assert!(matches!(
        store.write_group(&[(BlockId(3), &big)]),
        Err(BlockError::BlockTooLarge { id: BlockId(3), len, max: m }) if len == max + 1 && m == max
    ));
    // Rejected groups change nothing and do not poison.
    store.write_group(&[(BlockId(3), &exact), (BlockId((1 << 32) - 1), b"last id")]).expect("fits");
    assert_eq!(store.read(BlockId(3)).expect("read"), Some(exact));
    assert_eq!(store.read(BlockId((1 << 32) - 1)).expect("read").as_deref(), Some(&b"last id"[..]));
    assert_eq!(store.read(BlockId(1 << 40)).expect("an id out of range is absent"), None);
    for bad in [
        DoublewriteOptions { slot_bytes: 6000, ..DoublewriteOptions::default() },
        DoublewriteOptions { slot_bytes: 0, ..DoublewriteOptions::default() },
        DoublewriteOptions { read_method: AccessMethod::Pmem, ..DoublewriteOptions::default() },
    ] {
        assert!(matches!(
            DoublewriteStore::open(&storage, "/other", bad),
            Err(BlockError::InvalidOptions(_))
        ));
    }
}

struct Sweep {
    groups: usize,
    ids: u64,
    images_per_point: usize,
}

fn sweep_size() -> Sweep {
    match std::env::var("TIERKV_BLOCKS_SWEEP").as_deref() {
        Ok("full") => Sweep { groups: 40, ids: 24, images_per_point: 32 },
        _ => Sweep { groups: 20, ids: 16, images_per_point: 16 },
    }
}

fn sweep_options() -> DoublewriteOptions {
    // 8 KiB slots: a block spans many 512-byte and two 4 KiB tear pieces.
    DoublewriteOptions { slot_bytes: 8192, ..DoublewriteOptions::default() }
}

#[test]
fn doublewrite_crash_sweep() {
    run_doublewrite_sweep("doublewrite sweep", seed_from_env(0xd0b1_e5ee), &sweep_size(), (3, 8));
}

/// Groups of 80 to 96 blocks of up to 8 KiB (about 400 KiB): their batches go to
/// doublewrite.dat in several pieces (of 128 KiB), and their slots
/// are handed to the write-back thread as they are written.
#[test]
fn doublewrite_crash_sweep_of_large_batches() {
    let sweep = match std::env::var("TIERKV_BLOCKS_SWEEP").as_deref() {
        Ok("full") => Sweep { groups: 8, ids: 96, images_per_point: 16 },
        _ => Sweep { groups: 4, ids: 96, images_per_point: 8 },
    };
    run_doublewrite_sweep(
        "doublewrite sweep, large batches",
        seed_from_env(0xd0b1_1a26),
        &sweep,
        (80, 96),
    );
}

fn run_doublewrite_sweep(name: &str, seed: u64, sweep: &Sweep, blocks: (usize, usize)) {
    let ids: Vec<u64> = (0..sweep.ids).collect();
    let options = sweep_options();
    let groups = make_groups(seed, sweep.groups, blocks, &ids, 8192 - 64);
    let states = prefix_states(&groups);
    let dir = Path::new("/var/dw");
    let fs = SimFs::new();
    let mut acked = Vec::new();
    {
        let store = open(&Storage::Sim(fs.clone()), dir, &options);
        for group in &groups {
            store.apply_group(&group.writes()).expect("a group on the live file system");
            acked.push(fs.op_count());
        }
        store.close().expect("close");
    }
    let ops = fs.op_count();
    let mut replay = fs.crash_replay();
    let (mut images, mut redone, mut discarded, mut recovered_groups) = (0u64, 0u64, 0u64, 0usize);
    for point in 0..=ops {
        let must_have = acked.iter().filter(|&&at| at <= point).count();
        for image_index in 0..sweep.images_per_point {
            let model = MODELS[image_index % MODELS.len()];
            let image_seed = seed ^ (point << 20) ^ image_index as u64;
            let context = format!(
                "crash before op {point} of {ops}, model {model}, image seed {image_seed}, {must_have} groups acknowledged (TIERKV_SEED={seed})"
            );
            let storage = Storage::Sim(replay.image(model, image_seed));
            let store = DoublewriteStore::open(&storage, dir, options.clone())
                .unwrap_or_else(|e| panic!("recovery failed: {e}: {context}"));
            let report = store.recovery_report().clone();
            let found = read_all(&store, &ids).unwrap_or_else(|e| panic!("read: {e}: {context}"));
            let Some(k) = (must_have..states.len()).find(|&k| states[k] == found) else {
                panic!(
                    "the recovered content is not the content after any prefix of at least {must_have} groups: {context}"
                );
            };
            recovered_groups += k;
            redone += u64::from(report.doublewrite_redone);
            discarded += u64::from(report.stop.is_some());
            let verified = store.verify().unwrap_or_else(|e| panic!("verify: {e}: {context}"));
            assert_eq!(verified.blocks, found.len() as u64, "{context}");
            if image_index == 0 || report.doublewrite_redone {
                // The store takes a new group, and a second recovery keeps it.
                let extra = BlockId(sweep.ids + 1);
                store
                    .write_group(&[(extra, b"after the crash"), (BlockId(0), b"zero again")])
                    .unwrap_or_else(|e| panic!("write after recovery: {e}: {context}"));
                drop(store);
                let again = open(&storage, dir, &options);
                let mut expected = states[k].clone();
                expected.insert(BlockId(0), b"zero again".to_vec());
                expected.insert(extra, b"after the crash".to_vec());
                let ids_and_extra: Vec<u64> = ids.iter().copied().chain([extra.0]).collect();
                assert_eq!(read_all(&again, &ids_and_extra).expect("read"), expected, "{context}");
            }
            images += 1;
        }
        if point < ops {
            assert!(replay.advance());
        }
    }
    eprintln!(
        "{name}: {} groups, {ops} crash points, {images} images, {} groups recovered on average, {redone} batches redone, {discarded} incomplete batches discarded",
        groups.len(),
        recovered_groups / images.max(1) as usize
    );
    assert!(redone > 0, "no image had a batch to redo: the sweep tests nothing");
    assert!(discarded > 0, "no image had an incomplete batch: the sweep tests nothing");
}

/// The slot `id` in a raw `pages.dat`: `Ok(true)` a valid block, `Ok(false)` empty, `Err` torn.
fn slot_state(pages: &[u8], id: u64, slot_bytes: usize) -> Result<bool, String> {
    let Some(slot) = pages.get(id as usize * slot_bytes..(id as usize + 1) * slot_bytes) else {
        return Ok(false);
    };
    let header = match format::decode_header(slot) {
        Ok(header) => header,
        Err(HeaderProblem::Zero) => return Ok(false),
        Err(HeaderProblem::Invalid(detail)) => return Err(detail),
    };
    let Some(payload) =
        slot.get(BLOCK_HEADER_BYTES..BLOCK_HEADER_BYTES + header.stored_len as usize)
    else {
        return Err(format!("{} stored bytes do not fit the slot", header.stored_len));
    };
    format::verify_block(&slot[..BLOCK_HEADER_BYTES], payload)?;
    Ok(true)
}

#[test]
fn doublewrite_redo_repairs_torn_in_place_writes() {
    let seed = seed_from_env(0x7042_d0b1);
    let options = sweep_options();
    let slot_bytes = options.slot_bytes as usize;
    let dir = Path::new("/torn");
    let pages_path = dir.join("pages.dat");
    let fs = SimFs::new();
    let ids = [0u64, 1, 2, 5];
    let first = Group {
        changes: ids.iter().map(|&id| (BlockId(id), Some(content(BlockId(id), 1, 6000)))).collect(),
    };
    let second = Group {
        changes: ids.iter().map(|&id| (BlockId(id), Some(content(BlockId(id), 2, 8000)))).collect(),
    };
    let mut after_second = Content::new();
    first.apply_to(&mut after_second);
    second.apply_to(&mut after_second);
    let start;
    {
        let store = open(&Storage::Sim(fs.clone()), dir, &options);
        store.apply_group(&first.writes()).expect("first group");
        start = fs.op_count();
        store.apply_group(&second.writes()).expect("second group");
    }
    // The second group's in-place phase: from its first write to pages.dat up to the sync.
    let ops = fs.ops();
    let in_place: Vec<u64> = ops[start as usize..]
        .iter()
        .filter(|op| op.kind == SimOpKind::Write && op.path == pages_path)
        .map(|op| op.index)
        .collect();
    assert_eq!(in_place.len(), ids.len(), "one pwrite per block: {ops:?}");
    let sync = ops[start as usize..]
        .iter()
        .find(|op| op.kind == SimOpKind::Sync && op.path == pages_path)
        .expect("the in-place sync")
        .index;
    assert!(sync > in_place[ids.len() - 1]);
    let (mut images, mut torn_images) = (0u64, 0u64);
    for at_op in in_place[0] + 1..=sync {
        for (n, tear) in
            [TearSize::B512, TearSize::K4, TearSize::B8].into_iter().cycle().take(24).enumerate()
        {
            let image_seed = seed ^ (at_op << 16) ^ n as u64;
            let context = format!(
                "crash before op {at_op}, torn-{}, seed {image_seed} (TIERKV_SEED={seed})",
                tear.bytes()
            );
            let image = fs.crash_image(at_op, CrashModel::Torn(tear), image_seed);
            let raw = image.read_file(&pages_path).expect("pages.dat");
            let torn = ids.iter().filter(|&&id| slot_state(&raw, id, slot_bytes).is_err()).count();
            torn_images += u64::from(torn > 0);
            let store = DoublewriteStore::open(&Storage::Sim(image.clone()), dir, options.clone())
                .unwrap_or_else(|e| panic!("recovery failed: {e}: {context}"));
            let report = store.recovery_report().clone();
            assert!(report.doublewrite_redone, "{context}: {report:?}");
            assert_eq!(report.blocks_applied, ids.len() as u64, "{context}");
            // The batch was durable before the first in-place write: the whole second group.
            assert_eq!(read_all(&store, &ids).expect("read"), after_second, "{context}");
            let repaired = image.read_file(&pages_path).expect("pages.dat");
            for &id in &ids {
                assert_eq!(slot_state(&repaired, id, slot_bytes), Ok(true), "slot {id}: {context}");
            }
            images += 1;
        }
    }
    eprintln!(
        "torn in-place writes: {images} images, {torn_images} with a torn slot, all repaired"
    );
    assert!(torn_images > 0, "no image had a torn slot: the test tests nothing");
}

/// Flips one bit of `path` at `offset` through a separate handle.
fn flip_bit(storage: &Storage, path: &Path, offset: u64) {
    let file = storage.open(path, &OpenOptions::new(AccessMethod::Syscall)).expect("open for flip");
    let mut byte = [0u8; 1];
    file.read_at(&mut byte, offset).expect("read byte");
    byte[0] ^= 0x10;
    file.write_at(&byte, offset).expect("write byte");
    file.sync_data().expect("sync");
}

fn expect_corruption(
    result: Result<impl std::fmt::Debug, BlockError>,
    file: &Path,
    offset: u64,
    context: &str,
) {
    match result {
        Err(BlockError::Corruption { file: f, offset: o, detail, .. }) => {
            assert_eq!((f.as_path(), o), (file, offset), "{context}: {detail}");
        }
        other => panic!("expected corruption at {file:?}:{offset}, got {other:?}: {context}"),
    }
}

#[test]
fn doublewrite_bit_flips_are_corruption() {
    for read_method in [AccessMethod::Syscall, AccessMethod::Mmap] {
        let temp = tempfile::tempdir().expect("a temporary directory");
        let dir = temp.path().join("dw");
        let options =
            DoublewriteOptions { read_method, slot_bytes: 4096, ..DoublewriteOptions::default() };
        let storage = Storage::Os;
        let store = open(&storage, &dir, &options);
        let blocks: Vec<(BlockId, Vec<u8>)> =
            (0..8).map(|id| (BlockId(id), content(BlockId(id), 1, 3000))).collect();
        let refs: Vec<(BlockId, &[u8])> =
            blocks.iter().map(|(id, b)| (*id, b.as_slice())).collect();
        store.write_group(&refs).expect("write");
        let pages: PathBuf = dir.join("pages.dat");
        // Slot 3: a bit of the header's group field. Slot 5: a bit in the payload.
        flip_bit(&storage, &pages, 3 * 4096 + 17);
        flip_bit(&storage, &pages, 5 * 4096 + 64 + 1000);
        let context = format!("{read_method}");
        expect_corruption(store.read(BlockId(3)), &pages, 3 * 4096, &context);
        expect_corruption(store.read(BlockId(5)), &pages, 5 * 4096, &context);
        for (id, bytes) in &blocks {
            if id.0 != 3 && id.0 != 5 {
                assert_eq!(
                    store.read(*id).expect("an intact block").as_ref(),
                    Some(bytes),
                    "{context}"
                );
            }
        }
        expect_corruption(store.verify(), &pages, 3 * 4096, &context);
        store.close().expect("close");
        drop(store);
        // Recovery checks every slot and refuses to open over a damaged one.
        expect_corruption(
            DoublewriteStore::open(&storage, &dir, options.clone()),
            &pages,
            3 * 4096,
            &context,
        );
        flip_bit(&storage, &pages, 3 * 4096 + 17);
        expect_corruption(
            DoublewriteStore::open(&storage, &dir, options.clone()),
            &pages,
            5 * 4096,
            &context,
        );
    }
}

#[test]
fn doublewrite_failed_sync_of_the_batch_poisons() {
    let dir = Path::new("/faults");
    let options = sweep_options();
    let ids: Vec<u64> = (0..6).collect();
    let groups = make_groups(11, 3, (3, 6), &ids, 5000);
    let states = prefix_states(&groups);
    let fs = SimFs::new();
    let store = open(&Storage::Sim(fs.clone()), dir, &options);
    store.apply_group(&groups[0].writes()).expect("first group");
    // The next sync is the second group's doublewrite sync.
    fs.set_fault(Some(FaultPlan::once(fs.calls() + 1, FaultErrno::Eio).only(Op::Sync)));
    let error = store.apply_group(&groups[1].writes()).expect_err("the sync fails");
    assert!(
        matches!(&error, BlockError::Io(_)) && error.to_string().contains("doublewrite.dat"),
        "{error}"
    );
    assert!(matches!(store.apply_group(&groups[2].writes()), Err(BlockError::Poisoned { .. })));
    // The batch never reached the slots: reads still see the first group.
    assert_eq!(read_all(&store, &ids).expect("read"), states[1]);
    assert!(matches!(store.close(), Ok(())));
    let ops = fs.op_count();
    drop(store);
    // Linux may drop the pages of a failed fsync: with nothing pending kept, only the first
    // group is there.
    let image = fs.crash_image(ops, CrashModel::DropAll, 1);
    let store = DoublewriteStore::open(&Storage::Sim(image), dir, options.clone()).expect("reopen");
    let report = store.recovery_report().clone();
    // The first group's batch is still there, complete: redone, to the same bytes.
    assert!(
        report.doublewrite_redone && report.blocks_applied == groups[0].changes.len() as u64,
        "{report:?}"
    );
    assert_eq!(read_all(&store, &ids).expect("read"), states[1]);
    store.apply_group(&groups[1].writes()).expect("writes work again after reopen");
    // On the live file system (a process restart, no power loss) it is one or the other.
    let store = DoublewriteStore::open(&Storage::Sim(fs.clone()), dir, options).expect("reopen");
    let found = read_all(&store, &ids).expect("read");
    assert!(found == states[1] || found == states[2], "a group came back in part");
}

#[test]
fn doublewrite_failed_sync_of_the_slots_poisons_and_redo_keeps_the_group() {
    let dir = Path::new("/faults");
    let options = sweep_options();
    let ids: Vec<u64> = (0..6).collect();
    let groups = make_groups(12, 3, (3, 6), &ids, 5000);
    let states = prefix_states(&groups);
    let fs = SimFs::new();
    let store = open(&Storage::Sim(fs.clone()), dir, &options);
    store.apply_group(&groups[0].writes()).expect("first group");
    // Call +1 writes the batch, +2 syncs it; the first sync from +3 on is the slots' sync.
    fs.set_fault(Some(FaultPlan::once(fs.calls() + 3, FaultErrno::Eio).only(Op::Sync)));
    let error = store.apply_group(&groups[1].writes()).expect_err("the sync fails");
    assert!(error.to_string().contains("pages.dat"), "{error}");
    // The group is durable in the doublewrite file, so readers may see it: all of it.
    assert_eq!(read_all(&store, &ids).expect("read"), states[2]);
    assert!(matches!(store.apply_group(&groups[2].writes()), Err(BlockError::Poisoned { .. })));
    let ops = fs.op_count();
    drop(store);
    for model in [CrashModel::DropAll, CrashModel::Torn(TearSize::B512), CrashModel::KeepAll] {
        let image = fs.crash_image(ops, model, 7);
        let store =
            DoublewriteStore::open(&Storage::Sim(image), dir, options.clone()).expect("reopen");
        let report = store.recovery_report().clone();
        assert!(report.doublewrite_redone, "{model}: {report:?}");
        assert_eq!(read_all(&store, &ids).expect("read"), states[2], "{model}");
    }
}

#[test]
fn doublewrite_failed_in_place_write_never_returns_other_content() {
    let dir = Path::new("/faults");
    let options = sweep_options();
    let ids: Vec<u64> = (0..6).collect();
    let first = Group {
        changes: ids.iter().map(|&id| (BlockId(id), Some(content(BlockId(id), 1, 3000)))).collect(),
    };
    let second = Group {
        changes: ids.iter().map(|&id| (BlockId(id), Some(content(BlockId(id), 2, 3000)))).collect(),
    };
    let states = prefix_states(&[first.clone(), second.clone()]);
    let fs = SimFs::new();
    let store = open(&Storage::Sim(fs.clone()), dir, &options);
    store.apply_group(&first.writes()).expect("first group");
    // Call +1 writes the batch, +2 syncs it, +3 and on write slots: the second slot fails.
    fs.set_fault(Some(FaultPlan::once(fs.calls() + 4, FaultErrno::Eio).only(Op::Write)));
    store.apply_group(&second.writes()).expect_err("a slot write fails");
    // Each block reads as the second group's content or as Corruption, never as the first's.
    let (mut new, mut corrupt) = (0, 0);
    for &id in &ids {
        match store.read(BlockId(id)) {
            Ok(Some(bytes)) => {
                assert_eq!(Some(&bytes), states[2].get(&BlockId(id)), "block {id}");
                new += 1;
            }
            Err(BlockError::Corruption { .. }) => corrupt += 1,
            other => panic!("block {id}: {other:?}"),
        }
    }
    assert!(new >= 1 && corrupt >= 1, "{new} new, {corrupt} corrupt");
    assert!(matches!(store.apply_group(&first.writes()), Err(BlockError::Poisoned { .. })));
    drop(store);
    let store = DoublewriteStore::open(&Storage::Sim(fs.clone()), dir, options).expect("reopen");
    let report = store.recovery_report().clone();
    assert!(report.doublewrite_redone, "{report:?}");
    assert_eq!(read_all(&store, &ids).expect("read"), states[2]);
}

/// The length of version `version` of a block in the concurrency test.
fn versioned_len(version: u64) -> usize {
    1000 + (version as usize * 37) % 3000
}

/// The version a payload of `content` names, if it is one.
fn version_of(bytes: &[u8]) -> Option<u64> {
    // "block {id} version {version};"
    let end = bytes.iter().take(64).position(|&b| b == b';')?;
    let text = std::str::from_utf8(&bytes[..end]).ok()?;
    text.rsplit(' ').next()?.parse().ok()
}

#[test]
fn doublewrite_readers_never_see_a_slot_being_rewritten() {
    for read_method in [AccessMethod::Syscall, AccessMethod::Mmap] {
        let temp = tempfile::tempdir().expect("a temporary directory");
        let options =
            DoublewriteOptions { read_method, slot_bytes: 4096, ..DoublewriteOptions::default() };
        let store = open(&Storage::Os, temp.path(), &options);
        let hot: Vec<u64> = (0..8).collect();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    let mut seen = [0u64; 8];
                    // Bounded by the writer: it sets `done` after its last group.
                    while !done.load(std::sync::atomic::Ordering::Acquire) {
                        for &id in &hot {
                            let Some(bytes) = store.read(BlockId(id)).expect("a concurrent read")
                            else {
                                continue;
                            };
                            let version = version_of(&bytes).expect("a payload naming its version");
                            assert_eq!(
                                bytes,
                                content(BlockId(id), version, versioned_len(version))
                            );
                            assert!(version >= seen[id as usize], "block {id} went back in time");
                            seen[id as usize] = version;
                        }
                    }
                });
            }
            for version in 1..=40u64 {
                let payloads: Vec<(BlockId, Vec<u8>)> = hot
                    .iter()
                    .map(|&id| (BlockId(id), content(BlockId(id), version, versioned_len(version))))
                    .chain([(BlockId(version * 300), b"far away".to_vec())])
                    .collect();
                let refs: Vec<(BlockId, &[u8])> =
                    payloads.iter().map(|(id, bytes)| (*id, bytes.as_slice())).collect();
                store.write_group(&refs).expect("write");
            }
            done.store(true, std::sync::atomic::Ordering::Release);
        });
        assert_eq!(store.read(BlockId(40 * 300)).expect("read").as_deref(), Some(&b"far away"[..]));
        store.close().expect("close");
    }
}
