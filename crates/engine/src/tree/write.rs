//! Changes to the tree in place, in its frames (the engine's write path, `db/write.rs`):
//! a batch latches its leaves, has the log number it, records each key's before-image,
//! and changes the leaves where they lie; a leaf without room is split first, as a
//! structure change of its own.
//!
//! **Batches.** [`Writer::apply`] takes changes sorted by key, each key once. It finds each
//! change's leaf (optimistic reads of the internal pages), latches the leaves exclusively
//! in key order (so two batches never wait on each other in a cycle), and checks that every
//! leaf has room for all of its changes: from the free bytes between its slots and its heap
//! when that is plain, else by making the changes on a copy. Only then does the log number
//! the batch (`number`), so that the changes of one leaf, and so of one key, are numbered in
//! the order they are made, and a failed batch has changed nothing. Each change's
//! before-image goes to `record` before the leaf changes; the leaf takes the batch's LSN
//! and is marked dirty (`BufferPool::mark_dirty`) before its latch drops.
//!
//! **Checked batches.** [`Writer::apply_checked`] also latches the leaves of keys it only
//! reads, and shows their current values to a check before the batch is numbered: a
//! compare-and-swap, or an optimistic transaction's commit that validates what it read
//! (`Db::compare_and_swap`, `Transaction::commit`). A refused check changes and numbers nothing.
//!
//! **Structure changes.** Batches share the pool's structure lock
//! (`BufferPool::hold_structure`); a split takes it alone (`change_structure`), so
//! no batch holds a leaf while the internal pages change and the internal pages a batch
//! reads stay as they are while it holds its leaves. A split latches the path from the root
//! to the full leaf, cuts the leaf in two ([`edit::split`]: the left half stays at its id,
//! the right one is a new page from `Space`), and adds the separator to the parent, which
//! may split in turn, up to the root. The root keeps its id: a root that splits moves its
//! two halves to new pages and becomes their parent. Every page changed is marked dirty;
//! write-back writes a split's pages in one atomic group (`writeback`).
//!
//! **Readers** go down without any lock, validating each page after reading it, and start
//! again when the pool's structure sequence moved during their descent (a split ran):
//! see `tree::read`.
//!
//! Pages are not merged: a leaf left empty by deletes stays in the tree, and readers and
//! scans step over it.
//!
//! Must never: change a leaf before the log numbered the change and the before-image was
//! recorded; leave a page `check` refuses; lose a key in a split; change anything in a
//! batch that fails.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tierkv_io::frames::Exclusive;

use super::read::{ReadError, MAX_DEPTH};
use crate::buffer::{BufferError, BufferPool, PageSource};
use crate::page::slotted::edit::{self, NoRoom, ValueRef};
use crate::page::slotted::{self, Kind, Slotted};

/// Where a split's new pages get their ids.
pub trait Space {
    /// A page id no page of the tree has.
    fn allocate(&self) -> u64;
}

/// One change of a batch: a key and its new value, or `None` to remove it.
pub type Op<'a> = (&'a [u8], Option<ValueRef<'a>>);

/// Why a batch failed; it changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum WriteError<E, N> {
    /// A page could not be read.
    #[error("{0}")]
    Read(ReadError<E>),
    /// The caller refused the batch: its check of the current values failed, or its log
    /// would not number it.
    #[error("{0}")]
    Refused(N),
    /// A leaf cannot be split to make room: one entry fills it.
    #[error("page {pid} holds one entry and a change of it does not fit: {no_room}")]
    TooLarge {
        /// The leaf.
        pid: u64,
        /// What did not fit.
        no_room: NoRoom,
    },
}

impl<E, N> From<BufferError<E>> for WriteError<E, N> {
    fn from(error: BufferError<E>) -> Self {
        WriteError::Read(ReadError::Page(error))
    }
}

/// The most passes of splits one batch makes before it gives up (each pass halves every
/// leaf the batch needs room in, so a real batch needs a few).
const MAX_SPLITS: usize = 64;

/// Changes a tree in place (see the module header).
#[derive(Debug, Default)]
pub struct Writer {
    /// The splits whose pages are not all durable yet, each with the pages it changed
    /// (made or changed): write-back puts them in one group (`closure`).
    splits: Mutex<Splits>,
    /// Numbers splits.
    split_count: std::sync::atomic::AtomicU64,
    /// Splits waiting for `splits` to record themselves: a long `closure` lets them in.
    recording: std::sync::atomic::AtomicUsize,
}

