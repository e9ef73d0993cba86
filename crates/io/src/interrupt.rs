//! Ctrl-C (SIGINT) and SIGTERM as a call on a thread of their own, so that a tool can remove
//! its scratch files before it exits: the default action kills the process without running
//! a destructor.
//!
//! The signals are blocked in the calling thread, and so in every thread it starts from then
//! on (they inherit its mask), and one thread takes them with `sigwait`. Nothing runs inside
//! a signal handler, so the callback may lock, allocate and remove files. Child processes
//! start with an empty mask (the standard library resets it), so they get the signals as
//! usual.
//!
//! Must never: be installed after other threads have started (they would keep the default
//! action and could still be killed by the signal before the callback runs); `on_interrupt`
//! is called first thing in `main`.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set once `on_interrupt` has installed its thread: a second call would leave two threads
/// waiting on one signal.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The signals taken: Ctrl-C and a polite kill.
fn signal_set() -> std::io::Result<libc::sigset_t> {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before any other use.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, exclusively borrowed sigset_t.
    let ok = unsafe {
        libc::sigemptyset(&mut set) == 0
            && libc::sigaddset(&mut set, libc::SIGINT) == 0
            && libc::sigaddset(&mut set, libc::SIGTERM) == 0
    };
    if !ok {
        return Err(std::io::Error::last_os_error());
    }
    Ok(set)
}

/// Calls `handler` with the signal's number (2 for SIGINT, 15 for SIGTERM) on a thread of its
/// own each time the process gets Ctrl-C or SIGTERM, instead of dying at once. The handler
/// usually cleans up and exits (`std::process::exit(128 + signal)`). Call it before any other
/// thread starts; a second call is an error.
pub fn on_interrupt(handler: impl Fn(i32) + Send + 'static) -> std::io::Result<()> {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return Err(std::io::Error::other("the interrupt handler is installed already"));
    }
    let set = signal_set()?;
    // SAFETY: `set` is initialised; the old mask is not asked for (null).
    let blocked = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if blocked != 0 {
        return Err(std::io::Error::from_raw_os_error(blocked));
    }
    std::thread::Builder::new().name("interrupt".into()).spawn(move || loop {
        let mut signal = 0;
        // SAFETY: `set` is initialised and blocked in every thread; `signal` is a valid out
        // parameter.
        let waited = unsafe { libc::sigwait(&set, &mut signal) };
        if waited == 0 {
            handler(signal);
        }
    })?;
    Ok(())
}
