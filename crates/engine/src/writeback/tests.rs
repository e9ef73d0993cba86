//! Write-back on a log store on the simulated file system: a tree changed in place by
//! batches, split as it grows, is written back every 25 batches in groups of a few pages,
//! with a meta block naming the last batch it covers. A crash at every I/O point (several
//! images each: torn writes, subsets, prefixes, nothing) must leave a tree on disk that is
//! whole (every page it names is there and valid, keys in order along the leaves) and holds
//! every batch the meta block covers; and replaying the batches after it must give the
//! state after the last batch, as recovery will.
//!
//! `TIERKV_ENGINE_SWEEP=full` runs a larger workload.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tierkv_blockstore::{LogStore, StoreOptions};
use tierkv_io::sim::{seed_from_env, CrashModel, SimFs};
use tierkv_io::Storage;

use super::*;
use crate::block_pages::{BlockSource, Pages};
use crate::meta::{Meta, META_BLOCK};
use crate::page::slotted::edit::ValueRef;
use crate::page::slotted::{self, decode_internal, decode_leaf, encode_leaf, Kind};
use crate::page::Value;
use crate::tree::write::{Op, Space};

const PAGE: usize = 512;
const ROOT: u64 = 1;
const MODELS: [CrashModel; 8] = CrashModel::SWEEP;

type State = BTreeMap<Vec<u8>, Vec<u8>>;
type Batch = Vec<(Vec<u8>, Option<Vec<u8>>)>;

struct Ids(AtomicU64);

