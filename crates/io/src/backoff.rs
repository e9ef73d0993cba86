//! Waiting for another thread without a lock: spin a little, then yield.

/// Spin, then yield: for waits on another thread that holds something briefly (a remap, a
/// frame latch). The spinning outlasts a writer's hold of a leaf (1,023 spin-loop hints in
/// all: a few to tens of microseconds, by the CPU) before the first yield, because a yield
/// hands the CPU to whatever else is runnable on it for a whole time slice (milliseconds:
/// the engine's background threads often are). With 63 hints, readers waiting on latched
/// frames made 12% of the `sched_yield` calls of a YCSB sequence on 2 cores.
///
/// `spin` is the same wait that never yields, for a caller that has its own way to sleep
/// once spinning has not been enough (the engine's descents take the structure lock).
#[derive(Default)]
pub struct Backoff {
    #[cfg_attr(loom, allow(dead_code))]
    step: u32,
}

/// Snoozes that spin (twice as long each) before they yield.
#[cfg(not(loom))]
const SPIN_STEPS: u32 = 10;

impl Backoff {
    /// A backoff whose first snooze or spin spins `1 << step` hints, as the one after
    /// `step` snoozes of a new one would.
    pub fn from_step(step: u32) -> Self {
        Backoff { step }
    }

    /// Spins `1 << step` spin-loop hints and doubles the next wait; after `SPIN_STEPS`
    /// snoozes, yields the CPU instead.
    pub fn snooze(&mut self) {
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

    /// Spins `1 << step` spin-loop hints (at most `1 << SPIN_STEPS`) and doubles the next
    /// one's; never yields.
    pub fn spin(&mut self) {
        #[cfg(loom)]
        {
            loom::hint::spin_loop();
        }
        #[cfg(not(loom))]
        {
            for _ in 0..(1u32 << self.step.min(SPIN_STEPS)) {
                std::hint::spin_loop();
            }
            self.step = self.step.saturating_add(1);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Each wait doubles the next; `spin` stays at its longest wait instead of yielding, and
    /// `from_step` starts where that many snoozes would have left a new one.
    #[test]
    fn waits_double_and_a_spin_never_passes_the_longest() {
        let mut snoozed = Backoff::default();
        for _ in 0..3 {
            snoozed.snooze();
        }
        let mut started = Backoff::from_step(3);
        assert_eq!((snoozed.step, started.step), (3, 3));
        started.spin();
        assert_eq!(started.step, 4);
        let mut long = Backoff::from_step(SPIN_STEPS + 5);
        long.spin();
        assert_eq!(long.step, SPIN_STEPS + 6, "counted on, spun at most 1 << SPIN_STEPS");
    }
}
