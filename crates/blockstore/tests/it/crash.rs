//! Crash sweeps of the log store on the simulated backend: a workload of multi-block groups
//! (puts and deletes over overlapping ids) with map checkpoints and segment cleaning in the
//! middle runs once, recording every write, sync and namespace op. Larger blocks go to reused
//! free space with pointers in the log, so the sweeps cover pointers whose blocks were torn
//! or never written. Two workloads: one cleans often (a tight space target, cleaning every
//! third group); the other loads several segments of data first and cleans rarely, so that
//! space freed in older segments is reused, much of it before the next map checkpoint; a
//! third writes a few ids over and over and shrinks the files every fifth group, so that
//! the cold stream's segment empties and is sealed and deleted. Then
//! the store is recovered from crash images taken before every recorded op, 16 or more per
//! point: torn writes (8 B, 512 B, 4 KiB), random subsets, random prefixes.
//!
//! The oracle: the recovered content equals the content after some prefix of the groups, at
//! least as long as the groups acknowledged before the crash point (every group is all or
//! nothing, and no acknowledged group is lost); `verify` is clean; the store takes a new
//! group, and a second recovery keeps it.
//!
//! CI runs a smaller instance; the full sweep is
//! `TIERKV_BLOCKS_SWEEP=full cargo test --release -p tierkv-blockstore --test it crash -- --nocapture`.
//! A failure prints the seed; `TIERKV_SEED=<seed>` replays it.

use std::path::Path;

use tierkv_blockstore::{
    BlockError, BlockId, BlockStore, BlockWrite, LogStore, StoreOptions, StoreStats,
};
use tierkv_io::sim::{seed_from_env, SimFs};
use tierkv_io::Storage;

use crate::{content, prefix_states, Content, Group, MODELS};

struct Sweep {
    groups: usize,
    ids: u64,
    /// Bytes of a put, at least and below.
    sizes: std::ops::Range<usize>,
    images_per_point: usize,
    /// Groups of this many ids put every id first (0: none).
    load_group: u64,
    options: StoreOptions,
    checkpoint_every: usize,
    clean_every: usize,
    /// `shrink_to(0)` in place of cleaning after every this many groups (0: never).
    shrink_every: usize,
    /// Every this many groups is written as a chain (0: none; see `write_chain`).
    chain_every: usize,
}

fn full() -> bool {
    std::env::var("TIERKV_BLOCKS_SWEEP").as_deref() == Ok("full")
}

/// Small segments so the workloads rotate, cleaning only when the workload asks, and the
/// space target given.
fn sweep_options(space_target: f64) -> StoreOptions {
    StoreOptions {
        segment_bytes: 64 << 10,
        space_target,
        background_cleaning: false,
        ..StoreOptions::default()
    }
}

/// Small segments so the workload rotates, a tight space target and cleaning every third
/// group so it cleans often.
fn cleaning_sweep() -> Sweep {
    let (groups, ids, images_per_point) = if full() { (160, 64, 32) } else { (64, 16, 16) };
    Sweep {
        groups,
        ids,
        sizes: 100..6000,
        images_per_point,
        load_group: 0,
        options: sweep_options(1.1),
        checkpoint_every: 4,
        clean_every: 3,
        shrink_every: 0,
        chain_every: 0,
    }
}

/// Live data of several segments and cleaning only every tenth group, so that space freed
/// in older segments is reused before cleaning deletes them, much of it before the next map
/// checkpoint (recovery from the last one already skips it).
fn reuse_sweep() -> Sweep {
    let (groups, images_per_point) = if full() { (120, 32) } else { (48, 16) };
    Sweep {
        groups,
        ids: 96,
        sizes: 1000..3000,
        images_per_point,
        load_group: 16,
        options: sweep_options(1.3),
        checkpoint_every: 5,
        clean_every: 10,
        shrink_every: 0,
        chain_every: 0,
    }
}

