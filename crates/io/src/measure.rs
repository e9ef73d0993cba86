//! The system calls that only measurement tools make (tierkv-bench and the CLI's benchmarks;
//! the store never calls them), kept here because only this crate makes system calls: the
//! kernel's release, the process's CPU time, the C library's malloc statistics, and how much
//! of a file is in the page cache. What the tools build on them (the machine's description,
//! eviction with its check) lives in tierkv-bench's `machine.rs`.
//!
//! Must never: be called by the store's own crates (`scripts/check-layering.sh` checks it).

use std::path::Path;

use crate::{Error, Op, Result};

/// The kernel's release (`uname -r`).
pub fn kernel_release() -> String {
    rustix::system::uname().release().to_string_lossy().into_owned()
}

/// CPU time this process has used so far (all threads, user and system), in seconds.
pub fn process_cpu_seconds() -> f64 {
    let time = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    time.tv_sec as f64 + time.tv_nsec as f64 * 1e-9
}

/// Bytes the C library's malloc has handed out and not had back (`mallinfo2`'s `uordblks`
/// plus `hblkhd`): the heap's live allocations. Resident heap memory above this is memory
/// malloc holds free without returning it to the kernel. `None` with other C libraries.
pub fn malloc_in_use_bytes() -> Option<u64> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads malloc's counters (glibc 2.33 and later).
        let info = unsafe { libc::mallinfo2() };
        Some((info.uordblks + info.hblkhd) as u64)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

/// Fraction of the pages of the file at `path` that are in the page cache, by `mincore` on a
/// fresh read-only mapping (which does not itself fault pages in).
pub fn resident_fraction(path: &Path) -> Result<f64> {
    let fd = rustix::fs::open(
        path,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| Error::from_rustix(Op::Stat, path, e))?;
    let len = crate::os::fstat_len(&fd, path)?;
    let Ok(len) = usize::try_from(len) else {
        return Err(Error::FileTooLarge { op: Op::Map, path: path.to_path_buf() });
    };
    if len == 0 {
        return Ok(0.0);
    }
    // SAFETY: a fresh read-only mapping that is never dereferenced, only passed to mincore.
    let base = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            rustix::mm::ProtFlags::READ,
            rustix::mm::MapFlags::SHARED,
            &fd,
            0,
        )
    }
    .map_err(|e| Error::from_rustix(Op::Map, path, e))?;
    let page_bytes = rustix::param::page_size();
    let pages = len.div_ceil(page_bytes);
    let mut residency = vec![0u8; pages];
    // SAFETY: base/len is the mapping just made; residency holds one byte per page.
    let rc = unsafe { libc::mincore(base, len, residency.as_mut_ptr()) };
    let errno = std::io::Error::last_os_error();
    // SAFETY: unmapping the mapping made above.
    let _ = unsafe { rustix::mm::munmap(base, len) };
    if rc != 0 {
        return Err(Error::from_std(Op::Stat, path, errno));
    }
    let resident = residency.iter().filter(|&&page| page & 1 != 0).count();
    Ok(resident as f64 / pages as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_release_is_named() {
        assert!(!kernel_release().is_empty());
    }

    #[test]
    fn a_file_just_written_is_resident_and_an_empty_one_has_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("resident");
        std::fs::write(&path, vec![7u8; 1 << 16]).expect("write");
        assert!(resident_fraction(&path).expect("mincore") > 0.9);
        std::fs::write(&path, []).expect("truncate");
        assert_eq!(resident_fraction(&path).expect("mincore"), 0.0);
    }

    #[test]
    fn cpu_time_advances_with_work() {
        let start = process_cpu_seconds();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(process_cpu_seconds() > start);
    }
}
