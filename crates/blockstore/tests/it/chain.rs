//! Chains (`BlockStore::begin_chain`): a group written in pieces is invisible until it
//! commits, and then whole, the last piece's copy of an id winning; a chain dropped open
//! leaves nothing, before or after a reopen; pieces spread over several segments survive
//! map checkpoints and cleaning taken between them; salvage leaves out a chain without its
//! ending piece; the doublewrite store's default chain behaves the same.

use std::path::Path;

use tierkv_blockstore::{
    scan_segments, BlockId, BlockStore, BlockWrite, DoublewriteOptions, DoublewriteStore, LogStore,
    StoreOptions,
};
use tierkv_io::Storage;

use crate::content;

fn options() -> StoreOptions {
    StoreOptions {
        segment_bytes: 64 << 10,
        space_target: 1.1,
        background_cleaning: false,
        ..StoreOptions::default()
    }
}

fn read(store: &dyn BlockStore, id: u64) -> Option<Vec<u8>> {
    store.read(BlockId(id)).expect("read")
}

/// Writes blocks 0..4 as version 0 (one group), then a chain that puts 1 as a decoy, then
/// 1 and 2 again, deletes 3 and puts 4 and 9: checks nothing shows before `commit`, and the
/// last copies after it.
fn chain_round(store: &dyn BlockStore) {
    let old: Vec<Vec<u8>> = (0..5).map(|id| content(BlockId(id), 0, 700)).collect();
    let writes: Vec<(BlockId, &[u8])> =
        old.iter().enumerate().map(|(id, b)| (BlockId(id as u64), &b[..])).collect();
    store.write_group(&writes).expect("first group");
    let decoy = content(BlockId(1), 99, 900);
    let (one, two, four, nine) = (
        content(BlockId(1), 1, 800),
        content(BlockId(2), 1, 3000),
        content(BlockId(4), 1, 10),
        content(BlockId(9), 1, 5000),
    );
    let mut chain = store.begin_chain();
    chain
        .put(&[BlockWrite::Put(BlockId(1), &decoy), BlockWrite::Put(BlockId(2), &two)])
        .expect("put");
    chain.put(&[BlockWrite::Put(BlockId(1), &one), BlockWrite::Delete(BlockId(3))]).expect("put");
    for id in 0..5 {
        assert_eq!(read(store, id).as_deref(), Some(&old[id as usize][..]), "before commit");
    }
    assert_eq!(read(store, 9), None);
    chain
        .commit(&[BlockWrite::Put(BlockId(4), &four), BlockWrite::Put(BlockId(9), &nine)])
        .expect("commit");
    assert_eq!(read(store, 0).as_deref(), Some(&old[0][..]));
    assert_eq!(read(store, 1), Some(one), "the last piece's copy wins");
    assert_eq!(read(store, 2), Some(two));
    assert_eq!(read(store, 3), None);
    assert_eq!(read(store, 4), Some(four));
    assert_eq!(read(store, 9), Some(nine));
}

#[test]
fn a_chain_shows_nothing_until_it_commits_and_then_its_last_copies() {
    let dir = tempfile::tempdir().expect("dir");
    let store = LogStore::open(&Storage::Os, dir.path(), options()).expect("open");
    chain_round(&store);
    let expected: Vec<Option<Vec<u8>>> = (0..10).map(|id| read(&store, id)).collect();
    assert_eq!(store.stats().groups, 2, "a chain counts as one group");
    store.close().expect("close");
    let store = LogStore::open(&Storage::Os, dir.path(), options()).expect("reopen");
    let found: Vec<Option<Vec<u8>>> = (0..10).map(|id| read(&store, id)).collect();
    assert_eq!(found, expected);
    store.verify().expect("verify");
}

#[test]
fn the_doublewrite_store_chains_in_memory_with_the_same_result() {
    let dir = tempfile::tempdir().expect("dir");
    let options = DoublewriteOptions::default();
    let store = DoublewriteStore::open(&Storage::Os, dir.path(), options.clone()).expect("open");
    chain_round(&store);
    let expected: Vec<Option<Vec<u8>>> = (0..10).map(|id| read(&store, id)).collect();
    store.close().expect("close");
    let store = DoublewriteStore::open(&Storage::Os, dir.path(), options).expect("reopen");
    assert_eq!((0..10).map(|id| read(&store, id)).collect::<Vec<_>>(), expected);
}

