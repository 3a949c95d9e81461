#!/usr/bin/env bash
# Exports torchvision architectures with random weights and runs each in Pact, printing the agreement
# with PyTorch (max|pact - torch| / max(1, max|torch|)) and the exporter's capture method. Not a test
# (slow, and it needs python3-torchvision); the slow test tier checks resnet18, mobilenet_v2 and squeezenet.
#   bench/torch_import_zoo.sh [--shape 1,3,64,64] [--profile cpu-checked]
set -euo pipefail
cd "$(dirname "$0")/.."
shape=1,3,64,64
profile=cpu-checked
while [ $# -gt 0 ]; do
  case "$1" in
    --shape) shape=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    *) echo "usage: $0 [--shape S] [--profile P]" >&2; exit 2 ;;
  esac
done
pact=./build/release/bin/pact
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf "%-20s %-18s %12s %10s\n" model capture relative ms
for arch in resnet18 mobilenet_v2 squeezenet1_0 mobilenet_v3_small shufflenet_v2_x0_5 efficientnet_b0 \
            densenet121 convnext_tiny vit_b_16 swin_t swin_v2_t maxvit_t; do
  s=$shape
  case "$arch" in vit_b_16 | maxvit_t) s=1,3,224,224 ;; esac
  PYTHONPATH=bench/models /usr/bin/python3 tools/torch_export.py "torchvision_zoo:$arch" --random-weights \
    --input-shape "$s" -o "$out/$arch" >/dev/null
  "$pact" run "$out/$arch" --profile "$profile" --json >"$out/$arch.json" || true
  /usr/bin/python3 - "$arch" "$out/$arch.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
worst = max(o["relative_error"] for o in r["outputs"])
print(f"{sys.argv[1]:<20} {r['capture_method']:<18} {worst:12.3e} {r['milliseconds']:10.1f}" + ("" if r["passed"] else "  ABOVE TOLERANCE"))
PY
done
