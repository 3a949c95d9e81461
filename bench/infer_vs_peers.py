#!/usr/bin/python3
"""Warm inference latency of Pact against PyTorch eager (and ONNX Runtime where installed), one run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/infer_vs_peers.py \
        [--models resnet18,mobilenet_v2,efficientnet_b0] [--threads 1,2] [--repeat 10] [--rounds 3] \
        [--shape 1,3,224,224] [--ort DIR] [--json OUT]

Each torchvision model (random weights) is captured with tools/torch_export.py and run by
`pact run DIR --repeat N --threads T --json`, which reports Pact's warm median beside its agreement with
PyTorch. PyTorch eager times the same module in this process (torch.no_grad, eval mode) and ONNX Runtime
an ONNX export of it (bench/ort_time.js; needs `npm install --ignore-scripts onnxruntime-node` in DIR,
default ./node_modules's parent). The contenders are interleaved, `rounds` times; each figure is the
median of the rounds' warm medians. Ratios are Pact's time over the peer's (goal: <= 1.0 against PyTorch,
<= 1.5 against ONNX Runtime).

On an AVX-512 machine, PACT_ISA=avx2 with OPENBLAS_CORETYPE=Haswell measures the AVX2 level against a
PyTorch held to AVX2 as well (this script then sets ATEN_CPU_CAPABILITY=avx2 and DNNL_MAX_CPU_ISA=AVX2
before importing torch): those verdicts are "proxy", never "pass". ONNX Runtime has no such switch, so
its ratios under a forced level are "invalid".
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from torch_peer import degraded_baseline, forced_level, hold_torch_to, verdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACT = os.path.join(ROOT, "build", "release", "bin", "pact")


def torch_median_ms(model, shape, threads, repeat):
    import torch
    hold_torch_to(threads)
    x = torch.randn(*shape)
    with torch.no_grad():
        model(x)  # warm
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            model(x)
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def pact_run(capture, threads, repeat):
    out = subprocess.run([PACT, "run", capture, "--repeat", str(repeat), "--threads", str(threads), "--json"],
                         capture_output=True, text=True)
    if out.returncode not in (0, 3):
        sys.exit(f"pact run {capture} failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


def ort_median_ms(onnx_file, shape, threads, repeat, ort_dir):
    env = dict(os.environ, NODE_PATH=os.path.join(ort_dir, "node_modules"))
    out = subprocess.run(["node", os.path.join(ROOT, "bench", "ort_time.js"), onnx_file, ",".join(map(str, shape)),
                          str(repeat), str(threads)], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)["median_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v2,efficientnet_b0")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shape", default="1,3,224,224")
    ap.add_argument("--ort", default=ROOT, help="folder whose node_modules holds onnxruntime-node")
    ap.add_argument("--json", help="write a pact.bench.v1 report here")
    a = ap.parse_args()
    if not os.path.exists(PACT):
        sys.exit(f"{PACT} missing: cmake --preset release && cmake --build --preset release")
    shape = [int(s) for s in a.shape.split(",")]
    threads = [int(t) for t in a.threads.split(",")]
    forced, proxy = forced_level()  # before torch is imported: it may hold PyTorch's kernels to AVX2
    sys.path.insert(0, os.path.join(ROOT, "bench", "models"))
    import torch
    import torchvision_zoo

    have_ort = os.path.isdir(os.path.join(a.ort, "node_modules", "onnxruntime-node"))
    cases, ratios = [], []
    hold_torch_to(max(threads))  # loads torch's OpenBLAS, whose kernel degraded_baseline reads
    degraded, degraded_note = degraded_baseline()
    if degraded:
        print(degraded_note)
    print(f"{'model':<18} {'thr':>3} {'pact ms':>9} {'torch ms':>9} {'ort ms':>8} {'/torch':>7} {'/ort':>6}  "
          f"{'agreement':>9}  verdicts")
    with tempfile.TemporaryDirectory() as tmp:
        for arch in a.models.split(","):
            capture = os.path.join(tmp, arch)
            subprocess.run([sys.executable, os.path.join(ROOT, "tools", "torch_export.py"), f"torchvision_zoo:{arch}",
                            "--random-weights", "--input-shape", a.shape, "-o", capture], check=True,
                           capture_output=True, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bench", "models")))
            model = getattr(torchvision_zoo, arch)().eval()
            onnx_file = None
            if have_ort:
                onnx_file = os.path.join(tmp, arch + ".onnx")
                try:
                    torch.onnx.export(model, torch.randn(*shape), onnx_file, opset_version=13, input_names=["x"])
                except Exception as e:  # an export failure leaves ONNX Runtime out for this model only
                    print(f"{arch}: torch.onnx.export failed ({e}); no ONNX Runtime figure", file=sys.stderr)
                    onnx_file = None
            for t in threads:
                p, q, o, agreement, cpu, level = [], [], [], None, "", ""
                for _ in range(a.rounds):  # interleaved
                    r = pact_run(capture, t, a.repeat)
                    p.append(r["warm_median_ms"])
                    agreement = max(x["relative_error"] for x in r["outputs"])
                    cpu, level = r["cpu"], r["isa"]
                    q.append(torch_median_ms(model, shape, t, a.repeat))
                    if onnx_file:
                        m = ort_median_ms(onnx_file, shape, t, a.repeat, a.ort)
                        if m is not None:
                            o.append(m)
                pm, tm = statistics.median(p), statistics.median(q)
                om = statistics.median(o) if o else None
                names = {c: f"{c}_{arch}_t{t}" for c in ("pact", "torch", "ort")}
                cases.append({"name": names["pact"], "contender": f"pact ({level})", "metric": "warm_median_ms",
                              "unit": "ms", "value": pm, "repetitions": a.rounds})
                cases.append({"name": names["torch"], "contender": "torch eager " + torch.__version__,
                              "metric": "warm_median_ms", "unit": "ms", "value": tm, "repetitions": a.rounds})
                rt = pm / tm
                vt = verdict(rt <= 1.0, forced, proxy, degraded)
                ratios.append({"name": f"{arch}_t{t}_pact_over_torch", "numerator": names["pact"],
                               "denominator": names["torch"], "value": rt, "goal_max": 1.0,
                               "baseline_forced": forced, "proxy": proxy, "baseline_degraded": degraded,
                               "verdict": vt})
                ro, vo = None, ""
                if om is not None:
                    cases.append({"name": names["ort"], "contender": "onnxruntime-node", "metric": "warm_median_ms",
                                  "unit": "ms", "value": om, "repetitions": a.rounds})
                    ro = pm / om
                    vo = verdict(ro <= 1.5, forced, False)  # ONNX Runtime cannot be held to a level
                    ratios.append({"name": f"{arch}_t{t}_pact_over_ort", "numerator": names["pact"],
                                   "denominator": names["ort"], "value": ro, "goal_max": 1.5,
                                   "baseline_forced": forced, "proxy": False, "verdict": vo})
                print(f"{arch:<18} {t:>3} {pm:>9.2f} {tm:>9.2f} {om if om else float('nan'):>8.2f} {rt:>7.2f} "
                      f"{ro if ro else float('nan'):>6.2f}  {agreement:>9.1e}  {vt}{' / ' + vo if vo else ''}")
    print(f"cpu: {cpu}; Pact ISA level {level}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}"
          f"{'' if have_ort else '; ONNX Runtime not installed (npm install --ignore-scripts onnxruntime-node)'}")
    if a.json:
        report = {"schema": "pact.bench.v1", "benchmark": "infer_vs_peers", "command": " ".join(sys.argv),
                  "environment": {"threads": max(threads), "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
                                  "compiler": "",
                                  "build_type": "Release", "cpu": cpu, "isa": level},
                  "cases": cases, "ratios": ratios}
        with open(a.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
