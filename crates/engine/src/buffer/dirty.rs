//! Which pages are dirty: changed in their frames since their image was last taken for the
//! block store. One bit per page id, in chunks made on first use, so a store pays for the
//! ids it uses; setting a bit that is set already writes nothing.
//!
//! The protocol with the frame latches: a writer sets a page's bit while it holds the page
//! exclusively, after changing it; write-back clears the bit and copies the image under the
//! page's shared latch. So a change is in the copy, or its bit is set again after it.
//!
//! Must never: report a page clean whose change was not in an image taken after it.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Page ids per chunk of bits (8 KiB of bits).
const CHUNK_PIDS: u64 = 1 << 16;

/// Chunks under one entry of the top level.
const FANOUT: usize = 256;

type Chunk = Box<[AtomicU64]>;
type Middle = Box<[OnceLock<Chunk>]>;

/// One bit per page id: dirty or not. Two levels of tables above the chunks of bits, each
/// made on first use, so a store of a few pages pays a few hundred bytes, whatever the ids
/// its frames could address.
pub struct DirtyMap {
    top: Box<[OnceLock<Middle>]>,
    /// Middle tables made, for the memory they count.
    middles: AtomicUsize,
    /// Chunks made, for the memory they count.
    made: AtomicUsize,
    /// Bits set.
    count: AtomicUsize,
}

impl std::fmt::Debug for DirtyMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirtyMap").field("chunks", &self.made.load(Ordering::Relaxed)).finish()
    }
}

impl DirtyMap {
    /// A map for page ids below `pages`, all clean.
    pub fn new(pages: u64) -> DirtyMap {
        let chunks = pages.div_ceil(CHUNK_PIDS) as usize;
        DirtyMap {
            top: (0..chunks.div_ceil(FANOUT)).map(|_| OnceLock::new()).collect(),
            middles: AtomicUsize::new(0),
            made: AtomicUsize::new(0),
            count: AtomicUsize::new(0),
        }
    }

    fn word(&self, pid: u64, make: bool) -> Option<(&AtomicU64, u64)> {
        let chunk = (pid / CHUNK_PIDS) as usize;
        let middle = self.top.get(chunk / FANOUT)?;
        let middle = if make {
            middle.get_or_init(|| {
                self.middles.fetch_add(1, Ordering::Relaxed);
                (0..FANOUT).map(|_| OnceLock::new()).collect()
            })
        } else {
            middle.get()?
        };
        let slot = &middle[chunk % FANOUT];
        let words = if make {
            slot.get_or_init(|| {
                self.made.fetch_add(1, Ordering::Relaxed);
                (0..CHUNK_PIDS / 64).map(|_| AtomicU64::new(0)).collect()
            })
        } else {
            slot.get()?
        };
        let within = pid % CHUNK_PIDS;
        Some((&words[(within / 64) as usize], 1 << (within % 64)))
    }

    /// Marks `pid` dirty (its writer holds it exclusively); whether it was clean.
    pub fn set(&self, pid: u64) -> bool {
        let (word, bit) = self.word(pid, true).expect("invariant: a page id inside the frames");
        let was_clean = word.load(Ordering::Relaxed) & bit == 0
            && word.fetch_or(bit, Ordering::Relaxed) & bit == 0;
        if was_clean {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
        debug_assert!(self.is_set(pid));
        was_clean
    }

    /// Marks `pid` clean; whether it was dirty.
    pub fn clear(&self, pid: u64) -> bool {
        let Some((word, bit)) = self.word(pid, false) else { return false };
        let was = word.fetch_and(!bit, Ordering::Relaxed) & bit != 0;
        if was {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        was
    }

    /// How many pages are dirty.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Whether `pid` is dirty.
    pub fn is_set(&self, pid: u64) -> bool {
        self.word(pid, false).is_some_and(|(word, bit)| word.load(Ordering::Relaxed) & bit != 0)
    }

    /// The dirty page ids, ascending.
    pub fn pages(&self) -> Vec<u64> {
        let mut out = Vec::new();
        for (high, middle) in self.top.iter().enumerate() {
            let Some(middle) = middle.get() else { continue };
            for (low, chunk) in middle.iter().enumerate() {
                let Some(words) = chunk.get() else { continue };
                let first = (high * FANOUT + low) as u64 * CHUNK_PIDS;
                for (at, word) in words.iter().enumerate() {
                    let mut bits = word.load(Ordering::Relaxed);
                    while bits != 0 {
                        out.push(first + at as u64 * 64 + u64::from(bits.trailing_zeros()));
                        bits &= bits - 1;
                    }
                }
            }
        }
        out
    }

    /// Bytes the map takes.
    pub fn bytes(&self) -> usize {
        let slot = std::mem::size_of::<OnceLock<Middle>>();
        self.top.len() * slot
            + self.middles.load(Ordering::Relaxed) * FANOUT * std::mem::size_of::<OnceLock<Chunk>>()
            + self.made.load(Ordering::Relaxed) * (CHUNK_PIDS / 8) as usize
    }
}

#[cfg(test)]
mod tests;
