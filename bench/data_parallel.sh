#!/usr/bin/env bash
# Data-parallel scaling on this machine (issue 25): the char transformer at --batch-size B per rank, one
# rank of one thread against N ranks of one thread each (mpirun), samples per second from each run's
# report (rows per update x updates / seconds), and how much of the gradient reduction backward hid.
# Usage: bench/data_parallel.sh [PACT] [RANKS] [BATCH] [STEPS] [BUCKET_MB]
set -euo pipefail
pact=${1:-build/release/bin/pact} ranks=${2:-2} batch=${3:-32} steps=${4:-200} bucket=${5:-25}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for round in 1 2 3; do
  "$pact" train --model char-transformer --steps "$steps" --batch-size "$batch" --threads 1 \
    --run-dir "$out/one-$round" > /dev/null
  mpirun -np "$ranks" --oversubscribe "$pact" train --model char-transformer --data-parallel --threads 1 \
    --steps "$steps" --batch-size "$batch" --bucket-mb "$bucket" --run-dir "$out/dp-$round" > /dev/null
done
/usr/bin/python3 - "$out" "$ranks" "$batch" <<'PY'
import json, sys
out, ranks, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def rate(run, rows):
    r = json.load(open(f"{out}/{run}/report.json"))
    return rows * r["updates"] / r["seconds_total"], r
for k in (1, 2, 3):
    one, _ = rate(f"one-{k}", batch)
    many, r = rate(f"dp-{k}", batch * ranks)
    p = r["data_parallel"]
    print(f"round {k}: 1 rank {one:.0f} samples/s, {ranks} ranks {many:.0f} samples/s: {many / one:.2f}x; "
          f"{p['buckets']} bucket(s), {p['buckets_started_in_backward_mean']:.1f} started in backward, "
          f"exposed wait {1e3 * p['exposed_reduction_seconds_mean']:.2f} ms/step against a blocking reduction of "
          f"{1e3 * p['blocking_reduction_seconds']:.2f} ms (hidden {100 * p['hidden_fraction']:.0f}%), "
          f"backward {1e3 * p['backward_seconds_mean']:.2f} ms")
PY
