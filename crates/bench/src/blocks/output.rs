//! The readable tables of a block-benchmark run: seed 003's latency and bandwidth tables with
//! the seed's figures beside ours, the page-update runs, the atomic ÷ doublewrite ratios the
//! acceptance criteria read, and the sustained-overwrite result.

use std::io::Write;

use super::micro::{MicroTable, Timing};
use super::pages::PageUpdatePoint;
use super::{BlocksReport, Buffering, MicroPattern, RunLength};

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

fn size(bytes: usize) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "n/a".to_string(), |v| format!("{v:.2}"))
}

/// Prints every table and the ratios.
pub fn print_table(report: &BlocksReport, out: &mut dyn Write) -> std::io::Result<()> {
    let machine = &report.machine;
    writeln!(
        out,
        "machine: {}, {} cores, {:.1} GiB, kernel {}",
        machine.cpu_model,
        machine.cores,
        machine.memory_bytes as f64 / (1u64 << 30) as f64,
        machine.kernel
    )?;
    writeln!(
        out,
        "path: {} ({}{})",
        report.path.display(),
        report.fs_type,
        if report.fs_is_memory { ", memory" } else { "" }
    )?;
    match (&report.direct.refused, report.direct.alignment_bytes) {
        (Some(reason), _) => writeln!(out, "O_DIRECT: refused ({reason})")?,
        (None, Some(align)) => writeln!(out, "O_DIRECT: accepted, {align}-byte alignment")?,
        (None, None) => writeln!(out, "O_DIRECT: accepted")?,
    }
    print_latency(&report.latency, out)?;
    print_bandwidth(&report.bandwidth, out)?;
    print_micro_comparisons(report, out)?;
    print_page_updates(report, out)?;
    if let Some(overwrite) = &report.overwrite {
        writeln!(out)?;
        writeln!(
            out,
            "Sustained overwrite (LogStore, default options): {} pages of {}, groups of {}, \
             {:.0} s, {:.0} pages/s",
            overwrite.pages_total,
            size(overwrite.page_bytes),
            overwrite.group_pages,
            overwrite.elapsed_s,
            overwrite.pages_per_s
        )?;
        writeln!(
            out,
            "  space amplification (file bytes / live bytes): max {:.3}, final {:.3} over {} \
             samples; {:.0} MiB written, {:.0} MiB of it cleaning copies, {} segments cleaned{}",
            overwrite.space_amplification_max,
            overwrite.space_amplification_final,
            overwrite.samples.len(),
            mib(overwrite.device_bytes_written),
            mib(overwrite.relocated_bytes),
            overwrite.segments_cleaned,
            overwrite
                .background_error
                .as_ref()
                .map(|e| format!("; background error: {e}"))
                .unwrap_or_default()
        )?;
    }
    writeln!(out)?;
    for note in &report.notes {
        writeln!(out, "note: {note}")?;
    }
    Ok(())
}

fn cell(timing: Option<&Timing>, seed: Option<f64>) -> String {
    let seed = seed.map_or_else(|| "NA".to_string(), |s| format!("{s:.0}"));
    match timing {
        Some(t) => format!(
            "{:>7.0} {:>7.0} {:>7.0} {:>6}",
            t.latency_us_median, t.latency_us_p99, t.latency_us_mean, seed
        ),
        None => format!("{:>7} {:>7} {:>7} {:>6}", "-", "-", "-", seed),
    }
}

fn print_latency(table: &MicroTable, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "Write latency, {} blocks of {} per operation, {} repeats: median, p99 and mean of the \
         whole operation in µs; seed = seed 003's figure",
        table.blocks_per_op,
        size(table.block_bytes),
        table.repeats
    )?;
    let group = |name: &str| format!("{:-^30}", format!(" {name} "));
    writeln!(
        out,
        "{:<11} {:<9} {} {} {}",
        "",
        "",
        group("sync"),
        group("async: 64 writes, 1 fdatasync"),
        group("atomic group")
    )?;
    let heads = format!("{:>7} {:>7} {:>7} {:>6}", "median", "p99", "mean", "seed");
    writeln!(out, "{:<11} {:<9} {heads} {heads} {heads}", "pattern", "buffering")?;
    for row in &table.rows {
        writeln!(
            out,
            "{:<11} {:<9} {} {} {}",
            row.pattern.name(),
            row.buffering.name(),
            cell(row.sync.as_ref(), Some(row.seed.sync)),
            cell(row.async_writes.as_ref(), Some(row.seed.async_writes)),
            cell(row.atomic_group.as_ref(), row.seed.atomic_group)
        )?;
    }
    Ok(())
}

