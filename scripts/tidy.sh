#!/usr/bin/env bash
# clang-tidy over the library and the CLI with the checked-in .clang-tidy (every finding is an error).
# Needs a configured release tree (build/release/compile_commands.json). About 8 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
if [ -z "$tidy" ]; then
  echo "tidy: clang-tidy not found (apt-get install clang-tidy)" >&2
  exit 2
fi
if [ ! -f build/release/compile_commands.json ]; then
  echo "tidy: build/release/compile_commands.json missing (cmake --preset release)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files -- 'pact/*.cpp' 'tools/*.cpp' 'python/*.cpp')
jobs=$(nproc 2>/dev/null || echo 2)
start=$(date +%s)
# -Wno-error: the release tree's -Werror (PACT_WERROR) is g++'s lane; clang's own diagnostics (e.g. on
# libseccomp's compound-literal macros) are not clang-tidy findings.
if ! printf '%s\0' "${files[@]}" | xargs -0 -P "$jobs" -n 4 "$tidy" -p build/release --quiet --extra-arg=-Wno-error; then
  echo "tidy: findings above (checks: .clang-tidy)" >&2
  exit 1
fi
echo "tidy: ${#files[@]} files clean in $(($(date +%s) - start)) s"
