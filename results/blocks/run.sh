#!/usr/bin/env bash
# Reproduces results/blocks/: seed 003's write tables, the page-update workload (atomic groups
# against the doublewrite baseline) and the 10-minute sustained-overwrite space test, on a disk
# directory. About 29 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -p tierkv-cli
tierkv=./target/release/tierkv
out=results/blocks
dir=${DISK_DIR:-/tmp/tierkv-blocks-lab}
mkdir -p "$dir"
# 1. The tables and the page-update workload, with the defaults (256 MiB of pages, Zipfian
#    updates, 30 s per mode and page size).
$tierkv bench blocks --path "$dir" --quiet --report $out/disk.json --plot $out/plots | tee $out/disk.txt
# 2. Uniform page updates, the same otherwise.
$tierkv bench blocks --path "$dir" --quiet --repeats 5 --bandwidth-repeats 5 \
    --distribution uniform --report $out/disk-uniform.json | tee $out/disk-uniform.txt
# 3. Ten minutes of uniform 4 KiB page rewrites on 1 GiB of pages, with default store
#    options, sampling the space amplification once a second (the tables and page updates
#    run short here; their figures are in 1).
$tierkv bench blocks --path "$dir" --quiet --repeats 3 --bandwidth-repeats 3 --duration 3 \
    --data-size 1g --overwrite-duration 10m --report $out/overwrite.json | tee $out/overwrite.txt
rmdir "$dir" 2>/dev/null || true
