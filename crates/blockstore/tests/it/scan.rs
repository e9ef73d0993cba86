//! `scan_segments`, the map-free scan that salvage reads a damaged store with: on an intact
//! store it finds exactly what the map holds; it never writes; a damaged map checkpoint
//! costs nothing; a damaged newest copy yields the older copy with a doubt naming the lost
//! version; a block lost without a trace in the middle of a group puts every older copy in
//! doubt; an incomplete group at the log's end is left out, as recovery leaves it out,
//! unless the caller knows better; a segment cut short puts older copies in doubt; a group
//! of cleaning's is never left out.

use std::path::{Path, PathBuf};

use tierkv_blockstore::format::{self, BLOCKS_START, BLOCK_ALIGN, BLOCK_HEADER_BYTES};
use tierkv_blockstore::{
    scan_segments, scan_segments_with, BlockId, BlockStore, BlockWrite, GroupId, LogStore,
    ScanOptions, StoreOptions,
};
use tierkv_io::sim::SimFs;
use tierkv_io::{AccessMethod, OpenOptions, Storage};

use crate::content;

fn options() -> StoreOptions {
    StoreOptions { segment_bytes: 256 << 10, background_cleaning: false, ..StoreOptions::default() }
}

/// A closed store of three groups: blocks 1..=4 (version 1), then 1 and 5..=7 (version 2),
/// then 2 deleted and 8 written (version 3).
fn build(storage: &Storage, dir: &Path) {
    let store = LogStore::open(storage, dir, options()).expect("open");
    let first: Vec<(BlockId, Vec<u8>)> =
        (1..=4).map(|i| (BlockId(i), content(BlockId(i), 1, 3000))).collect();
    let second: Vec<(BlockId, Vec<u8>)> =
        [1, 5, 6, 7].iter().map(|&i| (BlockId(i), content(BlockId(i), 2, 2000))).collect();
    for group in [&first, &second] {
        let refs: Vec<(BlockId, &[u8])> = group.iter().map(|(id, b)| (*id, b.as_slice())).collect();
        store.write_group(&refs).expect("write");
    }
    let eight = content(BlockId(8), 3, 500);
    store
        .apply_group(&[BlockWrite::Delete(BlockId(2)), BlockWrite::Put(BlockId(8), &eight)])
        .expect("third group");
    store.close().expect("close");
}

/// Where the copy of `id` at `version` lies: its segment file and offset.
fn find(fs: &SimFs, dir: &Path, id: u64, version: u64) -> (PathBuf, u64) {
    for (path, bytes) in fs.snapshot().files {
        if !path.starts_with(dir) || !path.to_string_lossy().ends_with(".blk") {
            continue;
        }
        let mut at = BLOCKS_START as usize;
        while at + BLOCK_HEADER_BYTES <= bytes.len() {
            if let Ok(h) = format::decode_header(&bytes[at..]) {
                if h.id == BlockId(id) && h.version == GroupId(version) && h.remote.is_none() {
                    return (path, at as u64);
                }
            }
            at += BLOCK_ALIGN as usize;
        }
    }
    panic!("no copy of block {id} at version {version}");
}

fn flip(storage: &Storage, path: &Path, at: u64) {
    let file = storage.open(path, &OpenOptions::new(AccessMethod::Syscall)).expect("open");
    let mut byte = [0u8];
    file.read_at(&mut byte, at).expect("read");
    file.write_at(&[byte[0] ^ 0x41], at).expect("write");
}

#[test]
fn an_intact_store_scans_to_what_its_map_holds_and_nothing_is_written() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let dir = Path::new("/blocks");
    build(&storage, dir);
    let before = fs.snapshot();
    // Mounted read-only: any write, creation or removal would fail the scan.
    fs.set_read_only(dir, true);
    let ops = fs.op_count();
    let scan = scan_segments(&storage, dir).expect("scan");
    assert_eq!(fs.op_count(), ops, "the scan recorded a change");
    assert_eq!(fs.snapshot().files, before.files);
    assert!(scan.damage().is_empty(), "{:?}", scan.damage());
    assert!(scan.notes().is_empty(), "{:?}", scan.notes());
    let ids: Vec<u64> = scan.blocks().map(|b| b.id.0).collect();
    assert_eq!(ids, [1, 3, 4, 5, 6, 7, 8]);
    fs.set_read_only(dir, false);
    let store =
        LogStore::open(&storage, dir, StoreOptions { read_only: true, ..options() }).expect("open");
    for block in scan.blocks() {
        assert_eq!(block.doubt, None, "block {}", block.id);
        let (bytes, version) = store.read_versioned(block.id).expect("read").expect("present");
        assert_eq!(version, Some(block.version));
        assert_eq!(scan.read(block.id).expect("read"), Some(bytes));
    }
    assert_eq!(scan.read(BlockId(2)).expect("deleted"), None);
    assert_eq!(scan.get(BlockId(1)).map(|b| b.version), Some(GroupId(2)));
}

