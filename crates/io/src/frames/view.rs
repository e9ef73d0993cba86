//! Byte access to a frame that other threads may read at the same time.
//!
//! An optimistic reader reads a frame while a writer may be changing it (it discards what it
//! read when validation fails). For that to be defined behaviour in Rust, every access to a
//! frame's bytes, reads and writes, is an atomic access: the frame is a slice of `AtomicU64`
//! words, read with relaxed loads and written, under the exclusive latch, with relaxed stores.
//! On x86-64 and AArch64 these are plain moves. The one exception is a long copy (64 bytes
//! or more) in or out on x86-64, made in inline assembly with 16-byte moves (outside the
//! language's memory model; the same plain loads and stores, twice as wide: see `copy_raw`). Values are little-endian; a field may sit at
//! any byte offset (an unaligned field costs a second word).
//!
//! [`FrameRead`] never panics on an offset: a torn read can produce any offset, so every
//! method checks its range and answers `None` past the frame's end.
//!
//! Must never: hand out a `&mut [u8]` of a frame (a plain write racing with an optimistic
//! reader's load would be a data race).

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::{AtomicU64, Ordering};

const WORD: usize = 8;

/// Copies at least this long go 64 bytes a step in 16-byte moves (`copy_raw`).
#[cfg(all(target_arch = "x86_64", not(miri)))]
const LONG_COPY: usize = 64;

/// Bytes of a cache line, the unit a prefetch asks for.
const PREFETCH_LINE: usize = 64;

/// Reads of one frame's bytes (its page image), valid for any offset.
#[derive(Clone, Copy)]
pub struct FrameRead<'a> {
    words: &'a [AtomicU64],
}

/// Writes into one frame held exclusively.
pub struct FrameWrite<'a> {
    words: &'a [AtomicU64],
}

impl std::fmt::Debug for FrameRead<'_> {
    #[inline]
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameRead").field("len", &self.len()).finish()
    }
}

impl std::fmt::Debug for FrameWrite<'_> {
    #[inline]
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameWrite").field("len", &(self.words.len() * WORD)).finish()
    }
}

#[inline]
fn in_range(len: usize, offset: usize, n: usize) -> bool {
    offset.checked_add(n).is_some_and(|end| end <= len)
}

impl<'a> FrameRead<'a> {
    #[inline]
    pub(crate) fn new(words: &'a [AtomicU64]) -> FrameRead<'a> {
        FrameRead { words }
    }

    /// The frame's size in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.words.len() * WORD
    }

    /// True for a frame of no bytes (never, for a real frame).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    #[inline]
    fn word(&self, index: usize) -> u64 {
        self.words[index].load(Ordering::Relaxed)
    }

    /// `n` (1 to 8) bytes at `offset` as the low bytes of a little-endian value; the caller
    /// checked the range.
    #[inline]
    fn load_le(&self, offset: usize, n: usize) -> u64 {
        debug_assert!((1..=WORD).contains(&n) && in_range(self.len(), offset, n));
        let (index, shift) = (offset / WORD, (offset % WORD) * 8);
        let mut value = self.word(index).to_le() >> shift;
        if shift != 0 && shift + n * 8 > 64 {
            value |= self.word(index + 1).to_le() << (64 - shift);
        }
        if n == WORD {
            value
        } else {
            value & ((1u64 << (n * 8)) - 1)
        }
    }

    /// The byte at `offset`.
    #[inline]
    pub fn u8(&self, offset: usize) -> Option<u8> {
        in_range(self.len(), offset, 1).then(|| self.load_le(offset, 1) as u8)
    }

    /// The little-endian `u16` at `offset`.
    #[inline]
    pub fn u16(&self, offset: usize) -> Option<u16> {
        in_range(self.len(), offset, 2).then(|| self.load_le(offset, 2) as u16)
    }

    /// The little-endian `u32` at `offset`.
    #[inline]
    pub fn u32(&self, offset: usize) -> Option<u32> {
        in_range(self.len(), offset, 4).then(|| self.load_le(offset, 4) as u32)
    }

