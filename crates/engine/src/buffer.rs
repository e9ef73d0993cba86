//! The buffer pool: the tree's pages in frames addressed by page id (`tierkv_io::frames`),
//! read in place and optimistically, loaded on a miss, evicted by a clock.
//!
//! **Reads.** [`BufferPool::read`] runs a closure on a page's frame (a slotted page,
//! `page::slotted`) between an optimistic start and a validation; a failed validation runs
//! it again. A hit takes no lock and writes nothing shared: not the page's word, not a
//! counter (hits are the lookups no miss counted: `Stats::misses` lives under the clock's
//! lock, lookups on the reading thread's own stripe). A miss loads the page: room first (the
//! clock evicts while the frames would pass the budget), then the block through the
//! [`PageSource`] into the frame, checked in place (`slotted::check`) before it turns
//! resident.
//!
//! **Clock.** Every resident page has a place on the clock's ring. A loaded page starts
//! *marked* (cold): the first read after its load does not count as a use, so pages a scan
//! reads once leave first. A read of a marked page clears the mark (in the frame's word, no
//! lock). The hand marks unmarked pages and evicts marked ones, handing each evicted page's
//! image to the source (`PageSource::evicted`: the tier below) before its memory goes back
//! to the kernel.
//!
//! **Memory.** The budget counts each resident frame at its stride, plus the ring, plus the
//! frames' words up to the highest page id used, plus `reserved` bytes (what the engine
//! holds outside the frames that grows with the pages: the checkpoint's dirty pages, the
//! block store's map); `install` and `load` evict
//! first so that the sum stays under it (when every page is locked, it passes the budget
//! and counts that in `Stats::over_budget`). A discarded page's frame keeps its memory,
//! counted, for the next page given its id (`Stats::kept`); those frames are given back
//! first when room is needed.
//!
//! **Huge pages.** While a store fits in half the budget the pool was made with (the least
//! it gets), its pages (ids are given out lowest first) sit on 2 MiB huge pages
//! (`Frames::advise_huge`): one TLB entry covers 2 MiB of frames, where a read of a page
//! otherwise misses the TLB on its frame. A huge page counts
//! whole from the first frame filled on it (`Stats::huge_pages`), and its frames never give
//! memory back: they do not leave for room and a discard keeps their memory without counting
//! it again. The range grows over whole huge pages up to each page loaded or installed, and
//! closes for good once a page lies past it or room had to be made by evicting, so nothing
//! in a part it grows over was ever touched.
//!
//! Must never: let a reader see a frame whose page failed its check; evict a page without
//! its exclusive latch; change a resident page's bytes except through `install` (a page id
//! is given a new image only while no tree version a reader holds can reach it).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tierkv_io::frames::{Exclusive, FrameError, FrameRead, FrameState, Frames, HUGE_BYTES};

use crate::page::slotted::{self, Slotted};
use crate::page::PageError;
use crate::striped::Striped;

mod dirty;

pub use dirty::DirtyMap;

/// Where pages come from and go to below the frames (the tier, then the block store). Each
/// call is made while the caller holds page `pid`'s frame exclusively (loading it, evicting
/// it, installing it, dropping it), or, for `discarded` of a page not resident, when no
/// reader can reach the page, so for one page they never overlap.
pub trait PageSource: Send + Sync {
    /// Why a read failed.
    type Error;
    /// Page `pid`'s image (exactly the page size).
    fn read_page(&self, pid: u64) -> Result<Vec<u8>, Self::Error>;
    /// A clean page leaves its frame, as `image`.
    fn evicted(&self, pid: u64, image: &[u8]);
    /// Page `pid` has a new image, `image` (the writer's, once durable): whatever the
    /// source kept of an older one is void.
    fn installed(&self, pid: u64, image: &[u8]);
    /// Page `pid` is gone (its block deleted) or changed in place: whatever the source kept
    /// of it is void.
    fn discarded(&self, pid: u64);
}

