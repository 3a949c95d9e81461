#!/usr/bin/env bash
# resume.sh PACT SCRATCH: a `pact train` run stopped after epoch 2 (--stop-after) and continued with --load
# ends with a checkpoint byte-identical to the uninterrupted run's (Note [Exact resume] in
# pact/train/checkpoint.hpp), under the deterministic profile; a resume with another seed is refused.
set -euo pipefail
pact=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
train() {  # train SEED [OPTIONS...]
  local seed=$1
  shift
  "$pact" train --model mlp --epochs 4 --batch-size 64 --lr 0.01 --seed "$seed" --profile cpu-deterministic \
    --threads 1 --out "$dir/reports" "$@"
}
train 5 --save "$dir/straight.safetensors" > "$dir/straight.log"
train 5 --stop-after 2 --save "$dir/resumed.safetensors" > "$dir/first.log"
if cmp -s "$dir/straight.safetensors" "$dir/resumed.safetensors"; then
  echo "resume: the run stopped after 2 of 4 epochs already equals the full run: the test cannot fail" >&2
  exit 1
fi
train 5 --load "$dir/resumed.safetensors" --save "$dir/resumed.safetensors" > "$dir/second.log"
grep -q "epoch   3/4" "$dir/second.log" || { echo "resume: the continued run did not start at epoch 3" >&2; cat "$dir/second.log" >&2; exit 1; }
if ! cmp "$dir/straight.safetensors" "$dir/resumed.safetensors"; then
  echo "resume: the resumed run's checkpoint differs from the uninterrupted run's" >&2
  exit 1
fi
set +e
out=$(train 6 --load "$dir/resumed.safetensors" 2>&1)
rc=$?
set -e
if [ "$rc" -ne 1 ] || ! grep -q "resume with the same" <<<"$out"; then
  echo "resume: a resume with another seed was not refused (exit $rc): $out" >&2
  exit 1
fi
echo "resume: stopped after epoch 2 and continued to 4, bit-identical to the uninterrupted run"
