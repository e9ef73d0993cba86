//! End-to-end crash sweep of `Db` on the simulated file system: one writer makes `Sync`
//! puts, deletes and batches (and a few `None` writes), with large values that go to
//! overflow blocks, changing the tree in place, and checkpoints on demand and in the
//! background that write the dirty pages back (splits, overflow blocks, retired values'
//! deletions). Then, for a crash at every I/O point of that run and 16 images each
//! (torn writes at 8 B, 512 B and 4 KiB, subsets, prefixes, nothing), `Db::open` must
//! recover a state that:
//!
//! - equals the history up to some write (so every batch is there whole or not at all);
//! - contains every write acknowledged as `Sync` before the crash;
//! - at every crash point (its first image), once checkpointed to rest, holds no block
//!   that no page, overflow value or meta block names (nothing leaked).
//!
//! `TIERKV_ENGINE_SWEEP=full` runs a larger workload (a documented command, see README).

use std::collections::BTreeMap;

use tierkv::{Db, Durability, Options, WriteBatch};
use tierkv_io::sim::{seed_from_env, CrashModel, SimFs};
use tierkv_io::Storage;

const MODELS: [CrashModel; 8] = CrashModel::SWEEP;

type State = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    Options {
        cache_size: (32 + 128) << 10,
        write_buffer_size: Some(64 << 10),
        max_page_bytes: Some(1024),
        // Four pages a group: checkpoints write several groups, each with a meta block.
        checkpoint_group_bytes: Some(4 << 10),
        log_segment_bytes: 64 << 10,
        block_segment_bytes: 64 << 10,
        ..Options::default()
    }
}

fn contents(db: &Db, context: &str) -> State {
    db.range(..).map(|entry| entry.unwrap_or_else(|e| panic!("scan: {e}: {context}"))).collect()
}

#[test]
fn every_crash_recovers_a_prefix_with_every_acknowledged_sync_write() {
    let full = std::env::var("TIERKV_ENGINE_SWEEP").as_deref() == Ok("full");
    let (writes, images) = if full { (1_700, 32) } else { (260, 16) };
    let seed = seed_from_env(0xc0a5_7e57);
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let dir = "/db";
    // The state after each write, and the I/O count when it was acknowledged as durable
    // (`None` writes are durable only once a later sync covers them).
    let mut history: Vec<State> = vec![State::new()];
    let mut acked: Vec<(u64, usize)> = Vec::new();
    let mut checkpoints = 0;
    let groups;
    {
        let db = Db::open_on(&storage, dir, options()).expect("open");
        let mut model = State::new();
        let mut rng = fastrand::Rng::with_seed(seed);
        for write in 0..writes {
            let key = |rng: &mut fastrand::Rng| format!("key{:03}", rng.u32(..120)).into_bytes();
            let value = |rng: &mut fastrand::Rng| {
                let len = if rng.u8(..30) == 0 { rng.usize(300..2_500) } else { rng.usize(1..50) };
                vec![write as u8; len]
            };
            let mut batch = WriteBatch::new();
            match rng.u8(..10) {
                0..=1 => {
                    let k = key(&mut rng);
                    batch.delete(&k);
                    model.remove(&k);
                }
                2 => {
                    for _ in 0..rng.usize(2..6) {
                        let (k, v) = (key(&mut rng), value(&mut rng));
                        if rng.bool() {
                            batch.put(&k, &v);
                            model.insert(k, v);
                        } else {
                            batch.delete(&k);
                            model.remove(&k);
                        }
                    }
                }
                _ => {
                    let (k, v) = (key(&mut rng), value(&mut rng));
                    batch.put(&k, &v);
                    model.insert(k, v);
                }
            }
            let durability = if rng.u8(..8) == 0 { Durability::None } else { Durability::Sync };
            db.write_with(&batch, durability).expect("write");
            history.push(model.clone());
            if durability == Durability::Sync {
                acked.push((fs.op_count(), history.len() - 1));
            }
            if write % 40 == 39 {
                db.checkpoint().expect("checkpoint");
                checkpoints += 1;
            }
        }
        let stats = db.stats().expect("stats");
        assert!(stats.pages_written > 0, "no checkpoint wrote a page: {stats:?}");
        // Some checkpoints wrote their pages in several groups, each with a meta block.
        assert!(stats.checkpoint_groups > stats.checkpoints, "{stats:?}");
        groups = stats.checkpoint_groups;
        drop(db);
    }
    let ops_total = fs.op_count();
    let mut replay = fs.crash_replay();
    let mut images_checked = 0u64;
    let mut leak_checks = 0u64;
    for point in 0..=ops_total {
        // Every write acknowledged as Sync before this point must be there.
        let floor = acked.iter().take_while(|(at, _)| *at <= point).last().map_or(0, |a| a.1);
        for image in 0..images {
            let model = MODELS[image % MODELS.len()];
            let image_seed = seed ^ (point << 20) ^ image as u64;
            let context = format!("crash before I/O {point} of {ops_total}, {model}, image seed {image_seed}, write {floor} acknowledged (TIERKV_SEED={seed})");
            let storage = Storage::Sim(replay.image(model, image_seed));
            let db = Db::open_on(&storage, dir, options())
                .unwrap_or_else(|e| panic!("recovery: {e}: {context}"));
            let found = contents(&db, &context);
            let Some(k) = (floor..history.len()).find(|&k| history[k] == found) else {
                let near: Vec<_> = history
                    .iter()
                    .enumerate()
                    .skip(floor.saturating_sub(1))
                    .take(4)
                    .map(|(i, s)| {
                        (
                            i,
                            s.keys()
                                .map(|k| String::from_utf8_lossy(k).into_owned())
                                .collect::<Vec<_>>(),
                        )
                    })
                    .collect();
                panic!("the recovered state is no prefix of the history at or after write {floor}: {context}\nfound {:?}\nnear {near:?}", found.keys().map(|k| String::from_utf8_lossy(k).into_owned()).collect::<Vec<_>>());
            };
            assert!(k >= floor);
            if image == 0 {
                // At rest (no reader holds a retired block), the blocks are the tree's.
                for _ in 0..3 {
                    db.checkpoint().unwrap_or_else(|e| panic!("checkpoint: {e}: {context}"));
                }
                let report = db.verify().unwrap_or_else(|e| panic!("verify: {e}: {context}"));
                assert!(report.is_clean(), "{:?}: {context}", report.problems);
                let named = report.pages + report.overflow_blocks + 1;
                assert_eq!(report.blocks, named, "blocks named by nothing: {context}");
                leak_checks += 1;
            }
            drop(db);
            images_checked += 1;
        }
        if point < ops_total {
            assert!(replay.advance());
        }
    }
    eprintln!(
        "engine crash sweep: {writes} writes, {checkpoints} checkpoints ({groups} groups, with the background ones), {ops_total} crash points, {images_checked} images, {leak_checks} checked for leaks"
    );
}
