//! Behaviour every OS access method shares: round trips, growth in chunks, set_len, persist,
//! atomic stores, and the SIGBUS guard for files shrunk behind tierkv's back.

use std::path::{Path, PathBuf};

use tierkv_io::{AccessMethod, AlignedBuf, Error, File, OpenOptions, PmemMode, Storage};

pub(crate) fn dirs() -> Vec<(tempfile::TempDir, &'static str)> {
    vec![
        (tempfile::tempdir().expect("disk tempdir"), "disk"),
        (tempfile::tempdir_in("/dev/shm").expect("/dev/shm tempdir"), "shm"),
    ]
}

pub(crate) fn open(path: &Path, method: AccessMethod, chunk: u64) -> File {
    Storage::Os
        .open(path, &OpenOptions::new(method).create(true).chunk_bytes(chunk))
        .unwrap_or_else(|e| panic!("open {} with {method}: {e}", path.display()))
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
fn every_method_round_trips_and_grows_in_chunks() {
    for (dir, label) in dirs() {
        for method in AccessMethod::ALL {
            let path: PathBuf = dir.path().join(format!("{method}.dat"));
            let file = open(&path, method, 64 << 10);
            assert_eq!(file.len(), 0);
            let data = AlignedBuf::new(8192);
            let mut data = data;
            data.copy_from_slice(&pattern(8192, 7));
            file.write_at(&data, 4096).unwrap_or_else(|e| panic!("{label} {method}: {e}"));
            assert_eq!(file.len(), 64 << 10, "{label} {method}: growth is one 64 KiB chunk");
            let mut back = AlignedBuf::new(8192);
            file.read_at(&mut back, 4096).unwrap_or_else(|e| panic!("{label} {method}: {e}"));
            assert_eq!(&back[..], &data[..], "{label} {method}");
            let stats = file.stats();
            assert_eq!(stats.resize_syscalls, 1, "{label} {method}: {stats:?}");
            assert_eq!(stats.fallocate_calls, 1);
            file.sync_data().unwrap_or_else(|e| panic!("{label} {method}: {e}"));
            drop(file);
            let on_disk = std::fs::read(&path).expect("read back");
            assert_eq!(on_disk.len(), 64 << 10);
            assert_eq!(&on_disk[4096..12288], &data[..]);
            assert!(on_disk[..4096].iter().all(|&b| b == 0));
        }
    }
}

#[test]
fn many_small_appends_make_one_resize_call_per_chunk() {
    let dir = tempfile::tempdir().expect("tempdir");
    for method in [AccessMethod::Syscall, AccessMethod::Mmap, AccessMethod::Pmem] {
        for (chunk, expected_calls) in [(1u64 << 20, 4u64), (4096, 1024)] {
            let path = dir.path().join(format!("{method}-{chunk}.log"));
            let file = open(&path, method, chunk);
            let record = pattern(4096, 3);
            for index in 0..1024u64 {
                file.write_at(&record, index * 4096).expect("append");
            }
            let stats = file.stats();
            assert_eq!(stats.resize_syscalls, expected_calls, "{method} chunk {chunk}");
            if method.is_mapped() {
                assert_eq!(stats.remaps, expected_calls, "{method} chunk {chunk}");
            }
        }
    }
}

#[test]
fn set_len_truncates_and_extends_with_zeros_for_every_method() {
    for (dir, label) in dirs() {
        for method in [AccessMethod::Syscall, AccessMethod::Mmap, AccessMethod::Pmem] {
            let path = dir.path().join(format!("{method}.trunc"));
            let file = open(&path, method, 1);
            file.write_at(&pattern(10_000, 1), 0).expect("write");
            assert_eq!(file.len(), 10_000, "{label} {method}: chunk 1 grows exactly");
            file.set_len(3000).expect("truncate");
            let mut buf = vec![0u8; 100];
            let error = file.read_at(&mut buf, 2950).expect_err("read past the new end");
            assert!(
                matches!(error, Error::ReadPastEnd { file_len: 3000, .. }),
                "{label} {method}: {error}"
            );
            file.set_len(9000).expect("extend");
            file.read_at(&mut buf, 5000).expect("read the new zeros");
            assert!(buf.iter().all(|&b| b == 0), "{label} {method}: extension is zeros");
            file.read_at(&mut buf, 2900).expect("read across the old cut");
            assert_eq!(&buf[..100], &pattern(3000, 1)[2900..3000]);
        }
    }
}

#[test]
fn pmem_mode_is_flush_only_on_shm_and_msync_on_disk() {
    let shm = tempfile::tempdir_in("/dev/shm").expect("shm");
    let disk = tempfile::tempdir().expect("disk");
    let on_shm = open(&shm.path().join("p"), AccessMethod::Pmem, 4096);
    let on_disk = open(&disk.path().join("p"), AccessMethod::Pmem, 4096);
    let shm_fs = tierkv_io::file_system_info(shm.path()).expect("fs info");
    assert_eq!(shm_fs.fs_type, "tmpfs");
    assert!(!shm_fs.dax, "no DAX on this machine's tmpfs");
    assert_eq!(on_shm.pmem_mode(), Some(PmemMode::FlushOnly));
    assert_eq!(on_disk.pmem_mode(), Some(PmemMode::Msync));
    for file in [&on_shm, &on_disk] {
        file.write_at(&pattern(1000, 9), 0).expect("write");
        file.store_u64(1024, 0xDEAD_BEEF_0123_4567).expect("store");
        file.persist(0, 1032).expect("persist");
        let mut word = [0u8; 8];
        file.read_at(&mut word, 1024).expect("read");
        assert_eq!(u64::from_le_bytes(word), 0xDEAD_BEEF_0123_4567);
    }
    let flush = on_shm.stats();
    assert!(flush.lines_flushed >= 1000 / 64, "{flush:?}");
    assert!(flush.write_bytes_nontemporal >= 896, "1000 B copies use NT stores: {flush:?}");
    assert_eq!(flush.fences, 2, "one after the streaming copy, one in persist");
    assert_eq!(flush.msyncs, 0);
    let msync = on_disk.stats();
    assert_eq!(msync.msyncs, 1, "{msync:?}");
    assert_eq!(msync.lines_flushed, 0);
}

#[test]
fn a_file_shrunk_behind_our_back_is_an_error_not_sigbus() {
    for (dir, label) in dirs() {
        for method in [AccessMethod::Mmap, AccessMethod::Pmem] {
            let path = dir.path().join(format!("{method}.shrink"));
            let file = open(&path, method, 1);
            file.write_at(&pattern(64 << 10, 5), 0).expect("write 64 KiB");
            // Another handle (standing for another process) cuts the file to 8 KiB.
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|other| other.set_len(8192))
                .expect("external truncate");
            let mut buf = vec![0u8; 4096];
            let error = file.read_at(&mut buf, 32 << 10).expect_err("read in the cut range");
            match error {
                Error::FileShrunk { expected_len, actual_len, .. } => {
                    assert_eq!(expected_len, 64 << 10, "{label} {method}");
                    assert_eq!(actual_len, 8192, "{label} {method}");
                }
                other => panic!("{label} {method}: expected FileShrunk, got {other}"),
            }
            assert_eq!(file.stats().sigbus_faults, 1, "{label} {method}");
            assert_eq!(file.len(), 8192, "{label} {method}: the handle learned the new size");
            file.read_at(&mut buf, 0).expect("the surviving range still reads");
            assert_eq!(buf, pattern(64 << 10, 5)[..4096]);
            // A write into the cut range is also caught, then redone after regrowth.
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|other| other.set_len(4096))
                .expect("second external truncate");
            let error = file.write_at(&[1u8; 16], 6000).expect_err("write into the cut range");
            assert!(matches!(error, Error::FileShrunk { actual_len: 4096, .. }), "{error}");
            file.write_at(&[2u8; 16], 6000).expect("a later write regrows the file");
            let mut back = [0u8; 16];
            file.read_at(&mut back, 6000).expect("read back");
            assert_eq!(back, [2u8; 16]);
        }
    }
}

