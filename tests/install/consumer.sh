#!/usr/bin/env bash
# install.consumer: cmake --install BUILD into a scratch prefix, then (1) examples/consumer, a CMake project
# of its own, configured with find_package(Pact) against that prefix alone, built and run; (2) the tutorial
# compiled and linked with `pkg-config --cflags --libs pact` and run; (3) the installed pact CLI and Python
# package run from the prefix. Usage: consumer.sh BUILD SOURCE
set -euo pipefail
build=$(realpath "$1")
source=$(realpath "$2")
scratch=$(mktemp -d /tmp/pact-install.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/lib/cmake/Pact/PactConfig.cmake"
test -f "$prefix/include/pact/core/tensor.hpp"
test -x "$prefix/bin/pact"

# (1) find_package(Pact) from a project that knows nothing of the source tree.
cmake -S "$source/examples/consumer" -B "$scratch/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER=g++ >/dev/null
if grep -qE -- "(-I|-isystem )$source( |/pact|$)" "$scratch/consumer/build.ninja"; then
  echo "install.consumer: the consumer build reads headers from the source tree, not the install" >&2
  exit 1
fi
cmake --build "$scratch/consumer" >/dev/null
"$scratch/consumer/tutorial" | tail -1 | grep -qx ok

# (2) pkg-config.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046
g++ -O1 "$source/examples/00_tutorial.cpp" -o "$scratch/tutorial-pc" $(pkg-config --cflags --libs pact)
"$scratch/tutorial-pc" | tail -1 | grep -qx ok

# (3) the CLI and the Python package, from the prefix.
"$prefix/bin/pact" plan "$source/examples/models/digits_mlp.json" --json | grep -q '"verdict": "accepted"'
if [ -d "$prefix/lib/python3/dist-packages/pact" ]; then
  (cd "$scratch" && PYTHONPATH="$prefix/lib/python3/dist-packages" /usr/bin/python3 -c \
    "import pact, sys; a = pact.plan(sys.argv[1]); assert a['verdict'] == 'accepted'; print('python ok')" \
    "$source/examples/models/digits_mlp.json") | grep -qx "python ok"
fi
echo "install.consumer: find_package(Pact), pkg-config, the CLI and the Python package work from $prefix"
