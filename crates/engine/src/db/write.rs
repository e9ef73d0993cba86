//! The write path (see `db.rs`'s header): a batch's changes sorted by key, values too large
//! for a leaf put in overflow blocks (held in memory until the next checkpoint writes
//! them), then the tree changed in place (`tree::write::Writer`): the batch's leaves
//! latched, the log numbering the batch, each key's before-image recorded in the undo, the
//! leaves changed and marked dirty. For `Sync` the writer then waits for the log to make it
//! durable (group commit), with no latch held, and only then is it *published*: the visible
//! sequence number passes it once every earlier write is published too, so readers see
//! writes in log order and a batch all at once (a reader below a leaf's LSN reads the
//! undo's before-image instead).
//!
//! Writers slow down as dirty pages pile up past what a checkpoint is due at (a quarter of
//! the buffer pool), from halfway between that and three quarters of the pool's room for
//! pages: each sleeps a little, more the further past, so the checkpoint thread catches up.
//! At three quarters they wait for the checkpoint thread to write pages back. Both only
//! once the pool is within an eighth of its room of its budget: before that, dirty pages
//! keep no page out.
//!
//! Must never: acknowledge a `Sync` write before the log made it durable; let a reader see
//! part of a batch (a write is published only once every earlier one is); change the tree
//! in a batch that fails.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tierkv_wal::{Durability, Lsn};

use super::{batch_record, lock, read, Inner, Version};
use crate::batch::{check_key, WriteBatch};
use crate::block_pages::{Pages, PagesError};
use crate::page::slotted::edit::ValueRef;
use crate::page::OverflowRef;
use crate::tree::write::{Op, Space, WriteError, Writer};
use crate::undo::Undo;

use super::snapshot::LiveSnapshots;
use crate::{Error, Result};

/// The longest a writer is slowed down at a time.
const MAX_DELAY: Duration = Duration::from_millis(10);

/// Where the writer's splits get page ids.
struct Ids<'a> {
    pages: &'a Pages,
    next_page: &'a AtomicU64,
}

impl Space for Ids<'_> {
    fn allocate(&self) -> u64 {
        self.pages.allocate(self.next_page)
    }
}

/// What applying a batch to the tree needs, outside a running store too (recovery).
pub(super) struct Apply<'a> {
    pub pages: &'a Pages,
    pub writer: &'a Writer,
    pub next_page: &'a AtomicU64,
    pub freed: &'a Mutex<Vec<(u64, OverflowRef)>>,
    /// Where before-images go; `None` in recovery, which has no readers.
    pub undo: Option<&'a Undo>,
    /// For a write published without waiting for the log: when a batch of one key may leave
    /// its before-image out (`snapshot::LiveSnapshots`). `None`: every batch records.
    pub live: Option<&'a LiveSnapshots>,
    pub inline_max: usize,
}

/// Why a batch was not applied; it changed nothing.
pub(super) enum ApplyError<N> {
    /// A page could not be read, or the tree has no room for it.
    Tree(Error),
    /// `number` refused it.
    Refused(N),
}

