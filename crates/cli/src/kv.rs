//! The key-value subcommands: `put`, `get`, `delete`, `scan`, `load`, `dump`, `stat`,
//! `verify`, `checkpoint`, `compact` and `salvage` (`salvage.rs`), on the store named by
//! `--db`.
//!
//! Commands that only read (`get`, `scan`, `dump`, `stat`, `verify`) open the store
//! read-only: they write, sync and allocate nothing, and work on a copy the user cannot
//! write. Commands that write make a store only where `Db::open` may (a new or empty
//! directory whose parent exists), and check their input before they open it.
//!
//! Keys and values are bytes: on the command line as text, or as hex with `--hex`; in
//! output escaped (`text.rs`), as hex, or as JSON. Errors are one line on stderr, or a JSON
//! object on stdout with `--json`, and the exit code says what kind (`EXIT_CODES`).

use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value as Json};
use tierkv::{Db, ErrorKind, Options, WriteBatch};

pub use crate::engine_args::EngineArgs;
use crate::text::{self, json_bytes, Format};

/// The exit codes of the key-value commands, for `--help`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  not found: the key is missing (get)
  2  usage: bad arguments, options or input (also an option that disagrees with the store's,
     or a write to a store opened read-only)
  3  damaged store: a checksum, page or log that does not hold (and `verify` finding damage)
  4  store busy: another process has it open
  5  permission or I/O error: the OS refused or failed a call (permissions, a full disk, EIO)
  6  no store: nothing there, something else there, or a format this tierkv cannot read";

/// A failed command: its exit code, a short kind and the message.
#[derive(Debug)]
pub struct Failure {
    code: u8,
    kind: &'static str,
    message: String,
}

impl Failure {
    /// Adds `more` to the message.
    pub fn append(&mut self, more: &str) {
        self.message.push_str(more);
    }

    /// Bad arguments or input (exit code 2).
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure { code: 2, kind: "usage", message: message.into() }
    }

    /// An I/O error outside the engine, such as the input file of `load` (exit code 5).
    pub fn io(message: impl Into<String>) -> Failure {
        Failure { code: 5, kind: "io", message: message.into() }
    }

    /// An engine error, by its kind.
    fn engine(error: tierkv::Error) -> Failure {
        let kind = error.kind();
        let code = match kind {
            ErrorKind::InvalidInput | ErrorKind::ReadOnly => 2,
            ErrorKind::Corruption => 3,
            ErrorKind::Busy => 4,
            ErrorKind::NoStore => 6,
            _ => 5,
        };
        Failure { code, kind: kind.name(), message: error.to_string() }
    }
}

impl From<tierkv::Error> for Failure {
    fn from(error: tierkv::Error) -> Failure {
        Failure::engine(error)
    }
}

/// Where the store is and how to open it.
#[derive(Args, Clone)]
pub struct StoreArgs {
    /// The store's directory. Writes make a store there when it is missing (its parent must
    /// exist) or empty; reads never make one.
    #[arg(long)]
    db: PathBuf,
    #[command(flatten)]
    engine: EngineArgs,
    /// Print JSON instead of text (errors too, on stdout).
    #[arg(long)]
    json: bool,
}

impl StoreArgs {
    /// Whether output (and errors) are JSON.
    pub fn json(&self) -> bool {
        self.json
    }

    /// The store's directory.
    pub fn db(&self) -> &std::path::Path {
        &self.db
    }

    /// The engine's settings.
    pub fn engine(&self) -> &EngineArgs {
        &self.engine
    }

    /// Opens the store for writing (making it where it may be made).
    pub fn open(&self) -> Result<Db, Failure> {
        Ok(Db::open(&self.db, self.engine.apply(Options::default()))?)
    }

    /// Opens the store read-only: it must exist, and nothing is written.
    fn open_read_only(&self) -> Result<Db, Failure> {
        let options = Options { read_only: true, ..self.engine.apply(Options::default()) };
        Ok(Db::open(&self.db, options)?)
    }
}

/// How keys (and values) are given on the command line.
#[derive(Args, Clone, Copy)]
pub struct KeyArgs {
    /// Keys and values on the command line are hex (`--hex 00ff`), and values are printed
    /// as hex.
    #[arg(long)]
    hex: bool,
}

