//! Crash torture (`tierkv torture crash`): a process writing to a store is killed with
//! SIGKILL at a random moment; the store is reopened and checked against what the process
//! was told was durable. The CLI runs the processes; this module holds both halves of the
//! protocol and the check.
//!
//! **The child** (`run_child`) opens the store and prints `READY`. Each of its writer threads
//! then writes, with `Durability::Sync`, to keys of its own: single puts, deletes, and
//! batches of 2 to 8 puts and deletes. Before a write it prints `B thread seq changes`, and
//! after the write returned `A thread seq`. Each line goes out in one `write` of less than
//! `PIPE_BUF` bytes, so lines never tear or interleave; a thread has one write in flight at
//! most.
//!
//! **The parent's model** (`Model`) reads those lines. An acknowledged write (`A`) must
//! survive; a write begun and not acknowledged (`B` without `A`: in flight at the kill) may
//! or may not have happened, but a batch all or nothing.
//!
//! **The check** (`check`), after reopening: every key of the model reads back as its last
//! acknowledged value, or as the value of a write in flight on it; each batch in flight is
//! there in full or not at all; a scan finds no key the model does not know; and `verify`
//! finds nothing wrong. The state found becomes the model of the next cycle.
//!
//! Values carry their own identity (`Tag`: cycle, thread, sequence, length), so a value read
//! back names the write that made it, and a garbage or mixed value is caught.
//!
//! Must never: count a violation that the durability promise allows, or miss one it forbids.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tierkv::{Db, Durability, WriteBatch};

/// What the child's workload looks like.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct WorkloadOptions {
    /// Writer threads.
    pub threads: u32,
    /// Keys each thread owns.
    pub keys_per_thread: u32,
    /// Usual value length; one write in 50 has a value of `large_value_bytes`.
    pub value_bytes: u32,
    /// Length of the occasional large value (an overflow value when over a quarter page).
    pub large_value_bytes: u32,
    /// Seeds the child's choices (with the cycle).
    pub seed: u64,
    /// The cycle the child runs in (part of every value it writes).
    pub cycle: u64,
}

/// A value's identity: which write made it, and its length. The bytes are a function of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Tag {
    /// The cycle of the write.
    pub cycle: u64,
    /// The writer thread.
    pub thread: u32,
    /// The thread's write number.
    pub seq: u64,
    /// The value's length.
    pub len: u32,
}

impl Tag {
    /// The value's bytes: its identity, then filler that depends on it, to `len` bytes.
    pub fn value(&self) -> Vec<u8> {
        let head = format!("{}.{}.{}.{};", self.cycle, self.thread, self.seq, self.len);
        let mut value = head.into_bytes();
        let mut state = self.seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ self.cycle;
        while value.len() < self.len as usize {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            value.push(b'a' + (state % 26) as u8);
        }
        value.truncate(self.len.max(1) as usize);
        value
    }

    /// The tag a value names, if the value is exactly the bytes of that tag.
    pub fn parse(value: &[u8]) -> Option<Tag> {
        let end = value.iter().position(|&b| b == b';')?;
        let tag = parse_tag(std::str::from_utf8(&value[..end]).ok()?)?;
        (tag.value() == value).then_some(tag)
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}.{}", self.cycle, self.thread, self.seq, self.len)
    }
}

/// The key bytes of thread `thread`'s key number `key`.
pub fn key_bytes(thread: u32, key: u32) -> Vec<u8> {
    format!("t{thread:03}k{key:07}").into_bytes()
}

/// One change of a write: a key (thread's own) set to a tagged value, or deleted.
type Change = (u32, Option<Tag>);

/// A write as the child announces it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct WriteOp {
    thread: u32,
    seq: u64,
    changes: Vec<Change>,
}

/// Encodes a `B` line: `B thread seq key=cycle.thread.seq.len key=- ...`.
fn begin_line(write: &WriteOp) -> String {
    let mut line = format!("B {} {}", write.thread, write.seq);
    for (key, tag) in &write.changes {
        match tag {
            Some(tag) => line += &format!(" {key}={tag}"),
            None => line += &format!(" {key}=-"),
        }
    }
    line.push('\n');
    line
}

/// A tag as `Display` writes it: `cycle.thread.seq.len`.
fn parse_tag(text: &str) -> Option<Tag> {
    let mut parts = text.split('.');
    let tag = Tag {
        cycle: parts.next()?.parse().ok()?,
        thread: parts.next()?.parse().ok()?,
        seq: parts.next()?.parse().ok()?,
        len: parts.next()?.parse().ok()?,
    };
    parts.next().is_none().then_some(tag)
}

