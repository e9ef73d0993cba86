//! The one grammar of the command line's values: one parser per kind, used by every
//! subcommand through clap's `value_parser`, and one value name per kind, so `--help` shows
//! which grammar a flag takes.
//!
//! - `DURATION` (`parse_duration`): a number and an optional unit: `ns`, `us`, `ms`, `s`,
//!   `m` (minutes), `h`; no unit means seconds. `5`, `5s`, `1.5s`, `500ms`, `2m`, `1h`.
//!   Zero is accepted (a flag may mean "off" by it); negative or not-a-number is not.
//! - `SIZE` (`parse_size`): a number of bytes and an optional binary unit, in any case:
//!   `k`, `kb`, `kib` (all 1024), `m`/`mb`/`mib`, `g`/`gb`/`gib`, `t`/`tb`/`tib`, or `b`.
//!   `4096`, `4k`, `4K`, `4KiB`, `64m`, `1GiB`, `1.5g`. A fraction must come to whole bytes.
//!   Every unit is binary, as fio and dd read them: a `4k` page is 4096 bytes.
//! - Lists (`SIZES`, `COUNTS`, `NAMES`): comma-separated values of one kind, `1,2,4,8`;
//!   one value is a list of one. Every `--threads` is a list of `COUNTS`.
//!
//! A test walks every subcommand's `--help` and checks each flag named so takes the common
//! forms (`crates/cli/tests/flags.rs`); the unit tests below check that each value name is
//! given to its parser and no other.
//!
//! Must never: accept a value it would have to round or wrap (a size past `u64`, a fraction
//! of a byte), or read a bare number with a unit other than the one documented here.

use std::time::Duration;

/// The value name of a duration flag.
pub const DURATION: &str = "DURATION";
/// The value name of a size flag.
pub const SIZE: &str = "SIZE";
/// The value name of a list of sizes.
pub const SIZES: &str = "SIZES";
/// The value name of a list of counts (threads, writers).
pub const COUNTS: &str = "COUNTS";
/// The value name of a list of names (workloads, methods, engines).
pub const NAMES: &str = "NAMES";

/// A number of bytes, as a size flag gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// The bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }

    /// The bytes as a `usize`, or why not (`flag` names the flag in the message).
    pub fn to_usize(self, flag: &str) -> Result<usize, String> {
        usize::try_from(self.0).map_err(|_| format!("{flag} {} is too large here", self.0))
    }
}

impl std::fmt::Display for ByteSize {
    /// The shortest exact form this grammar reads back: `4k`, `64m`, `1g`, `1500`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const UNITS: [(u64, &str); 4] =
            [(1 << 40, "t"), (1 << 30, "g"), (1 << 20, "m"), (1 << 10, "k")];
        for (unit, suffix) in UNITS {
            if self.0 >= unit && self.0.is_multiple_of(unit) {
                return write!(f, "{}{suffix}", self.0 / unit);
            }
        }
        write!(f, "{}", self.0)
    }
}

/// Splits `text` into its number and its unit (letters at the end), both trimmed.
fn split_unit(text: &str) -> (&str, &str) {
    let text = text.trim();
    let at = text.trim_end_matches(|c: char| c.is_ascii_alphabetic()).len();
    (text[..at].trim_end(), &text[at..])
}

/// A finite, non-negative decimal number (no sign, no exponent, no `inf`).
fn parse_number(number: &str) -> Option<f64> {
    let plain = !number.is_empty()
        && number.chars().all(|c| c.is_ascii_digit() || c == '.')
        && number.chars().filter(|&c| c == '.').count() <= 1
        && number.chars().any(|c| c.is_ascii_digit());
    plain.then(|| number.parse::<f64>().ok()).flatten().filter(|n| n.is_finite())
}

/// A duration (see the module header): `5` (seconds), `5s`, `500ms`, `2m`, `1.5h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!("{text:?} is not a duration; write a number of seconds or one with a unit: 5, 5s, 500ms, 2m, 1h")
    };
    let (number, unit) = split_unit(text);
    let seconds_per_unit = match unit {
        "" | "s" | "sec" => 1.0,
        "ms" => 1e-3,
        "us" => 1e-6,
        "ns" => 1e-9,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(bad()),
    };
    let value = parse_number(number).ok_or_else(bad)?;
    Duration::try_from_secs_f64(value * seconds_per_unit).map_err(|_| bad())
}