#[test]
fn a_damaged_map_checkpoint_costs_the_scan_nothing() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let dir = Path::new("/blocks");
    build(&storage, dir);
    // Reopened and closed: recovery leaves a map checkpoint.
    LogStore::open(&storage, dir, options()).expect("reopen").close().expect("close");
    let maps: Vec<PathBuf> =
        fs.snapshot().files.into_keys().filter(|p| p.to_string_lossy().ends_with(".map")).collect();
    assert_eq!(maps.len(), 1, "{maps:?}");
    let intact = scan_segments(&storage, dir).expect("scan");
    flip(&storage, &maps[0], 40);
    let read_only = StoreOptions { read_only: true, ..options() };
    assert!(LogStore::open(&storage, dir, read_only).is_err(), "the damaged map was accepted");
    let scan = scan_segments(&storage, dir).expect("scan");
    assert!(scan.damage().is_empty());
    let all = |s: &tierkv_blockstore::SegmentScan| s.blocks().cloned().collect::<Vec<_>>();
    assert_eq!(all(&scan), all(&intact));
}

#[test]
fn a_damaged_newest_copy_gives_the_older_one_with_a_doubt() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let dir = Path::new("/blocks");
    build(&storage, dir);
    let (path, at) = find(&fs, dir, 1, 2);
    // A payload byte: the header still names block 1, version 2.
    flip(&storage, &path, at + BLOCK_HEADER_BYTES as u64 + 100);
    let scan = scan_segments(&storage, dir).expect("scan");
    let one = scan.get(BlockId(1)).expect("the older copy");
    assert_eq!(one.version, GroupId(1));
    let doubt = one.doubt.as_ref().expect("a doubt");
    assert_eq!(doubt.oldest, GroupId(2));
    assert!(doubt.reason.contains("version 2 is damaged"), "{doubt}");
    assert_eq!(scan.read(BlockId(1)).expect("read"), Some(content(BlockId(1), 1, 3000)));
    assert_eq!(scan.damage().len(), 1, "{:?}", scan.damage());
    let damage = &scan.damage()[0];
    assert_eq!((damage.file.as_path(), damage.offset), (path.as_path(), at));
    assert_eq!(damage.block, Some((BlockId(1), GroupId(2))));
    assert!(damage.detail.contains("checksum"), "{damage}");
    // The damaged block was named, so nothing else is in doubt.
    for block in scan.blocks().filter(|b| b.id != BlockId(1)) {
        assert_eq!(block.doubt, None, "block {}", block.id);
    }
}

#[test]
fn a_block_lost_without_a_trace_puts_every_older_copy_in_doubt() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let dir = Path::new("/blocks");
    build(&storage, dir);
    // Block 6 sits between 5 and 7 in group 2; its header's magic is damaged, so nothing
    // says which block it was.
    let (path, at) = find(&fs, dir, 6, 2);
    flip(&storage, &path, at);
    let scan = scan_segments(&storage, dir).expect("scan");
    assert!(scan.get(BlockId(6)).is_none());
    assert!(
        scan.damage().iter().any(|d| d.offset == at && d.block.is_none()),
        "{:?}",
        scan.damage()
    );
    assert!(
        scan.notes().iter().any(|n| n.contains("group 2 lost 1 of its 4 blocks")),
        "{:?}",
        scan.notes()
    );
    // Copies older than group 2 may be stale; group 2's own and later ones may not.
    for block in scan.blocks() {
        match block.version.0 {
            1 => assert_eq!(block.doubt.as_ref().map(|d| d.oldest), Some(GroupId(2))),
            _ => assert_eq!(block.doubt, None, "block {}", block.id),
        }
    }
}

#[test]
fn an_incomplete_last_group_is_left_out_as_recovery_leaves_it() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let dir = Path::new("/blocks");
    build(&storage, dir);
    // Group 3 (delete 2, put 8) is the log's last; its last block is damaged.
    let (path, at) = find(&fs, dir, 8, 3);
    flip(&storage, &path, at + BLOCK_HEADER_BYTES as u64 + 10);
    let scan = scan_segments(&storage, dir).expect("scan");
    assert!(scan.get(BlockId(8)).is_none(), "a block of an unfinished group was kept");
    // The tombstone of block 2 went with its group: the older copy is back, in doubt.
    let two = scan.get(BlockId(2)).expect("block 2's older copy");
    assert_eq!(two.version, GroupId(1));
    assert_eq!(two.doubt.as_ref().map(|d| d.oldest), Some(GroupId(3)), "{two:?}");
    assert!(scan.notes().iter().any(|n| n.contains("group 3 at the end")), "{:?}", scan.notes());
    // Recovery agrees: the map ends with group 2.
    let store =
        LogStore::open(&storage, dir, StoreOptions { read_only: true, ..options() }).expect("open");
    assert!(store.read(BlockId(8)).expect("read").is_none());
    assert_eq!(store.read(BlockId(2)).expect("read"), scan.read(BlockId(2)).expect("read"));
    // A caller that knows the group was written in full keeps it: the tombstone deletes
    // block 2, and block 8, named by its damaged header, is the one thing lost.
    let keep = ScanOptions { keep_unfinished: true };
    let kept = scan_segments_with(&storage, dir, keep).expect("scan");
    assert!(kept.get(BlockId(2)).is_none() && kept.get(BlockId(8)).is_none());
    assert!(kept.notes().iter().any(|n| n.contains("group 3") && n.contains("kept")));
    assert!(kept.blocks().all(|b| b.doubt.is_none()), "{kept:?}");
}

