#!/usr/bin/env bash
# dist.killed_rank: a rank killed mid-training ends the whole job within a bounded time, with a message that
# names it, and the last complete checkpoint (rank 0 writes one after every epoch, atomically) stays
# loadable: a new 2-rank job resumes from it.
# Usage: killed_rank.sh MPIRUN PACT SCRATCH
set -euo pipefail
mpirun=$1 pact=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
fail() { echo "dist.killed_rank: $*" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
ck=$scratch/run.safetensors

"$mpirun" -np 2 --oversubscribe "$pact" train --data-parallel --epochs 400 --batch-size 16 --comm-timeout 20 \
  --save "$ck" --run-dir "$scratch/run" > "$scratch/run.out" 2>&1 &
job=$!
for _ in $(seq 600); do [ -f "$ck" ] && break; sleep 0.1; done
[ -f "$ck" ] || { kill -- "$job" || true; fail "no checkpoint within 60 s"; }
# Rank 1: the pact process of this job whose environment says so.
victim=
for p in $(pgrep -f -- "--save $ck"); do
  if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx OMPI_COMM_WORLD_RANK=1; then victim=$p; fi
done
[ -n "$victim" ] || { kill -- "$job" || true; fail "rank 1's process not found"; }
kill -9 "$victim"
start=$SECONDS
if wait "$job"; then fail "the job finished although rank 1 was killed"; fi
elapsed=$((SECONDS - start))
[ "$elapsed" -le 30 ] || fail "the job took $elapsed s to end after rank 1 died"
grep -Eiq "rank 1\b" "$scratch/run.out" || { cat "$scratch/run.out" >&2; fail "the job's end does not name rank 1"; }

# The checkpoint on disk is a complete one: it loads, and 2 ranks train on from it for one more epoch.
epochs=$(/usr/bin/python3 - "$ck" <<'PY'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
print(json.loads(header["__metadata__"]["pact.checkpoint"])["progress"]["epochs"])
PY
)
[ "$epochs" -ge 1 ] || fail "the checkpoint records $epochs epochs"
"$mpirun" -np 2 --oversubscribe "$pact" train --data-parallel --epochs 400 --batch-size 16 --load "$ck" \
  --stop-after $((epochs + 1)) --save "$scratch/resumed.safetensors" --run-dir "$scratch/resumed" \
  > "$scratch/resumed.out" 2>&1 || { cat "$scratch/resumed.out" >&2; fail "resuming from the checkpoint failed"; }
grep -q "^report: " "$scratch/resumed.out" || fail "the resumed run wrote no report"
echo "dist.killed_rank: the job ended ${elapsed} s after rank 1 died, naming it; epoch $epochs's checkpoint resumed"
