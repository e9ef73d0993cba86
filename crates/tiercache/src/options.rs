//! The tier's options and the slow-tier emulation presets.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tierkv_io::RegionBacking;

use crate::TierError;

/// Options of a `TierCache`.
#[derive(Clone, Debug)]
pub struct TierOptions {
    /// Where the tier's memory comes from: anonymous memory, or a new file (on a DAX file
    /// system, a tmpfs such as `/dev/shm`, or any file system), mapped and unlinked.
    pub backing: RegionBacking,
    /// Bytes of memory the tier holds blocks in (rounded up to whole pages). Required.
    pub capacity_bytes: u64,
    /// Bind the tier's memory to this NUMA node (`mbind`), as a CXL or KMEM-DAX node.
    pub numa_node: Option<u32>,
    /// Overhead Bypass: skip admissions and evictions while (inserts + removals) / lookups
    /// exceeds `max_overhead`. Default true.
    pub overhead_bypass: bool,
    /// The Overhead Bypass threshold. Default 0.10, NVCache's 10%.
    pub max_overhead: f64,
    /// Eviction works once the blocks fill this share of the capacity. Default 0.95.
    pub full_target: f64,
    /// An eviction pass frees blocks until they fill `full_target` less this share.
    /// Default 0.05.
    pub evict_share: f64,
    /// How often the eviction thread wakes. Default 1 s, as NVCache's.
    pub eviction_interval: Duration,
    /// Hash buckets of the lookup table, rounded up to a power of two; 0 (the default): one
    /// per 8 KiB of capacity, from 1,024 to 4M.
    pub buckets: usize,
    /// Admit a block after a device read returned it (NVCache's read path). Default true.
    pub cache_on_read: bool,
    /// Admit a clean block the layer above's cache lets go of (a demotion, as a victim cache
    /// and RocksDB's secondary cache do), so that the tier holds what DRAM does not rather
    /// than copies of pages DRAM keeps. Default false: on YCSB-C with the data 4× the
    /// budget it served no more hits than `cache_on_read` (`results/tier/README.md`).
    pub cache_on_evict: bool,
    /// A hit moves the block out of the tier: the layer above caches it, and
    /// `cache_on_evict` gives it back when it leaves, so DRAM and the tier never hold the
    /// same block (an exclusive cache). Every hit is then a removal and every demotion an
    /// insert, the churn Overhead Bypass throttles, so it goes with the bypass off, on a
    /// tier whose writes are cheap. Default false.
    pub exclusive: bool,
    /// Admit the blocks that the layer above writes outside a checkpoint. Default true.
    pub cache_on_write: bool,
    /// Admit the blocks a checkpoint writes. Default true.
    pub cache_on_checkpoint: bool,
    /// Make each access slower, to emulate a slow memory tier on DRAM. Default none.
    pub emulation: Option<SlowTier>,
}

impl TierOptions {
    /// A tier of `capacity_bytes` of anonymous memory with the defaults.
    pub fn new(capacity_bytes: u64) -> TierOptions {
        TierOptions {
            backing: RegionBacking::Anonymous,
            capacity_bytes,
            numa_node: None,
            overhead_bypass: true,
            max_overhead: 0.10,
            full_target: 0.95,
            evict_share: 0.05,
            eviction_interval: Duration::from_secs(1),
            buckets: 0,
            cache_on_read: true,
            cache_on_evict: false,
            exclusive: false,
            cache_on_write: true,
            cache_on_checkpoint: true,
            emulation: None,
        }
    }

