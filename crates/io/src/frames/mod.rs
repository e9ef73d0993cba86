//! Frames: the engine's page memory, one frame per page id in one virtual reservation, each
//! with a state-and-version word (vmcache, Leis et al., SIGMOD 2023).
//!
//! `Frames::reserve(pages, page_bytes)` maps `pages × page_bytes` of address space, aligned
//! to a huge page, with `MAP_NORESERVE` (no memory until a frame is written) and
//! `MADV_NOHUGEPAGE` (a touched frame costs its own pages, never a 2 MiB huge page), and a
//! second reservation of one 8-byte word per page (`word.rs`). [`Frames::advise_huge`] puts
//! the frames of the lowest page ids on huge pages instead; those frames then keep their
//! memory when evicted, so a huge page is never split. Page id `pid`'s frame is at `base + pid × page_bytes`: finding a page
//! is arithmetic, with no table and no lock.
//!
//! Access, all through guards:
//! - [`Optimistic`]: read a resident frame without writing anything shared, then
//!   [`Optimistic::validate`]; a failed validation means "start again" ([`Restart`]).
//! - [`Shared`]: read a frame that nobody may change meanwhile (to write it to disk).
//! - [`Exclusive`]: change a frame; its release moves the version on. [`Exclusive::evict`]
//!   gives the frame's memory back to the kernel (`MADV_DONTNEED`) and leaves it evicted;
//!   [`Exclusive::evict_keeping`] leaves it evicted with its memory, for a page id that is
//!   about to be given out again ([`Frames::release_kept`] gives it back later).
//! - [`Loading`]: fill an evicted frame; finished, it becomes an `Exclusive`, dropped
//!   unfinished (a failed read), the frame is evicted again.
//!
//! Every access to a frame's bytes is atomic (`view.rs`), so an optimistic reader racing a
//! writer reads garbage it then discards, never undefined behaviour; a guard that excludes
//! writers (`Shared`, `Exclusive`, `Loading`) also offers the frame as a plain `&[u8]`.
//!
//! What is resident, and what to evict, is the caller's: this module only keeps each frame's
//! word honest. Resident memory is the number of frames filled since their last eviction
//! (or evicted keeping their memory, until released), times `page_bytes`, plus the word
//! pages touched (8 bytes per page id up to the highest used).
//!
//! Must never: let a page id beyond the reservation reach memory (every entry checks it and
//! answers [`FrameError::Beyond`], since an optimistic reader may read a garbage id).

mod view;
pub(crate) mod word;

#[cfg(all(test, not(loom)))]
mod tests;

use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::mm::{Advice, MapFlags, ProtFlags};

use crate::backoff::Backoff;
use crate::error::{Error, Op, Result};
pub use view::{FrameRead, FrameWrite};
pub use word::FrameState;
use word::{PageWord, Seen};

/// The smallest frame: the kernel's page, the unit `MADV_DONTNEED` frees.
pub const MIN_FRAME_BYTES: usize = 4096;
/// The largest frame.
pub const MAX_FRAME_BYTES: usize = 1 << 20;
/// The most address space one reservation takes (64 TiB; x86-64 gives a process 128 TiB).
pub const MAX_RESERVATION_BYTES: u64 = 1 << 46;
/// A transparent huge page (x86-64, and AArch64 with 4 KiB pages): the unit of
/// [`Frames::advise_huge`], and the alignment of the frames' reservation.
pub const HUGE_BYTES: usize = 2 << 20;

/// Why a frame could not be had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The page is not resident; load it (`Frames::try_load`) and try again.
    Evicted,
    /// The page id is past the reservation: a garbage id from a torn optimistic read (restart)
    /// or, once validated, damage.
    Beyond {
        /// The page id asked for.
        pid: u64,
        /// The reservation's page count.
        pages: u64,
    },
}

/// A frame changed under an optimistic read: what was read is void; start again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restart;

