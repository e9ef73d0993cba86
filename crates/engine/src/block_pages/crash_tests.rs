//! Crash sweep of the tree's checkpoints on the simulated file system: a tree on a log
//! store takes puts and deletes, copied on write, and every 25 operations a checkpoint
//! writes its dirty pages, the deletion of the pages they replaced, and the meta block in
//! one atomic group. A crash at every I/O point (16 images each: torn
//! writes at 8 B, 512 B and 4 KiB, subsets, prefixes, nothing) must leave exactly the
//! contents of some checkpoint at or after the last one acknowledged before the crash.
//!
//! `TIERKV_ENGINE_SWEEP=full` runs a larger workload. It drives the tree and the pages
//! directly, below `Db`, so it lives in the crate, beside them.

use std::collections::BTreeMap;
use std::sync::Arc;

use tierkv_blockstore::{LogStore, StoreOptions};
use tierkv_io::sim::{seed_from_env, CrashModel, SimFs};
use tierkv_io::Storage;

use super::{BlockPages, Pages, PagesError};
use crate::meta::Meta;
use crate::page::Value;
use crate::tree::{PageSource, Tree};

const MODELS: [CrashModel; 8] = CrashModel::SWEEP;

type State = BTreeMap<Vec<u8>, Value>;

fn options() -> StoreOptions {
    // Small segments, so checkpoints rotate segments and reuse space as the pages change.
    StoreOptions { segment_bytes: 64 << 10, background_cleaning: false, ..StoreOptions::default() }
}

fn contents(tree: &Tree, pages: &impl PageSource<Error = PagesError>) -> State {
    let mut found = State::new();
    tree.scan(pages, b"", &mut |k, v| {
        found.insert(k.to_vec(), v.clone());
        true
    })
    .unwrap_or_else(|e| panic!("scan: {e}"));
    found
}

#[test]
fn every_crash_leaves_a_whole_checkpoint() {
    let full = std::env::var("TIERKV_ENGINE_SWEEP").as_deref() == Ok("full");
    let (ops, images) = if full { (4_000, 32) } else { (1_000, 16) };
    let seed = seed_from_env(0xe261_e5ee);
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let dir = "/db";
    // The states after each checkpoint, with op_count() once it was acknowledged.
    let mut checkpoints: Vec<(u64, State)> = vec![(0, State::new())];
    {
        let blocks = LogStore::open(&storage, dir, options()).expect("open");
        let shared = Pages::new(Arc::new(blocks), 64 << 10, 512, None).expect("frames");
        let mut pages = BlockPages::new(&shared, 1);
        let mut tree = Tree::create(&mut pages, 512);
        let mut model = State::new();
        let mut rng = fastrand::Rng::with_seed(seed);
        for op in 0..ops {
            let key = format!("key{:04}", rng.u32(..300)).into_bytes();
            if rng.u8(..4) == 0 {
                tree.delete(&mut pages, &key).expect("delete");
                model.remove(&key);
            } else {
                let value = Value::inline(vec![op as u8; rng.usize(1..60)]);
                tree.put(&mut pages, &key, value.clone()).expect("put");
                model.insert(key, value);
            }
            if op % 25 == 24 {
                let meta = Meta {
                    root: tree.root,
                    next_page: pages.next_id(),
                    max_page_bytes: 512,
                    sequence: op as u64,
                    orphans_from: pages.next_id(),
                    free_list: None,
                };
                // No reader holds an older version: what this checkpoint replaced goes now.
                let retired = pages.take_retired();
                pages.reclaim(retired);
                pages.flush(Some(&meta)).expect("checkpoint");
                checkpoints.push((fs.op_count(), model.clone()));
                pages = BlockPages::new(&shared, meta.next_page);
            }
        }
        drop(pages);
        let blocks = shared.blocks();
        blocks.close().expect("close");
    }
    let ops_total = fs.op_count();
    let mut replay = fs.crash_replay();
    let mut images_checked = 0u64;
    let mut recovered_later = 0u64;
    for point in 0..=ops_total {
        let acked = checkpoints.iter().filter(|(at, _)| *at <= point).count() - 1;
        for image in 0..images {
            let model = MODELS[image % MODELS.len()];
            let image_seed = seed ^ (point << 20) ^ image as u64;
            let context = format!("crash before op {point} of {ops_total}, {model}, seed {image_seed}, checkpoint {acked} acknowledged (TIERKV_SEED={seed})");
            let storage = Storage::Sim(replay.image(model, image_seed));
            let blocks = LogStore::open(&storage, dir, options())
                .unwrap_or_else(|e| panic!("recovery: {e}: {context}"));
            let pages = Pages::new(Arc::new(blocks), 64 << 10, 512, None).expect("frames");
            let found = match pages.read_meta().unwrap_or_else(|e| panic!("meta: {e}: {context}")) {
                None => State::new(),
                Some(meta) => {
                    let tree =
                        Tree { root: meta.root, max_page_bytes: meta.max_page_bytes as usize };
                    contents(&tree, &pages)
                }
            };
            let Some(k) = (acked..checkpoints.len()).find(|&k| checkpoints[k].1 == found) else {
                panic!("the recovered tree is no checkpoint at or after {acked}: {context}");
            };
            recovered_later += u64::from(k > acked);
            images_checked += 1;
        }
        if point < ops_total {
            assert!(replay.advance());
        }
    }
    eprintln!(
        "engine checkpoint sweep: {ops} operations, {} checkpoints, {ops_total} crash points, {images_checked} images, {recovered_later} recovered a checkpoint not yet acknowledged",
        checkpoints.len() - 1
    );
    assert!(checkpoints.len() > 10);
    assert!(recovered_later > 0, "no image caught a checkpoint in flight: the sweep tests little");
}
