//! `MemoryRegion`: a fixed-size span of memory for a memory tier (seed 002's NVCache keeps
//! blocks in Optane NVRAM; today's equivalent is CXL-attached memory or a DAX file).
//!
//! Two backings:
//! - **anonymous** memory, optionally bound to a NUMA node with `mbind` (a CPU-less node is
//!   how CXL memory and Optane in KMEM DAX mode appear);
//! - **a file** on any file system (a DAX mount, a tmpfs such as `/dev/shm`), created new,
//!   allocated in full with `fallocate` (so that touching the mapping can never fault for want
//!   of space), mapped shared, and unlinked at once: no other process can shrink it under the
//!   mapping (which would raise SIGBUS), and its memory goes when the region is dropped.
//!
//! Either way every page is touched once when the region is made, after the NUMA binding,
//! so the memory is committed up front and a later access never waits on a page fault.
//!
//! The tier uses the region as volatile memory: nothing here syncs or persists. Writes use
//! non-temporal stores for 256 bytes and more (then a fence), as blocks admitted to a tier are
//! seldom read right away and should not evict the readers' working set from the CPU caches.
//!
//! Must never: touch a byte outside the mapping (every access is checked against `len`).

use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::mm::{MapFlags, ProtFlags};

use crate::error::{Error, Op, Result};
use crate::os::fsinfo;

/// Where a region's memory comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegionBacking {
    /// Anonymous memory.
    Anonymous,
    /// A new file at this path, or in this directory when the path is one.
    File(PathBuf),
}

/// A fixed-size mapping; see the module header.
pub struct MemoryRegion {
    base: NonNull<u8>,
    len: usize,
    description: String,
}

// SAFETY: the region is plain memory owned by this value. Which threads may touch which bytes
// at once is the caller's contract on the unsafe `read` and `write`.
unsafe impl Send for MemoryRegion {}
// SAFETY: as above; shared references only reach the memory through `read` and `write`.
unsafe impl Sync for MemoryRegion {}

/// Distinguishes the files of regions made by one process.
static NEXT_FILE: AtomicU64 = AtomicU64::new(0);

impl MemoryRegion {
    /// Makes a region of `len` bytes (rounded up to whole pages) on `backing`, bound to
    /// `numa_node` when one is given.
    pub fn new(backing: &RegionBacking, len: u64, numa_node: Option<u32>) -> Result<MemoryRegion> {
        let page = rustix::param::page_size() as u64;
        let name = match backing {
            RegionBacking::Anonymous => PathBuf::from("anonymous memory"),
            RegionBacking::File(path) => path.clone(),
        };
        let invalid = |detail: String| Error::InvalidOptions { path: name.clone(), detail };
        if len == 0 {
            return Err(invalid("a memory region needs a size above 0".into()));
        }
        let len = usize::try_from(len.next_multiple_of(page))
            .map_err(|_| invalid(format!("{len} bytes do not fit in this address space")))?;
        if let Some(node) = numa_node {
            if node >= 64 {
                return Err(invalid(format!("NUMA node {node} is not below 64")));
            }
        }
        let (base, mut description) = match backing {
            RegionBacking::Anonymous => (map_anonymous(len)?, "anonymous memory".to_string()),
            RegionBacking::File(path) => map_file(path, len as u64)?,
        };
        // Unmapped on drop, should binding fail.
        let mut region = MemoryRegion { base, len, description: String::new() };
        if let Some(node) = numa_node {
            bind(base, len, node).map_err(|errno| {
                invalid(format!("cannot bind the region to NUMA node {node}: {errno}"))
            })?;
            description += &format!(", bound to NUMA node {node}");
        }
        // Commit every page now, on the bound node.
        for offset in (0..len).step_by(page as usize) {
            // SAFETY: offset < len, inside the mapping; nothing else can see it yet.
            unsafe { base.as_ptr().add(offset).write_volatile(0) };
        }
        region.description = description;
        Ok(region)
    }

    /// Bytes in the region.
    pub fn len(&self) -> u64 {
        self.len as u64
    }

    /// Always false: a region has at least one page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// What backs the region, in words: "anonymous memory", or the file and its file system.
    pub fn description(&self) -> &str {
        &self.description
    }

    fn check(&self, op: Op, offset: u64, len: usize) -> Result<usize> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.len as u64 => Ok(offset as usize),
            _ => {
                Err(Error::OutOfRegion { op, offset, len: len as u64, region_len: self.len as u64 })
            }
        }
    }

    /// Copies `dst.len()` bytes at `offset` into `dst`.
    ///
    /// # Safety
    /// No `write` to an overlapping range may run at the same time.
    pub unsafe fn read(&self, offset: u64, dst: &mut [u8]) -> Result<()> {
        let at = self.check(Op::Read, offset, dst.len())?;
        // SAFETY: the range lies inside the mapping (checked); no concurrent write to it (the
        // caller's contract); dst is a distinct, valid buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.as_ptr().add(at), dst.as_mut_ptr(), dst.len())
        };
        Ok(())
    }

    /// Copies `src` to `offset`, with non-temporal stores for 256 bytes and more.
    ///
    /// # Safety
    /// No `read` or `write` of an overlapping range may run at the same time.
    pub unsafe fn write(&self, offset: u64, src: &[u8]) -> Result<()> {
        let at = self.check(Op::Write, offset, src.len())?;
        // SAFETY: the range lies inside the mapping (checked) and nobody else touches it (the
        // caller's contract); src is a distinct, valid buffer.
        unsafe { crate::pmem::copy_to_pmem(self.base.as_ptr().add(at), src.as_ptr(), src.len()) };
        Ok(())
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping this value made; no reference into it outlives self.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

impl std::fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("len", &self.len)
            .field("description", &self.description)
            .finish()
    }
}

