#!/usr/bin/env bash
# Issue 26's Sync floor: `bench engine` fillrandom and overwrite with Sync durability, one
# writer, against the fdatasync limit times the records per sync (one writer: one record per
# sync), measured by `bench wal` in the same round. Rounds alternate which runs first; the
# ratio of each round uses that round's limit (the mean of the limit measured before and
# after the log point, which is 128 B records, the size of a 16 B key and 100 B value batch).
# Writes sync.json beside this script (or under $OUT).
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-results/engine/engine-ii-writes}
rounds=${ROUNDS:-3}
num=${NUM:-20000}
dir=${DATA_DIR:-/tmp/tierkv-engine-ii-sync}
mkdir -p "$out" "$dir"
cargo build --release -p tierkv-cli
bin=target/release/tierkv
for round in $(seq 1 "$rounds"); do
    if (( round % 2 )); then order=(wal engine); else order=(engine wal); fi
    for which in "${order[@]}"; do
        rm -rf "$dir/store"; mkdir -p "$dir/store"
        if [[ $which == wal ]]; then
            "$bin" bench wal --path "$dir/store" --backend file --threads 1 --record-size 128 \
                --duration 3s --no-peers --quiet --limit-trials 1 \
                --report "$dir/wal-round-$round.json" | tail -3
        else
            "$bin" bench engine --workloads fillrandom,overwrite --num "$num" --cache-size 256m \
                --durability sync --path "$dir/store" --quiet \
                --report "$dir/engine-round-$round.json" | tail -4
        fi
    done
done
rm -rf "$dir/store"
python3 - "$dir" "$out" "$rounds" "$num" <<'PY'
import json, statistics, sys
dir, out, rounds, num = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
by_round = []
for r in range(1, rounds + 1):
    wal = json.load(open(f"{dir}/wal-round-{r}.json"))
    engine = json.load(open(f"{dir}/engine-round-{r}.json"))
    point = wal["points"][0]
    limit = point["fdatasync_limit_around"]["per_s"]
    rates = {x["workload"]: x["ops_per_sec"] for x in engine["results"]}
    maxes = {x["workload"]: x["max_us"] / 1000 for x in engine["results"]}
    by_round.append({
        "round": r,
        "fdatasync_limit_per_s": limit,
        "log_commits_per_s": point["commits_per_s"],
        "records_per_sync": point["records_per_sync"],
        "engine_ops_per_s": rates,
        "engine_max_ms": maxes,
        "ratio_to_limit": {k: v / (limit * 1.0) for k, v in rates.items()},
    })
summary = {
    "command": "results/engine/engine-ii-writes/sync.sh",
    "num": num,
    "machine": json.load(open(f"{dir}/engine-round-1.json"))["machine"],
    "rounds": by_round,
    "median_ratio_to_limit": {
        k: statistics.median(r["ratio_to_limit"][k] for r in by_round)
        for k in by_round[0]["ratio_to_limit"]
    },
}
json.dump(summary, open(f"{out}/sync.json", "w"), indent=2)
for k, v in summary["median_ratio_to_limit"].items():
    print(f"{k}: median {v:.3f} of the fdatasync limit x 1 record per sync (rounds: " +
          ", ".join(f"{r['ratio_to_limit'][k]:.3f}" for r in by_round) + ")")
PY
