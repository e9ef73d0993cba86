//! The key-value subcommands: `put`, `get`, `delete`, `scan`, `load`, `dump`, `stat`,
//! `verify`, `checkpoint` and `compact`, on a store directory (`--db`, default `.`).
//!
//! Output is readable by default and JSON with `--json`. Keys and values are taken and
//! printed as UTF-8 text where they are; bytes that are not are printed escaped (`\xNN`)
//! in text output and as byte arrays in JSON. Errors are one line on stderr with exit
//! code 1 (`verify` exits 1 when it finds damage, 0 when the store is clean).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value as Json};
use tierkv::{Db, Durability, Options, WriteBatch};

pub use crate::engine_args::EngineArgs;

/// Where the store is and how to open it.
#[derive(Args, Clone)]
pub struct StoreArgs {
    /// The store's directory (created by writes when missing).
    #[arg(long, default_value = ".")]
    db: PathBuf,
    #[command(flatten)]
    engine: EngineArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

impl StoreArgs {
    fn open(&self) -> Result<Db, String> {
        let options = self.engine.apply(Options::default());
        Db::open(&self.db, options).map_err(|e| format!("cannot open {}: {e}", self.db.display()))
    }

    /// Opens a store that must exist already (reads must not create one).
    fn open_existing(&self) -> Result<Db, String> {
        if !self.db.join("blocks").exists() {
            return Err(format!(
                "{} is not a tierkv store (no blocks directory)",
                self.db.display()
            ));
        }
        self.open()
    }
}

/// The key-value subcommands.
#[derive(Subcommand)]
pub enum KvCommand {
    /// Sets a key to a value (durable on return).
    Put {
        #[command(flatten)]
        store: StoreArgs,
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Prints a key's value; exit code 1 when it is missing.
    Get {
        #[command(flatten)]
        store: StoreArgs,
        /// The key.
        key: String,
    },
    /// Removes a key (durable on return).
    Delete {
        #[command(flatten)]
        store: StoreArgs,
        /// The key.
        key: String,
    },
    /// Prints entries in key order.
    Scan {
        #[command(flatten)]
        store: StoreArgs,
        /// Only keys that start with this.
        #[arg(long, conflicts_with_all = ["from", "to"])]
        prefix: Option<String>,
        /// From this key on (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// Up to this key (exclusive).
        #[arg(long)]
        to: Option<String>,
        /// Descending order.
        #[arg(long)]
        reverse: bool,
        /// At most this many entries.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Loads entries from a file (or stdin for `-`): TSV (`key<TAB>value` per line) or JSON
    /// lines (`{"key": "...", "value": "..."}`), in batches, with a progress bar.
    Load {
        #[command(flatten)]
        store: StoreArgs,
        /// The input file, or `-` for stdin.
        input: PathBuf,
        /// The input format: tsv or jsonl.
        #[arg(long, default_value = "tsv")]
        format: String,
        /// Entries per atomic batch.
        #[arg(long, default_value_t = 1000)]
        batch: usize,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// Prints every entry as TSV (or JSON lines with --json), for `load`.
    Dump {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Sizes, tree height, cache hit ratio, space amplification and the log size.
    Stat {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Checks every block checksum and the B+tree's invariants; exit code 0 when clean, 1
    /// when not.
    Verify {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Moves the log's writes into the tree and truncates the log.
    Checkpoint {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Checkpoints, then rewrites the tree with full pages.
    Compact {
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// Text for bytes: UTF-8 as is, other bytes as `\xNN`.
fn text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(_) => bytes.escape_ascii().to_string(),
    }
}

/// JSON for bytes: a string when UTF-8, else an array of bytes.
fn json_bytes(bytes: &[u8]) -> Json {
    match std::str::from_utf8(bytes) {
        Ok(text) => Json::String(text.to_string()),
        Err(_) => Json::Array(bytes.iter().map(|b| json!(b)).collect()),
    }
}

fn fail(error: tierkv::Error) -> String {
    error.to_string()
}

fn print_json(value: &Json) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    println!("{text}");
    Ok(())
}

/// Runs a key-value subcommand.
pub fn run(command: KvCommand) -> Result<ExitCode, String> {
    match command {
        KvCommand::Put { store, key, value } => {
            let db = store.open()?;
            db.put(key.as_bytes(), value.as_bytes()).map_err(fail)?;
            db.close().map_err(fail)?;
            if store.json {
                print_json(&json!({"put": key}))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        KvCommand::Get { store, key } => {
            let db = store.open_existing()?;
            let value = db.get(key.as_bytes()).map_err(fail)?;
            if store.json {
                print_json(&json!({"key": key, "value": value.as_deref().map(json_bytes)}))?;
            } else if let Some(value) = &value {
                println!("{}", text(value));
            } else {
                eprintln!("tierkv: {key:?} not found");
            }
            Ok(if value.is_some() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        KvCommand::Delete { store, key } => {
            let db = store.open_existing()?;
            db.delete(key.as_bytes()).map_err(fail)?;
            db.close().map_err(fail)?;
            if store.json {
                print_json(&json!({"deleted": key}))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        KvCommand::Scan { store, prefix, from, to, reverse, limit } => {
            let db = store.open_existing()?;
            let iter = match (&prefix, reverse) {
                (Some(prefix), false) => db.prefix(prefix.as_bytes()),
                (Some(prefix), true) => db.prefix_back(prefix.as_bytes()),
                (None, _) => {
                    use std::ops::Bound::{Excluded, Included, Unbounded};
                    let low = from.as_ref().map_or(Unbounded, |k| Included(k.as_bytes().to_vec()));
                    let high = to.as_ref().map_or(Unbounded, |k| Excluded(k.as_bytes().to_vec()));
                    if reverse {
                        db.range_back((low, high))
                    } else {
                        db.range((low, high))
                    }
                }
            };
            let mut out = std::io::stdout().lock();
            let mut entries = Vec::new();
            for entry in iter.take(limit.unwrap_or(usize::MAX)) {
                let (key, value) = entry.map_err(fail)?;
                if store.json {
                    entries.push(json!({"key": json_bytes(&key), "value": json_bytes(&value)}));
                } else {
                    writeln!(out, "{}\t{}", text(&key), text(&value)).map_err(|e| e.to_string())?;
                }
            }
            if store.json {
                print_json(&Json::Array(entries))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        KvCommand::Load { store, input, format, batch, quiet } => {
            load(&store, &input, &format, batch, quiet)
        }
        KvCommand::Dump { store } => {
            let db = store.open_existing()?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            for entry in db.range::<&[u8]>(..) {
                let (key, value) = entry.map_err(fail)?;
                let line = if store.json {
                    json!({"key": json_bytes(&key), "value": json_bytes(&value)}).to_string()
                } else {
                    format!("{}\t{}", text(&key), text(&value))
                };
                writeln!(out, "{line}").map_err(|e| e.to_string())?;
            }
            out.flush().map_err(|e| e.to_string())?;
            Ok(ExitCode::SUCCESS)
        }
        KvCommand::Stat { store } => stat(&store),
        KvCommand::Verify { store } => {
            let db = store.open_existing()?;
            let report = db.verify().map_err(fail)?;
            if store.json {
                print_json(&json!({
                    "clean": report.is_clean(),
                    "pages": report.pages,
                    "leaves": report.leaves,
                    "height": report.height,
                    "entries": report.entries,
                    "overflow_values": report.overflow_values,
                    "blocks": report.blocks,
                    "block_bytes": report.block_bytes,
                    "problems": report.problems,
                }))?;
            } else {
                println!(
                    "checked {} pages ({} leaves, height {}), {} entries, {} overflow values, {} blocks ({} bytes)",
                    report.pages,
                    report.leaves,
                    report.height,
                    report.entries,
                    report.overflow_values,
                    report.blocks,
                    report.block_bytes
                );
                for problem in &report.problems {
                    println!("PROBLEM: {problem}");
                }
                println!("{}", if report.is_clean() { "clean" } else { "DAMAGED" });
            }
            Ok(if report.is_clean() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        KvCommand::Checkpoint { store } => {
            let db = store.open_existing()?;
            db.checkpoint().map_err(fail)?;
            let sequence = db.stats().map_err(fail)?.checkpoint_sequence;
            db.close().map_err(fail)?;
            if store.json {
                print_json(&json!({"checkpoint_sequence": sequence}))?;
            } else {
                println!("checkpoint covers the log up to record {sequence}");
            }
            Ok(ExitCode::SUCCESS)
        }
        KvCommand::Compact { store } => {
            let db = store.open_existing()?;
            let before = db.verify().map_err(fail)?;
            db.compact().map_err(fail)?;
            let after = db.verify().map_err(fail)?;
            db.close().map_err(fail)?;
            if store.json {
                print_json(&json!({"pages_before": before.pages, "pages_after": after.pages}))?;
            } else {
                println!("compacted: {} pages before, {} after", before.pages, after.pages);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn load(
    store: &StoreArgs,
    input: &PathBuf,
    format: &str,
    batch_size: usize,
    quiet: bool,
) -> Result<ExitCode, String> {
    if !matches!(format, "tsv" | "jsonl") {
        return Err(format!("--format must be tsv or jsonl, not {format:?}"));
    }
    let reader: Box<dyn BufRead> = if input.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let file = std::fs::File::open(input)
            .map_err(|e| format!("cannot open {}: {e}", input.display()))?;
        Box::new(std::io::BufReader::new(file))
    };
    let size = std::fs::metadata(input).map(|m| m.len()).unwrap_or(0);
    let bar = match (quiet, size > 0) {
        (true, _) => ProgressBar::hidden(),
        (false, true) => ProgressBar::new(size),
        (false, false) => ProgressBar::new_spinner(),
    };
    if let Ok(style) = ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {bytes}/{total_bytes} {msg} (ETA {eta})",
    ) {
        bar.set_style(style);
    }
    let db = store.open()?;
    let mut batch = WriteBatch::new();
    let mut loaded = 0u64;
    for (number, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| format!("{}: line {}: {e}", input.display(), number + 1))?;
        bar.inc(line.len() as u64 + 1);
        if line.is_empty() {
            continue;
        }
        let (key, value) = parse_line(&line, format)
            .map_err(|e| format!("{}: line {}: {e}", input.display(), number + 1))?;
        batch.put(key, value);
        if batch.len() >= batch_size.max(1) {
            db.write_with(&batch, Durability::None).map_err(fail)?;
            loaded += batch.len() as u64;
            batch.clear();
            bar.set_message(format!("{loaded} entries"));
        }
    }
    loaded += batch.len() as u64;
    db.write_with(&batch, Durability::None).map_err(fail)?;
    // One sync makes the whole load durable.
    db.sync().map_err(fail)?;
    db.close().map_err(fail)?;
    bar.finish_and_clear();
    if store.json {
        print_json(&json!({"loaded": loaded}))?;
    } else {
        println!("loaded {loaded} entries");
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_line(line: &str, format: &str) -> Result<(Vec<u8>, Vec<u8>), String> {
    if format == "tsv" {
        let (key, value) = line.split_once('\t').ok_or("no tab between key and value")?;
        return Ok((key.as_bytes().to_vec(), value.as_bytes().to_vec()));
    }
    let object: Json = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let field = |name: &str| -> Result<Vec<u8>, String> {
        match object.get(name) {
            Some(Json::String(text)) => Ok(text.as_bytes().to_vec()),
            Some(Json::Array(bytes)) => bytes
                .iter()
                .map(|b| {
                    b.as_u64()
                        .and_then(|b| u8::try_from(b).ok())
                        .ok_or(format!("{name} has a non-byte"))
                })
                .collect(),
            _ => Err(format!("no string {name:?} field")),
        }
    };
    Ok((field("key")?, field("value")?))
}

fn stat(store: &StoreArgs) -> Result<ExitCode, String> {
    let db = store.open_existing()?;
    let stats = db.stats().map_err(fail)?;
    let report = db.verify().map_err(fail)?;
    // The tier (volatile, empty when the store opens) as the verify's reads left it.
    let tier = db.stats().map_err(fail)?.tier;
    let logical = report.key_bytes + report.value_bytes;
    let disk = stats.blocks.file_bytes + stats.log_file_bytes;
    let amplification = (logical > 0).then(|| disk as f64 / logical as f64);
    // Files are preallocated in large chunks; the live figure counts only the blocks in use.
    let live = (logical > 0).then(|| stats.blocks.live_bytes as f64 / logical as f64);
    let lookups = stats.cache.hits + stats.cache.misses;
    let hit_ratio = (lookups > 0).then(|| stats.cache.hits as f64 / lookups as f64);
    if store.json {
        print_json(&json!({
            "entries": report.entries,
            "key_bytes": report.key_bytes,
            "value_bytes": report.value_bytes,
            "overflow_values": report.overflow_values,
            "tree_height": stats.tree_height,
            "pages": report.pages,
            "leaves": report.leaves,
            "block_file_bytes": stats.blocks.file_bytes,
            "block_live_bytes": stats.blocks.live_bytes,
            "log_file_bytes": stats.log_file_bytes,
            "space_amplification": amplification,
            "space_amplification_live": live,
            "memtable_bytes": stats.memtable_bytes,
            "sequence": stats.sequence,
            "checkpoint_sequence": stats.checkpoint_sequence,
            "cache_hits": stats.cache.hits,
            "cache_misses": stats.cache.misses,
            "cache_hit_ratio": hit_ratio,
            "cache_bytes": stats.cache_bytes,
            "cache_budget": stats.cache_budget,
            "tier": tier,
        }))?;
    } else {
        let mib = |bytes: u64| bytes as f64 / (1 << 20) as f64;
        println!("entries            {}", report.entries);
        println!(
            "user data          {:.2} MiB ({} key bytes, {} value bytes)",
            mib(logical),
            report.key_bytes,
            report.value_bytes
        );
        println!(
            "tree               height {}, {} pages ({} leaves)",
            stats.tree_height, report.pages, report.leaves
        );
        println!(
            "block files        {:.2} MiB ({:.2} MiB live)",
            mib(stats.blocks.file_bytes),
            mib(stats.blocks.live_bytes)
        );
        println!(
            "log                {:.2} MiB; records up to {} ({} in the tree)",
            mib(stats.log_file_bytes),
            stats.sequence,
            stats.checkpoint_sequence
        );
        match (amplification, live) {
            (Some(a), Some(l)) => println!(
                "space amplification {a:.2} (block and log files / user data; files grow in large chunks), {l:.2} (live blocks / user data)"
            ),
            _ => println!("space amplification - (no data)"),
        }
        match hit_ratio {
            Some(h) => println!(
                "cache hit ratio    {:.1}% over this command's reads ({} hits, {} misses)",
                h * 100.0,
                stats.cache.hits,
                stats.cache.misses
            ),
            None => println!("cache hit ratio    - (no reads)"),
        }
        if let Some(tier) = &tier {
            println!("{tier}");
        }
    }
    db.close().map_err(fail)?;
    Ok(ExitCode::SUCCESS)
}