/// A few ids written over and over, and `shrink_to(0)` every fifth group: it copies the
/// live blocks to the cold stream, the groups after write most of them again, and a later
/// shrink finds the cold segment empty, seals it and deletes it. Its segments are not
/// zero-filled (as the engine's are not), so recovery's scan meets never-written space.
fn shrink_sweep() -> Sweep {
    let (groups, images_per_point) = if full() { (120, 32) } else { (40, 16) };
    Sweep {
        groups,
        ids: 8,
        sizes: 100..6000,
        images_per_point,
        load_group: 0,
        options: StoreOptions { zero_fill_segments: false, ..sweep_options(1.1) },
        checkpoint_every: 4,
        clean_every: usize::MAX,
        shrink_every: 5,
        chain_every: 0,
    }
}

/// The cleaning workload with every second group written as a chain of pieces, with map
/// checkpoints and cleaning between its pieces.
fn chain_sweep() -> Sweep {
    Sweep { chain_every: 2, ..cleaning_sweep() }
}

/// Writes `group` as a chain: a decoy copy of its first id first (which a later piece
/// replaces), then its changes in two pieces, a map checkpoint and a cleaning between the
/// pieces; returns the segments cleaned.
fn write_chain(store: &LogStore, group: &Group, g: usize) -> u64 {
    let writes = group.writes();
    let decoy = content(writes[0].id(), 1_000_000 + g as u64, 2500);
    let mut chain = store.begin_chain();
    chain.put(&[BlockWrite::Put(writes[0].id(), &decoy)]).expect("a piece");
    store.checkpoint().expect("checkpoint");
    let mut cleaned = 0;
    while store.clean_once().expect("clean") {
        cleaned += 1;
        assert!(cleaned < 100, "cleaning does not converge");
    }
    let half = writes.len() / 2;
    chain.put(&writes[..half]).expect("a piece");
    chain.commit(&writes[half..]).expect("commit");
    cleaned
}

fn make_workload(sweep: &Sweep, seed: u64) -> Vec<Group> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut workload: Vec<Group> = Vec::new();
    if sweep.load_group > 0 {
        for first in (0..sweep.ids).step_by(sweep.load_group as usize) {
            let ids = first..(first + sweep.load_group).min(sweep.ids);
            let changes = ids
                .map(|id| {
                    (BlockId(id), Some(content(BlockId(id), 0, rng.usize(sweep.sizes.clone()))))
                })
                .collect();
            workload.push(Group { changes });
        }
    }
    let loaded = workload.len();
    workload.extend((loaded..loaded + sweep.groups).map(|g| {
        let size = rng.usize(2..=6);
        let mut ids: Vec<u64> = (0..sweep.ids).collect();
        rng.shuffle(&mut ids);
        let changes = ids[..size]
            .iter()
            .map(|&id| {
                let id = BlockId(id);
                // Every fifth change (after the first groups) deletes.
                if g > 2 && rng.usize(..5) == 0 {
                    (id, None)
                } else {
                    (id, Some(content(id, g as u64, rng.usize(sweep.sizes.clone()))))
                }
            })
            .collect();
        Group { changes }
    }));
    workload
}

fn read_all(store: &LogStore, ids: u64) -> Content {
    (0..ids)
        .filter_map(|id| {
            let id = BlockId(id);
            store.read(id).expect("read after recovery").map(|bytes| (id, bytes))
        })
        .collect()
}

/// Runs the workload; returns, for each group, `op_count()` once it was acknowledged, the
/// segments `clean_once` cleaned, and the store's figures at the end.
fn run_workload(
    fs: &SimFs,
    dir: &Path,
    sweep: &Sweep,
    groups: &[Group],
) -> (Vec<u64>, u64, StoreStats) {
    let store =
        LogStore::open(&Storage::Sim(fs.clone()), dir, sweep.options.clone()).expect("open");
    let mut acked = Vec::new();
    let mut cleaned = 0;
    for (g, group) in groups.iter().enumerate() {
        if sweep.chain_every > 0 && g % sweep.chain_every == 1 {
            cleaned += write_chain(&store, group, g);
        } else {
            store.apply_group(&group.writes()).expect("a group on the live file system");
        }
        acked.push(fs.op_count());
        if g % sweep.checkpoint_every == sweep.checkpoint_every - 1 {
            store.checkpoint().expect("checkpoint");
        }
        if sweep.shrink_every > 0 && g % sweep.shrink_every == sweep.shrink_every - 1 {
            // Cleans everything worth it, and seals an emptied cold segment to delete it.
            store.shrink_to(0).expect("shrink");
        } else if g % sweep.clean_every == sweep.clean_every - 1 {
            // Cleaning writes a checkpoint of its own when its victim needs one.
            let mut passes = 0;
            while store.clean_once().expect("clean") {
                cleaned += 1;
                passes += 1;
                assert!(passes < 100, "cleaning does not converge");
            }
        }
    }
    let stats = store.stats();
    store.close().expect("close");
    (acked, cleaned, stats)
}

