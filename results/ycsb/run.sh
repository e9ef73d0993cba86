#!/usr/bin/env bash
# Reproduces results/ycsb/: YCSB A-F on tierkv and its seven peers (Debian's RocksDB 7.8, a
# current RocksDB built from source as `rocksdb-crate`, LMDB, WiredTiger, SQLite, redb, fjall),
# side by side, in two regimes, each engine in a process of its own:
# - in memory: 1M records (about 1 GiB), a 3 GiB budget per engine, enough for each to hold
#   the data in its own cache (LMDB has none: the OS page cache holds it);
# - out of memory: the same data, a 256 MiB budget per engine, and every engine's process in
#   a memory cgroup limited to 384 MiB with the page cache counted (needs root, or a writable
#   cgroup hierarchy), so no engine is served by the OS page cache beyond that limit. (At
#   320 MiB, the budget plus tierkv's own 64 MiB bound, the kernel killed tierkv's process:
#   the cgroup counts the page cache of every file written, dirty pages included.)
# Every engine allocates with the binary's jemalloc (with the peers built in, it replaces
# malloc for the C libraries too; under glibc's malloc WiredTiger's process grew to 3× its
# cache_size and was killed at the limit). Each engine's own (anonymous) memory is sampled
# and reported beside its cgroup's peak.
# Writes are `buffered` for every engine (the log reaches the OS at each write, fsync left to
# the engine's own schedule; each adapter documents its setting). Each workload runs
# REQUESTS requests or SECONDS seconds, whichever comes first, after WARMUP warm-up requests.
# Then runs scripts/ycsb-check.sh, the generator against YCSB's own jar (GENERATOR_CHECK=0
# skips it). REGIMES=out-of-memory runs one regime.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/install-tools.sh
cargo build --release -p tierkv-cli --features peers
out=results/ycsb
dir=${DATA_DIR:-/tmp/tierkv-ycsb}
mkdir -p "$dir"
# The run starts each engine's process from this binary: a copy, so that a build during the
# run (which replaces target/release/tierkv) cannot take it away mid-run.
tierkv=$dir/tierkv
cp target/release/tierkv "$tierkv"
common=(bench ycsb --engines all --records "${RECORDS:-1000000}" --operations "${REQUESTS:-1000000}"
    --duration "${SECONDS_PER_WORKLOAD:-20}" --warmup "${WARMUP:-20000}" --threads 2
    --workloads a,b,c,f,d,e --durability buffered --path "$dir" --quiet)
for regime in ${REGIMES:-in-memory out-of-memory}; do
    case $regime in
        in-memory) limits=(--cache-size 3072m --isolate) ;;
        out-of-memory) limits=(--cache-size 256m --memory-limit 384m) ;;
    esac
    $tierkv "${common[@]}" "${limits[@]}" --report $out/$regime.json --plot $out/plots-$regime |
        tee $out/$regime.txt ||
        echo "run.sh: an engine failed in the $regime regime; its report says why" >&2
done
rm -f "$tierkv"
rmdir "$dir" 2>/dev/null || true
if [[ ${GENERATOR_CHECK:-1} == 1 ]]; then
    bash scripts/ycsb-check.sh | tee $out/generator-check.txt
fi
