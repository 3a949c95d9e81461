#!/usr/bin/env bash
# dist.train_cli: `mpirun -np 2 pact train --data-parallel` follows a one-process run at twice the batch
# (every step loss within 1e-5), only rank 0 prints and writes, and cpu-deterministic runs repeat bit for bit.
# Usage: train_cli.sh MPIRUN PACT SCRATCH
set -euo pipefail
mpirun=$1 pact=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
fail() { echo "dist.train_cli: $*" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1

"$mpirun" -np 2 --oversubscribe --bind-to none "$pact" train --data-parallel --epochs 2 --batch-size 16 --seed 4 \
  --run-dir "$scratch/dp" > "$scratch/dp.out"
"$pact" train --epochs 2 --batch-size 32 --seed 4 --threads 1 --run-dir "$scratch/one" > "$scratch/one.out"
[ "$(grep -c '^report: ' "$scratch/dp.out")" -eq 1 ] || fail "not exactly one rank wrote the report"
grep -q "data-parallel: 2 rank(s), 32 rows per update (16 per rank)" "$scratch/dp.out" || fail "no data-parallel line"
# Two unbound ranks on this host share its cores.
cores=$(env -u OMP_NUM_THREADS nproc)  # this process's affinity, which the ranks inherit
grep -q "$((cores / 2 > 1 ? cores / 2 : 1)) thread(s) per rank" "$scratch/dp.out" || fail "2 ranks on one host did not split its cores"
grep -q "plan audit (cpu-checked-mpi.*1 allreduce).*mpi.allreduce_mean" "$scratch/dp.out" || fail "the audit lacks the allreduce"
# A profile that does not admit the boundary is refused, naming the one that does.
if "$mpirun" -np 2 --oversubscribe "$pact" train --data-parallel --profile cpu-checked > "$scratch/refused.out" 2>&1; then
  fail "--data-parallel ran under cpu-checked"
fi
grep -q "use --profile cpu-checked-mpi" "$scratch/refused.out" || fail "the refusal does not name cpu-checked-mpi"
/usr/bin/python3 - "$scratch" <<'PY'
import json, sys
d = sys.argv[1]
dp, one = (json.load(open(f"{d}/{n}/report.json")) for n in ("dp", "one"))
a, b = dp["step_loss"], one["step_loss"]
assert len(a) == len(b) > 10, (len(a), len(b))
worst = max(abs(x - y) for x, y in zip(a, b))
assert worst < 1e-5, f"step losses differ by {worst}"
p = dp["data_parallel"]
assert p["ranks"] == 2 and p["boundary"] == "mpi.allreduce" and p["buckets"] >= 1, p
# The least wait over the ranks is at most rank 0's own (each rank's wait is summed into its own slot).
assert 0 < p["least_exposed_reduction_seconds_mean"] <= p["exposed_reduction_seconds_mean"], p
assert abs(dp["final_accuracy"] - one["final_accuracy"]) < 0.01, (dp["final_accuracy"], one["final_accuracy"])
PY

# The CNN: its batch norm takes its statistics over both ranks' rows by default, so 2 ranks of 16 follow one
# process of 32 (with --local-batch-norm each rank normalises its own 16 and the losses part ways).
for mode in sync local; do
  extra=(); [ "$mode" = local ] && extra=(--local-batch-norm)
  "$mpirun" -np 2 --oversubscribe "$pact" train --model cnn --data-parallel "${extra[@]}" --epochs 1 --batch-size 16 \
    --seed 6 --run-dir "$scratch/cnn-$mode" > /dev/null
done
"$pact" train --model cnn --epochs 1 --batch-size 32 --seed 6 --threads 1 --run-dir "$scratch/cnn-one" > /dev/null
/usr/bin/python3 - "$scratch" <<'PY'
import json, sys
d = sys.argv[1]
sync, local, one = (json.load(open(f"{d}/cnn-{n}/report.json")) for n in ("sync", "local", "one"))
assert sync["data_parallel"]["batch_norm_statistics"] == "all ranks", sync["data_parallel"]
assert local["data_parallel"]["batch_norm_statistics"] == "each rank's own", local["data_parallel"]
a, b, c = sync["step_loss"], one["step_loss"], local["step_loss"]
assert len(a) == len(b) == len(c) > 10, (len(a), len(b), len(c))
worst = max(abs(x - y) for x, y in zip(a, b))
assert worst < 1e-4, f"synchronised batch norm: step losses differ from one process by {worst}"
apart = max(abs(x - y) for x, y in zip(c, b))
assert apart > 1e-3, f"per-rank batch norm follows one process within {apart}: the comparison cannot fail"
PY

# The char transformer: every rank draws the same global batch of windows and trains on its rows, so two
# ranks of 4 windows follow one process of 8.
"$mpirun" -np 2 --oversubscribe "$pact" train --model char-transformer --data-parallel --steps 4 --batch-size 4 \
  --seed 2 --run-dir "$scratch/ct-dp" > /dev/null
"$pact" train --model char-transformer --steps 4 --batch-size 8 --seed 2 --threads 1 --run-dir "$scratch/ct-one" \
  > /dev/null
/usr/bin/python3 - "$scratch" <<'PY'
import json, sys
d = sys.argv[1]
dp, one = (json.load(open(f"{d}/{n}/report.json")) for n in ("ct-dp", "ct-one"))
a, b = dp["step_loss"], one["step_loss"]
assert len(a) == len(b) == 4, (a, b)
worst = max(abs(x - y) for x, y in zip(a, b))
assert worst < 1e-4, f"char-transformer step losses differ by {worst}: {a} {b}"
# The evaluation loss is over every rank's windows, as one process's over the same ones.
e, f = dp["evaluation_loss"], one["evaluation_loss"]
assert abs(e - f) < 1e-4, f"evaluation losses differ: {e} (2 ranks) {f} (one process)"
PY

# cpu-deterministic-mpi: the rank-ordered reduction repeats bit for bit.
for n in 1 2; do
  "$mpirun" -np 2 --oversubscribe "$pact" train --data-parallel --profile cpu-deterministic-mpi --epochs 1 \
    --batch-size 16 --save "$scratch/det$n.safetensors" --run-dir "$scratch/det$n" > /dev/null
done
cmp -s "$scratch/det1.safetensors" "$scratch/det2.safetensors" || fail "cpu-deterministic runs differ"
grep -q '"reduction_order": "fixed' "$scratch/det1/report.json" || fail "cpu-deterministic did not use the fixed order"
# Every rank resumes from rank 0's checkpoint: stopped after epoch 1 and continued, the run ends bit for bit
# as an uninterrupted one.
det=(--data-parallel --profile cpu-deterministic-mpi --epochs 2 --batch-size 16)
"$mpirun" -np 2 --oversubscribe "$pact" train "${det[@]}" --save "$scratch/whole.safetensors" \
  --run-dir "$scratch/whole" > /dev/null
"$mpirun" -np 2 --oversubscribe "$pact" train "${det[@]}" --stop-after 1 --save "$scratch/part.safetensors" \
  --run-dir "$scratch/part1" > /dev/null
"$mpirun" -np 2 --oversubscribe "$pact" train "${det[@]}" --load "$scratch/part.safetensors" \
  --save "$scratch/part.safetensors" --run-dir "$scratch/part2" > /dev/null
cmp -s "$scratch/whole.safetensors" "$scratch/part.safetensors" || fail "the resumed run differs from the whole one"
echo "dist.train_cli: 2 ranks follow one process at twice the batch; deterministic runs repeat"
