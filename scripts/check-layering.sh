#!/usr/bin/env bash
# Architecture check: only crates/io makes system calls or issues cache-line flushes.
# Fails if any other crate names libc/rustix/memmap2/nix, inline assembly or CPU intrinsics in
# its code, or depends on those crates in its Cargo.toml.
set -euo pipefail
cd "$(dirname "$0")/.."

code=$(grep -rnE '\b(libc|rustix|memmap2|nix)::|\basm!|\b(std|core)::arch\b|_mm_(clflush|sfence|stream)' \
    crates --include='*.rs' | grep -v '^crates/io/' || true)
deps=$(grep -nE '^\s*(libc|rustix|memmap2|nix)\s*(=|\.)' crates/*/Cargo.toml | grep -v '^crates/io/' || true)

if [[ -n "$code$deps" ]]; then
    echo "layering violation: only crates/io may make system calls or flush cache lines" >&2
    [[ -n "$code" ]] && echo "$code" >&2
    [[ -n "$deps" ]] && echo "$deps" >&2
    exit 1
fi
echo "layering ok: system calls and flush instructions appear only in crates/io"

# The layers: a crate may depend only on the tierkv crates below it.
# io <- wal, tiercache <- blockstore <- engine <- bench, cli
declare -A allowed=(
    [io]=""
    [wal]="tierkv-io"
    [tiercache]="tierkv-io"
    [blockstore]="tierkv-io tierkv-tiercache"
    [engine]="tierkv-io tierkv-wal tierkv-tiercache tierkv-blockstore"
)
for crate in "${!allowed[@]}"; do
    manifest=crates/$crate/Cargo.toml
    [[ -f $manifest ]] || continue
    # Dependencies of every kind but dev-dependencies.
    used=$(awk '/^\[/{dev = ($0 ~ /dev-dependencies/)} !dev && /^tierkv-[a-z]+/{sub(/[ .=].*/, ""); print}' "$manifest")
    for dep in $used; do
        if [[ " ${allowed[$crate]} " != *" $dep "* ]]; then
            echo "layering violation: crates/$crate depends on $dep" >&2
            exit 1
        fi
    done
done
echo "layering ok: every crate depends only on the layers below it"