/// The pages one split changed.
#[derive(Debug)]
struct SplitRecord {
    number: u64,
    pids: Vec<u64>,
}

/// The splits not yet durable, in number order, and each page's among them.
#[derive(Debug, Default)]
struct Splits {
    records: Vec<SplitRecord>,
    by_page: HashMap<u64, Vec<u64>>,
}

impl Splits {
    fn push(&mut self, split: SplitRecord) {
        assert!(self.records.last().is_none_or(|last| last.number < split.number));
        for pid in &split.pids {
            self.by_page.entry(*pid).or_default().push(split.number);
        }
        self.records.push(split);
    }

    /// The pending split numbered `number`.
    fn record(&self, number: u64) -> &SplitRecord {
        let at = self.records.binary_search_by_key(&number, |split| split.number);
        &self.records[at.expect("invariant: a page's splits are pending")]
    }

    /// Drops the splits numbered in `numbers` (sorted), from both.
    fn forget(&mut self, numbers: &[u64]) {
        let (Some(first), Some(last)) = (numbers.first(), numbers.last()) else { return };
        let by_page = &mut self.by_page;
        // Only the records between the first and the last number can go.
        let start = self.records.partition_point(|split| split.number < *first);
        let end = self.records.partition_point(|split| split.number <= *last);
        let tail = self.records.split_off(end);
        let mut middle = self.records.split_off(start);
        // A search per split: a scan of `numbers` per split held the lock, and with it the
        // next split, for tens of milliseconds with thousands pending.
        middle.retain(|split| {
            if numbers.binary_search(&split.number).is_err() {
                return true;
            }
            for pid in &split.pids {
                if let std::collections::hash_map::Entry::Occupied(mut entry) = by_page.entry(*pid)
                {
                    entry.get_mut().retain(|number| *number != split.number);
                    if entry.get().is_empty() {
                        entry.remove();
                    }
                }
            }
            false
        });
        self.records.append(&mut middle);
        self.records.extend(tail);
        debug_assert!(self.records.windows(2).all(|w| w[0].number < w[1].number));
        debug_assert!(self.by_page.values().flatten().all(|n| numbers.binary_search(n).is_err()));
    }
}

/// What `Writer::closure` found for one group so far.
#[derive(Debug, Default)]
pub struct Closure {
    /// The splits taken, by number.
    taken: BTreeSet<u64>,
    /// Splits numbered below this were looked at (`None`: no call yet).
    looked_to: Option<u64>,
    /// The pages the calls added to the group since `take_added`.
    added: Vec<u64>,
}

impl Closure {
    /// The pages the calls added to the group since the last time.
    pub fn take_added(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.added)
    }

    /// The numbers of the splits taken so far, ascending.
    pub fn taken(&self) -> Vec<u64> {
        self.taken.iter().copied().collect()
    }

    /// The splits numbered below this were looked at by the calls so far (`None`: no call
    /// yet); later ones, made while the last call ran or after, are left to the next call
    /// (and to `Writer::changed_between`).
    pub fn looked_to(&self) -> Option<u64> {
        self.looked_to
    }
}

/// Pages `Writer::closure` looks at between checks for splits waiting to record.
const CLOSURE_STEP: usize = 4096;

/// The leaves of a batch, latched, each with the range of its changes (empty for a leaf
/// of reads only).
struct Held<'p> {
    leaf: Exclusive<'p>,
    ops: std::ops::Range<usize>,
}

impl Writer {
    /// A writer.
    pub fn new() -> Writer {
        Writer::default()
    }