    /// Checks the options; the tier checks them again when it opens.
    pub fn validate(&self) -> Result<(), TierError> {
        let invalid = |detail: String| Err(TierError::InvalidOptions(detail));
        if self.capacity_bytes < MIN_CAPACITY_BYTES {
            return invalid(format!(
                "capacity_bytes {} is below the smallest tier, {MIN_CAPACITY_BYTES} bytes",
                self.capacity_bytes
            ));
        }
        if !(self.max_overhead.is_finite() && self.max_overhead > 0.0) {
            return invalid(format!("max_overhead {} must be a number above 0", self.max_overhead));
        }
        if !(self.full_target > 0.0 && self.full_target <= 1.0) {
            return invalid(format!("full_target {} must lie in (0, 1]", self.full_target));
        }
        if !(self.evict_share > 0.0 && self.evict_share <= self.full_target) {
            return invalid(format!(
                "evict_share {} must lie in (0, full_target = {}]",
                self.evict_share, self.full_target
            ));
        }
        if self.eviction_interval.is_zero() {
            return invalid("eviction_interval must not be 0".into());
        }
        if self.buckets > MAX_BUCKETS {
            return invalid(format!("buckets {} is over the limit of {MAX_BUCKETS}", self.buckets));
        }
        if let Some(emulation) = &self.emulation {
            emulation.validate().map_err(TierError::InvalidOptions)?;
        }
        Ok(())
    }

    /// The number of buckets the lookup table gets.
    pub(crate) fn bucket_count(&self) -> usize {
        match self.buckets {
            0 => ((self.capacity_bytes / (8 << 10)) as usize)
                .next_power_of_two()
                .clamp(1024, DEFAULT_MAX_BUCKETS),
            n => n.next_power_of_two(),
        }
    }
}

/// The smallest capacity accepted.
pub const MIN_CAPACITY_BYTES: u64 = 64 << 10;

const MAX_BUCKETS: usize = 1 << 26;
const DEFAULT_MAX_BUCKETS: usize = 1 << 22;

/// An emulated slow memory tier: a delay added to each access, and a bandwidth for reads and
/// one for writes, both drawn from one emulated device, so that writes take device time from
/// concurrent reads as they do on Optane (seed 002, figure 2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlowTier {
    /// The preset's name, or `custom`.
    pub name: String,
    /// Nanoseconds added to each read (a block lookup's copy out of the tier).
    pub read_delay_ns: u64,
    /// Nanoseconds added to each write (an admission's copy into the tier).
    pub write_delay_ns: u64,
    /// Bytes per second the device reads at most, if capped.
    pub read_bytes_per_sec: Option<u64>,
    /// Bytes per second the device writes at most, if capped.
    pub write_bytes_per_sec: Option<u64>,
}

