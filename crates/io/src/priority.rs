//! The calling thread's CPU priority. A background thread that writes pages back asks the
//! scheduler to run the threads serving requests first when both want a core, so that on a
//! small machine the write-back takes what the foreground leaves instead of half of it
//! (RocksDB's `Env::LowerThreadPoolCPUPriority` is the anchor). A helper that only pays off
//! on an idle core goes further, into `SCHED_IDLE`.

/// Lowers the calling thread's priority to nice value `nice` (0 is the default, 19 the
/// lowest; clamped to 0..=19), never raising it: a thread already nicer stays as it is.
/// Returns whether the thread now runs at `nice` or lower: a sandbox that refuses the call
/// leaves it as it was, which changes only how cores are shared.
pub fn lower_this_thread(nice: i32) -> bool {
    let nice = nice.clamp(0, 19);
    // On Linux a thread id names that one thread to setpriority.
    let tid = rustix::thread::gettid();
    match this_thread_nice() {
        Some(now) if now >= nice => true,
        _ => rustix::process::setpriority_process(Some(tid), nice).is_ok(),
    }
}

/// Puts the calling thread in the `SCHED_IDLE` class: it runs only on a core no other
/// thread wants, and any other thread that becomes runnable takes the core from it at
/// once. For work that only helps when a core is idle, and that the threads serving
/// requests do themselves otherwise. Returns whether the class was taken (a sandbox may
/// refuse; the thread then stays as it was).
pub fn idle_this_thread() -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` for the call; pid 0 is the calling thread.
    let status = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    status == 0
}

/// Whether the calling thread is in the `SCHED_IDLE` class.
pub fn this_thread_idle() -> bool {
    // SAFETY: no arguments but the calling thread's pid, 0.
    unsafe { libc::sched_getscheduler(0) == libc::SCHED_IDLE }
}

/// The calling thread's nice value, or `None` where it cannot be read.
pub fn this_thread_nice() -> Option<i32> {
    rustix::process::getpriority_process(Some(rustix::thread::gettid())).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_lowers_itself_and_no_other() {
        let before = this_thread_nice().expect("getpriority");
        let lowered = std::thread::spawn(|| {
            let took = lower_this_thread(5);
            (took, this_thread_nice())
        })
        .join()
        .expect("thread");
        assert!(lowered.0, "setpriority refused a lower priority");
        assert_eq!(lowered.1, Some(before.max(5)), "the thread's nice value");
        assert_eq!(this_thread_nice(), Some(before), "the caller's priority changed");
    }

    #[test]
    fn a_thread_idles_itself_and_no_other() {
        assert!(!this_thread_idle());
        let idled =
            std::thread::spawn(|| (idle_this_thread(), this_thread_idle())).join().expect("thread");
        assert_eq!(idled, (true, true), "SCHED_IDLE refused, or not in force");
        assert!(!this_thread_idle(), "the caller's class changed");
    }
}
