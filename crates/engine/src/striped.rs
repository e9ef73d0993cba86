//! Counters that many threads add to without sharing a cache line: each thread adds to its
//! own stripe (of 16, chosen once per thread), and a read sums them.

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

#[cfg(test)]
mod tests {
    use super::*;

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
