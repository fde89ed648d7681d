#!/usr/bin/env bash
# Fails when an #include goes against the direction of the engine
# (../shared/DESIGN.md, "Layers point one way"):
#
#   1. src/ folders are ranked ir < codegen < schedule < runtime < frontend; a
#      file includes only headers of its own rank or below.
#   2. The backends include only ir/, codegen/ (language tables) and runtime/
#      (the device interface, the cache), never each other; src/ includes no
#      backend header and no Vulkan, volk or shaderc header.
#   3. A folder with a LAYERS file (lines "rank module ...", lowest first, as
#      backend_vk/LAYERS) ranks its modules the same way: a file includes only
#      modules of a lower rank than its own.
#   4. The ONNX importer (onnx/) is a client of the public API: it includes
#      tvk.h, tvk_onnx.h, its generated parser (onnx.pb-c.h) and its own
#      files, nothing of src/ or the backends.
#   5. Modules include each other without a cycle. A module is a file's path
#      without its extension and without an "_internal" suffix (uop.h + uop.c,
#      symbolic.h + symbolic_internal.h); an include of another module's file is
#      an edge, and any cycle of edges, in a folder or across folders, fails.
#
# Usage: scripts/check-layers.sh [root]   (default: the repository root)
#        scripts/check-layers.sh --self-test  (shows that each rule catches a
#        violation planted in a copy of the tree)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" = --self-test ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cd "$here/.."
  "$here/check-layers.sh" >/dev/null || { echo "self-test: the tree itself fails"; exit 1; }
  plant() { # file, line to add, what it breaks
    rm -rf "$tmp/t" && mkdir -p "$tmp/t" && cp -r src include backend_* onnx "$tmp/t/"
    echo "$2" >>"$tmp/t/$1"
    if "$here/check-layers.sh" "$tmp/t" >/dev/null; then
      echo "self-test: not caught: $3"
      exit 1
    fi
  }
  plant src/schedule/plan.c '#include "frontend/frontend.h"' "schedule including frontend"
  plant src/ir/uop.c '#include "codegen/kernel.h"' "ir including codegen"
  plant backend_cpu/cpu_pool.c '#include "schedule/schedule.h"' "a backend including schedule"
  plant src/runtime/run.c '#include <volk.h>' "src including volk"
  plant src/ir/view.c '#include "uop.h"' "a cycle inside ir (view <-> uop)"
  plant backend_vk/vk_core.c '#include "vk_memory.h"' "vk_core including a higher rank"
  plant backend_vk/vk_pipeline.c '#include "vk_dispatch.h"' "a rank-order violation in backend_vk"
  plant onnx/onnx_run.c '#include "ir/uop.h"' "the ONNX importer including an internal header"
  echo "self-test: every planted violation was caught"
  exit 0
fi

cd "${1:-$here/..}"

files=$(ls src/*/*.[ch] backend_*/*.[ch] onnx/*.[ch] include/*.h 2>/dev/null)
# "dir/module rank" for every module a LAYERS file names.
layers=$(for f in src/*/LAYERS backend_*/LAYERS; do
  [ -f "$f" ] || continue
  awk -v dir="$(dirname "$f")" '!/^#/ && NF { for (i = 2; i <= NF; i++) print dir "/" $i, $1 }' "$f"
done)
report=$(mktemp)
trap 'rm -f "$report"' EXIT

# One line per include: "file<TAB>< or \"<TAB>included path".
grep -HE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' src/*/*.[ch] backend_*/*.[ch] \
  $(ls onnx/*.[ch] 2>/dev/null) |
  sed -E 's/^([^:]+):[^<"]*([<"])([^>"]+)[>"].*$/\1\t\2\t\3/' |
  awk -F'\t' -v files="$files" -v layers="$layers" -v report="$report" '
    BEGIN {
      n = split(files, f, "\n")
      for (i = 1; i <= n; i++) exists[f[i]] = 1
      n = split(layers, l, "\n")
      for (i = 1; i <= n; i++) { split(l[i], kv, " "); lrank[kv[1]] = kv[2] }
      rank["ir"] = 0; rank["codegen"] = 1; rank["schedule"] = 2; rank["runtime"] = 3
      rank["frontend"] = 4
    }
    function module(p) { sub(/\.[ch]$/, "", p); sub(/_internal$/, "", p); return p }
    function bad(msg) { print "layers: " msg > report; failed = 1 }
    {
      file = $1; quoted = $2 == "\""; inc = $3; checked++
      dir = file; sub(/\/[^\/]*$/, "", dir)
      to = index(inc, "/") ? substr(inc, 1, index(inc, "/") - 1) : ""
      if (dir == "onnx") {
        if (quoted && inc !~ /^(tvk\.h|tvk_onnx\.h|onnx\.pb-c\.h|onnx_[a-z_]+\.h)$/)
          bad(file " includes \"" inc "\": the ONNX importer sees tvk only through tvk.h")
      } else if (dir ~ /^src\//) {
        from = substr(dir, 5)
        if (to in rank && rank[to] > rank[from])
          bad(file " includes \"" inc "\": " from " may not include " to " (a higher layer)")
        if (inc ~ /^(vulkan\/|volk|shaderc|backend_|cpu_|vk_)/)
          bad(file " includes \"" inc "\": src/ sees devices only through runtime/device.h")
      } else if (quoted && to != "" && to != "ir" && to != "codegen" && to != "runtime") {
        bad(file " includes \"" inc "\": a backend includes only ir/, codegen/ and runtime/")
      }
      if (!quoted) next
      if ((dir "/" inc) in exists) target = dir "/" inc
      else if (("src/" inc) in exists) target = "src/" inc
      else next # system headers, tvk.h, generated files: outside the modules
      a = module(file); b = module(target)
      if (a in lrank && b in lrank && a != b && lrank[b] >= lrank[a])
        bad(file " includes \"" inc "\": rank " lrank[b] " is not below its own rank " lrank[a] \
            " (" dir "/LAYERS)")
      if (a != b) print a, b
    }
    END { print "checked " checked > report; exit failed }
  ' >"$report.edges" || true

fail=0
if grep -q '^layers:' "$report"; then
  grep '^layers:' "$report"
  fail=1
fi
if ! loop=$(tsort "$report.edges" 2>&1 >/dev/null); then
  echo "layers: modules include each other in a cycle:"
  printf '%s\n' "$loop" | sed -n 's/^tsort: //p' | grep -v 'contains a loop' | sed 's/^/  /'
  fail=1
fi
rm -f "$report.edges"
[ "$fail" -eq 0 ] && echo "layers: ok ($(sed -n 's/^checked //p' "$report") includes checked)"
exit "$fail"
