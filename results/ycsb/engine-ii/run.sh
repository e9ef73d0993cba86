#!/usr/bin/env bash
# The in-memory regime of results/ycsb (1M records, 2 client threads, a 3 GiB budget per
# engine, each engine in a process of its own, writes `buffered`, bench ycsb's settings of
# run.sh) in ROUNDS rounds (default 3): every engine once a round, the order rotated by one
# each round. Writes each round's report and summary.json: per workload, tierkv's ops/s over
# each peer's within each round, and the medians of those ratios. ENGINES (default: tierkv
# and every peer built in but rocksdb-crate, whose source build takes this machine about an
# hour) names the engines, WORKLOADS (default a,b,c,f,d,e) the workloads, THREADS (default
# 2) the client threads, OUT (default results/ycsb/engine-ii) where the reports go.
# FEATURES (default c-peers,rust-peers,tierkv-bench/sqlite) are the build's features: `peers`
# adds rocksdb-crate (with the same allocator settings); CARGO_TARGET_DIR is honoured, so
# that build can keep a target directory of its own.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-results/ycsb/engine-ii}
mkdir -p "$out"
dir=${DATA_DIR:-/tmp/tierkv-ycsb}
rounds=${ROUNDS:-3}
bash scripts/install-tools.sh
cargo build --release -p tierkv-cli --features "${FEATURES:-c-peers,rust-peers,tierkv-bench/sqlite}"
mkdir -p "$dir"
tierkv=$dir/tierkv
cp "${CARGO_TARGET_DIR:-target}/release/tierkv" "$tierkv"
IFS=, read -r -a engines <<< "${ENGINES:-tierkv,lmdb,wiredtiger,rocksdb,fjall,redb,sqlite}"
common=(bench ycsb --records "${RECORDS:-1000000}" --operations "${REQUESTS:-1000000}"
    --duration "${SECONDS_PER_WORKLOAD:-20}" --warmup "${WARMUP:-20000}" --threads "${THREADS:-2}"
    --workloads "${WORKLOADS:-a,b,c,f,d,e}" --durability buffered --path "$dir" --quiet
    --cache-size 3072m --isolate)
for ((round = 1; round <= rounds; round++)); do
    shift_by=$(( (round - 1) % ${#engines[@]} ))
    order=("${engines[@]:shift_by}" "${engines[@]:0:shift_by}")
    list=$(IFS=,; echo "${order[*]}")
    "$tierkv" "${common[@]}" --engines "$list" --report "$out/round-$round.json" \
        --plot "$out/plots-round-$round" |
        tee "$out/round-$round.txt"
done
rm -f "$tierkv"
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
reports = [json.load(open(f"{out}/round-{r}.json")) for r in range(1, rounds + 1)]
def rates(report):
    table = {}
    for engine in report["engines"]:
        if engine.get("failure"):
            continue
        table[engine["engine"]] = {p["phase"]: p["ops_per_sec"] for p in engine["phases"]}
    return table
tables = [rates(r) for r in reports]
ratios = {}
for table in tables:
    mine = table.get("tierkv", {})
    for peer, phases in table.items():
        if peer == "tierkv":
            continue
        for phase, value in phases.items():
            if phase in mine and value:
                ratios.setdefault(peer, {}).setdefault(phase, []).append(mine[phase] / value)
best = {}
for table in tables:
    for phase in table.get("tierkv", {}):
        peers = [phases[phase] for e, phases in table.items() if e != "tierkv" and phase in phases]
        if peers:
            best.setdefault(phase, []).append(table["tierkv"][phase] / max(peers))
summary = {
    "command": "results/ycsb/engine-ii/run.sh",
    "bench_command": reports[0]["command"],
    "machine": reports[0]["machine"],
    "order_by_round": [[e["engine"] for e in r["engines"]] for r in reports],
    "ops_per_sec_by_round": tables,
    "tierkv_over_peer_by_round": ratios,
    "tierkv_over_best_peer_by_round": best,
    "median_tierkv_over_peer": {p: {ph: statistics.median(v) for ph, v in d.items()} for p, d in ratios.items()},
    "median_tierkv_over_best_peer": {ph: statistics.median(v) for ph, v in best.items()},
}
json.dump(summary, open(f"{out}/summary.json", "w"), indent=2)
phases = ["load", "a", "b", "c", "f", "d", "e"]
print("tierkv / peer, median of in-round ratios [lowest, highest]")
print("peer".ljust(12) + "".join(p.rjust(22) for p in phases))
for peer, d in sorted(ratios.items()):
    cells = []
    for ph in phases:
        v = d.get(ph)
        cells.append((f"{statistics.median(v):.2f} [{min(v):.2f}, {max(v):.2f}]" if v else "-").rjust(22))
    print(peer.ljust(12) + "".join(cells))
cells = []
for ph in phases:
    v = best.get(ph)
    cells.append((f"{statistics.median(v):.2f} [{min(v):.2f}, {max(v):.2f}]" if v else "-").rjust(22))
print("best peer".ljust(12) + "".join(cells))
PY
