//! `KeyRange`: the ranges of keys that `range` and `delete_range` take, each turned into
//! one form, an inclusive lower bound and an exclusive upper one.
//!
//! The trait is implemented for every standard range of a key type `K: AsRef<[u8]>`, and
//! for `..`, which names no key type: so `db.range(..)` needs no annotation (a bound of
//! `RangeBounds<K>` would leave `K` unknown there). It is sealed: the one form is an internal
//! matter, free to change.
//!
//! Must never: widen a range (an excluded bound becomes the next key, never the key
//! itself); treat an empty or inverted range as anything but empty.

use std::ops::{Bound, Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

/// A range of keys: `..`, `a..b`, `a..`, `..b`, `a..=b`, `..=b`, or a pair of
/// [`Bound`]s, with keys of any type that is `AsRef<[u8]>` (`&[u8]`, `&[u8; N]`, `&str`,
/// `Vec<u8>`, `String`, ...). An empty or inverted range holds no key.
///
/// ```
/// # fn main() -> tierkv::Result<()> {
/// # let dir = tempfile::tempdir().expect("a temporary directory");
/// # let db = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
/// use std::ops::Bound;
///
/// let (low, high) = (b"a".to_vec(), b"c".to_vec());
/// assert_eq!(db.range(..).count(), 0);
/// assert_eq!(db.range(b"a"..b"c").count(), 0);
/// assert_eq!(db.range("a"..="c").count(), 0);
/// assert_eq!(db.range(low.as_slice()..high.as_slice()).count(), 0);
/// assert_eq!(db.range((Bound::Excluded(low), Bound::Unbounded)).count(), 0);
/// # Ok(())
/// # }
/// ```
pub trait KeyRange: sealed::Bounds {}

impl<R: sealed::Bounds> KeyRange for R {}

/// A range as an inclusive lower bound and an exclusive upper bound (`None`: no end).
pub(crate) type KeyBounds = (Vec<u8>, Option<Vec<u8>>);

pub(crate) mod sealed {
    /// Turns a range into `KeyBounds`. Outside the crate it cannot be named, so
    /// `KeyRange` cannot be implemented there.
    pub trait Bounds {
        /// The range as an inclusive lower bound and an exclusive upper bound.
        fn key_bounds(self) -> super::KeyBounds;
    }
}

/// Turns the bounds of any standard range into `KeyBounds`.
fn convert<K: AsRef<[u8]>>(low: Bound<&K>, high: Bound<&K>) -> KeyBounds {
    let low = match low {
        Bound::Included(key) => key.as_ref().to_vec(),
        Bound::Excluded(key) => successor(key.as_ref()),
        Bound::Unbounded => Vec::new(),
    };
    let high = match high {
        Bound::Included(key) => Some(successor(key.as_ref())),
        Bound::Excluded(key) => Some(key.as_ref().to_vec()),
        Bound::Unbounded => None,
    };
    (low, high)
}

impl sealed::Bounds for RangeFull {
    fn key_bounds(self) -> KeyBounds {
        (Vec::new(), None)
    }
}

impl<K: AsRef<[u8]>> sealed::Bounds for Range<K> {
    fn key_bounds(self) -> KeyBounds {
        convert(Bound::Included(&self.start), Bound::Excluded(&self.end))
    }
}

impl<K: AsRef<[u8]>> sealed::Bounds for RangeFrom<K> {
    fn key_bounds(self) -> KeyBounds {
        convert(Bound::Included(&self.start), Bound::Unbounded)
    }
}

impl<K: AsRef<[u8]>> sealed::Bounds for RangeTo<K> {
    fn key_bounds(self) -> KeyBounds {
        convert(Bound::Unbounded, Bound::Excluded(&self.end))
    }
}

impl<K: AsRef<[u8]>> sealed::Bounds for RangeInclusive<K> {
    fn key_bounds(self) -> KeyBounds {
        convert(Bound::Included(self.start()), Bound::Included(self.end()))
    }
}

impl<K: AsRef<[u8]>> sealed::Bounds for RangeToInclusive<K> {
    fn key_bounds(self) -> KeyBounds {
        convert(Bound::Unbounded, Bound::Included(&self.end))
    }
}

impl<K: AsRef<[u8]>> sealed::Bounds for (Bound<K>, Bound<K>) {
    fn key_bounds(self) -> KeyBounds {
        convert(self.0.as_ref(), self.1.as_ref())
    }
}

/// The bounds of the keys that start with `prefix`.
pub(crate) fn prefix_bounds(prefix: &[u8]) -> KeyBounds {
    (prefix.to_vec(), prefix_end(prefix))
}

/// Whether bounds hold no key.
pub(crate) fn is_empty(bounds: &KeyBounds) -> bool {
    bounds.1.as_ref().is_some_and(|high| *high <= bounds.0)
}

/// The smallest key above `key`.
pub(crate) fn successor(key: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    next
}

/// The smallest key above every key that starts with `prefix` (`None`: there is none).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::sealed::Bounds;
    use super::*;

    #[test]
    fn every_range_form_gives_its_bounds() {
        let some = |key: &[u8]| Some(key.to_vec());
        assert_eq!((..).key_bounds(), (vec![], None));
        assert_eq!((b"a"..b"c").key_bounds(), (b"a".to_vec(), some(b"c")));
        assert_eq!(("a"..).key_bounds(), (b"a".to_vec(), None));
        assert_eq!((..vec![b'c']).key_bounds(), (vec![], some(b"c")));
        assert_eq!((b"a".as_slice()..=b"c".as_slice()).key_bounds(), (b"a".to_vec(), some(b"c\0")));
        assert_eq!((..=String::from("c")).key_bounds(), (vec![], some(b"c\0")));
        let pair = (Bound::Excluded(b"a".to_vec()), Bound::Included(b"c".to_vec()));
        assert_eq!(pair.key_bounds(), (b"a\0".to_vec(), some(b"c\0")));
        assert!(is_empty(&(b"c"..b"a").key_bounds()));
        assert!(is_empty(&(b"a"..b"a").key_bounds()));
        assert!(!is_empty(&(b"a"..=b"a").key_bounds()));
    }

    #[test]
    fn a_prefix_ends_after_its_last_byte_that_can_grow() {
        assert_eq!(prefix_bounds(b"ab"), (b"ab".to_vec(), Some(b"ac".to_vec())));
        assert_eq!(prefix_bounds(b"a\xff"), (b"a\xff".to_vec(), Some(b"b".to_vec())));
        assert_eq!(prefix_bounds(b"\xff\xff"), (b"\xff\xff".to_vec(), None));
        assert_eq!(prefix_bounds(b""), (vec![], None));
    }
}
