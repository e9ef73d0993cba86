//! The request generators of YCSB's core workloads, written from their definitions (YCSB's
//! `CoreWorkload`, `ZipfianGenerator`, `ScrambledZipfianGenerator`, `SkewedLatestGenerator`
//! and Gray et al., "Quickly generating billion-record synthetic databases", SIGMOD 1994),
//! so that a run here asks for the same keys with the same frequencies as YCSB's own client.
//!
//! - Keys: `user` and the decimal FNV-64 hash of the key number (`key_name`), so that keys
//!   inserted in number order land in hashed order.
//! - `Zipfian`: item `i` (from 0) is drawn with probability proportional to 1/(i+1)^θ, by
//!   Gray's method: one uniform draw, the first two items by the exact zeta thresholds, the
//!   rest by a closed-form inverse. The item count may grow between draws (inserts); the
//!   zeta sum then grows incrementally.
//! - `ScrambledZipfian`: a zipfian draw over 10^10 items (θ = 0.99, whose zeta sum is a
//!   constant), hashed with FNV-64 and reduced modulo the item count, so the popular items
//!   are spread over the key space instead of being the first ones.
//! - `SkewedLatest`: the newest key minus a zipfian draw over the keys inserted so far, so the
//!   newest keys are the most popular (workload D).
//!
//! Must never: return a key number outside the range it was asked for.

/// YCSB's zipfian constant θ.
pub const ZIPFIAN_THETA: f64 = 0.99;

/// The scrambled zipfian's count: YCSB draws over item numbers 0..=10^10 (10^10 + 1 items)
/// before hashing, with the zeta of 10^10 items (`SCRAMBLED_ZETA`).
const SCRAMBLED_ITEMS: u64 = 10_000_000_000;

/// zeta(10^10, 0.99): the sum of 1/i^0.99 for i in 1..=10^10, too long to add up at start. The
/// tests check it against the Euler–Maclaurin estimate of the sum.
const SCRAMBLED_ZETA: f64 = 26.469_028_201_783_02;

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 1_099_511_628_211;

/// FNV-1a over the 8 bytes of `value`, least significant first, as YCSB hashes a key number;
/// the result is made non-negative as a Java `long` would be by `Math.abs` (the one value
/// that stays negative in Java, 2^63, is kept as it is).
pub fn fnv64(value: u64) -> u64 {
    let mut hash = FNV_OFFSET_BASIS;
    let mut rest = value;
    for _ in 0..8 {
        hash ^= rest & 0xff;
        hash = hash.wrapping_mul(FNV_PRIME);
        rest >>= 8;
    }
    // Java's Math.abs of the hash read as a signed 64-bit number.
    let signed = hash as i64;
    if signed < 0 && signed != i64::MIN {
        signed.unsigned_abs()
    } else {
        hash
    }
}

/// The key of record `number`: `user` and the decimal FNV-64 hash of the number.
pub fn key_name(number: u64) -> String {
    format!("user{}", fnv64(number))
}

