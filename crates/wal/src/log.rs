//! The log: reserving, copying, group commit, the pmem commit chain, rotation and truncation.
//!
//! An append takes the state lock only to reserve its LSN and offset (`reserve`), encodes and
//! copies its record with no lock held, and then finishes by backend:
//!
//! - **file, group commit.** A `Buffered` or `None` appender copies its record into the
//!   segment's shared mapping: no system call per append (a pwrite was a quarter of a
//!   1-writer load's time), and the page cache holds the record from then on, so it
//!   survives the process dying; fdatasync writes mapped pages back like written ones. A
//!   `Sync` appender (or one that syncs next, `append_for_sync`), who waits for a sync
//!   anyway, writes with pwrite: a store to a page the last sync left read-only faults,
//!   which costs more. The flusher lets go of
//!   pages appends are done with (`release_written`), so resident memory does not grow
//!   with the log. The appender then marks its LSN written; `written` is the highest LSN
//!   below which every record is written. A `Sync` appender waits until `durable` covers its
//!   LSN. If `written` covers its LSN, no running round's target does, and fewer than
//!   `MAX_SYNC_ROUNDS` rounds run, it leads one: it takes `target = written`, releases the
//!   lock, fdatasyncs every segment that may hold unsynced records up to `target` (sealed
//!   ones first, then the active one), retakes the lock, raises `durable` to `target` and
//!   wakes the waiters. Appenders arriving during a round reserve and copy freely; the next
//!   leader syncs all of them with one fdatasync. Before leading, a leader gathers (`gather`,
//!   one appender at a time): it waits, for at most the recent fdatasync time, until
//!   every appender inside `append` has written and as many `Sync` appenders wait as the
//!   recent peak (`peak_batch`), so that closed-loop appenders woken by the last round get
//!   into this one instead of starting a round of their own.
//!   Waiters sleep on a futex word (`round_end`) that every round's end bumps: one system
//!   call wakes them all, and a waiter whose record is durable returns without the lock.
//!   The background flusher runs the same round for `Buffered` records every
//!   `flush_interval`.
//! - **pmem, FLEX.** Commits happen in LSN order under the commit lock (`CommitChain`), which
//!   reservations and copies never take. An appender whose predecessor is committed (the
//!   common case) stores the segment's commit word (the end of its record) with one 8-byte
//!   store, then flushes its record's lines and the commit word's line behind one fence, and
//!   publishes `committed = lsn`. An appender whose predecessor is still copying persists its
//!   own record (flush + fence), leaves it in the chain, and waits; the predecessor's commit
//!   then covers it, so concurrent appenders share commit-word updates. No system call on
//!   the way: the segment is already allocated, mapped and zeroed, and a waiter spins before
//!   it parks.
//!
//! The file backend's group commit lives in `log/group.rs`, the pmem commit chain in
//! `log/flex.rs`; reserving, rotation and the preparer here.
//!
//! Segments are prepared by a background thread (`segment.rs`) before they are needed, two
//! ahead; a rotation installs the first prepared one under the lock and asks for the next.
//! On the file backend the preparer recycles the files `truncate_below` let go of
//! (`Segment::recycle`) where one is large enough, and zero-fills a new file otherwise.
//!
//! Invariants:
//! 1. LSNs are reserved in offset order within a segment, and segments in number order, so
//!    LSN order is log order and recovery can follow the chain.
//! 2. `durable <= written <= next_lsn - 1` (file), and `durable` only grows. A `Sync` append
//!    returns Ok only after a completed fdatasync of every file holding records up to its LSN.
//! 3. A pmem commit word passes a record only when every earlier record is durable and the
//!    record itself is either durable or flushed behind the same fence as the commit word. A
//!    crash before that fence may keep the word and lose lines of the record: its checksum
//!    fails, recovery stops there, and the record was never acknowledged.
//! 4. No lock is held across an fdatasync or a copy. The pmem commit lock is held across
//!    the one fence of a commit, which is serial anyway; reservations do not take it.
//! 5. After a failed write, sync or persist, `poison` is set and never cleared: records after
//!    the failure could follow a hole, so nothing more may be acknowledged.
//!
//! Must never: acknowledge a `Sync` append before its fdatasync or commit word is durable;
//! block appenders from copying while a sync runs.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use tierkv_io::Storage;

use crate::format::{self, Backend, MAX_PAYLOAD_BYTES, RECORDS_START};
use crate::recovery::{self, Record, RecoveryReport};
use crate::segment::Segment;
use crate::stats::Counters;
use crate::{Durability, Lsn, RecordType, WalError, WalOptions, WalStats};