#[test]
fn truncate_growth_makes_one_ftruncate_per_chunk_and_no_allocation() {
    let dir = tempfile::tempdir().expect("tempdir");
    for method in [AccessMethod::Syscall, AccessMethod::Mmap] {
        let path = dir.path().join(format!("{method}.sparse"));
        let options = OpenOptions::new(method)
            .create(true)
            .chunk_bytes(4096)
            .growth(tierkv_io::GrowthStrategy::Truncate);
        let file = Storage::Os.open(&path, &options).expect("open");
        for index in 0..64u64 {
            file.write_at(&pattern(4096, index as u8), index * 4096).expect("append");
        }
        let stats = file.stats();
        assert_eq!(
            (stats.resize_syscalls, stats.ftruncate_calls, stats.fallocate_calls),
            (64, 64, 0),
            "{method}"
        );
        let mut back = vec![0u8; 4096];
        file.read_at(&mut back, 63 * 4096).expect("read");
        assert_eq!(back, pattern(4096, 63));
    }
}

#[test]
fn growth_falls_back_to_posix_fallocate_where_fallocate_is_unsupported() {
    // ramfs has no fallocate: the first attempt fails with EOPNOTSUPP, and glibc's
    // posix_fallocate then grows the file by writing.
    let mount = match crate::bad_input::Mounted::new("ramfs", "size=16m") {
        Ok(mount) => mount,
        Err(reason) => return crate::bad_input::skip("the posix_fallocate fallback", &reason),
    };
    let path = mount.point.join("grow.dat");
    let file = open(&path, AccessMethod::Syscall, 64 << 10);
    file.write_at(&pattern(1000, 4), 0).expect("write");
    let stats = file.stats();
    assert_eq!(
        (stats.resize_syscalls, stats.fallocate_calls, stats.posix_fallocate_calls),
        (2, 1, 1),
        "{stats:?}"
    );
    assert_eq!(file.len(), 64 << 10);
    let mut back = vec![0u8; 1000];
    file.read_at(&mut back, 0).expect("read");
    assert_eq!(back, pattern(1000, 4));
}

