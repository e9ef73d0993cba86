//! The log store with a tier cache (seed 002): reads are served from the tier, the versions
//! the map leaves are invalidated, and no read ever returns a stale block, with cleaning
//! moving blocks underneath.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use tierkv_blockstore::{BlockId, BlockStore, BlockWrite, Codec, LogStore, StoreOptions};
use tierkv_io::sim::SimFs;
use tierkv_io::Storage;
use tierkv_tiercache::{TierOptions, TierStats};

use crate::content;

/// A tier that admits everything (no Overhead Bypass) and evicts every `interval`.
fn tier(capacity: u64, interval: Duration) -> TierOptions {
    TierOptions {
        overhead_bypass: false,
        eviction_interval: interval,
        ..TierOptions::new(capacity)
    }
}

fn options(codec: Codec) -> StoreOptions {
    StoreOptions {
        segment_bytes: 64 << 10,
        space_target: 1.2,
        codec,
        background_cleaning: false,
        tier: Some(tier(1 << 20, Duration::from_secs(3600))),
        ..StoreOptions::default()
    }
}

#[test]
fn reads_come_from_the_tier_and_a_replaced_or_deleted_version_leaves_it() {
    let dir = tempfile::tempdir().expect("dir");
    let store = LogStore::open(&Storage::Os, dir.path(), options(Codec::Lz4)).expect("open");
    let (a, b) = (BlockId(1), BlockId(2));
    let (a1, b1) = (content(a, 1, 3000), content(b, 1, 500));
    // The group's blocks are admitted as written (cache_on_write).
    store.write_group(&[(a, &a1), (b, &b1)]).expect("write");
    let tier = store.tier_stats().expect("a tier");
    assert_eq!((tier.inserts_write, tier.blocks), (2, 2));
    assert_eq!(store.read(a).expect("read").as_deref(), Some(&a1[..]));
    assert_eq!(store.read(b).expect("read").as_deref(), Some(&b1[..]));
    let tier = store.tier_stats().expect("a tier");
    assert_eq!((tier.lookups, tier.hits), (2, 2));
    // Served from the tier: no read reached the files.
    assert_eq!(store.stats().reads, 0);
    // A new version of a, and b deleted: both old versions leave the tier.
    let a2 = content(a, 2, 2000);
    store.apply_group(&[BlockWrite::Put(a, &a2), BlockWrite::Delete(b)]).expect("write");
    let tier = store.tier_stats().expect("a tier");
    assert_eq!((tier.removals, tier.blocks, tier.inserts_write), (2, 1, 3));
    assert_eq!(store.read(a).expect("read").as_deref(), Some(&a2[..]));
    assert_eq!(store.read(b).expect("read"), None);
    // A block the tier no longer holds is read from the file and admitted on the way.
    let evicted =
        store.tier().expect("a tier").invalidate(tierkv_tiercache::TierKey { id: a.0, version: 2 });
    assert!(evicted);
    assert_eq!(store.read(a).expect("read").as_deref(), Some(&a2[..]));
    assert_eq!(store.stats().reads, 1);
    assert_eq!(store.tier_stats().expect("a tier").inserts_read, 1);
    assert_eq!(store.read(a).expect("read").as_deref(), Some(&a2[..]));
    assert_eq!(store.stats().reads, 1);
    assert_eq!(store.stats().tier_rejected, 0);
    store.close().expect("close");
}

#[test]
fn checkpoint_groups_follow_cache_on_checkpoint() {
    let dir = tempfile::tempdir().expect("dir");
    let mut options = options(Codec::None);
    options.tier = Some(TierOptions { cache_on_checkpoint: false, ..tier(1 << 20, Duration::MAX) });
    let store = LogStore::open(&Storage::Os, dir.path(), options).expect("open");
    let bytes = content(BlockId(1), 1, 100);
    store.apply_checkpoint_group(&[BlockWrite::Put(BlockId(1), &bytes)]).expect("write");
    store.apply_group(&[BlockWrite::Put(BlockId(2), &bytes)]).expect("write");
    let tier = store.tier_stats().expect("a tier");
    assert_eq!((tier.skipped_source, tier.inserts_checkpoint, tier.inserts_write), (1, 0, 1));
}

