#!/usr/bin/env bash
# Checks our YCSB request generator against YCSB itself. Builds scripts/ycsb-check/ with Maven,
# which fetches YCSB's core jar (site.ycsb:core) from Maven Central, and has YCSB's own
# CoreWorkload emit the keys of a core workload (A unless told) as one client thread would; runs
# our generator (crates/bench/examples/ycsb_keys.rs) with the same record and operation counts;
# then compares the request counts of YCSB's 100 most requested keys, key by key, as
# |ours - ycsb| / ycsb. Prints a table and the largest relative difference, and fails when that
# is 10% or more.
#
# Usage: scripts/ycsb-check.sh [records [operations [workload]]]
#   defaults: 100000 records, 100000000 operations, workload a (about a minute and a half on
#   2 cores). At 10^8 operations the rank-100 key is requested about 40,000 times, so sampling
#   noise alone moves the largest difference to about 2%; at 10^7 it is about 5%.
#   YCSB_CHECK_MVN_FLAGS adds flags to mvn (e.g. -o to build offline once the jars are cached).
#
# Needs: cargo, awk, a JDK (java, javac; 11 or later) and Maven (mvn), and Maven Central (or a
# local Maven repository already holding site.ycsb:core and the build plugins). Build output
# stays under target/ycsb-check (ignored); nothing is written beside the sources.
set -euo pipefail
cd "$(dirname "$0")/.."

records=${1:-100000}
operations=${2:-100000000}
workload=${3:-a}
top=100
limit_percent=10

missing=()
for tool in java javac mvn cargo awk; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
    echo "ycsb-check: missing ${missing[*]}." >&2
    echo "  It needs a JDK and Maven; on Debian or Ubuntu: apt-get install maven default-jdk-headless" >&2
    exit 2
fi

build_dir=target/ycsb-check
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

echo "building YCSB's side (site.ycsb:core from Maven Central) into $build_dir ..." >&2
# shellcheck disable=SC2086 # the flags are words on purpose
if ! mvn -q -B ${YCSB_CHECK_MVN_FLAGS:-} -f scripts/ycsb-check/pom.xml package \
    >"$scratch/mvn.log" 2>&1; then
    cat "$scratch/mvn.log" >&2
    echo "ycsb-check: the Maven build failed (above); it needs Maven Central, or a local" >&2
    echo "  repository holding site.ycsb:core 0.17.0 and the build plugins (then pass -o)." >&2
    exit 2
fi
echo "building our side (ycsb_keys) ..." >&2
ours_bin=$(cargo build -q --release -p tierkv-bench --example ycsb_keys \
    --message-format=json-render-diagnostics |
    sed -n 's/.*"executable":"\([^"]*ycsb_keys\)".*/\1/p' | tail -n 1)
[[ -x $ours_bin ]] || { echo "ycsb-check: cargo built no ycsb_keys executable" >&2; exit 2; }

echo "workload $workload, $records records, $operations operations, one client thread" >&2
start=$SECONDS
java -cp "$build_dir/ycsb-check-0.1.0.jar:$build_dir/lib/*" tierkv.ycsbcheck.KeyCounts \
    "$workload" "$records" "$operations" "$top" >"$scratch/ycsb.tsv"
echo "  YCSB's CoreWorkload: $((SECONDS - start)) s" >&2
start=$SECONDS
"$ours_bin" "$workload" "$records" "$operations" >"$scratch/ours.tsv"
echo "  ours (ycsb_keys):    $((SECONDS - start)) s" >&2

# YCSB's top keys in its order; ours looked up by key (0 when we never asked for it).
awk -F'\t' -v limit="$limit_percent" '
    FNR == NR { order[++n] = $1; ycsb[$1] = $2; next }
    ($1 in ycsb) { ours[$1] = $2 }
    END {
        printf "%4s  %-24s %10s %10s %9s\n", "rank", "key", "ycsb", "ours", "rel diff"
        worst = 0
        for (rank = 1; rank <= n; rank++) {
            key = order[rank]
            mine = (key in ours) ? ours[key] : 0
            diff = (mine > ycsb[key] ? mine - ycsb[key] : ycsb[key] - mine) / ycsb[key]
            if (diff > worst) { worst = diff; worst_rank = rank }
            printf "%4d  %-24s %10d %10d %8.2f%%\n", rank, key, ycsb[key], mine, 100 * diff
        }
        printf "largest relative difference: %.2f%% (rank %d); limit %d%%\n", 100 * worst, worst_rank, limit
        exit (100 * worst >= limit) ? 1 : 0
    }' "$scratch/ycsb.tsv" "$scratch/ours.tsv"
