//! Persistent-memory primitives: which cache-line flush the CPU has, flushing, fencing, and
//! copies with non-temporal stores. The only code in tierkv that issues these instructions.
//!
//! The flush instruction is chosen once by CPUID, in the order libpmem2 uses: clwb (writes the
//! line back and may keep it cached), else clflushopt (invalidates, weakly ordered), else
//! clflush (invalidates, strongly ordered). Every flush is followed by `sfence` before the
//! caller relies on durability, so the weak ordering of clwb and clflushopt is safe.
//!
//! Copies of `NT_THRESHOLD_BYTES` (256 B) or more use non-temporal stores for the 64-byte
//! aligned body, so the data goes to memory without polluting the cache; the unaligned head
//! and tail, and smaller copies, use ordinary stores. Copies never flush: `persist` flushes the
//! range's lines and fences (flushing in the copy too would flush twice, and the locked
//! instructions after a copy would wait for those flushes like a fence). A copy that streamed
//! ends with `sfence`: non-temporal stores are weakly ordered, and without the fence another
//! thread that synchronises with this one (a release store, a lock) could still read the old
//! bytes; Rust's documentation of the streaming intrinsics requires it.
//!
//! Must never: be called on memory that is not a live mapping of at least the given length.

use std::sync::OnceLock;

/// Copies at least this long use non-temporal stores (libpmem2's `MOVNT_THRESHOLD`).
pub const NT_THRESHOLD_BYTES: usize = 256;

/// Bytes in a cache line on x86-64: the unit of flushing and of the pmem crash model.
pub const CACHE_LINE_BYTES: usize = 64;

/// The cache-line flush instruction in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlushInstruction {
    /// `clwb`: write back, line may stay cached.
    Clwb,
    /// `clflushopt`: write back and invalidate, weakly ordered.
    Clflushopt,
    /// `clflush`: write back and invalidate, ordered with other stores.
    Clflush,
    /// No flush instruction (not x86-64): only `msync` can make a mapping durable.
    None,
}

impl FlushInstruction {
    /// The instruction's name.
    pub fn name(self) -> &'static str {
        match self {
            FlushInstruction::Clwb => "clwb",
            FlushInstruction::Clflushopt => "clflushopt",
            FlushInstruction::Clflush => "clflush",
            FlushInstruction::None => "none",
        }
    }
}

/// What the CPU offers for persistence, read once by CPUID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CpuPersistence {
    /// The flush instruction `persist` uses.
    pub flush: FlushInstruction,
    /// CPUID reports clwb.
    pub has_clwb: bool,
    /// CPUID reports clflushopt.
    pub has_clflushopt: bool,
    /// CPUID reports clflush.
    pub has_clflush: bool,
    /// Non-temporal copies use 64-byte AVX-512 stores (otherwise 16-byte SSE2 stores).
    pub avx512f: bool,
}