/// A demotion (`offer_evicted`) admits the block at the version it was read at, in the form a
/// read checks (the store's codec, a header of its own), and never a version the map has left:
/// a read then gets the current content, from the file or the tier.
#[test]
fn an_evicted_block_is_admitted_at_its_version_and_never_served_stale() {
    for codec in [Codec::None, Codec::Lz4, Codec::Zstd] {
        let dir = tempfile::tempdir().expect("dir");
        let mut options = options(codec);
        options.tier = Some(TierOptions {
            cache_on_read: false,
            cache_on_evict: true,
            cache_on_write: false,
            ..tier(1 << 20, Duration::MAX)
        });
        let store = LogStore::open(&Storage::Os, dir.path(), options).expect("open");
        let a = BlockId(7);
        let a1 = content(a, 1, 3000);
        store.write_group(&[(a, &a1)]).expect("write");
        let (raw, version) = store.read_versioned(a).expect("read").expect("present");
        let version = version.expect("the log store keeps versions");
        assert_eq!(raw, a1);
        assert_eq!(store.tier_stats().expect("tier").blocks, 0, "{codec}: not on read");
        store.offer_evicted(a, version, &raw);
        let tier = store.tier_stats().expect("tier");
        assert_eq!((tier.inserts_evict, tier.blocks), (1, 1), "{codec}");
        let reads = store.stats().reads;
        assert_eq!(store.read(a).expect("read").as_deref(), Some(&a1[..]), "{codec}");
        assert_eq!(store.stats().reads, reads, "{codec}: served by the tier");
        assert_eq!(store.stats().tier_rejected, 0, "{codec}: the rebuilt block checks");
        // Offered again: already there, nothing written.
        store.offer_evicted(a, version, &raw);
        assert_eq!(store.tier_stats().expect("tier").already_present, 1, "{codec}");
        // A new version replaces it; the old content offered late is not admitted, and reads
        // get the new content.
        let a2 = content(a, 2, 2500);
        store.write_group(&[(a, &a2)]).expect("write");
        store.offer_evicted(a, version, &raw);
        let tier = store.tier_stats().expect("tier");
        assert_eq!((tier.inserts_evict, tier.blocks), (1, 0), "{codec}: {tier:?}");
        assert_eq!(store.read(a).expect("read").as_deref(), Some(&a2[..]), "{codec}");
        // Bytes that are not the version's content (a length the map does not have) are
        // refused too.
        let (_, version2) = store.read_versioned(a).expect("read").expect("present");
        store.offer_evicted(a, version2.expect("version"), &a2[..100]);
        assert_eq!(store.tier_stats().expect("tier").inserts_evict, 1, "{codec}");
        store.close().expect("close");
    }
}

