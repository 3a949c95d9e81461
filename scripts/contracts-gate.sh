#!/usr/bin/env bash
# The contracts gate with line coverage (SPEC §10; not part of CI): builds the gcov-instrumented tree,
# runs the contract falsification through the kernels, collects gcov JSON for the kernel objects and
# evaluates every QA gate (obligations, mutation score >= 80%, line coverage >= 95%).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset coverage >/dev/null
cmake --build --preset coverage --target pact
find build/coverage -name '*.gcda' -delete
./build/coverage/bin/pact contracts falsify >/dev/null
objdir=build/coverage/pact/kernels/CMakeFiles/pact_kernels.dir
(cd "$objdir" && gcov --json-format --stdout $(find . -name '*.gcda')) >build/coverage/kernels.gcov.json
exec ./build/coverage/bin/pact contracts gate --coverage build/coverage/kernels.gcov.json "$@"