/// Reopens without closing: copies the files as they are (every piece was written, none
/// synced by a close), as a crash would leave them on a file system that kept the writes.
fn reopen_as_crashed(dir: &Path, into: &Path) -> LogStore {
    for entry in std::fs::read_dir(dir).expect("list") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), into.join(entry.file_name())).expect("copy");
    }
    LogStore::open(&Storage::Os, into, options()).expect("recover")
}

#[test]
fn a_chain_dropped_open_or_cut_by_a_crash_leaves_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let store = LogStore::open(&Storage::Os, dir.path(), options()).expect("open");
    let kept = content(BlockId(1), 0, 500);
    store.write_group(&[(BlockId(1), &kept[..])]).expect("group");
    let big: Vec<Vec<u8>> = (0..6).map(|i| content(BlockId(i), 5, 20_000)).collect();
    // Open: the pieces are written (across segments) and the copy of the files is taken
    // before the chain ends.
    let mut chain = store.begin_chain();
    for (i, bytes) in big.iter().enumerate() {
        chain.put(&[BlockWrite::Put(BlockId(i as u64), bytes)]).expect("put");
    }
    let crashed = tempfile::tempdir().expect("dir");
    let recovered = reopen_as_crashed(dir.path(), crashed.path());
    assert_eq!(recovered.recovery_report().chains_dropped, 1);
    assert_eq!(read(&recovered, 1), Some(kept.clone()), "an unended chain counts for nothing");
    assert_eq!(read(&recovered, 0), None);
    recovered.verify().expect("verify");
    // A new group after recovery takes a fresh id, and a second recovery keeps it.
    recovered.write_group(&[(BlockId(7), b"after")]).expect("group");
    recovered.close().expect("close");
    let again = LogStore::open(&Storage::Os, crashed.path(), options()).expect("reopen");
    assert_eq!(read(&again, 7).as_deref(), Some(&b"after"[..]));
    assert_eq!(read(&again, 0), None);
    // Salvage without the map leaves the chain out too.
    let scan = scan_segments(&Storage::Os, dir.path()).expect("scan");
    assert!(scan.notes().iter().any(|n| n.contains("no ending piece")), "{:?}", scan.notes());
    let ids: Vec<BlockId> = scan.blocks().map(|b| b.id).collect();
    assert_eq!(ids, [BlockId(1)], "{:?}", scan.notes());
    // Dropped: nothing shows, and its segments are free to clean.
    drop(chain);
    assert_eq!(read(&store, 0), None);
    assert_eq!(read(&store, 1), Some(kept));
    store.checkpoint().expect("checkpoint");
    while store.clean_once().expect("clean") {}
    store.verify().expect("verify");
}

#[test]
fn pieces_over_many_segments_survive_checkpoints_and_cleaning_between_them() {
    let dir = tempfile::tempdir().expect("dir");
    let store = LogStore::open(&Storage::Os, dir.path(), options()).expect("open");
    // Garbage to clean: 48 ids, of which 36 are deleted again.
    for id in 0..48 {
        let bytes = content(BlockId(id), 2, 9_000);
        store.write_group(&[(BlockId(id), &bytes[..])]).expect("group");
    }
    let gone: Vec<BlockWrite<'_>> = (12..48).map(|id| BlockWrite::Delete(BlockId(id))).collect();
    store.apply_group(&gone).expect("deletes");
    let mut chain = store.begin_chain();
    let mut cleaned = 0;
    for id in 0..12u64 {
        let bytes = content(BlockId(id), 10, 9_000);
        chain.put(&[BlockWrite::Put(BlockId(id), &bytes)]).expect("put");
        // Map checkpoints and cleaning between the pieces must keep them.
        store.checkpoint().expect("checkpoint");
        while store.clean_once().expect("clean") {
            cleaned += 1;
        }
    }
    assert!(cleaned > 0, "nothing was cleaned between the pieces");
    for id in 0..12 {
        assert_eq!(read(&store, id), Some(content(BlockId(id), 2, 9_000)), "before commit");
    }
    chain.commit(&[]).expect("commit");
    // Cleaning after the commit, and recovery from the checkpoint taken while it was open
    // (a copy of the files taken now, as after a crash).
    while store.clean_once().expect("clean") {}
    let crashed = tempfile::tempdir().expect("dir");
    let recovered = reopen_as_crashed(dir.path(), crashed.path());
    for id in 0..12 {
        let expected = Some(content(BlockId(id), 10, 9_000));
        assert_eq!(read(&store, id), expected, "after commit");
        assert_eq!(read(&recovered, id), expected, "after recovery");
    }
    assert!(store.stats().segments_cleaned > 0);
    store.verify().expect("verify");
    recovered.verify().expect("verify");
}

