#!/usr/bin/env bash
# llm.sh PACT SCRATCH: `pact generate` and `pact quantize` on Hugging Face folders written by
# tests/llm/hf_reference.py (issue 23): --json output, the plan audit, quantized folders, `pact capture llama
# --config DIR/config.json` counting the checkpoint's exact parameters, and bad input refused by name with
# exit status 1, never a crash. Without torch (which writes the folders) it says so and skips (77).
set -euo pipefail
pact=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
fail() { echo "llm: $*" >&2; exit 1; }
refused() {  # expected message, then the command; exit status 1 and the message on stderr
  local want=$1; shift
  set +e; out=$("$@" 2>&1); rc=$?; set -e
  [ $rc -eq 1 ] || fail "exit $rc (want 1) from $*: $out"
  echo "$out" | grep -q -- "$want" || fail "no '$want' in: $out"
}
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "llm: needs /usr/bin/python3 with torch; skipped"; exit 77; }
ref=tests/llm/hf_reference.py
/usr/bin/python3 $ref make "$dir/llama" --family llama --seed 3
/usr/bin/python3 $ref make "$dir/gpt2" --family gpt2 --seed 3

# --json: the new ids and a rate; the same ids as the plain output; the audit names the step's capsules.
json=$("$pact" generate "$dir/llama" --prompt-ids 1,2,3 --max-new-tokens 5 --json)
echo "$json" | /usr/bin/python3 -c 'import json, sys; d = json.load(sys.stdin); assert len(d["tokens"]) == 5 and d["tokens_per_second"] > 0, d' \
  || fail "bad --json: $json"
plain=$("$pact" generate "$dir/llama" --prompt-ids 1,2,3 --max-new-tokens 5 2>/dev/null)
[ "$plain" = "$(echo "$json" | /usr/bin/python3 -c 'import json, sys; print(",".join(map(str, json.load(sys.stdin)["tokens"])))')" ] \
  || fail "plain output $plain differs from --json $json"
audit=$("$pact" generate "$dir/gpt2" --prompt-ids 1,2,3 --max-new-tokens 3 --audit 2>/dev/null)
echo "$audit" | grep -q "cache.1.value.next *index_copy *native.index_copy" || fail "--audit does not list the cache update"
seeded() { "$pact" generate "$dir/llama" --prompt-ids 5 --max-new-tokens 8 --temperature 0.9 --top-k 20 --seed "$1" 2>/dev/null; }
[ "$(seeded 4)" = "$(seeded 4)" ] || fail "the same seed drew different tokens"

# A SentencePiece tokenizer.model (trained here on a small text): --prompt is its encoding, the new ids
# come back as its decoding.
/usr/bin/python3 - "$dir" <<'PY'
import random, sys, sentencepiece as spm
random.seed(1)
words = "the a model token cache layer head query key value step run plan kernel graph weight".split()
with open(sys.argv[1] + "/corpus.txt", "w") as f:
    for _ in range(2000):
        f.write(" ".join(random.choice(words) for _ in range(8)) + "\n")
spm.SentencePieceTrainer.train(input=sys.argv[1] + "/corpus.txt", model_prefix=sys.argv[1] + "/llama/tokenizer",
                               vocab_size=120, model_type="bpe", minloglevel=2)
PY
json=$("$pact" generate "$dir/llama" --prompt "the model runs a plan" --max-new-tokens 6 --json)
/usr/bin/python3 - "$dir" "$json" <<'PY' || fail "the tokenizer disagrees with SentencePiece: $json"
import json, sys, sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=sys.argv[1] + "/llama/tokenizer.model")
d = json.loads(sys.argv[2])
assert d["prompt_tokens"] == len(sp.encode("the model runs a plan")), d
want, run = "", []
for t in d["tokens"] + [None]:
    if t is not None and t < sp.get_piece_size():
        run.append(t)
        continue
    want += sp.decode(run) if run else ""
    run = []
    if t is not None:
        want += "<id %d>" % t
