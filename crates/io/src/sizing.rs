//! `RateSizing`: how large the next preallocated file is (a log segment, a block segment),
//! from how fast the last one filled. Seed 000 grows files in large chunks so that size
//! changes are rare; a store that writes little should not hold large chunks it never
//! fills. So the size follows the write rate: the next file holds about `target` of
//! writes at the rate the last one filled, as a power of two between `min_bytes` and
//! `max_bytes`. A new store starts at `min_bytes`; a busy one reaches `max_bytes` after a
//! few files.

use std::time::Duration;

/// The sizing rule (see the module header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateSizing {
    /// The first size, and the smallest; a multiple of 4096.
    pub min_bytes: u64,
    /// The largest size; a multiple of 4096, at least `min_bytes`.
    pub max_bytes: u64,
    /// How long a file should last at the rate the last one filled.
    pub target: Duration,
}

/// The default `RateSizing::target`.
pub const DEFAULT_FILL_TARGET: Duration = Duration::from_secs(2);

impl RateSizing {
    /// Sizes from `min_bytes` (capped at `max_bytes`) to `max_bytes`, with the default target.
    pub fn new(min_bytes: u64, max_bytes: u64) -> RateSizing {
        RateSizing { min_bytes: min_bytes.min(max_bytes), max_bytes, target: DEFAULT_FILL_TARGET }
    }

    /// The size of the file after one that took `lifetime` to fill with `filled_bytes`.
    pub fn next(&self, filled_bytes: u64, lifetime: Duration) -> u64 {
        assert!(self.min_bytes <= self.max_bytes && self.min_bytes.is_multiple_of(4096));
        assert!(self.max_bytes.is_multiple_of(4096));
        // A file filled in under a millisecond counts as filled in one.
        let seconds = lifetime.as_secs_f64().max(1e-3);
        let wanted = filled_bytes as f64 / seconds * self.target.as_secs_f64();
        let wanted = if wanted >= self.max_bytes as f64 { self.max_bytes } else { wanted as u64 };
        let size = wanted.max(1).next_power_of_two().clamp(self.min_bytes, self.max_bytes);
        assert!(size >= self.min_bytes && size <= self.max_bytes);
        size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_follows_the_rate_between_the_bounds() {
        let sizing = RateSizing::new(512 << 10, 64 << 20);
        let secs = Duration::from_secs;
        // 1 MiB in 2 s: 1 MiB at the 2 s target.
        assert_eq!(sizing.next(1 << 20, secs(2)), 1 << 20);
        // 1 MiB in 10 ms: 200 MiB wanted, capped.
        assert_eq!(sizing.next(1 << 20, Duration::from_millis(10)), 64 << 20);
        // Slow: 512 KiB in an hour; the smallest size.
        assert_eq!(sizing.next(512 << 10, secs(3600)), 512 << 10);
        // 3 MiB in 2 s rounds up to 4 MiB.
        assert_eq!(sizing.next(3 << 20, secs(2)), 4 << 20);
        assert_eq!(sizing.next(0, Duration::ZERO), 512 << 10);
        assert_eq!(sizing.next(u64::MAX, Duration::ZERO), 64 << 20);
        // A minimum over the maximum is capped to it.
        assert_eq!(RateSizing::new(1 << 20, 64 << 10).next(1 << 30, secs(1)), 64 << 10);
    }
}