/// Why a page could not be read through the pool.
#[derive(Debug, thiserror::Error)]
pub enum BufferError<E> {
    /// The source failed.
    #[error("{0}")]
    Source(E),
    /// The page's bytes are not a valid page.
    #[error("page {pid} is corrupt: {source}")]
    Corrupt {
        /// The page.
        pid: u64,
        /// What is wrong.
        source: PageError,
    },
    /// A page id past the frames' reservation.
    #[error("page id {pid} is past the {pages} pages the frames can address")]
    Beyond {
        /// The page id.
        pid: u64,
        /// The reservation's pages.
        pages: u64,
    },
    /// A checked page that a validated read could not read: a bug, reported, not hidden.
    #[error("page {pid} read inconsistently: a validated read of a checked page failed")]
    Unreadable {
        /// The page.
        pid: u64,
    },
}

/// The pool's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Reads run (each closure call that validated counts once).
    pub lookups: u64,
    /// Loads from the source.
    pub misses: u64,
    /// Pages evicted by the clock.
    pub evictions: u64,
    /// Pages installed by the writer.
    pub installs: u64,
    /// Reads run again after a failed validation.
    pub restarts: u64,
    /// Times room was needed and no page could leave.
    pub over_budget: u64,
    /// Pages resident now.
    pub resident: u64,
    /// Frames of discarded pages that keep their memory for the page id's next page.
    pub kept: u64,
    /// Huge pages (2 MiB) the frames of the lowest page ids fill.
    pub huge_pages: u64,
}

/// The clock's ring and what it knows of each resident page.
#[derive(Default)]
struct Clock {
    ring: Vec<u64>,
    /// Page id → place on the ring.
    places: HashMap<u64, usize>,
    hand: usize,
    /// Discarded pages whose frames keep their memory (`Exclusive::evict_keeping`): their
    /// ids are given to new pages soon, which then fill them without a page fault.
    kept: BTreeSet<u64>,
    /// The highest page id loaded or installed: the frames' words are touched up to it.
    highest: u64,
    /// Page ids below this have huge pages (`Frames::advise_huge`): their frames never give
    /// memory back, and their memory counts by huge page (`huge_touched`), not by frame.
    huge_pids: u64,
    /// Resident pages (on the ring) with ids below `huge_pids`.
    huge_resident: usize,
    /// Huge pages under `0..huge_pids` that a frame was filled on (each counted whole).
    huge_touched: BTreeSet<u64>,
    /// The huge range grows no more: a frame past it was filled, or room was made by
    /// evicting.
    huge_closed: bool,
    misses: u64,
    evictions: u64,
    installs: u64,
    over_budget: u64,
}

impl Clock {
    fn add(&mut self, pid: u64, per_huge: u64) {
        self.highest = self.highest.max(pid);
        // A kept frame filled again is counted on the ring from here on.
        self.kept.remove(&pid);
        if pid < self.huge_pids {
            self.huge_touched.insert(pid / per_huge);
        } else {
            self.huge_closed = true;
        }
        if self.places.contains_key(&pid) {
            return;
        }
        self.huge_resident += usize::from(pid < self.huge_pids);
        self.places.insert(pid, self.ring.len());
        self.ring.push(pid);
        debug_assert_eq!(self.places.len(), self.ring.len());
    }

    /// Frames off huge pages that hold memory: the resident pages' and the kept ones.
    fn frames(&self) -> usize {
        self.ring.len() - self.huge_resident + self.kept.len()
    }

    fn remove(&mut self, pid: u64) -> bool {
        let Some(at) = self.places.remove(&pid) else { return false };
        self.huge_resident -= usize::from(pid < self.huge_pids);
        let last = self.ring.pop().expect("a page in the map is on the ring");
        if last != pid {
            self.ring[at] = last;
            *self.places.get_mut(&last).expect("every ring page is in the map") = at;
        }
        debug_assert_eq!(self.places.len(), self.ring.len());
        true
    }
}

/// Bytes the clock keeps per resident page (ring slot, map entry), roughly.
const CLOCK_ENTRY_BYTES: usize = 48;