mod flex;
mod group;

/// Spins on the pmem commit chain before parking.
const COMMIT_SPINS_BEFORE_PARK: u32 = 256;

/// A group-commit leader waits at most the recent fdatasync time divided by this for other
/// appenders to write. The gather ends as soon as the recent peak of waiters is back, so the
/// bound only matters when an appender has gone away, until the peak decays. Measured on
/// ext4 in a 2-vCPU VM, 8 appenders of 4 KiB records: half the sync time gave 7.0 records
/// per fdatasync and 3.8-4.4x the 1-appender rate; the whole sync time gives 8.0 and
/// 4.1-5.2x, with 2, 4 and 16 appenders no worse.
const GATHER_DIVISOR: u64 = 1;

/// Rounds short of the peak after which `peak_batch` drops by one.
const PEAK_DECAY_ROUNDS: u32 = 16;

/// The longest a group-commit leader waits for other appenders to write.
const GATHER_MAX: Duration = Duration::from_micros(500);

/// fdatasync rounds that may run at once: one. Overlapping rounds on one file are unsafe and
/// did not help: Linux reports a writeback error to only one of the fdatasync calls running
/// on the same open file (errseq), so another could succeed over lost data; and overlapping
/// syncs of the same tail page serialise in the kernel anyway (measured: no gain at 8
/// threads on ext4).
const MAX_SYNC_ROUNDS: usize = 1;

/// Encode buffers larger than this are not kept between appends.
const KEPT_BUFFER_BYTES: usize = 1 << 20;

/// The most a segment grows over the one installed before it is prepared (see `install`).
const GROWTH: u64 = 4;

/// Files of truncated segments kept for recycling (file backend); more are deleted. A
/// truncation after a checkpoint frees as many segments as the log filled since the last
/// one (a dozen of 64 MiB in a YCSB run: with four kept, two thirds of the segments were
/// still zero-filled), and those are what it fills before the next: kept, the log's files
/// stay at the size they reached, and no more.
const KEPT_FREE: usize = 64;

/// Segments kept prepared ahead of the active one. With one, appends waited for the
/// preparer whenever its fsync of a zeroed 64 MiB segment took longer than appends took to
/// fill the active one: in a YCSB load beside the block store's write-back that fsync took
/// 130-870 ms, the active segment filled in about 1.2 s, and appends waited up to 1 s.
const PREPARED_AHEAD: usize = 2;

