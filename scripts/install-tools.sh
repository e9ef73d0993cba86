#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages tierkv's measurement tools need: fio (for
# `tierkv bench device --compare-fio`), RocksDB's db_bench (rocksdb-tools), and the libraries
# and headers of the peer engines that the `peers` feature links (`tierkv bench wal` and
# `tierkv bench ycsb`): SQLite, RocksDB, LMDB and WiredTiger, with WiredTiger's `wt` tool, and
# the C compiler that builds their shim; and clang with libclang, which the `rocksdb` crate's
# build (the `rocksdb-crate` feature: RocksDB at its current release, built from source) needs
# for its bindings. Idempotent: installed packages are left alone, and the
# package lists are refreshed (`apt-get update`, once) only when something is missing.
# Usable by people and CI; runs apt-get through sudo unless already root.
set -euo pipefail

packages=(fio rocksdb-tools libsqlite3-dev librocksdb-dev liblmdb-dev libwiredtiger-dev wiredtiger
    build-essential clang libclang-dev)

if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
    echo "install-tools: apt-get not found; install these packages with your package manager:" \
        "${packages[*]}" >&2
    exit 1
fi

installed() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

missing=()
for package in "${packages[@]}"; do
    if installed "$package"; then
        echo "install-tools: $package is already installed" \
            "($(dpkg-query -W -f='${Version}' "$package"))"
    else
        missing+=("$package")
    fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
    echo "install-tools: nothing to do"
    exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "install-tools: need root (or sudo) to install: ${missing[*]}" >&2
        exit 1
    fi
    sudo=(sudo)
fi

echo "install-tools: installing ${missing[*]} (running apt-get update first)"
"${sudo[@]}" apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"

for package in "${missing[@]}"; do
    if ! installed "$package"; then
        echo "install-tools: $package is still not installed" >&2
        exit 1
    fi
    echo "install-tools: installed $package ($(dpkg-query -W -f='${Version}' "$package"))"
done
