#!/usr/bin/env bash
# Data-parallel scaling on this machine (issue 25): the char transformer at --batch-size B per rank, one
# rank of one thread against N ranks of one thread each (mpirun), samples per second from each run's
# report (rows per update x updates / seconds), and how much of the gradient reduction backward hid. Each
# round also runs RANKS independent one-thread processes at once: what this machine gives N processes with
# no communication at all, the ceiling for the data-parallel ratio. ROUNDS=N in the environment: rounds.
# Usage: bench/data_parallel.sh [PACT] [RANKS] [BATCH] [STEPS] [BUCKET_MB]
set -euo pipefail
pact=${1:-build/release/bin/pact} ranks=${2:-2} batch=${3:-32} steps=${4:-200} bucket=${5:-25}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
rounds=${ROUNDS:-3}
one_run() { "$pact" train --model char-transformer --steps "$steps" --batch-size "$batch" --threads 1 --run-dir "$1" \
  > /dev/null; }
for round in $(seq "$rounds"); do
  one_run "$out/one-$round"
  mpirun -np "$ranks" --oversubscribe "$pact" train --model char-transformer --data-parallel --threads 1 \
    --steps "$steps" --batch-size "$batch" --bucket-mb "$bucket" --run-dir "$out/dp-$round" > /dev/null
  # The machine's own ceiling: RANKS independent one-thread processes at once, no communication at all.
  for r in $(seq "$ranks"); do one_run "$out/apart-$round-$r" & done
  wait
done
/usr/bin/python3 - "$out" "$ranks" "$batch" "$rounds" <<'PY'
import json, sys
out, ranks, batch, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def rate(run, rows):
    r = json.load(open(f"{out}/{run}/report.json"))
    return rows * r["updates"] / r["seconds_total"], r
for k in range(1, rounds + 1):
    one, _ = rate(f"one-{k}", batch)
    many, r = rate(f"dp-{k}", batch * ranks)
    apart = sum(rate(f"apart-{k}-{j}", batch)[0] for j in range(1, ranks + 1))
    p = r["data_parallel"]
    print(f"round {k}: 1 rank {one:.0f} samples/s, {ranks} ranks {many:.0f} samples/s: {many / one:.2f}x "
          f"({ranks} independent processes at once: {apart / one:.2f}x); "
          f"{p['buckets']} bucket(s), {p['buckets_started_in_backward_mean']:.1f} started in backward, "
          f"exposed wait {1e3 * p['exposed_reduction_seconds_mean']:.2f} ms/step on rank 0, "
          f"{1e3 * p['least_exposed_reduction_seconds_mean']:.2f} on the last rank out of backward, against a blocking reduction of "
          f"{1e3 * p['blocking_reduction_seconds']:.2f} ms (hidden {100 * p['hidden_fraction']:.0f}%), "
          f"backward {1e3 * p['backward_seconds_mean']:.2f} ms")
PY
