#!/usr/bin/env bash
# Reproduces results/device/ on the machine at hand: the fio comparison on the disk, then the
# full sweep on a disk directory and on /dev/shm. Takes about 25 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/install-tools.sh
cargo build --release -p tierkv-cli
tierkv=./target/release/tierkv
out=results/device
disk=${DISK_DIR:-/tmp/tierkv-lab}
shm=${SHM_DIR:-/dev/shm/tierkv-lab}
mkdir -p "$disk" "$shm"

# The acceptance points: 1 MiB seq read/write and 4 KiB rand read, syscall and direct, beside
# fio, 3 alternating repeats of 3 s each.
$tierkv bench device --path "$disk" --methods syscall,direct --ops read,write --patterns seq,rand \
    --sizes 4k,1m --threads 1 --cache warm --file-size 1g --duration 3 --compare-fio --fio-repeats 3 \
    --quiet --report $out/fio-disk.json | tee $out/fio-disk.txt

# The sweep: every method, op, pattern and cache state, 128 B to 16 MiB, 1 and 2 threads.
$tierkv bench device --path "$disk" --file-size 512m --duration 0.5 --threads 1,2 --quiet \
    --report $out/disk.json --csv $out/disk.csv --plot $out/plots-disk | tee $out/disk.txt
$tierkv bench device --path "$shm" --file-size 512m --duration 0.5 --threads 1,2 --quiet \
    --report $out/shm.json --csv $out/shm.csv --plot $out/plots-shm | tee $out/shm.txt
rmdir "$disk" "$shm" 2>/dev/null || true
