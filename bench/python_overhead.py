#!/usr/bin/python3
"""The per-call overhead of pact.Model.run over Pact's own C++ execution, on a tiny model, in one run.

  cmake --preset release && cmake --build --preset release
  OMP_NUM_THREADS=1 PYTHONPATH=build/release/python /usr/bin/python3 bench/python_overhead.py [--calls N]

The same capture is timed three ways, one thread: Model.run from Python on a numpy array (inputs imported
zero-copy, outputs handed back as numpy arrays), `pact run DIR --repeat N --json` (the C++ execution alone:
the warm median of the executor, no Python and no binding), and the module itself in PyTorch eager. The
overhead is the difference of the first two medians. Goal (issue 24): below 20 us.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import pact
from pact import torch_export


def main():
    calls = int(sys.argv[sys.argv.index("--calls") + 1]) if "--calls" in sys.argv else 5000
    torch.set_num_threads(1)
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).eval()
    x = torch.randn(8, 16)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    binary = os.environ.get("PACT_BIN", os.path.join(root, "build", "release", "bin", "pact"))
    with tempfile.TemporaryDirectory() as d:
        torch_export.export_module(module, [x], d)
        model = pact.load(d)
        xs = x.numpy()
        samples = []
        for _ in range(calls):
            t0 = time.perf_counter()
            model.run(xs)
            samples.append(time.perf_counter() - t0)
        python_us = statistics.median(samples) * 1e6
        out = subprocess.run([binary, "run", d, "--repeat", str(calls), "--threads", "1", "--json"], check=True,
                             capture_output=True, text=True).stdout
        cxx_us = json.loads(out)["warm_median_ms"] * 1e3
    torch_samples = []
    with torch.no_grad():
        for _ in range(calls):
            t0 = time.perf_counter()
            module(x)
            torch_samples.append(time.perf_counter() - t0)
    torch_us = statistics.median(torch_samples) * 1e6
    report = {"schema": "pact.bench.v1", "bench": "python_overhead", "calls": calls,
              "model_run_median_us": round(python_us, 2), "cxx_execute_median_us": round(cxx_us, 2),
              "overhead_us": round(python_us - cxx_us, 2), "torch_eager_median_us": round(torch_us, 2),
              "goal_overhead_us": 20, "verdict": "pass" if python_us - cxx_us < 20 else "fail"}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