fn print_bandwidth(table: &MicroTable, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "Write bandwidth, {} blocks of {} per operation, {} repeats: MB/s = {} × {} / median \
         latency (MB = 10^6 B); seed = seed 003's figure",
        table.blocks_per_op,
        size(table.block_bytes),
        table.repeats,
        table.blocks_per_op,
        size(table.block_bytes)
    )?;
    let group = |name: &str| format!("{:-^22}", format!(" {name} "));
    writeln!(
        out,
        "{:<11} {:<9} {} {} {}",
        "",
        "",
        group("sync"),
        group("async: 64 w, 1 sync"),
        group("atomic group")
    )?;
    let heads = format!("{:>7} {:>7} {:>6}", "MB/s", "med µs", "seed");
    writeln!(out, "{:<11} {:<9} {heads} {heads} {heads}", "pattern", "buffering")?;
    let cell = |timing: Option<&Timing>, seed: Option<f64>| {
        let seed = seed.map_or_else(|| "NA".to_string(), |s| format!("{s:.0}"));
        match timing {
            Some(t) => {
                format!("{:>7.0} {:>7.0} {:>6}", t.bandwidth_mb_per_s, t.latency_us_median, seed)
            }
            None => format!("{:>7} {:>7} {:>6}", "-", "-", seed),
        }
    };
    for row in &table.rows {
        writeln!(
            out,
            "{:<11} {:<9} {} {} {}",
            row.pattern.name(),
            row.buffering.name(),
            cell(row.sync.as_ref(), Some(row.seed.sync)),
            cell(row.async_writes.as_ref(), Some(row.seed.async_writes)),
            cell(row.atomic_group.as_ref(), row.seed.atomic_group)
        )?;
    }
    Ok(())
}

/// Median latency of the atomic group against the pwrite methods, per pattern.
fn print_micro_comparisons(report: &BlocksReport, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(out, "atomic group ÷ other methods, median latency (below 1: the group is faster):")?;
    for table in [&report.latency, &report.bandwidth] {
        for pattern in MicroPattern::ALL {
            let Some(buffered) = table.row(pattern, Buffering::Buffered) else { continue };
            let Some(atomic) = &buffered.atomic_group else { continue };
            let mut parts = Vec::new();
            let mut against = |name: &str, timing: Option<&Timing>| {
                if let Some(t) = timing {
                    parts.push(format!(
                        "{name} {:.2}",
                        atomic.latency_us_median / t.latency_us_median
                    ));
                }
            };
            against("buffered sync", buffered.sync.as_ref());
            against("buffered async", buffered.async_writes.as_ref());
            if let Some(direct) = table.row(pattern, Buffering::Direct) {
                against("direct sync", direct.sync.as_ref());
                against("direct async", direct.async_writes.as_ref());
            }
            writeln!(
                out,
                "  {} × {}, {}: {}",
                table.blocks_per_op,
                size(table.block_bytes),
                pattern.name(),
                parts.join(", ")
            )?;
        }
    }
    Ok(())
}

