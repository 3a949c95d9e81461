#!/usr/bin/env bash
# Formats every tracked C++ file with the checked-in .clang-format (clang-format 14, Debian's clang).
# `scripts/format.sh --check` changes nothing and fails, naming each file, when one is not formatted;
# CI runs it (the CUDA provider's kernels.cu too). CUDA sources under examples/seal and tests/fixtures are sealed-artifact inputs whose bytes
# tests digest, so they are left as written.
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$clang_format" ]; then
  echo "format: clang-format not found (apt-get install clang-format)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files -- '*.cpp' '*.hpp' '*.inc' '*.h' '*.cu' ':!:examples/seal/**' ':!:tests/fixtures/**')
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    if ! "$clang_format" --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
  done
  if [ "${#bad[@]}" -ne 0 ]; then
    printf 'format: not formatted (run scripts/format.sh): %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files formatted"
else
  "$clang_format" -i "${files[@]}"
fi
