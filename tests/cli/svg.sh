#!/usr/bin/env bash
# cli.svg: pact plan, pact capture and pact run draw SVG pictures with what each must show.
# Usage: svg.sh PACT SCRATCH FIXTURES
set -euo pipefail
pact=$1 scratch=$2 fixtures=$3
rm -rf "$scratch" && mkdir -p "$scratch"
fail() { echo "cli.svg: $*" >&2; exit 1; }
has() { grep -q -- "$2" "$1" || fail "$1 lacks '$2'"; }
lacks() { ! grep -q -- "$2" "$1" || fail "$1 shows '$2'"; }

"$pact" plan examples/models/digits_mlp.json --svg "$scratch/plan.svg" | grep -q "drew $scratch/plan.svg"
has "$scratch/plan.svg" "<svg"
has "$scratch/plan.svg" "native.linear"
has "$scratch/plan.svg" "f32\[32, 128\]"
lacks "$scratch/plan.svg" "REJECTED"

# A rejected plan (bf16 under cpu-deterministic, whose reference kernels compute f32 and f64): exit 2, and
# the picture marks the node with its failing obligation.
cat > "$scratch/bf16.json" <<'JSON'
{"format": "pact.ir.v1", "nodes": [{"id": "x", "kind": "input", "attrs": {"shape": [2, 8], "dtype": "bf16"}},
 {"id": "act", "kind": "gelu", "inputs": ["x"]}], "outputs": ["act"]}
JSON
set +e
"$pact" plan "$scratch/bf16.json" --profile cpu-deterministic --svg "$scratch/rejected.svg" >/dev/null
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "the bf16 plan under cpu-deterministic exited $rc, not 2"
has "$scratch/rejected.svg" "REJECTED: shape"
"$pact" plan "$scratch/bf16.json" --svg "$scratch/accepted.svg" >/dev/null
lacks "$scratch/accepted.svg" "REJECTED"

"$pact" capture llama --config tiny --structure-only --svg "$scratch/llama.svg" --collapse 'layers.*' >/dev/null
has "$scratch/llama.svg" "ONLY CAPTURE: no values"
has "$scratch/llama.svg" "layers.0"
has "$scratch/llama.svg" "ops)"
"$pact" capture llama --config tiny --svg "$scratch/llama-real.svg" >/dev/null
lacks "$scratch/llama-real.svg" "ONLY CAPTURE"

"$pact" run "$fixtures/small_cnn" --svg "$scratch/cnn.svg" >/dev/null
has "$scratch/cnn.svg" "native.conv2d"
has "$scratch/cnn.svg" "layer1"
"$pact" run "$fixtures/small_cnn" --svg "$scratch/cnn0.svg" --depth 0 >/dev/null
has "$scratch/cnn0.svg" "layer1"
has "$scratch/cnn0.svg" "ops)"
lacks "$scratch/cnn0.svg" "native.conv2d"
# --collapse by module class: each Block (layer1, layer2) is one node named by its path and class; the
# convolution of the gate, outside them, stays drawn.
"$pact" run "$fixtures/small_cnn" --svg "$scratch/blocks.dot" --collapse Block >/dev/null
has "$scratch/blocks.dot" "layer1 : Block\\\\n("
has "$scratch/blocks.dot" "layer2 : Block\\\\n("
lacks "$scratch/blocks.dot" "layer1.conv1"
has "$scratch/blocks.dot" "gate.1 : Conv2d"
echo "cli.svg: plan, capture and run pictures hold what they must"
