#!/usr/bin/env bash
# The device checks of the CUDA path (issue 26 item 6), run on a machine with an NVIDIA GPU from the bundle
# scripts/gpu-bundle.sh made on a build machine: nothing is built here. Under PACT_REQUIRE_GPU=1 a gpu test
# that would skip for want of a device fails (cuDNN's absence alone is a skip with its reason: not every CUDA
# installation has it). Writes its report into REPORT (at most 8 files, one level: the device tool returns no
# more): environment.txt, cuda_gpu_tests.log, seal_gpu_tests.log, memcheck.log, benchmarks.jsonl (GEMM,
# attention, training step, convolution and linear layers), torch_peers.json, train_cli.log (`pact train
# --profile cuda-checked` on the digits MLP, the digits CNN and the char transformer), summary.txt. Bounded to about 4 minutes by per-step timeouts.
#
# usage: gpu-check.sh BUNDLE REPORT
set -uo pipefail
bundle=$(cd "${1:?usage: gpu-check.sh BUNDLE REPORT}" && pwd)
report=${2:?usage: gpu-check.sh BUNDLE REPORT}
mkdir -p "$report"
export PACT_REQUIRE_GPU=1 PACT_SOURCE_DIR="$bundle/src"
# cuBLAS and cuDNN (the cublas and cudnn providers, loaded at run time) come from the machine's CUDA
# installation, or else cuDNN from PyTorch's wheel (nvidia/cudnn/lib), where pip installs carry it.
cudnn_wheel=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib${cudnn_wheel:+:$cudnn_wheel}:${LD_LIBRARY_PATH:-}"
{
  echo "bundle commit: $(cat "$bundle/COMMIT")"
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -1
  uname -r
  ldd --version 2>&1 | head -1
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
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
timeout 60 "$bundle/pact_bench_gpu_gemm" 1024 2048 4096 > "$report/benchmarks.jsonl" 2>> "$report/summary.txt"
echo "gemm benchmark: exit $?" >> "$report/summary.txt"
timeout 60 "$bundle/pact_bench_gpu_attention" >> "$report/benchmarks.jsonl" 2>> "$report/summary.txt"
echo "attention benchmark: exit $?" >> "$report/summary.txt"
timeout 60 "$bundle/pact_bench_gpu_train_step" >> "$report/benchmarks.jsonl" 2>> "$report/summary.txt"
echo "train step benchmark: exit $?" >> "$report/summary.txt"
timeout 60 "$bundle/pact_bench_gpu_layers" >> "$report/benchmarks.jsonl" 2>> "$report/summary.txt"
echo "layers benchmark: exit $?" >> "$report/summary.txt"
# The CLI trains on the device (issue 26 item 4): the digits MLP to its accuracy goal, the char transformer
# on the bundled text. Run directories go to a scratch folder; the log keeps what they print.
scratch=$(mktemp -d)
pact_cli() {  # the pact binary has no RUNPATH of its own: the bundle's libraries for it alone
  LD_LIBRARY_PATH="$bundle/lib:$LD_LIBRARY_PATH" timeout 90 "$bundle/pact" "$@"
}
# What Pact found here: the device, its kernels, and whether cuBLAS, cuBLASLt and cuDNN loaded.
pact_cli env 2>&1 | grep -E "^cuda" >> "$report/environment.txt"
{
  pact_cli train --profile cuda-checked --run-dir "$scratch/digits"
  echo "digits: exit $?"
  pact_cli train --model cnn --profile cuda-checked --run-dir "$scratch/cnn"
  echo "digits cnn: exit $?"
  pact_cli train --model char-transformer --profile cuda-checked --steps 300 --data "$bundle/src/data/train.txt" \
    --run-dir "$scratch/char"
  echo "char transformer: exit $?"
} > "$report/train_cli.log" 2>&1
grep -E "^(digits|digits cnn|char transformer): exit" "$report/train_cli.log" >> "$report/summary.txt"
grep -q "^digits: exit 0" "$report/train_cli.log" && grep -q "^digits cnn: exit 0" "$report/train_cli.log" &&
  grep -q "^char transformer: exit 0" "$report/train_cli.log" || status=1
rm -rf "$scratch"
# PyTorch on the same GPU, the peers: f32 GEMM (TF32 off, PyTorch's default for matmul), f32
# scaled_dot_product_attention on the attention benchmark's shapes, and an eager training step of the char
# transformer at the train step benchmark's size (bench/train_step_vs_torch.py's model, on the GPU).
timeout 90 python3 - > "$report/torch_peers.json" 2>> "$report/summary.txt" <<'PY'
import json, torch
import torch.nn.functional as F
torch.backends.cuda.matmul.allow_tf32 = False
def median_ms(f, reps=10):
    for _ in range(3): f()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); f(); e.record(); e.synchronize(); times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]