/// The CPU's persistence features, detected once.
pub fn cpu() -> &'static CpuPersistence {
    static CPU: OnceLock<CpuPersistence> = OnceLock::new();
    CPU.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> CpuPersistence {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    // CPUID exists on every x86-64 CPU; leaf 0 gives the highest leaf available.
    let max_leaf = __cpuid(0).eax;
    let leaf1 = __cpuid(1);
    let has_clflush = leaf1.edx & (1 << 19) != 0;
    let (has_clflushopt, has_clwb) = if max_leaf >= 7 {
        let leaf7 = __cpuid_count(7, 0);
        (leaf7.ebx & (1 << 23) != 0, leaf7.ebx & (1 << 24) != 0)
    } else {
        (false, false)
    };
    let flush = if has_clwb {
        FlushInstruction::Clwb
    } else if has_clflushopt {
        FlushInstruction::Clflushopt
    } else if has_clflush {
        FlushInstruction::Clflush
    } else {
        FlushInstruction::None
    };
    CpuPersistence {
        flush,
        has_clwb,
        has_clflushopt,
        has_clflush,
        avx512f: std::arch::is_x86_feature_detected!("avx512f"),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> CpuPersistence {
    CpuPersistence {
        flush: FlushInstruction::None,
        has_clwb: false,
        has_clflushopt: false,
        has_clflush: false,
        avx512f: false,
    }
}

/// Flushes every cache line overlapping `[ptr, ptr + len)` with `instruction`; returns the
/// number of lines flushed. Does not fence.
///
/// # Safety
/// The range must lie inside one live mapping, and `instruction` must be supported by the CPU
/// (any value of `cpu().flush` is).
pub(crate) unsafe fn flush_range(instruction: FlushInstruction, ptr: *const u8, len: usize) -> u64 {
    if len == 0 {
        return 0;
    }
    let first = ptr as usize & !(CACHE_LINE_BYTES - 1);
    let end = ptr as usize + len;
    let mut line = first;
    let mut count = 0;
    while line < end {
        // SAFETY: line lies in a cache line that overlaps the caller's live range.
        unsafe { flush_line(instruction, line as *const u8) };
        line += CACHE_LINE_BYTES;
        count += 1;
    }
    count
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn flush_line(instruction: FlushInstruction, line: *const u8) {
    match instruction {
        // SAFETY: clwb on a mapped address has no effect but a write-back; CPU support was
        // checked by the caller.
        FlushInstruction::Clwb => unsafe {
            std::arch::asm!("clwb [{0}]", in(reg) line, options(nostack, preserves_flags));
        },
        // SAFETY: as for clwb.
        FlushInstruction::Clflushopt => unsafe {
            std::arch::asm!("clflushopt [{0}]", in(reg) line, options(nostack, preserves_flags));
        },
        // SAFETY: clflush is part of SSE2, present on every x86-64 CPU; line is mapped.
        FlushInstruction::Clflush => unsafe { std::arch::x86_64::_mm_clflush(line) },
        FlushInstruction::None => {}
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn flush_line(_instruction: FlushInstruction, _line: *const u8) {}

/// Store fence: orders every earlier flush and non-temporal store before any later store.
pub(crate) fn sfence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence is part of SSE, present on every x86-64 CPU.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// What a copy into persistent memory did, for the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CopyReport {
    pub(crate) nontemporal_bytes: u64,
    pub(crate) lines_flushed: u64,
    pub(crate) fences: u64,
}

/// Copies `len` bytes to persistent memory: non-temporal stores for the 64-byte aligned body of
/// copies of 256 B or more (then `sfence`), ordinary stores for the rest. Nothing is flushed
/// here: `persist` flushes the range and fences. Flushing here as well would flush the lines
/// twice, and the locked instructions that follow a copy (the remap gate's exit, the counters)
/// would wait for those flushes, which costs as much as a second fence.
///
/// # Safety
/// `dst` must be valid for `len` bytes of writes inside a live mapping, `src` valid for `len`
/// bytes of reads, and the two must not overlap.
pub(crate) unsafe fn copy_to_pmem(dst: *mut u8, src: *const u8, len: usize) -> CopyReport {
    let instruction = cpu().flush;
    if len < NT_THRESHOLD_BYTES || instruction == FlushInstruction::None {
        // SAFETY: the caller guarantees both ranges.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
        return CopyReport::default();
    }
    let head = ((CACHE_LINE_BYTES - (dst as usize & (CACHE_LINE_BYTES - 1)))
        & (CACHE_LINE_BYTES - 1))
        .min(len);
    let body = (len - head) & !(CACHE_LINE_BYTES - 1);
    let tail = len - head - body;
    let mut report = CopyReport::default();
    if head > 0 {
        // SAFETY: head <= len, inside both ranges.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
    }
    // SAFETY: dst + head is 64-byte aligned and body bytes lie inside both ranges.
    unsafe { stream_body(dst.add(head), src.add(head), body) };
    report.nontemporal_bytes = body as u64;
    if body > 0 {
        sfence();
        report.fences = 1;
    }
    if tail > 0 {
        let at = head + body;
        // SAFETY: at + tail == len, inside both ranges.
        unsafe { std::ptr::copy_nonoverlapping(src.add(at), dst.add(at), tail) };
    }
    report
}

/// Non-temporal copy of a 64-byte aligned destination range whose length is a multiple of 64.
#[cfg(target_arch = "x86_64")]
unsafe fn stream_body(dst: *mut u8, src: *const u8, len: usize) {
    debug_assert_eq!(dst as usize % CACHE_LINE_BYTES, 0);
    debug_assert_eq!(len % CACHE_LINE_BYTES, 0);
    if cpu().avx512f {
        // SAFETY: avx512f was detected; ranges as guaranteed by the caller.
        unsafe { stream_avx512(dst, src, len) }
    } else {
        // SAFETY: SSE2 is part of x86-64; ranges as guaranteed by the caller.
        unsafe { stream_sse2(dst, src, len) }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn stream_avx512(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::{__m512i, _mm512_loadu_si512, _mm512_stream_si512};
    let mut at = 0;
    while at < len {
        // SAFETY: at + 64 <= len; dst + at is 64-byte aligned; src may be unaligned (loadu).
        unsafe {
            let value = _mm512_loadu_si512(src.add(at) as *const __m512i);
            _mm512_stream_si512(dst.add(at) as *mut __m512i, value);
        }
        at += 64;
    }
}

#[cfg(target_arch = "x86_64")]
unsafe fn stream_sse2(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
    let mut at = 0;
    while at < len {
        // SAFETY: at + 16 <= len; dst + at is 16-byte aligned; src may be unaligned (loadu).
        unsafe {
            let value = _mm_loadu_si128(src.add(at) as *const __m128i);
            _mm_stream_si128(dst.add(at) as *mut __m128i, value);
        }
        at += 16;
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn stream_body(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: ranges as guaranteed by the caller.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_prefers_clwb_then_clflushopt_then_clflush() {
        let cpu = cpu();
        let expected = if cpu.has_clwb {
            FlushInstruction::Clwb
        } else if cpu.has_clflushopt {
            FlushInstruction::Clflushopt
        } else if cpu.has_clflush {
            FlushInstruction::Clflush
        } else {
            FlushInstruction::None
        };
        assert_eq!(cpu.flush, expected);
        #[cfg(target_arch = "x86_64")]
        assert!(cpu.has_clflush, "every x86-64 CPU has clflush");
    }

    #[test]
    fn every_supported_flush_instruction_runs_and_keeps_data() {
        let cpu = cpu();
        let mut buf = vec![0xA5u8; 4096 + 13];
        for (supported, instruction) in [
            (cpu.has_clwb, FlushInstruction::Clwb),
            (cpu.has_clflushopt, FlushInstruction::Clflushopt),
            (cpu.has_clflush, FlushInstruction::Clflush),
        ] {
            if !supported {
                continue;
            }
            buf[100] = instruction as u8;
            // SAFETY: buf is live for its whole length.
            let lines = unsafe { flush_range(instruction, buf.as_ptr().add(7), 200) };
            sfence();
            let first = (buf.as_ptr() as usize + 7) / 64;
            let last = (buf.as_ptr() as usize + 7 + 199) / 64;
            assert_eq!(lines, (last - first + 1) as u64);
            assert_eq!(buf[100], instruction as u8);
        }
    }

    #[test]
    fn copies_are_exact_for_every_length_and_alignment() {
        let source: Vec<u8> = (0..3100u32).map(|i| (i * 31 % 251) as u8).collect();
        for len in [1usize, 63, 64, 65, 255, 256, 257, 1000, 2048, 2999] {
            for dst_offset in [0usize, 1, 8, 63] {
                for src_offset in [0usize, 3] {
                    let mut target = vec![0u8; 3100];
                    let expected = &source[src_offset..src_offset + len];
                    // SAFETY: both ranges lie inside their vectors and do not overlap.
                    let report = unsafe {
                        copy_to_pmem(
                            target.as_mut_ptr().add(dst_offset),
                            source.as_ptr().add(src_offset),
                            len,
                        )
                    };
                    sfence();
                    assert_eq!(&target[dst_offset..dst_offset + len], expected);
                    assert!(target[..dst_offset].iter().all(|&b| b == 0));
                    assert!(target[dst_offset + len..].iter().all(|&b| b == 0));
                    if len >= NT_THRESHOLD_BYTES && cpu().flush != FlushInstruction::None {
                        assert!(report.nontemporal_bytes > 0, "len {len} used no NT stores");
                        assert_eq!(report.nontemporal_bytes % 64, 0);
                    } else {
                        assert_eq!(report.nontemporal_bytes, 0);
                    }
                }
            }
        }
    }
}
