//! Tests of the simulated backend through the public API: the `File` contract, every crash
//! model, failed-sync semantics, fault injection, determinism and concurrent use.
//!
//! Every seeded check runs inside `with_seed`, so a failure prints the seed to rerun with
//! `TIERKV_SEED`. No test asserts on time.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tierkv_io::sim::{
    seed_from_env, with_seed, CrashModel, FaultPlan, SimFs, SimOpKind, SimSnapshot, TearSize,
};
use tierkv_io::{
    AccessMethod, AlignedBuf, AlignedItem, Error, FaultErrno, File, Op, OpenOptions, Storage,
};

/// Sections 3 and 4: failed syncs, fault injection.
mod failures;
/// Sections 5 and 6: determinism, threads.
mod runs;

const CHUNK_BYTES: u64 = 4096;

fn create(method: AccessMethod) -> OpenOptions {
    OpenOptions::new(method).create(true).chunk_bytes(CHUNK_BYTES)
}

fn existing(method: AccessMethod) -> OpenOptions {
    OpenOptions::new(method).chunk_bytes(CHUNK_BYTES)
}

/// A file system with `/db` created and durable.
fn fs_with_db() -> (SimFs, Storage) {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    storage.create_dir_all("/db").unwrap();
    storage.sync_dir("/").unwrap();
    (fs, storage)
}

/// A durable file of `bytes` at `path` (data synced, directory synced).
fn durable_file(storage: &Storage, path: &str, method: AccessMethod, bytes: &[u8]) -> File {
    let file = storage.open(path, &create(method)).unwrap();
    file.write_at(bytes, 0).unwrap();
    file.sync_data().unwrap();
    storage.sync_dir(Path::new(path).parent().unwrap()).unwrap();
    file
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt)).collect()
}

fn last_image(fs: &SimFs, model: CrashModel, seed: u64) -> SimFs {
    fs.crash_image(fs.op_count(), model, seed)
}

fn injected(result: Result<impl Sized, Error>) -> (Op, FaultErrno, u64) {
    match result {
        Err(Error::Injected { op, errno, call, .. }) => (op, errno, call),
        Err(other) => panic!("expected an injected fault, got {other}"),
        Ok(_) => panic!("expected an injected fault, got success"),
    }
}

