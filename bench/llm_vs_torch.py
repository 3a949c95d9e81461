#!/usr/bin/python3
"""Greedy decoding of a Llama config of about 125M parameters (hidden 768, 12 layers, 12 heads, 4 KV heads,
intermediate 2048, vocab 32000, untied, context 1024; random weights under Hugging Face names) in Pact
(`pact generate`, f32 / bf16 / int8) and in PyTorch eager f32 with a KV cache (the reference blocks of
tests/llm/hf_reference.py), one and two threads, interleaved, best of N. Prefill of 512 tokens in both
(the last token's logits only, as Hugging Face's logits_to_keep=1).

  cmake --preset release && cmake --build --preset release
  /usr/bin/python3 bench/llm_vs_torch.py [--pact build/release/bin/pact] [--repeat 3] [--keep DIR]

Goals (issue 23): Pact f32 decode at least as fast as PyTorch's, bf16 >= 1.7x and int8 >= 2.5x Pact's f32
tokens/s, prefill of 512 tokens at least as fast as PyTorch's. Each row carries a verdict per goal: the two
against PyTorch follow bench/torch_peer.py (PyTorch held to the thread count, OpenBLAS included; "proxy" on
a matched forced level such as PACT_ISA=avx512 OPENBLAS_CORETYPE=Cooperlake, "invalid" on an unmatched one
or where PyTorch's OpenBLAS chose a kernel below the CPU's level); the two within Pact are pass or fail.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from torch_peer import forced_level, verdict

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "..", "tests", "llm", "hf_reference.py")


def pact_run(pact, folder, prompt_len, new_tokens, dtype, threads):
    ids = ",".join(str(i % 32000 + 1) for i in range(prompt_len))
    out = subprocess.run([pact, "generate", folder, "--prompt-ids", ids, "--max-new-tokens", str(new_tokens),
                          "--dtype", dtype, "--threads", str(threads), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[0])


def torch_run(folder, prompt_len, steps, threads):
    out = subprocess.run(["/usr/bin/python3", REFERENCE, "bench", folder, "--prompt-len", str(prompt_len),
                          "--steps", str(steps), "--threads", str(threads), "--repeat", "1"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pact", default=os.path.join(HERE, "..", "build", "release", "bin", "pact"))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--keep", help="make the checkpoint here (or reuse it) instead of a temporary folder")
    args = ap.parse_args()
    forced, proxy = forced_level()  # sets the environment the PyTorch reference runs under
    folder = args.keep or tempfile.mkdtemp(prefix="pact-llm-bench-")
    if not os.path.exists(os.path.join(folder, "model.safetensors")):
        subprocess.run(["/usr/bin/python3", REFERENCE, "make", folder, "--family", "llama", "--hidden", "768",
                        "--layers", "12", "--heads", "12", "--kv-heads", "4", "--intermediate", "2048",
                        "--vocab", "32000", "--context", "1024", "--rope-theta", "10000", "--seed", "1"], check=True)
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
    flags = next((l for l in cpu.splitlines() if l.startswith("Flags")), "")
    isa = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "sse"
    report = {"cpu": model, "isa": isa, "results": []}
    for threads in (1, 2):
        best, degraded = {}, False
        for _ in range(args.repeat):
            for dtype in ("f32", "bf16", "int8"):
                r = pact_run(args.pact, folder, 8, args.steps + 1, dtype, threads)
                rate = (len(r["tokens"]) - 1) / r["decode_seconds"]
                best[dtype] = max(best.get(dtype, 0), rate)
            t = torch_run(folder, 8, args.steps, threads)
            best["torch"] = max(best.get("torch", 0), t["decode_tokens_per_second"])
            if t["baseline_degraded"] and not degraded:
                degraded = True
                print(t["degraded_note"], file=sys.stderr)
            p = pact_run(args.pact, folder, 512, 1, "f32", threads)
            best["pact_prefill"] = min(best.get("pact_prefill", 1e30), p["prefill_seconds"])
            t = torch_run(folder, 512, 1, threads)
            best["torch_prefill"] = min(best.get("torch_prefill", 1e30), t["prefill_seconds"])
        row = {"threads": threads, "decode_tokens_per_second": {k: round(best[k], 1) for k in ("f32", "bf16", "int8", "torch")},
               "f32_vs_torch": round(best["f32"] / best["torch"], 2),
               "bf16_vs_f32": round(best["bf16"] / best["f32"], 2), "int8_vs_f32": round(best["int8"] / best["f32"], 2),
               "prefill512_seconds": {"pact": round(best["pact_prefill"], 3), "torch": round(best["torch_prefill"], 3)},
               "prefill_torch_over_pact": round(best["torch_prefill"] / best["pact_prefill"], 2)}
        row["verdicts"] = {
            "f32_vs_torch": verdict(best["f32"] >= best["torch"], forced, proxy, degraded),
            "prefill": verdict(best["torch_prefill"] >= best["pact_prefill"], forced, proxy, degraded),
            "bf16_vs_f32": verdict(best["bf16"] >= 1.7 * best["f32"], False, False),
            "int8_vs_f32": verdict(best["int8"] >= 2.5 * best["f32"], False, False)}
        report["results"].append(row)
        print(json.dumps(row), flush=True)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
