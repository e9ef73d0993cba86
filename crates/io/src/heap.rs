//! The C library's malloc, through its own calls: limiting its arenas (the `tierkv` binary,
//! when built without jemalloc) and giving the pages it holds free back to the kernel (the
//! store, when it drops). Kept here because only this crate makes system calls; with other
//! C libraries than glibc, both do nothing.

/// Limits the C library's malloc to `arenas` arenas for this process, unless the
/// `MALLOC_ARENA_MAX` environment variable sets a limit already; returns a description of
/// the allocator in force, for reports.
///
/// glibc's malloc gives threads that allocate at the same time arenas of their own (up to 8
/// per core) and keeps memory freed inside an arena for that arena. The engine's threads
/// (writers, readers, the checkpoint thread) allocate and free pages and memtable entries
/// across one another, so the process comes to hold the sum of every arena's peak
/// (`results/engine/README.md` has the figures). With other C libraries this does nothing.
pub fn limit_malloc_arenas(arenas: u32) -> String {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if let Ok(set) = std::env::var("MALLOC_ARENA_MAX") {
            return format!("glibc malloc, MALLOC_ARENA_MAX={set} from the environment");
        }
        let value = libc::c_int::try_from(arenas.max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets a malloc parameter; M_ARENA_MAX takes any positive count.
        let set = unsafe { libc::mallopt(libc::M_ARENA_MAX, value) } == 1;
        match set {
            true => format!("glibc malloc, {arenas} arenas"),
            false => "glibc malloc, default arenas (mallopt refused the limit)".into(),
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = arenas;
        "the C library's malloc".into()
    }
}

/// Gives the kernel back the whole pages malloc holds free (`malloc_trim(0)`), in every
/// arena, the middle of each heap included; returns whether any were given back. glibc
/// otherwise returns only the free memory at the top of a heap: what a closed store freed
/// in the middle of an arena, or in an arena no thread uses any more, stays resident. It
/// walks every arena under its lock (tens of milliseconds for a few hundred MiB), so call
/// it where a pause costs nothing, such as after a store closes. With other C libraries
/// this does nothing.
pub fn release_free_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only returns free memory to the kernel; live allocations are
        // untouched, and it takes malloc's own locks.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
