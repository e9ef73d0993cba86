//! Counters that many threads add to without sharing a cache line: each thread adds to its
//! own stripe (of 16, chosen once per thread), and a read sums them. `Striped` counts
//! events (relaxed: a figure for statistics); `Gauge` counts things alive (sequentially
//! consistent: a thread that sees every stripe at zero knows no taker counted in before).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const STRIPES: usize = 16;

#[repr(align(128))]
#[derive(Default)]
struct Stripe(AtomicU64);

/// One counter spread over `STRIPES` cache lines.
#[derive(Default)]
pub struct Striped([Stripe; STRIPES]);

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES;
}

impl Striped {
    /// Adds `n` on this thread's stripe.
    pub fn add(&self, n: u64) {
        let stripe = STRIPE.with(|stripe| *stripe);
        self.0[stripe].0.fetch_add(n, Ordering::Relaxed);
    }

    /// The sum of every stripe (a moment's figure while threads add).
    pub fn get(&self) -> u64 {
        self.0.iter().map(|stripe| stripe.0.load(Ordering::Relaxed)).sum()
    }
}

/// This thread's stripe.
fn stripe() -> usize {
    STRIPE.with(|stripe| *stripe)
}

/// How many things are alive, each taken on its taker's stripe and given back on the same
/// one (whatever thread gives it back), so that no stripe goes below zero and a taker
/// writes a line other threads rarely write.
#[derive(Default)]
pub struct Gauge([Stripe; STRIPES]);

/// A thing counted in a `Gauge`: the stripe to count it out of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken(usize);

impl Gauge {
    /// Counts one in on this thread's stripe.
    pub fn take(&self) -> Taken {
        let stripe = stripe();
        let before = self.0[stripe].0.fetch_add(1, Ordering::SeqCst);
        assert!(before < u64::MAX / 2, "a gauge counted in and never out");
        Taken(stripe)
    }

    /// Counts `taken` out, on the stripe it was counted in on.
    pub fn give(&self, taken: Taken) {
        let before = self.0[taken.0].0.fetch_sub(1, Ordering::SeqCst);
        assert!(before > 0, "a gauge counted out below zero");
    }

    /// Whether every stripe reads zero, each load sequentially consistent: a `take` ordered
    /// before the load of its stripe (in the single order of sequentially consistent
    /// operations) and not given back makes this false.
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|stripe| stripe.0.load(Ordering::SeqCst) == 0)
    }

    /// The sum of every stripe (a moment's figure while threads take and give).
    pub fn get(&self) -> u64 {
        self.0.iter().map(|stripe| stripe.0.load(Ordering::SeqCst)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gauge_counts_out_on_the_stripe_it_counted_in_on_whatever_the_thread() {
        let gauge = std::sync::Arc::new(Gauge::default());
        assert!(gauge.is_zero());
        // Taken on one thread each, given back on this one.
        let taken: Vec<Taken> = (0..4)
            .map(|_| {
                let gauge = std::sync::Arc::clone(&gauge);
                std::thread::spawn(move || (gauge.take(), gauge.take())).join().expect("taker")
            })
            .flat_map(|(a, b)| [a, b])
            .collect();
        assert_eq!(gauge.get(), 8);
        assert!(!gauge.is_zero());
        for (at, one) in taken.into_iter().enumerate() {
            assert!(!gauge.is_zero(), "{} still taken", 8 - at);
            gauge.give(one);
        }
        assert!(gauge.is_zero());
        assert_eq!(gauge.get(), 0);
    }

    #[test]
    #[should_panic(expected = "below zero")]
    fn a_gauge_refuses_to_count_out_what_its_stripe_never_took() {
        let gauge = Gauge::default();
        let taken = gauge.take();
        gauge.give(taken);
        gauge.give(taken);
    }

    #[test]
    fn threads_adding_at_once_lose_nothing() {
        let counter = std::sync::Arc::new(Striped::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let counter = std::sync::Arc::clone(&counter);
                std::thread::spawn(move || (0..10_000).for_each(|_| counter.add(1)))
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().expect("adder"));
        assert_eq!(counter.get(), 40_000);
    }
}
