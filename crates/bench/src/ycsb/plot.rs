//! SVG plots of a YCSB report (`tierkv bench ycsb --plot`):
//!
//! - `throughput.svg`: ops/s of each engine in each phase, the load and each workload, as
//!   grouped bars (one group per phase, one bar per engine; a log axis when they span decades);
//! - `latency-<phase>.svg` for each run phase: the latency CDF of each engine and operation
//!   type, latency on a log x axis against the percentile. With several engines a line's colour
//!   is its engine and its dash its operation type; with one engine, the colour is the
//!   operation type. The points are the report's `cdf`s (`driver::CDF_PERCENTILES`); the one at
//!   percentile 0 is left out, since the chart draws only positive values.
//!
//! Invariants:
//! - Every plot carries a footer naming the machine, the allocator, the cache, the data set,
//!   the threads, the durability and how the phases were bounded, paced and warmed up: a figure
//!   without its setting is not a result.
//! - A phase an engine did not run draws no bar, and an operation without a CDF no line.
//! - File names are made of the phase's letters and digits only.
//!
//! Must never: write outside `dir`, or panic on a degenerate report (no engines, no phases,
//! empty CDFs).

use std::path::{Path, PathBuf};

use super::driver::{PhaseResult, YcsbReport};
use super::WorkloadSpec;
use crate::bars::{render_bars, Bar, BarChart, Group, COLOURS};
use crate::canvas::{write_svg, Dash};
use crate::device::BenchError;
use crate::lines::{render_lines, Line, LineChart, Scale};

/// The name of the load phase in a report.
const LOAD: &str = "load";

/// Operation types in the driver's order, each with the dash of its lines.
const OPERATION_DASHES: [(&str, Option<Dash>); 5] = [
    ("read", None),
    ("update", Some((8.0, 4.0))),
    ("insert", Some((2.0, 4.0))),
    ("scan", Some((14.0, 6.0))),
    ("read_modify_write", Some((4.0, 2.0))),
];

/// Writes the plots into `dir` (created if missing) and returns their paths, sorted:
/// `throughput.svg`, then `latency-<phase>.svg` for each run phase.
pub fn write_plots(report: &YcsbReport, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    std::fs::create_dir_all(dir)
        .map_err(|source| BenchError::Output { path: dir.to_path_buf(), source })?;
    let footer = footer(report);
    let phases = phase_names(report);
    let mut written =
        vec![write_svg(dir, "throughput.svg", render_bars(&throughput_chart(report), &footer))?];
    for phase in phases.iter().filter(|phase| *phase != LOAD) {
        let file_name: String = phase.chars().filter(char::is_ascii_alphanumeric).collect();
        let svg = render_lines(&latency_chart(report, phase), &footer);
        written.push(write_svg(dir, &format!("latency-{file_name}.svg"), svg)?);
    }
    written.sort();
    Ok(written)
}

/// The setting of every plot, in two lines: the machine and the engines', then the run's.
fn footer(report: &YcsbReport) -> String {
    let bound = match (report.operations, report.duration_s) {
        (0, Some(seconds)) => format!("{seconds} s per workload"),
        (operations, Some(seconds)) => format!("{operations} ops or {seconds} s per workload"),
        (operations, None) => format!("{operations} ops per workload"),
    };
    let target =
        report.target_ops_per_sec.map_or("unpaced".into(), |t| format!("target {t} ops/s"));
    format!(
        "CPU: {} ({} cores) | kernel {} | allocator {} | cache {} MiB each | durability {}\n\
         {} records | {bound} | warm-up {} ops per workload | {} thread(s) | {target}",
        report.machine.cpu_model,
        report.machine.cores,
        report.machine.kernel,
        report.allocator,
        report.cache_bytes >> 20,
        report.durability,
        report.records,
        report.warmup_operations,
        thread_counts(report),
    )
}

/// `2`, or `1, 2, 4` where every engine ran at each.
fn thread_counts(report: &YcsbReport) -> String {
    report.threads.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
}