/// One line from the child.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Line {
    Ready,
    Begin(WriteOp),
    Ack { thread: u32, seq: u64 },
}

fn parse_line(line: &str) -> Option<Line> {
    let mut words = line.split_whitespace();
    match words.next()? {
        "READY" => Some(Line::Ready),
        "A" => {
            let thread = words.next()?.parse().ok()?;
            let seq = words.next()?.parse().ok()?;
            words.next().is_none().then_some(Line::Ack { thread, seq })
        }
        "B" => {
            let thread = words.next()?.parse().ok()?;
            let seq = words.next()?.parse().ok()?;
            let mut changes = Vec::new();
            for word in words {
                let (key, value) = word.split_once('=')?;
                let tag = if value == "-" { None } else { Some(parse_tag(value)?) };
                changes.push((key.parse().ok()?, tag));
            }
            (!changes.is_empty()).then_some(Line::Begin(WriteOp { thread, seq, changes }))
        }
        _ => None,
    }
}

/// The child: opens nothing itself (`db` is open), prints `READY`, and writes until killed
/// (or until `stop`, for tests). Returns the first write error, which ends the run.
pub fn run_child(
    db: &Db,
    options: &WorkloadOptions,
    out: &Mutex<dyn Write + Send>,
    stop: &AtomicBool,
) -> Result<(), String> {
    let emit = |text: &str| -> Result<(), String> {
        let mut out = out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| e.to_string())
    };
    emit("READY\n")?;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..options.threads)
            .map(|thread| {
                scope.spawn(move || -> Result<(), String> {
                    let mut rng = fastrand::Rng::with_seed(
                        options.seed ^ options.cycle.rotate_left(32) ^ u64::from(thread),
                    );
                    let mut seq = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        seq += 1;
                        let write = next_write(&mut rng, options, thread, seq);
                        emit(&begin_line(&write))?;
                        apply(db, &write).map_err(|e| format!("write {seq} failed: {e}"))?;
                        emit(&format!("A {thread} {seq}\n"))?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a writer panicked".into())))
            .collect::<Result<Vec<()>, String>>()
            .map(|_| ())
    })
}

/// The next write of a thread: a single put (60%), a single delete (15%), or a batch of 2
/// to 8 changes, a fifth of them deletes (25%), on distinct keys of its own.
fn next_write(
    rng: &mut fastrand::Rng,
    options: &WorkloadOptions,
    thread: u32,
    seq: u64,
) -> WriteOp {
    let keys_owned = options.keys_per_thread.max(1);
    let roll = rng.u32(0..100);
    let (count, single_delete) = match roll {
        0..60 => (1, false),
        60..75 => (1, true),
        _ => (rng.u32(2..=8).min(keys_owned), false),
    };
    let mut keys: Vec<u32> = Vec::with_capacity(count as usize);
    while keys.len() < count as usize {
        let key = rng.u32(0..keys_owned);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let changes = keys
        .into_iter()
        .map(|key| {
            let delete = single_delete || (count > 1 && rng.u32(0..5) == 0);
            let len = if rng.u32(0..50) == 0 {
                options.large_value_bytes
            } else {
                rng.u32(options.value_bytes / 2..=options.value_bytes).max(16)
            };
            let tag = Tag { cycle: options.cycle, thread, seq, len };
            (key, (!delete).then_some(tag))
        })
        .collect();
    WriteOp { thread, seq, changes }
}

/// Applies a write as one batch (a single put or delete is a batch of one), durable on
/// return.
fn apply(db: &Db, write: &WriteOp) -> tierkv::Result<()> {
    let mut batch = WriteBatch::new();
    for (key, tag) in &write.changes {
        match tag {
            Some(tag) => batch.put(key_bytes(write.thread, *key), tag.value()),
            None => batch.delete(key_bytes(write.thread, *key)),
        };
    }
    db.write_with(&batch, Durability::Sync)
}

/// What the store must hold: each key's last acknowledged value, and the write each thread
/// had in flight.
#[derive(Clone, Debug, Default)]
pub struct Model {
    acked: BTreeMap<(u32, u32), Tag>,
    pending: BTreeMap<u32, WriteOp>,
    /// Acknowledged writes in this cycle.
    pub acks: u64,
    /// Whether the child said it was ready.
    pub ready: bool,
    /// Lines that did not parse, or that broke the protocol (should be none).
    pub protocol_errors: Vec<String>,
}

impl Model {
    /// Takes one line of the child's output.
    pub fn take_line(&mut self, line: &str) {
        match parse_line(line) {
            Some(Line::Ready) => self.ready = true,
            Some(Line::Begin(write)) => {
                if let Some(old) = self.pending.insert(write.thread, write) {
                    self.protocol_errors.push(format!("a second write in flight after {old:?}"));
                }
            }
            Some(Line::Ack { thread, seq }) => match self.pending.remove(&thread) {
                Some(write) if write.seq == seq => {
                    for (key, tag) in write.changes {
                        match tag {
                            Some(tag) => self.acked.insert((thread, key), tag),
                            None => self.acked.remove(&(thread, key)),
                        };
                    }
                    self.acks += 1;
                }
                other => self.protocol_errors.push(format!("ack {thread} {seq} for {other:?}")),
            },
            None => self.protocol_errors.push(format!("unreadable line {line:?}")),
        }
    }

    /// Writes in flight at the kill.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }
}

/// What one check found.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CheckReport {
    /// Keys read back.
    pub keys_checked: u64,
    /// Writes in flight at the kill that the store holds in full.
    pub in_flight_applied: u64,
    /// Writes in flight at the kill that left no trace.
    pub in_flight_lost: u64,
    /// Everything that broke a promise (empty when all held).
    pub violations: Vec<String>,
    /// Problems `verify` found.
    pub verify_problems: Vec<String>,
}

/// Takes what `db` holds as the model, for a run on a store an earlier run left; returns
/// what no write of this workload can have made (empty when the store is this workload's).
pub fn adopt(db: &Db, model: &mut Model, threads: u32, keys_per_thread: u32) -> Vec<String> {
    let mut report = CheckReport::default();
    model.acked = read_state(db, &mut report, threads, keys_per_thread);
    model.pending.clear();
    report.violations
}

/// Every key of the workload's key space that `db` holds, by the tag of its value; values
/// that name no write, failed reads and keys outside the space go to `report`.
fn read_state(
    db: &Db,
    report: &mut CheckReport,
    threads: u32,
    keys_per_thread: u32,
) -> BTreeMap<(u32, u32), Tag> {
    let mut found: BTreeMap<(u32, u32), Tag> = BTreeMap::new();
    for thread in 0..threads {
        for key in 0..keys_per_thread {
            report.keys_checked += 1;
            match db.get(key_bytes(thread, key)) {
                Ok(Some(value)) => match Tag::parse(&value) {
                    Some(tag) => {
                        found.insert((thread, key), tag);
                    }
                    None => report.violations.push(format!(
                        "key {}: a value no write made ({} bytes: {:?}…)",
                        String::from_utf8_lossy(&key_bytes(thread, key)),
                        value.len(),
                        String::from_utf8_lossy(&value[..value.len().min(40)])
                    )),
                },
                Ok(None) => {}
                Err(error) => report.violations.push(format!(
                    "key {}: the read failed: {error}",
                    String::from_utf8_lossy(&key_bytes(thread, key))
                )),
            }
        }
    }
    // A key outside the model's key space is a write nobody made.
    let mut scanned = 0u64;
    for entry in db.range(..) {
        match entry {
            Ok((key, _)) => {
                scanned += 1;
                let known = std::str::from_utf8(&key).ok().and_then(|text| {
                    let (thread, key) = text.strip_prefix('t')?.split_once('k')?;
                    let (thread, key): (u32, u32) = (thread.parse().ok()?, key.parse().ok()?);
                    (thread < threads && key < keys_per_thread).then_some(())
                });
                if known.is_none() {
                    report
                        .violations
                        .push(format!("a key no write made: {:?}", String::from_utf8_lossy(&key)));
                }
            }
            Err(error) => {
                report.violations.push(format!("the scan failed: {error}"));
                break;
            }
        }
    }
    if scanned != found.len() as u64 && report.violations.is_empty() {
        report.violations.push(format!("the scan saw {scanned} keys, the reads {}", found.len()));
    }
    found
}

/// Checks the reopened `db` against `model` (see the module header). On return the model
/// holds the state found, with nothing in flight, for the next cycle.
pub fn check(db: &Db, model: &mut Model, threads: u32, keys_per_thread: u32) -> CheckReport {
    let mut report = CheckReport::default();
    let found = read_state(db, &mut report, threads, keys_per_thread);
    // Key by key: the acknowledged value, or the value of a write in flight on that key.
    let pending_on = |thread: u32, key: u32| {
        model
            .pending
            .get(&thread)
            .and_then(|write| write.changes.iter().find(|(k, _)| *k == key).map(|(_, tag)| *tag))
    };
    let mut keys: Vec<(u32, u32)> = model.acked.keys().chain(found.keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    for (thread, key) in keys {
        let acked = model.acked.get(&(thread, key)).copied();
        let now = found.get(&(thread, key)).copied();
        if now == acked {
            continue;
        }
        if let Some(pending) = pending_on(thread, key) {
            if now == pending {
                continue;
            }
        }
        report.violations.push(format!(
            "key {}: holds {} where the last acknowledged write left {}",
            String::from_utf8_lossy(&key_bytes(thread, key)),
            now.map_or("nothing".into(), |t| t.to_string()),
            acked.map_or("nothing".into(), |t| t.to_string()),
        ));
    }
    // Each write in flight: all of it or none of it.
    for write in model.pending.values() {
        let changed: Vec<bool> = write
            .changes
            .iter()
            .filter(|(key, tag)| model.acked.get(&(write.thread, *key)).copied() != *tag)
            .map(|(key, tag)| found.get(&(write.thread, *key)).copied() == *tag)
            .collect();
        match (changed.iter().all(|&c| c), changed.iter().any(|&c| c)) {
            (true, true) => report.in_flight_applied += 1,
            (false, false) | (true, false) => report.in_flight_lost += 1,
            (false, true) => report.violations.push(format!(
                "write {}.{} ({} changes) was in flight and is there in part: {changed:?}",
                write.thread,
                write.seq,
                write.changes.len()
            )),
        }
    }
    match db.verify() {
        Ok(verify) => {
            report.verify_problems = verify.problems.iter().map(|p| p.to_string()).collect()
        }
        Err(error) => report.verify_problems.push(format!("verify could not run: {error}")),
    }
    model.acked = found;
    model.pending.clear();
    report
}

/// One kill cycle, as the report records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CycleReport {
    /// The cycle, from 0.
    pub cycle: u64,
    /// Milliseconds the child wrote before it was killed.
    pub killed_after_ms: u64,
    /// Writes the child acknowledged.
    pub acks: u64,
    /// Writes in flight at the kill.
    pub in_flight: u64,
    /// Milliseconds the reopen (recovery) took.
    pub reopen_ms: f64,
    /// What the check found.
    pub check: CheckReport,
}

/// A whole torture run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TortureReport {
    /// The command line.
    pub command: String,
    /// The workload.
    pub workload: WorkloadOptions,
    /// How the store was opened (in words: read method, log placement and backend).
    pub store: String,
    /// Every cycle.
    pub cycles: Vec<CycleReport>,
}

