//! Turning SIGBUS in a mapping into an error.
//!
//! A load or store to a mapped page that lies past the end of the file raises SIGBUS, which
//! kills the process. Within tierkv that cannot happen through our own resizes (the remap gate
//! keeps every access inside the mapping, and the mapping inside the file), but another process
//! or another handle can truncate the file under us, and a media error on a page of a DAX
//! mapping raises SIGBUS too. So:
//!
//! 1. Every live mapping registers its address range in `REGISTRY`, a fixed array of slots
//!    that the signal handler can read without locks or allocation.
//! 2. The SIGBUS handler (installed once, `SA_SIGINFO | SA_ONSTACK`) looks up the faulting
//!    address. If a registered mapping holds it, the handler first increments that slot's
//!    fault counter, then maps an anonymous zero page over the faulting page (`MAP_FIXED`) and
//!    returns, so the interrupted copy completes harmlessly against the zero page.
//! 3. After every copy the accessor compares the slot's fault counter with the value it had
//!    when the mapping was made. A difference means the copy may have touched a zero page, so
//!    its bytes are discarded: the accessor re-reads the file size, remaps, and returns
//!    `Error::FileShrunk` if the range is gone, or redoes the access with a system call.
//! 4. A SIGBUS at an address no slot holds is not ours: the handler restores the previous
//!    disposition and returns, the instruction faults again, and the previous handler (Rust's
//!    own, or the default action) runs as if we had never been there.
//!
//! Invariants:
//! - A slot's range is always inside the mapping it describes: ranges are cleared before a
//!   mapping is unmapped and set after it is mapped, so the handler never patches memory that
//!   belongs to someone else.
//! - The handler increments the counter before it installs the zero page, so any thread that
//!   read the zero page sees the increment when it checks the counter afterwards.
//! - The handler calls only `mmap` and `sigaction` (system calls) and touches only atomics.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

/// Mappings that can be protected at once; a file opened when all are taken falls back to
/// system calls for every access rather than run unprotected.
const SLOTS: usize = 4096;

struct Slot {
    taken: AtomicBool,
    start: AtomicUsize,
    /// 0 means the slot describes no range.
    end: AtomicUsize,
    faults: AtomicU64,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            taken: AtomicBool::new(false),
            start: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
            faults: AtomicU64::new(0),
        }
    }
}

static REGISTRY: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];
static PAGE_BYTES: AtomicUsize = AtomicUsize::new(4096);
static INSTALL: Once = Once::new();
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// A registered slot, owned by one mapped file. Dropping it frees the slot.
#[derive(Debug)]
pub(crate) struct FaultSlot {
    index: usize,
}

impl FaultSlot {
    /// Takes a free slot (installing the handler on first use), or `None` if all are taken.
    pub(crate) fn acquire() -> Option<FaultSlot> {
        install_handler();
        REGISTRY.iter().enumerate().find_map(|(index, slot)| {
            slot.taken
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
                .then(|| FaultSlot { index })
        })
    }

    fn slot(&self) -> &'static Slot {
        &REGISTRY[self.index]
    }

    /// Describes the live mapping `[start, start + len)`. Call only after mapping it.
    pub(crate) fn set_range(&self, start: usize, len: usize) {
        let slot = self.slot();
        slot.start.store(start, Ordering::Relaxed);
        slot.end.store(start + len, Ordering::Release);
    }

    /// Stops describing any range. Call before unmapping.
    pub(crate) fn clear_range(&self) {
        let slot = self.slot();
        slot.end.store(0, Ordering::Release);
        slot.start.store(0, Ordering::Relaxed);
    }

    /// Faults counted in this slot so far.
    pub(crate) fn faults(&self) -> u64 {
        // The handler runs on the faulting thread, synchronously, in the middle of the copy:
        // keep the compiler from moving this load above the copy.
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        self.slot().faults.load(Ordering::Acquire)
    }
}

impl Drop for FaultSlot {
    fn drop(&mut self) {
        self.clear_range();
        self.slot().taken.store(false, Ordering::Release);
    }
}

fn install_handler() {
    INSTALL.call_once(|| {
        PAGE_BYTES.store(rustix::param::page_size(), Ordering::Relaxed);
        // SAFETY: an all-zero sigaction is a valid value to be overwritten by the kernel.
        let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: reading the current disposition into a valid struct.
        let read = unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) };
        if read != 0 {
            return;
        }
        let _ = PREVIOUS.set(previous);
        // SAFETY: as above.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_sigbus as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: sa_mask is a valid sigset_t inside action.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: installing a handler with a valid struct; the handler is async-signal-safe.
        unsafe { libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) };
    });
}

extern "C" fn on_sigbus(
    _signal: libc::c_int,
    info: *mut libc::siginfo_t,
    _context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let address = unsafe { (*info).si_addr() } as usize;
    for slot in &REGISTRY {
        let end = slot.end.load(Ordering::Acquire);
        if end == 0 {
            continue;
        }
        let start = slot.start.load(Ordering::Relaxed);
        if address < start || address >= end {
            continue;
        }
        slot.faults.fetch_add(1, Ordering::SeqCst);
        let page_bytes = PAGE_BYTES.load(Ordering::Relaxed);
        let page = address & !(page_bytes - 1);
        // SAFETY: the page lies inside a mapping we own (invariant of the registry); replacing
        // it with a private zero page only affects that mapping, which will be discarded.
        let mapped = unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                page_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if mapped != libc::MAP_FAILED {
            return;
        }
        break;
    }
    // Not ours (or the patch failed): hand the fault back to whoever had SIGBUS before.
    match PREVIOUS.get() {
        // SAFETY: restoring a disposition the kernel gave us.
        Some(previous) => unsafe {
            libc::sigaction(libc::SIGBUS, previous, std::ptr::null_mut());
        },
        // SAFETY: restoring the default action with a zeroed (SIG_DFL) struct.
        None => unsafe {
            let default: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGBUS, &default, std::ptr::null_mut());
        },
    }
}
