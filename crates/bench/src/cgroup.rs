//! A memory cgroup, for measurement tools that must run several engines under one and the
//! same memory limit, page cache included: `tierkv bench ycsb --memory-limit-mib` puts each
//! engine's process in its own group. Groups are files under `/sys/fs/cgroup`, handled with
//! `std::fs` alone: no system call of its own.
//!
//! Both hierarchies are handled: cgroup v1 (`memory.limit_in_bytes`, with the swap limit set
//! to the same value where the kernel has one, so nothing escapes to swap) and cgroup v2
//! (`memory.max`, `memory.swap.max` = 0). The new group is made under the calling process's
//! own group, so a limit imposed from outside still holds. Both versions charge the page
//! cache a process fills to its group, which is what makes the limit fair between an engine
//! with its own cache and one that reads through the OS page cache.
//!
//! Must never: leave a group behind when it can be removed, or claim a limit that was not set.

use std::path::{Path, PathBuf};

use tierkv_io::{Error, Op, Result};

/// Which cgroup hierarchy holds the memory controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupVersion {
    /// The legacy hierarchy, one mount per controller.
    V1,
    /// The unified hierarchy.
    V2,
}

/// A memory cgroup this process made, removed on drop once empty.
#[derive(Debug)]
pub struct MemoryCgroup {
    dir: PathBuf,
    version: CgroupVersion,
    limit_bytes: u64,
}

fn io_error(op: Op, path: &Path, error: std::io::Error) -> Error {
    Error::from_std(op, path, error)
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| io_error(Op::Write, path, e))
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The directory of this process's memory cgroup, and its hierarchy's version, if the memory
/// controller is mounted where it can be found.
fn own_memory_group() -> Option<(PathBuf, CgroupVersion)> {
    let membership = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in membership.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let relative = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "memory") {
            let dir = Path::new("/sys/fs/cgroup/memory").join(relative);
            if dir.join("memory.limit_in_bytes").exists() {
                return Some((dir, CgroupVersion::V1));
            }
        }
        if controllers.is_empty() {
            for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
                let dir = Path::new(root).join(relative);
                let enabled = std::fs::read_to_string(dir.join("cgroup.controllers"))
                    .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
                if enabled {
                    return Some((dir, CgroupVersion::V2));
                }
            }
        }
    }
    None
}

impl MemoryCgroup {
    /// Makes a group named `name` under this process's own memory group, limited to
    /// `limit_bytes` of memory (anonymous and page cache together) and no swap. `Ok(None)`
    /// when no memory controller is mounted where this process can see it.
    pub fn create(name: &str, limit_bytes: u64) -> Result<Option<MemoryCgroup>> {
        let Some((parent, version)) = own_memory_group() else {
            return Ok(None);
        };
        if version == CgroupVersion::V2 {
            // Children get the memory controller only when the parent hands it down. A
            // group with processes of its own cannot (the "no internal processes" rule), so
            // a failure here surfaces as a missing memory.max below.
            let _ = write(&parent.join("cgroup.subtree_control"), "+memory");
        }
        let dir = parent.join(name);
        std::fs::create_dir(&dir).map_err(|e| io_error(Op::CreateDir, &dir, e))?;
        let group = MemoryCgroup { dir, version, limit_bytes };
        let limit = limit_bytes.to_string();
        match version {
            CgroupVersion::V1 => {
                write(&group.dir.join("memory.limit_in_bytes"), &limit)?;
                let swap = group.dir.join("memory.memsw.limit_in_bytes");
                if swap.exists() {
                    write(&swap, &limit)?;
                }
            }
            CgroupVersion::V2 => {
                write(&group.dir.join("memory.max"), &limit)?;
                let swap = group.dir.join("memory.swap.max");
                if swap.exists() {
                    write(&swap, "0")?;
                }
            }
        }
        Ok(Some(group))
    }

