#!/usr/bin/env bash
# Leaves kept in key order by inserts in place: `tierkv bench engine` fillrandom, then
# readseq and readreverse (one iterator over every key, each way) on 300,000 keys with
# values of 1,000 bytes (YCSB's record size; leaves of about ten entries) held in memory
# (1 GiB budget, buffered), the binary built from OLD_REF (default 6030460, where a new key
# took its leaf's heap's low end) and the one built here, alternating, five rounds, the
# order swapped each round: engine-ii-reads/run.sh with these settings. OUT (default
# results/engine/scan-order) is where the reports go.
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-results/engine/scan-order} \
    OLD_REF=${OLD_REF:-6030460} \
    DURABILITY=buffered \
    WORKLOADS=fillrandom,readseq,readreverse \
    NUM=300000 READS=300000 VALUE_SIZE=1000 ROUNDS=${ROUNDS:-5} \
    COMMAND=results/engine/scan-order/run.sh \
    exec bash results/engine/engine-ii-reads/run.sh