#[test]
fn log_store_crash_sweep() {
    let seed = seed_from_env(0x5eed_b10c);
    let sweep = cleaning_sweep();
    let report = run_sweep("log store sweep", &sweep, seed);
    assert!(
        report.cleaned >= 2,
        "the workload cleaned {} segments: the sweep would not cover cleaning",
        report.cleaned
    );
    assert!(report.stats.checkpoints >= 2, "the workload wrote too few map checkpoints");
    assert!(
        report.stats.reused_blocks >= 8,
        "only {} blocks went to reused space: pointers are not covered",
        report.stats.reused_blocks
    );
    assert!(
        report.torn_pointers > 0,
        "no image had a torn pointed-at block: pointers are not covered"
    );
}

#[test]
fn log_store_chain_crash_sweep() {
    let seed = seed_from_env(0x5eed_c4a1);
    let report = run_sweep("log store chain sweep", &chain_sweep(), seed);
    assert!(report.cleaned >= 2, "the workload cleaned {} segments", report.cleaned);
    assert!(
        report.chains_dropped > 0,
        "no image held a chain without its ending piece: chains are not covered"
    );
}

#[test]
fn log_store_reuse_crash_sweep() {
    let seed = seed_from_env(0x5eed_2e05);
    let sweep = reuse_sweep();
    let report = run_sweep("log store reuse sweep", &sweep, seed);
    let stats = &report.stats;
    assert!(stats.reused_blocks >= 24, "only {} blocks went to reused space", stats.reused_blocks);
    assert!(
        stats.reusable_at_once_bytes >= 16 << 10,
        "only {} bytes were reusable before a checkpoint: that path is not covered",
        stats.reusable_at_once_bytes
    );
    assert!(
        report.torn_pointers > 0,
        "no image had a torn pointed-at block: pointers are not covered"
    );
}

#[test]
fn log_store_shrink_crash_sweep() {
    let seed = seed_from_env(0x5eed_5212);
    let report = run_sweep("log store shrink sweep", &shrink_sweep(), seed);
    assert!(
        report.stats.cold_segments_sealed >= 2,
        "{} emptied cold segments were sealed: shrinking past them is not covered",
        report.stats.cold_segments_sealed
    );
}

struct SweepReport {
    cleaned: u64,
    /// Images whose recovery left out a chain without its ending piece.
    chains_dropped: u64,
    stats: StoreStats,
    torn_pointers: u64,
}

