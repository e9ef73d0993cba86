//! STUB
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;

use crate::{AccessMethod, IoStats, OpenOptions, PmemMode, Result};

#[derive(Debug)]
pub(crate) struct MappedFile {}

#[allow(clippy::unused_self)]
impl MappedFile {
    pub(crate) fn new(_fd: OwnedFd, _p: &Path, _o: &OpenOptions, _s: Arc<IoStats>) -> Result<Self> { todo!() }
    pub(crate) fn read_at(&self, _buf: &mut [u8], _offset: u64) -> Result<()> { todo!() }
    pub(crate) fn write_at(&self, _buf: &[u8], _offset: u64) -> Result<()> { todo!() }
    pub(crate) fn len(&self) -> u64 { todo!() }
    pub(crate) fn set_len(&self, _len: u64) -> Result<()> { todo!() }
    pub(crate) fn reserve(&self, _len: u64) -> Result<()> { todo!() }
    pub(crate) fn sync_data(&self) -> Result<()> { todo!() }
    pub(crate) fn sync_all(&self) -> Result<()> { todo!() }
    pub(crate) fn persist(&self, _offset: u64, _len: u64) -> Result<()> { todo!() }
    pub(crate) fn store_u64(&self, _offset: u64, _value: u64) -> Result<()> { todo!() }
    pub(crate) fn advise_dontneed(&self) -> Result<()> { todo!() }
    pub(crate) fn method(&self) -> AccessMethod { todo!() }
    pub(crate) fn pmem_mode(&self) -> Option<PmemMode> { todo!() }
    pub(crate) fn path(&self) -> &Path { todo!() }
    pub(crate) fn stats_handle(&self) -> &Arc<IoStats> { todo!() }
}