impl Apply<'_> {
    /// Applies `batch` to the tree under `root`, numbered by `number`; returns its LSN.
    pub fn batch<N>(
        &self,
        root: u64,
        batch: &WriteBatch,
        number: impl FnOnce() -> std::result::Result<u64, N>,
    ) -> std::result::Result<u64, ApplyError<N>> {
        self.checked(root, batch, &[], |_| Ok(()), number)
    }

    /// `batch`, made only if `check` accepts the current values of `reads` (sorted, each
    /// key once), read with their leaves and the batch's latched (`Writer::apply_checked`).
    pub fn checked<N>(
        &self,
        root: u64,
        batch: &WriteBatch,
        reads: &[&[u8]],
        check: impl FnOnce(&[Option<ValueRef<'_>>]) -> std::result::Result<(), N>,
        number: impl FnOnce() -> std::result::Result<u64, N>,
    ) -> std::result::Result<u64, ApplyError<N>> {
        assert!(!batch.is_empty(), "an empty batch");
        // In key order, the last change of a key winning (a stable sort keeps a key's
        // changes in batch order).
        let mut changes: Vec<(&[u8], Option<&[u8]>)> = batch.ops().collect();
        changes.sort_by(|a, b| a.0.cmp(b.0));
        changes.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                *earlier = *later;
            }
            same
        });
        let mut overflows: Vec<OverflowRef> = Vec::new();
        let ops: Vec<Op<'_>> = changes
            .iter()
            .map(|&(key, value)| {
                let value = value.map(|value| match value.len() > self.inline_max {
                    true => {
                        let overflow = self.pages.add_overflow(value, self.next_page);
                        overflows.push(overflow);
                        ValueRef::Overflow(overflow)
                    }
                    false => ValueRef::Inline(value),
                });
                (key, value)
            })
            .collect();
        let space = Ids { pages: self.pages, next_page: self.next_page };
        // One key's change is all or nothing to any reader with or without its before-image.
        let live = self.live.filter(|_| ops.len() == 1);
        let record = |key: &[u8], lsn, before: Option<ValueRef<'_>>| {
            if let Some(ValueRef::Overflow(overflow)) = before {
                lock(self.freed).push((lsn, overflow));
            }
            if let Some(undo) = self.undo {
                if !live.is_some_and(|live| live.unneeded(lsn)) {
                    undo.record(key, lsn, before);
                }
            }
        };
        let pool = self.pages.pool();
        let applied =
            self.writer.apply_checked(pool, &space, root, &ops, reads, check, number, record);
        match applied {
            Ok(lsn) => {
                debug_assert!(lsn > 0);
                Ok(lsn)
            }
            Err(error) => {
                // Nothing refers to the values' blocks: they go.
                let ids = overflows.iter().flat_map(|o| o.first..o.first + u64::from(o.blocks));
                self.pages.drop_pending(ids);
                Err(match error {
                    WriteError::Read(error) => ApplyError::Tree(PagesError::from(error).into()),
                    WriteError::Refused(refused) => ApplyError::Refused(refused),
                    WriteError::TooLarge { pid, no_room } => ApplyError::Tree(Error::Corruption(
                        format!("leaf {pid} cannot take a change even alone: {no_room}"),
                    )),
                })
            }
        }
    }
}

/// A check of a batch that refused it: the key at `index` of the expectations held
/// `current`.
#[derive(Debug)]
pub(super) struct Mismatch {
    pub index: usize,
    pub current: Option<Vec<u8>>,
}

/// Why a checked batch was not numbered.
enum Refusal {
    Log(tierkv_wal::WalError),
    Mismatch(Mismatch),
    Read(PagesError),
}

