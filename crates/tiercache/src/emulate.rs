//! Slow-tier emulation: each access waits for its share of one emulated device's bandwidth
//! (reads and writes at their own rates, from one clock, so that writes take time from
//! concurrent reads) and then for the added delay. Waits are short, so they spin (yielding
//! the CPU between checks); a wait over 200 µs sleeps most of it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::SlowTier;

pub(crate) struct Emulator {
    tier: SlowTier,
    /// The emulated device is busy until this time (ns since `epoch`).
    busy_until_ns: AtomicU64,
    epoch: Instant,
}

impl Emulator {
    pub(crate) fn new(tier: SlowTier) -> Emulator {
        Emulator { tier, busy_until_ns: AtomicU64::new(0), epoch: Instant::now() }
    }

    pub(crate) fn tier(&self) -> &SlowTier {
        &self.tier
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Waits as long as an access of `bytes` takes on the emulated tier.
    pub(crate) fn access(&self, bytes: usize, write: bool) {
        let (delay, rate) = if write {
            (self.tier.write_delay_ns, self.tier.write_bytes_per_sec)
        } else {
            (self.tier.read_delay_ns, self.tier.read_bytes_per_sec)
        };
        let now = self.now_ns();
        let mut done = now;
        if let Some(rate) = rate {
            let service = (bytes as u128 * 1_000_000_000 / rate as u128) as u64;
            let mut busy = self.busy_until_ns.load(Ordering::Relaxed);
            loop {
                let finish = busy.max(now) + service;
                match self.busy_until_ns.compare_exchange_weak(
                    busy,
                    finish,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        done = finish;
                        break;
                    }
                    Err(current) => busy = current,
                }
            }
        }
        self.wait_until(done + delay);
    }

    fn wait_until(&self, deadline_ns: u64) {
        loop {
            let now = self.now_ns();
            if now >= deadline_ns {
                return;
            }
            let left = deadline_ns - now;
            if left > 200_000 {
                std::thread::sleep(Duration::from_nanos(left - 100_000));
            } else {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The emulated device's bandwidth bounds what many accesses take together: 100 writes
    /// of 1 MB at 1 GB/s take at least 100 ms, whatever the machine. (No upper bound: that
    /// would be a timed assertion on a shared machine.)
    #[test]
    fn a_bandwidth_cap_makes_accesses_take_at_least_their_share_of_time() {
        let tier = SlowTier::parse("write_mbps=1000,read_ns=0").expect("tier");
        let emulator = Emulator::new(tier);
        let started = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..25 {
                        emulator.access(1_000_000, true);
                    }
                });
            }
        });
        assert!(started.elapsed() >= Duration::from_millis(100), "{:?}", started.elapsed());
        // Reads are not capped here: they do not wait for the writes' device time.
        let before = emulator.busy_until_ns.load(Ordering::Relaxed);
        emulator.access(1_000_000, false);
        assert_eq!(emulator.busy_until_ns.load(Ordering::Relaxed), before);
    }

    #[test]
    fn a_delay_is_waited_for_each_access() {
        let tier = SlowTier::parse("read_ns=1000000").expect("tier"); // 1 ms
        let emulator = Emulator::new(tier);
        let started = Instant::now();
        for _ in 0..5 {
            emulator.access(64, false);
        }
        assert!(started.elapsed() >= Duration::from_millis(5));
    }
}