    /// Adds to `pids` every page of each split not yet durable that changed one of them,
    /// until no split adds more; `found.taken()` then gives those splits' numbers, for
    /// `forget_splits` once a group holding `pids` is durable (not returned by each call,
    /// which would cost the number taken so far under the caller's hold). Call it with the
    /// same `found` for one group each time and `pids` changed only by these calls: a call
    /// after the first looks only at the splits made since the last and at what they add
    /// (a search from every page each time held splits off for 20 to 160 ms with 15,000
    /// splits pending in a YCSB load). It needs no structure hold: splits made while it
    /// runs are numbered from `Closure::looked_to` on, which the next call looks at (and
    /// `changed_between` finds). Every `CLOSURE_STEP` pages it lets splits waiting to record
    /// themselves take the split lock, so that splits go on beside a search over a hundred
    /// thousand pages (one took 165 ms in a YCSB load).
    pub fn closure(&self, pids: &mut BTreeSet<u64>, found: &mut Closure) {
        let mut splits = self.splits.lock().unwrap_or_else(PoisonError::into_inner);
        // Every split numbered below this is recorded (numbered and recorded under the lock).
        let next = self.split_count.load(std::sync::atomic::Ordering::Relaxed);
        let mut frontier: Vec<u64> = match found.looked_to {
            // The first call: a search from every page given.
            None => pids.iter().copied().collect(),
            // Later ones: from the splits made since that change a page held; an older
            // split that touches none joins only through pages this search adds.
            Some(looked_to) => {
                let mut at = splits.records.partition_point(|split| split.number < looked_to);
                let mut frontier = Vec::new();
                let mut step = 0;
                while let Some(split) = splits.records.get(at).filter(|split| split.number < next) {
                    if split.pids.iter().any(|pid| pids.contains(pid))
                        && found.taken.insert(split.number)
                    {
                        frontier.extend(split.pids.iter().filter(|pid| pids.insert(**pid)));
                    }
                    let number = split.number;
                    at += 1;
                    step += 1;
                    if step % CLOSURE_STEP == 0 {
                        // As below: splits waiting to record go first (they hold every
                        // writer up); records only grow at the end meanwhile.
                        splits = self.let_splits_record(splits);
                        at = splits.records.partition_point(|split| split.number <= number);
                    }
                }
                found.added.extend_from_slice(&frontier);
                frontier
            }
        };
        found.looked_to = Some(next);
        let mut step = 0;
        while let Some(pid) = frontier.pop() {
            step += 1;
            if step % CLOSURE_STEP == 0 {
                // Splits recorded meanwhile are numbered `next` or later: those the
                // search meets are taken now, the rest by the next call.
                splits = self.let_splits_record(splits);
            }
            for &number in splits.by_page.get(&pid).map_or(&[][..], Vec::as_slice) {
                if found.taken.insert(number) {
                    let split = splits.record(number);
                    for pid in &split.pids {
                        if pids.insert(*pid) {
                            frontier.push(*pid);
                            found.added.push(*pid);
                        }
                    }
                }
            }
        }
        debug_assert!(splits.records.iter().filter(|split| split.number < next).all(|split| {
            found.taken.contains(&split.number) == split.pids.iter().any(|pid| pids.contains(pid))
        }));
    }