impl std::fmt::Display for Restart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a frame changed during an optimistic read")
    }
}

/// The frames of one engine.
pub struct Frames {
    base: NonNull<u8>,
    bytes: usize,
    words: NonNull<PageWord>,
    word_bytes: usize,
    pages: u64,
    page_bytes: usize,
    /// Page ids below this have huge pages (`advise_huge`): their frames keep their memory
    /// when evicted. Only grows.
    huge_pages: AtomicU64,
}

// SAFETY: the reservations are owned by this value and every access to them goes through
// atomics (`PageWord`, `AtomicU64` words of frames) or through a `&[u8]` handed out only
// while the frame's word excludes writers.
unsafe impl Send for Frames {}
// SAFETY: as above: shared access is atomic or excludes writers.
unsafe impl Sync for Frames {}

impl std::fmt::Debug for Frames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frames")
            .field("pages", &self.pages)
            .field("page_bytes", &self.page_bytes)
            .finish()
    }
}

fn reservation_name() -> &'static Path {
    Path::new("frame reservation")
}

fn invalid(detail: String) -> Error {
    Error::InvalidOptions { path: reservation_name().to_path_buf(), detail }
}

/// `reserve_bytes` at an address aligned to a huge page (so `advise_huge` covers whole huge
/// pages): `HUGE_BYTES` more is mapped, and what lies before and after the aligned range is
/// unmapped again.
fn reserve_aligned(len: usize) -> Result<NonNull<u8>> {
    let Some(padded) = len.checked_add(HUGE_BYTES) else { return reserve_bytes(len) };
    let base = reserve_bytes(padded)?;
    let address = base.as_ptr() as usize;
    let head = address.next_multiple_of(HUGE_BYTES) - address;
    let tail = padded - head - len;
    // SAFETY: both ranges are parts of the mapping just made, which nothing refers to yet;
    // what stays mapped is `len` bytes from the aligned address.
    unsafe {
        if head > 0 {
            let _ = rustix::mm::munmap(base.as_ptr().cast(), head);
        }
        if tail > 0 {
            let _ = rustix::mm::munmap(base.as_ptr().add(head + len).cast(), tail);
        }
        let aligned = NonNull::new_unchecked(base.as_ptr().add(head));
        debug_assert_eq!(aligned.as_ptr() as usize % HUGE_BYTES, 0);
        Ok(aligned)
    }
}

/// Maps `len` bytes of address space: private, anonymous, no swap reserved, no huge pages.
fn reserve_bytes(len: usize) -> Result<NonNull<u8>> {
    // SAFETY: a new private mapping at an address of the kernel's choosing; nothing else
    // refers to it.
    let address = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE | MapFlags::NORESERVE,
        )
    }
    .map_err(|errno| Error::from_rustix(Op::Map, reservation_name(), errno))?;
    let base = NonNull::new(address.cast::<u8>())
        .ok_or_else(|| Error::from_errno(Op::Map, reservation_name(), libc::ENOMEM))?;
    // SAFETY: the range is the mapping just made. Without huge pages a touched frame costs
    // its own 4 KiB pages; a refusal (a kernel without THP) changes nothing.
    let _ = unsafe { rustix::mm::madvise(base.as_ptr().cast(), len, Advice::LinuxNoHugepage) };
    Ok(base)
}

