//! The write path (see `db.rs`'s header): a batch appended to the log, which numbers it,
//! inserted into the mutable memtable under `switch`, made durable for `Sync` by the log's
//! group commit, then published; and the memtables' room: a writer kicks a checkpoint once
//! the memtable holds `write_buffer_size`, waits while the memtables hold twice that, and
//! moves the buffer pool's budget as they grow.
//!
//! Must never: acknowledge a `Sync` write before the log made it durable; let a reader see
//! part of a batch (a write is published only once every earlier one is).

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use tierkv_wal::Durability;

use super::{batch_record, lock, read, Inner, Version};
use crate::batch::WriteBatch;
use crate::{Error, Result};

impl Inner {
    pub(super) fn write(&self, batch: &WriteBatch, durability: Durability) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        batch.validate()?;
        let max = self.options.max_key_bytes();
        if let Some(key) = batch.ops().map(|(key, _)| key).find(|key| key.len() > max) {
            return Err(Error::KeyTooLarge { len: key.len(), max });
        }
        self.check_writable()?;
        self.wait_for_room()?;
        let payload = batch.encode();
        // On the file backend a `Sync` write is appended without waiting, and made durable
        // below, outside `switch`, with whoever else is waiting.
        let logged = match durability {
            Durability::Sync => Durability::None,
            other => other,
        };
        let lsn = {
            let _switch = read(&self.switch);
            let lsn = self
                .log()?
                .append(batch_record(), &payload, logged)
                .map_err(|error| self.fail(error.into()))?;
            let memtable = Arc::clone(&self.current.load().mutable);
            for (key, value) in batch.ops() {
                memtable.insert(key, lsn.0, value);
            }
            lsn
        };
        if durability == Durability::Sync {
            self.log()?.sync_to(lsn).map_err(|error| self.fail(error.into()))?;
        }
        self.visible.publish(lsn.0);
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.counters.write_ops.fetch_add(batch.len() as u64, Ordering::Relaxed);
        let log_bytes = self.log_bytes.fetch_add(payload.len() as u64, Ordering::Relaxed);
        if log_bytes + payload.len() as u64 >= self.options.checkpoint_log_bytes {
            self.kick();
        }
        if !self.visible.wait(lsn.0, &self.failed) {
            return Err(self.check_writable().err().unwrap_or(Error::Closed));
        }
        Ok(())
    }

    /// Kicks a checkpoint once the memtable reached `write_buffer_size`, and waits while the
    /// memtables (with the frozen one a checkpoint is writing back) hold twice that.
    fn wait_for_room(&self) -> Result<()> {
        let limit = self.options.write_buffer_bytes();
        let full = |version: &Version| {
            let bytes = version.mutable.bytes();
            let frozen = version.frozen.as_ref().map_or(0, |frozen| frozen.bytes());
            (bytes >= limit, bytes + frozen >= 2 * limit)
        };
        let (due, stall) = full(&self.current.load());
        self.rebudget();
        if !due {
            return Ok(());
        }
        self.kick();
        if !stall {
            return Ok(());
        }
        self.counters.stalls.fetch_add(1, Ordering::Relaxed);
        let mut trigger = lock(&self.trigger);
        loop {
            self.check_writable()?;
            if !full(&self.current.load()).1 {
                return Ok(());
            }
            trigger.kicked = true;
            self.trigger_cv.notify_all();
            trigger = self
                .trigger_cv
                .wait_timeout(trigger, Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Gives the buffer pool what the memtables leave of `cache_size`
    /// (`Options::memtable_reserve`: they are set aside one step more than they hold).
    /// Called by each writer and after each checkpoint; it changes the pool's budget only
    /// when the reserve moves by a step. One thread at a time sets it, from the memtables'
    /// sizes read after its last change, again until they agree: a thread that read older
    /// sizes (a checkpoint publishing while writers fill the new memtable) cannot leave its
    /// stale figure behind, and a write after the last pass calls this itself. The reserve
    /// is published after the budget is set, never before.
    pub(super) fn rebudget(&self) {
        let reserve = || {
            let version = self.current.load();
            let frozen = version.frozen.as_ref().map_or(0, |frozen| frozen.bytes());
            self.options.memtable_reserve(version.mutable.bytes() + frozen)
        };
        if self.memtable_reserve.load(Ordering::Acquire) == reserve() {
            return;
        }
        let _one = lock(&self.rebudgeting);
        // Bounded: a pass that finds the reserve unchanged ends it; writers that keep moving
        // it call this again themselves.
        for _ in 0..4 {
            let now = reserve();
            if self.memtable_reserve.load(Ordering::Acquire) == now {
                return;
            }
            // A smaller budget evicts (and demotes) pages: not under `current`'s lock.
            self.pages.pool().set_budget(self.options.cache_size.saturating_sub(now));
            // Published once the budget holds it: a writer that finds its reserve here and
            // returns at once (above) may count on the budget being set for it.
            self.memtable_reserve.store(now, Ordering::Release);
        }
    }

    /// Wakes the checkpoint thread.
    fn kick(&self) {
        let mut trigger = lock(&self.trigger);
        if !trigger.kicked {
            trigger.kicked = true;
            self.trigger_cv.notify_all();
        }
    }
}
