#!/usr/bin/env bash
# Consumes tvk as an application would, from outside the tree, and runs the
# result (tests/consumer/app.c: it calls Vulkan itself too):
#   1. find_package(tvk) from an installed prefix   (static, shared)
#   2. pkg-config tvk                               (static, shared)
#   3. add_subdirectory(tvk)                        (static, shared)
#   4. FetchContent from this git repository, at HEAD (static; only when the
#      tree is a git checkout: what is committed is what is fetched)
# The prefix is the build tree's install (default build/, built already);
# everything else lives in a temporary directory.
#   scripts/consumer-test.sh [BUILD_DIR]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TVK_CACHE_DIR=$work/cache
jobs=$(nproc)

run() { # NAME EXECUTABLE
  echo "-- consumer: $1"
  "$2"
}

cmake --install "$build" --prefix "$work/prefix" >/dev/null
# What the libraries export: tvk.h's functions, nothing else.
lib=$(ls -d "$work"/prefix/lib*/ | head -n1)
leaks=$( (nm -D --defined-only "$lib/libtvk.so" | awk '{print $3}'
          nm -g --defined-only "$lib/libtvk.a" | awk 'NF == 3 {print $3}') | grep -v '^tvk_' || true)
if [ -n "$leaks" ]; then
  echo "consumer: the libraries export more than tvk_*:" >&2
  echo "$leaks" | head -n 20 >&2
  exit 1
fi
echo "-- consumer: libtvk.so and libtvk.a export $(nm -D --defined-only "$lib/libtvk.so" | wc -l) tvk_* functions, nothing else"
# A static-only install, as a packager shipping libtvk.a alone would make it:
# there `pkg-config --static --libs tvk` is the whole link line.
cp -a "$work/prefix" "$work/prefix-static"
rm -f "$work/prefix-static"/lib*/libtvk.so*

for shared in OFF ON; do
  kind=$([ $shared = ON ] && echo shared || echo static)
  cmake -S "$src/tests/consumer" -B "$work/pkg-$kind" -DCMAKE_PREFIX_PATH="$work/prefix" \
    -DTVK_CONSUME=package -DTVK_PREFER_SHARED=$shared >/dev/null
  cmake --build "$work/pkg-$kind" -j"$jobs" >/dev/null
  run "find_package, $kind" "$work/pkg-$kind/app"
done

pc() { PKG_CONFIG_PATH="$1/lib/pkgconfig:$1/lib64/pkgconfig" pkg-config "${@:2}"; }
# shellcheck disable=SC2046 # the flags are words
cc -o "$work/pc-shared" "$src/tests/consumer/app.c" $(pc "$work/prefix" --cflags --libs tvk) \
  -Wl,-rpath,"$work/prefix/lib" -lvulkan
run "pkg-config, shared" "$work/pc-shared"
# shellcheck disable=SC2046
cc -o "$work/pc-static" "$src/tests/consumer/app.c" \
  $(pc "$work/prefix-static" --cflags --static --libs tvk) -lvulkan
run "pkg-config, static" "$work/pc-static"
if ldd "$work/pc-static" | grep -q libtvk; then
  echo "consumer: the static build links libtvk.so" >&2
  exit 1
fi

for shared in OFF ON; do
  kind=$([ $shared = ON ] && echo shared || echo static)
  cmake -S "$src/tests/consumer" -B "$work/sub-$kind" -DTVK_CONSUME=subdirectory \
    -DTVK_SOURCE="$src" -DTVK_PREFER_SHARED=$shared >/dev/null
  cmake --build "$work/sub-$kind" -j"$jobs" --target app >/dev/null
  run "add_subdirectory, $kind" "$work/sub-$kind/app"
done
if git -C "$src" rev-parse --verify -q HEAD >/dev/null; then
  cmake -S "$src/tests/consumer" -B "$work/fetch" -DTVK_CONSUME=fetchcontent \
    -DTVK_SOURCE="$src" -DTVK_GIT_TAG="$(git -C "$src" rev-parse HEAD)" >/dev/null
  cmake --build "$work/fetch" -j"$jobs" --target app >/dev/null
  run "FetchContent, static" "$work/fetch/app"
  echo "consumer: all seven builds ran"
else
  echo "consumer: all six builds ran ($src is no git checkout: no FetchContent build)"
fi