/// Every phase of every engine, in the order first run.
fn phase_names(report: &YcsbReport) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for phase in report.engines.iter().flat_map(|run| &run.phases) {
        if !names.contains(&phase.phase) {
            names.push(phase.phase.clone());
        }
    }
    names
}

fn find<'a>(phases: &'a [PhaseResult], name: &str) -> Option<&'a PhaseResult> {
    phases.iter().find(|phase| phase.phase == name)
}

/// `load`, or the workload's letter in capitals.
fn phase_label(name: &str) -> String {
    if name == LOAD {
        name.into()
    } else {
        name.to_ascii_uppercase()
    }
}

/// Ops/s, grouped by phase, one bar per engine.
fn throughput_chart(report: &YcsbReport) -> BarChart {
    let several = report.threads.len() > 1;
    BarChart {
        title: format!("YCSB: operations per second, {} thread(s)", thread_counts(report)),
        y_label: "ops/s".into(),
        // A failed engine keeps its place in the legend, marked, and has no bars.
        series: report
            .engines
            .iter()
            .map(|run| match run.failure {
                Some(_) => format!("{} (failed: see the report)", run.label(several)),
                None => run.label(several),
            })
            .collect(),
        groups: phase_names(report)
            .iter()
            .map(|name| Group {
                label: phase_label(name),
                bars: report
                    .engines
                    .iter()
                    .map(|run| Bar {
                        value: find(&run.phases, name).map(|p| p.ops_per_sec),
                        reference: None,
                    })
                    .collect(),
            })
            .collect(),
        reference_label: None,
    }
}

/// `scan 95%, insert 5%`: the mix of core workload `name`, largest share first, if it is one.
fn mix(name: &str) -> Option<String> {
    let spec = WorkloadSpec::core(name)?;
    let mut shares = [
        ("read", spec.read),
        ("update", spec.update),
        ("insert", spec.insert),
        ("scan", spec.scan),
        ("read-modify-write", spec.read_modify_write),
    ];
    shares.sort_by(|a, b| b.1.total_cmp(&a.1));
    let parts: Vec<String> = shares
        .iter()
        .filter(|(_, share)| *share > 0.0)
        .map(|(operation, share)| format!("{operation} {}%", share * 100.0))
        .collect();
    Some(parts.join(", "))
}