impl Space for Ids {
    fn allocate(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

fn options() -> StoreOptions {
    StoreOptions { segment_bytes: 64 << 10, background_cleaning: false, ..StoreOptions::default() }
}

fn apply(writer: &Writer, pool: &BufferPool<BlockSource>, ids: &Ids, batch: &Batch, lsn: u64) {
    let ops: Vec<Op<'_>> =
        batch.iter().map(|(k, v)| (&k[..], v.as_deref().map(ValueRef::Inline))).collect();
    writer.apply(pool, ids, ROOT, &ops, || Ok::<_, Infallible>(lsn), |_, _, _| {}).expect("apply");
}

fn play(state: &mut State, batch: &Batch) {
    for (key, value) in batch {
        match value {
            Some(value) => state.insert(key.clone(), value.clone()),
            None => state.remove(key),
        };
    }
}

/// The tree's entries along the leaves' links, each page read from the frames (loaded from
/// the blocks); an error names a page the tree points at that is missing or bad.
fn contents(pool: &BufferPool<BlockSource>) -> Result<State, String> {
    let image = |pid: u64| {
        pool.read(pid, |page| {
            let mut out = vec![0u8; PAGE];
            page.bytes().copy_to(0, &mut out)?;
            Some(out)
        })
        .map_err(|e| format!("page {pid}: {e}"))
    };
    let mut pid = ROOT;
    loop {
        let page = image(pid)?;
        match slotted::check(&page, PAGE).map_err(|e| format!("page {pid}: {e}"))? {
            Kind::Internal => pid = decode_internal(&page[..]).ok_or("internal")?.0,
            Kind::Leaf => break,
        }
    }
    let mut out = State::new();
    let mut last: Option<Vec<u8>> = None;
    while pid != 0 {
        let page = image(pid)?;
        if slotted::check(&page, PAGE) != Ok(Kind::Leaf) {
            return Err(format!("page {pid} on the leaves' links is no leaf"));
        }
        for (key, value) in decode_leaf(&page).ok_or("leaf")? {
            if last.as_deref().is_some_and(|last| last >= &key[..]) {
                return Err(format!("key {key:?} out of order at page {pid}"));
            }
            last = Some(key.to_vec());
            let Value::Inline(value) = value else { return Err("an overflow value".into()) };
            out.insert(key.to_vec(), value.to_vec());
        }
        pid = Slotted::new(&page[..]).link().ok_or("link")?;
    }
    Ok(out)
}

#[test]
fn every_crash_leaves_a_whole_tree_that_the_log_replays_onto() {
    let full = std::env::var("TIERKV_ENGINE_SWEEP").as_deref() == Ok("full");
    // The full run's keys keep the tree growing, and splitting, to the end.
    let (batches, images, keys) = if full { (1_500, 16, 3_000) } else { (400, 4, 300) };
    let seed = seed_from_env(0x26_0b_ac_c5);
    let fs = SimFs::new();
    let storage = Storage::Sim(fs.clone());
    let dir = "/db";
    let mut rng = fastrand::Rng::with_seed(seed);
    let log: Vec<Batch> = (0..batches)
        .map(|_| {
            let mut batch: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
            for _ in 0..rng.usize(1..4) {
                let key = format!("key{:04}", rng.u32(..keys)).into_bytes();
                let value = (rng.u8(..4) > 0).then(|| vec![rng.u8(..); rng.usize(1..60)]);
                batch.insert(key, value);
            }
            batch.into_iter().collect()
        })
        .collect();
    let mut checkpoints = 0;
    let mut splits = 0;
    {
        let blocks = LogStore::open(&storage, dir, options()).expect("open");
        let pages = Pages::new(Arc::new(blocks), 64 << 20, PAGE, None).expect("frames");
        let pool = pages.pool();
        drop(pool.create(ROOT, &encode_leaf(&[], 0, 0, PAGE)).expect("root"));
        let (writer, ids) = (Writer::new(), Ids(AtomicU64::new(ROOT + 1)));
        for (at, batch) in log.iter().enumerate() {
            let lsn = at as u64 + 1;
            apply(&writer, pool, &ids, batch, lsn);
            if lsn.is_multiple_of(25) {
                let next = ids.0.load(Ordering::Relaxed);
                let meta = Meta {
                    root: ROOT,
                    next_page: next,
                    max_page_bytes: PAGE as u32,
                    sequence: lsn,
                    orphans_from: next,
                    free_list: None,
                };
                let encoded = meta.encode();
                let done = write_back(
                    pool,
                    &writer,
                    pages.blocks(),
                    4 * PAGE,
                    |_| Ok::<(), Infallible>(()),
                    |part| match part {
                        Part::End { last: true } => {
                            vec![(META_BLOCK, Some(std::sync::Arc::new(encoded.clone())))]
                        }
                        _ => Vec::new(),
                    },
                )
                .expect("write back");
                assert!(done.groups > 1, "{done:?}");
                splits += done.splits;
                checkpoints += 1;
                assert!(pool.dirty_pages().is_empty(), "nothing changed during the write-back");
                assert_eq!(writer.pending_splits(), 0);
            }
        }
        pages.blocks().close().expect("close");
    }
    let mut last = State::new();
    for batch in &log {
        play(&mut last, batch);
    }
    let ops_total = fs.op_count();
    let mut replay = fs.crash_replay();
    let (mut checked, mut before_any_meta, mut partly) = (0u64, 0u64, 0u64);
    for point in 0..=ops_total {
        for image in 0..images {
            let model = MODELS[(image + point as usize) % MODELS.len()];
            let image_seed = seed ^ (point << 20) ^ image as u64;
            let context = format!("crash before op {point} of {ops_total}, {model}, seed {image_seed} (TIERKV_SEED={seed})");
            let storage = Storage::Sim(replay.image(model, image_seed));
            let blocks = LogStore::open(&storage, dir, options())
                .unwrap_or_else(|e| panic!("recovery: {e}: {context}"));
            let live = blocks.live_ids().unwrap_or_else(|e| panic!("ids: {e}: {context}"));
            let pages = Pages::new(Arc::new(blocks), 64 << 20, PAGE, None).expect("frames");
            let pool = pages.pool();
            let covered = match pages.read_meta().unwrap_or_else(|e| panic!("meta: {e}: {context}"))
            {
                Some(meta) => meta.sequence,
                None => 0,
            };
            if !live.contains(&BlockId(ROOT)) {
                // Nothing written yet: recovery starts from an empty root.
                drop(pool.create(ROOT, &encode_leaf(&[], 0, 0, PAGE)).expect("root"));
            }
            let on_disk = contents(pool)
                .unwrap_or_else(|e| panic!("the tree on disk is not whole: {e}: {context}"));
            // Every key no later batch touched holds what the covered batches left it.
            let mut then = State::new();
            for batch in &log[..covered as usize] {
                play(&mut then, batch);
            }
            for key in then.keys().chain(on_disk.keys()) {
                if log[covered as usize..].iter().any(|b| b.iter().any(|(k, _)| k == key)) {
                    continue;
                }
                assert_eq!(on_disk.get(key), then.get(key), "key {key:?}: {context}");
            }
            partly += u64::from(on_disk != then);
            before_any_meta += u64::from(covered == 0);
            // Recovery: the batches after the meta block's, replayed onto the tree.
            let next = live.last().map_or(ROOT + 1, |id| id.0 + 1).max(ROOT + 1);
            let (writer, ids) = (Writer::new(), Ids(AtomicU64::new(next)));
            for (at, batch) in log.iter().enumerate().skip(covered as usize) {
                apply(&writer, pool, &ids, batch, at as u64 + 1);
            }
            let recovered =
                contents(pool).unwrap_or_else(|e| panic!("after replay: {e}: {context}"));
            assert!(
                recovered == last,
                "replay onto the crashed tree lost or changed keys: {context}"
            );
            checked += 1;
        }
        if point < ops_total {
            assert!(replay.advance());
        }
    }
    eprintln!(
        "write-back sweep: {batches} batches, {checkpoints} write-backs, {splits} splits in groups, {ops_total} crash points, {checked} images, {partly} with pages past their meta block, {before_any_meta} before any meta block"
    );
    assert!(splits > 20, "too few splits for the sweep to test structure changes: {splits}");
    assert!(partly > 0, "no image held pages written after its meta block: the sweep tests little");
}

/// The tree the block store holds: its leaves in key order as the internal pages reach
/// them from the root, checked against the leaves' links (a split written without its
/// parent, or the parent without the split's new page, breaks one or the other), each page
/// valid, keys in order; returns its entries. `Err` names what is broken.
fn on_disk(store: &dyn BlockStore) -> Result<State, String> {
    let image = |pid: u64| -> Result<Vec<u8>, String> {
        let image = store.read(BlockId(pid)).map_err(|e| format!("page {pid}: {e}"))?;
        let image = image.ok_or(format!("page {pid} is not on disk"))?;
        slotted::check(&image, PAGE).map_err(|e| format!("page {pid}: {e}"))?;
        Ok(image)
    };
    if store.read(BlockId(ROOT)).map_err(|e| e.to_string())?.is_none() {
        // Nothing written yet, or the root is missing.
        let live = store.live_ids().map_err(|e| e.to_string())?;
        return live.is_empty().then(State::new).ok_or(format!("no root, but blocks {live:?}"));
    }
    let mut leaves = Vec::new();
    let mut stack = vec![ROOT];
    while let Some(pid) = stack.pop() {
        let page = image(pid)?;
        match slotted::check(&page, PAGE).expect("checked") {
            Kind::Leaf => leaves.push(pid),
            Kind::Internal => {
                let (first, separators) = decode_internal(&page[..]).ok_or("internal")?;
                stack.extend(separators.iter().rev().map(|(_, child)| *child));
                stack.push(first);
            }
        }
    }
    let mut out = State::new();
    let mut last: Option<Vec<u8>> = None;
    for (at, pid) in leaves.iter().enumerate() {
        let page = image(*pid)?;
        for (key, value) in decode_leaf(&page).ok_or("leaf")? {
            if last.as_deref().is_some_and(|last| last >= &key[..]) {
                return Err(format!("key {key:?} out of order at page {pid}"));
            }
            last = Some(key.to_vec());
            let Value::Inline(value) = value else { return Err("an overflow value".into()) };
            out.insert(key.to_vec(), value.to_vec());
        }
        let link = Slotted::new(&page[..]).link().ok_or("link")?;
        let next = leaves.get(at + 1).copied().unwrap_or(0);
        if link != next {
            return Err(format!("leaf {pid} links to {link}, the tree's next leaf is {next}"));
        }
    }
    Ok(out)
}

/// Write-back while another thread keeps splitting pages: every group leaves the tree on
/// disk whole (checked before each next group and after each write-back, from the blocks),
/// the pages a split changed during a group's copy are copied again, and once the writer
/// stops, one more write-back leaves the tree on disk equal to the tree in the frames.
#[test]
fn groups_copied_while_pages_split_leave_the_tree_on_disk_whole() {
    let storage = Storage::Sim(SimFs::new());
    let blocks = LogStore::open(&storage, "/db", options()).expect("open");
    let pages = Pages::new(Arc::new(blocks), 64 << 20, PAGE, None).expect("frames");
    let pool = pages.pool();
    drop(pool.create(ROOT, &encode_leaf(&[], 0, 0, PAGE)).expect("root"));
    let (writer, ids) = (Writer::new(), Ids(AtomicU64::new(ROOT + 1)));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (rounds, written) = (AtomicU64::new(0), AtomicU64::new(0));
    let (mut total, mut checks, mut writes_back) = (Written::default(), 0u64, 0u64);
    std::thread::scope(|scope| {
        let writing = scope.spawn(|| {
            let mut rng = fastrand::Rng::with_seed(seed_from_env(0x5b11_7c0b));
            let mut lsn = 0u64;
            while lsn < 3_000 {
                // Paced: at most 20 batches ahead of each write-back, so that many of them
                // copy while pages split.
                while lsn >= 20 * (rounds.load(Ordering::Relaxed) + 1) {
                    std::thread::yield_now();
                }
                lsn += 1;
                let key = format!("key{:08}", rng.u32(..1_000_000)).into_bytes();
                apply(&writer, pool, &ids, &vec![(key, Some(vec![b'v'; rng.usize(8..40)]))], lsn);
                written.store(lsn, Ordering::Relaxed);
            }
            stop.store(true, Ordering::Relaxed);
            lsn
        });
        while !stop.load(Ordering::Relaxed) {
            // Paced too: each write-back starts once the writer made half of its round's
            // batches, so that a write-back never runs idle while the writer waits for a
            // core (CI's two are shared with other tests), and the rest land during it.
            let due = 20 * rounds.load(Ordering::Relaxed) + 10;
            while written.load(Ordering::Relaxed) < due && !stop.load(Ordering::Relaxed) {
                std::thread::yield_now();
            }
            let mut check = |part: Part<'_>| {
                if !matches!(part, Part::End { .. }) {
                    return Vec::new();
                }
                // The group before this one is durable, and this one's pieces are written:
                // the tree on disk must be whole.
                if let Err(broken) = on_disk(pages.blocks()) {
                    panic!("the tree on disk is not whole: {broken}");
                }
                checks += 1;
                Vec::new()
            };
            let done = write_back(
                pool,
                &writer,
                pages.blocks(),
                4 * PAGE,
                |_| Ok::<(), Infallible>(()),
                &mut check,
            )
            .expect("write back");
            on_disk(pages.blocks()).expect("the tree on disk after a write-back");
            total.groups += done.groups;
            total.pages += done.pages;
            total.splits += done.splits;
            total.recopies += done.recopies;
            writes_back += 1;
            rounds.fetch_add(1, Ordering::Relaxed);
        }
        assert_eq!(writing.join().expect("the writer"), 3_000);
    });
    write_back(
        pool,
        &writer,
        pages.blocks(),
        4 * PAGE,
        |_| Ok::<(), Infallible>(()),
        |_| Vec::new(),
    )
    .expect("the last write-back");
    assert!(pool.dirty_pages().is_empty());
    assert_eq!(writer.pending_splits(), 0);
    assert_eq!(on_disk(pages.blocks()), contents(pool), "the disk and the frames differ");
    eprintln!(
        "concurrent write-back: {writes_back} write-backs, {total:?}, {checks} checks of the tree on disk"
    );
    // Whether a split lands in a group's copy here depends on the threads' timing
    // (`splits_between_a_groups_copies_are_copied_again` makes sure of it).
    assert!(total.splits > 50, "too few splits in groups: {total:?}");
}

/// Splits made between the page copies of a group (where another thread's would land, on
/// one thread so that every run makes the same ones): the pages they changed are copied
/// again, every group leaves the tree on disk whole, and the last write-back leaves it
/// equal to the tree in the frames.
#[test]
fn splits_between_a_groups_copies_are_copied_again() {
    let storage = Storage::Sim(SimFs::new());
    let blocks = LogStore::open(&storage, "/db", options()).expect("open");
    let pages = Pages::new(Arc::new(blocks), 64 << 20, PAGE, None).expect("frames");
    let pool = pages.pool();
    drop(pool.create(ROOT, &encode_leaf(&[], 0, 0, PAGE)).expect("root"));
    let (writer, ids) = (Writer::new(), Ids(AtomicU64::new(ROOT + 1)));
    let mut rng = fastrand::Rng::with_seed(seed_from_env(0x0c09_1e5a));
    let mut lsn = 0u64;
    let mut batch = |rng: &mut fastrand::Rng| {
        lsn += 1;
        let batch: BTreeMap<Vec<u8>, Option<Vec<u8>>> = (0..rng.usize(1..6))
            .map(|_| (format!("key{:06}", rng.u32(..100_000)).into_bytes(), Some(vec![b'v'; 30])))
            .collect();
        apply(&writer, pool, &ids, &batch.into_iter().collect(), lsn);
    };
    let (mut total, mut checks) = (Written::default(), 0u64);
    for _ in 0..100 {
        for _ in 0..10 {
            batch(&mut rng);
        }
        let mut copies = 0u64;
        let done = write_back_racing(
            pool,
            &writer,
            pages.blocks(),
            4 * PAGE,
            |_| Ok::<(), Infallible>(()),
            |part| {
                if matches!(part, Part::End { .. }) {
                    on_disk(pages.blocks()).unwrap_or_else(|b| panic!("not whole: {b}"));
                    checks += 1;
                }
                Vec::new()
            },
            &mut || {
                copies += 1;
                if copies % 3 == 2 && copies < 12 {
                    batch(&mut rng);
                }
            },
        )
        .expect("write back");
        on_disk(pages.blocks()).expect("the tree on disk after a write-back");
        total.pages += done.pages;
        total.groups += done.groups;
        total.splits += done.splits;
        total.recopies += done.recopies;
    }
    write_back(
        pool,
        &writer,
        pages.blocks(),
        4 * PAGE,
        |_| Ok::<(), Infallible>(()),
        |_| Vec::new(),
    )
    .expect("the last write-back");
    assert!(pool.dirty_pages().is_empty());
    assert_eq!(writer.pending_splits(), 0);
    assert_eq!(on_disk(pages.blocks()), contents(pool), "the disk and the frames differ");
    eprintln!(
        "write-back with splits between copies: {total:?}, {checks} checks of the tree on disk"
    );
    assert!(total.splits > 100, "too few splits in groups: {total:?}");
    assert!(total.recopies > 20, "too few pages copied again: {total:?}");
}