/// The sum of 1/i^θ for i in `from + 1 ..= to`.
fn zeta_range(from: u64, to: u64, theta: f64) -> f64 {
    (from + 1..=to).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

/// Zipfian draws over `base ..base + items` (see the module header).
#[derive(Clone, Debug)]
pub struct Zipfian {
    base: u64,
    theta: f64,
    alpha: f64,
    zeta2: f64,
    /// The item count the zeta sum and `eta` are for.
    items: u64,
    zetan: f64,
    eta: f64,
}

impl Zipfian {
    /// Draws over `items` items from `base`, with exponent `theta` (0 < θ < 1).
    pub fn new(base: u64, items: u64, theta: f64) -> Zipfian {
        let zetan = zeta_range(0, items, theta);
        Zipfian::with_zeta(base, items, theta, zetan)
    }

    fn with_zeta(base: u64, items: u64, theta: f64, zetan: f64) -> Zipfian {
        let zeta2 = zeta_range(0, 2, theta);
        let mut zipfian =
            Zipfian { base, theta, alpha: 1.0 / (1.0 - theta), zeta2, items, zetan, eta: 0.0 };
        zipfian.eta = zipfian.eta_for(items);
        zipfian
    }

    fn eta_for(&self, items: u64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    /// Sets the item count, growing the zeta sum by the new items only (or summing again
    /// when it shrinks).
    fn set_items(&mut self, items: u64) {
        if items == self.items {
            return;
        }
        self.zetan = match items > self.items {
            true => self.zetan + zeta_range(self.items, items, self.theta),
            false => zeta_range(0, items, self.theta),
        };
        self.items = items;
        self.eta = self.eta_for(items);
    }

    /// A draw over the current item count.
    pub fn next(&mut self, rng: &mut fastrand::Rng) -> u64 {
        let items = self.items.max(1);
        let u = rng.f64();
        let uz = u * self.zetan;
        if uz < 1.0 || items == 1 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        let offset = (items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        self.base + offset.min(items - 1)
    }

    /// A draw over `items` items (the count may have grown since the last draw).
    pub fn next_over(&mut self, items: u64, rng: &mut fastrand::Rng) -> u64 {
        self.set_items(items.max(1));
        self.next(rng)
    }
}

/// Scrambled zipfian draws over `min..=max` (see the module header).
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    min: u64,
    items: u64,
    zipfian: Zipfian,
}

impl ScrambledZipfian {
    /// Draws over `min..=max`.
    pub fn new(min: u64, max: u64) -> ScrambledZipfian {
        let zipfian = Zipfian::with_zeta(0, SCRAMBLED_ITEMS + 1, ZIPFIAN_THETA, SCRAMBLED_ZETA);
        ScrambledZipfian { min, items: max.saturating_sub(min) + 1, zipfian }
    }

    /// One draw.
    pub fn next(&mut self, rng: &mut fastrand::Rng) -> u64 {
        self.min + fnv64(self.zipfian.next(rng)) % self.items
    }
}

/// Draws that favour the newest keys (see the module header).
#[derive(Clone, Debug)]
pub struct SkewedLatest {
    zipfian: Zipfian,
}

impl SkewedLatest {
    /// Draws below a newest key number of `latest`, as the store has it now.
    pub fn new(latest: u64) -> SkewedLatest {
        SkewedLatest { zipfian: Zipfian::new(0, latest.max(1), ZIPFIAN_THETA) }
    }

    /// One draw, `latest` being the newest key number inserted: in `1..=latest`, `latest`
    /// the most likely (key 0 is never drawn, as in YCSB).
    pub fn next(&mut self, latest: u64, rng: &mut fastrand::Rng) -> u64 {
        let latest = latest.max(1);
        latest - self.zipfian.next_over(latest, rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_those_ycsb_loads_first() {
        // The first keys of YCSB's load phase, as its client prints them
        // (`INSERT usertable user6284781860667377211 ...`).
        assert_eq!(key_name(0), "user6284781860667377211");
        assert_eq!(key_name(1), "user8517097267634966620");
        assert_eq!(key_name(2), "user1820151046732198393");
        assert_eq!(key_name(3), "user4052466453699787802");
    }

    #[test]
    fn fnv64_is_never_above_java_long_max_but_for_its_one_exception() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..100_000 {
            let hash = fnv64(rng.u64(..));
            assert!(hash <= i64::MAX as u64 || hash == 1 << 63, "{hash}");
        }
    }

    /// The sum of 1/i^θ for i in 1..=n by Euler–Maclaurin: n^(1-θ)/(1-θ) + ζ(θ) + n^-θ/2 +
    /// θ n^(-θ-1)/12, with ζ(θ) from its Laurent series at 1 (1/(θ-1) + γ - γ1 (θ-1)).
    fn zeta_estimate(n: f64, theta: f64) -> f64 {
        const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;
        const STIELTJES_1: f64 = -0.072_815_845_483_676_72;
        let riemann = 1.0 / (theta - 1.0) + EULER_GAMMA - STIELTJES_1 * (theta - 1.0);
        n.powf(1.0 - theta) / (1.0 - theta)
            + riemann
            + n.powf(-theta) / 2.0
            + theta * n.powf(-theta - 1.0) / 12.0
    }

    #[test]
    fn the_zeta_sums_agree_with_their_estimate() {
        let exact = zeta_range(0, 1_000_000, ZIPFIAN_THETA);
        let estimate = zeta_estimate(1e6, ZIPFIAN_THETA);
        assert!((exact - estimate).abs() < 1e-4, "{exact} {estimate}");
        let estimate = zeta_estimate(SCRAMBLED_ITEMS as f64, ZIPFIAN_THETA);
        assert!((SCRAMBLED_ZETA - estimate).abs() < 1e-4, "{estimate}");
        // Growing the count adds only the new items.
        let mut zipfian = Zipfian::new(0, 1_000, ZIPFIAN_THETA);
        zipfian.set_items(5_000);
        assert!((zipfian.zetan - zeta_range(0, 5_000, ZIPFIAN_THETA)).abs() < 1e-9);
        zipfian.set_items(10);
        assert!((zipfian.zetan - zeta_range(0, 10, ZIPFIAN_THETA)).abs() < 1e-12);
    }

    #[test]
    fn zipfian_frequencies_follow_the_power_law() {
        let items = 1_000u64;
        let draws = 400_000;
        let mut zipfian = Zipfian::new(0, items, ZIPFIAN_THETA);
        let mut rng = fastrand::Rng::with_seed(11);
        let mut counts = vec![0u64; items as usize];
        for _ in 0..draws {
            let item = zipfian.next(&mut rng);
            assert!(item < items);
            counts[item as usize] += 1;
        }
        let zetan = zeta_range(0, items, ZIPFIAN_THETA);
        // The first two items are drawn exactly; later ones by the closed form, whose error
        // Gray et al. bound to a few per cent for the head.
        for (item, tolerance) in [(0usize, 0.02), (1, 0.03), (9, 0.15), (99, 0.25)] {
            let expected = draws as f64 / ((item + 1) as f64).powf(ZIPFIAN_THETA) / zetan;
            let ratio = counts[item] as f64 / expected;
            assert!((ratio - 1.0).abs() < tolerance, "item {item}: {ratio}");
        }
        // The whole head and tail: the top 10% of items take their share within 2%.
        let head: u64 = counts[..100].iter().sum();
        let expected = zeta_range(0, 100, ZIPFIAN_THETA) / zetan;
        let share = head as f64 / draws as f64;
        assert!((share - expected).abs() < 0.02, "{share} {expected}");
    }

    #[test]
    fn scrambled_draws_stay_in_range_and_spread_the_popular_keys() {
        let mut scrambled = ScrambledZipfian::new(100, 1_099);
        let mut rng = fastrand::Rng::with_seed(3);
        let mut counts = vec![0u64; 1_000];
        for _ in 0..200_000 {
            let key = scrambled.next(&mut rng);
            assert!((100..=1_099).contains(&key), "{key}");
            counts[(key - 100) as usize] += 1;
        }
        // The most popular key is the hash of zipfian item 0, not the first key.
        let top = (0..1_000).max_by_key(|&i| counts[i]).expect("keys");
        assert_eq!(top as u64 + 100, 100 + fnv64(0) % 1_000);
        // Skewed: the hottest key takes several times a uniform share.
        assert!(counts[top] > 10 * 200, "{}", counts[top]);
    }

    #[test]
    fn latest_favours_the_newest_keys_and_follows_inserts() {
        let mut latest = SkewedLatest::new(999);
        let mut rng = fastrand::Rng::with_seed(5);
        let mut newest = 0;
        for _ in 0..50_000 {
            let key = latest.next(999, &mut rng);
            assert!((1..=999).contains(&key), "{key}");
            newest += u64::from(key == 999);
        }
        // Item 0 of the zipfian over 999 keys: 1/zeta(999) of the draws.
        let expected = 50_000.0 / zeta_range(0, 999, ZIPFIAN_THETA);
        assert!((newest as f64 / expected - 1.0).abs() < 0.05, "{newest} {expected}");
        // After inserts, the new newest key is the most drawn.
        let mut counts = std::collections::HashMap::new();
        for _ in 0..20_000 {
            *counts.entry(latest.next(1_500, &mut rng)).or_insert(0u64) += 1;
        }
        let top = counts.iter().max_by_key(|(_, &count)| count).map(|(&key, _)| key);
        assert_eq!(top, Some(1_500));
        assert!(counts.keys().all(|&key| (1..=1_500).contains(&key)));
    }
}