/// The latency CDF of each engine and operation type in run phase `name`.
fn latency_chart(report: &YcsbReport, name: &str) -> LineChart {
    let several = report.engines.len() > 1;
    let several_counts = report.threads.len() > 1;
    let mut lines = Vec::new();
    for (engine_index, run) in report.engines.iter().enumerate() {
        let Some(phase) = find(&run.phases, name) else { continue };
        for stats in &phase.per_operation {
            let place =
                OPERATION_DASHES.iter().position(|(op, _)| *op == stats.operation).unwrap_or(0);
            let (colour, dash) = match several {
                true => (COLOURS[engine_index % COLOURS.len()], OPERATION_DASHES[place].1),
                false => (COLOURS[place % COLOURS.len()], None),
            };
            let label = match several {
                true => format!("{} {}", run.label(several_counts), stats.operation),
                false => stats.operation.clone(),
            };
            lines.push(Line {
                name: label,
                points: stats.cdf.iter().map(|p| (p.latency_us, p.percentile)).collect(),
                colour: Some(colour),
                dash,
            });
        }
    }
    let engines = match several {
        true => String::new(),
        false => report.engines.first().map_or(String::new(), |run| format!(" on {}", run.engine)),
    };
    let mix = mix(name).map_or(String::new(), |mix| format!(" ({mix})"));
    LineChart {
        title: format!("YCSB workload {}{mix}: latency CDF{engines}", phase_label(name)),
        y_label: "percentile".into(),
        x_label: "latency, µs (log scale)".into(),
        x_scale: Scale::Log,
        lines,
        bound: None,
        shades: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::driver::{run_all, EngineRun, TierkvStore, YcsbConfig};
    use super::*;

    fn report(engines: Vec<EngineRun>) -> YcsbReport {
        YcsbReport {
            command: "tierkv bench ycsb".into(),
            machine: crate::machine::machine_info().into(),
            records: 500,
            operations: 400,
            duration_s: Some(10.0),
            target_ops_per_sec: None,
            warmup_operations: 100,
            threads: vec![2],
            durability: "none".into(),
            cache_bytes: 4 << 20,
            allocator: "system".into(),
            memory_limit_bytes: None,
            isolation: String::new(),
            engines,
        }
    }

    fn assert_svg(path: &Path) -> String {
        let svg = std::fs::read_to_string(path).expect("read");
        assert!(svg.starts_with("<svg ") && svg.contains("xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.ends_with("</svg>\n"), "{path:?}");
        assert_eq!(svg.matches("<svg").count(), 1, "{path:?}");
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{path:?}");
        svg
    }

    #[test]
    fn a_tiny_run_draws_throughput_and_a_cdf_per_run_phase() {
        let dir = tempfile::tempdir().expect("dir");
        let options = tierkv::Options { cache_size: 4 << 20, ..tierkv::Options::default() };
        let db = tierkv::Db::open(dir.path().join("db"), options).expect("open");
        let store = TierkvStore { db, durability: tierkv::Durability::None };
        let config = YcsbConfig {
            records: 500,
            operations: 400,
            duration: Some(std::time::Duration::from_secs(10)),
            warmup_operations: 100,
            threads: 2,
            workloads: ["a", "e"].iter().filter_map(|w| WorkloadSpec::core(w)).collect(),
            ..YcsbConfig::default()
        };
        let phases = run_all(&store, &config).expect("run");
        store.db.close().expect("close");
        // The same phases under two names stand for two engines.
        // A third failed: it has a place in the legend, marked, and no bars.
        let failed = EngineRun { failure: Some("killed".into()), ..EngineRun::new("gone", vec![]) };
        let engines = vec![
            EngineRun::new("tierkv", phases.clone()),
            EngineRun::new("other <&>", phases),
            failed,
        ];
        let plots = dir.path().join("plots");
        let written = write_plots(&report(engines), &plots).expect("plots");
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["latency-a.svg", "latency-e.svg", "throughput.svg"]);
        for path in &written {
            assert!(path.starts_with(&plots));
            let svg = assert_svg(path);
            assert!(svg.contains("warm-up 100 ops"), "{path:?}");
        }
        let throughput = assert_svg(&plots.join("throughput.svg"));
        // Three phases by two engines; the engine's name is escaped.
        assert!(throughput.contains(">\nload\n</text>") && throughput.contains(">\nE\n</text>"));
        assert!(throughput.contains("other &lt;&amp;&gt;"));
        assert!(throughput.contains(">\ngone (failed: see the report)\n</text>"));
        // Workload E: scans and inserts, a line for each by each engine, dashed by type.
        let latency = assert_svg(&plots.join("latency-e.svg"));
        assert!(
            latency.contains(">\ntierkv scan\n</text>")
                && latency.contains(">\ntierkv insert\n</text>")
        );
        // Both types are dashed: their lines are dashes, none a solid polyline.
        assert_eq!(latency.matches("<polyline").count(), 0);
        assert!(latency.matches("<line").count() > 50);
        assert!(latency.contains("scan 95%, insert 5%"));
    }

    #[test]
    fn an_empty_report_still_draws_its_throughput() {
        let dir = tempfile::tempdir().expect("dir");
        let written = write_plots(&report(Vec::new()), dir.path()).expect("plots");
        assert_eq!(written.len(), 1);
        assert!(assert_svg(&written[0]).contains("no data"));
        // A phase with no CDF (a report from before they were kept) draws an empty chart.
        let phase = PhaseResult {
            phase: "../c".into(),
            operations: 0,
            seconds: 0.0,
            ops_per_sec: 0.0,
            not_found: 0,
            warmup_operations: 0,
            warmup_seconds: 0.0,
            per_operation: Vec::new(),
            engine_counters: None,
        };
        let one = vec![EngineRun::new("tierkv", vec![phase])];
        let written = write_plots(&report(one), dir.path()).expect("plots");
        assert!(written.iter().all(|path| path.starts_with(dir.path())));
        assert!(dir.path().join("latency-c.svg").exists());
    }
}