fn print_page_updates(report: &BlocksReport, out: &mut dyn Write) -> std::io::Result<()> {
    if report.page_update.is_empty() {
        return Ok(());
    }
    let options = &report.options;
    let length = match options.run_length {
        RunLength::Seconds(s) => format!("{s} s per mode"),
        RunLength::Updates(n) => format!("{n} updates per mode"),
    };
    writeln!(out)?;
    writeln!(
        out,
        "Page updates: {} ({}), {} MiB of pages, flush every {} updates in groups of at most {} \
         pages, {length}; bytes from the stores' counters over the measured phase",
        options.distribution.name(),
        if options.distribution == super::Distribution::Zipfian {
            format!("theta {}, scrambled", options.zipf_theta)
        } else {
            "every page alike".into()
        },
        options.data_set_bytes >> 20,
        options.checkpoint_every,
        options.group_pages_max
    )?;
    writeln!(
        out,
        "{:>6} {:<15} {:>9} {:>9} {:>9} {:>9} {:>6} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9} {:>9} {:>7} {:>6} {:>8} {:>6} {:>9} {:>9}",
        "page",
        "mode",
        "updates",
        "upd/s",
        "pages",
        "pages/s",
        "cpu/s",
        "dev MiB",
        "B/page",
        "reloc",
        "mapckpt",
        "dblwr",
        "inplace",
        "syncs",
        "/proc MiB",
        "blkdev MiB",
        "req/page",
        "reuse",
        "runs/blk",
        "space",
        "recov ms",
        "scan MiB"
    )?;
    for point in &report.page_update {
        print_point(point, out)?;
    }
    writeln!(out, "  (reloc, mapckpt, dblwr, inplace: MiB of cleaning copies, map checkpoints, doublewrite file, in-place slots;")?;
    writeln!(out, "   cpu/s: CPU seconds of the process (every thread) per second of the run;")?;
    writeln!(out, "   blkdev MiB, req/page: what the block device under the path wrote meanwhile (bytes, and write requests per page),")?;
    writeln!(out, "     journal and other processes included;")?;
    writeln!(out, "   reuse, runs/blk: share of pages written into reused space of older segments, and writes per such page;")?;
    writeln!(out, "   recov ms, scan MiB: reopening the store after the run, and the log it scanned after its map checkpoint)")?;
    writeln!(out, "ratios, atomic group ÷ doublewrite:")?;
    for ratio_row in &report.page_update_ratios {
        writeln!(
            out,
            "  {} pages, median of {} trials: bytes written per page {} (store counters), {} \
             (block device), {} (/proc/self/io); pages/s {} (trials: {}; medians {:.0} and {:.0}){}",
            size(ratio_row.page_bytes),
            ratio_row.trials,
            ratio(ratio_row.device_bytes_ratio),
            ratio(ratio_row.block_device_write_bytes_ratio),
            ratio(ratio_row.proc_write_bytes_ratio),
            ratio(ratio_row.pages_per_s_ratio),
            ratio_row
                .trial_pages_per_s_ratios
                .iter()
                .map(|r| ratio(*r))
                .collect::<Vec<_>>()
                .join(", "),
            ratio_row.atomic_pages_per_s_median,
            ratio_row.doublewrite_pages_per_s_median,
            if ratio_row.same_groups { " (same groups)" } else { "" }
        )?;
    }
    Ok(())
}

fn print_point(point: &PageUpdatePoint, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{:>6} {:<15} {:>9} {:>9.0} {:>9} {:>9.0} {:>6.2} {:>9.1} {:>8.0} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>7} {:>9} {:>9} {:>7} {:>6.2} {:>8} {:>6.2} {:>9.1} {:>9.1}",
        size(point.page_bytes),
        format!("{} #{}", point.mode, point.trial + 1),
        point.updates,
        point.updates_per_s,
        point.pages_flushed,
        point.pages_per_s,
        point.cpu_s / point.elapsed_s.max(1e-9),
        mib(point.device_bytes_written),
        point.device_bytes_per_page,
        mib(point.relocated_bytes),
        mib(point.checkpoint_bytes),
        mib(point.doublewrite_bytes),
        mib(point.in_place_bytes),
        point.syncs,
        point.proc_write_bytes.map_or_else(|| "n/a".to_string(), |b| format!("{:.1}", mib(b))),
        point
            .block_device_write_bytes
            .map_or_else(|| "n/a".to_string(), |b| format!("{:.1}", mib(b))),
        point.block_device_write_requests_per_page.map_or_else(|| "n/a".into(), |r| format!("{r:.2}")),
        point.reused_blocks as f64 / point.pages_flushed.max(1) as f64,
        if point.reused_blocks > 0 {
            format!("{:.2}", point.reused_runs as f64 / point.reused_blocks as f64)
        } else {
            "-".into()
        },
        point.space_amplification,
        point.recovery_ms,
        mib(point.recovery_bytes_scanned)
    )
}
