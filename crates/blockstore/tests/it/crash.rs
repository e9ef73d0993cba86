//! Crash sweep of the log store on the simulated backend: a workload of multi-block groups
//! (puts and deletes over overlapping ids) with map checkpoints and segment cleaning in the
//! middle runs once, recording every write, sync and namespace op. After each checkpoint,
//! larger blocks go to reused free space with pointers in the log, so the sweep covers
//! pointers whose blocks were torn or never written. Then the store is
//! recovered from crash images taken before every recorded op, 16 or more per point: torn
//! writes (8 B, 512 B, 4 KiB), random subsets, random prefixes.
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

use tierkv_blockstore::{BlockId, BlockStore, LogStore, StoreOptions};
use tierkv_io::sim::{seed_from_env, SimFs};
use tierkv_io::Storage;

use crate::{content, prefix_states, Content, Group, MODELS};

struct Sweep {
    groups: usize,
    ids: u64,
    images_per_point: usize,
}

fn sweep_size() -> Sweep {
    match std::env::var("TIERKV_BLOCKS_SWEEP").as_deref() {
        Ok("full") => Sweep { groups: 160, ids: 64, images_per_point: 32 },
        _ => Sweep { groups: 64, ids: 16, images_per_point: 16 },
    }
}

fn options() -> StoreOptions {
    // Small segments so the workload rotates, and a tight space target so it cleans.
    StoreOptions {
        segment_bytes: 64 << 10,
        space_target: 1.1,
        background_cleaning: false,
        ..StoreOptions::default()
    }
}

fn make_workload(sweep: &Sweep, seed: u64) -> Vec<Group> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..sweep.groups)
        .map(|g| {
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
                        (id, Some(content(id, g as u64, rng.usize(100..6000))))
                    }
                })
                .collect();
            Group { changes }
        })
        .collect()
}

fn read_all(store: &LogStore, ids: u64) -> Content {
    (0..ids)
        .filter_map(|id| {
            let id = BlockId(id);
            store.read(id).expect("read after recovery").map(|bytes| (id, bytes))
        })
        .collect()
}

/// Runs the workload; returns, for each group, `op_count()` once it was acknowledged.
fn run_workload(fs: &SimFs, dir: &Path, groups: &[Group]) -> (Vec<u64>, u64, u64, u64) {
    let store = LogStore::open(&Storage::Sim(fs.clone()), dir, options()).expect("open");
    let mut acked = Vec::new();
    let mut cleaned = 0;
    for (g, group) in groups.iter().enumerate() {
        store.apply_group(&group.writes()).expect("a group on the live file system");
        acked.push(fs.op_count());
        if g % 4 == 3 {
            store.checkpoint().expect("checkpoint");
        }
        if g % 3 == 2 {
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
    (acked, cleaned, stats.checkpoints, stats.reused_blocks)
}

#[test]
fn log_store_crash_sweep() {
    let seed = seed_from_env(0x5eed_b10c);
    let sweep = sweep_size();
    let groups = make_workload(&sweep, seed);
    let states = prefix_states(&groups);
    let dir = Path::new("/blocks");
    let fs = SimFs::new();
    let (acked, cleaned, checkpoints, reused) = run_workload(&fs, dir, &groups);
    assert!(
        cleaned >= 2,
        "the workload cleaned {cleaned} segments: the sweep would not cover cleaning"
    );
    assert!(checkpoints >= 2, "the workload wrote {checkpoints} map checkpoints");
    assert!(reused >= 8, "only {reused} blocks went to reused space: pointers are not covered");
    let ops = fs.op_count();
    let mut replay = fs.crash_replay();
    let mut images = 0u64;
    let mut torn_tails = 0u64;
    let mut torn_pointers = 0u64;
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
            let storage = Storage::Sim(image);
            let store = LogStore::open(&storage, dir, options())
                .unwrap_or_else(|e| panic!("recovery failed: {e}: {context}"));
            let found = read_all(&store, sweep.ids);
            let Some(k) = (must_have..states.len()).find(|&k| states[k] == found) else {
                panic!(
                    "the recovered content is not the content after any prefix of at least {must_have} groups: {context}"
                );
            };
            recovered_groups += k;
            store.verify().unwrap_or_else(|e| panic!("verify: {e}: {context}"));
            torn_tails += u64::from(store.recovery_report().stop.is_some());
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
                let again = LogStore::open(&storage, dir, options())
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
        "log store sweep: {} groups, {cleaned} segments cleaned, {checkpoints} checkpoints, {reused} blocks to reused space, {ops} crash points, {images} images, {} groups recovered on average, {torn_tails} images with a torn tail ({torn_pointers} at a pointer whose block did not match)",
        groups.len(),
        recovered_groups / images.max(1) as usize
    );
    assert!(torn_tails > 0, "no image ever had a torn tail: the sweep tests nothing");
    assert!(torn_pointers > 0, "no image had a torn pointed-at block: pointers are not covered");
}