/// The frames of one store, their clock and their budget.
pub struct BufferPool<S: PageSource> {
    frames: Frames,
    page_bytes: usize,
    /// Bytes one resident page costs: its frame's stride (at least the kernel's page).
    stride: usize,
    /// Frames on one huge page.
    per_huge: u64,
    /// The most bytes of frames the huge range may cover: half the budget the pool was
    /// made with (the least it gets: the memtables take the rest of `cache_size` at most),
    /// so the pages that never leave for room leave half of it to the others.
    huge_limit: usize,
    budget: AtomicUsize,
    reserved: AtomicUsize,
    clock: Mutex<Clock>,
    lookups: Striped,
    restarts: Striped,
    /// Pages changed in their frames and not yet taken for the block store: the clock
    /// leaves them where they are.
    dirty: DirtyMap,
    /// Held alone by a structure change of the tree in the frames (a split), shared by
    /// whoever must not see one: a batch of changes in place, write-back's copies, and a
    /// reader that kept meeting splits.
    structure: RwLock<()>,
    /// Odd while a structure change runs; moved by two for each: a reader that finds it
    /// the same, and even, before and after its descent saw no split (`StructureChange`).
    structure_seq: AtomicU64,
    /// `populate_ahead` is done with the frames of page ids below this: faulted in ahead of
    /// use, or left to fault at their first use (where the huge range could not grow over
    /// them, or past the reservation); the lock is held by the one writer doing it (the
    /// populator thread takes none: `By::Thread`).
    populated: AtomicU64,
    populating: Mutex<()>,
    source: S,
}

/// A structure change in progress (`BufferPool::change_structure`): the structure lock held
/// alone, the sequence odd until it drops.
pub struct StructureChange<'a> {
    seq: &'a AtomicU64,
    _alone: RwLockWriteGuard<'a, ()>,
}

impl Drop for StructureChange<'_> {
    fn drop(&mut self) {
        // Even again, after every change of the pages (Release).
        let before = self.seq.fetch_add(1, Ordering::Release);
        debug_assert_eq!(before % 2, 1);
    }
}

impl<S: PageSource> std::fmt::Debug for BufferPool<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferPool").field("frames", &self.frames).finish()
    }
}

/// The most restarts of one read before it is reported as a bug: a writer changes a
/// reachable page only to install it, so more than a handful means something is wrong.
const MAX_RESTARTS: u32 = 1 << 20;

/// Frames left faulted in past the next page id below which a writer faults them in
/// itself (`BufferPool::populate_due`): more than a split of a leaf and of every level
/// above it takes.
const URGENT_LEAD: u64 = 16;

/// Who calls `BufferPool::populate_ahead`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// A writer, before it latches anything: one at a time.
    Writer,
    /// The store's populator thread (there is one), beside the writers.
    Thread,
}

/// What `BufferPool::populate_ahead` has to do (`BufferPool::populate_due`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ahead {
    /// Nothing.
    Enough,
    /// Work a thread of its own can do while the writers go on.
    Soon,
    /// Work for the writer, before it latches anything.
    Now,
}

/// Cache lines `prefetch_head` asks for: a page's 32-byte header, its prefix and the first
/// slots (about 24 of 8 bytes), enough for a leaf of 1 KB records at 16 KiB.
const HEAD_LINES: usize = 4;

impl<S: PageSource> BufferPool<S> {
    /// A pool of `pages` page ids of `page_bytes` over `source`, holding at most
    /// `budget_bytes` of frames.
    pub fn new(
        pages: u64,
        page_bytes: usize,
        budget_bytes: usize,
        source: S,
    ) -> tierkv_io::Result<Self> {
        let stride = page_bytes.max(tierkv_io::frames::MIN_FRAME_BYTES);
        let frames = Frames::reserve(pages, stride)?;
        Ok(BufferPool {
            frames,
            page_bytes,
            stride,
            per_huge: (HUGE_BYTES / stride) as u64,
            huge_limit: budget_bytes / 2,
            budget: AtomicUsize::new(budget_bytes),
            reserved: AtomicUsize::new(0),
            clock: Mutex::new(Clock::default()),
            lookups: Striped::default(),
            restarts: Striped::default(),
            dirty: DirtyMap::new(pages),
            structure: RwLock::new(()),
            structure_seq: AtomicU64::new(0),
            populated: AtomicU64::new(0),
            populating: Mutex::new(()),
            source,
        })
    }

    /// The source below.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The page size.
    pub fn page_bytes(&self) -> usize {
        self.page_bytes
    }

