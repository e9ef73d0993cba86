//! STUB: the simulated backend is being written; see the module plan in the task description.

use std::path::Path;
use std::sync::Arc;

use crate::{AccessMethod, FaultErrno, IoStats, OpenOptions, PmemMode, Result};

/// A simulated file system.
#[derive(Clone, Debug, Default)]
pub struct SimFs {}

/// A fault to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultPlan {
    /// The 1-based call number to fail.
    pub call: u64,
    /// Fail every call from `call` on, not just that one.
    pub persistent: bool,
    /// The error.
    pub errno: FaultErrno,
}

impl SimFs {
    pub(crate) fn open(&self, _path: &Path, _options: &OpenOptions) -> Result<SimFile> {
        todo!()
    }
    pub(crate) fn create_dir_all(&self, _path: &Path) -> Result<()> {
        todo!()
    }
    pub(crate) fn remove_file(&self, _path: &Path) -> Result<()> {
        todo!()
    }
    pub(crate) fn rename(&self, _from: &Path, _to: &Path) -> Result<()> {
        todo!()
    }
    pub(crate) fn sync_dir(&self, _path: &Path) -> Result<()> {
        todo!()
    }
    pub(crate) fn list_dir(&self, _path: &Path) -> Result<Vec<String>> {
        todo!()
    }
    pub(crate) fn exists(&self, _path: &Path) -> Result<bool> {
        todo!()
    }
}

/// A simulated open file.
#[derive(Debug)]
pub(crate) struct SimFile {}

#[allow(clippy::unused_self, missing_docs)]
impl SimFile {
    pub(crate) fn read_at(&self, _buf: &mut [u8], _offset: u64) -> Result<()> {
        todo!()
    }
    pub(crate) fn write_at(&self, _buf: &[u8], _offset: u64) -> Result<()> {
        todo!()
    }
    pub(crate) fn len(&self) -> u64 {
        todo!()
    }
    pub(crate) fn set_len(&self, _len: u64) -> Result<()> {
        todo!()
    }
    pub(crate) fn reserve(&self, _len: u64) -> Result<()> {
        todo!()
    }
    pub(crate) fn sync_data(&self) -> Result<()> {
        todo!()
    }
    pub(crate) fn sync_all(&self) -> Result<()> {
        todo!()
    }
    pub(crate) fn persist(&self, _offset: u64, _len: u64) -> Result<()> {
        todo!()
    }
    pub(crate) fn store_u64(&self, _offset: u64, _value: u64) -> Result<()> {
        todo!()
    }
    pub(crate) fn advise_dontneed(&self) -> Result<()> {
        todo!()
    }
    pub(crate) fn method(&self) -> AccessMethod {
        todo!()
    }
    pub(crate) fn pmem_mode(&self) -> Option<PmemMode> {
        todo!()
    }
    pub(crate) fn direct_alignment(&self) -> Option<u64> {
        todo!()
    }
    pub(crate) fn path(&self) -> &Path {
        todo!()
    }
    pub(crate) fn stats_handle(&self) -> &Arc<IoStats> {
        todo!()
    }
}
