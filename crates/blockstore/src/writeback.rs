//! `Writeback`: a thread that starts the write-back of ranges a writer has just written, so
//! that the device works while the writer goes on copying the rest of its group into the
//! page cache, and the fdatasync that makes the group durable finds little left to write.
//!
//! A store's writer copies a group (megabytes, for a buffer pool's checkpoint) into the page
//! cache with pwrite and then calls fdatasync, which only then hands the pages to the device.
//! Copying and writing back take turns: the device idles while the writer copies, and the
//! writer idles while the device writes. Each range `hint`ed here goes to this thread, which
//! calls `File::start_writeback` (sync_file_range with SYNC_FILE_RANGE_WRITE) on it. It runs
//! on a thread of its own because that call blocks while the device's queue is full, and the
//! writer must not wait for it.
//!
//! Ranges queued while the thread was busy are merged: one call per file, from the lowest
//! start to the highest end among them (the kernel writes only the dirty pages of a range,
//! so the clean ones between cost nothing).
//!
//! Durability never rests on a hint: every group is still synced before it is acknowledged,
//! a hint may run after that sync or not at all, and a failed write-back is reported by that
//! sync (the kernel keeps the error for it). So a hint's own error is dropped, and counted.
//!
//! Must never: make a caller wait for the device; be relied on for durability or ordering.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use tierkv_io::File;

struct Queue {
    ranges: Vec<(Arc<File>, u64, u64)>,
    /// The thread waits on the condition variable (so a hint must wake it).
    idle: bool,
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// Hints whose `start_writeback` failed (their ranges are left to the next sync).
    failed: AtomicU64,
}

/// The thread and its queue. Dropping it stops the thread once the queue is empty.
pub(crate) struct Writeback {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// A writer hands its ranges over once this many bytes are written (and writes a large
    /// group in pieces of this size). A group smaller than this gets no hint: the sync that
    /// follows it at once writes it back as fast, and waking the thread costs more.
    chunk_bytes: u64,
}

fn lock(queue: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    queue.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Writeback {
    /// Starts the thread. Without a thread (the spawn failed) hints are dropped: they only
    /// ever make things faster.
    pub(crate) fn start(name: &str, chunk_bytes: u64) -> Writeback {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue { ranges: Vec::new(), idle: false, closed: false }),
            wake: Condvar::new(),
            failed: AtomicU64::new(0),
        });
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("{name}-writeback"))
                .spawn(move || run(&shared))
                .ok()
        };
        if thread.is_none() {
            lock(&shared.queue).closed = true;
        }
        Writeback { shared, thread, chunk_bytes }
    }

    /// Bytes a writer writes before it hands them over.
    pub(crate) fn chunk_bytes(&self) -> u64 {
        self.chunk_bytes
    }

    /// Queues the write-back of `len` bytes at `offset` of `file`, which the caller has just
    /// written. Never blocks on I/O.
    pub(crate) fn hint(&self, file: &Arc<File>, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let mut queue = lock(&self.shared.queue);
        if queue.closed {
            return;
        }
        queue.ranges.push((Arc::clone(file), offset, len));
        if queue.idle {
            queue.idle = false;
            self.shared.wake.notify_one();
        }
    }

    /// A writer's hints for one group.
    pub(crate) fn hints(&self) -> Hints<'_> {
        Hints { writeback: self, span: None, bytes: 0 }
    }

    /// Hints whose write-back could not be started.
    pub(crate) fn failed(&self) -> u64 {
        self.shared.failed.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Writeback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writeback")
            .field("running", &self.thread.is_some())
            .field("failed", &self.failed())
            .finish()
    }
}

impl Drop for Writeback {
    fn drop(&mut self) {
        lock(&self.shared.queue).closed = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            // The thread only makes system calls whose errors it counts; it does not panic.
            let _ = thread.join();
        }
    }
}

/// The ranges one writer has written, gathered into a span per file and handed to the thread
/// every `Writeback::chunk_bytes` (and when the writer moves on to another file). What is left when it
/// is dropped gets no hint: the writer's sync follows at once.
pub(crate) struct Hints<'a> {
    writeback: &'a Writeback,
    /// File, start and end of the span not handed over yet.
    span: Option<(Arc<File>, u64, u64)>,
    /// Bytes written in the span.
    bytes: u64,
}