impl Frames {
    /// Reserves `pages` frames of `page_bytes` (a power of two from 4 KiB to 1 MiB), all
    /// evicted. Takes address space, not memory.
    pub fn reserve(pages: u64, page_bytes: usize) -> Result<Frames> {
        if !page_bytes.is_power_of_two()
            || !(MIN_FRAME_BYTES..=MAX_FRAME_BYTES).contains(&page_bytes)
        {
            return Err(invalid(format!(
                "a frame of {page_bytes} bytes; frames are a power of two from \
                 {MIN_FRAME_BYTES} to {MAX_FRAME_BYTES} bytes"
            )));
        }
        let total = pages.checked_mul(page_bytes as u64).filter(|&total| {
            pages > 0 && total <= MAX_RESERVATION_BYTES && usize::try_from(total).is_ok()
        });
        let Some(total) = total else {
            return Err(invalid(format!(
                "{pages} frames of {page_bytes} bytes; a reservation holds 1 frame to \
                 {MAX_RESERVATION_BYTES} bytes of them"
            )));
        };
        let bytes = total as usize;
        let word_bytes =
            (pages as usize * std::mem::size_of::<PageWord>()).next_multiple_of(MIN_FRAME_BYTES);
        let base = reserve_aligned(bytes)?;
        let words = match reserve_bytes(word_bytes) {
            Ok(words) => words.cast::<PageWord>(),
            Err(error) => {
                // SAFETY: the frame reservation made above, used by nothing yet.
                let _ = unsafe { rustix::mm::munmap(base.as_ptr().cast(), bytes) };
                return Err(error);
            }
        };
        let frames = Frames {
            base,
            bytes,
            words,
            word_bytes,
            pages,
            page_bytes,
            huge_pages: AtomicU64::new(0),
        };
        assert_eq!(frames.state(0), Ok(FrameState::Evicted), "a new reservation was not zero");
        Ok(frames)
    }

    /// The number of page ids the reservation covers.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// The size of each frame.
    pub fn page_bytes(&self) -> usize {
        self.page_bytes
    }

    #[inline]
    fn check(&self, pid: u64) -> std::result::Result<(), FrameError> {
        if pid < self.pages {
            Ok(())
        } else {
            Err(FrameError::Beyond { pid, pages: self.pages })
        }
    }

    #[inline]
    fn word(&self, pid: u64) -> &PageWord {
        assert!(pid < self.pages, "page id {pid} past the reservation's {}", self.pages);
        // SAFETY: `pid` is inside the word reservation, which lives as long as `self`;
        // `PageWord` is one `AtomicU64`, valid for any bit pattern (zero-filled by the kernel).
        unsafe { &*self.words.as_ptr().add(pid as usize) }
    }

    #[inline]
    fn frame_words(&self, pid: u64) -> &[AtomicU64] {
        assert!(pid < self.pages, "page id {pid} past the reservation's {}", self.pages);
        let offset = pid as usize * self.page_bytes;
        debug_assert!(offset + self.page_bytes <= self.bytes);
        // SAFETY: the frame lies inside the reservation (checked above), which lives as long
        // as `self`, is 4 KiB-aligned (so 8-byte aligned) and readable; `AtomicU64` is valid for
        // any bits. All shared access to it is atomic.
        unsafe {
            std::slice::from_raw_parts(
                self.base.as_ptr().add(offset).cast::<AtomicU64>(),
                self.page_bytes / 8,
            )
        }
    }

