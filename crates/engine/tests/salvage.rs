//! `tierkv::salvage_on` on stores damaged in one known place, each report checked field by
//! field: a damaged meta block (no root: every key from loose leaves, all in doubt), a
//! damaged internal page (its key range lost, and filled, for sure, from the leaves under
//! it), a log cut short (the records after the cut reported lost), a damaged identity
//! file (nothing lost; the log found where the options say), a damaged map checkpoint (the
//! blocks found by scanning), a group recovery cuts, a backup (whole, and killed before its
//! end). The damaged store is mounted read-only throughout, and the new store must open and
//! pass `verify`. A salvage never writes over a store.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tierkv::{
    Db, Durability, KeySpan, LostRecords, Options, SalvageOptions, SalvageReport, WriteBatch,
};
use tierkv_blockstore::format::{self, BLOCKS_START, BLOCK_ALIGN, BLOCK_HEADER_BYTES};
use tierkv_io::sim::SimFs;
use tierkv_io::{AccessMethod, OpenOptions, Storage};
use tierkv_wal::format as wal_format;

const DIR: &str = "/db";
const TO: &str = "/salvaged";

fn options() -> Options {
    Options {
        cache_size: 4 << 20,
        // Small pages: 3,000 keys make a tree of three levels.
        max_page_bytes: Some(1024),
        log_segment_bytes: 1 << 20,
        block_segment_bytes: 256 << 10,
        durability: Durability::None,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// A closed store of 3,000 keys (every seventh deleted in a second checkpoint), reopened
/// and closed twice more: the first reopen's close deletes the retired pages, the second
/// reopen's map checkpoint covers every block, so the block store's recovery reads none
/// of them. Returns what it holds.
fn build(storage: &Storage, options: Options) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open_on(storage, DIR, options.clone()).expect("open");
    let mut expected = BTreeMap::new();
    let mut batch = WriteBatch::new();
    for i in 0..3000u32 {
        let value = format!("value {i} {}", "v".repeat(i as usize % 30)).into_bytes();
        batch.put(key(i), &value);
        expected.insert(key(i), value);
    }
    db.write(&batch).expect("write");
    db.checkpoint().expect("checkpoint");
    let mut batch = WriteBatch::new();
    for i in (0..3000u32).step_by(7) {
        batch.delete(key(i));
        expected.remove(&key(i));
    }
    db.write(&batch).expect("deletes");
    db.close().expect("close");
    for _ in 0..2 {
        Db::open_on(storage, DIR, options.clone()).expect("reopen").close().expect("close");
    }
    expected
}

/// Salvages `/db` into `/salvaged` with `/db` mounted read-only.
fn salvage(fs: &SimFs, options: SalvageOptions) -> SalvageReport {
    salvage_to(fs, TO, options)
}

/// Salvages `/db` into `to` with `/db` mounted read-only.
fn salvage_to(fs: &SimFs, to: &str, options: SalvageOptions) -> SalvageReport {
    let storage = Storage::Sim(fs.clone());
    fs.set_read_only(DIR, true);
    let report = tierkv::salvage_on(&storage, DIR, to, options);
    fs.set_read_only(DIR, false);
    report.expect("salvage")
}

/// The salvaged store's entries; it must open and verify clean.
fn salvaged(fs: &SimFs) -> BTreeMap<Vec<u8>, Vec<u8>> {
    salvaged_in(fs, TO)
}

/// The entries of the salvaged store in `to`; it must open and verify clean.
fn salvaged_in(fs: &SimFs, to: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let options = Options { read_only: true, ..options() };
    let db = Db::open_on(&Storage::Sim(fs.clone()), to, options).expect("the salvaged store");
    let report = db.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    let entries = db.range(..).map(|entry| entry.expect("entry")).collect();
    db.close().expect("close");
    entries
}

/// The newest intact copy of block `id`: its file, offset and payload.
fn newest_block(fs: &SimFs, id: u64) -> (PathBuf, u64, Vec<u8>) {
    let mut best: Option<(u64, PathBuf, u64, Vec<u8>)> = None;
    for (path, bytes) in fs.snapshot().files {
        if !path.starts_with(Path::new(DIR).join("blocks"))
            || path.extension().is_none_or(|e| e != "blk")
        {
            continue;
        }
        let mut at = BLOCKS_START as usize;
        while at + BLOCK_HEADER_BYTES <= bytes.len() {
            let Ok(header) = format::decode_header(&bytes[at..]) else {
                at += BLOCK_ALIGN as usize;
                continue;
            };
            let end = at + BLOCK_HEADER_BYTES + header.payload_len();
            let intact = end <= bytes.len()
                && format::verify_block(&bytes[at..at + 64], &bytes[at + 64..end]).is_ok();
            if intact && header.id.0 == id && header.remote.is_none() && !header.is_tombstone() {
                let version = header.version.0;
                if best.as_ref().is_none_or(|(v, ..)| *v < version) {
                    best = Some((version, path.clone(), at as u64, bytes[at + 64..end].to_vec()));
                }
            }
            at += if intact { header.footprint() as usize } else { BLOCK_ALIGN as usize };
        }
    }
    let (_, path, offset, payload) = best.expect("the block");
    (path, offset, payload)
}

fn flip(fs: &SimFs, path: &Path, at: u64) {
    let storage = Storage::Sim(fs.clone());
    let file = storage.open(path, &OpenOptions::new(AccessMethod::Syscall)).expect("open");
    let mut byte = [0u8];
    file.read_at(&mut byte, at).expect("read");
    file.write_at(&[byte[0] ^ 0x5a], at).expect("write");
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

#[test]
fn a_damaged_meta_block_leaves_no_root_and_every_key_comes_from_loose_leaves_in_doubt() {
    let fs = SimFs::new();
    let expected = build(&Storage::Sim(fs.clone()), options());
    let (path, offset, _) = newest_block(&fs, 0);
    flip(&fs, &path, offset + BLOCK_HEADER_BYTES as u64 + 20);
    assert!(Db::open_on(&Storage::Sim(fs.clone()), DIR, options()).is_err());
    let report = salvage(&fs, SalvageOptions::default());
    println!("{report}");
    assert!(!report.scanned_blocks);
    assert_eq!(report.checkpoint, None);
    assert_eq!(report.tree_entries, 0);
    assert_eq!(report.lost.len(), 1);
    assert_eq!(report.lost[0].span, KeySpan::all());
    assert!(report.lost[0].reason.contains("meta block could not be read"));
    assert_eq!(report.lost[0].recovered, expected.len() as u64);
    assert_eq!(report.loose_entries, expected.len() as u64);
    assert_eq!(report.doubtful.len(), 1);
    assert_eq!(report.doubtful[0].span, KeySpan::all());
    assert!(report.doubtful[0].reason.contains("loose blocks"), "{report}");
    assert!(report.lost_values.is_empty());
    assert!(report.problems.iter().any(|p| p.contains("the meta block cannot be read")));
    // Without a checkpoint every record is replayed: the log holds the last one's writes.
    assert_eq!(report.log.lost, None);
    assert!(!report.is_complete());
    assert_eq!(salvaged(&fs), expected);
}

#[test]
fn a_damaged_internal_page_loses_its_range_and_the_leaves_under_it_fill_it_for_sure() {
    let fs = SimFs::new();
    let expected = build(&Storage::Sim(fs.clone()), options());
    let (_, _, meta) = newest_block(&fs, 0);
    let root = u64_at(&meta, 16);
    let (_, _, root_page) = newest_block(&fs, root);
    assert_eq!(root_page[0], 2, "the root is an internal page");
    // The root's second child: its range lies between the root's first two separators.
    // (A slotted page: the prefix at 32, then 8-byte slots of head, offset and suffix
    // length; a separator's child follows its suffix.)
    let separator = |page: &[u8], n: usize| {
        let u16_at = |at: usize| u16::from_le_bytes([page[at], page[at + 1]]) as usize;
        let prefix_len = u16_at(4);
        let slot = 32 + prefix_len + 8 * n;
        let (offset, len) = (u16_at(slot + 4), u16_at(slot + 6));
        let key = [&page[32..32 + prefix_len], &page[offset..offset + len]].concat();
        (key, u64_at(page, offset + len))
    };
    let (low, child) = separator(&root_page, 0);
    let (high, _) = separator(&root_page, 1);
    let (path, offset, child_page) = newest_block(&fs, child);
    assert_eq!(child_page[0], 2, "the tree has three levels");
    flip(&fs, &path, offset + BLOCK_HEADER_BYTES as u64 + 30);
    let report = salvage(&fs, SalvageOptions::default());
    println!("{report}");
    let in_range = expected.keys().filter(|k| **k >= low && **k < high).count() as u64;
    assert!(in_range > 0);
    assert_eq!(report.lost.len(), 1, "{report}");
    let lost = &report.lost[0];
    assert_eq!(lost.span, KeySpan { low: Some(low.clone()), high: Some(high.clone()) });
    assert!(lost.reason.starts_with(&format!("page {child} cannot be read")), "{}", lost.reason);
    assert_eq!(lost.recovered, in_range);
    assert_eq!(report.loose_entries, in_range);
    assert_eq!(report.tree_entries, expected.len() as u64 - in_range);
    // Read through the block map, with the meta block and its free list: the loose leaves
    // are the tree's own, so nothing is in doubt.
    assert!(report.doubtful.is_empty(), "{report}");
    assert!(report.lost_values.is_empty() && report.log.lost.is_none());
    assert!(!report.is_complete());
    assert_eq!(salvaged(&fs), expected);
}

#[test]
fn a_log_cut_short_reports_the_records_after_the_cut_lost() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let mut expected = build(&storage, options());
    // 200 writes after the last checkpoint, left in the log by a drop without a close.
    let db = Db::open_on(&storage, DIR, options()).expect("open");
    let sequence = db.stats().expect("stats").checkpoint_sequence;
    for i in 0..200u32 {
        db.put(format!("late{i:03}"), format!("late value {i}")).expect("put");
    }
    drop(db);
    // Cut the log in the middle of the 100th of them.
    let log_dir = Path::new(DIR).join("log");
    let mut cut = None;
    for (path, bytes) in fs.snapshot().files.into_iter().filter(|(p, _)| p.starts_with(&log_dir)) {
        let mut at = wal_format::RECORDS_START as usize;
        while let Ok(header) = wal_format::decode_header(&bytes[at..], (bytes.len() - at) as u64) {
            if header.lsn.0 == sequence + 100 {
                cut = Some((path.clone(), at as u64 + 10));
            }
            at += wal_format::record_bytes(header.len as usize) as usize;
        }
    }
    let (path, at) = cut.expect("the 100th record");
    let file = storage.open(&path, &OpenOptions::new(AccessMethod::Syscall)).expect("open");
    file.set_len(at).expect("cut");
    drop(file);
    for i in 0..99u32 {
        expected.insert(format!("late{i:03}").into_bytes(), format!("late value {i}").into_bytes());
    }
    let report = salvage(&fs, SalvageOptions::default());
    println!("{report}");
    // The copy's own close checkpoints the empty record its log starts with.
    assert!(report.checkpoint.is_some_and(|(_, s)| s >= sequence), "{report}");
    assert!(report.lost.is_empty() && report.lost_values.is_empty(), "{report}");
    assert_eq!(report.log.records, 99);
    assert_eq!((report.log.puts, report.log.deletes), (99, 0));
    assert_eq!(report.log.replayed, Some((sequence + 1, sequence + 99)));
    assert_eq!(report.log.lost, Some(LostRecords { first: sequence + 100, last: None }));
    let stop = report.log.stop.as_deref().expect("a stop");
    assert!(stop.contains("cut short"), "{stop}");
    assert_eq!(report.doubtful.len(), 1);
    assert_eq!(report.doubtful[0].span, KeySpan::all());
    assert!(report.doubtful[0].reason.contains(&format!("records from {} on", sequence + 100)));
    assert!(!report.is_complete());
    assert_eq!(salvaged(&fs), expected);
}

#[test]
fn a_damaged_identity_file_costs_nothing_but_the_log_place_it_names() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let log_dir = PathBuf::from("/elsewhere/log");
    storage.create_dir_all("/elsewhere").expect("mkdir");
    let expected = build(&storage, Options { log_dir: Some(log_dir.clone()), ..options() });
    flip(&fs, &Path::new(DIR).join(tierkv::IDENTITY_FILE), 20);
    assert!(Db::open_on(&storage, DIR, options()).is_err());
    // Without the log's place, the log is looked for inside the store, and is not there.
    let report = salvage(&fs, SalvageOptions::default());
    println!("{report}");
    assert!(report.problems.iter().any(|p| p.starts_with("the identity file cannot be read")));
    assert!(report.lost.is_empty() && report.lost_values.is_empty());
    assert_eq!(report.tree_entries, expected.len() as u64);
    let stop = report.log.stop.as_deref().expect("no log");
    assert!(stop.contains("there is no log at /db/log"), "{stop}");
    let sequence = report.checkpoint.expect("the tree").1;
    assert_eq!(report.log.lost, Some(LostRecords { first: sequence + 1, last: None }));
    assert!(!report.is_complete());
    assert_eq!(salvaged(&fs), expected);
    // Given the log's place, nothing is lost.
    let options = SalvageOptions { log_dir: Some(log_dir), ..Default::default() };
    let report = salvage_to(&fs, "/salvaged2", options);
    println!("{report}");
    assert_eq!(report.log.lost, None);
    assert_eq!(report.log.stop, None);
    assert!(report.is_complete(), "{report}");
    assert_eq!(report.problems.len(), 1, "{report}");
    assert_eq!(salvaged_in(&fs, "/salvaged2"), expected);
}