impl SlowTier {
    /// The names `preset` knows.
    pub const PRESETS: [&'static str; 2] = ["optane", "cxl"];

    /// `optane`: Optane DC persistent memory, one module, from the figures seed 002 cites: a
    /// random read of about 305 ns (215 ns added to DRAM's 90), reads at 6 GB/s and writes at
    /// 2 GB/s (the best figure it cites; small writes are as fast as DRAM's, so no delay).
    /// `cxl`: CXL-attached memory, reads about 80 ns slower than DRAM, no bandwidth cap.
    pub fn preset(name: &str) -> Option<SlowTier> {
        match name {
            "optane" => Some(SlowTier {
                name: name.into(),
                read_delay_ns: 215,
                write_delay_ns: 0,
                read_bytes_per_sec: Some(6_000_000_000),
                write_bytes_per_sec: Some(2_000_000_000),
            }),
            "cxl" => Some(SlowTier {
                name: name.into(),
                read_delay_ns: 80,
                write_delay_ns: 0,
                read_bytes_per_sec: None,
                write_bytes_per_sec: None,
            }),
            _ => None,
        }
    }

    /// A preset's name, or `read_ns=N,write_ns=N,read_mbps=N,write_mbps=N` (any subset; MB/s
    /// in 10^6 bytes).
    pub fn parse(text: &str) -> Result<SlowTier, String> {
        if let Some(preset) = SlowTier::preset(text) {
            return Ok(preset);
        }
        let mut tier = SlowTier {
            name: "custom".into(),
            read_delay_ns: 0,
            write_delay_ns: 0,
            read_bytes_per_sec: None,
            write_bytes_per_sec: None,
        };
        for field in text.split(',') {
            let (key, value) = field.split_once('=').ok_or_else(|| {
                format!(
                    "slow tier {text:?}: expected a preset ({}) or key=value pairs",
                    SlowTier::PRESETS.join(", ")
                )
            })?;
            let number: u64 = value
                .trim()
                .parse()
                .map_err(|_| format!("slow tier {text:?}: {key} needs a whole number"))?;
            match key.trim() {
                "read_ns" => tier.read_delay_ns = number,
                "write_ns" => tier.write_delay_ns = number,
                "read_mbps" => tier.read_bytes_per_sec = Some(number * 1_000_000),
                "write_mbps" => tier.write_bytes_per_sec = Some(number * 1_000_000),
                other => {
                    return Err(format!(
                        "slow tier {text:?}: unknown key {other:?} (read_ns, write_ns, \
                         read_mbps, write_mbps)"
                    ))
                }
            }
        }
        tier.validate()?;
        Ok(tier)
    }

    fn validate(&self) -> Result<(), String> {
        if self.read_bytes_per_sec == Some(0) || self.write_bytes_per_sec == Some(0) {
            return Err("a slow tier's bandwidth must be above 0".into());
        }
        if self.read_delay_ns > 1_000_000_000 || self.write_delay_ns > 1_000_000_000 {
            return Err("a slow tier's delay must be at most 1 s".into());
        }
        Ok(())
    }

    /// The emulation in words, for reports: "emulated optane: reads +215 ns, at most 6.0 GB/s;
    /// writes +0 ns, at most 2.0 GB/s".
    pub fn describe(&self) -> String {
        let cap = |rate: Option<u64>| {
            rate.map_or(String::new(), |r| format!(", at most {:.1} GB/s", r as f64 / 1e9))
        };
        format!(
            "emulated {}: reads +{} ns{}; writes +{} ns{}",
            self.name,
            self.read_delay_ns,
            cap(self.read_bytes_per_sec),
            self.write_delay_ns,
            cap(self.write_bytes_per_sec)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_and_custom_emulations_parse_and_bad_ones_say_why() {
        let optane = SlowTier::parse("optane").expect("preset");
        assert_eq!(optane.read_delay_ns, 215);
        assert_eq!(optane.write_bytes_per_sec, Some(2_000_000_000));
        assert!(optane.describe().contains("emulated optane: reads +215 ns, at most 6.0 GB/s"));
        assert_eq!(SlowTier::parse("cxl").expect("preset").read_delay_ns, 80);
        let custom = SlowTier::parse("read_ns=100,write_mbps=500").expect("custom");
        assert_eq!((custom.read_delay_ns, custom.write_bytes_per_sec), (100, Some(500_000_000)));
        for bad in ["optan", "read_ns=x", "speed=3", "write_mbps=0"] {
            assert!(SlowTier::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn options_are_checked() {
        assert!(TierOptions::new(1 << 20).validate().is_ok());
        let bad = [
            TierOptions::new(1000),
            TierOptions { max_overhead: 0.0, ..TierOptions::new(1 << 20) },
            TierOptions { max_overhead: f64::NAN, ..TierOptions::new(1 << 20) },
            TierOptions { full_target: 1.5, ..TierOptions::new(1 << 20) },
            TierOptions { evict_share: 0.0, ..TierOptions::new(1 << 20) },
            TierOptions { eviction_interval: Duration::ZERO, ..TierOptions::new(1 << 20) },
        ];
        for options in bad {
            let error = options.validate().expect_err("invalid");
            assert!(error.to_string().starts_with("invalid tier options"), "{error}");
        }
        assert_eq!(TierOptions::new(1 << 20).bucket_count(), 1024);
        assert_eq!(TierOptions::new(1 << 30).bucket_count(), 1 << 17);
        assert_eq!(TierOptions { buckets: 1000, ..TierOptions::new(1 << 20) }.bucket_count(), 1024);
    }
}