impl Inner {
    pub(super) fn write(&self, batch: &WriteBatch, durability: Durability) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let written = self.write_checked(batch, durability, &[])?;
        assert!(written.is_ok(), "a batch with nothing to check was refused");
        Ok(())
    }

    /// Applies `batch` only if each key of `expect` (sorted, each once) holds the value
    /// given (`None`: no value), checked with the leaves latched, so that nothing changes
    /// between the check and the batch; returns the batch's sequence number, or the first
    /// key that did not match and its value then. A refused batch changes nothing and
    /// writes nothing to the log.
    pub(super) fn write_checked(
        &self,
        batch: &WriteBatch,
        durability: Durability,
        expect: &[(&[u8], Option<&[u8]>)],
    ) -> Result<std::result::Result<u64, Mismatch>> {
        assert!(!batch.is_empty(), "an empty batch");
        assert!(expect.windows(2).all(|w| w[0].0 < w[1].0), "expectations sorted, each once");
        batch.validate()?;
        let max = self.options.max_key_bytes();
        for (key, _) in expect {
            check_key(key)?;
        }
        let mut keys = batch.ops().map(|(key, _)| key).chain(expect.iter().map(|(key, _)| *key));
        if let Some(key) = keys.find(|key| key.len() > max) {
            return Err(Error::KeyTooLarge { len: key.len(), max });
        }
        self.check_writable()?;
        self.slow_down();
        // Before any latch: a split then finds its new pages' frames faulted in already.
        self.populate_before_write();
        let payload = batch.encode();
        let log = self.log()?;
        let apply = self.apply(durability);
        let reads: Vec<&[u8]> = expect.iter().map(|(key, _)| *key).collect();
        let check = |current: &[Option<ValueRef<'_>>]| -> std::result::Result<(), Refusal> {
            for (index, (now, (_, wanted))) in current.iter().zip(expect).enumerate() {
                if let Some(current) = self.mismatch(*now, *wanted).map_err(Refusal::Read)? {
                    return Err(Refusal::Mismatch(Mismatch { index, current }));
                }
            }
            Ok(())
        };
        let lsn = {
            let _switch = read(&self.switch);
            let root = self.current.load().tree.root;
            // On the file backend a `Sync` write is appended without waiting, and made
            // durable below, with no latch held, with whoever else is waiting.
            let number = || {
                match durability {
                    Durability::Sync => log.append_for_sync(batch_record(), &payload),
                    other => log.append(batch_record(), &payload, other),
                }
                .map(|lsn| lsn.0)
                .map_err(Refusal::Log)
            };
            match apply.checked(root, batch, &reads, check, number) {
                Ok(lsn) => lsn,
                Err(ApplyError::Tree(error)) => return Err(error),
                Err(ApplyError::Refused(Refusal::Log(error))) => {
                    return Err(self.fail(error.into()))
                }
                Err(ApplyError::Refused(Refusal::Read(error))) => return Err(error.into()),
                Err(ApplyError::Refused(Refusal::Mismatch(mismatch))) => return Ok(Err(mismatch)),
            }
        };
        if durability == Durability::Sync {
            log.sync_to(Lsn(lsn)).map_err(|error| self.fail(error.into()))?;
        }
        self.visible.publish(lsn);
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.counters.write_ops.fetch_add(batch.len() as u64, Ordering::Relaxed);
        let logged = self.log_bytes.fetch_add(payload.len() as u64, Ordering::Relaxed)
            + payload.len() as u64;
        if self.log_checkpoint_due(logged) {
            self.kick();
        }
        if self.undo.full() {
            self.rotate_undo();
        }
        if !self.visible.wait(lsn, &self.failed) {
            return Err(self.check_writable().err().unwrap_or(Error::Closed));
        }
        Ok(Ok(lsn))
    }

    /// `None` when a leaf's value `now` is `wanted`, else `Some` of what it holds (an
    /// overflow value is read once, to compare it and to return it).
    fn mismatch(
        &self,
        now: Option<ValueRef<'_>>,
        wanted: Option<&[u8]>,
    ) -> std::result::Result<Option<Option<Vec<u8>>>, PagesError> {
        Ok(match now {
            None => wanted.is_some().then_some(None),
            Some(ValueRef::Inline(value)) => (Some(value) != wanted).then(|| Some(value.to_vec())),
            Some(ValueRef::Overflow(overflow)) => {
                let value = self.pages.read_overflow(&overflow)?;
                assert_eq!(value.len() as u64, overflow.len, "an overflow value read whole");
                (Some(&value[..]) != wanted).then_some(Some(value))
            }
        })
    }

    /// What applying a batch of `durability` needs, for this store.
    pub(super) fn apply(&self, durability: Durability) -> Apply<'_> {
        Apply {
            pages: &self.pages,
            writer: &self.writer,
            next_page: &self.next_page,
            freed: &self.freed,
            undo: Some(&self.undo),
            // A `Sync` write is published only once durable: until then a reader must not
            // see it, so it always records.
            live: (durability != Durability::Sync).then_some(&self.live),
            inline_max: self.options.max_inline_value(),
        }
    }

    /// Bytes of dirty pages at which a checkpoint is due: a quarter of the buffer pool's
    /// budget (dirty pages are never evicted, so they must leave room for the clean ones;
    /// below that, checkpoints come by log size or time, and a page changed many times is
    /// written once). Half was tried (01db922): the YCSB load ran faster (0.89 of the best
    /// peer against 0.84, its slowest insert under 46 ms), but the first checkpoint came in
    /// A with a pool half dirty, and an update waited 2.3 s (A 1.61, F 2.28, D 0.66 of the
    /// best peer, against 2.19, 3.11, 0.78: `results/ycsb/engine-ii/writes-01db922`).
    pub(super) fn checkpoint_due(&self) -> usize {
        (self.pages.pool().budget() / 4).max(self.options.page_bytes())
    }

    /// Whether `logged` bytes of log since the last checkpoint make one due: at least
    /// `checkpoint_log_bytes`, and at least the dirty pages' bytes, which that checkpoint
    /// would write. So checkpoints never write more page bytes than the log took since the
    /// last one (with random keys, nearly every page a checkpoint writes is dirtied again
    /// before the next: in a YCSB load of 1 GB into a 3 GiB budget, one every 64 MiB of log
    /// wrote 3.5 GB of pages), and recovery replays at most the larger of the two, which the
    /// dirty pages' own trigger (`checkpoint_due`) and the writers' slowdown bound.
    pub(super) fn log_checkpoint_due(&self, logged: u64) -> bool {
        logged >= self.options.checkpoint_log_bytes && logged >= self.dirty_bytes() as u64
    }

    /// Bytes of the pages a checkpoint copies and writes at a time, as one atomic group
    /// (`Options::checkpoint_group_bytes`): by default half of what it is due at, at most
    /// 8 MiB, so that the copies stay small beside the pool and writers that split wait for
    /// one group's copy at most.
    pub(super) fn group_bytes(&self) -> usize {
        let page_bytes = self.options.page_bytes();
        let default = || (self.checkpoint_due() / 2).min(8 << 20);
        self.options.checkpoint_group_bytes.unwrap_or_else(default).max(4 * page_bytes)
    }

    /// Bytes of dirty pages now.
    pub(super) fn dirty_bytes(&self) -> usize {
        self.pages.pool().dirty_count() * self.options.page_bytes()
    }

    /// Kicks a checkpoint once the dirty pages reach `checkpoint_due`, and slows the
    /// writer down past halfway from there to three quarters of the pool's room for pages:
    /// a sleep that grows with how far past, at most `MAX_DELAY`. Once they take those
    /// three quarters (dirty pages cannot be evicted, and the clean pages a write reads
    /// need the rest), the writer
    /// waits until the checkpoint thread has written them back, so that a writer faster
    /// than the block store never takes the pool past its budget. Both only with the pool
    /// near its budget (`Pressure::of`).
    fn slow_down(&self) {
        self.rebudget();
        let due = self.checkpoint_due();
        let dirty = self.dirty_bytes();
        if dirty < due {
            return;
        }
        self.kick();
        let Some(micros) = self.pressure().delay_micros() else { return };
        self.counters.stalls.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_micros(micros).min(MAX_DELAY));
        // Bounded: each checkpoint writes every page dirty when it began (to none: the wait
        // ends whatever the room); a failed store or a stopped checkpoint thread ends it too
        // (the write then fails, or is the last).
        while self.pressure().stop && self.checkpointer_running() {
            self.kick();
            self.counters.stalls.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(MAX_DELAY / 10);
        }
    }

    /// The dirty pages' pressure on writers now (`Pressure::of`).
    fn pressure(&self) -> Pressure {
        let pool = self.pages.pool();
        let (dirty, due) = (self.dirty_bytes(), self.checkpoint_due());
        Pressure::of(dirty, due, pool.room_for_pages(), pool.used_bytes(), pool.budget())
    }

    /// Whether the checkpoint thread runs and the store has not failed.
    fn checkpointer_running(&self) -> bool {
        let trigger = lock(&self.trigger);
        trigger.running && !trigger.stop && !self.failed.load(Ordering::Acquire)
    }

    /// Starts a new undo segment once the current one is full, and publishes a version whose
    /// view leaves out the segments no new reader needs; then drops the oldest past the
    /// limit. One thread at a time; another that finds it busy goes on.
    pub(super) fn rotate_undo(&self) {
        let Ok(_held) = self.publishing.try_lock() else { return };
        if !self.undo.full() {
            return;
        }
        let log = self.wal.as_ref().expect("invariant: a store that writes has a log");
        let view = self.undo.rotate(|| log.next_lsn().0 - 1, self.visible.get());
        let current = self.current.load_full();
        self.current.store(Arc::new(Version {
            tree: current.tree.clone(),
            undo: view,
            epoch: Arc::clone(&current.epoch),
        }));
        drop(current);
        self.undo.trim();
        drop(_held);
        self.rebudget();
    }

    /// Gives the buffer pool what the before-images leave of `cache_size`
    /// (`Options::undo_reserve`: they are set aside one step more than they hold).
    /// Called by each writer and after each checkpoint; it changes the pool's budget only
    /// when the reserve moves by a step. One thread at a time sets it, again until the
    /// figure it read agrees with the one it set. The reserve is published after the budget
    /// is set, never before.
    pub(super) fn rebudget(&self) {
        let reserve = || self.options.undo_reserve(self.undo.bytes());
        if self.undo_reserve.load(Ordering::Acquire) == reserve() {
            return;
        }
        let _one = lock(&self.rebudgeting);
        // Bounded: a pass that finds the reserve unchanged ends it; writers that keep moving
        // it call this again themselves.
        for _ in 0..4 {
            let now = reserve();
            if self.undo_reserve.load(Ordering::Acquire) == now {
                return;
            }
            // A smaller budget evicts (and demotes) pages.
            self.pages.pool().set_budget(self.options.cache_size.saturating_sub(now));
            self.undo_reserve.store(now, Ordering::Release);
        }
    }

    /// Wakes the checkpoint thread.
    pub(super) fn kick(&self) {
        let mut trigger = lock(&self.trigger);
        if !trigger.kicked {
            trigger.kicked = true;
            self.trigger_cv.notify_all();
        }
    }
}

