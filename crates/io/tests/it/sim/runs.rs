//! Determinism and concurrent use (sections 5 and 6 of `sim.rs`'s tests).

use super::*;

// ---------------------------------------------------------------------------------------------
// 5. Determinism
// ---------------------------------------------------------------------------------------------

/// A random workload over a few files and every non-direct method. Never fails.
fn random_workload(fs: &SimFs, seed: u64, steps: usize) {
    let storage = Storage::Sim(fs.clone());
    let mut rng = fastrand::Rng::with_seed(seed);
    storage.create_dir_all("/db").unwrap();
    storage.sync_dir("/").unwrap();
    let methods = [AccessMethod::Syscall, AccessMethod::Mmap, AccessMethod::Pmem];
    let mut open: Vec<File> = Vec::new();
    let mut names: BTreeSet<String> = BTreeSet::new();
    let mut next_name = 0;
    for _ in 0..steps {
        match rng.u8(..12) {
            0 | 1 if open.len() < 4 => {
                let name = format!("/db/f{next_name}");
                next_name += 1;
                let method = methods[rng.usize(..methods.len())];
                open.push(storage.open(&name, &create(method)).unwrap());
                names.insert(name);
            }
            2 if !names.is_empty() => {
                let from = names.iter().nth(rng.usize(..names.len())).unwrap().clone();
                let to = format!("/db/f{next_name}");
                next_name += 1;
                storage.rename(&from, &to).unwrap();
                names.remove(&from);
                names.insert(to);
            }
            3 if !names.is_empty() => {
                let name = names.iter().nth(rng.usize(..names.len())).unwrap().clone();
                storage.remove_file(&name).unwrap();
                names.remove(&name);
            }
            4 => storage.sync_dir("/db").unwrap(),
            _ if open.is_empty() => {}
            5 => open[rng.usize(..open.len())].sync_data().unwrap(),
            6 => open[rng.usize(..open.len())].set_len(rng.u64(..6000)).unwrap(),
            7 => {
                let file = &open[rng.usize(..open.len())];
                file.persist(rng.u64(..6000), rng.u64(1..300)).unwrap();
            }
            8 => open[rng.usize(..open.len())].store_u64(rng.u64(..700) * 8, rng.u64(..)).unwrap(),
            _ => {
                let file = &open[rng.usize(..open.len())];
                let bytes: Vec<u8> = (0..rng.usize(1..700)).map(|_| rng.u8(..)).collect();
                file.write_at(&bytes, rng.u64(..6000)).unwrap();
            }
        }
    }
}

#[test]
fn random_workloads_keep_all_equals_live_and_sync_everything_equals_live() {
    let seed0 = seed_from_env(0);
    for seed in seed0..seed0 + 30 {
        with_seed("random keep-all", seed, |seed| {
            let fs = SimFs::new();
            random_workload(&fs, seed, 80);
            assert_eq!(last_image(&fs, CrashModel::KeepAll, seed).snapshot(), fs.snapshot());
            // Sync every live name and the directories: then nothing is left pending.
            let storage = Storage::Sim(fs.clone());
            for path in fs.snapshot().files.keys() {
                storage.open(path, &existing(AccessMethod::Syscall)).unwrap().sync_data().unwrap();
            }
            storage.sync_dir("/db").unwrap();
            storage.sync_dir("/").unwrap();
            for model in CrashModel::ALL {
                assert_eq!(last_image(&fs, model, seed).snapshot(), fs.snapshot(), "{model}");
            }
        });
    }
}

#[test]
fn the_same_seed_gives_the_same_image() {
    let seed0 = seed_from_env(0);
    let random = SimFs::new();
    random_workload(&random, seed0, 100);
    let (mixed, storage) = fs_with_db();
    mixed_workload(&storage);
    let mut differ = 0;
    for fs in [&random, &mixed] {
        for model in CrashModel::ALL {
            for at in [fs.op_count() / 2, fs.op_count()] {
                with_seed(&format!("determinism {model} at {at}"), seed0, |seed| {
                    let first = fs.crash_image(at, model, seed).snapshot();
                    assert_eq!(first, fs.crash_image(at, model, seed).snapshot());
                    if first != fs.crash_image(at, model, seed + 1).snapshot() {
                        differ += 1;
                    }
                });
            }
        }
    }
    // The mixed workload leaves torn-able writes pending, so at least the torn models differ.
    assert!(differ > 0, "no model gave different images for different seeds");
}

#[test]
fn crash_replay_images_equal_crash_image_at_every_position() {
    let seed0 = seed_from_env(0);
    with_seed("crash replay", seed0, |seed| {
        let fs = SimFs::new();
        random_workload(&fs, seed, 60);
        let mut replay = fs.crash_replay();
        assert_eq!(replay.len(), fs.op_count());
        // Bounded by the log length.
        loop {
            let at = replay.position();
            for model in CrashModel::ALL {
                assert_eq!(
                    replay.image(model, seed + at).snapshot(),
                    fs.crash_image(at, model, seed + at).snapshot(),
                    "{model} at op {at}"
                );
            }
            if !replay.advance() {
                break;
            }
        }
        assert_eq!(replay.position(), fs.op_count());
    });
}

// ---------------------------------------------------------------------------------------------
// 6. Threads
// ---------------------------------------------------------------------------------------------

#[test]
fn concurrent_writers_leave_a_consistent_log() {
    let (fs, storage) = fs_with_db();
    std::thread::scope(|scope| {
        for (thread, method) in AccessMethod::ALL.into_iter().enumerate() {
            let storage = storage.clone();
            scope.spawn(move || {
                let file = storage.open(format!("/db/t{thread}"), &create(method)).unwrap();
                let mut block = AlignedBuf::new(4096);
                for round in 0..40u64 {
                    block.fill(((thread as u8) << 4) | (round as u8 & 0xf));
                    file.write_at(&block, round * 4096).unwrap();
                    if round % 8 == 7 {
                        file.sync_data().unwrap();
                    }
                }
                file.sync_data().unwrap();
            });
        }
    });
    storage.sync_dir("/db").unwrap();
    let live = fs.snapshot();
    assert_eq!(live.files.len(), 4);
    assert!(live.files.values().all(|bytes| bytes.len() == 40 * 4096));
    assert_eq!(last_image(&fs, CrashModel::KeepAll, 0).snapshot(), live);
    assert_eq!(last_image(&fs, CrashModel::DropAll, 0).snapshot(), live, "everything was synced");
}