/// Runs the workload once, then recovers from the images of every crash point and checks
/// them against the oracle (see the module header).
fn run_sweep(name: &str, sweep: &Sweep, seed: u64) -> SweepReport {
    let groups = make_workload(sweep, seed);
    let states = prefix_states(&groups);
    let dir = Path::new("/blocks");
    let fs = SimFs::new();
    let (acked, cleaned, stats) = run_workload(&fs, dir, sweep, &groups);
    let ops = fs.op_count();
    let mut replay = fs.crash_replay();
    let mut images = 0u64;
    let mut torn_tails = 0u64;
    let mut torn_pointers = 0u64;
    let mut chains_dropped = 0u64;
    let mut recovered_groups = 0usize;
    for point in 0..=ops {
        let must_have = acked.iter().filter(|&&at| at <= point).count();
        for image_index in 0..sweep.images_per_point {
            let model = MODELS[image_index % MODELS.len()];
            let image_seed = seed ^ (point << 20) ^ image_index as u64;
            let image = replay.image(model, image_seed);
            let context = format!(
                "crash before op {point} of {ops}, model {model}, image seed {image_seed}, {must_have} groups acknowledged (TIERKV_SEED={seed})"
            );
            let storage = Storage::Sim(image.clone());
            // A read-only open first: it must see what recovery will keep, and change nothing.
            let read_only = StoreOptions { read_only: true, ..sweep.options.clone() };
            // Before the directory exists there is no store to open without making one.
            let seen = if storage.exists(dir).expect("exists") {
                let reader = LogStore::open(&storage, dir, read_only)
                    .unwrap_or_else(|e| panic!("read-only recovery failed: {e}: {context}"));
                let seen = read_all(&reader, sweep.ids);
                reader.verify().unwrap_or_else(|e| panic!("read-only verify: {e}: {context}"));
                assert!(
                    matches!(reader.apply_group(&[]), Err(BlockError::ReadOnly { .. })),
                    "{context}"
                );
                seen
            } else {
                assert!(LogStore::open(&storage, dir, read_only).is_err(), "{context}");
                Content::new()
            };
            assert_eq!(image.op_count(), 0, "a read-only open changed the files: {context}");
            let store = LogStore::open(&storage, dir, sweep.options.clone())
                .unwrap_or_else(|e| panic!("recovery failed: {e}: {context}"));
            let found = read_all(&store, sweep.ids);
            assert!(seen == found, "read-only recovery saw other content: {context}");
            let Some(k) = (must_have..states.len()).find(|&k| states[k] == found) else {
                panic!(
                    "the recovered content is not the content after any prefix of at least {must_have} groups: {context}"
                );
            };
            recovered_groups += k;
            store.verify().unwrap_or_else(|e| panic!("verify: {e}: {context}"));
            torn_tails += u64::from(store.recovery_report().stop.is_some());
            chains_dropped += u64::from(store.recovery_report().chains_dropped > 0);
            torn_pointers += u64::from(
                store.recovery_report().stop.as_ref().is_some_and(|s| s.2.contains("pointer")),
            );
            let store_stop = store.recovery_report().stop.clone();
            if image_index == 0 || store_stop.is_some() {
                let extra = BlockId(sweep.ids + 1);
                store
                    .write_group(&[(extra, b"after the crash"), (BlockId(0), b"zero again")])
                    .unwrap_or_else(|e| panic!("write after recovery: {e}: {context}"));
                store.close().expect("close");
                let again = LogStore::open(&storage, dir, sweep.options.clone())
                    .unwrap_or_else(|e| panic!("second recovery: {e}: {context}"));
                assert_eq!(
                    again.read(extra).expect("read").as_deref(),
                    Some(&b"after the crash"[..]),
                    "{context}"
                );
                assert_eq!(
                    again.read(BlockId(0)).expect("read").as_deref(),
                    Some(&b"zero again"[..]),
                    "{context}"
                );
                assert!(
                    again.recovery_report().stop.is_none(),
                    "a torn tail came back: {:?} (first recovery: {:?}): {context}",
                    again.recovery_report().stop,
                    store_stop
                );
                let mut expected = states[k].clone();
                expected.insert(BlockId(0), b"zero again".to_vec());
                assert_eq!(read_all(&again, sweep.ids), expected, "{context}");
            }
            images += 1;
        }
        if point < ops {
            assert!(replay.advance());
        }
    }
    eprintln!(
        "{name}: {} groups, {cleaned} segments cleaned ({} in all, shrinks' included; {} cold ones sealed), {} checkpoints, {} blocks to reused space ({} bytes reusable before a checkpoint), {ops} crash points, {images} images, {} groups recovered on average, {torn_tails} images with a torn tail ({torn_pointers} at a pointer whose block did not match)",
        groups.len(),
        stats.segments_cleaned,
        stats.cold_segments_sealed,
        stats.checkpoints,
        stats.reused_blocks,
        stats.reusable_at_once_bytes,
        recovered_groups / images.max(1) as usize
    );
    assert!(torn_tails > 0, "no image ever had a torn tail: the sweep tests nothing");
    SweepReport { cleaned, chains_dropped, stats, torn_pointers }
}