    fn frame_bytes(&self, pid: u64) -> &[u8] {
        let words = self.frame_words(pid);
        // SAFETY: only called by guards that exclude writers (shared, exclusive, loading), so
        // nobody stores into these bytes while the slice lives (its borrow of the guard); the
        // concurrent accesses left are reads.
        unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), self.page_bytes) }
    }

    /// Asks the CPU to start fetching page `pid`'s word and the first line of its frame
    /// into its caches, for a read about to begin (a lookup that knows the next level's
    /// page before it has validated this one): the two misses then overlap the rest of
    /// this level's work. A hint only: it reads nothing, faults on nothing, and ignores a
    /// page id past the reservation.
    #[inline]
    pub fn prefetch(&self, pid: u64) {
        self.prefetch_head(pid, 1);
    }

    /// `prefetch`, for the first `lines` cache lines of the frame (at most the frame's):
    /// a page's header and slots, for a cursor about to step onto it.
    #[inline]
    pub fn prefetch_head(&self, pid: u64, lines: usize) {
        if pid >= self.pages {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            const LINE: usize = 64;
            let word = std::ptr::from_ref(self.word(pid)).cast::<i8>();
            let lines = lines.clamp(1, self.page_bytes.div_ceil(LINE));
            // SAFETY: the offset is inside the reservation (pid checked above); a prefetch
            // dereferences nothing and never faults, even on a page not yet touched.
            let frame = unsafe { self.base.as_ptr().add(pid as usize * self.page_bytes) };
            // SAFETY: prefetch instructions have no memory effects; every line is inside
            // the frame (at most its length).
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(word);
                for line in 0..lines {
                    _mm_prefetch::<_MM_HINT_T0>(frame.add(line * LINE).cast::<i8>().cast_const());
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = lines;
    }

    /// The state of page `pid`'s frame now.
    pub fn state(&self, pid: u64) -> std::result::Result<FrameState, FrameError> {
        self.check(pid)?;
        Ok(self.word(pid).load().state())
    }

    /// The version of page `pid`'s frame now (for tests and statistics).
    pub fn version(&self, pid: u64) -> std::result::Result<u64, FrameError> {
        self.check(pid)?;
        Ok(self.word(pid).load().version())
    }

    /// Starts an optimistic read of a resident page, waiting while a writer holds it; a page
    /// the clock marked is unmarked (a use).
    #[inline]
    pub fn optimistic(&self, pid: u64) -> std::result::Result<Optimistic<'_>, FrameError> {
        let guard = self.optimistic_cold(pid)?;
        if guard.seen.state() == FrameState::Marked {
            self.word(pid).touch(guard.seen);
        }
        Ok(guard)
    }

    /// `optimistic`, but leaves the clock's mark alone: for the read that follows a load,
    /// which is not a second use of the page (so a page read once, by a scan, stays the
    /// clock's first choice).
    #[inline]
    pub fn optimistic_cold(&self, pid: u64) -> std::result::Result<Optimistic<'_>, FrameError> {
        self.check(pid)?;
        let word = self.word(pid);
        let mut backoff = Backoff::default();
        loop {
            let seen = word.load();
            match seen.state() {
                FrameState::Evicted => return Err(FrameError::Evicted),
                FrameState::Exclusive => backoff.snooze(),
                _ => return Ok(Optimistic { frames: self, pid, seen }),
            }
        }
    }

    /// Locks a resident page exclusively, waiting for its holders to leave.
    pub fn lock_exclusive(&self, pid: u64) -> std::result::Result<Exclusive<'_>, FrameError> {
        self.check(pid)?;
        let word = self.word(pid);
        let mut backoff = Backoff::default();
        loop {
            let seen = word.load();
            if seen.state() == FrameState::Evicted {
                return Err(FrameError::Evicted);
            }
            if word.try_lock_exclusive(seen) {
                return Ok(Exclusive { frames: self, pid });
            }
            backoff.snooze();
        }
    }

    /// Locks a resident page shared, waiting for a writer to leave.
    pub fn lock_shared(&self, pid: u64) -> std::result::Result<Shared<'_>, FrameError> {
        self.check(pid)?;
        let word = self.word(pid);
        let mut backoff = Backoff::default();
        loop {
            let seen = word.load();
            if seen.state() == FrameState::Evicted {
                return Err(FrameError::Evicted);
            }
            if word.try_lock_shared(seen) {
                return Ok(Shared { frames: self, pid });
            }
            backoff.snooze();
        }
    }

    /// The clock's first pass over a page: marks it if it is resident and unlocked. True when
    /// it is marked now (by this call or an earlier one) and so may be evicted.
    pub fn mark(&self, pid: u64) -> std::result::Result<bool, FrameError> {
        self.check(pid)?;
        let word = self.word(pid);
        let seen = word.load();
        Ok(match seen.state() {
            FrameState::Marked => true,
            FrameState::Unlocked => word.try_mark(seen),
            _ => false,
        })
    }

    /// The clock's second pass: locks a page that is still marked (nobody used it since
    /// `mark`), for eviction. `None` when it was used, locked or evicted meanwhile.
    pub fn try_lock_marked(&self, pid: u64) -> Option<Exclusive<'_>> {
        self.check(pid).ok()?;
        let word = self.word(pid);
        let seen = word.load();
        (seen.state() == FrameState::Marked && word.try_lock_exclusive(seen))
            .then(|| Exclusive { frames: self, pid })
    }

    /// Claims an evicted page's frame to fill it. `None` when the page is resident or another
    /// thread is loading it (wait for that with `optimistic`).
    pub fn try_load(&self, pid: u64) -> std::result::Result<Option<Loading<'_>>, FrameError> {
        self.check(pid)?;
        let word = self.word(pid);
        let seen = word.load();
        Ok(word.try_lock_evicted(seen).then(|| Loading { frames: self, pid, done: false }))
    }

    /// Gives back the memory of an evicted frame kept by [`Exclusive::evict_keeping`]. False
    /// when the frame is not evicted (resident, or being loaded: then the load owns it).
    pub fn release_kept(&self, pid: u64) -> bool {
        match self.try_load(pid) {
            // Dropped unfinished, a load gives the memory back and leaves the frame evicted.
            Ok(Some(loading)) => {
                drop(loading);
                true
            }
            Ok(None) | Err(_) => false,
        }
    }

    /// Gives a frame's memory back to the kernel; its bytes read as zero afterwards. A
    /// frame on huge pages keeps its memory (and its bytes): giving back part of a huge page
    /// would split it.
    fn release(&self, pid: u64) {
        if pid < self.huge_pages.load(Ordering::Acquire) {
            return;
        }
        let offset = pid as usize * self.page_bytes;
        // SAFETY: the frame's range inside the reservation; the caller holds it exclusively,
        // and readers that race (optimistic ones) only load and will fail validation.
        let result = unsafe {
            rustix::mm::madvise(
                self.base.as_ptr().add(offset).cast(),
                self.page_bytes,
                Advice::LinuxDontNeed,
            )
        };
        // MADV_DONTNEED fails only on a bad range, which the checks above rule out.
        debug_assert!(result.is_ok(), "MADV_DONTNEED of frame {pid}: {result:?}");
    }

    /// Asks for transparent huge pages (2 MiB, one TLB entry each) under the frames of page
    /// ids `0..pages` (it was `MADV_NOHUGEPAGE`), growing the range given before; the caller
    /// makes sure no frame of the new part was ever filled, and serialises calls. From then
    /// on, the frames of those ids never give their memory back: `evict`, `release_kept` and
    /// an unfinished load leave it in place, so a huge page is never split. A huge page is
    /// taken whole at the first touch of any frame on it: the caller counts that memory by
    /// huge page. `pages × page_bytes` must be a multiple of [`HUGE_BYTES`] inside the
    /// reservation, and not below the range given before. Where the kernel has no
    /// transparent huge pages the advice changes nothing but the keeping of memory.
    pub fn advise_huge(&self, pages: u64) -> Result<()> {
        let before = self.huge_pages.load(Ordering::Acquire);
        let bytes = pages.checked_mul(self.page_bytes as u64).and_then(|b| usize::try_from(b).ok());
        let Some(bytes) =
            bytes.filter(|&b| b <= self.bytes && b % HUGE_BYTES == 0 && pages >= before)
        else {
            return Err(invalid(format!(
                "huge pages for {pages} frames of {} bytes: not whole huge pages inside the \
                 reservation of {} bytes, from the {before} frames given before",
                self.page_bytes, self.bytes
            )));
        };
        let from = before as usize * self.page_bytes;
        if bytes > from {
            // SAFETY: a part of the frame reservation, which starts on a huge page's
            // boundary (`reserve_aligned`); advice only.
            let result = unsafe {
                rustix::mm::madvise(
                    self.base.as_ptr().add(from).cast(),
                    bytes - from,
                    Advice::LinuxHugepage,
                )
            };
            // A kernel without transparent huge pages refuses (EINVAL): the frames keep their
            // memory all the same, which is what the caller counts.
            let _ = result;
        }
        self.huge_pages.store(pages, Ordering::Release);
        Ok(())
    }

    /// Faults in the memory under the frames of page ids `from..to` ahead of their first use
    /// (`MADV_POPULATE_WRITE`, Linux 5.14): zero pages where nothing was touched yet, on huge
    /// pages where `advise_huge` covers them, so that filling those frames later takes no
    /// page fault. No byte changes: memory already there is left as it is, and no frame's
    /// word moves. The range is cut to the reservation; `false` when the kernel refused (too
    /// old, or no memory), which leaves the frames to fault at their first use as before.
    /// The memory it takes is resident from now on: the caller counts it, or keeps the range
    /// small.
    pub fn populate(&self, from: u64, to: u64) -> bool {
        let to = to.min(self.pages);
        if from >= to {
            return true;
        }
        let offset = from as usize * self.page_bytes;
        let len = (to - from) as usize * self.page_bytes;
        debug_assert!(offset + len <= self.bytes);
        // SAFETY: a range of whole frames inside the reservation (cut above); the advice
        // faults pages in without changing a byte, so readers and writers of those frames,
        // optimistic or latched, see the same bytes before and after.
        let result = unsafe {
            rustix::mm::madvise(
                self.base.as_ptr().add(offset).cast(),
                len,
                Advice::LinuxPopulateWrite,
            )
        };
        result.is_ok()
    }

    /// The page ids that have huge pages (`advise_huge`): `0..huge_pages()`.
    pub fn huge_pages(&self) -> u64 {
        self.huge_pages.load(Ordering::Acquire)
    }

    /// Address space reserved for frames and words, in bytes.
    pub fn reserved_bytes(&self) -> u64 {
        (self.bytes + self.word_bytes) as u64
    }
}

