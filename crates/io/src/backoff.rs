//! Waiting for another thread without a lock: spin a little, then yield.

/// Spin, then yield: for waits on another thread that holds something briefly (a remap, a
/// frame latch).
#[derive(Default)]
pub(crate) struct Backoff {
    #[cfg_attr(loom, allow(dead_code))]
    step: u32,
}

impl Backoff {
    pub(crate) fn snooze(&mut self) {
        #[cfg(loom)]
        {
            loom::thread::yield_now();
        }
        #[cfg(not(loom))]
        {
            if self.step < 6 {
                for _ in 0..(1u32 << self.step) {
                    std::hint::spin_loop();
                }
            } else {
                std::thread::yield_now();
            }
            self.step = self.step.saturating_add(1);
        }
    }
}