fn map_anonymous(len: usize) -> Result<NonNull<u8>> {
    let name = Path::new("anonymous memory");
    // SAFETY: a new private mapping at an address of the kernel's choosing.
    let address = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE,
        )
    }
    .map_err(|errno| Error::from_rustix(Op::Map, name, errno))?;
    NonNull::new(address.cast()).ok_or_else(|| Error::from_errno(Op::Map, name, libc::ENOMEM))
}

/// Creates the file (in `path` when it is a directory), allocates it, maps it and unlinks it.
fn map_file(path: &Path, len: u64) -> Result<(NonNull<u8>, String)> {
    let path = if path.is_dir() {
        let n = NEXT_FILE.fetch_add(1, Ordering::Relaxed);
        path.join(format!("tierkv-tier-{}-{n}", std::process::id()))
    } else {
        path.to_path_buf()
    };
    let fd = rustix::fs::open(
        &path,
        rustix::fs::OFlags::RDWR
            | rustix::fs::OFlags::CREATE
            | rustix::fs::OFlags::EXCL
            | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .map_err(|errno| Error::from_rustix(Op::Open, &path, errno))?;
    let made = (|| {
        let info = fsinfo::describe_fd(&fd, &path)?;
        rustix::fs::fallocate(&fd, rustix::fs::FallocateFlags::empty(), 0, len)
            .map_err(|errno| Error::from_rustix(Op::Allocate, &path, errno))?;
        let size =
            usize::try_from(len).map_err(|_| Error::from_errno(Op::Map, &path, libc::ENOMEM))?;
        // SAFETY: a new shared mapping of the whole file, which was just allocated to `len`.
        let address = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                size,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )
        }
        .map_err(|errno| Error::from_rustix(Op::Map, &path, errno))?;
        let base = NonNull::new(address.cast())
            .ok_or_else(|| Error::from_errno(Op::Map, &path, libc::ENOMEM))?;
        let dax = if info.dax { ", DAX" } else { "" };
        Ok((base, format!("{} ({}{dax}), unlinked once mapped", path.display(), info.fs_type)))
    })();
    // The mapping keeps the memory; the name is not needed, made or not.
    let _ = rustix::fs::unlink(&path);
    made
}

/// Binds the pages of the mapping to `node` (MPOL_BIND), before any is touched.
fn bind(base: NonNull<u8>, len: usize, node: u32) -> std::result::Result<(), std::io::Error> {
    const MPOL_BIND: libc::c_long = 2;
    let mask: u64 = 1 << node;
    // SAFETY: mbind reads one u64 of node mask (maxnode 65 covers 64 bits) and changes only
    // the policy of this mapping.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            base.as_ptr() as libc::c_long,
            len as libc::c_long,
            MPOL_BIND,
            &mask as *const u64 as libc::c_long,
            65 as libc::c_long,
            0 as libc::c_long,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(region: &MemoryRegion) {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        // SAFETY: this test is the region's only user.
        unsafe {
            region.write(100, &data).expect("write");
            let mut back = vec![0u8; data.len()];
            region.read(100, &mut back).expect("read");
            assert_eq!(back, data);
            // The last byte is in range; one past it is not.
            region.write(region.len() - 1, &[9]).expect("last byte");
            assert!(matches!(
                region.read(region.len() - 1, &mut [0u8; 2]),
                Err(Error::OutOfRegion { op: Op::Read, .. })
            ));
            assert!(matches!(
                region.write(u64::MAX, &[1]),
                Err(Error::OutOfRegion { op: Op::Write, .. })
            ));
        }
    }

    #[test]
    fn anonymous_memory_reads_back_what_was_written_and_refuses_ranges_outside() {
        let region = MemoryRegion::new(&RegionBacking::Anonymous, 10_000, None).expect("region");
        assert_eq!(region.len() % rustix::param::page_size() as u64, 0);
        assert!(region.len() >= 10_000);
        round_trip(&region);
        assert!(MemoryRegion::new(&RegionBacking::Anonymous, 0, None).is_err());
        assert!(MemoryRegion::new(&RegionBacking::Anonymous, 4096, Some(64)).is_err());
    }

    #[test]
    fn a_file_region_is_unlinked_once_mapped_and_reads_back() {
        let dir = tempfile::tempdir().expect("dir");
        let region = MemoryRegion::new(&RegionBacking::File(dir.path().into()), 1 << 16, None)
            .expect("region");
        // Made in the directory, then unlinked.
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
        assert!(region.description().contains("unlinked once mapped"), "{}", region.description());
        round_trip(&region);
        // A path that exists is refused rather than overwritten.
        let taken = dir.path().join("taken");
        std::fs::write(&taken, b"keep").expect("write");
        assert!(MemoryRegion::new(&RegionBacking::File(taken.clone()), 4096, None).is_err());
        assert_eq!(std::fs::read(&taken).expect("read"), b"keep");
    }

    /// Node 0 exists on every Linux machine; binding to it works where mbind is allowed.
    #[test]
    fn binding_to_node_zero_works_or_says_why() {
        match MemoryRegion::new(&RegionBacking::Anonymous, 1 << 16, Some(0)) {
            Ok(region) => {
                assert!(region.description().contains("NUMA node 0"));
                round_trip(&region);
            }
            Err(error) => assert!(error.to_string().contains("NUMA node 0"), "{error}"),
        }
    }
}
