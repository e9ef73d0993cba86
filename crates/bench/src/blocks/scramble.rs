//! Page choosers of the page-update workload: uniform, and scrambled Zipfian.
//!
//! `Zipfian` is the rejection-free generator of Gray et al., "Quickly Generating Billion-Record
//! Synthetic Databases" (SIGMOD 1994), as YCSB's `ZipfianGenerator` implements it: rank 0 is
//! the most popular, rank `i` is chosen with probability proportional to `1 / (i + 1)^theta`.
//! Its set-up sums `zeta(n, theta)` once (O(n)); every draw is O(1).
//!
//! `Scramble` spreads the ranks over the page numbers, so the hot pages are not the first
//! pages of the file. Unlike YCSB's `fnvhash(rank) % n` it is a bijection of `0..n` (a
//! multiply-xorshift permutation of the next power of two, cycle-walked into `0..n`), so no two
//! ranks share a page and every page keeps exactly its rank's probability.
//!
//! Invariants: every draw is below `items`; the same seed gives the same sequence of pages.
//!
//! Must never: loop without a bound, or divide by zero for 1 or 2 items.

/// Zipfian ranks over `0..items` (rank 0 most popular).
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zeta_n: f64,
    eta: f64,
}

/// `sum_{i=1..=n} 1 / i^theta`.
fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl Zipfian {
    /// A generator over `items` ranks with exponent `theta` (YCSB's default is 0.99).
    pub fn new(items: u64, theta: f64) -> Result<Zipfian, String> {
        if items == 0 {
            return Err("a Zipfian distribution needs at least one item".into());
        }
        if !(theta.is_finite() && theta > 0.0 && theta < 1.0) {
            return Err(format!("the Zipfian theta {theta} must lie strictly between 0 and 1"));
        }
        let zeta_2 = zeta(2, theta);
        let zeta_n = zeta(items, theta);
        // With 1 or 2 items every draw ends in the first two branches of `rank`, and
        // 1 - zeta_2 / zeta_n would be 0 (2 items): eta is never used there.
        let eta = if items <= 2 {
            0.0
        } else {
            (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta_2 / zeta_n)
        };
        Ok(Zipfian { items, theta, alpha: 1.0 / (1.0 - theta), zeta_n, eta })
    }

    /// The rank for a uniform `u` in `[0, 1)`.
    pub fn rank(&self, u: f64) -> u64 {
        debug_assert!((0.0..1.0).contains(&u), "u = {u}");
        let uz = u * self.zeta_n;
        let rank = if uz < 1.0 {
            0
        } else if uz < 1.0 + 0.5f64.powf(self.theta) {
            1
        } else {
            // A float-to-int cast saturates; the clamp keeps rounding at the top in range.
            (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
        };
        rank.min(self.items - 1)
    }
}

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
        /// Rank generator.
        zipf: Zipfian,
        /// Rank to page.
        scramble: Scramble,
    },
}

impl PageChooser {
    /// The next page, drawn with `rng`.
    pub fn next(&self, rng: &mut fastrand::Rng) -> u64 {
        match self {
            PageChooser::Uniform { items } => rng.u64(0..*items),
            PageChooser::Zipfian { zipf, scramble } => scramble.page(zipf.rank(rng.f64())),
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
    fn zipfian_ranks_are_in_range_and_skewed() {
        let zipf = Zipfian::new(10_000, 0.99).unwrap();
        let mut rng = fastrand::Rng::with_seed(7);
        let mut counts = vec![0u64; 10_000];
        let draws = 200_000;
        for _ in 0..draws {
            counts[zipf.rank(rng.f64()) as usize] += 1;
        }
        // With theta 0.99 over 10^4 items rank 0 takes about 1/zeta(n) ~ 10% of the draws,
        // rank 1 about half of that, and the top 1% of ranks well over a third.
        let share0 = counts[0] as f64 / draws as f64;
        assert!((0.07..0.14).contains(&share0), "{share0}");
        assert!(counts[1] > counts[0] / 3 && counts[1] < counts[0], "{} {}", counts[0], counts[1]);
        let top: u64 = counts[..100].iter().sum();
        assert!(top as f64 / draws as f64 > 0.35, "{top}");
        for (u, rank) in [(0.0, 0), (0.999_999_999, 9_999)] {
            assert!(zipf.rank(u) <= rank);
        }
    }

    #[test]
    fn tiny_and_bad_zipfians() {
        for items in [1u64, 2, 3] {
            let zipf = Zipfian::new(items, 0.99).unwrap();
            let mut rng = fastrand::Rng::with_seed(1);
            for _ in 0..1000 {
                assert!(zipf.rank(rng.f64()) < items);
            }
        }
        assert!(Zipfian::new(0, 0.99).is_err());
        assert!(Zipfian::new(10, 1.0).is_err());
        assert!(Zipfian::new(10, f64::NAN).is_err());
    }

    #[test]
    fn choosers_repeat_with_the_seed() {
        let chooser = PageChooser::Zipfian {
            zipf: Zipfian::new(500, 0.99).unwrap(),
            scramble: Scramble::new(500),
        };
        let draw = |seed| {
            let mut rng = fastrand::Rng::with_seed(seed);
            (0..100).map(|_| chooser.next(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert!(draw(3).iter().all(|&page| page < 500));
        let uniform = PageChooser::Uniform { items: 7 };
        let mut rng = fastrand::Rng::with_seed(3);
        assert!((0..100).all(|_| uniform.next(&mut rng) < 7));
    }
}