    /// Moves the process `pid` into the group (0: the calling process).
    pub fn add_process(&self, pid: u32) -> Result<()> {
        Self::join_dir(&self.dir, pid)
    }

    /// Moves the process `pid` into the group at `dir`, one another process made.
    pub fn join_dir(dir: &Path, pid: u32) -> Result<()> {
        write(&dir.join("cgroup.procs"), &pid.to_string())
    }

    /// The group's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The hierarchy it lives in.
    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// The limit set.
    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// The most memory the group has used, page cache included (v1's `max_usage_in_bytes`,
    /// v2's `memory.peak` where the kernel has it).
    pub fn peak_bytes(&self) -> Option<u64> {
        match self.version {
            CgroupVersion::V1 => read_u64(&self.dir.join("memory.max_usage_in_bytes")),
            CgroupVersion::V2 => read_u64(&self.dir.join("memory.peak")),
        }
    }

    /// The anonymous memory the group's processes hold now: their heaps, stacks and private
    /// mappings, without the page cache (v1's `rss`, v2's `anon`, from `memory.stat`). Sampled
    /// during a run, its maximum is the engine's own footprint, which `peak_bytes` hides
    /// once the page cache has filled the group to its limit.
    pub fn anon_bytes(&self) -> Option<u64> {
        let text = std::fs::read_to_string(self.dir.join("memory.stat")).ok()?;
        anon_in_stat(&text, self.version)
    }

    /// How many times the kernel's OOM killer ran in the group, where the kernel says.
    pub fn oom_kills(&self) -> Option<u64> {
        let file = match self.version {
            CgroupVersion::V1 => "memory.oom_control",
            CgroupVersion::V2 => "memory.events",
        };
        let text = std::fs::read_to_string(self.dir.join(file)).ok()?;
        text.lines().find_map(|line| line.strip_prefix("oom_kill ")?.trim().parse().ok())
    }
}

/// The anonymous bytes in the text of a `memory.stat` file of a group of `version`.
fn anon_in_stat(text: &str, version: CgroupVersion) -> Option<u64> {
    let key = match version {
        CgroupVersion::V1 => "rss ",
        CgroupVersion::V2 => "anon ",
    };
    text.lines().find_map(|line| line.strip_prefix(key)?.trim().parse().ok())
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // Fails while a process is still in it; the caller waits for its children first.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where this machine lets the test make a group (root, a writable hierarchy), the limit
    /// reads back and the group goes away on drop; elsewhere there is nothing to check.
    #[test]
    fn a_group_takes_its_limit_and_is_removed() {
        let name = format!("tierkv-test-{}", std::process::id());
        let group = match MemoryCgroup::create(&name, 64 << 20) {
            Ok(Some(group)) => group,
            Ok(None) | Err(_) => return,
        };
        let file = match group.version() {
            CgroupVersion::V1 => "memory.limit_in_bytes",
            CgroupVersion::V2 => "memory.max",
        };
        assert_eq!(read_u64(&group.dir().join(file)), Some(64 << 20));
        assert!(group.peak_bytes().is_some() || group.version() == CgroupVersion::V2);
        // No process has joined: nothing anonymous is charged to it.
        assert_eq!(group.anon_bytes(), Some(0));
        let dir = group.dir().to_path_buf();
        drop(group);
        assert!(!dir.exists());
    }

    /// The anonymous figure is v1's `rss` (not `rss_huge` or `total_rss`) and v2's `anon`
    /// (not `anon_thp`).
    #[test]
    fn anonymous_memory_is_read_from_the_right_line() {
        let v1 = "cache 4096\nrss 8192\nrss_huge 0\ntotal_rss 999\n";
        assert_eq!(anon_in_stat(v1, CgroupVersion::V1), Some(8192));
        let v2 = "anon_thp 7\nanon 12288\nfile 4096\n";
        assert_eq!(anon_in_stat(v2, CgroupVersion::V2), Some(12288));
        assert_eq!(anon_in_stat("file 1\n", CgroupVersion::V2), None);
    }
}