fn raw_os_error(error: &Error) -> Option<i32> {
    match error {
        Error::Io { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// 1. The File contract
// ---------------------------------------------------------------------------------------------

#[test]
fn reads_past_the_end_zero_lengths_and_huge_offsets_are_typed_errors() {
    let (_fs, storage) = fs_with_db();
    let file = storage.open("/db/a", &create(AccessMethod::Syscall)).unwrap();
    file.write_at(b"hello", 0).unwrap();
    assert_eq!(file.len(), 4096, "a small write grows the file to one chunk");

    let mut buf = [0u8; 10];
    match file.read_at(&mut buf, 4090) {
        Err(Error::ReadPastEnd { offset: 4090, len: 10, file_len: 4096, .. }) => {}
        other => panic!("expected ReadPastEnd, got {other:?}"),
    }
    file.read_at(&mut buf[..5], 0).unwrap();
    assert_eq!(&buf[..5], b"hello");

    assert!(matches!(file.read_at(&mut [], 0), Err(Error::ZeroLength { op: Op::Read, .. })));
    assert!(matches!(
        file.write_at(&[], 7),
        Err(Error::ZeroLength { op: Op::Write, offset: 7, .. })
    ));
    assert!(matches!(file.persist(0, 0), Err(Error::ZeroLength { op: Op::Persist, .. })));
    assert!(matches!(
        file.write_at(b"x", u64::MAX),
        Err(Error::OffsetTooLarge { op: Op::Write, .. })
    ));
    assert!(matches!(file.read_at(&mut buf, i64::MAX as u64), Err(Error::OffsetTooLarge { .. })));
    assert!(matches!(file.set_len(u64::MAX), Err(Error::OffsetTooLarge { op: Op::SetLen, .. })));
    assert!(matches!(file.reserve(u64::MAX), Err(Error::OffsetTooLarge { op: Op::Allocate, .. })));
    assert!(matches!(
        file.store_u64(4, 1),
        Err(Error::Unaligned { op: Op::StoreU64, item: AlignedItem::Offset, required: 8, .. })
    ));
    assert_eq!(file.len(), 4096, "failed calls change nothing");
}

#[test]
fn read_only_handles_refuse_every_modification() {
    let (_fs, storage) = fs_with_db();
    durable_file(&storage, "/db/a", AccessMethod::Syscall, b"data");
    for method in AccessMethod::ALL {
        let file = storage.open("/db/a", &existing(method).read_only(true)).unwrap();
        let read_only = |result: Result<(), Error>, op: Op| {
            assert!(
                matches!(result, Err(Error::ReadOnlyHandle { op: found, .. }) if found == op),
                "{method}: {op} on a read-only handle"
            );
        };
        read_only(file.write_at(b"x", 0), Op::Write);
        read_only(file.set_len(1), Op::SetLen);
        read_only(file.reserve(1 << 20), Op::Allocate);
        read_only(file.store_u64(0, 1), Op::StoreU64);
        if method != AccessMethod::Direct {
            let mut buf = [0u8; 4];
            file.read_at(&mut buf, 0).unwrap();
            assert_eq!(&buf, b"data");
        }
        file.sync_data().unwrap();
        assert_eq!(file.len(), 4096);
    }
}

#[test]
fn missing_files_parents_and_existing_files_give_the_os_errors() {
    let (fs, storage) = fs_with_db();
    let missing = storage.open("/db/nope", &existing(AccessMethod::Syscall));
    assert!(matches!(missing, Err(Error::NotFound { op: Op::Open, .. })));
    let no_parent = storage.open("/nodir/a", &create(AccessMethod::Syscall));
    assert!(no_parent.as_ref().is_err_and(Error::is_not_found), "{no_parent:?}");
    assert_eq!(fs.op_count(), 2, "failed opens record nothing (create_dir + sync_dir only)");

    storage.open("/db/a", &create(AccessMethod::Syscall)).unwrap();
    let again = storage.open("/db/a", &create(AccessMethod::Syscall).create_new(true));
    assert_eq!(raw_os_error(&again.unwrap_err()), Some(libc::EEXIST));
    // Plain create opens the existing file without truncating it.
    storage.open("/db/a", &create(AccessMethod::Syscall)).unwrap();

    assert!(storage.remove_file("/db/nope").unwrap_err().is_not_found());
    assert!(storage.rename("/db/nope", "/db/b").unwrap_err().is_not_found());
    assert!(storage.rename("/db/a", "/nodir/b").unwrap_err().is_not_found());
    assert!(storage.sync_dir("/nodir").unwrap_err().is_not_found());
    assert!(storage.list_dir("/nodir").unwrap_err().is_not_found());
    assert!(fs.read_file("/db/nope").unwrap_err().is_not_found());
    assert_eq!(
        raw_os_error(&storage.open("/db", &create(AccessMethod::Syscall)).unwrap_err()),
        Some(libc::EISDIR)
    );
    assert_eq!(raw_os_error(&storage.create_dir_all("/db/a").unwrap_err()), Some(libc::EEXIST));
    assert_eq!(raw_os_error(&storage.create_dir_all("/db/a/b").unwrap_err()), Some(libc::ENOTDIR));
    assert_eq!(raw_os_error(&storage.list_dir("/db/a").unwrap_err()), Some(libc::ENOTDIR));
}

#[test]
fn writes_past_the_end_grow_in_chunks_and_count_resizes() {
    let (fs, storage) = fs_with_db();
    let file = storage.open("/db/a", &create(AccessMethod::Syscall)).unwrap();
    file.write_at(b"0123456789", 0).unwrap();
    assert_eq!(file.len(), 4096);
    let stats = file.stats();
    assert_eq!((stats.resize_syscalls, stats.fallocate_calls), (1, 1));

    file.write_at(b"abc", 100).unwrap();
    assert_eq!(file.stats().resize_syscalls, 1, "a write inside the file does not grow it");

    file.write_at(b"0123456789", 4090).unwrap();
    assert_eq!(file.len(), 8192);
    file.reserve(10_000).unwrap();
    assert_eq!(file.len(), 12_288);
    file.reserve(100).unwrap();
    assert_eq!(file.len(), 12_288, "reserve never shrinks");
    let stats = file.stats();
    assert_eq!((stats.resize_syscalls, stats.fallocate_calls, stats.ftruncate_calls), (3, 3, 0));
    assert_eq!((stats.writes, stats.write_bytes_syscall), (3, 23));

    let sizes: Vec<u64> =
        fs.ops().iter().filter(|op| op.kind == SimOpKind::SetLen).map(|op| op.index).collect();
    assert_eq!(sizes.len(), 3, "each growth is recorded as a size change");

    let exact = storage.open("/db/b", &create(AccessMethod::Syscall).chunk_bytes(1)).unwrap();
    exact.write_at(b"xyz", 5).unwrap();
    assert_eq!(exact.len(), 8, "chunk 1 grows exactly to the end of the write");
    assert_eq!(fs.read_file("/db/b").unwrap(), b"\0\0\0\0\0xyz");
}

#[test]
fn set_len_truncates_and_extends_with_zeros() {
    let (fs, storage) = fs_with_db();
    let file = storage.open("/db/a", &create(AccessMethod::Mmap)).unwrap();
    file.write_at(&[7u8; 100], 0).unwrap();
    file.set_len(10).unwrap();
    assert_eq!(file.len(), 10);
    file.set_len(50).unwrap();
    let mut expected = vec![7u8; 10];
    expected.resize(50, 0);
    assert_eq!(fs.read_file("/db/a").unwrap(), expected, "bytes cut by a truncate stay gone");
    let stats = file.stats();
    assert_eq!((stats.ftruncate_calls, stats.resize_syscalls), (2, 3));
}

#[test]
fn open_handles_survive_rename_and_remove() {
    let (fs, storage) = fs_with_db();
    let file = storage.open("/db/a", &create(AccessMethod::Syscall)).unwrap();
    file.write_at(b"one", 0).unwrap();
    storage.rename("/db/a", "/db/b").unwrap();
    file.write_at(b"two", 3).unwrap();
    assert!(!storage.exists("/db/a").unwrap());
    assert_eq!(&fs.read_file("/db/b").unwrap()[..6], b"onetwo");
    storage.remove_file("/db/b").unwrap();
    assert!(!storage.exists("/db/b").unwrap());
    file.write_at(b"three", 6).unwrap();
    let mut buf = [0u8; 11];
    file.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"onetwothree", "the inode lives on while a handle is open");
    assert_eq!(file.path(), Path::new("/db/a"), "a handle keeps the path it was opened with");
    // Rename replaces an existing target.
    durable_file(&storage, "/db/c", AccessMethod::Syscall, b"ccc");
    durable_file(&storage, "/db/d", AccessMethod::Syscall, b"ddd");
    storage.rename("/db/c", "/db/d").unwrap();
    assert_eq!(&fs.read_file("/db/d").unwrap()[..3], b"ccc");
    assert_eq!(storage.list_dir("/db").unwrap(), vec!["d".to_string()]);
}

#[test]
fn list_dir_is_sorted_and_exists_sees_files_and_directories() {
    let (_fs, storage) = fs_with_db();
    storage.create_dir_all("/db/wal/old").unwrap();
    for name in ["zeta", "alpha", "mid", "Beta"] {
        storage.open(format!("/db/{name}"), &create(AccessMethod::Syscall)).unwrap();
    }
    assert_eq!(storage.list_dir("/db").unwrap(), vec!["Beta", "alpha", "mid", "wal", "zeta"]);
    assert_eq!(storage.list_dir("/db/wal").unwrap(), vec!["old"]);
    assert_eq!(storage.list_dir("/").unwrap(), vec!["db"]);
    assert!(storage.list_dir("/db/wal/old").unwrap().is_empty());
    assert!(storage.exists("/").unwrap());
    assert!(storage.exists("/db/wal").unwrap());
    assert!(storage.exists("/db/mid").unwrap());
    assert!(!storage.exists("/db/nothing").unwrap());
    storage.create_dir_all("/db/wal/old").unwrap();
}

#[test]
fn direct_handles_enforce_alignment_like_the_os_backend() {
    let (fs, storage) = fs_with_db();
    let file = storage.open("/db/a", &create(AccessMethod::Direct)).unwrap();
    assert_eq!(file.direct_alignment(), Some(4096));
    assert_eq!(file.method(), AccessMethod::Direct);
    assert_eq!(file.pmem_mode(), None);
    let mut aligned = AlignedBuf::new(8192);
    aligned[..4].copy_from_slice(b"abcd");
    file.write_at(&aligned[..4096], 0).unwrap();

    let unaligned = |result: Result<(), Error>, expected: AlignedItem| match result {
        Err(Error::Unaligned { item, required: 4096, reason, .. }) => {
            assert_eq!(item, expected);
            assert_eq!(reason, "O_DIRECT on this file");
        }
        other => panic!("expected Unaligned {expected}, got {other:?}"),
    };
    unaligned(file.write_at(&aligned[1..4097], 0), AlignedItem::BufferAddress);
    unaligned(file.write_at(&aligned[..4096], 512), AlignedItem::Offset);
    unaligned(file.write_at(&aligned[..512], 0), AlignedItem::Length);
    unaligned(file.read_at(&mut aligned[..100], 0), AlignedItem::Length);
    unaligned(file.store_u64(0, 1), AlignedItem::Length);
    let mut back = AlignedBuf::new(4096);
    file.read_at(&mut back, 0).unwrap();
    assert_eq!(&back[..4], b"abcd");
    assert_eq!(fs.read_file("/db/a").unwrap().len(), 4096);

    let other = storage.open("/db/b", &create(AccessMethod::Syscall)).unwrap();
    assert_eq!(other.direct_alignment(), None);
    other.write_at(b"x", 3).unwrap();
}

#[test]
fn counters_match_the_method() {
    let (_fs, storage) = fs_with_db();
    for method in [AccessMethod::Syscall, AccessMethod::Mmap, AccessMethod::Pmem] {
        let file = storage.open(format!("/db/{method}"), &create(method)).unwrap();
        assert_eq!(file.method(), method);
        file.write_at(&[1u8; 300], 10).unwrap();
        let mut buf = [0u8; 20];
        file.read_at(&mut buf, 0).unwrap();
        file.persist(0, 100).unwrap();
        file.store_u64(16, 5).unwrap();
        file.sync_data().unwrap();
        file.advise_dontneed().unwrap();
        let stats = file.stats();
        assert_eq!(
            (stats.reads, stats.writes > 0, stats.persists, stats.atomic_stores),
            (1, true, 1, 1)
        );
        match method {
            AccessMethod::Syscall => {
                assert_eq!((stats.read_bytes_syscall, stats.read_bytes_mapped), (20, 0));
                assert_eq!(stats.write_bytes_syscall, 308, "the store is one 8-byte pwrite");
                assert_eq!(stats.syncs, 2, "persist is fdatasync on the syscall methods");
                assert_eq!(file.pmem_mode(), None);
            }
            AccessMethod::Mmap => {
                assert_eq!((stats.read_bytes_mapped, stats.write_bytes_mapped), (20, 300));
                assert_eq!((stats.msyncs, stats.syncs, stats.fences), (1, 1, 0));
            }
            AccessMethod::Pmem => {
                assert_eq!((stats.read_bytes_mapped, stats.write_bytes_mapped), (20, 300));
                assert_eq!(
                    stats.write_bytes_nontemporal, 192,
                    "the 64-byte aligned body [64, 256)"
                );
                assert_eq!(stats.fences, 2, "one after the streaming copy, one in persist");
                // Copies do not flush; the persist of [0, 72) flushes lines 0 and 1.
                assert_eq!(stats.lines_flushed, 2);
                assert_eq!(file.pmem_mode(), Some(tierkv_io::PmemMode::DaxMapSync));
            }
            AccessMethod::Direct => unreachable!(),
        }
    }
}

#[test]
fn shared_stats_are_updated_by_every_handle() {
    let (_fs, storage) = fs_with_db();
    let stats = std::sync::Arc::new(tierkv_io::IoStats::default());
    let options = create(AccessMethod::Syscall).stats(stats.clone());
    let first = storage.open("/db/a", &options).unwrap();
    let second = storage.open("/db/b", &options).unwrap();
    first.write_at(b"x", 0).unwrap();
    second.write_at(b"y", 0).unwrap();
    assert_eq!(stats.snapshot().writes, 2);
    assert!(std::sync::Arc::ptr_eq(first.stats_handle(), &stats));
}

// ---------------------------------------------------------------------------------------------
// 2. Crash models
// ---------------------------------------------------------------------------------------------

/// A workload with every kind of op, nothing synced at the end, and no faults.
fn mixed_workload(storage: &Storage) {
    storage.create_dir_all("/db/wal").unwrap();
    let log = storage.open("/db/wal/1.log", &create(AccessMethod::Syscall)).unwrap();
    log.write_at(&pattern(5000, 1), 0).unwrap();
    log.sync_data().unwrap();
    log.write_at(&pattern(300, 2), 4000).unwrap();
    let pm = storage.open("/db/pm", &create(AccessMethod::Pmem)).unwrap();
    pm.write_at(&pattern(200, 3), 30).unwrap();
    pm.store_u64(64, 0xfeed).unwrap();
    pm.persist(64, 8).unwrap();
    pm.store_u64(72, 0xbeef).unwrap();
    let map = storage.open("/db/map", &create(AccessMethod::Mmap)).unwrap();
    map.write_at(&pattern(9000, 4), 100).unwrap();
    map.persist(5000, 10).unwrap();
    map.set_len(6000).unwrap();
    storage.rename("/db/wal/1.log", "/db/wal/2.log").unwrap();
    storage.sync_dir("/db").unwrap();
    storage.remove_file("/db/map").unwrap();
    map.write_at(b"orphan", 0).unwrap();
    log.write_at(b"after rename", 10).unwrap();
}

#[test]
fn keep_all_image_equals_the_live_state() {
    let (fs, storage) = fs_with_db();
    mixed_workload(&storage);
    for seed in 0..3 {
        let image = last_image(&fs, CrashModel::KeepAll, seed);
        assert_eq!(image.snapshot(), fs.snapshot());
    }
    assert_eq!(fs.crash_image(0, CrashModel::KeepAll, 0).snapshot(), SimSnapshot::default());
}

#[test]
fn drop_all_image_equals_the_last_synced_state() {
    let (fs, storage) = fs_with_db();
    storage.create_dir_all("/db/wal").unwrap();
    storage.sync_dir("/db").unwrap();
    let log = durable_file(&storage, "/db/wal/1.log", AccessMethod::Syscall, &pattern(6000, 1));
    let pm = durable_file(&storage, "/db/pm", AccessMethod::Pmem, &pattern(100, 2));
    let synced = fs.snapshot();

    log.write_at(&pattern(3000, 9), 5000).unwrap();
    log.set_len(100).unwrap();
    pm.store_u64(0, 1).unwrap();
    storage.open("/db/wal/2.log", &create(AccessMethod::Syscall)).unwrap();
    storage.rename("/db/pm", "/db/pm2").unwrap();
    storage.create_dir_all("/db/new/dir").unwrap();
    assert_ne!(fs.snapshot(), synced);
    for seed in 0..3 {
        assert_eq!(last_image(&fs, CrashModel::DropAll, seed).snapshot(), synced);
    }
}

#[test]
fn subset_keeps_each_pending_write_whole_and_reaches_every_combination() {
    let seed0 = seed_from_env(0);
    let (fs, storage) = fs_with_db();
    let file = durable_file(&storage, "/db/a", AccessMethod::Syscall, &[0u8; 4 * 4096]);
    for block in 0..4u64 {
        file.write_at(&[block as u8 + 1; 500], block * 4096 + 100).unwrap();
    }
    let mut combinations = BTreeSet::new();
    for seed in seed0..seed0 + 300 {
        with_seed("subset", seed, |seed| {
            let image = last_image(&fs, CrashModel::Subset, seed).read_file("/db/a").unwrap();
            let mut mask = 0u8;
            for block in 0..4usize {
                let region = &image[block * 4096 + 100..block * 4096 + 600];
                let value = block as u8 + 1;
                let present = region.iter().all(|&b| b == value);
                assert!(
                    present || region.iter().all(|&b| b == 0),
                    "block {block} is partly written"
                );
                mask |= u8::from(present) << block;
            }
            combinations.insert(mask);
        });
    }
    assert_eq!(combinations.len(), 16, "every subset of the 4 writes appears: {combinations:?}");
}

#[test]
fn prefix_images_are_a_prefix_of_the_pending_ops() {
    let seed0 = seed_from_env(0);
    let (fs, storage) = fs_with_db();
    let file = durable_file(&storage, "/db/a", AccessMethod::Syscall, &[0u8; 4096]);
    // Overlapping writes, with a create in the middle of the global order.
    let mut states = vec![vec![0u8; 4096]];
    let mut write = |i: usize| {
        let bytes = vec![i as u8 + 1; 300];
        file.write_at(&bytes, i as u64 * 100).unwrap();
        let mut next = states.last().unwrap().clone();
        next[i * 100..i * 100 + 300].copy_from_slice(&bytes);
        states.push(next);
    };
    (0..3).for_each(&mut write);
    storage.open("/db/b", &create(AccessMethod::Syscall)).unwrap();
    (3..5).for_each(&mut write);

    let mut cuts = BTreeSet::new();
    for seed in seed0..seed0 + 200 {
        with_seed("prefix", seed, |seed| {
            let image = last_image(&fs, CrashModel::Prefix, seed);
            let bytes = image.read_file("/db/a").unwrap();
            let writes_kept = states.iter().position(|state| *state == bytes);
            let writes_kept =
                writes_kept.unwrap_or_else(|| panic!("image is no prefix of the writes"));
            let created = image.read_file("/db/b").is_ok();
            // The create is the 4th pending op: it survives iff the cut is past it.
            assert!(!created || writes_kept >= 3, "create kept but an earlier write dropped");
            assert!(created || writes_kept <= 3, "later write kept but the create dropped");
            cuts.insert((writes_kept, created));
        });
    }
    assert_eq!(cuts.len(), 7, "every cut of the 6 pending ops appears: {cuts:?}");
}

#[test]
fn torn_writes_are_old_or_new_per_aligned_piece() {
    let seed0 = seed_from_env(0);
    for size in TearSize::ALL {
        let (fs, storage) = fs_with_db();
        let old = pattern(16_384, 1);
        let file = durable_file(&storage, "/db/a", AccessMethod::Syscall, &old);
        let (start, len) = (1000usize, 9000usize);
        let new = pattern(len, 77);
        file.write_at(&new, start as u64).unwrap();
        let unit = size.bytes() as usize;
        let mut mixed = 0;
        for seed in seed0..seed0 + 40 {
            with_seed(&format!("torn {}", size.bytes()), seed, |seed| {
                let image =
                    last_image(&fs, CrashModel::Torn(size), seed).read_file("/db/a").unwrap();
                assert_eq!(image.len(), old.len());
                assert_eq!(image[..start], old[..start], "bytes before the write changed");
                assert_eq!(
                    image[start + len..],
                    old[start + len..],
                    "bytes after the write changed"
                );
                let (mut olds, mut news) = (0, 0);
                let mut at = start;
                while at < start + len {
                    let next = ((at / unit + 1) * unit).min(start + len);
                    if image[at..next] == new[at - start..next - start] {
                        news += 1;
                    } else {
                        assert_eq!(image[at..next], old[at..next], "piece {at}..{next} is neither");
                        olds += 1;
                    }
                    at = next;
                }
                if olds > 0 && news > 0 {
                    mixed += 1;
                }
            });
        }
        assert!(mixed > 0, "no seed tore the write at {} bytes", size.bytes());
    }
}

#[test]
fn pmem_lines_keep_a_prefix_of_their_stores() {
    let seed0 = seed_from_env(0);
    let (fs, storage) = fs_with_db();
    let file = durable_file(&storage, "/db/pm", AccessMethod::Pmem, &[0u8; 4096]);
    // Line 0: three 8-byte stores, the third overwriting the first.
    file.store_u64(0, 0xA).unwrap();
    file.store_u64(8, 0xB).unwrap();
    file.store_u64(0, 0xC).unwrap();
    // Line 1: one unaligned 20-byte store = atoms [68, 72), [72, 80), [80, 88).
    file.write_at(&[0x11; 20], 68).unwrap();
    // Line 2: persisted.
    file.store_u64(128, 0xD).unwrap();
    file.persist(128, 8).unwrap();
    // Line 3: one persisted store, then one that is not.
    file.store_u64(192, 0xE).unwrap();
    file.persist(199, 1).unwrap();
    file.store_u64(200, 0xF).unwrap();

    let word = |bytes: &[u8], at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let line0_states = [(0, 0), (0xA, 0), (0xA, 0xB), (0xC, 0xB)];
    let mut line1_states = vec![[0u8; 20]];
    for end in [4usize, 12, 20] {
        let mut state = [0u8; 20];
        state[..end].fill(0x11);
        line1_states.push(state);
    }
    for model in [CrashModel::Subset, CrashModel::Prefix, CrashModel::Torn(TearSize::B512)] {
        let (mut seen0, mut seen1, mut seen3) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        for seed in seed0..seed0 + 100 {
            with_seed(&format!("pmem {model}"), seed, |seed| {
                let image = last_image(&fs, model, seed).read_file("/db/pm").unwrap();
                let line0 = (word(&image, 0), word(&image, 8));
                let k0 = line0_states.iter().position(|&s| s == line0);
                seen0.insert(k0.unwrap_or_else(|| panic!("line 0 {line0:x?} is no prefix")));
                let k1 = line1_states.iter().position(|s| image[68..88] == s[..]);
                seen1.insert(k1.unwrap_or_else(|| panic!("line 1 is no prefix of its atoms")));
                assert!(image[64..68].iter().chain(&image[88..128]).all(|&b| b == 0));
                assert_eq!(word(&image, 128), 0xD, "a persisted line is always present");
                assert_eq!(word(&image, 192), 0xE, "a persisted store is always present");
                let last = word(&image, 200);
                assert!(last == 0 || last == 0xF, "a store_u64 was half applied: {last:x}");
                seen3.insert(last);
            });
        }
        assert_eq!(seen0.len(), 4, "{model}: line 0 prefixes seen {seen0:?}");
        assert_eq!(seen1.len(), 4, "{model}: line 1 prefixes seen {seen1:?}");
        assert_eq!(seen3.len(), 2, "{model}: the unpersisted store of line 3 never varied");
    }
    let keep_all = last_image(&fs, CrashModel::KeepAll, 0).read_file("/db/pm").unwrap();
    assert_eq!((word(&keep_all, 0), word(&keep_all, 200)), (0xC, 0xF));
    let drop_all = last_image(&fs, CrashModel::DropAll, 0).read_file("/db/pm").unwrap();
    assert_eq!((word(&drop_all, 0), word(&drop_all, 128), word(&drop_all, 200)), (0, 0xD, 0));
}

#[test]
fn unsynced_creates_may_vanish_and_synced_ones_never_do() {
    let seed0 = seed_from_env(0);
    let (fs, storage) = fs_with_db();
    let file = storage.open("/db/a", &create(AccessMethod::Syscall)).unwrap();
    file.write_at(b"data", 0).unwrap();
    file.sync_data().unwrap();
    let unsynced = fs.op_count();
    storage.sync_dir("/db").unwrap();
    let synced = fs.op_count();

    assert!(last_image(&fs, CrashModel::KeepAll, 0).read_file("/db/a").is_ok());
    assert!(fs
        .crash_image(unsynced, CrashModel::DropAll, 0)
        .read_file("/db/a")
        .unwrap_err()
        .is_not_found());
    let mut outcomes = BTreeSet::new();
    for seed in seed0..seed0 + 40 {
        with_seed("unsynced create", seed, |seed| {
            outcomes.insert(
                fs.crash_image(unsynced, CrashModel::Subset, seed).read_file("/db/a").is_ok(),
            );
            for model in CrashModel::ALL {
                let bytes = fs.crash_image(synced, model, seed).read_file("/db/a").unwrap();
                assert_eq!(&bytes[..4], b"data", "{model}: synced file lost its data");
            }
        });
    }
    assert_eq!(
        outcomes.len(),
        2,
        "the unsynced create neither always survived nor always vanished"
    );
}

#[test]
fn unsynced_renames_and_removes_may_revert() {
    let seed0 = seed_from_env(0);
    let (fs, storage) = fs_with_db();
    durable_file(&storage, "/db/tmp", AccessMethod::Syscall, b"new");
    durable_file(&storage, "/db/old", AccessMethod::Syscall, b"old");
    storage.rename("/db/tmp", "/db/current").unwrap();
    storage.remove_file("/db/old").unwrap();
    let unsynced = fs.op_count();
    storage.sync_dir("/db").unwrap();

    let names = |image: &SimFs| image.snapshot().files.into_keys().collect::<Vec<PathBuf>>();
    let drop_all = fs.crash_image(unsynced, CrashModel::DropAll, 0);
    assert_eq!(names(&drop_all), [PathBuf::from("/db/old"), PathBuf::from("/db/tmp")]);
    let keep_all = fs.crash_image(unsynced, CrashModel::KeepAll, 0);
    assert_eq!(names(&keep_all), [PathBuf::from("/db/current")]);
    let mut outcomes = BTreeSet::new();
    for seed in seed0..seed0 + 60 {
        with_seed("unsynced rename", seed, |seed| {
            let image = fs.crash_image(unsynced, CrashModel::Subset, seed);
            let renamed = image.read_file("/db/current").is_ok();
            assert_ne!(renamed, image.read_file("/db/tmp").is_ok(), "the file has 0 or 2 names");
            let name = if renamed { "/db/current" } else { "/db/tmp" };
            assert_eq!(&image.read_file(name).unwrap()[..3], b"new");
            outcomes.insert((renamed, image.read_file("/db/old").is_ok()));
            for model in CrashModel::ALL {
                let after = last_image(&fs, model, seed);
                assert_eq!(names(&after), [PathBuf::from("/db/current")], "{model}");
            }
        });
    }
    assert_eq!(outcomes.len(), 4, "rename and remove revert independently: {outcomes:?}");
}

#[test]
fn a_rename_across_directories_never_leaves_two_names() {
    let seed0 = seed_from_env(0);
    let (fs, storage) = fs_with_db();
    storage.create_dir_all("/db/x").unwrap();
    storage.create_dir_all("/db/y").unwrap();
    storage.sync_dir("/db").unwrap();
    let file = storage.open("/db/x/f", &create(AccessMethod::Syscall)).unwrap();
    file.write_at(b"f", 0).unwrap();
    file.sync_data().unwrap();
    storage.rename("/db/x/f", "/db/y/f").unwrap();
    // Syncing the target directory makes the rename durable, and with it the create it moved.
    storage.sync_dir("/db/y").unwrap();
    for seed in seed0..seed0 + 20 {
        for model in CrashModel::ALL {
            with_seed(&format!("cross-directory rename {model}"), seed, |seed| {
                let names: Vec<PathBuf> =
                    last_image(&fs, model, seed).snapshot().files.into_keys().collect();
                assert_eq!(names, [PathBuf::from("/db/y/f")], "{model}");
            });
        }
    }
}

#[test]
fn a_persisted_store_after_a_truncate_survives() {
    let (fs, storage) = fs_with_db();
    let pm = durable_file(&storage, "/db/pm", AccessMethod::Pmem, &[1u8; 4096]);
    pm.set_len(0).unwrap();
    pm.store_u64(0, 0x5555).unwrap();
    pm.persist(0, 8).unwrap();
    for model in CrashModel::ALL {
        for seed in 0..10 {
            let image = last_image(&fs, model, seed).read_file("/db/pm").unwrap();
            assert_eq!(image[..8], 0x5555u64.to_le_bytes(), "{model} seed {seed}");
            assert!(image[8..].iter().all(|&b| b == 0), "{model}: truncated bytes came back");
        }
    }
}

#[test]
fn directories_not_synced_into_their_parent_take_their_files_with_them() {
    let (fs, storage) = fs_with_db();
    storage.create_dir_all("/db/x/y").unwrap();
    durable_file(&storage, "/db/x/y/f", AccessMethod::Syscall, b"f");
    let drop_all = last_image(&fs, CrashModel::DropAll, 0);
    assert!(!drop_all.snapshot().dirs.contains(Path::new("/db/x")));
    assert!(drop_all.snapshot().files.is_empty(), "a file in an unreachable directory survived");
    storage.sync_dir("/db").unwrap();
    storage.sync_dir("/db/x").unwrap();
    let drop_all = last_image(&fs, CrashModel::DropAll, 0);
    assert_eq!(drop_all.snapshot(), fs.snapshot());
    assert_eq!(Storage::Sim(drop_all).list_dir("/db/x/y").unwrap(), vec!["f"]);
}

#[test]
fn synced_data_survives_every_model() {
    let seed0 = seed_from_env(0);
    let (fs, storage) = fs_with_db();
    let mut files = Vec::new();
    for (index, method) in AccessMethod::ALL.into_iter().enumerate() {
        let file = storage.open(format!("/db/f{index}"), &create(method)).unwrap();
        let mut bytes = AlignedBuf::new(8192);
        bytes.copy_from_slice(&pattern(8192, index as u8));
        file.write_at(&bytes, 0).unwrap();
        if method == AccessMethod::Pmem {
            file.persist(0, 8192).unwrap();
        }
        file.sync_data().unwrap();
        files.push((file, bytes));
    }
    storage.sync_dir("/db").unwrap();
    let expected = fs.snapshot();
    // Pending junk after the sync point: other ranges, other files, namespace changes.
    for (file, _) in &files {
        if file.method() != AccessMethod::Direct {
            file.write_at(&[0xEE; 100], 9000).unwrap();
            file.store_u64(16_384, 3).unwrap();
        }
    }
    storage.open("/db/junk", &create(AccessMethod::Syscall)).unwrap().write_at(b"j", 0).unwrap();
    for seed in seed0..seed0 + 20 {
        for model in CrashModel::ALL {
            with_seed(&format!("synced data {model}"), seed, |seed| {
                let image = last_image(&fs, model, seed);
                for (path, bytes) in &expected.files {
                    let found = image.read_file(path).unwrap();
                    assert_eq!(
                        found[..8192],
                        bytes[..8192],
                        "{model}: {} lost synced bytes",
                        path.display()
                    );
                }
            });
        }
    }
}

#[test]
fn a_persist_makes_only_its_range_durable() {
    let (fs, storage) = fs_with_db();
    let map = durable_file(&storage, "/db/map", AccessMethod::Mmap, &[0u8; 3 * 4096]);
    map.write_at(&[1u8; 3 * 4096], 0).unwrap();
    map.persist(4096 + 10, 1).unwrap();
    let image = last_image(&fs, CrashModel::DropAll, 0).read_file("/db/map").unwrap();
    assert!(image[..4096].iter().all(|&b| b == 0));
    assert!(image[4096..8192].iter().all(|&b| b == 1), "the persisted page is durable");
    assert!(image[8192..].iter().all(|&b| b == 0));

    let pm = durable_file(&storage, "/db/pm", AccessMethod::Pmem, &[0u8; 256]);
    pm.write_at(&[2u8; 256], 0).unwrap();
    pm.persist(70, 1).unwrap();
    let image = last_image(&fs, CrashModel::DropAll, 0).read_file("/db/pm").unwrap();
    assert_eq!(image.iter().filter(|&&b| b == 2).count(), 64, "exactly the persisted line");
    assert!(image[64..128].iter().all(|&b| b == 2));
}

#[test]
fn images_of_images_start_from_their_base() {
    let (fs, storage) = fs_with_db();
    mixed_workload(&storage);
    let first = last_image(&fs, CrashModel::Subset, 5);
    assert_eq!((first.op_count(), first.calls()), (0, 0));
    let base = first.snapshot();
    assert_eq!(first.crash_image(0, CrashModel::DropAll, 1).snapshot(), base);
    let storage = Storage::Sim(first.clone());
    let file = storage.open("/db/after", &create(AccessMethod::Syscall)).unwrap();
    file.write_at(b"second life", 0).unwrap();
    assert_eq!(first.calls(), 2);
    assert_eq!(last_image(&first, CrashModel::DropAll, 1).snapshot(), base);
    assert_eq!(last_image(&first, CrashModel::KeepAll, 1).snapshot(), first.snapshot());
}
