//! The flag grammar, as a user meets it: walks every subcommand's `--help` from the top,
//! finds each duration, size and list flag by its value name (`<DURATION>`, `<SIZE>`,
//! `<SIZES>`, `<COUNTS>`), and runs the binary with `--check-args` (parse, print the parsed
//! values, run nothing) on each of the common forms, checking the value clap's real parser
//! gave. A flag parsed by anything but the one parser of its kind prints no value and fails.
//! It also checks the names: one meaning per flag name, no unit in a name, `--quiet` on every
//! long job, one default read method.

use std::collections::BTreeMap;
use std::process::Command;

fn tierkv(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tierkv")).args(args).output().expect("run tierkv")
}

fn help(path: &[String]) -> String {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let output = tierkv(&args);
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("utf-8")
}

/// One option of a `--help`: its name, value name (empty for a switch) and default.
#[derive(Debug, Clone)]
struct Flag {
    name: String,
    value: String,
    default: Option<String>,
}

/// A leaf subcommand: its path, its options, and the arguments its usage line requires.
#[derive(Debug)]
struct Leaf {
    path: Vec<String>,
    flags: Vec<Flag>,
    required: Vec<String>,
}

/// The names listed under `Commands:`, less `help`.
fn subcommands(text: &str) -> Vec<String> {
    let Some(start) = text.find("\nCommands:\n") else { return Vec::new() };
    text[start + "\nCommands:\n".len()..]
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// The options of a `--help`: lines `  -x, --name <VALUE>` or `      --name`, each with the
/// `[default: …]` that follows in its description.
fn flags(text: &str) -> Vec<Flag> {
    let mut flags: Vec<Flag> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let option = trimmed.strip_prefix("-h, ").or(Some(trimmed)).filter(|t| t.starts_with("--"));
        let indent = line.len() - trimmed.len();
        match option {
            Some(option) if indent <= 6 => {
                let mut words = option.split_whitespace();
                let name = words.next().unwrap_or_default().trim_start_matches("--").to_string();
                let value = words
                    .next()
                    .filter(|w| w.starts_with('<'))
                    .map_or(String::new(), |w| w.trim_matches(|c| c == '<' || c == '>').into());
                flags.push(Flag { name, value, default: None });
            }
            _ => {
                if let (Some(flag), Some(at)) = (flags.last_mut(), line.find("[default: ")) {
                    let rest = &line[at + "[default: ".len()..];
                    flag.default = rest.find(']').map(|end| rest[..end].to_string());
                }
            }
        }
    }
    flags
}

/// The arguments the usage line requires after `[OPTIONS]`, with a placeholder value each:
/// `--path <PATH>` becomes `--path x`, `<KEY>` becomes `x`; so does an optional positional
/// `[VALUE]`, which may be required unless another flag is given.
fn required(text: &str) -> Vec<String> {
    let usage = text.lines().find(|l| l.starts_with("Usage: ")).expect("a usage line");
    let mut out = Vec::new();
    let mut words = usage.split_whitespace().skip_while(|w| *w != "[OPTIONS]").skip(1).peekable();
    while let Some(word) = words.next() {
        if word.starts_with("--") {
            out.push(word.to_string());
            if words.peek().is_some_and(|w| w.starts_with('<')) {
                words.next();
                out.push("x".into());
            }
        } else if word.starts_with('<') || (word.starts_with('[') && !word.starts_with("[-")) {
            out.push("x".into());
        }
    }
    out
}

fn leaves(path: Vec<String>, out: &mut Vec<Leaf>) {
    let text = help(&path);
    let subs = subcommands(&text);
    if subs.is_empty() {
        out.push(Leaf { flags: flags(&text), required: required(&text), path });
        return;
    }
    for sub in subs {
        let mut inner = path.clone();
        inner.push(sub);
        leaves(inner, out);
    }
}

fn all_leaves() -> Vec<Leaf> {
    let mut out = Vec::new();
    leaves(Vec::new(), &mut out);
    out
}

/// Runs `leaf` with `--check-args` and each of `flags` set to its form; returns what the
/// binary printed for each flag.
fn check(leaf: &Leaf, flags: &[(&Flag, &str)]) -> BTreeMap<String, String> {
    let mut args: Vec<String> = leaf.path.clone();
    args.extend(leaf.required.iter().cloned());
    for (flag, form) in flags {
        args.push(format!("--{}={form}", flag.name));
    }
    args.push("--check-args".into());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = tierkv(&refs);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?} refused: {stderr}");
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .lines()
        .filter_map(|line| line.strip_prefix("--")?.split_once('='))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

const SECOND_NS: u64 = 1_000_000_000;