/// A size in bytes (see the module header): `4096`, `4k`, `4KiB`, `64m`, `1GiB`.
pub fn parse_size(text: &str) -> Result<ByteSize, String> {
    let bad = || {
        format!("{text:?} is not a size; write bytes or a number with a binary unit: 4096, 4k, 4KiB, 64m, 1GiB")
    };
    let (number, unit) = split_unit(text);
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad()),
    };
    if let Ok(whole) = number.parse::<u64>() {
        return whole.checked_mul(1u64 << shift).map(ByteSize).ok_or_else(bad);
    }
    // A fraction: exact only where the unit makes it whole bytes (1.5k, not 1.5 or 0.3k).
    let value = parse_number(number).ok_or_else(bad)? * (1u64 << shift) as f64;
    let exact = value.fract() == 0.0 && value < u64::MAX as f64;
    exact.then_some(ByteSize(value as u64)).ok_or_else(bad)
}

/// A count in a list of counts (threads, writers): a whole number.
pub fn parse_count(text: &str) -> Result<usize, String> {
    text.trim().parse::<usize>().map_err(|_| format!("{text:?} is not a whole number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_seconds_and_units() {
        let cases = [
            ("5", 5_000),
            ("5s", 5_000),
            ("1.5s", 1_500),
            ("500ms", 500),
            ("2m", 120_000),
            ("1h", 3_600_000),
            ("0.25", 250),
            ("0", 0),
            (" 3 s", 3_000),
        ];
        for (text, ms) in cases {
            assert_eq!(parse_duration(text), Ok(Duration::from_millis(ms)), "{text}");
        }
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        for bad in ["", "s", "-1", "5x", "1e3", "inf", "NaN", "5 5", "1..2", "m5"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_take_bytes_and_binary_units() {
        let cases = [
            ("4096", 4096),
            ("4k", 4096),
            ("4K", 4096),
            ("4kb", 4096),
            ("4KiB", 4096),
            ("64m", 64 << 20),
            ("64MiB", 64 << 20),
            ("1g", 1 << 30),
            ("1GiB", 1 << 30),
            ("1.5k", 1536),
            ("2T", 2 << 40),
            ("100b", 100),
            ("0", 0),
        ];
        for (text, bytes) in cases {
            assert_eq!(parse_size(text), Ok(ByteSize(bytes)), "{text}");
        }
        for bad in ["", "k", "-4k", "4x", "1.5", "0.3k", "99999999999t", "4 k b", "1e3"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        for bytes in [0u64, 100, 4096, 1536, 64 << 20, 1 << 30, 3 << 40] {
            let text = ByteSize(bytes).to_string();
            assert_eq!(parse_size(&text), Ok(ByteSize(bytes)), "{text}");
        }
    }

    #[test]
    fn counts_are_whole_numbers() {
        assert_eq!(parse_count("16"), Ok(16));
        assert!(parse_count("1.5").is_err() && parse_count("-1").is_err());
    }

    /// Every flag of every subcommand: a value name of one kind goes with that kind's parser
    /// (its output type), and a parser's output type goes with its value name only.
    #[test]
    fn each_value_name_has_its_parser_and_no_other() {
        use clap::CommandFactory;
        use std::any::TypeId;

        fn walk(command: &clap::Command, path: &str, checked: &mut usize) {
            for arg in command.get_arguments() {
                let name =
                    arg.get_value_names().and_then(|names| names.first()).map(|n| n.as_str());
                let parser = arg.get_value_parser().type_id();
                let list = arg.get_value_delimiter() == Some(',');
                let flag = format!("{path} --{}", arg.get_id());
                let duration = parser == TypeId::of::<Duration>();
                let size = parser == TypeId::of::<ByteSize>();
                match name {
                    Some(DURATION) => assert!(duration && !list, "{flag}"),
                    Some(SIZE) => assert!(size && !list, "{flag}"),
                    Some(SIZES) => assert!(size && list, "{flag}"),
                    Some(COUNTS) => {
                        assert!(list && parser == TypeId::of::<usize>(), "{flag}")
                    }
                    Some(NAMES) => assert!(list, "{flag}"),
                    _ => assert!(
                        !duration && !size && !list,
                        "{flag}: a list, size or duration needs its value name"
                    ),
                }
                if arg.get_id() == "threads" {
                    assert_eq!(name, Some(COUNTS), "{flag}: every --threads is a list");
                }
                *checked += 1;
            }
            for sub in command.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), checked);
            }
        }
        let mut command = crate::Cli::command();
        // Builds every subcommand, running clap's own checks of each (debug builds).
        command.build();
        let mut checked = 0;
        walk(&command, "tierkv", &mut checked);
        assert!(checked > 100, "{checked}");
    }
}
