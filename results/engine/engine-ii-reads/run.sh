#!/usr/bin/env bash
# Engine II's reads against Engine I: `tierkv bench engine` fillrandom, readrandom and
# seekrandom on 1,000,000 keys held in memory (1 GiB budget, durability none), the binary
# built from the tag `engine-i` (the engine before issue 25) and the one built here,
# alternating, three rounds, the order swapped each round. Writes each run's report and
# summary.json: per workload, the new/old ratio of ops/s within each round and its median.
# OUT (default results/engine/engine-ii-reads) is where the reports go; OLD_REF (default the
# tag engine-i) the commit the old binary is built from; WORKLOADS and DURABILITY (defaults
# above) what runs; COMMAND the script named in summary.json (engine-ii-writes/run.sh runs
# this one with its own settings); NUM, READS, VALUE_SIZE and ROUNDS (defaults 1,000,000,
# 2,000,000, 100 and 3) the size of the run.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-results/engine/engine-ii-reads}
mkdir -p "$out"
old_ref=${OLD_REF:-engine-i}
workloads=${WORKLOADS:-fillrandom,readrandom,seekrandom}
durability=${DURABILITY:-none}
command=${COMMAND:-results/engine/engine-ii-reads/run.sh}
dir=${DATA_DIR:-/tmp/tierkv-engine-ii}
old_tree=${OLD_TREE:-/tmp/tierkv-$old_ref-src}
old=$dir/tierkv-$old_ref
new=$dir/tierkv-new
mkdir -p "$dir"
cargo build --release -p tierkv-cli
cp target/release/tierkv "$new"
if [[ ! -x $old ]]; then
    [[ -d $old_tree ]] || git worktree add --detach "$old_tree" "$old_ref"
    (cd "$old_tree" && cargo build --release -p tierkv-cli --target-dir "$dir/target-$old_ref")
    cp "$dir/target-$old_ref/release/tierkv" "$old"
fi
rounds=${ROUNDS:-3}
args=(bench engine --workloads "$workloads" --num "${NUM:-1000000}" --reads "${READS:-2000000}"
    --value-size "${VALUE_SIZE:-100}" --cache-size 1g --durability "$durability" --quiet)
for round in $(seq 1 "$rounds"); do
    if (( round % 2 )); then order=(old new); else order=(new old); fi
    for which in "${order[@]}"; do
        bin=$old; [[ $which == new ]] && bin=$new
        rm -rf "$dir/store"; mkdir -p "$dir/store"
        "$bin" "${args[@]}" --path "$dir/store" --report "$out/$which-round-$round.json" \
            --plot "$out/plots-$which-round-$round" |
            tee "$out/$which-round-$round.txt"
    done
done
rm -rf "$dir/store"
python3 - "$out" "$command" "$old_ref" "$durability" "$rounds" "${args[*]}" <<'PY'
import json, statistics, sys
out, command, old_ref, durability, count, args = sys.argv[1:7]
rounds = {}
for r in range(1, int(count) + 1):
    runs = {w: json.load(open(f"{out}/{w}-round-{r}.json")) for w in ("old", "new")}
    rates = {w: {x["workload"]: x["ops_per_sec"] for x in runs[w]["results"]} for w in runs}
    rounds[r] = {k: rates["new"][k] / rates["old"][k] for k in rates["new"]}
summary = {
    "command": command,
    "old_ref": old_ref,
    "durability": durability,
    "bench_args": args,
    "machine": json.load(open(f"{out}/new-round-1.json"))["machine"],
    "ratio_new_over_old_by_round": rounds,
    "median_ratio": {k: statistics.median(rounds[r][k] for r in rounds) for k in rounds[1]},
}
json.dump(summary, open(f"{out}/summary.json", "w"), indent=2)
for k, v in summary["median_ratio"].items():
    print(f"{k}: median new/old {v:.3f} (rounds: " +
          ", ".join(f"{rounds[r][k]:.3f}" for r in rounds) + ")")
PY
