#!/usr/bin/env bash
# The test command of the README: unit, integration and property tests of every crate, the loom
# model of the remap protocol, the engine's rustdoc (no broken links), and the layering check.
# Needs cargo, and installs strace where it is missing (the loom build uses its own target
# directory because it compiles with `--cfg loom`).
set -euo pipefail
cd "$(dirname "$0")/.."

# The read-only commands' test traces them with strace, which a bare Debian lacks.
if ! command -v strace >/dev/null 2>&1; then
    sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq strace
fi

cargo test --workspace
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p tierkv-io --release --lib loom
RUSTDOCFLAGS="-D warnings" cargo doc -p tierkv --no-deps --quiet
bash scripts/check-layering.sh
