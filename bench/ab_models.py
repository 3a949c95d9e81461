#!/usr/bin/python3
"""Interleaved A/B of warm inference in two builds of `pact` (the machine is shared and noisy: only
figures from one interleaved run compare).

    /usr/bin/python3 bench/ab_models.py OLD_PACT NEW_PACT DIR [DIR ...] [--threads 1] [--rounds 9] [--repeat 10]

Each DIR is a capture of tools/torch_export.py. Runs `pact run DIR --repeat N --threads T --json` with the
old and the new binary alternately (the order flips every round) and prints each side's median of the warm
medians and new/old. Build the old side from a clean clone: git clone . /tmp/old && git -C /tmp/old
checkout REV && (cd /tmp/old && cmake --preset release && cmake --build build/release --target pact).
"""
import argparse, json, statistics, subprocess, sys


def warm_median(binary, capture, threads, repeat):
    out = subprocess.run([binary, "run", capture, "--repeat", str(repeat), "--threads", str(threads), "--json"],
                         capture_output=True, text=True)
    if out.returncode not in (0, 3):
        sys.exit(f"{binary} run {capture} failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)["warm_median_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("captures", nargs="+")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--repeat", type=int, default=10)
    a = ap.parse_args()
    for capture in a.captures:
        times = {"old": [], "new": []}
        for r in range(a.rounds):
            order = [("old", a.old), ("new", a.new)]
            for tag, binary in order if r % 2 == 0 else reversed(order):
                times[tag].append(warm_median(binary, capture, a.threads, a.repeat))
        old, new = statistics.median(times["old"]), statistics.median(times["new"])
        print(f"{capture:<32} {a.threads} thread(s): old {old:8.2f} ms  new {new:8.2f} ms  new/old {new / old:.3f}")


if __name__ == "__main__":
    main()