#[test]
fn persist_ranges_flushes_every_range_behind_one_fence() {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    let storage = Storage::Os;
    let options = OpenOptions::new(AccessMethod::Pmem).create(true).chunk_bytes(1 << 20);
    let file = storage.open(dir.path().join("ranges"), &options).unwrap();
    file.write_at(&pattern(300, 1), 4096).unwrap();
    file.store_u64(64, 4396).unwrap();
    let before = file.stats();
    file.persist_ranges(&[(4096, 300), (64, 8)]).unwrap();
    let delta = file.stats().since(&before);
    if file.pmem_mode() == Some(PmemMode::FlushOnly) {
        assert_eq!((delta.persists, delta.fences, delta.msyncs), (1, 1, 0), "{delta:?}");
        assert_eq!(delta.lines_flushed, 5 + 1, "{delta:?}");
    } else {
        assert!(delta.msyncs + delta.syncs >= 1, "{delta:?}");
    }
    file.persist_ranges(&[]).unwrap();
    let error = file.persist_ranges(&[(0, 8), (u64::MAX - 4, 8)]).unwrap_err();
    assert!(error.to_string().contains("persist"), "{error}");
    // The syscall method syncs once for any number of ranges.
    let plain = storage
        .open(dir.path().join("plain"), &OpenOptions::new(AccessMethod::Syscall).create(true))
        .unwrap();
    plain.write_at(b"abc", 0).unwrap();
    let before = plain.stats();
    plain.persist_ranges(&[(0, 1), (1, 2)]).unwrap();
    assert_eq!(plain.stats().since(&before).syncs, 1);
}

#[test]
fn a_writeback_hint_leaves_contents_and_durability_to_sync() {
    for (dir, label) in dirs() {
        for method in AccessMethod::ALL {
            let path: PathBuf = dir.path().join(format!("hint-{method}.dat"));
            let file = open(&path, method, 64 << 10);
            let mut data = AlignedBuf::new(16384);
            data.copy_from_slice(&pattern(16384, 3));
            file.write_at(&data, 0).unwrap_or_else(|e| panic!("{label} {method}: {e}"));
            file.start_writeback(0, 16384).unwrap_or_else(|e| panic!("{label} {method}: {e}"));
            // A range past the end and a range of pages never written are fine too.
            file.start_writeback(1 << 30, 4096).unwrap_or_else(|e| panic!("{label} {method}: {e}"));
            file.sync_data().unwrap_or_else(|e| panic!("{label} {method}: {e}"));
            let mut back = AlignedBuf::new(16384);
            file.read_at(&mut back, 0).unwrap_or_else(|e| panic!("{label} {method}: {e}"));
            assert_eq!(&back[..], &data[..], "{label} {method}");
            let hints = file.stats().writeback_hints;
            let expected = if method == AccessMethod::Pmem { 0 } else { 2 };
            assert_eq!(hints, expected, "{label} {method}: hints made (none on pmem)");
            assert!(
                matches!(file.start_writeback(0, 0), Err(Error::ZeroLength { .. })),
                "{label} {method}: an empty range is a bug in the caller"
            );
            assert!(
                matches!(
                    file.start_writeback(u64::MAX - 10, 100),
                    Err(Error::OffsetTooLarge { .. })
                ),
                "{label} {method}"
            );
        }
    }
}

