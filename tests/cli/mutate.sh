#!/usr/bin/env bash
# mutate.sh KIND SRC_DIR OUT_DIR: writes a damaged copy of a torch_export.py capture for the CLI tests.
#   truncate     graph.json cut in half
#   swap-weights weights.safetensors taken from tests/fixtures/torch/mlp (shapes disagree)
#   lying-header weights.safetensors whose header claims more data than the file has
#   no-input     example_input.safetensors emptied of tensors
set -eu
kind=$1 src=$2 out=$3
rm -rf "$out"
mkdir -p "$out"
cp "$src"/* "$out"/
case "$kind" in
  truncate) head -c "$(($(stat -c %s "$src/graph.json") / 2))" "$src/graph.json" >"$out/graph.json" ;;
  swap-weights) cp tests/fixtures/torch/mlp/weights.safetensors "$out/weights.safetensors" ;;
  lying-header)
    /usr/bin/env python3 - "$src/weights.safetensors" "$out/weights.safetensors" <<'PY'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
name = next(k for k in header if k != "__metadata__")
header[name]["data_offsets"][1] += 1 << 20
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
PY
    ;;
  no-input) printf '\x08\x00\x00\x00\x00\x00\x00\x00{}      ' >"$out/example_input.safetensors" ;;
  *) echo "unknown mutation $kind" >&2; exit 2 ;;
esac
