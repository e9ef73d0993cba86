//! The bytes of one simulated file, stored sparsely in 4 KiB pages shared copy-on-write.
//!
//! Files in tierkv grow in 64 MiB chunks by default, so a dense `Vec<u8>` per file would cost
//! 64 MiB per crash image for a few bytes of data. Pages that were never written are absent and
//! read as zeros; cloning a `Contents` copies page pointers, not bytes.
//!
//! Invariants:
//! 1. No page starts at or past `len`.
//! 2. Every stored byte at an offset `>= len` is zero, so growing the file again (set_len, a
//!    write past the end) exposes zeros, as ftruncate and fallocate do.
//!
//! Must never: read or write past `len` (callers check the range first; this module asserts).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Size of one storage page. Unrelated to any crash granularity; only a storage unit.
const PAGE_BYTES: usize = 4096;

/// `PAGE_BYTES` as a file offset quantity.
const PAGE_BYTES_U64: u64 = PAGE_BYTES as u64;

type Page = [u8; PAGE_BYTES];

/// The contents of one simulated inode.
#[derive(Clone, Default)]
pub(crate) struct Contents {
    len_bytes: u64,
    /// Page index (offset / PAGE_BYTES) to page. Absent pages are all zeros.
    pages: BTreeMap<u64, Arc<Page>>,
}

impl Contents {
    /// The file size in bytes.
    pub(crate) fn len(&self) -> u64 {
        self.len_bytes
    }

    /// Copies `buf.len()` bytes at `offset` into `buf`. The range must lie inside the file.
    pub(crate) fn read(&self, offset: u64, buf: &mut [u8]) {
        let end = offset + buf.len() as u64;
        assert!(end <= self.len_bytes, "read {offset}..{end} past the end {}", self.len_bytes);
        let mut done = 0usize;
        // Bounded: one iteration per page touched.
        while done < buf.len() {
            let at = offset + done as u64;
            let (index, within) = (at / PAGE_BYTES_U64, (at % PAGE_BYTES_U64) as usize);
            let count = (PAGE_BYTES - within).min(buf.len() - done);
            match self.pages.get(&index) {
                Some(page) => {
                    buf[done..done + count].copy_from_slice(&page[within..within + count])
                }
                None => buf[done..done + count].fill(0),
            }
            done += count;
        }
    }

    /// Writes `bytes` at `offset`, extending the file with zeros first if the write ends past
    /// the current end.
    pub(crate) fn write(&mut self, offset: u64, bytes: &[u8]) {
        let end = offset + bytes.len() as u64;
        if end > self.len_bytes {
            self.len_bytes = end;
        }
        let mut done = 0usize;
        // Bounded: one iteration per page touched.
        while done < bytes.len() {
            let at = offset + done as u64;
            let (index, within) = (at / PAGE_BYTES_U64, (at % PAGE_BYTES_U64) as usize);
            let count = (PAGE_BYTES - within).min(bytes.len() - done);
            let page = self.pages.entry(index).or_insert_with(|| Arc::new([0u8; PAGE_BYTES]));
            Arc::make_mut(page)[within..within + count].copy_from_slice(&bytes[done..done + count]);
            done += count;
        }
        debug_assert!(self.invariants_hold());
    }

    /// Sets the size exactly. Shrinking discards the bytes past `len` for good.
    pub(crate) fn set_len(&mut self, len: u64) {
        if len < self.len_bytes {
            let first_dropped = len.div_ceil(PAGE_BYTES_U64);
            let _dropped = self.pages.split_off(&first_dropped);
            let within = (len % PAGE_BYTES_U64) as usize;
            if within != 0 {
                if let Some(page) = self.pages.get_mut(&(len / PAGE_BYTES_U64)) {
                    // Invariant 2: the tail of the last page must read as zeros if the file
                    // grows again.
                    Arc::make_mut(page)[within..].fill(0);
                }
            }
        }
        self.len_bytes = len;
        debug_assert!(self.invariants_hold());
    }

    /// The whole file as one vector.
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        let len = usize::try_from(self.len_bytes).unwrap_or(usize::MAX);
        let mut out = vec![0u8; len];
        self.read(0, &mut out);
        out
    }

    fn invariants_hold(&self) -> bool {
        self.pages.keys().next_back().is_none_or(|&last| last * PAGE_BYTES_U64 < self.len_bytes)
    }
}

impl PartialEq for Contents {
    /// Equal when the bytes are equal, however they are stored (an absent page equals a page
    /// of zeros).
    fn eq(&self, other: &Contents) -> bool {
        if self.len_bytes != other.len_bytes {
            return false;
        }
        let zero = [0u8; PAGE_BYTES];
        let indexes = self.pages.keys().chain(other.pages.keys());
        indexes.into_iter().all(|index| {
            let left = self.pages.get(index).map_or(&zero, |page| &**page);
            let right = other.pages.get(index).map_or(&zero, |page| &**page);
            left == right
        })
    }
}

impl Eq for Contents {}

impl fmt::Debug for Contents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Contents {{ len_bytes: {}, pages: {} }}", self.len_bytes, self.pages.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_reads_and_truncation_match_a_dense_vector() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut sparse = Contents::default();
        let mut dense: Vec<u8> = Vec::new();
        for _ in 0..500 {
            if rng.u8(..) < 40 {
                let len = rng.usize(..20_000);
                sparse.set_len(len as u64);
                dense.resize(len, 0);
            } else {
                let offset = rng.usize(..20_000);
                let bytes: Vec<u8> = (0..rng.usize(1..9000)).map(|_| rng.u8(..)).collect();
                sparse.write(offset as u64, &bytes);
                if dense.len() < offset + bytes.len() {
                    dense.resize(offset + bytes.len(), 0);
                }
                dense[offset..offset + bytes.len()].copy_from_slice(&bytes);
            }
            assert_eq!(sparse.len(), dense.len() as u64);
            assert_eq!(sparse.to_vec(), dense);
        }
    }

    #[test]
    fn equality_ignores_how_zeros_are_stored() {
        let mut written = Contents::default();
        written.write(5000, &[0u8; 100]);
        let mut extended = Contents::default();
        extended.set_len(5100);
        assert_eq!(written, extended);
        extended.write(0, &[1]);
        assert_ne!(written, extended);
    }
}