    /// The little-endian `u64` at `offset`.
    #[inline]
    pub fn u64(&self, offset: usize) -> Option<u64> {
        in_range(self.len(), offset, 8).then(|| self.load_le(offset, 8))
    }

    /// The eight bytes at `offset` as a big-endian number, zero-padded past `end` (for
    /// comparing keys eight bytes at a time). `None` when `offset..end` leaves the frame.
    #[inline]
    pub fn head_be(&self, offset: usize, end: usize) -> Option<u64> {
        if end < offset || end > self.len() {
            return None;
        }
        let n = (end - offset).min(WORD);
        if n == 0 {
            return Some(0);
        }
        let bytes = self.load_le(offset, n).to_le_bytes();
        let mut head = [0u8; WORD];
        head[..n].copy_from_slice(&bytes[..n]);
        Some(u64::from_be_bytes(head))
    }

    /// Copies `out.len()` bytes from `offset` into `out`.
    #[inline]
    pub fn copy_to(&self, offset: usize, out: &mut [u8]) -> Option<()> {
        if !in_range(self.len(), offset, out.len()) {
            return None;
        }
        // SAFETY: `out` is valid for writes of its length, and the range was checked.
        unsafe { self.copy_raw(offset, out.as_mut_ptr(), out.len()) };
        Some(())
    }

    /// Appends the `len` bytes at `offset` to `out`, written straight into its spare
    /// capacity (no zero fill first, as `resize` and then `copy_to` would cost).
    #[inline]
    pub fn append_to(&self, offset: usize, len: usize, out: &mut Vec<u8>) -> Option<()> {
        if !in_range(self.len(), offset, len) {
            return None;
        }
        let start = out.len();
        out.reserve(len);
        // SAFETY: the reserve made `len` bytes of spare capacity after `start`, valid for
        // writes; the range of the frame was checked; `copy_raw` writes all `len` bytes, so
        // they are initialised when the length takes them in.
        unsafe {
            self.copy_raw(offset, out.as_mut_ptr().add(start), len);
            out.set_len(start + len);
        }
        debug_assert_eq!(out.len(), start + len);
        Some(())
    }