    fn clock(&self) -> MutexGuard<'_, Clock> {
        // The clock's state is consistent after every step of its methods (none panics
        // half-way), so a poisoned lock still holds a good clock.
        self.clock.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn beyond(&self, error: FrameError) -> BufferError<S::Error> {
        match error {
            FrameError::Beyond { pid, pages } => BufferError::Beyond { pid, pages },
            FrameError::Evicted => unreachable!("an eviction is not an error of the caller's"),
        }
    }

    /// Runs `read` on page `pid` as one consistent version of it, loading the page first if
    /// it is not resident. `read` returns `None` for a read it could not make sense of
    /// (which, after validation, means the page is damaged or this code is wrong).
    pub fn read<R>(
        &self,
        pid: u64,
        read: impl FnMut(&Slotted<'_, FrameRead<'_>>) -> Option<R>,
    ) -> Result<R, BufferError<S::Error>> {
        self.read_versioned(pid, read).map(|(result, _)| result)
    }

    /// `read`, returning with its result the page's frame version it read (a later read at
    /// the same version read the same page: a cursor that goes on in a leaf checks it).
    pub fn read_versioned<R>(
        &self,
        pid: u64,
        mut read: impl FnMut(&Slotted<'_, FrameRead<'_>>) -> Option<R>,
    ) -> Result<(R, u64), BufferError<S::Error>> {
        let mut cold = false;
        for _ in 0..MAX_RESTARTS {
            let started =
                if cold { self.frames.optimistic_cold(pid) } else { self.frames.optimistic(pid) };
            let guard = match started {
                Ok(guard) => guard,
                Err(FrameError::Evicted) => {
                    self.load(pid)?;
                    cold = true;
                    continue;
                }
                Err(error) => return Err(self.beyond(error)),
            };
            let view = guard.read();
            let result = read(&Slotted::new(&view));
            if guard.validate().is_err() {
                self.restarts.add(1);
                continue;
            }
            self.lookups.add(1);
            return result
                .map(|result| (result, guard.version()))
                .ok_or(BufferError::Unreadable { pid });
        }
        Err(BufferError::Unreadable { pid })
    }

    /// The structure sequence: even when no structure change runs. A descent that reads it
    /// even before and the same after saw the tree's structure as it was at one moment.
    #[inline]
    pub fn structure_seq(&self) -> u64 {
        self.structure_seq.load(Ordering::Acquire)
    }