thread_local! {
    static ENCODE_BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// An open log, recovered and ready for appends. `Send + Sync`: share it with an `Arc`.
pub struct Wal {
    shared: Arc<Shared>,
    /// The background threads, until `close` stops them. Behind a lock so that an owner
    /// that shares the log (the engine's store) can close it through `&self`.
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// What `Wal::open` returns: the log, and what recovery found.
#[derive(Debug)]
pub struct Recovered {
    /// The log, positioned after the last recovered record.
    pub wal: Wal,
    /// What recovery kept and discarded.
    pub report: RecoveryReport,
}

struct Shared {
    storage: Storage,
    dir: PathBuf,
    options: WalOptions,
    state: Mutex<State>,
    /// Wakes appenders waiting for a rotation (a prepared or grown segment), and everyone at
    /// a poisoning or a close.
    progress: Condvar,
    /// Wakes appenders waiting for earlier records to be written before they can lead.
    written_cv: Condvar,
    /// file: mirrors `State::durable`, so that a woken `Sync` appender whose record is
    /// durable returns without taking the state lock again.
    durable_now: AtomicU64,
    /// file: bumped at the end of every sync round (and at a poisoning or a close); appenders
    /// waiting for a round sleep on it (a futex), so one system call wakes them all.
    round_end: AtomicU32,
    /// file: appenders sleeping on `round_end`, counted under the state lock when they start.
    round_sleepers: AtomicUsize,
    /// Wakes the background threads.
    work: Condvar,
    /// file: appenders inside `append`.
    active: AtomicUsize,
    /// file: appenders waiting for their records to become durable.
    sync_waiting: AtomicUsize,
    /// pmem: the last committed LSN, written under `chain`, read without it.
    committed: AtomicU64,
    /// pmem: records persisted out of order, waiting for their predecessors.
    chain: Mutex<CommitChain>,
    /// pmem: wakes appenders parked on the chain.
    chain_progress: Condvar,
    /// Mirrors `State::poison.is_some()` for the lock-free pmem path.
    poisoned: AtomicBool,
    counters: Counters,
}

/// pmem: the commit chain's waiting room.
#[derive(Default)]
struct CommitChain {
    /// Durable records whose predecessors are not committed yet: LSN → (segment, end offset).
    done: BTreeMap<Lsn, (Arc<Segment>, u64)>,
    /// Appenders parked on `chain_progress`.
    waiters: usize,
}

/// A truncated segment's file, free for recycling.
struct FreeFile {
    path: PathBuf,
    capacity: u64,
    /// The highest LSN it may hold records of (`None`: it held none).
    last_lsn: Option<Lsn>,
}

struct LiveSegment {
    segment: Arc<Segment>,
    first_lsn: Option<Lsn>,
    last_lsn: Option<Lsn>,
    /// file: the mapped pages below this offset have been let go (`release_written`).
    released: u64,
}

struct State {
    next_lsn: Lsn,
    /// Live segments, oldest first; the last one is active.
    segments: Vec<LiveSegment>,
    /// Where the next record goes in the active segment.
    tail: u64,
    /// file: every LSN up to this one is written.
    written: Lsn,
    /// file: LSNs above `written + 1` that are written already.
    completed: BTreeSet<Lsn>,
    /// file: every LSN up to this one is durable.
    durable: Lsn,
    /// file: the highest `Buffered` LSN, which the flusher must make durable.
    buffered: Lsn,
    /// file: sync rounds running (at most `MAX_SYNC_ROUNDS`).
    rounds: usize,
    /// file: the highest target of the rounds running.
    round_target: Lsn,
    /// file: sealed segments that may hold records not yet synced, with their last LSN.
    unsynced_sealed: Vec<(Arc<Segment>, Lsn)>,
    /// A prepared segment is being grown for an oversized record.
    rotating: bool,
    /// The next segments, ready to install in order (at most `PREPARED_AHEAD`).
    prepared: VecDeque<Segment>,
    /// The highest segment number handed out: the preparer numbers the next one from it. Not
    /// from `prepared` or the active segment, since a segment being grown for an oversized
    /// record (`rotating`) is in neither, and a preparation that reused its number would
    /// rename a fresh file over it while appenders write to it.
    last_number: u64,
    /// The preparer is at work.
    preparing: bool,
    /// file: files of segments `truncate_below` let go of (`.wal.free`), most recent last,
    /// for the preparer to recycle (at most `KEPT_FREE`).
    free: Vec<FreeFile>,
    /// Capacity the next preparation needs at least (0: nothing asked).
    want_capacity: u64,
    /// When the active segment took its first record, or was installed: how fast it fills
    /// sizes the next (`WalOptions::sizing`).
    active_since: Instant,
    /// Why the last preparation failed, for the appender that needs it.
    prepare_error: Option<WalError>,
    /// Why the log refuses appends.
    poison: Option<String>,
    closed: bool,
    /// Appenders blocked on `progress`.
    waiters: usize,
    /// Appenders blocked on `written_cv`.
    written_waiters: usize,
    /// file: an appender is gathering before it leads a round; others do not lead meanwhile.
    gathering: bool,
    /// file: the most `Sync` appenders seen waiting at the start of a recent round.
    peak_batch: u64,
    /// file: rounds since `peak_batch` was last reached.
    peak_misses: u32,
    /// Recent fdatasync time (exponential moving average), nanoseconds.
    sync_ns_ema: u64,
}

impl State {
    fn active(&self) -> &LiveSegment {
        self.segments.last().expect("a log always has an active segment")
    }
}

impl Wal {
    /// Opens (creating if missing) the log in `dir`, recovering it first: every complete record
    /// goes to `on_record` in LSN order, and the report says what was discarded after the
    /// first torn or invalid one.
    pub fn open(
        storage: &Storage,
        dir: impl AsRef<Path>,
        options: WalOptions,
        mut on_record: impl FnMut(Record<'_>),
    ) -> Result<Recovered, WalError> {
        options.validate()?;
        let dir = dir.as_ref().to_path_buf();
        let recovered =
            recovery::recover(storage, &dir, &options, recovery::Mode::Repair, &mut on_record)?;
        let counters = Counters::default();
        let mut segments: Vec<LiveSegment> = Vec::with_capacity(recovered.segments.len() + 1);
        let count = recovered.segments.len();
        let firsts: Vec<Option<Lsn>> = recovered.segments.iter().map(|(_, first)| *first).collect();
        for (index, (segment, first_lsn)) in recovered.segments.into_iter().enumerate() {
            let last_lsn = if index + 1 == count {
                first_lsn.map(|_| recovered.last_lsn)
            } else {
                firsts[index + 1].map(|next| Lsn(next.0 - 1))
            };
            // CRASH: records recovered from the page cache after a process crash may not be on
            // the device yet; make them durable before anything is built on them.
            match options.backend {
                Backend::File => segment.file.sync_data()?,
                Backend::Pmem => segment.file.persist(0, segment.capacity)?,
            }
            segments.push(LiveSegment {
                segment: Arc::new(segment),
                first_lsn,
                last_lsn,
                released: 0,
            });
        }
        let mut tail = recovered.tail;
        if segments.is_empty() {
            let first = options.sizing().min_bytes;
            let segment = Segment::prepare(storage, &dir, &options, 1, first)?;
            Counters::add(&counters.segments_prepared, 1);
            segments.push(LiveSegment {
                segment: Arc::new(segment),
                first_lsn: None,
                last_lsn: None,
                released: 0,
            });
            tail = RECORDS_START;
        }
        let last = recovered.last_lsn;
        let last_number =
            segments.last().expect("a log always has an active segment").segment.number;
        let state = State {
            next_lsn: last.next(),
            segments,
            tail,
            written: last,
            completed: BTreeSet::new(),
            durable: last,
            buffered: last,
            rounds: 0,
            round_target: last,
            unsynced_sealed: Vec::new(),
            rotating: false,
            prepared: VecDeque::new(),
            last_number,
            preparing: false,
            free: Vec::new(),
            want_capacity: options.sizing().min_bytes,
            active_since: Instant::now(),
            prepare_error: None,
            poison: None,
            closed: false,
            waiters: 0,
            written_waiters: 0,
            gathering: false,
            peak_batch: 0,
            peak_misses: 0,
            sync_ns_ema: 0,
        };
        let shared = Arc::new(Shared {
            storage: storage.clone(),
            dir,
            options,
            state: Mutex::new(state),
            progress: Condvar::new(),
            written_cv: Condvar::new(),
            durable_now: AtomicU64::new(last.0),
            round_end: AtomicU32::new(0),
            round_sleepers: AtomicUsize::new(0),
            work: Condvar::new(),
            committed: AtomicU64::new(last.0),
            active: AtomicUsize::new(0),
            sync_waiting: AtomicUsize::new(0),
            chain: Mutex::new(CommitChain::default()),
            chain_progress: Condvar::new(),
            poisoned: AtomicBool::new(false),
            counters,
        });
        let mut threads = Vec::new();
        let preparer = Arc::clone(&shared);
        threads.push(spawn("tierkv-wal-prepare", move || {
            preparer.guarded("segment preparer", || preparer.prepare_loop())
        })?);
        if shared.options.backend == Backend::File {
            let flusher = Arc::clone(&shared);
            threads.push(spawn("tierkv-wal-flush", move || {
                flusher.guarded("flusher", || flusher.flush_loop())
            })?);
        }
        Ok(Recovered {
            wal: Wal { shared, threads: Mutex::new(threads) },
            report: recovered.report,
        })
    }

    /// Reads the log in `dir` without changing anything: every complete record goes to
    /// `on_record` in LSN order, up to the first torn or invalid one, which the report's
    /// `stop` names (nothing after it is counted or removed). Files are opened read-only, so
    /// this works on a copy the caller cannot write and beside a process appending to the
    /// log (which it may then see only in part). A missing directory is an empty log.
    pub fn read_only(
        storage: &Storage,
        dir: impl AsRef<Path>,
        options: &WalOptions,
        mut on_record: impl FnMut(Record<'_>),
    ) -> Result<RecoveryReport, WalError> {
        options.validate()?;
        let recovered = recovery::recover(
            storage,
            dir.as_ref(),
            options,
            recovery::Mode::ReadOnly,
            &mut on_record,
        )?;
        Ok(recovered.report)
    }

    /// Appends a record and returns its LSN once `durability` holds for it.
    pub fn append(
        &self,
        kind: RecordType,
        payload: &[u8],
        durability: Durability,
    ) -> Result<Lsn, WalError> {
        self.append_written(kind, payload, durability, durability == Durability::Sync)
    }

    /// Appends a record the caller makes durable next with `sync_to`, once it has let go of
    /// whatever it should not hold across the sync: returns as a `Durability::None` append
    /// does, with the record written as a `Sync` one is (see the module header).
    pub fn append_for_sync(&self, kind: RecordType, payload: &[u8]) -> Result<Lsn, WalError> {
        self.append_written(kind, payload, Durability::None, true)
    }

    fn append_written(
        &self,
        kind: RecordType,
        payload: &[u8],
        durability: Durability,
        by_syscall: bool,
    ) -> Result<Lsn, WalError> {
        if payload.len() > MAX_PAYLOAD_BYTES {
            return Err(WalError::RecordTooLarge { len: payload.len(), max: MAX_PAYLOAD_BYTES });
        }
        let shared = &*self.shared;
        let size = format::record_bytes(payload.len());
        if shared.options.backend == Backend::Pmem {
            return self.append_counted(kind, payload, durability, size, false);
        }
        // Only group commit's gathering reads the count; the pmem path does not pay for it.
        shared.active.fetch_add(1, Ordering::Relaxed);
        let result = self.append_counted(kind, payload, durability, size, by_syscall);
        shared.active.fetch_sub(1, Ordering::Relaxed);
        result
    }

    fn append_counted(
        &self,
        kind: RecordType,
        payload: &[u8],
        durability: Durability,
        size: u64,
        by_syscall: bool,
    ) -> Result<Lsn, WalError> {
        let shared = &*self.shared;
        let (lsn, segment, offset) = shared.reserve(size)?;
        let written = ENCODE_BUFFER.with(|cell| {
            let mut buffer = cell.borrow_mut();
            format::encode_record(&mut buffer, lsn, kind, payload);
            debug_assert_eq!(buffer.len() as u64, size);
            // A `Sync` record is written with pwrite: through the mapping, its page, made
            // read-only by the last sync, would fault (see `File::write_at_syscall`).
            let result = match by_syscall {
                true => segment.file.write_at_syscall(&buffer, offset),
                false => segment.file.write_at(&buffer, offset),
            };
            if buffer.capacity() > KEPT_BUFFER_BYTES {
                *buffer = Vec::new();
            }
            result
        });
        Counters::add(&shared.counters.appends, 1);
        Counters::add(&shared.counters.append_bytes, size);
        match shared.options.backend {
            Backend::File => shared.finish_file(lsn, written.map_err(WalError::from), durability),
            Backend::Pmem => {
                shared.finish_pmem(lsn, &segment, offset, size, written.map_err(WalError::from))
            }
        }
    }

    /// Makes every record appended before this call durable.
    pub fn sync(&self) -> Result<(), WalError> {
        let shared = &*self.shared;
        match shared.options.backend {
            Backend::File => {
                let state = shared.lock();
                let target = Lsn(state.next_lsn.0 - 1);
                shared.wait_durable(state, target)
            }
            // Every pmem append is committed before it returns.
            Backend::Pmem => shared.check_open(&shared.lock()),
        }
    }

    /// Returns once every record up to `lsn` is durable, leading or joining a group-commit
    /// round (a record appended with `Durability::None` or `Buffered`, made durable later).
    pub fn sync_to(&self, lsn: Lsn) -> Result<(), WalError> {
        let shared = &*self.shared;
        match shared.options.backend {
            Backend::File => {
                if shared.durable_now.load(Ordering::Acquire) >= lsn.0 {
                    return Ok(());
                }
                let state = shared.lock();
                let target = lsn.min(Lsn(state.next_lsn.0 - 1));
                shared.wait_durable(state, target)
            }
            Backend::Pmem => shared.check_open(&shared.lock()),
        }
    }

    /// Deletes the segments whose records all have LSNs below `lsn` (for example, once a
    /// checkpoint has made them unneeded). The active segment, and the last segment holding a
    /// record, are never deleted. Returns how many segments were deleted. On the file
    /// backend, up to `KEPT_FREE` of them are renamed `.wal.free` instead, for the preparer
    /// to recycle rather than zero-fill a new file (`Segment::recycle`).
    pub fn truncate_below(&self, lsn: Lsn) -> Result<usize, WalError> {
        let shared = &*self.shared;
        let victims: Vec<LiveSegment> = {
            let mut state = shared.lock();
            shared.check_open(&state)?;
            let mut count = 0;
            while count + 1 < state.segments.len()
                && state.segments[count + 1].first_lsn.is_some_and(|first| first <= lsn)
            {
                count += 1;
            }
            let victims: Vec<_> = state.segments.drain(..count).collect();
            state.unsynced_sealed.retain(|(segment, _)| {
                !victims.iter().any(|victim| Arc::ptr_eq(&victim.segment, segment))
            });
            victims
        };
        for victim in &victims {
            let segment = &victim.segment;
            // CRASH: oldest first, each made durable before the next, so the segments left
            // always form the tail of the chain. A `.wal.free` name is no segment's: recovery
            // removes it as it would find a deleted file gone.
            if shared.options.backend == Backend::File {
                let free = shared.dir.join(format::free_file_name(segment.number));
                shared.storage.rename(&segment.path, &free)?;
                shared.storage.sync_dir(&shared.dir)?;
                let surplus = {
                    let mut state = shared.lock();
                    state.free.push(FreeFile {
                        path: free,
                        capacity: segment.capacity,
                        last_lsn: victim.last_lsn,
                    });
                    shared.work.notify_all();
                    // The smallest beyond `KEPT_FREE` goes: segments grow to the write rate,
                    // and a file smaller than the preparer asks for is never taken.
                    let smallest = (0..state.free.len()).min_by_key(|&at| state.free[at].capacity);
                    let over = state.free.len() > KEPT_FREE;
                    smallest.filter(|_| over).map(|at| state.free.remove(at))
                };
                if let Some(surplus) = surplus {
                    shared.storage.remove_file(&surplus.path)?;
                }
            } else {
                shared.storage.remove_file(&segment.path)?;
                shared.storage.sync_dir(&shared.dir)?;
            }
            Counters::add(&shared.counters.segments_removed, 1);
        }
        Ok(victims.len())
    }

    /// Syncs what was written and stops the background threads; later calls fail with
    /// `WalError::Closed`. A second close does nothing (it waits for a first one running).
    pub fn close(&self) -> Result<(), WalError> {
        // Held to the end, so that a second close returns once the log is closed.
        let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        if threads.is_empty() {
            return Ok(());
        }
        let poisoned = self.shared.lock().poison.is_some();
        let result = if poisoned { Ok(()) } else { self.sync() };
        {
            let mut state = self.shared.lock();
            state.closed = true;
            self.shared.work.notify_all();
            self.shared.notify_everyone();
        }
        for thread in threads.drain(..) {
            // A background thread that panicked has nothing left to clean up.
            let _ = thread.join();
        }
        result
    }

    /// Makes the next append take the LSN after `last`, on a log that holds no record (a
    /// new log beside data that already covers records up to `last`, such as a copy of a
    /// store). Until a record is appended the log is still empty on disk, and a reopen
    /// starts again from 1; append one before relying on it.
    pub fn start_after(&self, last: Lsn) -> Result<(), WalError> {
        let shared = &*self.shared;
        let mut state = shared.lock();
        shared.check_open(&state)?;
        let empty = state.next_lsn == Lsn::ZERO.next()
            && state.segments.iter().all(|live| live.first_lsn.is_none())
            && state.tail == RECORDS_START;
        if !empty {
            return Err(WalError::InvalidOptions(format!(
                "start_after({last}) on a log that holds records (the next LSN is {})",
                state.next_lsn
            )));
        }
        state.next_lsn = last.next();
        state.written = last;
        state.durable = last;
        state.buffered = last;
        state.round_target = last;
        shared.durable_now.store(last.0, Ordering::Release);
        shared.committed.store(last.0, Ordering::Release);
        assert!(state.completed.is_empty() && state.next_lsn > last);
        Ok(())
    }

    /// The LSN the next append will get.
    pub fn next_lsn(&self) -> Lsn {
        self.shared.lock().next_lsn
    }

    /// Every record up to this LSN is durable.
    pub fn durable_lsn(&self) -> Lsn {
        match self.shared.options.backend {
            Backend::File => self.shared.lock().durable,
            Backend::Pmem => Lsn(self.shared.committed.load(Ordering::Acquire)),
        }
    }

    /// The live segment files, oldest first.
    pub fn segment_paths(&self) -> Vec<PathBuf> {
        self.shared.lock().segments.iter().map(|live| live.segment.path.clone()).collect()
    }

    /// Bytes of the live segment files (each is allocated in full when prepared); the
    /// files kept for recycling (`.wal.free`, up to `KEPT_FREE`) are not counted.
    pub fn file_bytes(&self) -> u64 {
        self.shared.lock().segments.iter().map(|live| live.segment.capacity).sum()
    }

    /// The pmem mode in force (`None` on the file backend).
    pub fn pmem_mode(&self) -> Option<tierkv_io::PmemMode> {
        self.shared.lock().active().segment.file.pmem_mode()
    }

    /// I/O counters of the active segment (for checking which calls the commit path makes).
    pub fn active_io_stats(&self) -> tierkv_io::IoStatsSnapshot {
        self.shared.lock().active().segment.file.stats()
    }

    /// The counters.
    pub fn stats(&self) -> WalStats {
        self.shared.counters.snapshot()
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The options it was opened with.
    pub fn options(&self) -> &WalOptions {
        &self.shared.options
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        // Errors here have no one to go to; `close` reports them.
        let _ = self.close();
    }
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field("dir", &self.shared.dir)
            .field("backend", &self.shared.options.backend)
            .finish_non_exhaustive()
    }
}

fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, WalError> {
    thread::Builder::new()
        .name(name.into())
        .spawn(body)
        .map_err(|e| WalError::InvalidOptions(format!("cannot start the {name} thread: {e}")))
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the counters consistent (no multi-step update
        // panics midway), so the state stays usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn notify_everyone(&self) {
        self.progress.notify_all();
        self.written_cv.notify_all();
        self.end_round();
    }

    /// file: wakes every appender sleeping until a round ends. Called with the state lock held,
    /// after `durable` is updated.
    fn end_round(&self) {
        self.round_end.fetch_add(1, Ordering::Release);
        self.wake_round_sleepers();
    }

    fn wake_round_sleepers(&self) {
        if self.round_sleepers.load(Ordering::Relaxed) > 0 {
            tierkv_io::futex::wake_all(&self.round_end);
        }
    }

    fn wait<'a>(&'a self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        state.waiters += 1;
        let mut state = self.progress.wait(state).unwrap_or_else(PoisonError::into_inner);
        state.waiters -= 1;
        state
    }

    fn check_open(&self, state: &State) -> Result<(), WalError> {
        if let Some(cause) = &state.poison {
            return Err(WalError::Poisoned { dir: self.dir.clone(), cause: cause.clone() });
        }
        if state.closed {
            return Err(WalError::Closed { dir: self.dir.clone() });
        }
        Ok(())
    }

    fn poison(&self, state: &mut State, cause: &WalError) {
        self.poison_with(state, cause.to_string());
    }

    fn poison_with(&self, state: &mut State, cause: String) {
        if state.poison.is_none() {
            state.poison = Some(cause);
            self.poisoned.store(true, Ordering::Release);
        }
        self.notify_everyone();
    }

    /// Runs a background thread's loop; if it panics (a bug), the log is poisoned so that
    /// appenders get an error instead of waiting forever for what that thread would do.
    fn guarded(&self, name: &str, body: impl FnOnce()) {
        let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) else {
            return;
        };
        let message = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("no message");
        let mut state = self.lock();
        self.poison_with(&mut state, format!("the log's {name} thread panicked: {message}"));
    }

    /// Reserves `size` bytes for the next LSN, rotating to the prepared segment when the
    /// active one is full.
    fn reserve(&self, size: u64) -> Result<(Lsn, Arc<Segment>, u64), WalError> {
        let mut state = self.lock();
        let mut waited = false;
        loop {
            self.check_open(&state)?;
            if state.rotating {
                state = self.wait(state);
                continue;
            }
            let capacity = state.active().segment.capacity;
            if state.tail + size <= capacity {
                let lsn = state.next_lsn;
                state.next_lsn = lsn.next();
                let offset = state.tail;
                state.tail += size;
                let live = state.segments.last_mut().expect("an active segment");
                live.first_lsn.get_or_insert(lsn);
                live.last_lsn = Some(lsn);
                return Ok((lsn, Arc::clone(&live.segment), offset));
            }
            let needed = RECORDS_START + size;
            if let Some(mut prepared) = state.prepared.pop_front() {
                if prepared.capacity < needed {
                    // An oversized record: grow the prepared segment for it, outside the lock.
                    state.rotating = true;
                    drop(state);
                    let grown = grow(&prepared, needed);
                    state = self.lock();
                    state.rotating = false;
                    self.progress.notify_all();
                    match grown {
                        Ok(capacity) => prepared.capacity = capacity,
                        Err(error) => {
                            state.prepared.push_front(prepared);
                            return Err(error);
                        }
                    }
                }
                self.install(&mut state, prepared);
                continue;
            }
            if !waited {
                waited = true;
                Counters::add(&self.counters.rotation_waits, 1);
            }
            if !state.preparing {
                if let Some(error) = state.prepare_error.take() {
                    // Not poisoned: nothing was written. The next append that needs the
                    // segment asks for a new preparation.
                    return Err(error);
                }
            }
            state.want_capacity = state.want_capacity.max(needed);
            self.work.notify_all();
            state = self.wait(state);
        }
    }

    /// Makes `prepared` the active segment.
    fn install(&self, state: &mut State, prepared: Segment) {
        let old = state.active();
        // The one after this holds about what the old one took in the target time; one grown
        // for a record over the largest size says nothing of the rate.
        let sizing = self.options.sizing();
        // At most `GROWTH` times the segment installed now: the next is prepared (zeroed)
        // while this one fills, and zeroing four times its bytes takes less time than
        // appends take to fill it (a 512 KiB segment filled in milliseconds followed by a
        // 64 MiB one being zeroed made appends wait 50 ms).
        let next = match old.segment.capacity <= sizing.max_bytes {
            true => sizing.next(old.segment.capacity, state.active_since.elapsed()),
            false => sizing.min_bytes,
        };
        let next = next.min(prepared.capacity.saturating_mul(GROWTH)).max(sizing.min_bytes);
        if let Some(last) = old.last_lsn {
            if last > state.durable && self.options.backend == Backend::File {
                let segment = Arc::clone(&old.segment);
                state.unsynced_sealed.push((segment, last));
            }
        }
        state.segments.push(LiveSegment {
            segment: Arc::new(prepared),
            first_lsn: None,
            last_lsn: None,
            released: 0,
        });
        state.tail = RECORDS_START;
        state.active_since = Instant::now();
        state.want_capacity = state.want_capacity.max(next);
        Counters::add(&self.counters.rotations, 1);
        self.work.notify_all();
    }

    /// The preparer: keeps `PREPARED_AHEAD` segments ready to install, each the size last
    /// asked for (by a rotation, or an appender waiting), or else the size of the one
    /// before it.
    fn prepare_loop(&self) {
        let mut state = self.lock();
        loop {
            if state.closed {
                return;
            }
            let wanted = state.prepared.len() < PREPARED_AHEAD && state.prepare_error.is_none();
            if !wanted {
                state = self.work.wait(state).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            // Only this thread adds segments, and it numbers them from the last one handed out.
            let number = state.last_number + 1;
            assert!(state.prepared.iter().all(|segment| segment.number < number));
            assert!(state.active().segment.number < number);
            let asked = match (state.want_capacity, state.prepared.back()) {
                (0, Some(last)) => last.capacity,
                (asked, _) => asked,
            };
            let capacity = asked.next_multiple_of(4096).max(self.options.sizing().min_bytes);
            state.want_capacity = 0;
            state.preparing = true;
            // The most recently freed file at least as large, if there is one; smaller ones
            // go (sizes follow the write rate, so they are seldom wanted again).
            let (mut recycle, mut small) = (None, Vec::new());
            while let Some(free) = state.free.pop() {
                if free.capacity >= capacity {
                    recycle = Some(free);
                    break;
                }
                small.push(free.path);
            }
            // Every record a free file holds was reserved before now: below the next LSN.
            let stale_bound = state.next_lsn;
            assert!(recycle
                .as_ref()
                .and_then(|free| free.last_lsn)
                .is_none_or(|last| last < stale_bound));
            drop(state);
            for path in small {
                // Best effort: a file left behind is removed at the next open.
                let _ = self.storage.remove_file(&path);
            }
            let result = match &recycle {
                Some(free) => {
                    let recycled = Segment::recycle(
                        &self.storage,
                        &self.dir,
                        &self.options,
                        &free.path,
                        number,
                        stale_bound,
                    );
                    if recycled.is_ok() {
                        Counters::add(&self.counters.segments_recycled, 1);
                    }
                    recycled
                }
                None => Segment::prepare(&self.storage, &self.dir, &self.options, number, capacity),
            };
            state = self.lock();
            state.preparing = false;
            match result {
                Ok(segment) => {
                    Counters::add(&self.counters.segments_prepared, 1);
                    assert_eq!(number, state.last_number + 1, "only the preparer numbers segments");
                    assert!(state.prepared.back().is_none_or(|last| last.number < number));
                    state.last_number = number;
                    state.prepared.push_back(segment);
                }
                Err(error) => state.prepare_error = Some(error),
            }
            self.progress.notify_all();
        }
    }
}

/// Grows a prepared segment to hold `needed` bytes, durably; returns the new capacity.
fn grow(segment: &Segment, needed: u64) -> Result<u64, WalError> {
    let capacity = needed.next_multiple_of(4096);
    segment.file.set_len(capacity)?;
    segment.file.sync_all()?;
    Ok(capacity)
}