#[test]
fn the_ending_piece_stays_while_recovery_reads_the_first() {
    let dir = tempfile::tempdir().expect("dir");
    // No reuse of freed space (it has checkpoints taken to feed it), so recovery reads
    // from the checkpoint below; cleaning takes only segments with nothing live.
    let options = StoreOptions { space_target: 8.0, ..options() };
    let store = LogStore::open(&Storage::Os, dir.path(), options).expect("open");
    // Enough live data that what the rest frees stays under the share that has the store
    // take a checkpoint of its own.
    for group in 0..50 {
        let bytes: Vec<Vec<u8>> = (0..8).map(|i| content(BlockId(i), 0, 9_000)).collect();
        let blocks: Vec<(BlockId, &[u8])> = bytes
            .iter()
            .enumerate()
            .map(|(i, b)| (BlockId(1000 + group * 8 + i as u64), &b[..]))
            .collect();
        store.write_group(&blocks).expect("load");
    }
    let first: Vec<Vec<u8>> = (0..4).map(|id| content(BlockId(id), 1, 9_000)).collect();
    let mut chain = store.begin_chain();
    let piece: Vec<BlockWrite<'_>> =
        first.iter().enumerate().map(|(id, b)| BlockWrite::Put(BlockId(id as u64), b)).collect();
    chain.put(&piece).expect("put");
    // Recovery from this checkpoint reads the first piece.
    store.checkpoint().expect("checkpoint");
    let checkpoints = store.stats().checkpoints;
    let filler = |version: u64| {
        for id in 100..108 {
            let bytes = content(BlockId(id), version, 9_000);
            store.write_group(&[(BlockId(id), &bytes[..])]).expect("filler");
        }
    };
    // The ending piece in a later segment, which then fills up and is sealed.
    filler(1);
    let last: Vec<Vec<u8>> = (4..8).map(|id| content(BlockId(id), 1, 9_000)).collect();
    let piece: Vec<BlockWrite<'_>> =
        last.iter().enumerate().map(|(i, b)| BlockWrite::Put(BlockId(4 + i as u64), b)).collect();
    chain.commit(&piece).expect("commit");
    filler(2);
    // Everything in the ending piece's segment is written again elsewhere: nothing in it
    // is live, but recovery from the checkpoint above needs its mark.
    for id in (4..8).chain(100..108) {
        let bytes = content(BlockId(id), 2, 9_000);
        store.write_group(&[(BlockId(id), &bytes[..])]).expect("again");
    }
    filler(3);
    filler(4);
    while store.clean_once().expect("clean") {}
    assert!(store.stats().segments_cleaned > 0, "nothing cleaned");
    assert_eq!(store.stats().checkpoints, checkpoints, "a checkpoint moved the scan on");
    let crashed = tempfile::tempdir().expect("dir");
    let recovered = reopen_as_crashed(dir.path(), crashed.path());
    for (id, bytes) in first.iter().enumerate() {
        assert_eq!(read(&recovered, id as u64).as_ref(), Some(bytes), "block {id}");
    }
    recovered.verify().expect("verify");
}