impl Hints<'_> {
    /// Notes that `len` bytes at `offset` of `file` were just written.
    pub(crate) fn written(&mut self, file: &Arc<File>, offset: u64, len: u64) {
        let end = offset.saturating_add(len);
        match &mut self.span {
            Some((current, start, span_end)) if Arc::ptr_eq(current, file) => {
                *start = (*start).min(offset);
                *span_end = (*span_end).max(end);
            }
            _ => {
                self.hand_over();
                self.span = Some((Arc::clone(file), offset, end));
            }
        }
        self.bytes = self.bytes.saturating_add(len);
        if self.bytes >= self.writeback.chunk_bytes {
            self.hand_over();
        }
    }

    fn hand_over(&mut self) {
        if let Some((file, start, end)) = self.span.take() {
            self.writeback.hint(&file, start, end - start);
        }
        self.bytes = 0;
    }
}

fn run(shared: &Shared) {
    let mut batch: Vec<(Arc<File>, u64, u64)> = Vec::new();
    loop {
        {
            let mut queue = lock(&shared.queue);
            while queue.ranges.is_empty() && !queue.closed {
                queue.idle = true;
                queue = shared.wake.wait(queue).unwrap_or_else(PoisonError::into_inner);
            }
            if queue.ranges.is_empty() {
                return;
            }
            std::mem::swap(&mut batch, &mut queue.ranges);
        }
        for (file, offset, len) in merge(&batch) {
            if file.start_writeback(offset, len).is_err() {
                shared.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        batch.clear();
    }
}

/// One span per file: from the lowest start to the highest end of its ranges, in the order
/// the files first appear.
fn merge(batch: &[(Arc<File>, u64, u64)]) -> Vec<(Arc<File>, u64, u64)> {
    let mut spans: Vec<(Arc<File>, u64, u64)> = Vec::new();
    for (file, offset, len) in batch.iter() {
        let end = offset.saturating_add(*len);
        match spans.iter_mut().find(|(f, _, _)| Arc::ptr_eq(f, file)) {
            Some((_, start, span_end)) => {
                *start = (*start).min(*offset);
                *span_end = (*span_end).max(end);
            }
            None => spans.push((Arc::clone(file), *offset, end)),
        }
    }
    spans.into_iter().map(|(file, start, end)| (file, start, end - start)).collect()
}

#[cfg(test)]
mod tests {
    use tierkv_io::{AccessMethod, OpenOptions, Storage};

    use super::*;

    fn file(dir: &std::path::Path, name: &str) -> Arc<File> {
        let options = OpenOptions::new(AccessMethod::Syscall).create(true);
        Arc::new(Storage::Os.open(dir.join(name), &options).expect("open"))
    }

    #[test]
    fn merging_keeps_one_span_per_file_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (file(dir.path(), "a"), file(dir.path(), "b"));
        let batch = vec![
            (Arc::clone(&a), 4096, 100),
            (Arc::clone(&b), 0, 10),
            (Arc::clone(&a), 0, 50),
            (Arc::clone(&a), 9000, 1000),
        ];
        let spans: Vec<(bool, u64, u64)> =
            merge(&batch).into_iter().map(|(f, s, l)| (Arc::ptr_eq(&f, &a), s, l)).collect();
        assert_eq!(spans, vec![(true, 0, 10_000), (false, 0, 10)]);
    }

    #[test]
    fn hints_go_out_a_chunk_at_a_time_and_a_small_group_gets_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (file(dir.path(), "a"), file(dir.path(), "b"));
        let piece = vec![7u8; 16 << 10];
        let writeback = Writeback::start("test", 256 << 10);
        let mut hints = writeback.hints();
        // Less than a chunk, then another file: the first span goes out when b starts.
        a.write_at(&piece, 0).expect("write");
        hints.written(&a, 0, piece.len() as u64);
        for i in 0..(writeback.chunk_bytes() / piece.len() as u64) {
            let at = i * piece.len() as u64;
            b.write_at(&piece, at).expect("write");
            hints.written(&b, at, piece.len() as u64);
        }
        // A last small span of a is dropped with the hints: its sync follows.
        a.write_at(&piece, 1 << 20).expect("write");
        hints.written(&a, 1 << 20, piece.len() as u64);
        drop(hints);
        // Dropping the writeback joins its thread once it has emptied its queue.
        drop(writeback);
        assert_eq!((a.stats().writeback_hints, b.stats().writeback_hints), (1, 1));
    }

    #[test]
    fn a_hint_that_fails_is_counted_and_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Two files, so the two hints are never merged into one span.
        let (a, b) = (file(dir.path(), "a"), file(dir.path(), "b"));
        let writeback = Writeback::start("test", 256 << 10);
        let shared = Arc::clone(&writeback.shared);
        writeback.hint(&a, u64::MAX - 10, 100);
        writeback.hint(&b, 0, 4096);
        // Dropping the writeback joins its thread once it has emptied its queue.
        drop(writeback);
        assert_eq!(shared.failed.load(Ordering::Relaxed), 1, "the failure was counted");
        assert_eq!(b.stats().writeback_hints, 1, "the hint after the failure was made");
    }
}
