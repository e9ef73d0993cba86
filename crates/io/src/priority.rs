//! The calling thread's CPU priority. A background thread that writes pages back asks the
//! scheduler to run the threads serving requests first when both want a core, so that on a
//! small machine the write-back takes what the foreground leaves instead of half of it
//! (RocksDB's `Env::LowerThreadPoolCPUPriority` is the anchor).

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
}