    /// Copies the `len` bytes at `offset` to `out`, writing every one of them and reading
    /// none.
    ///
    /// # Safety
    /// `offset..offset + len` lies in the frame, and `out` is valid for writes of `len`
    /// bytes that nothing else accesses meanwhile.
    #[inline]
    unsafe fn copy_raw(&self, offset: usize, out: *mut u8, len: usize) {
        debug_assert!(in_range(self.len(), offset, len));
        // Long copies (a value, a page image) 64 bytes a step, in 16-byte moves. Inline
        // assembly is outside Rust's memory model: its loads are the machine's plain loads,
        // which may see a writer's bytes half-changed, as the word loop's relaxed loads may;
        // the reader's validation discards such a copy either way (C++'s proposed byte-wise
        // atomic memcpy, P1478, is the same contract). The word loop below costs about 90 ns
        // more on a 1 KB value (a one-thread scan of 1 KB values held in L2: 500 against 410 ns
        // an entry).
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        if len >= LONG_COPY {
            // SAFETY: `offset..offset + len` lies in the frame (checked by the caller), and
            // `out` is valid for `len` bytes of writes that nothing else accesses (the
            // caller's promise), so the two do not overlap.
            unsafe { move_long(self.words.as_ptr().cast::<u8>().add(offset), out, len) };
            return;
        }
        let put = |at: usize, bytes: &[u8]| {
            // SAFETY: every call below writes inside `out[..len]` (the caller's promise).
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.add(at), bytes.len()) }
        };
        let mut done = 0;
        // Up to the next word boundary, then whole words, then the tail.
        let lead = ((WORD - offset % WORD) % WORD).min(len);
        if lead > 0 {
            put(0, &self.load_le(offset, lead).to_le_bytes()[..lead]);
            done = lead;
        }
        let first = (offset + done) / WORD;
        let whole = (len - done) / WORD;
        // One range check for the words, then a plain loop of loads and stores (the
        // compiler keeps relaxed loads apart, so it is unrolled by hand, four words a step).
        let words = &self.words[first..first + whole];
        let mut source = words.chunks_exact(4);
        for four in &mut source {
            let values = [
                four[0].load(Ordering::Relaxed).to_ne_bytes(),
                four[1].load(Ordering::Relaxed).to_ne_bytes(),
                four[2].load(Ordering::Relaxed).to_ne_bytes(),
                four[3].load(Ordering::Relaxed).to_ne_bytes(),
            ];
            for value in values {
                put(done, &value);
                done += WORD;
            }
        }
        for word in source.remainder() {
            put(done, &word.load(Ordering::Relaxed).to_ne_bytes());
            done += WORD;
        }
        if done < len {
            let bytes = self.word(first + whole).to_ne_bytes();
            put(done, &bytes[..len - done]);
        }
    }

    /// Hints that the bytes `from..to` are about to be read: the cache lines they lie on
    /// are fetched at once, in parallel, rather than one miss after another as a walk of
    /// the page's entries would. A hint only: it reads nothing, and a range past the frame
    /// is cut to it.
    #[inline]
    pub fn prefetch(&self, from: usize, to: usize) {
        self.lines(from, to).for_each(|line| self.prefetch_line(line));
    }

    /// The cache lines (numbered from the frame's start) that bytes `from..to` lie on,
    /// the range cut to the frame.
    #[inline]
    fn lines(&self, from: usize, to: usize) -> std::ops::Range<usize> {
        let to = to.min(self.len());
        if from >= to {
            return 0..0;
        }
        from / PREFETCH_LINE..(to - 1) / PREFETCH_LINE + 1
    }

    /// Asks for cache line `line` of the frame (one of `lines`).
    #[inline]
    fn prefetch_line(&self, line: usize) {
        debug_assert!(line * PREFETCH_LINE < self.len());
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: the line starts inside the frame (`lines` cuts the range to it); a
            // prefetch has no memory effects and never faults.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(
                    self.words.as_ptr().cast::<i8>().add(line * PREFETCH_LINE),
                );
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = line;
    }

    /// Appends `len` bytes from `offset` to `out`.
    #[inline]
    pub fn extend_into(&self, offset: usize, len: usize, out: &mut Vec<u8>) -> Option<()> {
        if !in_range(self.len(), offset, len) {
            return None;
        }
        let start = out.len();
        out.resize(start + len, 0);
        self.copy_to(offset, &mut out[start..])
    }

    /// Compares the `len` bytes at `offset` with `key`, as byte strings.
    #[inline]
    pub fn compare(&self, offset: usize, len: usize, key: &[u8]) -> Option<CmpOrdering> {
        if !in_range(self.len(), offset, len) {
            return None;
        }
        let common = len.min(key.len());
        let mut at = 0;
        while at < common {
            let n = (common - at).min(WORD);
            let mine = self.head_be(offset + at, offset + at + n)?;
            let mut theirs = [0u8; WORD];
            theirs[..n].copy_from_slice(&key[at..at + n]);
            match mine.cmp(&u64::from_be_bytes(theirs)) {
                CmpOrdering::Equal => at += n,
                other => return Some(other),
            }
        }
        Some(len.cmp(&key.len()))
    }
}

impl<'a> FrameWrite<'a> {
    #[inline]
    pub(crate) fn new(words: &'a [AtomicU64]) -> FrameWrite<'a> {
        FrameWrite { words }
    }

    /// Reads of the same frame.
    #[inline]
    pub fn read(&self) -> FrameRead<'_> {
        FrameRead::new(self.words)
    }

