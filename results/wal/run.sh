#!/usr/bin/env bash
# Reproduces results/wal/: the WAL benchmark on a disk directory and on /dev/shm, each with
# RocksDB (db_bench) and SQLite beside it. About 20 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/install-tools.sh
cargo build --release -p tierkv-cli --features peers
tierkv=./target/release/tierkv
out=results/wal
disk=${DISK_DIR:-/tmp/tierkv-wal-lab}
shm=${SHM_DIR:-/dev/shm/tierkv-wal-lab}
mkdir -p "$disk" "$shm"
for place in ${PLACES:-disk shm}; do
    dir=$disk
    [[ $place == shm ]] && dir=$shm
    $tierkv bench wal --path "$dir" --backend file,pmem --threads 1,2,4,8,16 \
        --record-size 64,128,1K,4K --duration 5s --quiet \
        --report $out/$place.json --plot $out/plots-$place | tee $out/$place.txt
done
rmdir "$disk" "$shm" 2>/dev/null || true
