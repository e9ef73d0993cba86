//! Page choosers of the page-update workload: uniform, and scrambled Zipfian.
//!
//! The Zipfian ranks come from the YCSB driver's generator (`ycsb::generator::Zipfian`, checked
//! against YCSB's own client): rank 0 is the most popular, rank `i` is chosen with probability
//! proportional to `1 / (i + 1)^theta`.
//!
//! `Scramble` spreads the ranks over the page numbers, so the hot pages are not the first
//! pages of the file. Unlike YCSB's `fnvhash(rank) % n` it is a bijection of `0..n` (a
//! multiply-xorshift permutation of the next power of two, cycle-walked into `0..n`), so no two
//! ranks share a page and every page keeps exactly its rank's probability.
//!
//! Invariants: every draw is below `items`; the same seed gives the same sequence of pages.
//!
//! Must never: loop without a bound.

use super::Distribution;
use crate::ycsb::generator::Zipfian;

/// A permutation of `0..items` that looks random: the hot ranks land all over the file.
#[derive(Clone, Copy, Debug)]
pub struct Scramble {
    items: u64,
    /// `2^bits` is the smallest power of two at or above `items` (at least 2).
    bits: u32,
    mask: u64,
}

/// Odd multipliers (splitmix64's): multiplication by an odd number is a bijection modulo 2^k.
const MULTIPLIERS: [u64; 2] = [0xbf58_476d_1ce4_e5b9, 0x94d0_49bb_1331_11eb];

impl Scramble {
    /// The permutation of `0..items` (`items` at least 1).
    pub fn new(items: u64) -> Scramble {
        let items = items.max(1);
        let bits = (u64::BITS - (items - 1).leading_zeros()).max(1);
        let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        Scramble { items, bits, mask }
    }

    /// One round of the permutation of `0..2^bits`: each step (xor with a right shift,
    /// multiplication by an odd constant, both modulo 2^bits) is a bijection.
    fn permute(&self, mut x: u64) -> u64 {
        let shift = self.bits.div_ceil(2);
        for multiplier in MULTIPLIERS {
            x ^= x >> shift;
            x = x.wrapping_mul(multiplier) & self.mask;
        }
        x ^ (x >> shift)
    }

    /// The page of `rank` (below `items`).
    pub fn page(&self, rank: u64) -> u64 {
        debug_assert!(rank < self.items);
        // Cycle walking: `permute` is a bijection of 0..2^bits, so following it from a value
        // below `items` returns below `items` within the cycle's length, at most 2^bits steps;
        // since 2^bits < 2 * items, the expected number of steps is below 2.
        let mut x = self.permute(rank);
        let mut steps = 1u64;
        while x >= self.items {
            assert!(steps <= self.mask, "invariant: cycle walking ends within 2^bits steps");
            x = self.permute(x);
            steps += 1;
        }
        x
    }
}

/// Which page an update picks.
#[derive(Clone, Debug)]
pub enum PageChooser {
    /// Every page equally likely.
    Uniform {
        /// Pages.
        items: u64,
    },
    /// Scrambled Zipfian.
    Zipfian {
        /// Rank generator, over ranks `0..items`.
        zipf: Zipfian,
        /// Rank to page.
        scramble: Scramble,
    },
}

impl PageChooser {
    /// Uniform or scrambled Zipfian (exponent `theta`, strictly between 0 and 1) over
    /// `items` pages, at least 1.
    pub fn new(distribution: Distribution, items: u64, theta: f64) -> PageChooser {
        let items = items.max(1);
        match distribution {
            Distribution::Uniform => PageChooser::Uniform { items },
            Distribution::Zipfian => PageChooser::Zipfian {
                zipf: Zipfian::new(0, items, theta),
                scramble: Scramble::new(items),
            },
        }
    }

    /// The next page, drawn with `rng`.
    pub fn next(&mut self, rng: &mut fastrand::Rng) -> u64 {
        match self {
            PageChooser::Uniform { items } => rng.u64(0..*items),
            PageChooser::Zipfian { zipf, scramble } => scramble.page(zipf.next(rng)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scramble_is_a_permutation() {
        for items in [1u64, 2, 3, 5, 64, 100, 1000, 4096, 65_537] {
            let scramble = Scramble::new(items);
            let mut seen = vec![false; items as usize];
            for rank in 0..items {
                let page = scramble.page(rank);
                assert!(page < items);
                assert!(!seen[page as usize], "page {page} twice for {items} items");
                seen[page as usize] = true;
            }
        }
        // The hot ranks do not stay at the front.
        let scramble = Scramble::new(65_536);
        let front = (0..16).filter(|&rank| scramble.page(rank) < 1024).count();
        assert!(front < 8, "{front} of the 16 hottest ranks in the first 1024 pages");
    }

    #[test]
    fn tiny_choosers_stay_in_range() {
        for items in [1u64, 2, 3] {
            let mut chooser = PageChooser::new(Distribution::Zipfian, items, 0.99);
            let mut rng = fastrand::Rng::with_seed(1);
            let mut seen = vec![false; items as usize];
            for _ in 0..1000 {
                let page = chooser.next(&mut rng);
                assert!(page < items);
                seen[page as usize] = true;
            }
            assert!(seen.iter().all(|&seen| seen), "{items} items: {seen:?}");
        }
    }

    #[test]
    fn the_hottest_rank_is_one_page_drawn_most() {
        let mut chooser = PageChooser::new(Distribution::Zipfian, 10_000, 0.99);
        let mut rng = fastrand::Rng::with_seed(7);
        let mut counts = vec![0u64; 10_000];
        let draws = 200_000;
        for _ in 0..draws {
            counts[chooser.next(&mut rng) as usize] += 1;
        }
        // With theta 0.99 over 10^4 items rank 0 takes about 1/zeta(n) ~ 10% of the draws,
        // and lands on the page the scramble gives it.
        let hottest = Scramble::new(10_000).page(0) as usize;
        let share = counts[hottest] as f64 / draws as f64;
        assert!((0.07..0.14).contains(&share), "{share}");
        assert_eq!(counts.iter().max(), Some(&counts[hottest]));
    }

    #[test]
    fn choosers_repeat_with_the_seed() {
        let chooser = PageChooser::new(Distribution::Zipfian, 500, 0.99);
        let draw = |seed| {
            let mut chooser = chooser.clone();
            let mut rng = fastrand::Rng::with_seed(seed);
            (0..100).map(|_| chooser.next(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert!(draw(3).iter().all(|&page| page < 500));
        let mut uniform = PageChooser::new(Distribution::Uniform, 7, 0.99);
        let mut rng = fastrand::Rng::with_seed(3);
        assert!((0..100).all(|_| uniform.next(&mut rng) < 7));
    }
}