impl Drop for Frames {
    fn drop(&mut self) {
        // SAFETY: both reservations were made by `reserve` and no guard outlives `self`.
        unsafe {
            let _ = rustix::mm::munmap(self.base.as_ptr().cast(), self.bytes);
            let _ = rustix::mm::munmap(self.words.as_ptr().cast(), self.word_bytes);
        }
    }
}

/// An optimistic read of one resident frame: no lock, nothing written.
#[derive(Debug)]
pub struct Optimistic<'a> {
    frames: &'a Frames,
    pid: u64,
    seen: Seen,
}

impl<'a> Optimistic<'a> {
    /// The page id.
    pub fn pid(&self) -> u64 {
        self.pid
    }

    /// The version this read started at.
    pub fn version(&self) -> u64 {
        self.seen.version()
    }

    /// The frame's bytes; anything read is void until [`Optimistic::validate`] says `Ok`.
    #[inline]
    pub fn read(&self) -> FrameRead<'a> {
        FrameRead::new(self.frames.frame_words(self.pid))
    }

    /// `Ok` when no writer changed or held the frame since the read began: what was read is
    /// one version of the page.
    #[inline]
    pub fn validate(&self) -> std::result::Result<(), Restart> {
        if self.frames.word(self.pid).validate(self.seen) {
            Ok(())
        } else {
            Err(Restart)
        }
    }

    /// Turns the read into an exclusive lock, if nothing changed since it began.
    pub fn upgrade(self) -> std::result::Result<Exclusive<'a>, Restart> {
        if self.frames.word(self.pid).try_upgrade(self.seen) {
            Ok(Exclusive { frames: self.frames, pid: self.pid })
        } else {
            Err(Restart)
        }
    }
}

