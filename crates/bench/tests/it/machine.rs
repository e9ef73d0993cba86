//! Evicting a file from the page cache (`machine::evict_file`), with its check of what
//! stayed resident.

use std::path::Path;

use tierkv_bench::machine::{evict_file, resident_fraction, EvictionMethod};
use tierkv_io::{AccessMethod, File, OpenOptions, Storage};

fn open(path: &Path, method: AccessMethod, chunk: u64) -> File {
    Storage::Os
        .open(path, &OpenOptions::new(method).create(true).chunk_bytes(chunk))
        .unwrap_or_else(|e| panic!("open {} with {method}: {e}", path.display()))
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
fn eviction_leaves_a_disk_file_cold_and_says_how() {
    let dir = tempfile::tempdir().expect("tempdir");
    for method in [AccessMethod::Syscall, AccessMethod::Mmap] {
        let path = dir.path().join(format!("{method}.cold"));
        let file = open(&path, method, 1);
        file.write_at(&pattern(1 << 20, 2), 0).expect("write 1 MiB");
        let mut buf = vec![0u8; 1 << 20];
        file.read_at(&mut buf, 0).expect("read it into the cache");
        assert!(resident_fraction(&path).expect("mincore") > 0.9, "{method}: warm after a read");
        let report = evict_file(&file).expect("evict");
        assert!(report.resident_before > 0.9, "{method}: {report:?}");
        assert!(report.resident_after <= 0.01, "{method}: still resident: {report:?}");
        assert!(
            matches!(report.method, EvictionMethod::Fadvise | EvictionMethod::DropCaches),
            "{report:?}"
        );
        file.read_at(&mut buf, 0).expect("read after eviction");
        assert_eq!(buf, pattern(1 << 20, 2), "{method}: eviction loses nothing");
    }
    let shm = tempfile::tempdir_in("/dev/shm").expect("shm");
    let file = open(&shm.path().join("x"), AccessMethod::Syscall, 1);
    file.write_at(&[1u8; 8192], 0).expect("write");
    let report = evict_file(&file).expect("evict on tmpfs");
    assert_eq!(report.method, EvictionMethod::NotApplicable, "tmpfs has nothing colder");
}
