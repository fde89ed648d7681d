#!/usr/bin/env bash
# The check to run on a machine with a real GPU (issue 29): builds tvk
# (Release), runs the Vulkan suites with the validation layer, runs
# samples/bench VK, and prints each case's GFLOP/s and GB/s next to the
# device's peak.
#
#   scripts/gpu-check.sh [--device VK|VK:n] [--peak-gbs G] [--peak-gflops F]
#                        [--build DIR] [--no-tests] [--no-bench]
#
# The peak comes from the command line, else from a small table of known
# devices (by the name tvk reports); without one the percentages are left
# out. Installs nothing and downloads nothing: a missing tool or library is
# reported with what to install. Exit status: the suites' (0: all passed).
set -uo pipefail
cd "$(dirname "$0")/.."

device=VK peak_gbs= peak_gflops= dir=build-gpu tests=1 bench=1
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift ;;
    --peak-gbs) peak_gbs=$2; shift ;;
    --peak-gflops) peak_gflops=$2; shift ;;
    --build) dir=$2; shift ;;
    --no-tests) tests=0 ;;
    --no-bench) bench=0 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done

say() { printf '\n== %s\n' "$*"; }
for tool in cmake cc; do
  command -v "$tool" >/dev/null ||
    { echo "gpu-check: '$tool' is missing (scripts/install-deps.sh installs what tvk needs)" >&2; exit 2; }
done

say "build ($dir, Release)"
t0=$(date +%s)
mkdir -p "$dir"
if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release >"$dir/gpu-check.cmake.log" 2>&1; then
  tail -20 "$dir/gpu-check.cmake.log"; exit 2
fi
if ! cmake --build "$dir" -j"$(nproc)" >"$dir/gpu-check.build.log" 2>&1; then
  grep -E 'error|Error' "$dir/gpu-check.build.log" | head -20; exit 2
fi
echo "built in $(($(date +%s) - t0)) s"

say "devices"
"$dir/samples/devices" || { echo "gpu-check: no devices listed" >&2; exit 2; }
# the device a context gets for $device (VK: the best Vulkan device), as tvk names it
desc=$(TVK_DEVICE=$device "$dir/samples/hello" 2>/dev/null | sed -n 's/^device: //p' | head -1)
[ -n "$desc" ] || { echo "gpu-check: tvk cannot open $device" >&2; exit 2; }
echo "checking $device: $desc"
case "$desc" in
  *llvmpipe*|*SwiftShader*) echo "note: a device that runs on the CPU, not a GPU" ;;
esac

# Known peaks (GB/s of memory, fp32 GFLOP/s without tensor cores), by name.
if [ -z "$peak_gbs" ] || [ -z "$peak_gflops" ]; then
  case "$desc" in
    *H200*) k_gbs=4800 k_gf=60000 ;;
    *H100*) k_gbs=3350 k_gf=60000 ;;
    *A100*) k_gbs=1555 k_gf=19500 ;;
    *"RTX 4090"*) k_gbs=1008 k_gf=82600 ;;
    *"RTX 3090"*) k_gbs=936 k_gf=35600 ;;
    *) k_gbs= k_gf= ;;
  esac
  peak_gbs=${peak_gbs:-$k_gbs} peak_gflops=${peak_gflops:-$k_gf}
fi
echo "peak: ${peak_gbs:-?} GB/s, ${peak_gflops:-?} GFLOP/s (fp32)"

status=0
if [ "$tests" = 1 ]; then
  say "Vulkan suites with the validation layer (TVK_VALIDATE=1)"
  if ! ls /usr/share/vulkan/explicit_layer.d/*validation* >/dev/null 2>&1; then
    echo "note: no validation layer installed (Debian: vulkan-validationlayers); the suites run without"
  fi
  t0=$(date +%s)
  (cd "$dir" && TVK_DEVICE=$device TVK_VALIDATE=1 TVK_REQUIRE_VK=1 \
    ctest -R 'vk|glsl|opt' --output-on-failure -j4) || status=1
  echo "suites: $([ $status = 0 ] && echo passed || echo FAILED) in $(($(date +%s) - t0)) s"
fi

if [ "$bench" = 1 ]; then
  say "samples/bench $device"
  out=$("$dir/samples/bench" "$device" 2>&1) || { echo "$out" | tail -20; exit 2; }
  echo "$out" | sed -n '1,3p'
  # the case rows: name ... ms GFLOP/s GB/s | reference ...
  echo "$out" | awk -v pg="$peak_gflops" -v pb="$peak_gbs" '
    /^case/ { printf "%-28s %10s %10s %7s %10s %7s\n", "case", "ms", "GFLOP/s", "%peak", "GB/s", "%peak"; next }
    / \| / && !/^tvk/ {
      split($0, half, "|"); n = split(half[1], f, " ")
      name = f[1]; for (i = 2; i <= n - 3; i++) name = name " " f[i]
      ms = f[n - 2]; gf = f[n - 1]; gb = f[n]
      pf = (pg != "" && gf + 0 > 0) ? sprintf("%6.1f%%", 100 * gf / pg) : "      -"
      pm = (pb != "" && gb + 0 > 0) ? sprintf("%6.1f%%", 100 * gb / pb) : "      -"
      printf "%-28s %10s %10s %7s %10s %7s\n", name, ms, gf, pf, gb, pm
    }'
  echo
  echo "$out" | sed -n '/^tvk profile/,$p' | head -24
fi
exit $status
