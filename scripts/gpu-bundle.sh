#!/usr/bin/env bash
# Makes, on a build machine without a GPU, the bundle scripts/gpu-check.sh runs on a GPU machine (issue 26
# item 6): the gpu-labelled test binaries and the GPU benchmark of a release build, the shared libraries
# they load (everything but glibc and the CUDA driver, which the GPU machine has; cuBLAS is loaded there
# from its CUDA installation), found through RPATH $ORIGIN/lib, and the fixtures the tests read, as a folder
# and as OUT.tar.xz, the archive that travels. Nothing in it is built on the GPU machine. The archive must
# stay under 64 MiB (the device tool's transfer limit). There: tar xf gpu-bundle.tar.xz && gpu-bundle/gpu-check.sh
# gpu-bundle REPORT.
#
# usage: scripts/gpu-bundle.sh [OUT]   (default build/gpu-bundle; the release build under build/release)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PACT_BUILD_DIR:-$root/build/release}
out=${1:-$root/build/gpu-bundle}
binaries=(tests/gpu/pact_cuda_gpu_tests tests/seal/pact_seal_gpu_tests bench/gpu/pact_bench_gpu_gemm
          bench/gpu/pact_bench_gpu_attention bench/gpu/pact_bench_gpu_train_step bench/gpu/pact_bench_gpu_layers bin/pact)

cmake --build "$build" --target pact_cuda_gpu_tests pact_seal_gpu_tests pact_bench_gpu_gemm pact_bench_gpu_attention \
  pact_bench_gpu_train_step pact_bench_gpu_layers pact
grep -q '^PACT_WITH_CUDA:BOOL=ON' "$build/CMakeCache.txt" || {
  echo "gpu-bundle: $build was configured without PACT_WITH_CUDA (nvcc not found): no kernels to check" >&2
  exit 1
}
rm -rf "$out"
mkdir -p "$out/lib" "$out/src"
for b in "${binaries[@]}"; do
  install -m 755 "$build/$b" "$out/"
  strip --strip-unneeded "$out/$(basename "$b")"
  # Each library the binary loads, but the C library's own (the GPU machine's glibc is newer) and the driver.
  ldd "$build/$b" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux* | libcuda.so.*) ;;
      *) cp -Lu "$lib" "$out/lib/" ;;
    esac
  done
done
# What the tests read at run time (PACT_SOURCE_DIR points here on the GPU machine).
mkdir -p "$out/src/examples/seal" "$out/src/tests/fixtures"
cp -r "$root/examples/seal/vector_add" "$root/examples/seal/profiles" "$out/src/examples/seal/"
cp -r "$root/examples/models" "$out/src/examples/"
cp -r "$root/tests/fixtures/seal" "$out/src/tests/fixtures/"
mkdir -p "$out/src/tests/fixtures/torch"
cp -r "$root/tests/fixtures/torch/mlp" "$out/src/tests/fixtures/torch/"
mkdir -p "$out/src/data"
cp /usr/share/common-licenses/GPL-3 "$out/src/data/train.txt"  # the char transformer's text (pact train's default)
cp "$root/scripts/gpu-check.sh" "$out/"
{ git -C "$root" rev-parse HEAD; git -C "$root" diff --quiet HEAD || echo "(with uncommitted changes)"; } > "$out/COMMIT" 2>/dev/null || echo unknown > "$out/COMMIT"
# What travels is the compressed archive (OpenBLAS alone is 36 MiB unpacked, 4 compressed).
tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
size=$(du -sm "$out.tar.xz" | cut -f1)
echo "gpu-bundle: $out.tar.xz ($size MiB; $(du -sm "$out" | cut -f1) MiB unpacked)"
if [ "$size" -ge 64 ]; then
  echo "gpu-bundle: over the 64 MiB limit" >&2
  exit 1
fi