#[test]
fn a_damaged_map_checkpoint_is_salvaged_by_scanning_with_nothing_lost() {
    let fs = SimFs::new();
    let expected = build(&Storage::Sim(fs.clone()), options());
    let maps: Vec<PathBuf> = fs
        .snapshot()
        .files
        .into_keys()
        .filter(|p| p.extension().is_some_and(|e| e == "map"))
        .collect();
    assert_eq!(maps.len(), 1);
    flip(&fs, &maps[0], 50);
    assert!(Db::open_on(&Storage::Sim(fs.clone()), DIR, options()).is_err());
    let report = salvage(&fs, SalvageOptions::default());
    println!("{report}");
    assert!(report.scanned_blocks);
    assert!(report.is_complete(), "{report}");
    assert_eq!(report.tree_entries, expected.len() as u64);
    assert!(report.problems[0].starts_with("the block store's map could not be loaded"));
    assert_eq!(salvaged(&fs), expected);
}

#[test]
fn a_salvage_never_writes_over_a_store_or_beside_other_files() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    build(&storage, options());
    let into_itself = tierkv::salvage_on(&storage, DIR, DIR, SalvageOptions::default());
    assert!(matches!(into_itself, Err(tierkv::Error::AlreadyExists { .. })), "{into_itself:?}");
    storage.create_dir_all("/other").expect("mkdir");
    let file = OpenOptions::new(AccessMethod::Syscall).create(true);
    drop(storage.open("/other/notes.txt", &file).expect("a file"));
    let beside = tierkv::salvage_on(&storage, DIR, "/other", SalvageOptions::default());
    assert!(matches!(beside, Err(tierkv::Error::NotAStore { .. })), "{beside:?}");
    let missing = tierkv::salvage_on(&storage, "/nothing", TO, SalvageOptions::default());
    assert!(matches!(missing, Err(tierkv::Error::NotFound { .. })), "{missing:?}");
    assert!(!storage.exists(TO).expect("exists"), "a refused salvage made a store");
}

