//! Unit tests of the simulated backend's internals: counters mirror the real pmem copy, the
//! replay keeps durable data under every model, namespace pruning, and the seed helpers.
//! Behaviour through the public API is tested in `tests/it/sim.rs`.

use std::path::{Path, PathBuf};

use super::replay::Replay;
use super::state::{InodeId, Namespace};
use super::*;
use crate::{AlignedBuf, Storage};

#[test]
fn pmem_write_counters_match_what_copy_to_pmem_reports() {
    let cpu = crate::pmem::cpu();
    if cpu.flush == crate::pmem::FlushInstruction::None {
        // Without a flush instruction the real copy never streams; nothing to mirror.
        return;
    }
    let source = vec![7u8; 1100];
    let mut target = AlignedBuf::new(4096);
    for offset in [0usize, 1, 8, 63, 64, 100] {
        for len in [1usize, 8, 63, 64, 65, 255, 256, 257, 700, 1000] {
            // SAFETY: offset + len <= 1100 < 4096, inside `target`; `source` holds len bytes;
            // the two buffers are distinct allocations.
            let report = unsafe {
                crate::pmem::copy_to_pmem(target.as_mut_ptr().add(offset), source.as_ptr(), len)
            };
            let simulated = pmem_nontemporal_bytes(offset as u64, len as u64);
            assert_eq!(
                simulated, report.nontemporal_bytes,
                "copy of {len} bytes at offset {offset}"
            );
            assert_eq!(report.lines_flushed, 0, "copies never flush; persist does");
            assert_eq!(report.fences, u64::from(simulated > 0), "fence after streaming");
            // SAFETY: as above.
            let copied = unsafe { std::slice::from_raw_parts(target.as_ptr().add(offset), len) };
            assert_eq!(copied, &source[..len]);
        }
    }
}

#[test]
fn lines_touched_counts_overlapping_cache_lines() {
    assert_eq!(lines_touched(0, 64), 1);
    assert_eq!(lines_touched(63, 2), 2);
    assert_eq!(lines_touched(64, 1), 1);
    assert_eq!(lines_touched(10, 0), 0);
    assert_eq!(lines_touched(0, 4096), 64);
}

#[test]
fn pruning_drops_entries_below_missing_directories() {
    let mut ns = Namespace::default();
    for dir in ["/a", "/a/b", "/x/y", "/a/b/c"] {
        ns.dirs.insert(PathBuf::from(dir));
    }
    for (index, file) in ["/a/f", "/a/b/c/g", "/x/y/h", "/top", "/a/b"].into_iter().enumerate() {
        ns.files.insert(PathBuf::from(file), InodeId(index as u64));
    }
    ns.prune_unreachable();
    let dirs: Vec<&Path> = ns.dirs.iter().map(PathBuf::as_path).collect();
    assert_eq!(dirs, [Path::new("/a"), Path::new("/a/b"), Path::new("/a/b/c")]);
    let files: Vec<&Path> = ns.files.keys().map(PathBuf::as_path).collect();
    // "/a/b" is also a directory, so the file of that name goes.
    assert_eq!(files, [Path::new("/a/b/c/g"), Path::new("/a/f"), Path::new("/top")]);
}

/// A random workload on one file system: a few files, all non-direct methods, every op.
fn random_ops(fs: &SimFs, seed: u64, steps: usize) {
    let storage = Storage::Sim(fs.clone());
    let mut rng = fastrand::Rng::with_seed(seed);
    storage.create_dir_all("/d").unwrap();
    storage.sync_dir("/").unwrap();
    let methods = [AccessMethod::Syscall, AccessMethod::Mmap, AccessMethod::Pmem];
    let mut files = Vec::new();
    for (index, method) in methods.into_iter().enumerate() {
        let options = OpenOptions::new(method).create(true).chunk_bytes(512);
        files.push(storage.open(format!("/d/f{index}"), &options).unwrap());
    }
    for _ in 0..steps {
        let file = &files[rng.usize(..files.len())];
        match rng.u8(..10) {
            0 => file.sync_data().unwrap(),
            1 => file.set_len(rng.u64(..3000)).unwrap(),
            2 => file.persist(rng.u64(..3000), rng.u64(1..200)).unwrap(),
            3 => file.store_u64(rng.u64(..300) * 8, rng.u64(..)).unwrap(),
            4 => storage.sync_dir("/d").unwrap(),
            _ => {
                let bytes: Vec<u8> = (0..rng.usize(1..400)).map(|_| rng.u8(..)).collect();
                file.write_at(&bytes, rng.u64(..3000)).unwrap();
            }
        }
    }
}

#[test]
fn an_inode_with_nothing_pending_is_its_durable_image_under_every_model() {
    for seed in 0..20 {
        with_seed("nothing pending", seed, |seed| {
            let fs = SimFs::new();
            random_ops(&fs, seed, 60);
            let state = fs.lock();
            let mut replay = Replay::new(&state.base);
            let mut checked = 0;
            for (at, op) in state.log.iter().enumerate() {
                replay.apply(at as u64, op);
                let settled = replay.settled_inodes();
                let drop_all = replay.image(CrashModel::DropAll, seed);
                for model in CrashModel::ALL {
                    let image = replay.image(model, seed ^ at as u64);
                    for inode in &settled {
                        // An inode may be unnamed in one image (its create was dropped).
                        let (Some(found), Some(durable)) =
                            (image.inodes.get(inode), drop_all.inodes.get(inode))
                        else {
                            continue;
                        };
                        checked += 1;
                        assert_eq!(found, durable, "{model} changed inode {} at op {at}", inode.0);
                    }
                }
            }
            assert!(checked > 0, "no settled inode was compared");
        });
    }
}

#[test]
fn with_seed_returns_the_value_and_resumes_a_panic() {
    assert_eq!(with_seed("value", 9, |seed| seed * 2), 18);
    let caught = std::panic::catch_unwind(|| with_seed("panics", 5, |_| panic!("boom")));
    let payload = caught.expect_err("the panic must propagate");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
}

#[test]
#[should_panic(expected = "start at 1")]
fn fault_plans_are_one_based() {
    let _ = FaultPlan::once(0, FaultErrno::Eio);
}
