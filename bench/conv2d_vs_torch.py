#!/usr/bin/python3
"""conv2d of the ResNet-18 stem (1x3x224x224, 64 filters 7x7, stride 2, padding 3): Pact's native
provider against PyTorch's CPU conv2d, interleaved in one run, best of N, same thread count.

Needs Debian's python3-torch (run with /usr/bin/python3) and the bench build:
  cmake --preset bench && cmake --build --preset bench
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/conv2d_vs_torch.py --threads 1
Prints a pact.bench.v1 report; the goal is Pact within 1.5x of PyTorch's time.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from torch_peer import hold_torch_to


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--binary", default="build/bench/bench/pact_bench_kernels")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("python3-torch is not installed: run with /usr/bin/python3 after apt-get install python3-torch", file=sys.stderr)
        return 2
    hold_torch_to(args.threads)
    x = torch.randn(1, 3, 224, 224)
    w = torch.randn(64, 3, 7, 7)

    def torch_once():
        with torch.no_grad():
            torch.nn.functional.conv2d(x, w, stride=2, padding=3)

    def torch_best(seconds=0.3):
        torch_once()
        best = float("inf")
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            torch_once()
            best = min(best, time.perf_counter() - t0)
        return best

    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    pact_best = float("inf")
    torch_time = float("inf")
    for _ in range(args.repetitions):  # interleaved
        torch_time = min(torch_time, torch_best())
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            subprocess.run([args.binary, "--benchmark_filter=conv2d_stem/native", "--benchmark_min_time=0.3",
                            f"--pact_json={out.name}"], check=True, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            report = json.load(open(out.name))
        pact_best = min(pact_best, report["cases"][0]["value"] * 1e-9)
    ratio = pact_best / torch_time
    forced = os.environ.get("OPENBLAS_CORETYPE")
    result = {
        "schema": "pact.bench.v1",
        "benchmark": "conv2d_resnet18_stem_vs_torch",
        "command": " ".join(["/usr/bin/python3"] + sys.argv),
        "environment": {"threads": args.threads, "openblas_coretype": forced, "compiler": "g++ (pact) / torch " + torch.__version__,
                        "build_type": "release"},
        "cases": [
            {"name": "pact_native", "contender": "pact native conv2d (im2col + SGEMM)", "metric": "seconds_per_call",
             "unit": "s", "value": pact_best, "repetitions": args.repetitions},
            {"name": "torch", "contender": "torch.nn.functional.conv2d", "metric": "seconds_per_call", "unit": "s",
             "value": torch_time, "repetitions": args.repetitions},
        ],
        "ratios": [{"name": "pact_over_torch", "numerator": "pact_native", "denominator": "torch", "value": ratio,
                    "goal_max": 1.5, "baseline_forced": forced is not None,
                    "verdict": "invalid" if forced else ("pass" if ratio <= 1.5 else "fail")}],
    }
    print(json.dumps(result, indent=2))
    print(f"pact {pact_best * 1e3:.3f} ms, torch {torch_time * 1e3:.3f} ms, ratio {ratio:.3f} (goal <= 1.5)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