/// What dirty pages ask of a writer (`Inner::slow_down`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Pressure {
    /// How far into the slow-down band the dirty pages are, in tenths of it (`None`: not
    /// in it).
    band_tenths: Option<u64>,
    /// Whether writers wait for the checkpoint thread.
    stop: bool,
}

impl Pressure {
    /// The pressure of `dirty` bytes of dirty pages, with a checkpoint `due` at, in a pool
    /// of `room` bytes for pages that counts `used` bytes of its `budget`. Writers slow
    /// down from halfway between `due` and three quarters of `room`, and stop at three
    /// quarters, but only once the pool is within an eighth of `room` of its budget: a page
    /// read or made then soon needs a clean page evicted. Until then dirty pages keep no
    /// page out, and writers are neither slowed nor stopped for them: a YCSB load of 1 GB
    /// into a 3 GiB budget, whose tree stays resident, stopped its writers for up to 175 ms
    /// at three quarters dirty with a fifth of the room unused.
    fn of(dirty: usize, due: usize, room: usize, used: usize, budget: usize) -> Pressure {
        let stall_at = room / 4 * 3;
        let slow_from = due + stall_at.saturating_sub(due) / 2;
        let tight = used + room / 8 >= budget;
        if dirty < due || dirty < slow_from || !tight {
            return Pressure::default();
        }
        let band = stall_at.saturating_sub(slow_from).max(1);
        let past = (dirty - slow_from) as u128 * 10 / band as u128;
        Pressure {
            band_tenths: Some(u64::try_from(past).unwrap_or(u64::MAX)),
            stop: dirty > 0 && dirty >= stall_at,
        }
    }

