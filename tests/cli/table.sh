#!/usr/bin/env bash
# table.sh PACT SCRATCH: `pact train --data FILE.csv --target COLUMN` on the committed tables
# (tests/fixtures/table: three Gaussian classes with string names; a noisy regression), then `pact eval` and
# `pact predict` on held-out files: the classifier reaches 90% and the regression an RMSE below 1 (the target's
# spread is about 4.5), predictions are written for every row, and bad tables are refused naming the column.
set -euo pipefail
pact=$1 dir=$2
t=tests/fixtures/table
rm -rf "$dir" && mkdir -p "$dir"
fail() { echo "table: $*" >&2; exit 1; }
train() { "$pact" train --epochs 20 --batch-size 32 --lr 0.01 --seed 1 --threads 1 --out "$dir/runs" "$@"; }
train --data $t/blobs.csv --target species --hidden 16 --save "$dir/blobs.safetensors" > "$dir/blobs.log"
grep -q "held-out accuracy" "$dir/blobs.log" || fail "no held-out accuracy: $(cat "$dir/blobs.log")"
acc=$("$pact" eval --model "$dir/blobs.safetensors" --data $t/blobs_holdout.csv --json | sed -n 's/.*"value": \([0-9.e-]*\).*/\1/p')
awk -v a="$acc" 'BEGIN { exit !(a >= 0.9) }' || fail "held-out accuracy $acc below 0.9"
"$pact" predict --model "$dir/blobs.safetensors" --data $t/blobs_holdout.csv -o "$dir/species.csv" > /dev/null
[ "$(wc -l < "$dir/species.csv")" -eq 91 ] || fail "predictions: $(wc -l < "$dir/species.csv") lines for 90 rows"
head -1 "$dir/species.csv" | grep -q "^prediction,probability$" || fail "predictions header: $(head -1 "$dir/species.csv")"
grep -qE "^(setosa|versicolor|virginica),0\.[0-9]+|^(setosa|versicolor|virginica),1$" "$dir/species.csv" \
  || fail "predictions are not class names with probabilities"
train --data $t/line.csv --target price --hidden 32,16 --save "$dir/line.safetensors" > "$dir/line.log"
grep -q "held-out RMSE" "$dir/line.log" || fail "no held-out RMSE: $(cat "$dir/line.log")"
rmse=$("$pact" eval --model "$dir/line.safetensors" --data $t/line_holdout.csv --json | sed -n 's/.*"value": \([0-9.e-]*\).*/\1/p')
awk -v r="$rmse" 'BEGIN { exit !(r < 1.0) }' || fail "held-out RMSE $rmse not below 1"
# Refusals name what is wrong.
set +e
out=$(train --data $t/blobs.csv 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "needs --target COLUMN (its columns: sepal length, sepal_width" <<<"$out" || fail "missing --target: $out"
out=$("$pact" predict --model "$dir/blobs.safetensors" --data $t/line.csv 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "no column 'sepal length'" <<<"$out" || fail "missing feature column: $out"
out=$("$pact" eval --model "$dir/line.safetensors" --data $t/blobs.csv 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "no column 'a'" <<<"$out" || fail "wrong table for eval: $out"
out=$(train --data $t/blobs.csv --target species --task regress 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "'species' = 'versicolor' is not a number" <<<"$out" || fail "a text target regressed: $out"
out=$("$pact" predict --model "$dir/runs" --data $t/blobs.csv 2>&1); rc=$?
[ $rc -eq 1 ] || fail "a directory as a model: exit $rc: $out"
set -e
echo "table: classifier $acc held-out accuracy, regression RMSE $rmse, predictions written, refusals typed"