    /// The frame's size in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.words.len() * WORD
    }

    /// True for a frame of no bytes (never, for a real frame).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Writes `bytes` at `offset`. Panics past the frame's end: a writer holds the frame
    /// exclusively and computed the offset from bytes it checked, so that is a bug.
    #[inline]
    pub fn put(&mut self, offset: usize, bytes: &[u8]) {
        assert!(
            in_range(self.len(), offset, bytes.len()),
            "frame write of {} bytes at {offset} past the frame's {} bytes",
            bytes.len(),
            self.len()
        );
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        if bytes.len() >= LONG_COPY {
            // SAFETY: the range lies in the frame (asserted above), which this writer holds
            // exclusively (readers only load, and discard what they read when it changed);
            // `bytes` is a slice of its own, so the two do not overlap. See `copy_raw` for
            // why a plain store is what an optimistic reader needs.
            unsafe {
                let out = self.words.as_ptr().cast::<u8>().cast_mut().add(offset);
                move_long(bytes.as_ptr(), out, bytes.len());
            }
            return;
        }
        let mut done = 0;
        while done < bytes.len() {
            let at = offset + done;
            let (index, within) = (at / WORD, at % WORD);
            let n = (WORD - within).min(bytes.len() - done);
            let word = &self.words[index];
            if n == WORD {
                let mut whole = [0u8; WORD];
                whole.copy_from_slice(&bytes[done..done + WORD]);
                word.store(u64::from_ne_bytes(whole), Ordering::Relaxed);
            } else {
                // Only this writer stores into the frame: a load and a store merge the bytes.
                let mut merged = word.load(Ordering::Relaxed).to_ne_bytes();
                merged[within..within + n].copy_from_slice(&bytes[done..done + n]);
                word.store(u64::from_ne_bytes(merged), Ordering::Relaxed);
            }
            done += n;
        }
    }

    /// Writes a little-endian `u16` at `offset`.
    #[inline]
    pub fn put_u16(&mut self, offset: usize, value: u16) {
        self.put(offset, &value.to_le_bytes());
    }

    /// Writes a little-endian `u32` at `offset`.
    #[inline]
    pub fn put_u32(&mut self, offset: usize, value: u32) {
        self.put(offset, &value.to_le_bytes());
    }

    /// Writes a little-endian `u64` at `offset`.
    #[inline]
    pub fn put_u64(&mut self, offset: usize, value: u64) {
        self.put(offset, &value.to_le_bytes());
    }

    /// Writes the whole frame from `image` (exactly the frame's size).
    #[inline]
    pub fn put_all(&mut self, image: &[u8]) {
        assert_eq!(image.len(), self.len(), "a frame image of the wrong size");
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        if image.len() >= LONG_COPY {
            self.put(0, image);
            return;
        }
        for (word, chunk) in self.words.iter().zip(image.chunks_exact(WORD)) {
            let mut whole = [0u8; WORD];
            whole.copy_from_slice(chunk);
            word.store(u64::from_ne_bytes(whole), Ordering::Relaxed);
        }
    }

    /// Moves `len` bytes from `from` to `to` within the frame (the ranges may overlap).
    #[inline]
    pub fn copy_within(&mut self, from: usize, to: usize, len: usize) {
        assert!(in_range(self.len(), from, len) && in_range(self.len(), to, len));
        let mut buffer = [0u8; 256];
        // Copy in pieces, from the end when moving up, so an overlap reads before it writes.
        let pieces = len.div_ceil(buffer.len());
        for piece in 0..pieces {
            let k = if to > from { pieces - 1 - piece } else { piece };
            let start = k * buffer.len();
            let n = (len - start).min(buffer.len());
            let _ = self.read().copy_to(from + start, &mut buffer[..n]);
            self.put(to + start, &buffer[..n]);
        }
    }

    /// Zeroes `len` bytes at `offset`.
    #[inline]
    pub fn zero(&mut self, offset: usize, len: usize) {
        let zeros = [0u8; 256];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(zeros.len());
            self.put(offset + done, &zeros[..n]);
            done += n;
        }
    }
}

