#!/usr/bin/env bash
# Architecture check over every crate in crates/, the engine's included:
# 1. Only crates/io makes system calls or issues cache-line flushes: no other crate names
#    libc/rustix/memmap2/nix, inline assembly or CPU intrinsics in its code, or depends on those
#    crates in its Cargo.toml.
# 2. The system calls that only measurement tools make (`tierkv_io::measure`) stay out of the
#    store: only crates/io, crates/bench and crates/cli name that module.
# 3. Each crate depends only on the tierkv crates below it, as the table below says. Every
#    directory of crates/ must have its row, so a new crate cannot slip past the check.
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

# Whole files (-z), so that an import list over several lines is read as one.
measure=$(grep -rlPz 'tierkv_io::(\{[^}]*)?\bmeasure\b' crates --include='*.rs' \
    | grep -vE '^crates/(io|bench|cli)/' || true)
if [[ -n "$measure" ]]; then
    echo "layering violation: tierkv_io::measure is for measurement tools (bench, cli) only" >&2
    echo "$measure" >&2
    exit 1
fi
echo "layering ok: measurement-only system calls are used only by crates/bench and crates/cli"

# The layers, one row per directory of crates/: the crates (by directory) it may depend on.
# io <- wal, tiercache, blockstore <- engine <- bench <- cli
declare -A allowed=(
    [io]=""
    [wal]="io"
    [tiercache]="io"
    [blockstore]="io"
    [engine]="io wal tiercache blockstore"
    [bench]="io wal tiercache blockstore engine"
    [cli]="io wal tiercache blockstore engine bench"
)

# Package name -> directory, read from each crate's manifest.
declare -A dir_of=()
for manifest in crates/*/Cargo.toml; do
    name=$(awk -F'"' '/^\[/{package = ($0 == "[package]")} package && /^name *=/{print $2; exit}' \
        "$manifest")
    dir_of[$name]=$(basename "$(dirname "$manifest")")
done

# The tierkv packages a manifest depends on, of every kind but dev-dependencies: keys of the
# dependency tables (`tierkv-io.workspace = true`, `tierkv = { path = .. }`), the package a
# renamed key names (`package = "tierkv-io"`), and `[dependencies.tierkv-io]` tables.
tierkv_dependencies() {
    awk '
        /^\[/ {
            table = $0
            deps = (table ~ /dependencies/ && table !~ /dev-dependencies/)
            if (deps && match(table, /dependencies\.[A-Za-z0-9_-]+\]/)) {
                name = substr(table, RSTART + 13, RLENGTH - 14)
                if (name ~ /^tierkv(-|$)/) print name
            }
            next
        }
        deps && /package *= *"tierkv/ {
            sub(/.*package *= *"/, ""); sub(/".*/, ""); print; next
        }
        deps && /^tierkv(-[a-z]+)?[ .=]/ { sub(/[ .=].*/, ""); print }
    ' "$1"
}

status=0
for path in crates/*/; do
    crate=$(basename "$path")
    if [[ ! -v "allowed[$crate]" ]]; then
        echo "layering violation: crates/$crate has no row in the layer table of $0;" \
            "add one with the crates it may depend on" >&2
        status=1
        continue
    fi
    manifest=crates/$crate/Cargo.toml
    if [[ ! -f $manifest ]]; then
        echo "layering violation: crates/$crate has no Cargo.toml" >&2
        status=1
        continue
    fi
    for dep in $(tierkv_dependencies "$manifest"); do
        dep_dir=${dir_of[$dep]:-}
        if [[ -z $dep_dir ]]; then
            echo "layering violation: crates/$crate depends on $dep, which is no crate of crates/" >&2
            status=1
        elif [[ " ${allowed[$crate]} " != *" $dep_dir "* ]]; then
            echo "layering violation: crates/$crate depends on $dep (crates/$dep_dir)" >&2
            status=1
        fi
    done
done
for crate in "${!allowed[@]}"; do
    if [[ ! -d crates/$crate ]]; then
        echo "layering violation: the layer table names crates/$crate, which does not exist" >&2
        status=1
    fi
done
[[ $status -eq 0 ]] || exit 1
echo "layering ok: every crate of crates/ has its row, and depends only on the layers below it"
