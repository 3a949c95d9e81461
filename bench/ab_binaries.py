#!/usr/bin/python3
"""Interleaved A/B of one benchmark in two builds of a Pact bench binary (the machine is shared and noisy:
only figures from one interleaved run compare).

    /usr/bin/python3 bench/ab_binaries.py OLD_BINARY NEW_BINARY FILTER [--rounds 11] [--min-time 0.3]

Runs OLD and NEW alternately (the order flips every round), `--benchmark_filter=FILTER`, one OpenMP thread,
with PACT_ISA passed on where it is set (the AVX2 proxy: PACT_ISA=avx2 bench/ab_binaries.py ...), and prints
each side's median and minimum of the per-call times and new/old for both. Build the old side
from a clean clone: git clone . /tmp/old && git -C /tmp/old checkout REV && (cd /tmp/old && cmake --preset
bench && cmake --build build/bench --target pact_bench_train_step).
"""
import argparse, json, os, statistics, subprocess


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("filter")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--min-time", default="0.3")
    a = ap.parse_args()
    times = {"old": [], "new": []}
    for r in range(a.rounds):
        order = [("old", a.old), ("new", a.new)]
        for tag, binary in order if r % 2 == 0 else reversed(order):
            out = subprocess.run([binary, "--benchmark_min_time=" + a.min_time, "--benchmark_filter=" + a.filter],
                                 capture_output=True, text=True, check=True,
                                 env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", **({"PACT_ISA": os.environ["PACT_ISA"]} if "PACT_ISA" in os.environ else {})}).stdout
            cases = json.loads(out[out.index("{"):])["cases"]
            if len(cases) != 1:
                raise SystemExit(f"filter {a.filter!r} matched {len(cases)} benchmarks; it must match one")
            times[tag].append(cases[0]["value"] / 1e3)
    o, n = statistics.median(times["old"]), statistics.median(times["new"])
    print(f"{a.filter}: median old {o:.1f} us, new {n:.1f} us, new/old {n / o:.3f}; "
          f"min old {min(times['old']):.1f} us, new {min(times['new']):.1f} us, "
          f"new/old {min(times['new']) / min(times['old']):.3f} ({a.rounds} rounds)")


if __name__ == "__main__":
    main()
