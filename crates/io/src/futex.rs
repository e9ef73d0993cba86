//! Waiting on a 32-bit atomic word (a Linux futex), for hand-offs in the layers above that
//! must wake many threads with one system call and without a mutex to reacquire.
//!
//! A waiter reads the word, checks its condition, and calls [`wait`] with the value it read;
//! a waker changes the word and then calls [`wake_all`]. A wake between the read and the
//! wait is not lost: the kernel compares the word before sleeping.

use std::sync::atomic::AtomicU32;

use rustix::thread::futex;

/// Sleeps while `word` holds `expected`. Returns after a wake, at once if the word differs,
/// or spuriously (an interrupted wait): callers re-check their condition in a loop.
pub fn wait(word: &AtomicU32, expected: u32) {
    // EAGAIN (the word differs) and EINTR both mean: go and look again.
    let _ = futex::wait(word, futex::Flags::PRIVATE, expected, None);
}

/// Wakes every thread sleeping in [`wait`] on `word`.
pub fn wake_all(word: &AtomicU32) {
    // The kernel reads the count as an int: i32::MAX means all. Waking cannot fail on a
    // valid, aligned address, which a reference guarantees.
    let _ = futex::wake(word, futex::Flags::PRIVATE, i32::MAX as u32);
}