/// A closed store of 3,000 keys written in batches of 100 over a log of small segments
/// (whose truncation leaves only the last records), checkpointed after the batches that end
/// at the keys in `checkpoints` and by the close, and never reopened (the block store's
/// recovery reads every group). Then every copy of the leaf holding `key00010`, written by
/// the first checkpoint, is damaged. Returns the keys written.
fn damaged_first_checkpoint(fs: &SimFs, checkpoints: &[u32]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let storage = Storage::Sim(fs.clone());
    let options = Options {
        // Room for every write in the memtable: checkpoints come only when asked for.
        cache_size: 64 << 20,
        log_segment_bytes: 64 << 10,
        checkpoint_log_bytes: 1 << 30,
        checkpoint_interval: std::time::Duration::from_secs(3600),
        ..options()
    };
    let db = Db::open_on(&storage, DIR, options).expect("open");
    let mut expected = BTreeMap::new();
    for start in (0..3000u32).step_by(100) {
        let mut batch = WriteBatch::new();
        for i in start..start + 100 {
            batch.put(key(i), format!("value {i}"));
            expected.insert(key(i), format!("value {i}").into_bytes());
        }
        db.write(&batch).expect("write");
        if checkpoints.contains(&(start + 100)) {
            db.checkpoint().expect("checkpoint");
        }
    }
    db.close().expect("close");
    // The leaf entry of `key00010` (its key's suffix, then the value: kind 0, length 8,
    // "value 10"), in every copy of the leaf.
    let needle = [&[0u8, 8, 0][..], b"value 10"].concat();
    for (path, bytes) in fs.snapshot().files {
        if path.extension().is_none_or(|e| e != "blk") {
            continue;
        }
        let mut at = 0;
        while let Some(found) = bytes[at..].windows(needle.len()).position(|w| w == needle) {
            flip(fs, &path, (at + found + 5) as u64);
            at += found + needle.len();
        }
    }
    expected
}

