#!/usr/bin/env bash
# Installs what is missing, builds tvk with warnings as errors, and runs every
# test suite.
#   scripts/test.sh            plain build in build/ (the default compiler and build type)
#   scripts/test.sh sanitize   ASan + UBSan build (Debug) in build-asan/
#   scripts/test.sh clang      clang Release build in build-clang-rel/
# Further arguments go to cmake, e.g. -DTVK_TEST_CACHE=DIR (the kernel cache
# the tests share; default <build dir>/test-cache).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

mode=${1:-plain}
[ $# -gt 0 ] && shift
case "$mode" in
  plain) dir=build; flags=() ;;
  sanitize) dir=build-asan; flags=(-DTVK_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug) ;;
  clang)
    dir=build-clang-rel
    flags=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release) ;;
  *) echo "usage: $0 [plain|sanitize|clang] [cmake options]" >&2; exit 2 ;;
esac

cmake -S . -B "$dir" -DTVK_WERROR=ON -DTVK_BUILD_TESTS=ON "${flags[@]}" "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
# Leaks inside the Vulkan loader/driver/validation layer are not ours (tests/lsan.supp).
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$dir" && ctest --output-on-failure -j"$(nproc)"
