//! `tierkv load`: entries from a file or stdin, in a dump format, written in atomic
//! batches with one sync at the end.
//!
//! A file is read twice: the first pass checks every line (its format, the engine's limits
//! on keys and values) and writes nothing, so a bad line anywhere loads nothing. Stdin is
//! read once; a bad line there stops the load after writing (and syncing) every entry
//! before it, and the error says how many entries were loaded and which `--skip-lines`
//! goes on after the line is mended. Blank lines are skipped.
//!
//! Must never: leave entries written but unsynced when it stops; report a resume point
//! other than the line after the last entry written.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;
use tierkv::{Durability, WriteBatch};

use crate::kv::{lines, open_input, progress, Failure, StoreArgs};
use crate::text::{decode_line, Format};

/// Loads `input` into the store (see the module header).
pub fn load(
    store: &StoreArgs,
    input: &PathBuf,
    format: Format,
    batch_size: usize,
    skip_lines: u64,
    quiet: bool,
) -> Result<ExitCode, Failure> {
    let batch_size = batch_size.max(1);
    let name = input.display().to_string();
    let entry = |line: &[u8]| -> Result<(Vec<u8>, Vec<u8>), String> {
        let (key, value) = decode_line(format, line)?;
        WriteBatch::new().put(&key, &value).validate().map_err(|e| e.to_string())?;
        Ok((key, value))
    };
    let (reader, size) = open_input(input)?;
    let reader = match size {
        Some(_) => {
            lines(reader, |number, line| {
                if number > skip_lines && !line.is_empty() {
                    entry(line).map_err(|e| {
                        Failure::usage(format!("{name}: line {number}: {e}; nothing was loaded"))
                    })?;
                }
                Ok(true)
            })?;
            open_input(input)?.0
        }
        None => reader,
    };
    let db = store.open()?;
    let bar = progress(size, quiet);
    let mut batch = WriteBatch::new();
    let mut loaded = 0u64;
    // The last line whose entry (if any) is written: a load goes on after it.
    let mut done_through = skip_lines;
    let mut pending_through = skip_lines;
    let mut stop: Option<Failure> = None;
    let read = lines(reader, |number, line| {
        bar.inc(line.len() as u64 + 1);
        if number <= skip_lines {
            return Ok(true);
        }
        if !line.is_empty() {
            match entry(line) {
                Ok((key, value)) => {
                    batch.put(key, value);
                }
                Err(error) => {
                    stop = Some(Failure::usage(format!("{name}: line {number}: {error}")));
                    return Ok(false);
                }
            }
        }
        pending_through = number;
        if batch.len() >= batch_size {
            db.write_with(&batch, Durability::None)?;
            loaded += batch.len() as u64;
            batch.clear();
            done_through = pending_through;
            bar.set_message(format!("{loaded} entries"));
        }
        Ok(true)
    });
    // What was read before a stop is written too, so the load goes on right after it.
    let written = read.and_then(|()| {
        db.write_with(&batch, Durability::None)?;
        loaded += batch.len() as u64;
        done_through = pending_through;
        Ok(())
    });
    // One sync makes everything written durable, whatever stopped the load.
    let synced = db.sync().map_err(Failure::from);
    let closed = db.close().map_err(Failure::from);
    bar.finish_and_clear();
    let failure = stop.or(written.err()).or(synced.err()).or(closed.err());
    if let Some(mut failure) = failure {
        failure.append(&format!(
            "; {loaded} entries were loaded and are durable, from the lines up to {done_through}; \
             once the input is mended, go on with --skip-lines {done_through}"
        ));
        return Err(failure);
    }
    if store.json() {
        println!("{}", json!({"loaded": loaded, "lines": done_through}));
    } else {
        println!("loaded {loaded} entries");
    }
    Ok(ExitCode::SUCCESS)
}