/// Copies `len` bytes (at least `LONG_COPY`) from `source` to `out`, 64 bytes a step in
/// 16-byte moves, then the last 64 bytes again (overlapping what the steps copied).
///
/// # Safety
/// `source` is valid for reads and `out` for writes of `len` bytes, the two ranges do not
/// overlap, and `len >= LONG_COPY`.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline]
unsafe fn move_long(source: *const u8, out: *mut u8, len: usize) {
    debug_assert!(len >= LONG_COPY);
    let blocks = len / 64;
    // SAFETY: the first call copies `len / 64` whole blocks (at least one: `len >= 64`)
    // inside both ranges; the second copies `len - 64..len`, inside both too (the caller's
    // promise).
    unsafe {
        move_blocks(source, out, blocks);
        if blocks * 64 < len {
            move_blocks(source.add(len - 64), out.add(len - 64), 1);
        }
    }
}

/// Copies `blocks` (at least one) runs of 64 bytes from `source` to `out`, in 16-byte moves.
///
/// # Safety
/// `source` is valid for reads and `out` for writes of `blocks * 64` bytes, and the two do
/// not overlap.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline]
unsafe fn move_blocks(source: *const u8, out: *mut u8, blocks: usize) {
    debug_assert!(blocks > 0);
    // SAFETY: the caller's promise covers every byte the loop moves; SSE2 is part of
    // x86-64, and the registers used are declared clobbered.
    unsafe {
        std::arch::asm!(
            "2:",
            "movdqu xmm0, [{src}]",
            "movdqu xmm1, [{src} + 16]",
            "movdqu xmm2, [{src} + 32]",
            "movdqu xmm3, [{src} + 48]",
            "movdqu [{dst}], xmm0",
            "movdqu [{dst} + 16], xmm1",
            "movdqu [{dst} + 32], xmm2",
            "movdqu [{dst} + 48], xmm3",
            "add {src}, 64",
            "add {dst}, 64",
            "dec {n}",
            "jnz 2b",
            src = inout(reg) source => _,
            dst = inout(reg) out => _,
            n = inout(reg) blocks => _,
            out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
            options(nostack)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[inline]
    fn frame(bytes: &[u8]) -> Vec<AtomicU64> {
        assert_eq!(bytes.len() % WORD, 0);
        bytes
            .chunks_exact(WORD)
            .map(|c| AtomicU64::new(u64::from_ne_bytes(c.try_into().expect("8 bytes"))))
            .collect()
    }

    #[inline]
    fn bytes_of(words: &[AtomicU64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.load(Ordering::Relaxed).to_ne_bytes()).collect()
    }

    proptest! {
        #[test]
        fn reads_equal_the_same_reads_of_a_byte_slice(
            image in proptest::collection::vec(any::<u8>(), 256..=256),
            offset in 0usize..280,
            len in 0usize..200,
            key in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let words = frame(&image);
            let read = FrameRead::new(&words);
            let slice = image.get(offset..offset.saturating_add(len));
            let mut out = vec![0u8; len];
            prop_assert_eq!(read.copy_to(offset, &mut out).is_some(), slice.is_some());
            let mut appended = key.clone();
            prop_assert_eq!(read.append_to(offset, len, &mut appended).is_some(), slice.is_some());
            if let Some(slice) = slice {
                prop_assert_eq!(&out[..], slice);
                prop_assert_eq!(&appended[..key.len()], &key[..]);
                prop_assert_eq!(&appended[key.len()..], slice);
                prop_assert_eq!(read.compare(offset, len, &key), Some(slice.cmp(&key[..])));
                let mut head = [0u8; 8];
                let n = len.min(8);
                head[..n].copy_from_slice(&slice[..n]);
                prop_assert_eq!(read.head_be(offset, offset + len), Some(u64::from_be_bytes(head)));
            } else {
                prop_assert_eq!(&appended[..], &key[..], "a refused append leaves out as it was");
                prop_assert_eq!(read.compare(offset, len, &key), None);
            }
            let u16_want = image.get(offset..offset + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
            prop_assert_eq!(read.u16(offset), u16_want);
            let u32_want = image.get(offset..offset + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()));
            prop_assert_eq!(read.u32(offset), u32_want);
            let u64_want = image.get(offset..offset + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
            prop_assert_eq!(read.u64(offset), u64_want);
        }

        #[test]
        fn writes_equal_the_same_writes_of_a_byte_slice(
            image in proptest::collection::vec(any::<u8>(), 48..=48),
            ops in proptest::collection::vec((0usize..48, proptest::collection::vec(any::<u8>(), 0..20), 0usize..48, 0usize..24), 1..10),
        ) {
            let words = frame(&image);
            let mut model = image.clone();
            let mut write = FrameWrite::new(&words);
            for (offset, bytes, to, len) in ops {
                if offset + bytes.len() <= model.len() {
                    write.put(offset, &bytes);
                    model[offset..offset + bytes.len()].copy_from_slice(&bytes);
                }
                if offset + len <= model.len() && to + len <= model.len() {
                    write.copy_within(offset, to, len);
                    model.copy_within(offset..offset + len, to);
                }
            }
            prop_assert_eq!(bytes_of(&words), model);
        }
    }

    #[test]
    fn copies_of_every_length_around_the_long_copy_step_at_every_alignment_are_exact() {
        let image: Vec<u8> = (0..1024u32).map(|i| (i * 7 + i / 256) as u8).collect();
        let words = frame(&image);
        let read = FrameRead::new(&words);
        let lengths = [0, 1, 7, 8, 15, 16, 63, 64, 65, 100, 127, 128, 129, 191, 192, 1000, 1008];
        for offset in 0..16 {
            for len in lengths {
                // Guard bytes on both sides: a copy writes its range and nothing else.
                let mut out = vec![0xA5u8; len + 32];
                read.copy_to(offset, &mut out[16..16 + len]).expect("in range");
                assert_eq!(&out[16..16 + len], &image[offset..offset + len], "{offset} {len}");
                assert!(out[..16].iter().chain(&out[16 + len..]).all(|&b| b == 0xA5));
                let mut appended = vec![9u8; 3];
                read.append_to(offset, len, &mut appended).expect("in range");
                assert_eq!(appended.len(), 3 + len);
                assert_eq!(&appended[3..], &image[offset..offset + len], "{offset} {len}");
            }
        }
        assert_eq!(read.copy_to(1024 - 64, &mut [0u8; 65]), None, "one byte past the end");
    }

    #[test]
    fn writes_of_every_length_around_the_long_copy_step_at_every_alignment_are_exact() {
        let lengths = [1, 7, 8, 63, 64, 65, 100, 127, 128, 129, 191, 192, 1000];
        for offset in 0..16 {
            for len in lengths {
                let before: Vec<u8> = (0..1104u32).map(|i| (i % 251) as u8).collect();
                let words = frame(&before);
                let bytes: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(13) ^ 0x5A).collect();
                FrameWrite::new(&words).put(offset + 40, &bytes);
                let mut model = before.clone();
                model[offset + 40..offset + 40 + len].copy_from_slice(&bytes);
                // Exactly the range changed, and nothing around it.
                assert_eq!(bytes_of(&words), model, "{offset} {len}");
            }
        }
        let words = frame(&[0u8; 1024]);
        let image: Vec<u8> = (0..1024u32).map(|i| (i * 31) as u8).collect();
        FrameWrite::new(&words).put_all(&image);
        assert_eq!(bytes_of(&words), image);
    }

    #[test]
    #[inline]
    fn a_frame_image_goes_in_whole_and_fields_land_little_endian() {
        let words = frame(&[0u8; 32]);
        let mut write = FrameWrite::new(&words);
        let image: Vec<u8> = (0..32).collect();
        write.put_all(&image);
        assert_eq!(bytes_of(&words), image);
        write.put_u16(7, 0xBEEF);
        write.put_u32(13, 0x0102_0304);
        write.put_u64(22, u64::MAX - 1);
        write.zero(0, 3);
        let read = write.read();
        assert_eq!(read.u16(7), Some(0xBEEF));
        assert_eq!(read.u32(13), Some(0x0102_0304));
        assert_eq!(read.u64(22), Some(u64::MAX - 1));
        assert_eq!(read.u8(1), Some(0));
        assert_eq!(read.u64(25), None, "a read past the frame's end");
        assert_eq!(read.u8(usize::MAX), None);
    }
}