gemm = {}
for n in (1024, 2048, 4096):
    a = torch.randn(n, n, device="cuda"); b = torch.randn(n, n, device="cuda")
    ms = median_ms(lambda: a @ b)
    gemm[n] = {"torch_ms": ms, "torch_tflops": 2 * n**3 / ms / 1e9}
q, k, v = (torch.randn(4, 16, 2048, 64, device="cuda") for _ in range(3))
attention = {}
for causal in (False, True):
    ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    attention["b4 h16 s2048 d64 " + ("causal" if causal else "full")] = {"torch_ms": ms}
class CharTransformer(torch.nn.Module):
    def __init__(self, vocab, d, heads, ffn, t):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.zeros(t, d))
        self.block = torch.nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, activation="gelu",
                                                      batch_first=True, norm_first=True)
        self.lnf = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", torch.triu(torch.full((t, t), float("-inf")), diagonal=1))
    def forward(self, x):
        h = self.tok(x) + self.pos
        return self.head(self.lnf(self.block(h, src_mask=self.mask)))
model = CharTransformer(96, 128, 4, 512, 64).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randint(0, 96, (16, 64), device="cuda"); y = torch.randint(0, 96, (16 * 64,), device="cuda")
def train_step():
    opt.zero_grad()
    loss = F.cross_entropy(model(x).reshape(-1, 96), y)
    loss.backward()
    opt.step()
    return loss.item()  # read back, as Pact's step does
step = {"char transformer step d128-h4-f512-s64-b16": {"torch_ms": median_ms(train_step, 30)}}
# conv2d on pact_bench_gpu_layers' shapes, forward and backward (the input's and the weight's gradients), cuDNN
# with TF32 off and its default heuristics (benchmark mode off), as Pact's cudnn provider runs it.
torch.backends.cudnn.allow_tf32 = False
conv = {}
for name, xs, ws, groups, pad in (("resnet 3x3 n32 c64 56x56", (32, 64, 56, 56), (64, 64, 3, 3), 1, 1),
                                  ("depthwise 3x3 n32 c128 56x56", (32, 128, 56, 56), (128, 1, 3, 3), 128, 1),
                                  ("pointwise 1x1 n32 c128-256 28x28", (32, 128, 28, 28), (256, 128, 1, 1), 1, 0)):
    cx = torch.randn(*xs, device="cuda", requires_grad=True); cw = torch.randn(*ws, device="cuda", requires_grad=True)
    fwd = median_ms(lambda: F.conv2d(cx, cw, padding=pad, groups=groups))
    cy = F.conv2d(cx, cw, padding=pad, groups=groups); cg = torch.randn_like(cy)
    bwd = median_ms(lambda: torch.autograd.grad(cy, (cx, cw), cg, retain_graph=True))
    conv[name] = {"torch_forward_ms": fwd, "torch_backward_ms": bwd}
# linear with a bias on pact_bench_gpu_layers' shapes (cuBLASLt's bias epilogue where PyTorch takes it),
# forward and backward (the input's, the weight's and the bias's gradients), TF32 off.
linear = {}
for name, rows, fin, fout in (("linear 8192x1024 to 4096 bias", 8192, 1024, 4096),
                              ("linear 8192x4096 to 1024 bias", 8192, 4096, 1024)):
    lx = torch.randn(rows, fin, device="cuda", requires_grad=True)
    lw = torch.randn(fout, fin, device="cuda", requires_grad=True)
    lb = torch.randn(fout, device="cuda", requires_grad=True)
    fwd = median_ms(lambda: F.linear(lx, lw, lb))
    ly = F.linear(lx, lw, lb); lg = torch.randn_like(ly)
    bwd = median_ms(lambda: torch.autograd.grad(ly, (lx, lw, lb), lg, retain_graph=True))
    linear[name] = {"torch_forward_ms": fwd, "torch_backward_ms": bwd}
print(json.dumps({"torch": torch.__version__, "gemm": gemm, "attention": attention, "train_step": step,
                  "conv": conv, "linear": linear}))
PY
# Out-of-bounds accesses in the kernels (compute-sanitizer works on Firecracker machines, not under gVisor).
if command -v compute-sanitizer > /dev/null; then
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 "$bundle/pact_cuda_gpu_tests" \
    > "$report/memcheck.log" 2>&1
  rc=$?
  echo "memcheck: exit $rc" >> "$report/summary.txt"
  [ $rc -eq 0 ] || status=1
fi
grep -h -E "^\[  (PASSED|FAILED|SKIPPED) +\]|tests? ran" "$report"/cuda_gpu_tests.log "$report"/seal_gpu_tests.log \
  >> "$report/summary.txt" 2>/dev/null
cat "$report/summary.txt"
exit $status