/// A shared lock on one resident frame: no writer until it drops.
#[derive(Debug)]
pub struct Shared<'a> {
    frames: &'a Frames,
    pid: u64,
}

impl Shared<'_> {
    /// The page id.
    pub fn pid(&self) -> u64 {
        self.pid
    }

    /// The frame's bytes, stable while the lock is held.
    pub fn bytes(&self) -> &[u8] {
        self.frames.frame_bytes(self.pid)
    }
}

impl Drop for Shared<'_> {
    fn drop(&mut self) {
        self.frames.word(self.pid).unlock_shared();
    }
}

/// An exclusive lock on one resident frame; dropping it publishes the changes at the next
/// version.
#[derive(Debug)]
pub struct Exclusive<'a> {
    frames: &'a Frames,
    pid: u64,
}

impl<'a> Exclusive<'a> {
    /// The page id.
    pub fn pid(&self) -> u64 {
        self.pid
    }

    /// The frame's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.frames.frame_bytes(self.pid)
    }

    /// Reads of the frame (the same bytes as [`Exclusive::bytes`], through atomics).
    pub fn read(&self) -> FrameRead<'_> {
        FrameRead::new(self.frames.frame_words(self.pid))
    }

    /// Writes into the frame.
    pub fn write(&mut self) -> FrameWrite<'_> {
        FrameWrite::new(self.frames.frame_words(self.pid))
    }

    /// Evicts the page: its memory goes back to the kernel, its word says evicted at the
    /// next version, and readers still inside it will fail validation.
    pub fn evict(self) {
        let (frames, pid) = (self.frames, self.pid);
        std::mem::forget(self);
        frames.release(pid);
        let stored = frames.word(pid).unlock_evicted();
        // The stored word, not a second load: a loader may claim the frame at once.
        debug_assert_eq!(stored.state(), FrameState::Evicted);
    }

    /// Evicts the page as `evict` does but keeps the frame's memory: its word says evicted,
    /// so no reader uses the stale bytes, and the next load into it (the same page id given
    /// to a new page) costs no page fault, no zeroing and no TLB shootdown. The caller
    /// counts the memory until it fills the frame again or gives it back
    /// ([`Frames::release_kept`]).
    pub fn evict_keeping(self) {
        let (frames, pid) = (self.frames, self.pid);
        std::mem::forget(self);
        let stored = frames.word(pid).unlock_evicted();
        debug_assert_eq!(stored.state(), FrameState::Evicted);
    }
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        self.frames.word(self.pid).unlock_exclusive();
    }
}