#[test]
fn a_vectored_write_equals_the_write_of_its_concatenation() {
    for (dir, label) in dirs() {
        for method in AccessMethod::ALL {
            let path: PathBuf = dir.path().join(format!("vectored-{method}.dat"));
            let file = open(&path, method, 64 << 10);
            // 3000 parts (more than one pwritev takes), some empty, 4096 bytes in all so
            // that O_DIRECT accepts the joined write.
            let data = pattern(4096, 9);
            let mut parts: Vec<&[u8]> = Vec::new();
            let mut at = 0;
            for i in 0..3000usize {
                let len = if i % 3 == 0 { 0 } else { (i % 5).min(data.len() - at) };
                parts.push(&data[at..at + len]);
                at += len;
            }
            parts.push(&data[at..]);
            file.write_vectored_at(&parts, 8192)
                .unwrap_or_else(|e| panic!("{label} {method}: {e}"));
            let mut back = AlignedBuf::new(4096);
            file.read_at(&mut back, 8192).unwrap_or_else(|e| panic!("{label} {method}: {e}"));
            assert_eq!(&back[..], &data[..], "{label} {method}");
            assert!(
                matches!(file.write_vectored_at(&[&[], &[]], 0), Err(Error::ZeroLength { .. })),
                "{label} {method}: nothing to write is a bug in the caller"
            );
        }
    }
}

/// This process's file-backed resident memory (`RssFile` of /proc/self/status), bytes.
fn rss_file_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("RssFile:")).expect("RssFile line");
    let kib: u64 = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("kB");
    kib * 1024
}

#[test]
fn released_pages_keep_their_bytes_and_leave_resident_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    const LEN: u64 = 32 << 20;
    for method in AccessMethod::ALL {
        let path = dir.path().join(format!("{method}.log"));
        let file = open(&path, method, LEN);
        let mut data = AlignedBuf::new(1 << 20);
        data.copy_from_slice(&pattern(1 << 20, 9));
        for offset in (0..LEN).step_by(data.len()) {
            file.write_at(&data, offset).unwrap_or_else(|e| panic!("{method}: {e}"));
        }
        let before = rss_file_bytes();
        // Half a page in at each end: only the whole pages between are let go.
        file.release_pages(2048, LEN - 4096).unwrap_or_else(|e| panic!("{method}: {e}"));
        let after = rss_file_bytes();
        let released = file.stats().released_bytes;
        if method == AccessMethod::Mmap {
            assert_eq!(released, LEN - 2 * 4096, "whole pages only");
            assert!(
                before.saturating_sub(after) >= LEN * 3 / 4,
                "{method}: resident file memory went from {before} to {after} bytes"
            );
        } else if method != AccessMethod::Pmem {
            assert_eq!(released, 0, "{method} maps nothing");
        }
        // The dirty pages let go are still the file's, before and after a sync.
        let mut back = AlignedBuf::new(data.len());
        for offset in (0..LEN).step_by(data.len()) {
            file.read_at(&mut back, offset).unwrap_or_else(|e| panic!("{method}: {e}"));
            assert!(back[..] == data[..], "{method}: bytes at {offset} changed");
        }
        file.sync_data().unwrap_or_else(|e| panic!("{method}: {e}"));
        drop(file);
        let on_disk = std::fs::read(&path).expect("read back");
        assert!(on_disk.chunks(data.len()).all(|chunk| chunk == &data[..]), "{method}");
    }
    let file = open(&dir.path().join("bad"), AccessMethod::Mmap, 4096);
    assert!(file.release_pages(u64::MAX, 2).is_err(), "an overflowing range is an error");
}
