#!/usr/bin/env bash
# finetune.sh PACT SCRATCH: `pact train --model DIR --loss cross_entropy:OUTPUT --data ...` fine-tunes the
# committed PyTorch captures (issue 22 item 4): the MLP capture on a CSV table of separable classes reaches 90%
# held-out accuracy from its random PyTorch weights, its plan admits the backward and the updates, a stopped
# run continues from its checkpoint, the CNN capture trains on an .npz file at another batch size, and bad
# options and data are refused naming what is wrong. (First-step gradients against PyTorch's own:
# tests/interop/torch_finetune_test.cpp.)
set -euo pipefail
pact=$1 dir=$2
f=tests/fixtures/torch
rm -rf "$dir" && mkdir -p "$dir"
fail() { echo "finetune: $*" >&2; exit 1; }
# 300 rows of 64 features: class c puts 3 + noise in every feature j with j % 10 == c, noise elsewhere.
table() {  # rows, class offset (a class id of 10 + offset is out of range when offset > 0)
  awk -v rows="$1" -v off="$2" 'BEGIN { srand(7); for (j = 0; j < 64; j++) printf "p%d,", j; print "digit";
    for (r = 0; r < rows; r++) { c = r % 10; for (j = 0; j < 64; j++) printf "%.3f,", (j % 10 == c ? 3 : 0) + rand() - 0.5;
      print c + (r == rows - 1 ? off : 0) } }'
}
table 300 0 > "$dir/digits.csv"
train() { "$pact" train --threads 1 --seed 1 --out "$dir/runs" "$@"; }
train --model $f/mlp --loss cross_entropy:output_0 --data "$dir/digits.csv" --target digit --epochs 4 \
  --save "$dir/mlp.safetensors" > "$dir/mlp.log"
grep -q "updates), " "$dir/mlp.log" && grep -q "native.adam" "$dir/mlp.log" || fail "no training plan: $(cat "$dir/mlp.log")"
acc=$(sed -n 's/^held-out accuracy \([0-9.]*\)%.*/\1/p' "$dir/mlp.log")
awk -v a="$acc" 'BEGIN { exit !(a >= 90) }' || fail "held-out accuracy $acc% below 90%: $(cat "$dir/mlp.log")"
# A stopped run continues from its checkpoint.
train --model $f/mlp --loss cross_entropy:output_0 --data "$dir/digits.csv" --target digit --epochs 2 --stop-after 1 \
  --save "$dir/stop.safetensors" > /dev/null
train --model $f/mlp --loss cross_entropy:output_0 --data "$dir/digits.csv" --target digit --epochs 2 \
  --load "$dir/stop.safetensors" > "$dir/resume.log"
grep -q "epoch   2/2" "$dir/resume.log" || fail "the continued run: $(cat "$dir/resume.log")"
# The CNN capture on images in an .npz file, at batch 8 (captured at 2).
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  /usr/bin/python3 -c "
import numpy as np
r = np.random.RandomState(0)
np.savez('$dir/images.npz', x=r.randn(40, 3, 16, 16).astype(np.float32), target=np.arange(40) % 10)"
  train --model $f/small_cnn --loss cross_entropy:output_0 --data "$dir/images.npz" --batch-size 8 --epochs 1 \
    > "$dir/cnn.log" || fail "the CNN on .npz: $(cat "$dir/cnn.log")"
  grep -q "batch 8" "$dir/cnn.log" && grep -q "native.batch_norm_stats" "$dir/cnn.log" || fail "CNN: $(cat "$dir/cnn.log")"
else
  echo "finetune: no numpy in /usr/bin/python3: the .npz run skipped"
fi
# Refusals name what is wrong.
set +e
refused() {  # expected text, then the train arguments
  local want=$1; shift
  out=$(train "$@" 2>&1); rc=$?
  [ $rc -eq 1 ] && grep -q -- "$want" <<<"$out" || fail "expected '$want' (exit 1), got exit $rc: $out"
}
refused "name its loss" --model $f/mlp --data "$dir/digits.csv" --target digit
refused "its outputs: output_0" --model $f/mlp --loss cross_entropy:logits --data "$dir/digits.csv" --target digit
refused "cross_entropy:OUTPUT or mse:OUTPUT" --model $f/mlp --loss hinge:output_0 --data "$dir/digits.csv" --target digit
refused "fine-tunes on your data" --model $f/mlp --loss cross_entropy:output_0
refused "--hidden applies to --data FILE.csv with --model mlp" --model $f/mlp --loss cross_entropy:output_0 \
  --data "$dir/digits.csv" --target digit --hidden 8
refused "--loss applies to --model DIR" --loss cross_entropy:output_0
table 30 5 > "$dir/bad_class.csv"
refused "class ids are integers in \[0, 10)" --model $f/mlp --loss cross_entropy:output_0 --data "$dir/bad_class.csv" \
  --target digit
cut -d, -f2- "$dir/digits.csv" > "$dir/narrow.csv"
refused "has 63 feature columns besides 'digit'; the model's rows hold 64" --model $f/mlp --loss cross_entropy:output_0 \
  --data "$dir/narrow.csv" --target digit
refused "reads one value per row" --model $f/mlp --loss mse:output_0 --data "$dir/digits.csv" --target digit
set -e
echo "finetune: MLP capture $acc% held-out accuracy, resumed, CNN on .npz, refusals typed"
