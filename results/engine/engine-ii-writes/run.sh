#!/usr/bin/env bash
# Engine II's writes in place against the copy-on-write checkpoints before them: `tierkv
# bench engine` fillrandom, overwrite, readrandom and seekrandom on 1,000,000 keys held in
# memory (1 GiB budget, DURABILITY, default buffered), the binary built from OLD_REF
# (default a7684b0, the last commit before writes went in place) and the one built here,
# alternating, three rounds, the order swapped each round: engine-ii-reads/run.sh with these
# settings. OUT (default results/engine/engine-ii-writes) is where the reports go.
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-results/engine/engine-ii-writes} \
    OLD_REF=${OLD_REF:-a7684b0} \
    DURABILITY=${DURABILITY:-buffered} \
    WORKLOADS=fillrandom,overwrite,readrandom,seekrandom \
    COMMAND=results/engine/engine-ii-writes/run.sh \
    exec bash results/engine/engine-ii-reads/run.sh