impl TortureReport {
    /// Violations and verify problems over all cycles.
    pub fn violations(&self) -> usize {
        self.cycles.iter().map(|c| c.check.violations.len() + c.check.verify_problems.len()).sum()
    }

    /// The summary table.
    pub fn summary(&self) -> String {
        let acks: u64 = self.cycles.iter().map(|c| c.acks).sum();
        let applied: u64 = self.cycles.iter().map(|c| c.check.in_flight_applied).sum();
        let lost: u64 = self.cycles.iter().map(|c| c.check.in_flight_lost).sum();
        let mut reopen: Vec<f64> = self.cycles.iter().map(|c| c.reopen_ms).collect();
        reopen.sort_by(f64::total_cmp);
        let p = |q: f64| reopen.get(((reopen.len() as f64 - 1.0) * q) as usize).copied();
        format!(
            "{} kill cycles on {}: {acks} acknowledged writes, {} in flight at the kills \
             ({applied} found applied in full, {lost} not at all), reopen p50 {:.1} ms, max \
             {:.1} ms; violations: {}\n",
            self.cycles.len(),
            self.store,
            applied + lost,
            p(0.5).unwrap_or(0.0),
            p(1.0).unwrap_or(0.0),
            self.violations()
        )
    }
}

/// Milliseconds since `start`.
pub fn millis(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// A kill delay drawn uniformly from `range` (milliseconds).
pub fn kill_delay(rng: &mut fastrand::Rng, range: (u64, u64)) -> Duration {
    Duration::from_millis(rng.u64(range.0..=range.1.max(range.0)))
}

#[cfg(test)]
mod tests;