/// An evicted frame claimed for filling.
#[derive(Debug)]
pub struct Loading<'a> {
    frames: &'a Frames,
    pid: u64,
    done: bool,
}

impl<'a> Loading<'a> {
    /// The page id.
    pub fn pid(&self) -> u64 {
        self.pid
    }

    /// Writes into the frame.
    pub fn write(&mut self) -> FrameWrite<'_> {
        FrameWrite::new(self.frames.frame_words(self.pid))
    }

    /// The frame's bytes (to check what was written).
    pub fn bytes(&self) -> &[u8] {
        self.frames.frame_bytes(self.pid)
    }

    /// The page is in its frame: it becomes resident, still locked exclusively.
    pub fn finish(mut self) -> Exclusive<'a> {
        self.done = true;
        Exclusive { frames: self.frames, pid: self.pid }
    }

    /// The page is in its frame and resident, marked for the clock (cold): unless it is
    /// used again, it is the clock's first choice. Returns the page's version.
    pub fn finish_cold(mut self) -> u64 {
        self.done = true;
        let word = self.frames.word(self.pid);
        let seen = word.unlock_exclusive();
        // Lost only to a reader's touch or a lock since the unlock: the page was used.
        let _ = word.try_mark(seen);
        seen.version()
    }
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        if !self.done {
            // A load that failed: whatever it wrote goes, and the page stays evicted.
            self.frames.release(self.pid);
            let stored = self.frames.word(self.pid).unlock_evicted();
            debug_assert_eq!(stored.state(), FrameState::Evicted);
        }
    }
}