assert d["text"] == want, (d["text"], want)
PY
refused "needs a SentencePiece" "$pact" generate "$dir/gpt2" --prompt "hello"
refused "one)" "$pact" generate "$dir/llama" --prompt "hello" --prompt-ids 1

# Quantized folders run, and an int8 folder gives what --dtype int8 gives in memory.
"$pact" quantize "$dir/llama" --dtype int8 -o "$dir/llama-int8" > "$dir/q.log" && grep -q "wrote" "$dir/q.log" || fail "quantize int8"
"$pact" quantize "$dir/gpt2" --dtype bf16 -o "$dir/gpt2-bf16" > "$dir/q.log" && grep -q "wrote" "$dir/q.log" || fail "quantize bf16"
[ "$("$pact" generate "$dir/llama-int8" --prompt-ids 1,2,3 --max-new-tokens 6 2>/dev/null)" = \
  "$("$pact" generate "$dir/llama" --prompt-ids 1,2,3 --max-new-tokens 6 --dtype int8 2>/dev/null)" ] \
  || fail "the int8 folder and --dtype int8 disagree"
"$pact" generate "$dir/gpt2-bf16" --prompt-ids 1,2,3 --max-new-tokens 3 --dtype bf16 > /dev/null 2>&1 || fail "bf16 folder"

# pact capture llama --config: the checkpoint's exact parameter count (the file's tensors, less the
# recomputable rotary buffers).
want=$(/usr/bin/python3 -c "
import sys; sys.path.insert(0, 'tests/llm'); import hf_reference as h
t = h.read_safetensors('$dir/llama/model.safetensors')
print(sum(v.numel() for k, v in t.items() if not k.endswith('inv_freq')))")
got=$("$pact" capture llama --config "$dir/llama/config.json" --structure-only --json |
  /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["estimates"]["parameters"])')
[ "$got" = "$want" ] || fail "capture counts $got parameters; the checkpoint holds $want"
refused "gpt2 config" "$pact" capture llama --config "$dir/gpt2/config.json" --structure-only

# Bad input: named, exit 1.
refused "entry 1 'x'" "$pact" generate "$dir/llama" --prompt-ids 1,x,3
refused "outside the vocabulary" "$pact" generate "$dir/llama" --prompt-ids 1,256
refused "context holds 4" "$pact" generate "$dir/llama" --prompt-ids 1,2,3,4,5 --context 4
refused "exceed the context of 8" "$pact" generate "$dir/llama" --prompt-ids 1,2,3 --max-new-tokens 7 --context 8
refused "not one of f32, bf16, int8" "$pact" generate "$dir/llama" --prompt-ids 1 --dtype fp8
refused "temperature" "$pact" generate "$dir/llama" --prompt-ids 1 --temperature -1
refused "needs a float folder" "$pact" generate "$dir/llama-int8" --prompt-ids 1 --dtype f32
refused "nothing to convert" "$pact" quantize "$dir/llama" --dtype f32 -o "$dir/x"
refused "config.json" "$pact" generate "$dir/none" --prompt-ids 1
mkdir -p "$dir/bad" && cp "$dir/llama/model.safetensors" "$dir/bad/"
sed 's/"rope_theta"/"rope_scaling": {"type": "dynamic", "factor": 2.0}, "rope_theta"/' "$dir/llama/config.json" > "$dir/bad/config.json"
refused "rope_scaling" "$pact" generate "$dir/bad" --prompt-ids 1
cp "$dir/llama/config.json" "$dir/bad/config.json"
head -c 5000 "$dir/llama/model.safetensors" > "$dir/bad/model.safetensors"
refused "parse_error" "$pact" generate "$dir/bad" --prompt-ids 1
cp "$dir/llama/model.safetensors" "$dir/bad/" && echo "not a model" > "$dir/bad/tokenizer.model"
refused "not a SentencePiece model" "$pact" generate "$dir/bad" --prompt "hello"
echo "llm: ok"