#[test]
fn a_segment_cut_short_puts_every_older_copy_in_doubt() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let dir = Path::new("/blocks");
    build(&storage, dir);
    // Cut just after group 3's first block: its second (block 8) is gone with no trace.
    let (path, at) = find(&fs, dir, 2, 3);
    let file = storage.open(&path, &OpenOptions::new(AccessMethod::Syscall)).expect("open");
    file.set_len(at + BLOCK_ALIGN).expect("cut");
    drop(file);
    let scan = scan_segments(&storage, dir).expect("scan");
    let cut = scan.damage().iter().find(|d| d.offset == at + BLOCK_ALIGN).expect("the cut");
    assert!(cut.detail.contains("cut short"), "{cut}");
    assert!(scan.notes().iter().any(|n| n.contains("is cut short")), "{:?}", scan.notes());
    // Nothing follows in its stream, so any copy may be older than a lost one: one of a
    // group after group 3, the last left in the file; block 2's tombstone went with the
    // unfinished group 3 itself.
    for block in scan.blocks() {
        let doubt =
            block.doubt.as_ref().unwrap_or_else(|| panic!("block {} in no doubt", block.id));
        let oldest = match block.id.0 {
            2 => GroupId(3),
            _ => GroupId(4).max(GroupId(block.version.0 + 1)),
        };
        assert_eq!(doubt.oldest, oldest, "block {}: {doubt}", block.id);
    }
}

#[test]
fn an_unfinished_looking_group_of_cleaning_is_kept_for_its_copies() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let dir = Path::new("/blocks");
    let options = StoreOptions { segment_bytes: 64 << 10, ..options() };
    let store = LogStore::open(&storage, dir, options).expect("open");
    // Ten long-lived blocks, then overwrites of others until cleaning has work: the
    // long-lived ones are copied into cleaning's stream.
    let mut expected = std::collections::BTreeMap::new();
    for id in 1..=10u64 {
        let bytes = content(BlockId(id), 1, 2000);
        store.write_group(&[(BlockId(id), &bytes)]).expect("write");
        expected.insert(id, bytes);
    }
    for round in 0..200u64 {
        let id = BlockId(100 + round % 4);
        store.write_group(&[(id, &content(id, round, 3000))]).expect("overwrite");
    }
    let mut passes = 0;
    while store.clean_once().expect("clean") {
        passes += 1;
        assert!(passes < 100, "cleaning does not converge");
    }
    assert!(store.stats().segments_cleaned > 0, "{:?}", store.stats());
    store.close().expect("close");
    // Damage one copy made by cleaning: a payload byte, so its header still names it.
    let mut relocated = None;
    for (path, bytes) in fs.snapshot().files {
        let mut at = BLOCKS_START as usize;
        while at + BLOCK_HEADER_BYTES <= bytes.len() {
            match format::decode_header(&bytes[at..]) {
                Ok(h) if h.flags & format::FLAG_RELOCATED != 0 && (1..=10).contains(&h.id.0) => {
                    relocated.get_or_insert((path.clone(), at as u64, h.id, h.group));
                    at += h.footprint() as usize;
                }
                Ok(h) => at += h.footprint() as usize,
                Err(_) => at += BLOCK_ALIGN as usize,
            }
        }
    }
    let (path, at, damaged, group) = relocated.expect("a copy made by cleaning");
    flip(&storage, &path, at + BLOCK_HEADER_BYTES as u64 + 7);
    let scan = scan_segments(&storage, dir).expect("scan");
    assert!(!scan.notes().iter().any(|n| n.contains("left out")), "{:?}", scan.notes());
    // The other copies of its group are kept, and sure; the damaged one's original went
    // with the cleaned segment.
    for (&id, bytes) in &expected {
        match BlockId(id) == damaged {
            true => assert!(scan.get(BlockId(id)).is_none(), "{group}"),
            false => {
                assert_eq!(scan.read(BlockId(id)).expect("read").as_ref(), Some(bytes));
                assert_eq!(scan.get(BlockId(id)).and_then(|b| b.doubt.clone()), None);
            }
        }
    }
}