/// The report of a salvage that lost only the damaged leaf holding `key00010`: checked,
/// and the salvaged store against `expected` less that leaf's keys.
fn check_only_the_leaf_lost(fs: &SimFs, report: &SalvageReport, mut expected: Expected) {
    assert!(report.scanned_blocks);
    assert_eq!(report.checkpoint.map(|(_, sequence)| sequence), Some(30));
    assert_eq!(report.lost.len(), 1, "{report}");
    let lost = &report.lost[0];
    assert_eq!(lost.span.low, None);
    assert!(lost.reason.starts_with("no intact copy of page"), "{}", lost.reason);
    assert_eq!(lost.recovered, 0);
    assert!(report.doubtful.is_empty() && report.log.lost.is_none(), "{report}");
    expected.retain(|key, _| !lost.span.contains(key));
    assert!(expected.contains_key(&key(100)) && !expected.contains_key(&key(10)));
    assert_eq!(report.tree_entries, expected.len() as u64);
    assert_eq!(salvaged(fs), expected);
}

type Expected = BTreeMap<Vec<u8>, Vec<u8>>;

#[test]
fn a_group_that_recovery_cuts_with_every_group_after_it_is_read_past_by_scanning() {
    let fs = SimFs::new();
    let expected = damaged_first_checkpoint(&fs, &[1000, 2000]);
    let report = salvage(&fs, SalvageOptions::default());
    println!("{report}");
    // Recovery cut the log at the damaged group, and every later group with it, down to
    // the new store's empty tree, where the log (truncated since) no longer reaches. The
    // scan reads past the damage to the last checkpoint's meta block.
    assert!(report.problems[0].contains("before a newer meta block"), "{report}");
    check_only_the_leaf_lost(&fs, &report, expected);
}

