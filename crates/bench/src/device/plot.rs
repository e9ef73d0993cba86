//! STUB: SVG plots (being written).
use std::path::{Path, PathBuf};

use super::{BenchError, DeviceReport};

/// Writes the plots into `dir` and returns their paths.
pub fn write_plots(_report: &DeviceReport, _dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    Ok(Vec::new())
}
