#!/usr/bin/env bash
# The device checks of the CUDA path (issue 26 item 6), run on a machine with an NVIDIA GPU from the bundle
# scripts/gpu-bundle.sh made on a build machine: nothing is built here. Under PACT_REQUIRE_GPU=1 a skipped
# gpu test fails. Writes its report into REPORT (at most 8 files, one level): environment.txt,
# cuda_gpu_tests.log, seal_gpu_tests.log, memcheck.log, gemm.jsonl, torch_gemm.json, summary.txt. Bounded to
# about 4 minutes by per-step timeouts.
#
# usage: gpu-check.sh BUNDLE REPORT
set -uo pipefail
bundle=$(cd "${1:?usage: gpu-check.sh BUNDLE REPORT}" && pwd)
report=${2:?usage: gpu-check.sh BUNDLE REPORT}
mkdir -p "$report"
export PACT_REQUIRE_GPU=1 PACT_SOURCE_DIR="$bundle/src"
# cuBLAS for the benchmark's peer comes from the machine's CUDA installation.
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
{
  echo "bundle commit: $(cat "$bundle/COMMIT")"
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -1
  uname -r
  ldd --version 2>&1 | head -1
} > "$report/environment.txt"

status=0
step() {  # step NAME TIMEOUT COMMAND...: runs, logs, records the exit status
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "$@" > "$report/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc" >> "$report/summary.txt"
  [ $rc -eq 0 ] || status=1
}
: > "$report/summary.txt"
step cuda_gpu_tests 120 "$bundle/pact_cuda_gpu_tests"
step seal_gpu_tests 60 "$bundle/pact_seal_gpu_tests"
timeout 60 "$bundle/pact_bench_gpu_gemm" 1024 2048 4096 > "$report/gemm.jsonl" 2>> "$report/summary.txt"
echo "gemm benchmark: exit $?" >> "$report/summary.txt"
# PyTorch's f32 GEMM at 4096 on the same GPU (TF32 off, PyTorch's default for matmul), a second peer.
timeout 60 python3 - > "$report/torch_gemm.json" 2>> "$report/summary.txt" <<'PY'
import json, torch
torch.backends.cuda.matmul.allow_tf32 = False
out = {}
for n in (1024, 2048, 4096):
    a = torch.randn(n, n, device="cuda"); b = torch.randn(n, n, device="cuda")
    for _ in range(3): a @ b
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); a @ b; e.record(); e.synchronize(); times.append(s.elapsed_time(e))
    times.sort()
    out[n] = {"torch_ms": times[len(times) // 2], "torch_tflops": 2 * n**3 / times[len(times) // 2] / 1e9}
print(json.dumps({"torch": torch.__version__, "gemm": out}))
PY
# Out-of-bounds accesses in the kernels (compute-sanitizer works on Firecracker machines, not under gVisor).
if command -v compute-sanitizer > /dev/null; then
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 "$bundle/pact_cuda_gpu_tests" \
    > "$report/memcheck.log" 2>&1
  echo "memcheck: exit $?" >> "$report/summary.txt"
fi
grep -h -E "^\[  (PASSED|FAILED|SKIPPED) +\]|tests? ran" "$report"/cuda_gpu_tests.log "$report"/seal_gpu_tests.log \
  >> "$report/summary.txt" 2>/dev/null
cat "$report/summary.txt"
exit $status