    /// The sleep of one write: a tenth of a millisecond at the band's start, a millisecond
    /// more for each tenth of it past that.
    fn delay_micros(self) -> Option<u64> {
        self.band_tenths.map(|tenths| tenths.saturating_mul(1000).saturating_add(100))
    }
}

#[cfg(test)]
mod pressure_tests {
    use super::Pressure;

    const MIB: usize = 1 << 20;

    #[test]
    fn writers_slow_and_stop_only_with_the_pool_near_its_budget() {
        let (due, room, budget) = (250 * MIB, 1000 * MIB, 1010 * MIB);
        // The band runs from 500 MiB of dirty pages (halfway from 250 to 750) to 750.
        let tight = |dirty: usize| Pressure::of(dirty, due, room, 900 * MIB, budget);
        assert_eq!(tight(499 * MIB), Pressure::default());
        assert_eq!(tight(500 * MIB).delay_micros(), Some(100));
        assert_eq!(tight(625 * MIB).delay_micros(), Some(5_100));
        assert!(!tight(749 * MIB).stop);
        assert!(tight(750 * MIB).stop && tight(900 * MIB).stop);
        // With more than an eighth of the room unused, no page needs evicting soon: the
        // same dirty pages slow no writer and stop none.
        let roomy = |dirty: usize| Pressure::of(dirty, due, room, 884 * MIB, budget);
        assert_eq!(roomy(600 * MIB), Pressure::default());
        assert_eq!(roomy(880 * MIB), Pressure::default());
        // Exactly an eighth left counts as near.
        assert!(Pressure::of(800 * MIB, due, room, 885 * MIB, budget).stop);
    }
}
