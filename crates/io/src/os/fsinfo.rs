//! What file system a file lives on: its type, whether it is memory (tmpfs, ramfs), whether the
//! file is on DAX, and the alignment O_DIRECT needs. Used to choose the pmem mode, to word
//! errors ("the tmpfs file system refuses direct I/O"), and by tools to describe the machine.

use std::os::fd::AsFd;
use std::path::Path;

use crate::{Error, Op, Result};

/// Facts about the file system under a path.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FileSystemInfo {
    /// The file system's name (`ext4`, `xfs`, `tmpfs`, ...), or its magic number in hex.
    pub fs_type: String,
    /// The statfs magic number.
    pub magic: u64,
    /// The file system keeps data only in memory (tmpfs, ramfs, hugetlbfs).
    pub is_memory: bool,
    /// statx reports the file as accessed through DAX (persistent memory, no page cache).
    pub dax: bool,
    /// O_DIRECT alignment reported by statx (memory, offset), when the file system reports it.
    pub direct_alignment: Option<(u32, u32)>,
}

const TMPFS_MAGIC: u64 = 0x0102_1994;
const RAMFS_MAGIC: u64 = 0x8584_58f6;
const HUGETLBFS_MAGIC: u64 = 0x9584_58f6;

fn fs_name(magic: u64) -> Option<&'static str> {
    Some(match magic {
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        TMPFS_MAGIC => "tmpfs",
        RAMFS_MAGIC => "ramfs",
        HUGETLBFS_MAGIC => "hugetlbfs",
        0x794c_7630 => "overlayfs",
        0x9fa0 => "proc",
        0x6265_6572 => "sysfs",
        0x6969 => "nfs",
        0x2fc1_2fc1 => "zfs",
        0xF2F5_2010 => "f2fs",
        0x6573_5546 => "fuse",
        0xca45_1a4e => "bcachefs",
        0x0102_1997 => "9p",
        0x4d44 => "vfat",
        _ => return None,
    })
}

/// Describes the file system of an open file descriptor.
pub(crate) fn describe_fd(fd: impl AsFd, path: &Path) -> Result<FileSystemInfo> {
    let fd = fd.as_fd();
    let statfs = rustix::fs::fstatfs(fd).map_err(|e| Error::from_rustix(Op::Stat, path, e))?;
    #[allow(clippy::unnecessary_cast)] // f_type is i64 or u32 depending on the target.
    let magic = statfs.f_type as u64 & 0xFFFF_FFFF;
    let statx = rustix::fs::statx(
        fd,
        "",
        rustix::fs::AtFlags::EMPTY_PATH,
        rustix::fs::StatxFlags::BASIC_STATS | rustix::fs::StatxFlags::DIOALIGN,
    );
    let (dax, direct_alignment) = match statx {
        Ok(stx) => {
            let dax = stx.stx_attributes.contains(rustix::fs::StatxAttributes::DAX);
            let dio = stx.stx_mask & rustix::fs::StatxFlags::DIOALIGN.bits() != 0
                && stx.stx_dio_offset_align > 0;
            (dax, dio.then_some((stx.stx_dio_mem_align, stx.stx_dio_offset_align)))
        }
        Err(_) => (false, None),
    };
    Ok(FileSystemInfo {
        fs_type: fs_name(magic).map_or_else(|| format!("0x{magic:x}"), str::to_string),
        magic,
        is_memory: matches!(magic, TMPFS_MAGIC | RAMFS_MAGIC | HUGETLBFS_MAGIC),
        dax,
        direct_alignment,
    })
}

/// Describes the file system holding `path` (a file or directory that exists).
pub fn file_system_info(path: impl AsRef<Path>) -> Result<FileSystemInfo> {
    let path = path.as_ref();
    let fd = rustix::fs::open(
        path,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| Error::from_rustix(Op::Stat, path, e))?;
    describe_fd(&fd, path)
}