#[test]
fn every_duration_size_and_list_flag_takes_the_common_forms() {
    let duration_forms: [(&str, u64); 6] = [
        ("5", 5 * SECOND_NS),
        ("5s", 5 * SECOND_NS),
        ("1.5s", 3 * SECOND_NS / 2),
        ("500ms", SECOND_NS / 2),
        ("2m", 120 * SECOND_NS),
        ("1h", 3600 * SECOND_NS),
    ];
    let size_forms: [(&str, u64); 9] = [
        ("4096", 4096),
        ("4k", 4096),
        ("4K", 4096),
        ("4KiB", 4096),
        ("4kb", 4096),
        ("64m", 64 << 20),
        ("64MiB", 64 << 20),
        ("1g", 1 << 30),
        ("1GiB", 1 << 30),
    ];
    let list_forms: [(&str, &str, &str); 4] = [
        ("SIZES", "4k,64KiB,1m", "4096,65536,1048576"),
        ("SIZES", "512", "512"),
        ("COUNTS", "1,2,4", "1,2,4"),
        ("COUNTS", "3", "3"),
    ];
    let leaves = all_leaves();
    assert!(leaves.len() >= 19, "{} subcommands", leaves.len());
    let mut checked: BTreeMap<&str, usize> = BTreeMap::new();
    for leaf in &leaves {
        let of =
            |kind: &str| -> Vec<&Flag> { leaf.flags.iter().filter(|f| f.value == kind).collect() };
        let (durations, sizes) = (of("DURATION"), of("SIZE"));
        for (form, ns) in duration_forms {
            let printed = check(leaf, &durations.iter().map(|f| (*f, form)).collect::<Vec<_>>());
            for flag in &durations {
                assert_eq!(
                    printed.get(&flag.name),
                    Some(&ns.to_string()),
                    "{:?} --{} {form}",
                    leaf.path,
                    flag.name
                );
            }
        }
        for (form, bytes) in size_forms {
            let printed = check(leaf, &sizes.iter().map(|f| (*f, form)).collect::<Vec<_>>());
            for flag in &sizes {
                assert_eq!(
                    printed.get(&flag.name),
                    Some(&bytes.to_string()),
                    "{:?} --{} {form}",
                    leaf.path,
                    flag.name
                );
            }
        }
        for (kind, form, expected) in list_forms {
            let lists = of(kind);
            let printed = check(leaf, &lists.iter().map(|f| (*f, form)).collect::<Vec<_>>());
            for flag in &lists {
                assert_eq!(
                    printed.get(&flag.name).map(String::as_str),
                    Some(expected),
                    "{:?} --{} {form}",
                    leaf.path,
                    flag.name
                );
            }
        }
        // A list of names takes its own default, comma-separated as it is.
        for flag in of("NAMES")
            .into_iter()
            .filter(|f| f.default.as_deref().is_some_and(|d| d.contains(',')))
        {
            check(leaf, &[(flag, flag.default.as_deref().unwrap_or_default())]);
        }
        for kind in ["DURATION", "SIZE", "SIZES", "COUNTS", "NAMES"] {
            *checked.entry(kind).or_default() += of(kind).len();
        }
    }
    // The walk found flags of every kind, so a change in the help's layout cannot make this
    // test pass by finding nothing.
    for kind in ["DURATION", "SIZE", "SIZES", "COUNTS", "NAMES"] {
        assert!(checked.get(kind).copied().unwrap_or(0) >= 3, "{kind}: {checked:?}");
    }
}

#[test]
fn one_meaning_per_flag_name_and_no_units_in_names() {
    let leaves = all_leaves();
    let mut meanings: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for leaf in &leaves {
        for flag in &leaf.flags {
            let kind = match flag.value.as_str() {
                "" => "switch",
                "DURATION" | "SIZE" | "SIZES" | "COUNTS" | "NAMES" | "FILE" | "DIR" => &flag.value,
                _ => "other",
            };
            meanings
                .entry(flag.name.clone())
                .or_default()
                .entry(kind.to_string())
                .or_default()
                .push(leaf.path.join(" "));
            for unit in ["-mib", "-ms", "-seconds", "-minutes", "-bytes", "-secs"] {
                assert!(
                    !flag.name.ends_with(unit),
                    "{:?}: --{} names a unit",
                    leaf.path,
                    flag.name
                );
            }
        }
    }
    for (name, kinds) in &meanings {
        assert_eq!(kinds.len(), 1, "--{name} means different things: {kinds:?}");
    }
    let kind = |name: &str| meanings[name].keys().next().cloned().unwrap_or_default();
    assert_eq!(kind("json"), "switch", "--json is the output switch everywhere");
    assert_eq!(kind("report"), "FILE");
    assert_eq!(kind("threads"), "COUNTS", "--threads is a list everywhere");
    assert_eq!(kind("duration"), "DURATION");
    let json = &meanings["json"]["switch"];
    for command in ["info", "get", "scan", "stat"] {
        assert!(json.iter().any(|path| path == command), "{command} takes --json: {json:?}");
    }
    // Every long job takes --quiet.
    let quiet = &meanings["quiet"]["switch"];
    for leaf in &leaves {
        let path = leaf.path.join(" ");
        if leaf.path[0] == "bench" || ["stress", "torture crash", "load"].contains(&path.as_str()) {
            assert!(quiet.contains(&path), "{path} takes no --quiet");
        }
    }
    // One default read method.
    for leaf in &leaves {
        if let Some(flag) = leaf.flags.iter().find(|f| f.name == "read-method") {
            assert_eq!(flag.default.as_deref(), Some("syscall"), "{:?}", leaf.path);
        }
    }
}

#[test]
fn a_bad_form_is_refused_with_the_grammar() {
    let output =
        tierkv(&["bench", "wal", "--path", "x", "--duration", "5 fortnights", "--check-args"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("500ms") && stderr.contains("2m"), "{stderr}");
    let output = tierkv(&["stat", "--cache-size", "1.5", "--check-args"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("4KiB"), "{stderr}");
}