#[derive(Clone, Debug)]
enum Op {
    Group(Vec<(u8, Option<u16>)>),
    Clean,
    Checkpoint,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop::collection::vec((0u8..16, prop::option::weighted(0.85, 1u16..5000)), 1..6)
            .prop_map(Op::Group),
        1 => Just(Op::Clean),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// With a small tier that evicts after each step, groups, deletes, cleanings and reopens
    /// (the tier starts empty each time) agree with a BTreeMap, and the tier never hands the
    /// store a block that fails its check.
    #[test]
    fn a_store_with_a_tier_agrees_with_a_btreemap(ops in prop::collection::vec(op(), 1..40)) {
        let storage = Storage::Sim(SimFs::new());
        let dir = Path::new("/tiered");
        let mut options = options(Codec::Lz4);
        options.tier = Some(tier(64 << 10, Duration::MAX));
        let mut store = LogStore::open(&storage, dir, options.clone()).expect("open");
        let mut model: BTreeMap<BlockId, Vec<u8>> = BTreeMap::new();
        for (step, op) in ops.iter().enumerate() {
            match op {
                Op::Group(changes) => {
                    let mut seen = std::collections::HashSet::new();
                    let owned: Vec<(BlockId, Option<Vec<u8>>)> = changes
                        .iter()
                        .filter(|(id, _)| seen.insert(*id))
                        .map(|&(id, len)| {
                            let id = BlockId(u64::from(id));
                            (id, len.map(|len| content(id, step as u64, len as usize)))
                        })
                        .collect();
                    let writes: Vec<BlockWrite<'_>> = owned
                        .iter()
                        .map(|(id, bytes)| match bytes {
                            Some(bytes) => BlockWrite::Put(*id, bytes),
                            None => BlockWrite::Delete(*id),
                        })
                        .collect();
                    if step % 2 == 0 {
                        store.apply_group(&writes).expect("group");
                    } else {
                        store.apply_checkpoint_group(&writes).expect("group");
                    }
                    for (id, bytes) in owned {
                        match bytes {
                            Some(bytes) => model.insert(id, bytes),
                            None => model.remove(&id),
                        };
                    }
                }
                Op::Clean => while store.clean_once().expect("clean") {},
                Op::Checkpoint => store.checkpoint().expect("checkpoint"),
                Op::Reopen => {
                    store.close().expect("close");
                    store = LogStore::open(&storage, dir, options.clone()).expect("reopen");
                }
            }
            for id in 0..16u64 {
                let id = BlockId(id);
                prop_assert_eq!(store.read(id).expect("read"), model.get(&id).cloned(), "block {} after step {}", id, step);
            }
            store.tier().expect("a tier").evict_now();
        }
        prop_assert_eq!(store.stats().tier_rejected, 0);
    }
}

/// Writers overwrite blocks, cleaning moves them, the tier admits and evicts, and readers
/// check every read: the block read is the one asked for, whole, and no older than the last
/// version acknowledged before the read began. A tier that served a version the map has
/// left, or bytes of another block, fails the check (or shows in `tier_rejected`).
#[test]
fn concurrent_cleaning_never_lets_the_tier_serve_a_stale_block() {
    let (stats, tier) = concurrent_run(Some(tier(128 << 10, Duration::from_millis(2))));
    let tier = tier.expect("a tier");
    // Everything the test means to exercise happened: cleaning moved blocks, the tier
    // served hits, admitted, evicted and invalidated.
    assert!(stats.blocks_relocated > 0, "{stats:?}");
    assert!(tier.hits > 0 && tier.evictions > 0 && tier.removals > 0, "{tier}");
    assert_eq!(stats.tier_rejected, 0);
}

/// The same without a tier. It found a race in cleaning: a segment made active just as
/// cleaning chose its victim looked empty and sealed, was deleted, and went on taking
/// groups, so the map pointed into a file that was gone.
#[test]
fn concurrent_readers_writers_and_cleaning_agree() {
    let (stats, _) = concurrent_run(None);
    assert!(stats.blocks_relocated > 0, "{stats:?}");
}

/// Two writers, two readers and a cleaning loop on one store; returns its counters.
fn concurrent_run(tier: Option<TierOptions>) -> (tierkv_blockstore::StoreStats, Option<TierStats>) {
    const IDS: u64 = 48;
    const WRITERS: u64 = 2;
    const GROUPS: u64 = 300;
    let dir = tempfile::tempdir().expect("dir");
    let options = StoreOptions {
        segment_bytes: 64 << 10,
        space_target: 1.2,
        codec: Codec::Lz4,
        background_cleaning: true,
        tier,
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
    let counters = (store.stats(), store.tier_stats());
    store.close().expect("close");
    counters
}