    /// Lets go of the split lock while splits wait to record themselves (each holds every
    /// writer up meanwhile), and takes it again. The lock is not fair, so this waits until
    /// the waiting splits are in. Bounded: splits run one at a time, each records once, in
    /// microseconds.
    fn let_splits_record<'a>(&'a self, splits: MutexGuard<'a, Splits>) -> MutexGuard<'a, Splits> {
        if self.recording.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            return splits;
        }
        drop(splits);
        while self.recording.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            std::thread::yield_now();
        }
        self.splits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Numbers and records a split that changed `pids`. Numbered and recorded under one
    /// lock: every split numbered below `split_count`, read under it, is recorded (or
    /// forgotten), which `closure` relies on.
    fn record_split(&self, pids: Vec<u64>) {
        self.recording.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut splits = self.splits.lock().unwrap_or_else(PoisonError::into_inner);
        let number = self.split_count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        splits.push(SplitRecord { number, pids });
        drop(splits);
        self.recording.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// The pages changed by the splits not yet durable numbered from `from` to below `to`
    /// (marks from `Closure::looked_to` before and after a `closure` call: the splits it
    /// looked at for the first time). Each was recorded once its pages had changed, under
    /// their exclusive latches, so a copy taken after this call has its change.
    pub fn changed_between(&self, from: u64, to: u64) -> BTreeSet<u64> {
        // Copied out under the lock, sorted outside it: splits wait for the lock to record
        // themselves, holding every writer up.
        let pids: Vec<u64> = {
            let splits = self.splits.lock().unwrap_or_else(PoisonError::into_inner);
            let start = splits.records.partition_point(|split| split.number < from);
            let end = splits.records.partition_point(|split| split.number < to);
            splits.records[start..end].iter().flat_map(|split| split.pids.iter().copied()).collect()
        };
        pids.into_iter().collect()
    }

    /// Forgets splits whose pages are durable (`closure`'s numbers, after the group).
    pub fn forget_splits(&self, numbers: &[u64]) {
        debug_assert!(numbers.windows(2).all(|w| w[0] < w[1]), "numbers in order");
        // A step at a time, letting splits waiting to record in between (each holds every
        // writer up): forgetting the 196,000 splits of a load's first group at once held
        // them for about 200 ms. The newest first, so that a step moves only the records
        // after its own (from the oldest, each step moved nearly all of them, several
        // milliseconds each: E's p99.9 insert went from 4 to 6 ms).
        let mut splits = self.splits.lock().unwrap_or_else(PoisonError::into_inner);
        for step in numbers.rchunks(CLOSURE_STEP) {
            splits.forget(step);
            splits = self.let_splits_record(splits);
        }
    }

    /// Splits whose pages are not all durable.
    pub fn pending_splits(&self) -> usize {
        self.splits.lock().unwrap_or_else(PoisonError::into_inner).records.len()
    }

    /// Applies `ops` (sorted by key, no key twice) to the tree under `root` as one batch:
    /// numbered by `number` once every leaf has room, each key's before-image given to
    /// `record(key, lsn, before)` before its leaf changes. Returns the batch's LSN.
    pub fn apply<S: PageSource, N>(
        &self,
        pool: &BufferPool<S>,
        space: &dyn Space,
        root: u64,
        ops: &[Op<'_>],
        number: impl FnOnce() -> Result<u64, N>,
        record: impl FnMut(&[u8], u64, Option<ValueRef<'_>>),
    ) -> Result<u64, WriteError<S::Error, N>> {
        self.apply_checked(pool, space, root, ops, &[], |_| Ok(()), number, record)
    }

    /// `apply`, made only if `check` accepts the current values of `reads` (sorted, no
    /// key twice; `None` for a key with no value), read with every leaf of the batch and of
    /// `reads` latched, so no other batch changes them between the check and the changes:
    /// a compare-and-swap, or a transaction's commit that validates what it read. A check
    /// that refuses changes nothing and numbers nothing.
    #[allow(clippy::too_many_arguments)]
    pub fn apply_checked<S: PageSource, N>(
        &self,
        pool: &BufferPool<S>,
        space: &dyn Space,
        root: u64,
        ops: &[Op<'_>],
        reads: &[&[u8]],
        check: impl FnOnce(&[Option<ValueRef<'_>>]) -> Result<(), N>,
        number: impl FnOnce() -> Result<u64, N>,
        mut record: impl FnMut(&[u8], u64, Option<ValueRef<'_>>),
    ) -> Result<u64, WriteError<S::Error, N>> {
        assert!(ops.windows(2).all(|w| w[0].0 < w[1].0), "a batch's keys are sorted and distinct");
        assert!(reads.windows(2).all(|w| w[0] < w[1]), "reads are sorted and distinct");
        assert!(!ops.is_empty(), "an empty batch");
        let page_bytes = pool_page_bytes(pool);
        // Every key the batch touches, in order: a change (index into `ops`) or a read
        // (index into `reads`), or both.
        let mut keys: Vec<(&[u8], Option<usize>, Option<usize>)> = Vec::new();
        let (mut o, mut r) = (0, 0);
        while o < ops.len() || r < reads.len() {
            let next_op = ops.get(o).map(|op| op.0);
            let next_read = reads.get(r).copied();
            match (next_op, next_read) {
                (Some(a), Some(b)) if a == b => {
                    keys.push((a, Some(o), Some(r)));
                    o += 1;
                    r += 1;
                }
                (Some(a), Some(b)) if a < b => {
                    keys.push((a, Some(o), None));
                    o += 1;
                }
                (Some(a), None) => {
                    keys.push((a, Some(o), None));
                    o += 1;
                }
                (_, Some(b)) => {
                    keys.push((b, None, Some(r)));
                    r += 1;
                }
                (None, None) => unreachable!("the loop ends first"),
            }
        }
        let mut number = Some(number);
        let mut check = Some(check);
        for _ in 0..=MAX_SPLITS {
            let shared = pool.hold_structure();
            let mut held: Vec<Held<'_>> = Vec::new();
            // For each read, the leaf (index into `held`) that holds its key.
            let mut read_leaf = vec![0; reads.len()];
            for (key, op, read) in &keys {
                let pid = leaf_for(pool, root, key, held.last().map(|h| h.leaf.pid()))?;
                if held.last().is_none_or(|last| last.leaf.pid() != pid) {
                    let leaf = pool.exclusive(pid)?;
                    held.push(Held { leaf, ops: 0..0 });
                }
                let last = held.len() - 1;
                if let Some(op) = op {
                    let h = &mut held[last];
                    h.ops = if h.ops.is_empty() { *op..*op + 1 } else { h.ops.start..*op + 1 };
                }
                if let Some(read) = read {
                    read_leaf[*read] = last;
                }
            }
            let mut full: Vec<(u64, Option<Vec<u8>>)> = Vec::new();
            for h in &held {
                let page = &h.leaf.bytes()[..page_bytes];
                let mine = &ops[h.ops.clone()];
                if mine.is_empty() || fits(page, mine) {
                    continue;
                }
                let changes: Vec<(&[u8], usize)> =
                    mine.iter().map(|(key, value)| (*key, entry_bytes(key, *value))).collect();
                full.push((h.leaf.pid(), edit::split_point(page, &changes)));
            }
            if !full.is_empty() {
                drop(held);
                drop(shared);
                // Every leaf without room splits once in this pass, in the middle of its
                // entries and its changes together: a batch of many keys in one place
                // needs about as many passes as halvings, not splits.
                for (pid, separator) in full {
                    let Some(separator) = separator else {
                        let no_room = NoRoom { needed: page_bytes + 1, page_bytes };
                        return Err(WriteError::TooLarge { pid, no_room });
                    };
                    self.split_for(pool, space, root, pid, &separator)?;
                }
                continue;
            }
            let current: Vec<Option<ValueRef<'_>>> = reads
                .iter()
                .zip(&read_leaf)
                .map(|(key, &at)| {
                    let page = &held[at].leaf.bytes()[..page_bytes];
                    match Slotted::new(page).search(key).expect("invariant: a latched leaf") {
                        Ok(slot) => Some(value_ref(page, slot)),
                        Err(_) => None,
                    }
                })
                .collect();
            (check.take().expect("invariant: checked once"))(&current)
                .map_err(WriteError::Refused)?;
            drop(current);
            let lsn = (number.take().expect("invariant: numbered once"))()
                .map_err(WriteError::Refused)?;
            for Held { leaf, ops: range } in &mut held {
                if range.start == range.end {
                    // A leaf of reads only.
                    continue;
                }
                for (key, change) in &ops[range.clone()] {
                    // One search of the latched leaf for the before-image and the put.
                    let found = {
                        let page = Slotted::new(&leaf.bytes()[..page_bytes]);
                        let found = page.search(key).expect("invariant: a latched leaf");
                        let before = match found {
                            Ok(at) => Some(value_ref(&leaf.bytes()[..page_bytes], at)),
                            Err(_) => None,
                        };
                        record(key, lsn, before);
                        found
                    };
                    let mut frame = leaf.write();
                    match change {
                        Some(value) => {
                            let put = edit::put_leaf_found(&mut frame, key, *value, Some(found));
                            assert!(put.is_ok(), "a leaf checked for room had none: {put:?}");
                        }
                        None => {
                            edit::remove(&mut frame, key);
                        }
                    }
                }
                let old = Slotted::new(&leaf.bytes()[..page_bytes]).lsn().expect("an LSN");
                edit::set_lsn(&mut leaf.write(), old.max(lsn));
                pool.mark_dirty(leaf.pid());
                debug_assert_eq!(
                    slotted::check(&leaf.bytes()[..page_bytes], page_bytes),
                    Ok(Kind::Leaf)
                );
            }
            return Ok(lsn);
        }
        let pid = root;
        Err(WriteError::TooLarge { pid, no_room: NoRoom { needed: page_bytes + 1, page_bytes } })
    }

    /// Cuts leaf `pid` at `separator` (`edit::split_point`), and up the path as far as the
    /// separators need room, with the structure lock held alone; does nothing when the
    /// leaf whose range holds `separator` is no longer `pid` (another split ran since the
    /// batch looked: it looks again).
    fn split_for<S: PageSource, N>(
        &self,
        pool: &BufferPool<S>,
        space: &dyn Space,
        root: u64,
        pid: u64,
        separator: &[u8],
    ) -> Result<(), WriteError<S::Error, N>> {
        let _change = pool.change_structure();
        let page_bytes = pool_page_bytes(pool);
        // No batch runs: the path is latched from the root down with no one to wait for
        // but readers, who only read.
        let mut path: Vec<Exclusive<'_>> = vec![pool.exclusive(root)?];
        loop {
            let page = Slotted::new(&path.last().expect("a page").bytes()[..page_bytes]);
            match page.kind().expect("invariant: a checked page") {
                Kind::Leaf => break,
                Kind::Internal => {
                    // By the separator: the leaf cut is the one whose range holds it.
                    let index = page.child_index(separator).expect("routes");
                    let child = page.child(index).expect("child");
                    if path.len() == MAX_DEPTH {
                        return Err(WriteError::Read(ReadError::TooDeep { root }));
                    }
                    path.push(pool.exclusive(child)?);
                }
            }
        }
        let leaf = path.last().expect("a leaf");
        if leaf.pid() != pid {
            // Split since the batch looked: the batch looks again.
            return Ok(());
        }
        // Bottom up: split the page, hand its separator to the parent, until one takes it.
        let mut created: Vec<Exclusive<'_>> = Vec::new();
        let mut carry: Option<(Vec<u8>, u64)> = None;
        let depth = path.len();
        let mut changed_from = depth;
        for level in (0..depth).rev() {
            changed_from = level;
            let page = &mut path[level];
            if let Some((separator, child)) = &carry {
                if edit::put_separator(&mut page.write(), separator, *child).is_ok() {
                    pool.mark_dirty(page.pid());
                    carry = None;
                    break;
                }
            }
            if level == 0 {
                let leaf_at = (depth == 1).then_some(separator);
                split_root(pool, space, page, carry.take(), leaf_at, &mut created)?;
                break;
            }
            let right_id = space.allocate();
            // A full parent splits with the separator it had no room for.
            let split = match carry.take() {
                None if level == depth - 1 => {
                    edit::split_at(&page.bytes()[..page_bytes], right_id, separator)
                }
                None => edit::split(&page.bytes()[..page_bytes], right_id),
                Some((separator, child)) => {
                    edit::split_adding(&page.bytes()[..page_bytes], right_id, &separator, child)
                }
            };
            let right = pool.create(right_id, &split.right)?;
            page.write().put(0, &split.left);
            pool.mark_dirty(page.pid());
            created.push(right);
            carry = Some((split.separator, right_id));
        }
        assert!(carry.is_none(), "a separator was left without a parent");
        // Every page of the path below the first that took the separator changed (the
        // ones above it did not), and every page made.
        let pids: Vec<u64> =
            path[changed_from..].iter().chain(&created).map(Exclusive::pid).collect();
        self.record_split(pids);
        drop(created);
        drop(path);
        Ok(())
    }
}

/// Splits the root in place: its two halves go to new pages, and the root becomes an
/// internal page over them (so the root's id never changes). `carry`, a separator its
/// child's split left that it had no room for, is split with it; a root leaf splits at
/// `leaf_at`.
fn split_root<'p, S: PageSource, N>(
    pool: &'p BufferPool<S>,
    space: &dyn Space,
    root: &mut Exclusive<'p>,
    carry: Option<(Vec<u8>, u64)>,
    leaf_at: Option<&[u8]>,
    created: &mut Vec<Exclusive<'p>>,
) -> Result<(), WriteError<S::Error, N>> {
    let page_bytes = pool_page_bytes(pool);
    let lsn = Slotted::new(&root.bytes()[..page_bytes]).lsn().expect("an LSN");
    let (left_id, right_id) = (space.allocate(), space.allocate());
    let split = match carry {
        None => match leaf_at {
            Some(separator) => edit::split_at(&root.bytes()[..page_bytes], right_id, separator),
            None => edit::split(&root.bytes()[..page_bytes], right_id),
        },
        Some((separator, child)) => {
            edit::split_adding(&root.bytes()[..page_bytes], right_id, &separator, child)
        }
    };
    let left = pool.create(left_id, &split.left)?;
    let right = pool.create(right_id, &split.right)?;
    let image = slotted::encode_internal(left_id, &[(split.separator, right_id)], lsn, page_bytes);
    root.write().put(0, &image);
    pool.mark_dirty(root.pid());
    created.extend([left, right]);
    Ok(())
}

fn pool_page_bytes<S: PageSource>(pool: &BufferPool<S>) -> usize {
    pool.page_bytes()
}

/// The leaf whose keys `key` falls among, under `root`: optimistic reads of the internal
/// pages (a batch holds the structure lock shared, so they do not change while it runs). A
/// page the batch holds already (`held`) is a leaf: it is not read again.
fn leaf_for<S: PageSource, N>(
    pool: &BufferPool<S>,
    root: u64,
    key: &[u8],
    held: Option<u64>,
) -> Result<u64, WriteError<S::Error, N>> {
    let mut pid = root;
    for _ in 0..MAX_DEPTH {
        if Some(pid) == held {
            return Ok(pid);
        }
        let child = pool.read(pid, |page| match page.kind()? {
            Kind::Leaf => Some(None),
            Kind::Internal => Some(Some(page.child(page.child_index(key)?)?)),
        })?;
        match child {
            Some(child) => pid = child,
            None => return Ok(pid),
        }
    }
    Err(WriteError::Read(ReadError::TooDeep { root }))
}

/// Whether a leaf has room for all of `ops`: plainly, when every put shares its prefix and
/// the gap takes them all; else by making them on a copy.
fn fits(page: &[u8], ops: &[Op<'_>]) -> bool {
    let needed = ops.iter().try_fold(0usize, |sum, (key, change)| match change {
        Some(value) => edit::put_bytes(page, key, *value).map(|bytes| sum + bytes),
        None => Some(sum),
    });
    if needed.is_some_and(|needed| needed <= edit::gap(page)) {
        return true;
    }
    // One put (a writer's usual batch): its room counted in place. A put that fits the
    // gap or its old entry fits laid out again too, so the page takes it when that does.
    if let [(key, Some(value))] = ops {
        if let Some(bytes) = edit::relaid_bytes(page, key, *value) {
            let fits = bytes <= page.len()
                && Slotted::new(page).count().is_some_and(|n| n < usize::from(u16::MAX));
            debug_assert_eq!(fits, fits_on_copy(page, ops), "{bytes} bytes laid out again");
            return fits;
        }
    }
    fits_on_copy(page, ops)
}

/// Whether a leaf takes all of `ops`, made one after another on a copy.
fn fits_on_copy(page: &[u8], ops: &[Op<'_>]) -> bool {
    let mut copy = page.to_vec();
    ops.iter().all(|(key, change)| match change {
        Some(value) => edit::put_leaf(&mut copy[..], key, *value).is_ok(),
        None => {
            edit::remove(&mut copy[..], key);
            true
        }
    })
}

/// About the bytes a change's entry takes in a leaf (0 for a removal), to choose where a
/// leaf without room for its changes is cut.
fn entry_bytes(key: &[u8], value: Option<ValueRef<'_>>) -> usize {
    match value {
        None => 0,
        Some(ValueRef::Inline(bytes)) => slotted::SLOT_BYTES + key.len() + bytes.len() + 8,
        Some(ValueRef::Overflow(_)) => slotted::SLOT_BYTES + key.len() + 24,
    }
}

/// A leaf's value at slot `at`, borrowed from the page.
fn value_ref(page: &[u8], at: usize) -> ValueRef<'_> {
    match Slotted::new(page).value(at).expect("invariant: a checked leaf's value") {
        slotted::ValueAt::Inline { offset, len } => ValueRef::Inline(&page[offset..offset + len]),
        slotted::ValueAt::Overflow(overflow) => ValueRef::Overflow(overflow),
    }
}

#[cfg(test)]
mod tests;
