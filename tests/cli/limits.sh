#!/bin/sh
# Out of memory is a typed error, never an abort (docs/limits.md): pact under an address-space limit
# (prlimit --as) meets an allocation it cannot make, and reports out_of_memory with exit status 1.
#   limits.sh PACT SCRATCH
set -u
pact=$1
scratch=$2
mkdir -p "$scratch"
fail() {
  echo "limits.sh: $*"
  exit 1
}

# A real capture of a model with a 32 GiB parameter, under an 8 GiB limit: the host storage provider's
# allocation fails.
cat >"$scratch/huge_parameter.json" <<'JSON'
{"format": "pact.ir.v1", "nodes": [
 {"id": "w", "kind": "parameter", "attrs": {"shape": [8589934592]}},
 {"id": "y", "kind": "relu", "inputs": ["w"]}], "outputs": ["y"]}
JSON
out=$(prlimit --as=8589934592 "$pact" capture "$scratch/huge_parameter.json" 2>&1)
rc=$?
[ "$rc" -eq 1 ] || fail "huge parameter: exit $rc (expected 1): $out"
echo "$out" | grep -q "out_of_memory" || fail "huge parameter: no out_of_memory in: $out"
echo "huge parameter: $out"

# A 60 MB model file (under the 64 MiB text limit) whose parsed document does not fit in 700 MB: the
# JSON parser's allocation fails.
/usr/bin/python3 -c '
import sys
sys.stdout.write("{\"format\": \"pact.ir.v1\", \"nodes\": [{\"id\": \"x\", \"kind\": \"input\", \"attrs\": {\"shape\": [")
sys.stdout.write(",".join(["0"] * 30000000))
sys.stdout.write("]}}], \"outputs\": []}")
' >"$scratch/wide_document.json" || fail "cannot write the document"
out=$(prlimit --as=734003200 "$pact" plan "$scratch/wide_document.json" 2>&1)
rc=$?
[ "$rc" -eq 1 ] || fail "wide document: exit $rc (expected 1): $out"
echo "$out" | grep -q "out_of_memory" || fail "wide document: no out_of_memory in: $out"
echo "wide document: $out"
rm -f "$scratch/wide_document.json"

# A real capture (no --structure-only) of Llama 7B under an 8 GiB limit: refused from the structure-only
# estimate before any weight is materialised (it used to start allocating 27 GB), unless --force.
out=$(prlimit --as=8589934592 "$pact" capture llama --config 7b 2>&1)
rc=$?
[ "$rc" -eq 1 ] || fail "llama 7b: exit $rc (expected 1): $out"
echo "$out" | grep -q "out_of_memory: a real capture of this model holds about" || fail "llama 7b: $out"
echo "$out" | grep -q "structure-only" || fail "llama 7b: the refusal does not name --structure-only: $out"
echo "llama 7b: $out"
