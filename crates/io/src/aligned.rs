//! `AlignedBuf`: a heap buffer whose address is aligned for O_DIRECT.
//!
//! Invariant: the allocation is `len` bytes, zero-initialised, at an address that is a multiple
//! of `align`; `align` is a power of two of at least 512.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// A zeroed buffer aligned to `align` bytes (4096 by default), for O_DIRECT transfers.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only allow reads of initialised bytes.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// The alignment that satisfies O_DIRECT on every common device (4 KiB sectors).
    pub const DEFAULT_ALIGN: usize = 4096;

    /// A zeroed buffer of `len` bytes aligned to 4096.
    pub fn new(len: usize) -> AlignedBuf {
        AlignedBuf::with_align(len, AlignedBuf::DEFAULT_ALIGN)
    }

    /// A zeroed buffer of `len` bytes aligned to `align` (a power of two, at least 512).
    ///
    /// # Panics
    /// If `align` is not a power of two of at least 512, or `len` overflows the layout: both
    /// are programming errors, not conditions of the environment.
    pub fn with_align(len: usize, align: usize) -> AlignedBuf {
        assert!(align.is_power_of_two() && align >= 512, "alignment {align} is invalid");
        let layout = Layout::from_size_align(len.max(1), align)
            .unwrap_or_else(|error| panic!("buffer of {len} bytes: {error}"));
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, layout: Layout::from_size_align(len, align).unwrap_or(layout) }
    }

    /// The buffer's length in bytes.
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The alignment of the buffer's address.
    pub fn align(&self) -> usize {
        self.layout.align()
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: ptr points to len initialised bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len()) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr points to len initialised bytes owned exclusively by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len().max(1), self.align())
            .expect("invariant: the layout was valid at allocation");
        // SAFETY: allocated in with_align with this size (at least 1) and alignment.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes, align {})", self.len(), self.align())
    }
}