#[test]
fn an_unfinished_looking_last_group_is_kept_when_the_log_shows_its_checkpoint_finished() {
    let fs = SimFs::new();
    // The close's checkpoint is the only one: its group, damaged, is the block store's
    // last, and looks like a write that never finished, to recovery and to the scan.
    let expected = damaged_first_checkpoint(&fs, &[]);
    let report = salvage(&fs, SalvageOptions::default());
    println!("{report}");
    // But the log was truncated past the older meta block's checkpoint, which happens only
    // once a later checkpoint is durable: the group is kept.
    let kept = report.problems.iter().find(|p| p.starts_with("the log starts at record"));
    assert!(kept.is_some_and(|p| p.contains("is kept")), "{report}");
    check_only_the_leaf_lost(&fs, &report, expected);
}

#[test]
fn a_backup_salvages_completely_and_one_still_in_progress_is_reported_lost() {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let expected = build(&storage, options());
    let db = Db::open_on(&storage, DIR, options()).expect("open");
    let sequence = db.backup("/copy").expect("backup");
    db.close().expect("close");
    let salvage_copy = |to: &str| {
        fs.set_read_only("/copy", true);
        let report = tierkv::salvage_on(&storage, "/copy", to, SalvageOptions::default());
        fs.set_read_only("/copy", false);
        report.expect("salvage")
    };
    let report = salvage_copy("/from-copy");
    println!("{report}");
    assert!(report.is_complete() && report.problems.is_empty(), "{report}");
    // The copy's own close checkpoints the empty record its log starts with.
    assert!(report.checkpoint.is_some_and(|(_, s)| s >= sequence), "{report}");
    assert_eq!(salvaged_in(&fs, "/from-copy"), expected);
    // The identity file as a backup killed before its end leaves it (its checksum whole).
    let path = Path::new("/copy").join(tierkv::IDENTITY_FILE);
    let mut bytes = fs.read_file(&path).expect("identity");
    bytes[20..24].copy_from_slice(&3u32.to_le_bytes());
    let end = bytes.len() - 4;
    let crc = tierkv_io::crc32c(&bytes[..end]);
    bytes[end..].copy_from_slice(&crc.to_le_bytes());
    let file = storage.open(&path, &OpenOptions::new(AccessMethod::Syscall)).expect("open");
    file.write_at(&bytes, 0).expect("write");
    drop(file);
    assert!(matches!(
        Db::open_on(&storage, "/copy", options()),
        Err(tierkv::Error::IncompleteBackup { .. })
    ));
    let report = salvage_copy("/from-unfinished");
    println!("{report}");
    assert_eq!(report.lost.len(), 1, "{report}");
    assert_eq!(report.lost[0].span, KeySpan::all());
    assert!(report.lost[0].reason.contains("a backup that never finished"));
    assert!(!report.is_complete());
    assert_eq!(salvaged_in(&fs, "/from-unfinished"), expected);
}
