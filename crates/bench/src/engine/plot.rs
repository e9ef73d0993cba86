//! SVG plots of an engine-benchmark report: ops/s per workload, latency percentiles per
//! workload, resident memory after each workload against the bound, memory over time (the
//! trace: resident, anonymous, the allocator's live bytes and what the engine counts, with the
//! workloads shaded), and the read-method comparison when it ran.
//!
//! Invariants:
//! - Every plot carries a footer naming the machine, the allocator, the cache budget and the
//!   data set: a figure without its setting is not a result.
//! - A missing value draws no bar (the shared bar chart's rule).
//!
//! Must never: write outside `dir`, or panic on a degenerate report (no workloads, zeros).

use std::path::{Path, PathBuf};

use super::EngineBenchReport;
use crate::bars::{render_bars, Bar, BarChart, Group};
use crate::canvas::write_svg;
use crate::device::BenchError;
use crate::lines::{render_lines, Line, LineChart, Scale};

const MIB: f64 = (1 << 20) as f64;

/// Writes the plots into `dir` (created if missing) and returns their paths, sorted:
/// `ops.svg`, `latency.svg`, `memory.svg`, `memory-trace.svg` when memory was sampled, and
/// `read-methods.svg` when the comparison ran.
pub fn write_plots(report: &EngineBenchReport, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    std::fs::create_dir_all(dir)
        .map_err(|source| BenchError::Output { path: dir.to_path_buf(), source })?;
    let footer = format!(
        "CPU: {} ({} cores) | kernel {} | fs: {} | allocator: {} | cache {} MiB | {} keys, \
         {} MiB of data | durability {}",
        report.machine.cpu_model,
        report.machine.cores,
        report.machine.kernel,
        report.fs_type,
        report.allocator,
        report.cache_size >> 20,
        report.num,
        report.data_bytes >> 20,
        report.durability
    );
    let one = |value: f64| vec![Bar { value: Some(value), reference: None }];
    let ops = BarChart {
        title: format!("tierkv engine: operations per second ({} read method)", report.read_method),
        y_label: "ops/s".into(),
        series: vec!["ops/s".into()],
        groups: report
            .results
            .iter()
            .map(|r| Group { label: r.workload.name().into(), bars: one(r.ops_per_sec) })
            .collect(),
        reference_label: None,
    };
    let latency = BarChart {
        title: "tierkv engine: latency percentiles".into(),
        y_label: "µs".into(),
        series: vec!["p50".into(), "p99".into(), "p99.9".into()],
        groups: report
            .results
            .iter()
            .map(|r| Group {
                label: r.workload.name().into(),
                bars: [r.p50_us, r.p99_us, r.p999_us]
                    .into_iter()
                    .map(|value| Bar { value: Some(value), reference: None })
                    .collect(),
            })
            .collect(),
        reference_label: None,
    };
    let bound = report.memory_bound_bytes as f64 / MIB;
    let mut memory_groups: Vec<Group> = report
        .results
        .iter()
        .map(|r| Group {
            label: r.workload.name().into(),
            bars: vec![Bar { value: r.rss_bytes.map(|b| b as f64 / MIB), reference: Some(bound) }],
        })
        .collect();
    memory_groups.push(Group {
        label: "peak".into(),
        bars: vec![Bar {
            value: report.peak_rss_bytes.map(|b| b as f64 / MIB),
            reference: Some(bound),
        }],
    });
    let memory = BarChart {
        title: format!(
            "tierkv engine: resident memory, cache_size {} MiB, data {:.1}× it",
            report.cache_size >> 20,
            report.data_bytes as f64 / report.cache_size.max(1) as f64
        ),
        y_label: "MiB resident".into(),
        series: vec!["after the workload".into()],
        groups: memory_groups,
        reference_label: Some("bound: cache_size + 64 MiB".into()),
    };
    let mut written = vec![
        write_svg(dir, "ops.svg", render_bars(&ops, &footer))?,
        write_svg(dir, "latency.svg", render_bars(&latency, &footer))?,
        write_svg(dir, "memory.svg", render_bars(&memory, &footer))?,
    ];
    if !report.memory_trace.is_empty() {
        written.push(write_svg(
            dir,
            "memory-trace.svg",
            render_lines(&trace_chart(report), &footer),
        )?);
    }
    if let Some(methods) = &report.read_methods {
        let trials = methods.trials.iter().map(|t| t.trial + 1).max().unwrap_or(0);
        let pass = |trial: usize, method: &str| {
            methods
                .trials
                .iter()
                .find(|t| t.trial + 1 == trial && t.method == method)
                .map(|t| t.ops_per_sec)
        };
        let mut groups: Vec<Group> = (1..=trials)
            .map(|trial| Group {
                label: format!("trial {trial}"),
                bars: ["syscall", "mmap"]
                    .into_iter()
                    .map(|method| Bar { value: pass(trial, method), reference: None })
                    .collect(),
            })
            .collect();
        groups.push(Group {
            label: "median".into(),
            bars: vec![
                Bar { value: methods.syscall_median_ops_per_sec, reference: None },
                Bar {
                    value: methods.mmap_median_ops_per_sec,
                    // Where the seed's +63% would put mmap.
                    reference: methods.syscall_median_ops_per_sec.map(|s| s * 1.63),
                },
            ],
        });
        let chart = BarChart {
            title: format!(
                "readrandom by read method, cold engine cache: mmap ÷ syscall = {}",
                methods.mmap_over_syscall.map_or("-".into(), |r| format!("{r:.2}"))
            ),
            y_label: "ops/s".into(),
            series: vec!["syscall".into(), "mmap".into()],
            groups,
            reference_label: Some("seed 000: syscall × 1.63".into()),
        };
        written.push(write_svg(dir, "read-methods.svg", render_bars(&chart, &footer))?);
    }
    written.sort();
    Ok(written)
}

/// Memory over time: what the process holds and what the engine counts, against the bound.
fn trace_chart(report: &EngineBenchReport) -> LineChart {
    let trace = &report.memory_trace;
    let line = |name: &str, value: &dyn Fn(&super::MemorySample) -> Option<f64>| Line {
        name: name.into(),
        points: trace.iter().filter_map(|s| Some((s.seconds, value(s)? / MIB))).collect(),
        ..Line::default()
    };
    LineChart {
        title: format!(
            "tierkv engine: memory over time, cache_size {} MiB, data {:.1}× it",
            report.cache_size >> 20,
            report.data_bytes as f64 / report.cache_size.max(1) as f64
        ),
        y_label: "MiB".into(),
        x_label: "seconds".into(),
        x_scale: Scale::Linear,
        lines: vec![
            line("resident (VmRSS)", &|s| Some(s.rss_bytes as f64)),
            line("anonymous (RssAnon)", &|s| s.anon_bytes.map(|b| b as f64)),
            line("allocator: in use", &|s| s.heap_in_use_bytes.map(|b| b as f64)),
            line("engine: pages + undo", &|s| {
                Some((s.engine_cache_bytes? + s.engine_memtable_bytes?) as f64)
            }),
        ],
        bound: Some((report.memory_bound_bytes as f64 / MIB, "bound: cache_size + 64 MiB".into())),
        shades: report
            .results
            .iter()
            .map(|r| (r.started_s, r.started_s + r.seconds, r.workload.name().into()))
            .collect(),
    }
}