    /// Holds off structure changes (shared with others that do).
    pub fn hold_structure(&self) -> RwLockReadGuard<'_, ()> {
        self.structure.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a structure change: waits for the holders to leave, then makes the sequence
    /// odd until the change drops.
    pub fn change_structure(&self) -> StructureChange<'_> {
        let alone = self.structure.write().unwrap_or_else(PoisonError::into_inner);
        let before = self.structure_seq.fetch_add(1, Ordering::Relaxed);
        assert_eq!(before % 2, 0, "a structure change inside another");
        // Odd before any page changes (readers that see a change see the odd sequence).
        fence(Ordering::Release);
        StructureChange { seq: &self.structure_seq, _alone: alone }
    }

    /// What `populate_ahead(next)` would do now, read from one word: nothing (`Enough`: a
    /// huge page's worth past `next` is done), work a thread of its own can do (`Soon`), or
    /// work a writer should do before it latches anything (`Now`: fewer than
    /// `URGENT_LEAD` frames are left past `next`, so a split would fault its own).
    #[inline]
    pub fn populate_due(&self, next: u64) -> Ahead {
        let populated = self.populated.load(Ordering::Relaxed);
        if populated >= next.saturating_add(self.per_huge) {
            Ahead::Enough
        } else if populated >= next.saturating_add(URGENT_LEAD) {
            Ahead::Soon
        } else {
            Ahead::Now
        }
    }

    /// Faults in the frames of the fresh page ids from `next` (the next id never given out)
    /// ahead of use, a huge page's worth at a time, so that the writer that installs a new
    /// page (a split, under the structure lock that holds every other writer) takes no page
    /// fault and no zeroing of a huge page. Done by the store's thread for it while the
    /// writers go on (`Ahead::Soon`), or by a writer before it latches anything
    /// (`Ahead::Now`; one writer at a time, the others go on). The frames faulted in and
    /// not yet filled are not counted in the budget: at most two huge pages' worth, past the
    /// pages in use.
    pub fn populate_ahead(&self, next: u64, by: By) {
        if self.populated.load(Ordering::Relaxed) >= next.saturating_add(self.per_huge) {
            return;
        }
        // Writers one at a time (the others go on); the store's one populator thread
        // beside them, without the lock: at the lowest priority it may be descheduled
        // anywhere, and must never keep a writer from faulting in frames itself (a page
        // both fault in is filled once; the other's zeroing is wasted).
        let _alone = match by {
            By::Writer => match self.populating.try_lock() {
                Ok(alone) => Some(alone),
                Err(_) => return,
            },
            By::Thread => None,
        };
        let from = self.populated.load(Ordering::Relaxed).max(next);
        let to = next.saturating_add(2 * self.per_huge).next_multiple_of(self.per_huge);
        if from >= self.frames.pages() {
            // Past the reservation: no frame is left to fault in, now or later.
            self.populated.fetch_max(u64::MAX, Ordering::Relaxed);
            return;
        }
        if from >= to {
            return;
        }
        {
            let mut clock = self.clock();
            if !clock.huge_closed && to > clock.huge_pids {
                // On huge pages where the huge range may grow over them (advised before the
                // first touch, as for a page installed there). Where it may not, it is left
                // open: it closes only once a page lands past it, and the frames up to `to`
                // fault at their first use, as without this call (marked done, so that the
                // writers stop asking until they pass them).
                if to.saturating_mul(self.stride as u64) > self.huge_limit as u64 {
                    self.populated.fetch_max(to, Ordering::Relaxed);
                    return;
                }
                self.grow_huge(&mut clock, to - 1);
            }
        }
        // Refused (an old kernel), the frames fault at their first use as before.
        let _ = self.frames.populate(from, to);
        // Never lowered: a writer and the thread may end in either order.
        self.populated.fetch_max(to, Ordering::Relaxed);
        debug_assert!(self.populated.load(Ordering::Relaxed) > next);
    }

    /// Hints that page `pid` is about to be read (`Frames::prefetch`).
    #[inline]
    pub fn prefetch(&self, pid: u64) {
        self.frames.prefetch(pid);
    }

    /// Hints that a cursor is about to step onto page `pid`: its word, header and first
    /// slots (`HEAD_LINES` cache lines), so that the misses of the next leaf overlap the
    /// copy of this one.
    #[inline]
    pub fn prefetch_head(&self, pid: u64) {
        self.frames.prefetch_head(pid, HEAD_LINES);
    }

    /// Loads page `pid` from the source into its frame (unless another thread is loading it
    /// or already did).
    fn load(&self, pid: u64) -> Result<(), BufferError<S::Error>> {
        self.make_room(Some(pid));
        let Some(mut loading) = self.frames.try_load(pid).map_err(|e| self.beyond(e))? else {
            // Resident, or being loaded by another thread: the caller reads again (and waits
            // for that load in `optimistic` while the loader holds the frame).
            return Ok(());
        };
        let image = self.source.read_page(pid).map_err(BufferError::Source)?;
        // Checked before it is in the frame: a frame only ever holds a valid page.
        slotted::check(&image, self.page_bytes)
            .map_err(|source| BufferError::Corrupt { pid, source })?;
        loading.write().put(0, &image);
        debug_assert_eq!(&loading.bytes()[..self.page_bytes], &image[..]);
        loading.finish_cold();
        let mut clock = self.clock();
        clock.misses += 1;
        clock.add(pid, self.per_huge);
        Ok(())
    }

    /// Puts `image` (a checked page) in page `pid`'s frame, resident and clean: the
    /// writer's new pages, once the group that holds them is durable. No reader may reach
    /// `pid` through a tree it holds while this runs with another image.
    pub fn install(&self, pid: u64, image: &[u8]) -> Result<(), BufferError<S::Error>> {
        drop(self.install_held(pid, image)?);
        Ok(())
    }

    /// `install`, returning the frame still latched exclusively (so that no eviction can
    /// come between the image and what the caller does next).
    fn install_held(&self, pid: u64, image: &[u8]) -> Result<Exclusive<'_>, BufferError<S::Error>> {
        assert_eq!(image.len(), self.page_bytes, "an image of the wrong size");
        debug_assert!(slotted::check(image, self.page_bytes).is_ok(), "installing a bad page");
        let held = loop {
            match self.frames.lock_exclusive(pid) {
                Ok(mut held) => {
                    self.source.installed(pid, image);
                    held.write().put(0, image);
                    break held;
                }
                Err(FrameError::Evicted) => {
                    // A kept frame (the id's last page was discarded) is room already.
                    self.make_room(Some(pid));
                    if let Some(mut loading) =
                        self.frames.try_load(pid).map_err(|e| self.beyond(e))?
                    {
                        self.source.installed(pid, image);
                        loading.write().put(0, image);
                        break loading.finish();
                    }
                }
                Err(error) => return Err(self.beyond(error)),
            }
        };
        // The clock's lock under a frame latch is safe: the clock only ever tries a frame's
        // latch (`try_lock_marked`), never waits for one.
        let mut clock = self.clock();
        clock.installs += 1;
        clock.add(pid, self.per_huge);
        drop(clock);
        debug_assert_eq!(&held.bytes()[..self.page_bytes], image);
        Ok(held)
    }

    /// Drops page `pid` from the frames and tells the source it is gone (`discarded`): the
    /// page is deleted, not demoted. Its frame keeps its memory, counted, for the next page
    /// given the id (page ids are given out again, lowest first), until the budget needs
    /// it: a checkpoint that rewrites pages fills frames it had, with no page fault, no
    /// zeroing and no TLB shootdown per page.
    pub fn discard(&self, pid: u64) {
        // A page that goes has nothing left to write.
        self.dirty.clear(pid);
        if !self.clock().remove(pid) {
            // Not resident; what the source keeps of it goes all the same. (Without the
            // frame's lock: a page is discarded only once no reader can reach it, so no load
            // of it races this.)
            self.source.discarded(pid);
            return;
        }
        if let Ok(held) = self.frames.lock_exclusive(pid) {
            self.source.discarded(pid);
            held.evict_keeping();
            let mut clock = self.clock();
            // On a huge page the memory is counted with the huge page's, and stays.
            if pid >= clock.huge_pids {
                clock.kept.insert(pid);
            }
        }
        debug_assert_eq!(self.frames.state(pid), Ok(FrameState::Evicted));
    }

    /// Sets the budget (bytes of frames, reserved bytes and the clock's records).
    pub fn set_budget(&self, budget_bytes: usize) {
        self.budget.store(budget_bytes, Ordering::Relaxed);
        self.make_room(None);
    }

    /// Counts `bytes` more held outside the frames against the budget (a writer's pages
    /// not yet written), evicting to make room for them.
    pub fn reserve(&self, bytes: usize) {
        self.reserved.fetch_add(bytes, Ordering::Relaxed);
        self.make_room(None);
    }

    /// Counts `bytes` less held outside the frames (given back by `reserve`'s caller).
    pub fn unreserve(&self, bytes: usize) {
        let before = self.reserved.fetch_sub(bytes, Ordering::Relaxed);
        debug_assert!(before >= bytes, "more bytes given back than were reserved");
    }

    /// The budget, bytes.
    pub fn budget(&self) -> usize {
        self.budget.load(Ordering::Relaxed)
    }

    /// Bytes of the budget the resident pages may take: what the frames' words, the dirty
    /// map and the reserved bytes leave of it (the clock's records are counted with the
    /// pages they keep). A writer keeps its dirty pages, which cannot leave, well under
    /// this, so that the clean pages it reads have room.
    pub fn room_for_pages(&self) -> usize {
        let clock = self.clock();
        let outside = self.used(&clock, 0)
            - clock.frames() * self.stride
            - clock.huge_touched.len() * HUGE_BYTES
            - (clock.frames() + clock.huge_resident) * CLOCK_ENTRY_BYTES;
        self.budget().saturating_sub(outside)
    }

    /// Bytes counted by `clock`, plus `more`: the frames holding memory off huge pages
    /// (resident or kept) and the huge pages touched, the resident pages' clock records, the
    /// frames' words up to its highest page id (in whole kernel pages), the dirty map, and the
    /// reserved bytes.
    fn used(&self, clock: &Clock, more: usize) -> usize {
        let words = (clock.highest as usize + 1)
            .saturating_mul(size_of::<u64>())
            .next_multiple_of(tierkv_io::frames::MIN_FRAME_BYTES);
        clock.frames() * self.stride
            + clock.huge_touched.len() * HUGE_BYTES
            + (clock.frames() + clock.huge_resident) * CLOCK_ENTRY_BYTES
            + words
            + self.dirty.bytes()
            + self.reserved.load(Ordering::Relaxed)
            + more
    }

    /// Bytes the pool counts now.
    pub fn used_bytes(&self) -> usize {
        let clock = self.clock();
        self.used(&clock, 0)
    }

    /// Bytes a load or install of page `pid` adds to what `clock` counts.
    fn cost(&self, clock: &Clock, pid: u64) -> usize {
        if pid < clock.huge_pids {
            let touched = clock.huge_touched.contains(&(pid / self.per_huge));
            CLOCK_ENTRY_BYTES + if touched { 0 } else { HUGE_BYTES }
        } else if clock.kept.contains(&pid) {
            0
        } else {
            self.stride + CLOCK_ENTRY_BYTES
        }
    }

    /// Puts page `pid` on huge pages when it can: the huge range grows over whole huge pages
    /// up to `pid`'s while no frame past the range was ever filled and no room was ever made
    /// by evicting (so nothing in the new part was touched), and while the range stays
    /// within `huge_limit`. Page ids are given out lowest first, so a store that fits in
    /// memory has its pages there; once a page lies past it, the range is closed for good.
    fn grow_huge(&self, clock: &mut Clock, pid: u64) {
        if clock.huge_closed || pid < clock.huge_pids {
            return;
        }
        let end = (pid / self.per_huge + 1).saturating_mul(self.per_huge);
        let fits = end.saturating_mul(self.stride as u64) <= self.huge_limit as u64;
        if fits && end <= self.frames.pages() && self.frames.advise_huge(end).is_ok() {
            debug_assert!(clock.highest < clock.huge_pids || clock.ring.is_empty());
            clock.huge_pids = end;
        } else {
            clock.huge_closed = true;
        }
    }

    /// Evicts until page `pid` fits the budget too (`None`: until what is counted fits; or
    /// until nothing can leave): kept frames go first, highest ids first (the ids given out
    /// last), then the clock's pages. Pages on huge pages never leave for room (their memory
    /// stays with the huge page's).
    fn make_room(&self, pid: Option<u64>) {
        let budget = self.budget.load(Ordering::Relaxed);
        let mut clock = self.clock();
        if let Some(pid) = pid {
            self.grow_huge(&mut clock, pid);
        }
        let more = pid.map_or(0, |pid| self.cost(&clock, pid));
        while self.used(&clock, more) > budget {
            let Some(pid) = clock.kept.pop_last() else { break };
            clock.huge_closed = true;
            // Not released: a load claimed it (a garbage id read optimistically), and counts
            // it on the ring once filled.
            let _ = self.frames.release_kept(pid);
        }
        // Two passes over the ring at most: the first marks, the second evicts.
        let mut steps = 2 * clock.ring.len() + 1;
        while self.used(&clock, more) > budget {
            if clock.ring.is_empty() || steps == 0 {
                clock.over_budget += 1;
                return;
            }
            steps -= 1;
            let at = clock.hand % clock.ring.len();
            let pid = clock.ring[at];
            clock.hand = at + 1;
            if pid < clock.huge_pids {
                continue;
            }
            clock.huge_closed = true;
            if self.dirty.is_set(pid) {
                // Not written yet: it stays until write-back takes it.
                continue;
            }
            match self.frames.state(pid) {
                Ok(FrameState::Marked) => {
                    if let Some(victim) = self.frames.try_lock_marked(pid) {
                        if self.dirty.is_set(pid) {
                            // Changed since the check above.
                            continue;
                        }
                        clock.remove(pid);
                        self.source.evicted(pid, &victim.bytes()[..self.page_bytes]);
                        victim.evict();
                        clock.evictions += 1;
                        // The last page moved into this place: look at it next.
                        clock.hand = at;
                    }
                }
                Ok(FrameState::Unlocked) => {
                    let _ = self.frames.mark(pid);
                }
                _ => {}
            }
        }
    }

    /// Latches page `pid` exclusively, loading it first when it is not resident: a writer
    /// changes it in place, then marks it dirty (`mark_dirty`) before the latch drops.
    pub fn exclusive(&self, pid: u64) -> Result<Exclusive<'_>, BufferError<S::Error>> {
        for _ in 0..MAX_RESTARTS {
            match self.frames.lock_exclusive(pid) {
                Ok(held) => return Ok(held),
                Err(FrameError::Evicted) => self.load(pid)?,
                Err(error) => return Err(self.beyond(error)),
            }
        }
        Err(BufferError::Unreadable { pid })
    }

    /// Puts a new page's `image` (checked) in page `pid`'s frame, dirty, and returns it
    /// latched exclusively: a split's new page, not yet reachable by readers.
    pub fn create(&self, pid: u64, image: &[u8]) -> Result<Exclusive<'_>, BufferError<S::Error>> {
        assert_eq!(image.len(), self.page_bytes, "an image of the wrong size");
        debug_assert!(slotted::check(image, self.page_bytes).is_ok(), "creating a bad page");
        // Latched from the image on: a clean page between the two could be evicted, and
        // reloaded from whatever block the id last had.
        let held = self.install_held(pid, image)?;
        // A dirty page's image lives only in its frame until it is written back.
        self.dirty.set(pid);
        self.source.discarded(pid);
        assert_eq!(&held.bytes()[..self.page_bytes], image);
        Ok(held)
    }

    /// Marks page `pid` dirty; its caller holds it exclusively and has changed it. What the
    /// source below kept of the page (the tier's image) is void from its first change on,
    /// until an eviction after its write-back offers the new one.
    pub fn mark_dirty(&self, pid: u64) {
        if self.dirty.set(pid) {
            self.source.discarded(pid);
        }
    }

    /// How many pages are dirty.
    pub fn dirty_count(&self) -> usize {
        self.dirty.count()
    }

    /// The dirty pages, ascending.
    pub fn dirty_pages(&self) -> Vec<u64> {
        self.dirty.pages()
    }

    /// Copies dirty page `pid`'s image into `out`, under its shared latch; returns the
    /// frame's version it copied, or `None` (nothing copied) when the page is clean. The
    /// page stays dirty, and so resident, until `clean_if_unchanged` says otherwise once
    /// the copy is durable.
    pub fn copy_dirty(
        &self,
        pid: u64,
        out: &mut Vec<u8>,
    ) -> Result<Option<u64>, BufferError<S::Error>> {
        if !self.dirty.is_set(pid) {
            return Ok(None);
        }
        // A dirty page is never evicted, so it is resident.
        let shared = self.frames.lock_shared(pid).map_err(|e| self.beyond(e))?;
        let version = self.frames.version(pid).map_err(|e| self.beyond(e))?;
        out.clear();
        out.extend_from_slice(&shared.bytes()[..self.page_bytes]);
        debug_assert!(slotted::check(out, self.page_bytes).is_ok(), "a dirty page is not valid");
        assert!(self.dirty.is_set(pid), "a page turned clean while its copy was taken");
        Ok(Some(version))
    }

    /// Marks page `pid` clean if no writer changed it since `copy_dirty` copied it at
    /// `version`, that copy now durable (checked and cleared under its shared latch, so no
    /// change slips between); whether it did. The source hears of the image, the frame's
    /// bytes as copied (`PageSource::installed`: the tier may keep it), under the same latch.
    pub fn clean_if_unchanged(&self, pid: u64, version: u64) -> bool {
        let Ok(shared) = self.frames.lock_shared(pid) else { return false };
        if self.frames.version(pid) != Ok(version) {
            return false;
        }
        let cleaned = self.dirty.clear(pid);
        if cleaned {
            self.source.installed(pid, &shared.bytes()[..self.page_bytes]);
        }
        debug_assert!(!self.dirty.is_set(pid));
        cleaned
    }

    /// The counters now.
    pub fn stats(&self) -> Stats {
        let clock = self.clock();
        Stats {
            lookups: self.lookups.get(),
            restarts: self.restarts.get(),
            misses: clock.misses,
            evictions: clock.evictions,
            installs: clock.installs,
            over_budget: clock.over_budget,
            resident: clock.ring.len() as u64,
            kept: clock.kept.len() as u64,
            huge_pages: clock.huge_touched.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests;
