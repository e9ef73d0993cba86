#!/usr/bin/env bash
# Reproduces results/tier/: the tier cache (seed 002's NVCache) through the engine.
# 1. benefit: 1M YCSB records (about 1.1 GiB of block files), a 256 MiB engine budget (the
#    data is over 4x the page cache), a 512 MiB tier (2x) on /dev/shm; YCSB A, B, C, D in
#    five configurations (no tier; a tier without and with Overhead Bypass; all DRAM: a
#    768 MiB budget; the OS page cache as the second level: buffered reads, in a memory
#    cgroup of 256 + 512 + 128 MiB). Data reads are direct (O_DIRECT) but in the last. C
#    runs first, after 2M warm-up requests: Overhead Bypass admits at most a tenth of the
#    lookups, so the tier takes that long to fill; each later workload warms up 200,000.
# 2. no benefit: 30,000 records (about 33 MiB: fits the page cache, with room for the old
#    versions of pages a checkpoint replaces), YCSB A (update-heavy) and C; no tier against
#    the tier with and without Overhead Bypass.
# Both include the readers-against-writers experiment (seed 002, figure 2) only once: 8
#    readers of a 256 MiB tier on /dev/shm as 0-8 writers admit blocks, on plain memory and
#    under the optane emulation.
# Every configuration runs in a process of its own on a copy of one loaded store; the
# binary runs from a copy, so that a build meanwhile cannot replace it.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -p tierkv-cli
out=results/tier
dir=${DATA_DIR:-/tmp/tierkv-tier}
mkdir -p "$dir"
tierkv=$dir/tierkv
cp target/release/tierkv "$tierkv"
common=(bench tier --path "$dir" --threads 2 --duration 20 --tier-backing /dev/shm --quiet)
$tierkv "${common[@]}" --records 1000000 --cache-mib 256 --tier-mib 512 --warmup-first 2000000 \
    --warmup 200000 --workloads c,b,a,d --readers 8 --writers 0,1,2,4,8 --writers-seconds 3 \
    --json $out/benefit.json --plot $out/plots-benefit | tee $out/benefit.txt
$tierkv "${common[@]}" --records 30000 --cache-mib 256 --tier-mib 512 --warmup-first 500000 \
    --warmup 200000 --workloads a,c --configs no-tier,tier-no-bypass,tier --readers 0 \
    --json $out/no-benefit.json --plot $out/plots-no-benefit | tee $out/no-benefit.txt
rm -f "$tierkv"
rmdir "$dir" 2>/dev/null || true
