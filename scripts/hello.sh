#!/usr/bin/env bash
# Installs what is missing, builds tvk in build/, and runs samples/hello.
#   scripts/hello.sh [DEVICE]      DEVICE: CPU, VK, VK:1 (default: the best available)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" --target hello
build/samples/hello "$@"
