//! The readable table of a WAL benchmark run, with the ratios the acceptance criteria read:
//! 1-thread `Sync` commits against the fdatasync limit, the group-commit speed-up with
//! threads, the pmem backend against the file backend, and tierkv against each peer.

use std::io::Write;

use super::{PeerPoint, WalPoint, WalReport};

fn latency(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.1} µs", ns as f64 / 1e3),
        _ => format!("{:.2} ms", ns as f64 / 1e6),
    }
}

fn size(bytes: usize) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// The point of `backend` at `threads` and `record_bytes`.
pub fn find<'a>(
    report: &'a WalReport,
    backend: &str,
    threads: usize,
    record_bytes: usize,
) -> Option<&'a WalPoint> {
    report
        .points
        .iter()
        .find(|p| p.backend == backend && p.threads == threads && p.record_bytes == record_bytes)
}

fn find_peer<'a>(
    report: &'a WalReport,
    engine: &str,
    threads: usize,
    record_bytes: usize,
) -> Option<&'a PeerPoint> {
    report
        .peers
        .iter()
        .find(|p| p.engine == engine && p.threads == threads && p.record_bytes == record_bytes)
}

/// Prints the table and the ratios.
pub fn print_table(report: &WalReport, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "machine: {}, {} cores, kernel {}, flush {}",
        report.machine.cpu_model, report.machine.cores, report.machine.kernel, report.machine.flush
    )?;
    writeln!(
        out,
        "path: {} ({}{}{})",
        report.path.display(),
        report.fs_type,
        if report.fs_is_memory { ", memory" } else { "" },
        if report.dax { ", DAX" } else { "" }
    )?;
    for note in &report.notes {
        writeln!(out, "note: {note}")?;
    }
    let limit = &report.fdatasync_limit;
    writeln!(
        out,
        "fdatasync limit: {} per 4 KiB pwrite+fdatasync, {:.0} commits/s ({} samples)",
        latency(limit.latency_ns_mean as u64),
        limit.per_s,
        limit.samples
    )?;
    writeln!(
        out,
        "{:<8} {:<10} {:>4} {:>7} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6}",
        "backend",
        "mode",
        "thr",
        "record",
        "commits/s",
        "p50",
        "p99",
        "p99.9",
        "max",
        "rec/sync",
        "busy",
        "cpu s"
    )?;
    for point in &report.points {
        writeln!(
            out,
            "{:<8} {:<10} {:>4} {:>7} {:>12.0} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6.2}",
            point.backend,
            point.pmem_mode.map_or("-", |mode| mode.name()),
            point.threads,
            size(point.record_bytes),
            point.commits_per_s,
            latency(point.latency_ns_p50),
            latency(point.latency_ns_p99),
            latency(point.latency_ns_p999),
            latency(point.latency_ns_max),
            if point.records_per_sync > 0.0 {
                format!("{:.1}", point.records_per_sync)
            } else {
                "-".into()
            },
            if point.sync_busy > 0.0 {
                format!("{:.0}%", point.sync_busy * 100.0)
            } else {
                "-".into()
            },
            point.cpu_s
        )?;
    }
    if !report.peers.is_empty() {
        writeln!(
            out,
            "{:<8} {:>4} {:>7} {:>12} {:>9}",
            "peer", "thr", "record", "commits/s", "p50"
        )?;
        for peer in &report.peers {
            writeln!(
                out,
                "{:<8} {:>4} {:>7} {:>12.0} {:>9}",
                peer.engine,
                peer.threads,
                size(peer.record_bytes),
                peer.commits_per_s,
                peer.latency_ns_p50.map_or("-".into(), latency)
            )?;
        }
    }
    for skipped in &report.peers_skipped {
        writeln!(out, "peer skipped: {skipped}")?;
    }
    print_ratios(report, out)
}

fn print_ratios(report: &WalReport, out: &mut dyn Write) -> std::io::Result<()> {
    let mut sizes: Vec<usize> = report.points.iter().map(|p| p.record_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut threads: Vec<usize> = report.points.iter().map(|p| p.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    writeln!(out, "ratios:")?;
    for &record in &sizes {
        if let Some(file1) = find(report, "file", 1, record) {
            match &file1.fdatasync_limit_around {
                Some(around) => writeln!(
                    out,
                    "  file, 1 thread, {}: {:.2} of the fdatasync limit measured around it \
                     ({:.0} and {:.0}/s before and after; {:.2} of the limit at the start){}",
                    size(record),
                    file1.commits_per_s / around.per_s,
                    around.before.per_s,
                    around.after.per_s,
                    file1.commits_per_s / report.fdatasync_limit.per_s,
                    if file1.limit_trial_ratios.len() > 1 {
                        format!(
                            "; the median of {} trials: {}",
                            file1.limit_trial_ratios.len(),
                            file1
                                .limit_trial_ratios
                                .iter()
                                .map(|r| format!("{r:.2}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    } else {
                        String::new()
                    }
                )?,
                None => writeln!(
                    out,
                    "  file, 1 thread, {}: {:.2} of the fdatasync limit",
                    size(record),
                    file1.commits_per_s / report.fdatasync_limit.per_s
                )?,
            }
            for &t in threads.iter().filter(|&&t| t > 1) {
                if let Some(file_t) = find(report, "file", t, record) {
                    writeln!(
                        out,
                        "  file, {t} threads, {}: {:.2}x the 1-thread commits/s",
                        size(record),
                        file_t.commits_per_s / file1.commits_per_s
                    )?;
                }
            }
        }
        for &t in &threads {
            if let (Some(pmem), Some(file)) =
                (find(report, "pmem", t, record), find(report, "file", t, record))
            {
                writeln!(
                    out,
                    "  pmem / file, {t} thread(s), {}: {:.2}x commits/s",
                    size(record),
                    pmem.commits_per_s / file.commits_per_s
                )?;
            }
            for engine in ["rocksdb", "sqlite"] {
                let Some(peer) = find_peer(report, engine, t, record) else { continue };
                for backend in ["file", "pmem"] {
                    if let Some(ours) = find(report, backend, t, record) {
                        writeln!(
                            out,
                            "  tierkv {backend} / {engine}, {t} thread(s), {}: {:.2}x commits/s",
                            size(record),
                            ours.commits_per_s / peer.commits_per_s
                        )?;
                    }
                }
            }
        }
    }
    Ok(())
}
