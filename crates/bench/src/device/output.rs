//! STUB: table and CSV output (being written).
use std::io::Write;
use std::path::Path;

use super::{BenchError, DeviceReport};

/// Prints one line per point.
pub fn print_table(_report: &DeviceReport, _out: &mut dyn Write) -> std::io::Result<()> {
    Ok(())
}

/// Prints one line per fio comparison.
pub fn print_fio_table(_report: &DeviceReport, _out: &mut dyn Write) -> std::io::Result<()> {
    Ok(())
}

/// Writes one CSV row per point.
pub fn write_csv(_report: &DeviceReport, _path: &Path) -> Result<(), BenchError> {
    Ok(())
}
