#!/usr/bin/env bash
# The test command of the README: unit, integration and property tests of every crate, the loom
# model of the remap protocol, and the layering check. Needs only cargo (the loom build uses its
# own target directory because it compiles with `--cfg loom`).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p tierkv-io --release --lib loom
bash scripts/check-layering.sh
