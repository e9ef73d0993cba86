//! The log store under concurrent writers, readers and cleaning: no read ever returns a stale
//! or wrong block while cleaning moves blocks underneath.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tierkv_blockstore::{BlockId, BlockStore, Codec, LogStore, StoreOptions};
use tierkv_io::Storage;

use crate::content;

/// Two writers, two readers and a cleaning loop agree: every read is the block asked for,
/// whole, and no older than the last version acknowledged before it began. It found a race in
/// cleaning: a segment made active just as
/// cleaning chose its victim looked empty and sealed, was deleted, and went on taking
/// groups, so the map pointed into a file that was gone.
#[test]
fn concurrent_readers_writers_and_cleaning_agree() {
    let stats = concurrent_run();
    assert!(stats.blocks_relocated > 0, "{stats:?}");
}

/// Two writers, two readers and a cleaning loop on one store; returns its counters.
fn concurrent_run() -> tierkv_blockstore::StoreStats {
    const IDS: u64 = 48;
    const WRITERS: u64 = 2;
    const GROUPS: u64 = 300;
    let dir = tempfile::tempdir().expect("dir");
    let options = StoreOptions {
        segment_bytes: 64 << 10,
        space_target: 1.2,
        codec: Codec::Lz4,
        background_cleaning: true,
        ..StoreOptions::default()
    };
    let store = LogStore::open(&Storage::Os, dir.path(), options).expect("open");
    // Per block: the version last acknowledged, and the one being written (never below it).
    let acked: Vec<AtomicU64> = (0..IDS).map(|_| AtomicU64::new(0)).collect();
    let writing: Vec<AtomicU64> = (0..IDS).map(|_| AtomicU64::new(0)).collect();
    let stop = AtomicBool::new(false);
    let checked = AtomicU64::new(0);
    std::thread::scope(|scope| {
        let (store, acked, writing, stop, checked) = (&store, &acked, &writing, &stop, &checked);
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                scope.spawn(move || {
                    // Each writer owns the ids ≡ writer (mod WRITERS).
                    let own: Vec<u64> = (writer..IDS).step_by(WRITERS as usize).collect();
                    for group in 0..GROUPS {
                        // Three distinct ids: offsets 0, 5 and 10 apart among 24.
                        let ids: Vec<u64> = (0..3)
                            .map(|k| own[((group * 7 + k * 5) as usize) % own.len()])
                            .collect();
                        let blocks: Vec<(BlockId, Vec<u8>)> = ids
                            .iter()
                            .map(|&id| {
                                let version =
                                    writing[id as usize].fetch_add(1, Ordering::SeqCst) + 1;
                                let len = 300 + ((id * 131 + version * 977) % 5000) as usize;
                                (BlockId(id), content(BlockId(id), version, len))
                            })
                            .collect();
                        let refs: Vec<(BlockId, &[u8])> =
                            blocks.iter().map(|(id, bytes)| (*id, bytes.as_slice())).collect();
                        store.write_group(&refs).expect("write");
                        for &id in &ids {
                            acked[id as usize].fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        scope.spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = store.clean_once().expect("clean");
            }
        });
        for reader in 0..2u64 {
            scope.spawn(move || {
                let mut last_seen = vec![0u64; IDS as usize];
                let mut n = reader;
                while !stop.load(Ordering::Relaxed) {
                    let id = (n * 17) % IDS;
                    n += 1;
                    let floor = acked[id as usize].load(Ordering::SeqCst);
                    let Some(bytes) = store.read(BlockId(id)).expect("read") else {
                        assert_eq!(floor, 0, "block {id} vanished");
                        continue;
                    };
                    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(40)]).into_owned();
                    let version: u64 = text
                        .strip_prefix(&format!("block {id} version "))
                        .and_then(|rest| rest.split(';').next())
                        .and_then(|v| v.parse().ok())
                        .unwrap_or_else(|| panic!("block {id} read as {text:?}"));
                    assert_eq!(bytes, content(BlockId(id), version, bytes.len()), "block {id}");
                    assert!(
                        version >= floor,
                        "block {id}: version {version} after {floor} was acknowledged"
                    );
                    assert!(version >= last_seen[id as usize], "block {id} went back in time");
                    assert!(version <= writing[id as usize].load(Ordering::SeqCst));
                    last_seen[id as usize] = version;
                    checked.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for writer in writers {
            writer.join().expect("writer");
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(checked.load(Ordering::Relaxed) > 0);
    for id in 0..IDS {
        let version = acked[id as usize].load(Ordering::SeqCst);
        let expected = (version > 0).then(|| {
            let len = 300 + ((id * 131 + version * 977) % 5000) as usize;
            content(BlockId(id), version, len)
        });
        assert_eq!(store.read(BlockId(id)).expect("read"), expected, "block {id}");
    }
    let counters = store.stats();
    store.close().expect("close");
    counters
}
