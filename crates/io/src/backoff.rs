//! Waiting for another thread without a lock: spin a little, then yield.

/// Spin, then yield: for waits on another thread that holds something briefly (a remap, a
/// frame latch). The spinning outlasts a writer's hold of a leaf (1,023 spin-loop hints in
/// all: a few to tens of microseconds, by the CPU) before the first yield, because a yield
/// hands the CPU to whatever else is runnable on it for a whole time slice (milliseconds:
/// the engine's background threads often are). With 63 hints, readers waiting on latched
/// frames made 12% of the `sched_yield` calls of a YCSB sequence on 2 cores.
#[derive(Default)]
pub(crate) struct Backoff {
    #[cfg_attr(loom, allow(dead_code))]
    step: u32,
}

/// Snoozes that spin (twice as long each) before they yield.
#[cfg(not(loom))]
const SPIN_STEPS: u32 = 10;

impl Backoff {
    pub(crate) fn snooze(&mut self) {
        #[cfg(loom)]
        {
            loom::thread::yield_now();
        }
        #[cfg(not(loom))]
        {
            if self.step < SPIN_STEPS {
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
