#!/usr/bin/env python3
"""Fuzzes each target until its processes have used a given number of CPU-seconds.

libFuzzer's own limit, -max_total_time, counts wall seconds, which on a shared or busy machine
is not fuzzing done. This runs each target in chunks and adds up the CPU time the kernel
charged to the fuzzer and its children (getrusage), until the total reaches --cpu-seconds.
With --fork N, libFuzzer's fork mode runs N fuzzing processes at once for one target.

Build first:  cd fuzz && cargo +nightly fuzz build -O
Then e.g.:    python3 fuzz/run.py --cpu-seconds 1830 --out results/fuzz/local.json
                  log_segment store_dir write_batch

Each target's corpus is fuzz/corpus/<target> (seeded from fuzz/regressions/<target>), crashers
land in fuzz/artifacts/<target>/, and libFuzzer's output in fuzz/logs/<target>.<chunk>.log.
One JSON object per target is printed and written to --out: wall and CPU seconds, executions
(summed over chunks from libFuzzer's final statistics), exit status and any crash files.
A target whose fuzzer exits non-zero (a crash, a leak, a timeout) stops there.
"""

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time

FUZZ = os.path.dirname(os.path.abspath(__file__))
TARGETS = ["log_record", "log_segment", "write_batch", "block_header", "segment_header",
           "map_checkpoint", "btree_page", "slotted_page", "slotted_edits", "meta_block",
           "store_dir", "db_ops"]
# store_dir damages a whole store directory; its inputs are edit scripts that stay short.
# slotted_edits replays a script of 4-byte steps against a model, checking the page after
# each: short scripts run many more times in the same CPU time.
EXTRA = {"store_dir": ["-max_len=120"], "slotted_edits": ["-max_len=1024"],
         "db_ops": ["-max_len=1200"]}
# How many executions a run did: "stat::number_of_executed_units: N" (plain mode, with
# -print_final_stats=1) or the last "#N:" status line (fork mode).
PLAIN_RUNS = re.compile(r"stat::number_of_executed_units:\s*(\d+)")
FORK_RUNS = re.compile(r"^#(\d+):", re.M)


def executions(text):
    plain = PLAIN_RUNS.findall(text)
    if plain:
        return int(plain[-1])
    fork = FORK_RUNS.findall(text)
    return int(fork[-1]) if fork else 0


def fuzz(target, args):
    binary = os.path.join(args.bin_dir, target)
    corpus = os.path.join(FUZZ, "corpus", target)
    artifacts = os.path.join(FUZZ, "artifacts", target) + "/"
    logs = os.path.join(FUZZ, "logs")
    for folder in (corpus, artifacts, logs):
        os.makedirs(folder, exist_ok=True)
    seeds = os.path.join(FUZZ, "regressions", target)
    for name in os.listdir(seeds):
        shutil.copy(os.path.join(seeds, name), corpus)
    # Crash files already there (from an earlier run) are not this run's.
    earlier = set(os.listdir(artifacts))
    cpu = wall = 0.0
    runs = chunks = status = 0
    while cpu < args.cpu_seconds and status == 0:
        left = args.cpu_seconds - cpu
        seconds = int(min(args.chunk_seconds, max(30, left / args.fork + 10)))
        command = [binary, corpus, f"-artifact_prefix={artifacts}", f"-max_total_time={seconds}",
                   "-print_final_stats=1"] + EXTRA.get(target, [])
        if args.fork > 1:
            command.append(f"-fork={args.fork}")
        log_path = os.path.join(logs, f"{target}.{chunks}.log")
        start = time.time()
        with open(log_path, "w") as log:
            child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=FUZZ)
            # wait4's usage covers the fuzzer and every child it waited for (fork mode's jobs).
            _, raw_status, usage = os.wait4(child.pid, 0)
        wall += time.time() - start
        cpu += usage.ru_utime + usage.ru_stime
        with open(log_path, errors="replace") as log:
            runs += executions(log.read())
        chunks += 1
        status = os.waitstatus_to_exitcode(raw_status)
    return {
        "target": target,
        "fork": args.fork,
        "cpu_s": round(cpu, 1),
        "cpu_min": round(cpu / 60, 1),
        "wall_s": round(wall, 1),
        "executions": runs,
        "chunks": chunks,
        "exit": status,
        "crash_files": sorted(set(os.listdir(artifacts)) - earlier),
        "earlier_crash_files": sorted(earlier),
        "corpus_files": len(os.listdir(corpus)),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", default=TARGETS)
    parser.add_argument("--cpu-seconds", type=float, default=1830)
    parser.add_argument("--fork", type=int, default=1, help="fuzzing processes per target")
    parser.add_argument("--parallel", type=int, default=1, help="targets fuzzed at once")
    parser.add_argument("--chunk-seconds", type=int, default=900)
    parser.add_argument("--bin-dir", default=os.path.join(
        FUZZ, "target", "x86_64-unknown-linux-gnu", "release"))
    parser.add_argument("--out", help="JSON file for the per-target results")
    args = parser.parse_args()
    unknown = [t for t in args.targets if t not in TARGETS]
    if unknown:
        sys.exit(f"unknown targets {unknown}; known: {TARGETS}")
    results, lock, queue = [], threading.Lock(), list(args.targets)

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                target = queue.pop(0)
            result = fuzz(target, args)
            with lock:
                print(json.dumps(result), flush=True)
                results.append(result)

    threads = [threading.Thread(target=worker) for _ in range(args.parallel)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.sort(key=lambda r: TARGETS.index(r["target"]))
    if args.out:
        with open(args.out, "w") as out:
            json.dump({"command": sys.argv, "cpu_seconds_per_target": args.cpu_seconds,
                       "results": results}, out, indent=1)
    sys.exit(1 if any(r["exit"] != 0 for r in results) else 0)


if __name__ == "__main__":
    main()
