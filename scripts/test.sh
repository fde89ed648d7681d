#!/usr/bin/env bash
# Installs what is missing, builds tvk with warnings as errors, and runs every
# test suite.
#   scripts/test.sh            plain build in build/ (the default compiler and build type)
#   scripts/test.sh sanitize   ASan + UBSan build (Debug) in build-asan/
#   scripts/test.sh clang      clang Release build in build-clang-rel/
#   scripts/test.sh release    gcc Release build in build-rel/
#   scripts/test.sh cpu        CPU-only build (TVK_VULKAN=OFF) in build-cpu/: no Vulkan at all
#   scripts/test.sh tsan       ThreadSanitizer, CPU only, in build-tsan/: the compile tiers'
#                              builder threads, the batched compiles, the thread pool
# Further arguments go to cmake, e.g. -DTVK_TEST_CACHE=DIR (the kernel cache
# the tests share; default <build dir>/test-cache). With TVK_REQUIRE_VK=1 (as
# in CI) a Vulkan test that finds no Vulkan device fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

mode=${1:-plain}
[ $# -gt 0 ] && shift
case "$mode" in
  plain) dir=build; flags=() ;;
  sanitize)
    dir=build-asan
    flags=(-DTVK_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
    # test_oom's runs cost several times more under ASan: a 7 times sparser sweep
    export TVK_OOM_STRIDE=${TVK_OOM_STRIDE:-7} ;;
  clang)
    dir=build-clang-rel
    flags=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release)
    export TVK_OOM_STRIDE=${TVK_OOM_STRIDE:-5} ;; # the plain build sweeps every allocation
  cpu)
    dir=build-cpu
    flags=(-DTVK_VULKAN=OFF)
    export TVK_OOM_STRIDE=${TVK_OOM_STRIDE:-5} # as for clang
    export TVK_REQUIRE_VK=0 ;; # a library without Vulkan has no Vulkan device to require
  tsan)
    dir=build-tsan
    # Vulkan's drivers and shaderc are not instrumented (false reports): CPU only.
    flags=(-DTVK_VULKAN=OFF -DTVK_BUILD_SAMPLES=OFF "-DCMAKE_C_FLAGS=-fsanitize=thread -g -O1"
           -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread)
    export TVK_REQUIRE_VK=0
    # the OOM test asks for SIZE_MAX/2 bytes: fail like malloc, as under ASan
    export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:allocator_may_return_null=1}
    export TVK_OOM_STRIDE=${TVK_OOM_STRIDE:-7} ;; # as under ASan
  release)
    dir=build-rel
    flags=(-DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE=Release)
    export TVK_OOM_STRIDE=${TVK_OOM_STRIDE:-5} ;; # as for clang
  *) echo "usage: $0 [plain|sanitize|clang|release|cpu|tsan] [cmake options]" >&2; exit 2 ;;
esac

cmake -S . -B "$dir" -DTVK_WERROR=ON -DTVK_BUILD_TESTS=ON "${flags[@]}" "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
# Leaks inside the Vulkan loader/driver/validation layer are not ours (tests/lsan.supp).
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$dir"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
ctest --output-on-failure -j"$(nproc)" | tee "$log"
# A Vulkan suite without a Vulkan device exits 77 and ctest calls it skipped;
# where one is required (CI: TVK_REQUIRE_VK=1), that is a failure.
if [ "${TVK_REQUIRE_VK:-0}" != 0 ] && grep -q '(Skipped)' "$log"; then
  echo "test.sh: TVK_REQUIRE_VK is set, but ctest skipped the tests above" >&2
  exit 1
fi
