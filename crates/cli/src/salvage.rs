//! `tierkv salvage --db DAMAGED --to NEW`: copies every entry a damaged store still holds
//! into a new store (`tierkv::salvage`) and prints the report, as text or JSON.
//!
//! Exit codes: 0 when the report is complete (nothing lost, nothing in doubt), 3 when the
//! copy was made but something was lost or is in doubt, and for a salvage that could not
//! run the codes of the other key-value commands (`kv::EXIT_CODES`).
//!
//! Must never: write to the damaged store (the library opens it read-only); print a
//! complete report with exit code 3, or an incomplete one with 0.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::{json, Value as Json};
use tierkv::{KeySpan, Options, SalvageOptions, SalvageReport};

use crate::kv::{Failure, StoreArgs};
use crate::text::json_bytes;

/// What `salvage` takes on the command line: the store flags of the other key-value
/// commands, where `--db` and `--log-dir` name the damaged store and the rest set up the
/// new one.
#[derive(Args)]
#[command(
    mut_arg("db", |arg| arg.help(DB_HELP)),
    mut_arg("log_dir", |arg| arg.help(LOG_DIR_HELP)),
)]
pub struct SalvageArgs {
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    /// The new store's directory: missing (its parent must exist) or empty; never a store.
    #[arg(long)]
    to: PathBuf,
}

const DB_HELP: &str = "The damaged store's directory; it is only read, never written";

const LOG_DIR_HELP: &str = "Where the damaged store's log lies, when its identity file is \
    damaged or the log was moved (default: where the identity file says, else `log` inside \
    the store); the new store's log goes inside the new store";

/// Runs the salvage and prints its report; the exit code says whether it is complete.
pub fn run(args: SalvageArgs) -> Result<ExitCode, Failure> {
    let engine = args.store.engine();
    let options = SalvageOptions {
        log_dir: engine.log_dir.clone(),
        // The new store's log goes inside it: `--log-dir` names the damaged store's.
        target: Options { log_dir: None, ..engine.apply(Options::default()) },
    };
    let report = tierkv::salvage(args.store.db(), &args.to, options)?;
    if args.store.json() {
        let text = serde_json::to_string_pretty(&report_json(&report))
            .map_err(|e| Failure::io(e.to_string()))?;
        println!("{text}");
    } else {
        println!("{report}");
    }
    Ok(if report.is_complete() { ExitCode::SUCCESS } else { ExitCode::from(3) })
}

/// A key span as JSON: its bounds (`null` for none), as `json_bytes` writes keys.
fn span_json(span: &KeySpan) -> Json {
    json!({
        "low": span.low.as_deref().map(json_bytes),
        "high": span.high.as_deref().map(json_bytes),
    })
}

/// The report as JSON, field by field.
fn report_json(report: &SalvageReport) -> Json {
    let log = &report.log;
    json!({
        "from": report.from,
        "to": report.to,
        "complete": report.is_complete(),
        "scanned_blocks": report.scanned_blocks,
        "checkpoint": report.checkpoint.map(|(root, sequence)| json!({
            "root": root,
            "sequence": sequence,
        })),
        "tree_entries": report.tree_entries,
        "loose_entries": report.loose_entries,
        "loose_pages": report.loose_pages,
        "log": {
            "dir": log.dir,
            "records": log.records,
            "puts": log.puts,
            "deletes": log.deletes,
            "replayed": log.replayed.map(|(first, last)| json!([first, last])),
            "filled": log.filled,
            "stop": log.stop,
            "lost": log.lost.map(|lost| json!({"first": lost.first, "last": lost.last})),
        },
        "lost": report.lost.iter().map(|lost| json!({
            "keys": span_json(&lost.span),
            "reason": lost.reason,
            "recovered": lost.recovered,
        })).collect::<Vec<Json>>(),
        "lost_values": report.lost_values.iter().map(|lost| json!({
            "key": json_bytes(&lost.key),
            "reason": lost.reason,
        })).collect::<Vec<Json>>(),
        "doubtful": report.doubtful.iter().map(|doubt| json!({
            "keys": span_json(&doubt.span),
            "reason": doubt.reason,
        })).collect::<Vec<Json>>(),
        "problems": report.problems,
    })
}