impl KeyArgs {
    fn bytes(&self, text: &str, what: &str) -> Result<Vec<u8>, Failure> {
        match self.hex {
            true => {
                text::unhex(text.as_bytes()).map_err(|e| Failure::usage(format!("{what}: {e}")))
            }
            false => Ok(text.as_bytes().to_vec()),
        }
    }
}

/// The key-value subcommands.
#[derive(Subcommand)]
pub enum KvCommand {
    /// Sets a key to a value (durable on return).
    #[command(after_help = EXIT_CODES)]
    Put {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        keys: KeyArgs,
        /// The key.
        key: String,
        /// The value (or read it from stdin with --stdin).
        #[arg(required_unless_present = "stdin")]
        value: Option<String>,
        /// Read the value from stdin, byte for byte.
        #[arg(long, conflicts_with = "value")]
        stdin: bool,
    },
    /// Prints a key's value: escaped text by default (see `dump --help`), hex with --hex,
    /// the bytes exactly with --raw; exit code 1 when it is missing.
    #[command(after_help = EXIT_CODES)]
    Get {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        keys: KeyArgs,
        /// The key.
        key: String,
        /// Print the value's bytes exactly, with no line feed.
        #[arg(long, conflicts_with_all = ["hex", "json"])]
        raw: bool,
    },
    /// Removes a key (durable on return).
    #[command(after_help = EXIT_CODES)]
    Delete {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        keys: KeyArgs,
        /// The key.
        key: String,
    },
    /// Prints entries in key order, one per line in a dump format (or a JSON array with
    /// --json).
    #[command(after_help = EXIT_CODES)]
    Scan {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        keys: KeyArgs,
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
        /// The lines' format: tsv (escaped), hex or jsonl; --hex means hex.
        #[arg(long, value_enum)]
        format: Option<Format>,
    },
    /// Loads entries from a file (or stdin for `-`) in a dump format, in atomic batches. A
    /// file is read through once to check every line before anything is written; from
    /// stdin, a bad line stops the load, which says how many entries it wrote and how to
    /// go on (--skip-lines).
    #[command(after_help = EXIT_CODES)]
    Load {
        #[command(flatten)]
        store: StoreArgs,
        /// The input file, or `-` for stdin.
        input: PathBuf,
        /// The input format: tsv (escaped, as `dump` writes), hex or jsonl.
        #[arg(long, value_enum, default_value = "tsv")]
        format: Format,
        /// Entries per atomic batch.
        #[arg(long, default_value_t = 1000)]
        batch: usize,
        /// Skip this many lines first (to go on after a load that stopped).
        #[arg(long, default_value_t = 0)]
        skip_lines: u64,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// Prints every entry, one per line, for `load`: `key<TAB>value` with each field
    /// escaped (a backslash is `\\`, a tab `\t`, a line feed `\n`, a carriage return `\r`,
    /// other control bytes and bytes that are not UTF-8 `\xNN`; UTF-8 text as it is), or
    /// hex, or JSON lines (--json). Any bytes round-trip.
    #[command(after_help = EXIT_CODES)]
    Dump {
        #[command(flatten)]
        store: StoreArgs,
        /// The lines' format: tsv (escaped), hex or jsonl (--json is jsonl).
        #[arg(long, value_enum)]
        format: Option<Format>,
    },
    /// Entries, sizes, tree height, cache hit ratio, space amplification and the log.
    #[command(after_help = EXIT_CODES)]
    Stat {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Checks every block checksum and the B+tree's invariants, and counts every entry; exit
    /// code 0 when clean, 3 when not.
    #[command(after_help = EXIT_CODES)]
    Verify {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Copies the store, as of one moment, into a new store at DIR (missing, or empty),
    /// and prints the sequence number the copy covers. The store is opened read-only, so
    /// another process may not hold it open for writing (a program that embeds tierkv calls
    /// `Db::backup` while its writers run). A backup killed on the way leaves a directory
    /// that refuses to open; remove it and take the backup again.
    #[command(after_help = EXIT_CODES)]
    Backup {
        #[command(flatten)]
        store: StoreArgs,
        /// Where the copy goes.
        dir: PathBuf,
    },
    /// Makes a new store at --db from a backup (checking every block it copies): the
    /// backup is left as it was.
    #[command(after_help = EXIT_CODES)]
    Restore {
        #[command(flatten)]
        store: StoreArgs,
        /// The backup to restore from.
        #[arg(long)]
        from: PathBuf,
    },
    /// Moves the log's writes into the tree and truncates the log.
    #[command(after_help = EXIT_CODES)]
    Checkpoint {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Checkpoints, then rewrites the tree with full pages.
    #[command(after_help = EXIT_CODES)]
    Compact {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Copies every entry a damaged store still holds (its tree, leaf pages the tree no
    /// longer reaches, its log) into a new store, and reports by key range what it could
    /// not recover and what it copied without being sure; exit code 0 when nothing was
    /// lost, 3 when the copy was made but something was lost or is in doubt.
    #[command(after_help = EXIT_CODES)]
    Salvage(crate::salvage::SalvageArgs),
}

impl KvCommand {
    fn store(&self) -> &StoreArgs {
        match self {
            KvCommand::Put { store, .. }
            | KvCommand::Get { store, .. }
            | KvCommand::Delete { store, .. }
            | KvCommand::Scan { store, .. }
            | KvCommand::Load { store, .. }
            | KvCommand::Dump { store, .. }
            | KvCommand::Stat { store }
            | KvCommand::Verify { store }
            | KvCommand::Backup { store, .. }
            | KvCommand::Restore { store, .. }
            | KvCommand::Checkpoint { store }
            | KvCommand::Compact { store } => store,
            KvCommand::Salvage(args) => &args.store,
        }
    }
}

fn print_json(value: &Json) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Failure::io(e.to_string()))?;
    println!("{text}");
    Ok(())
}

fn write_out(out: &mut impl Write, bytes: &[u8]) -> Result<(), Failure> {
    out.write_all(bytes).map_err(|e| Failure::io(format!("cannot write the output: {e}")))
}

/// Runs a key-value subcommand, prints its error (as JSON with `--json`) and returns the
/// exit code.
pub fn run(command: KvCommand) -> Result<ExitCode, String> {
    let json = command.store().json;
    match execute(command) {
        Ok(code) => Ok(code),
        Err(failure) => {
            if json {
                let error = json!({"error": {
                    "kind": failure.kind,
                    "exit_code": failure.code,
                    "message": failure.message,
                }});
                println!("{error}");
            } else {
                eprintln!("tierkv: {}", failure.message);
            }
            Ok(ExitCode::from(failure.code))
        }
    }
}

fn execute(command: KvCommand) -> Result<ExitCode, Failure> {
    match command {
        KvCommand::Salvage(args) => crate::salvage::run(args),
        KvCommand::Put { store, keys, key, value, stdin } => {
            let key = keys.bytes(&key, "the key")?;
            let value = match (value, stdin) {
                (Some(value), _) => keys.bytes(&value, "the value")?,
                (None, _) => {
                    let mut value = Vec::new();
                    std::io::stdin().read_to_end(&mut value).map_err(|e| {
                        Failure::io(format!("cannot read the value from stdin: {e}"))
                    })?;
                    value
                }
            };
            // Checked before the store is opened, so a refused write makes no store.
            let mut batch = WriteBatch::new();
            batch.put(&key, &value);
            batch.validate()?;
            let db = store.open()?;
            db.write(&batch)?;
            db.close()?;
            if store.json {
                print_json(&json!({"put": json_bytes(&key), "value_bytes": value.len()}))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        KvCommand::Get { store, keys, key, raw } => {
            let key = keys.bytes(&key, "the key")?;
            tierkv::WriteBatch::new().delete(&key).validate()?;
            let db = store.open_read_only()?;
            let value = db.get(&key)?;
            let mut out = std::io::stdout().lock();
            match &value {
                _ if store.json => {
                    print_json(
                        &json!({"key": json_bytes(&key), "value": value.as_deref().map(json_bytes)}),
                    )?;
                }
                Some(value) if raw => write_out(&mut out, value)?,
                Some(value) if keys.hex => {
                    write_out(&mut out, format!("{}\n", hex::encode(value)).as_bytes())?
                }
                Some(value) => {
                    write_out(&mut out, format!("{}\n", text::escape(value)).as_bytes())?
                }
                None => eprintln!("tierkv: {} not found", text::escape(&key)),
            }
            out.flush().map_err(|e| Failure::io(e.to_string()))?;
            Ok(if value.is_some() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        KvCommand::Delete { store, keys, key } => {
            let key = keys.bytes(&key, "the key")?;
            let mut batch = WriteBatch::new();
            batch.delete(&key);
            batch.validate()?;
            let db = store.open()?;
            db.write(&batch)?;
            db.close()?;
            if store.json {
                print_json(&json!({"deleted": json_bytes(&key)}))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        KvCommand::Scan { store, keys, prefix, from, to, reverse, limit, format } => {
            let format = format.unwrap_or(if keys.hex { Format::Hex } else { Format::Tsv });
            let bound = |text: &Option<String>, what| {
                text.as_ref().map(|t| keys.bytes(t, what)).transpose()
            };
            let (prefix, from, to) =
                (bound(&prefix, "--prefix")?, bound(&from, "--from")?, bound(&to, "--to")?);
            let db = store.open_read_only()?;
            let iter = match (&prefix, reverse) {
                (Some(prefix), false) => db.prefix(prefix),
                (Some(prefix), true) => db.prefix_back(prefix),
                (None, _) => {
                    use std::ops::Bound::{Excluded, Included, Unbounded};
                    let low = from.map_or(Unbounded, Included);
                    let high = to.map_or(Unbounded, Excluded);
                    if reverse {
                        db.range_back((low, high))
                    } else {
                        db.range((low, high))
                    }
                }
            };
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let mut entries = Vec::new();
            for entry in iter.take(limit.unwrap_or(usize::MAX)) {
                let (key, value) = entry?;
                if store.json {
                    entries.push(json!({"key": json_bytes(&key), "value": json_bytes(&value)}));
                } else {
                    let line = text::encode_line(format, &key, &value);
                    write_out(&mut out, line.as_bytes())?;
                    write_out(&mut out, b"\n")?;
                }
            }
            out.flush().map_err(|e| Failure::io(e.to_string()))?;
            if store.json {
                print_json(&Json::Array(entries))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        KvCommand::Load { store, input, format, batch, skip_lines, quiet } => {
            crate::load::load(&store, &input, format, batch, skip_lines, quiet)
        }
        KvCommand::Dump { store, format } => {
            let format = match (format, store.json) {
                (Some(format), _) => format,
                (None, true) => Format::Jsonl,
                (None, false) => Format::Tsv,
            };
            let db = store.open_read_only()?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            for entry in db.range(..) {
                let (key, value) = entry?;
                write_out(&mut out, text::encode_line(format, &key, &value).as_bytes())?;
                write_out(&mut out, b"\n")?;
            }
            out.flush().map_err(|e| Failure::io(e.to_string()))?;
            Ok(ExitCode::SUCCESS)
        }
        KvCommand::Stat { store } => stat(&store),
        KvCommand::Verify { store } => {
            let db = store.open_read_only()?;
            let report = db.verify()?;
            if store.json {
                print_json(&json!({
                    "clean": report.is_clean(),
                    "pages": report.pages,
                    "leaves": report.leaves,
                    "height": report.height,
                    "entries": report.entries,
                    "tree_entries": report.tree_entries,
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
            Ok(if report.is_clean() { ExitCode::SUCCESS } else { ExitCode::from(3) })
        }
        KvCommand::Backup { store, dir } => {
            let db = store.open_read_only()?;
            let sequence = db.backup(&dir)?;
            db.close()?;
            if store.json {
                print_json(&json!({"backup": dir.display().to_string(), "sequence": sequence}))?;
            } else {
                println!("backed up to {}: the store as of record {sequence}", dir.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        KvCommand::Restore { store, from } => {
            let backup = StoreArgs { db: from.clone(), ..store.clone() };
            let db = backup.open_read_only()?;
            let sequence = db.backup(&store.db)?;
            db.close()?;
            if store.json {
                print_json(
                    &json!({"restored": store.db.display().to_string(), "sequence": sequence}),
                )?;
            } else {
                println!(
                    "restored {} from {}: the store as of record {sequence}",
                    store.db.display(),
                    from.display()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        KvCommand::Checkpoint { store } => {
            let db = store.open()?;
            db.checkpoint()?;
            let sequence = db.stats()?.checkpoint_sequence;
            db.close()?;
            if store.json {
                print_json(&json!({"checkpoint_sequence": sequence}))?;
            } else {
                println!("checkpoint covers the log up to record {sequence}");
            }
            Ok(ExitCode::SUCCESS)
        }
        KvCommand::Compact { store } => {
            let db = store.open()?;
            let before = db.verify()?;
            let files_before = db.stats()?.blocks.file_bytes;
            db.compact()?;
            let after = db.verify()?;
            let files_after = db.stats()?.blocks.file_bytes;
            db.close()?;
            if store.json {
                print_json(&json!({
                    "pages_before": before.pages,
                    "pages_after": after.pages,
                    "block_file_bytes_before": files_before,
                    "block_file_bytes_after": files_after,
                }))?;
            } else {
                let mib = |bytes: u64| bytes as f64 / (1 << 20) as f64;
                println!(
                    "compacted: {} pages before, {} after; block files {:.2} MiB before, {:.2} MiB after",
                    before.pages,
                    after.pages,
                    mib(files_before),
                    mib(files_after)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn stat(store: &StoreArgs) -> Result<ExitCode, Failure> {
    let db = store.open_read_only()?;
    let stats = db.stats()?;
    let report = db.verify()?;
    // The tier (volatile, empty when the store opens) as the verify's reads left it.
    let tier = db.stats()?.tier;
    let logical = report.key_bytes + report.value_bytes;
    // What the data takes: the blocks in use and the log's records not yet checkpointed.
    // The files hold more: segments are preallocated for the writes to come.
    let live = stats.blocks.live_bytes + stats.log_live_bytes;
    let files = stats.blocks.file_bytes + stats.log_file_bytes;
    let amplification = (logical > 0).then(|| live as f64 / logical as f64);
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
            "tree_entries": report.tree_entries,
            "block_file_bytes": stats.blocks.file_bytes,
            "block_live_bytes": stats.blocks.live_bytes,
            "log_file_bytes": stats.log_file_bytes,
            "log_live_bytes": stats.log_live_bytes,
            "file_bytes": files,
            "live_bytes": live,
            "space_amplification": amplification,
            "undo_bytes": stats.undo_bytes,
            "dirty_pages": stats.dirty_pages,
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
        println!(
            "entries            {} ({} in the tree, the rest in the log since the last checkpoint)",
            report.entries, report.tree_entries
        );
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
            "block files        {:.2} MiB ({:.2} MiB of blocks in use)",
            mib(stats.blocks.file_bytes),
            mib(stats.blocks.live_bytes)
        );
        println!(
            "log                {:.2} MiB ({:.2} MiB of records since the last checkpoint); \
             records up to {} ({} in the tree)",
            mib(stats.log_file_bytes),
            mib(stats.log_live_bytes),
            stats.sequence,
            stats.checkpoint_sequence
        );
        match amplification {
            Some(a) => println!(
                "space amplification {a:.2} (blocks in use and log records / user data; the \
                 files, {:.2} MiB, are preallocated ahead of writes)",
                mib(files)
            ),
            None => println!("space amplification - (no data)"),
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
    db.close()?;
    Ok(ExitCode::SUCCESS)
}

/// The lines of `reader`, each without its line feed (a carriage return stays: it is a
/// byte of the line), numbered from 1, after skipping `skip`.
pub(crate) fn lines(
    mut reader: impl BufRead,
    mut on_line: impl FnMut(u64, &[u8]) -> Result<bool, Failure>,
) -> Result<(), Failure> {
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| Failure::io(format!("line {}: cannot read: {e}", number + 1)))?;
        if read == 0 {
            return Ok(());
        }
        number += 1;
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if !on_line(number, &line)? {
            return Ok(());
        }
    }
}

/// Opens `input` (`-`: stdin) for reading, with its size when it is a file.
pub(crate) fn open_input(input: &PathBuf) -> Result<(Box<dyn BufRead>, Option<u64>), Failure> {
    if input.as_os_str() == "-" {
        return Ok((Box::new(std::io::BufReader::new(std::io::stdin())), None));
    }
    let file = std::fs::File::open(input)
        .map_err(|e| Failure::io(format!("cannot open {}: {e}", input.display())))?;
    let size = file.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
    Ok((Box::new(std::io::BufReader::new(file)), size))
}

/// A progress bar over `total` bytes (a spinner without), hidden when `quiet`.
pub(crate) fn progress(total: Option<u64>, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = total.map_or_else(ProgressBar::new_spinner, ProgressBar::new);
    if let Ok(style) = ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {bytes}/{total_bytes} {msg} (ETA {eta})",
    ) {
        bar.set_style(style);
    }
    bar
}
