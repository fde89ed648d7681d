#!/usr/bin/env bash
# Checks that the tracked C sources and headers are formatted as .clang-format
# says (clang-format 14, Debian's `clang-format`; scripts/install-deps.sh
# installs it). Changes nothing. Exits 1 and names the files that are not
# formatted, 0 when all are.
#   scripts/check-format.sh            every tracked *.c and *.h of the source dirs
#   scripts/check-format.sh FILE...    only these
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || scripts/install-deps.sh

if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files -- \
    'include/*.[ch]' 'src/*.[ch]' 'backend_cpu/*.[ch]' 'backend_vk/*.[ch]' \
    'tests/*.[ch]' 'samples/*.[ch]' 'onnx/*.[ch]')
fi
[ ${#files[@]} -gt 0 ] || { echo "check-format: no files" >&2; exit 2; }

# One clang-format for all: with --dry-run -Werror it reports each place as
# "FILE:LINE:COL: error: code should be clang-formatted" and fails if any.
if out=$(clang-format --style=file --dry-run -Werror "${files[@]}" 2>&1); then
  echo "check-format: ${#files[@]} files formatted"
  exit 0
fi
mapfile -t bad < <(printf '%s\n' "$out" | sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
if [ ${#bad[@]} -eq 0 ]; then # clang-format failed for another reason: show it
  printf '%s\n' "$out" >&2
  exit 2
fi
printf 'not formatted: %s\n' "${bad[@]}" >&2
echo "check-format: ${#bad[@]} of ${#files[@]} files need clang-format -i" >&2
exit 1
