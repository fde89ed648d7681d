#!/usr/bin/env bash
# Installs what is missing, builds tvk, and runs every test suite.
#   scripts/test.sh            plain build in build/
#   scripts/test.sh sanitize   ASan + UBSan build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

mode=${1:-plain}
case "$mode" in
  plain) dir=build; flags=(-DTVK_WERROR=ON) ;;
  sanitize) dir=build-asan; flags=(-DTVK_WERROR=ON -DTVK_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug) ;;
  *) echo "usage: $0 [plain|sanitize]" >&2; exit 2 ;;
esac

cmake -S . -B "$dir" "${flags[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
# Leaks inside the Vulkan loader/driver/validation layer are not ours (tests/lsan.supp).
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$dir" && ctest --output-on-failure -j"$(nproc)"
