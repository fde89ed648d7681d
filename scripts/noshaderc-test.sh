#!/usr/bin/env bash
# TVK_SHADERC=OFF end to end: a Vulkan build without a GLSL compiler runs
# samples/hello on Vulkan from a kernel cache that a build with shaderc made
# (the same output), and with an empty cache fails with a message that says
# why. Needs build/ built (scripts/test.sh) and a Vulkan device.
#   scripts/noshaderc-test.sh [WITH_SHADERC_BUILD] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
with=${1:-build}
dir=${2:-build-noshaderc}
cmake -S . -B "$dir" -DTVK_SHADERC=OFF -DTVK_BUILD_TESTS=OFF -DTVK_WERROR=ON >/dev/null
cmake --build "$dir" -j"$(nproc)" --target hello tvk_shared
if nm -D --defined-only "$dir/libtvk.so" | grep -qi shaderc ||
   nm "$dir/libtvk.so" 2>/dev/null | grep -q shaderc_compile_into_spv; then
  echo "noshaderc-test: shaderc is linked into $dir/libtvk.so" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if TVK_CACHE_DIR=$work/empty "$dir/samples/hello" VK >"$work/empty.out" 2>&1; then
  echo "noshaderc-test: ran with an empty cache and no shaderc" >&2
  exit 1
fi
grep -q "TVK_SHADERC=OFF" "$work/empty.out" || {
  echo "noshaderc-test: the failure does not say why:" >&2
  cat "$work/empty.out" >&2
  exit 1
}
TVK_CACHE_DIR=$work/cache "$with/samples/hello" VK >"$work/with.out"
TVK_CACHE_DIR=$work/cache "$dir/samples/hello" VK >"$work/without.out"
# the same results; only the counters differ (compiled there, cache hits here)
diff <(grep -v '^kernels run' "$work/with.out") <(grep -v '^kernels run' "$work/without.out")
grep -q 'compiled: 0' "$work/without.out"
echo "noshaderc-test: ran from the cache shaderc filled; with an empty cache: $(grep -m1 -o "kernel '[^']*' is not in the SPIR-V cache" "$work/empty.out")"
