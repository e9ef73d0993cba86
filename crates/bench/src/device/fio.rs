//! STUB: fio comparison (being written).
use indicatif::ProgressBar;

use super::{BenchError, DeviceConfig, FioComparison, PointSpec, Target};

/// Whether fio can be run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FioStatus {
    /// fio answered `--version`.
    Available {
        /// What it printed.
        version: String,
    },
    /// fio is missing; `hint` says how to install it.
    Missing {
        /// How to install fio.
        hint: String,
    },
}

/// Looks for fio on the PATH.
pub fn detect() -> FioStatus {
    FioStatus::Missing { hint: "stub".into() }
}

/// The fio engine that runs `spec` like tierkv does, if fio can run it.
pub fn engine_for(_spec: &PointSpec) -> Option<&'static str> {
    None
}

/// Runs `spec` with tierkv and fio alternately and compares medians.
pub fn compare(
    _target: &Target,
    _spec: &PointSpec,
    _config: &DeviceConfig,
    _progress: &ProgressBar,
) -> Result<FioComparison, BenchError> {
    Err(BenchError::Fio("stub".into()))
}
