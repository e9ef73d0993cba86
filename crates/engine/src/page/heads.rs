//! Search heads: a cache-friendly index over a page's sorted keys, so a lookup touches one
//! small array instead of a key (and a cache miss) per step of a binary search.
//!
//! The keys of a page share a prefix (YCSB's all start with `user`, and the keys under one
//! internal page share more). `KeyHeads` keeps that prefix once and, for each key, the next
//! eight bytes after it as a big-endian `u64` (zero-padded). Heads are in key order, ties
//! allowed: if `a < b` then `head(a) <= head(b)`, because the first byte where the suffixes
//! differ is either inside the eight (and decides the heads the same way) or beyond them
//! (equal heads), and a suffix that is a prefix of the other pads with zeros. So a search
//! for `key` narrows to the run of keys whose head equals `key`'s: every key before the run
//! is below `key`, every key after it above, and only the run is compared in full.
//!
//! Heads are built only for pages that will not change: a decoded or packed leaf (the same
//! condition as its image) and a decoded internal page; whatever changes a page's keys drops
//! them. A page without heads (or whose heads do not match its entry count) searches as
//! before. Debug builds check every fast search against the plain one.
//!
//! Must never: narrow a search to a range that leaves out the key's position.

use std::cmp::Ordering;

/// The heads of a page's keys (see the module header); empty when not built.
#[derive(Clone, Debug, Default)]
pub struct KeyHeads {
    prefix: Box<[u8]>,
    heads: Box<[u64]>,
}

/// Where a key falls among a page's keys, from their heads alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Narrow {
    /// Below every key.
    Below,
    /// Above every key.
    Above,
    /// Keys before `.0` are below it, keys from `.1` on above it; those between share its
    /// head and must be compared in full.
    Run(usize, usize),
}

/// The eight bytes of `suffix` after nothing, big-endian, zero-padded.
fn head(suffix: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let len = suffix.len().min(8);
    bytes[..len].copy_from_slice(&suffix[..len]);
    u64::from_be_bytes(bytes)
}

impl KeyHeads {
    /// The heads of `keys`, which must be sorted ascending.
    pub fn build<'a>(keys: impl ExactSizeIterator<Item = &'a [u8]> + Clone) -> KeyHeads {
        let mut all = keys.clone();
        let (Some(first), Some(last)) = (all.next(), keys.clone().last()) else {
            return KeyHeads::default();
        };
        // The keys are sorted, so what the first and last share, every key shares.
        let common = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        KeyHeads {
            prefix: first[..common].into(),
            heads: keys.map(|key| head(&key[common..])).collect(),
        }
    }

    /// How many keys it covers (0 when not built).
    pub fn len(&self) -> usize {
        self.heads.len()
    }

    /// Bytes of its two allocations.
    pub fn heap_bytes(&self) -> usize {
        self.prefix.len() + self.heads.len() * 8
    }

    /// Where `key` falls (see `Narrow`).
    pub fn narrow(&self, key: &[u8]) -> Narrow {
        let shared = self.prefix.len().min(key.len());
        match key[..shared].cmp(&self.prefix[..shared]) {
            Ordering::Less => return Narrow::Below,
            Ordering::Greater => return Narrow::Above,
            // A key that stops inside the prefix is below every key that carries all of it.
            Ordering::Equal if key.len() < self.prefix.len() => return Narrow::Below,
            Ordering::Equal => {}
        }
        let wanted = head(&key[self.prefix.len()..]);
        let low = self.heads.partition_point(|&h| h < wanted);
        let high = low + self.heads[low..].partition_point(|&h| h == wanted);
        Narrow::Run(low, high)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Where `key` sits among `keys` by plain comparison: (count below, count at or below).
    fn plain(keys: &[Vec<u8>], key: &[u8]) -> (usize, usize) {
        (
            keys.partition_point(|k| k.as_slice() < key),
            keys.partition_point(|k| k.as_slice() <= key),
        )
    }

    fn check(keys: &[Vec<u8>], key: &[u8]) {
        let heads = KeyHeads::build(keys.iter().map(Vec::as_slice));
        let (below, at_or_below) = plain(keys, key);
        match heads.narrow(key) {
            Narrow::Below => assert_eq!(at_or_below, 0, "{key:?} in {keys:?}"),
            Narrow::Above => assert_eq!(below, keys.len(), "{key:?} in {keys:?}"),
            Narrow::Run(low, high) => {
                assert!(low <= below && at_or_below <= high, "{key:?} in {keys:?}: {low}..{high}");
            }
        }
    }

    #[test]
    fn ycsb_keys_narrow_to_their_own_head() {
        let mut keys: Vec<Vec<u8>> =
            (0..100u64).map(|n| format!("user{}", n * 7919 + 1_000_000).into_bytes()).collect();
        keys.sort();
        let heads = KeyHeads::build(keys.iter().map(Vec::as_slice));
        assert_eq!(&*heads.prefix, b"user1");
        for (at, key) in keys.iter().enumerate() {
            match heads.narrow(key) {
                Narrow::Run(low, high) => assert!(low <= at && at < high && high - low <= 2),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(heads.narrow(b"user0"), Narrow::Below);
        assert_eq!(heads.narrow(b"user"), Narrow::Below);
        assert_eq!(heads.narrow(b"user2"), Narrow::Above);
        assert_eq!(heads.narrow(b"usex"), Narrow::Above);
    }

    #[test]
    fn an_empty_page_has_no_heads() {
        assert_eq!(KeyHeads::build(std::iter::empty::<&[u8]>()).len(), 0);
    }

    proptest! {
        /// Short keys over a small alphabet: shared prefixes, prefixes of each other, zero
        /// bytes and suffixes longer than eight bytes all come up.
        #[test]
        fn narrowing_never_leaves_out_a_keys_position(
            keys in proptest::collection::btree_set(
                proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(b'a'), Just(255)], 0..14),
                1..40,
            ),
            probes in proptest::collection::vec(
                proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(b'a'), Just(255)], 0..14),
                1..20,
            ),
        ) {
            let keys: Vec<Vec<u8>> = keys.into_iter().collect();
            for probe in probes.iter().chain(&keys) {
                check(&keys, probe);
            }
        }
    }
}
