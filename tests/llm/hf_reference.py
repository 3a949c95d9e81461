#!/usr/bin/python3
"""Reference Llama and GPT-2 decoders in PyTorch for Pact's tests and benchmarks (issue 23).

There is no transformers package on the build machines, so the blocks are written here following Hugging
Face's modeling_llama.py and modeling_gpt2.py: LlamaRMSNorm (float32 variance, weight * normed), rotate-half
rotary embeddings with inv_freq = 1 / theta^(arange(0, d, 2) / d), repeat_kv for grouped-query attention,
SwiGLU; GPT-2's Conv1D (y = x W + b with W stored [in, out]), fused c_attn, gelu_new, tied lm_head.

  make DIR --family llama|gpt2 [sizes] --seed S   random weights under Hugging Face names + config.json
  expect DIR --prompt-ids 1,2,3 --steps N -o F    greedy decoding with a KV cache in float64: F holds
                                                  "tokens" (i64 [N]), "logits" (f64 [N, vocab]) and
                                                  "margins" (f64 [N], top-1 minus top-2 logit per step)
  bench DIR --prompt-len P --steps N --threads T  tokens/s of greedy decode (and prefill) in float32 eager
                                                  PyTorch with a KV cache; prints JSON
"""
import argparse
import json
import math
import os
import sys
import time

import torch


def write_safetensors(path, tensors):
    # Written by hand: safetensors (the package) is not on the machine; the format is a JSON header.
    dtypes = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.bfloat16: "BF16",
              torch.float16: "F16", torch.int8: "I8"}
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        raw = t.view(torch.uint8).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": dtypes[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    dtypes = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "BF16": torch.bfloat16,
              "F16": torch.float16, "I8": torch.int8}
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        dt = dtypes[h["dtype"]]
        buf = bytearray(data[a:b])
        if dt == torch.bfloat16:
            t = torch.frombuffer(buf, dtype=torch.int16).view(torch.bfloat16) if b > a else torch.empty(0, dtype=dt)
        else:
            t = torch.frombuffer(buf, dtype=dt) if b > a else torch.empty(0, dtype=dt)
        out[name] = t.reshape(h["shape"])
    return out


# ---- models ---------------------------------------------------------------------------------------------

class Llama:
    def __init__(self, config, weights, dtype):
        self.c = config
        self.w = {k: v.to(dtype) for k, v in weights.items()}
        self.dtype = dtype
        c = config
        self.heads, self.kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
        self.hd = c.get("head_dim", c["hidden_size"] // self.heads)
        inv = 1.0 / (c.get("rope_theta", 10000.0) ** (torch.arange(0, self.hd, 2, dtype=torch.int64).float() / self.hd))
        scaling = c.get("rope_scaling") or {}
        kind = scaling.get("rope_type", scaling.get("type", "default"))
        if kind == "linear":  # _compute_linear_scaling_rope_parameters
            inv = inv / scaling["factor"]
        elif kind == "llama3":  # _compute_llama3_parameters
            factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
            old = scaling["original_max_position_embeddings"]
            low_wavelen, high_wavelen = old / low, old / high
            wavelen = 2 * math.pi / inv
            scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
            smooth = (old / wavelen - low) / (high - low)
            smoothed = (1 - smooth) * scaled / factor + smooth * scaled
            medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
            inv = torch.where(medium, smoothed, scaled)
        self.inv_freq = inv

    def rms(self, x, w):
        v = x.to(torch.float32 if self.dtype != torch.float64 else torch.float64)
        v = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + self.c["rms_norm_eps"])
        return w * v.to(x.dtype)

    def rope(self, positions):
        freqs = torch.outer(positions.float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(self.dtype), emb.sin().to(self.dtype)

    @staticmethod
    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def lin(self, x, name):
        b = self.w.get(name + ".bias")
        return torch.nn.functional.linear(x, self.w[name + ".weight"], b)

    def forward(self, ids, cache):
        """ids [1, T]; cache: list of (k, v) per layer or None; returns the last new token's logits, cache."""
        w, c = self.w, self.c
        t = ids.shape[1]
        past = 0 if cache[0] is None else cache[0][0].shape[2]
        cos, sin = self.rope(torch.arange(past, past + t))
        x = torch.nn.functional.embedding(ids, w["model.embed_tokens.weight"])
        for l in range(c["num_hidden_layers"]):
            p = f"model.layers.{l}."
            h = self.rms(x, w[p + "input_layernorm.weight"])
            q = self.lin(h, p + "self_attn.q_proj").view(1, t, self.heads, self.hd).transpose(1, 2)
            k = self.lin(h, p + "self_attn.k_proj").view(1, t, self.kv, self.hd).transpose(1, 2)
            v = self.lin(h, p + "self_attn.v_proj").view(1, t, self.kv, self.hd).transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            if cache[l] is not None:
                k = torch.cat((cache[l][0], k), dim=2)
                v = torch.cat((cache[l][1], v), dim=2)
            cache[l] = (k, v)
            groups = self.heads // self.kv
            kr = k.repeat_interleave(groups, dim=1)
            vr = v.repeat_interleave(groups, dim=1)
            s = q @ kr.transpose(2, 3) / math.sqrt(self.hd)
            total = past + t
            mask = torch.ones(t, total, dtype=torch.bool).tril(diagonal=past)
            s = s.masked_fill(~mask, float("-inf"))
            a = torch.softmax(s.float() if self.dtype != torch.float64 else s, dim=-1).to(self.dtype) @ vr
            a = a.transpose(1, 2).reshape(1, t, self.heads * self.hd)
            x = x + self.lin(a, p + "self_attn.o_proj")
            h = self.rms(x, w[p + "post_attention_layernorm.weight"])
            m = torch.nn.functional.silu(self.lin(h, p + "mlp.gate_proj")) * self.lin(h, p + "mlp.up_proj")
            x = x + self.lin(m, p + "mlp.down_proj")
        x = self.rms(x[:, -1:, :], w["model.norm.weight"])  # the last token's logits only (logits_to_keep=1)
        head = w["model.embed_tokens.weight"] if c.get("tie_word_embeddings", False) else w["lm_head.weight"]
        return x @ head.T, cache


class GPT2:
    def __init__(self, config, weights, dtype):
        self.c = config
        self.w = {k: v.to(dtype) for k, v in weights.items()}
        self.heads = config["n_head"]
        self.hd = config["n_embd"] // self.heads
        self.dtype = dtype

    def ln(self, x, p):
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), self.w[p + ".weight"], self.w[p + ".bias"],
                                              self.c.get("layer_norm_epsilon", 1e-5))

    def conv1d(self, x, p):
        return x @ self.w[p + ".weight"] + self.w[p + ".bias"]

    @staticmethod
    def gelu_new(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    def forward(self, ids, cache):
        w, c = self.w, self.c
        t = ids.shape[1]
        d = c["n_embd"]
        past = 0 if cache[0] is None else cache[0][0].shape[2]
        x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][torch.arange(past, past + t)]
        for l in range(c["n_layer"]):
            p = f"transformer.h.{l}."
            h = self.ln(x, p + "ln_1")
            q, k, v = self.conv1d(h, p + "attn.c_attn").split(d, dim=2)
            q, k, v = (z.view(1, t, self.heads, self.hd).transpose(1, 2) for z in (q, k, v))
            if cache[l] is not None:
                k = torch.cat((cache[l][0], k), dim=2)
                v = torch.cat((cache[l][1], v), dim=2)
            cache[l] = (k, v)
            s = q @ k.transpose(-1, -2) / math.sqrt(self.hd)
            mask = torch.ones(t, past + t, dtype=torch.bool).tril(diagonal=past)
            s = s.masked_fill(~mask, float("-inf"))
            a = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(1, t, d)
            x = x + self.conv1d(a, p + "attn.c_proj")
            h = self.ln(x, p + "ln_2")
            x = x + self.conv1d(self.gelu_new(self.conv1d(h, p + "mlp.c_fc")), p + "mlp.c_proj")
        x = self.ln(x[:, -1:, :], "transformer.ln_f")  # the last token's logits only
        return x @ w["transformer.wte.weight"].T, cache


def load(folder, dtype):
    config = json.load(open(folder + "/config.json"))
    weights = {k: v.to(torch.float64) for k, v in read_safetensors(folder + "/model.safetensors").items()}
    if config["model_type"] == "llama":
        return Llama(config, weights, dtype), config["num_hidden_layers"]
    weights = {(k if k.startswith("transformer.") else "transformer." + k): v for k, v in weights.items()}
    return GPT2(config, weights, dtype), config["n_layer"]


# ---- commands -------------------------------------------------------------------------------------------

def make(args):
    g = torch.Generator().manual_seed(args.seed)

    def normal(*shape, std=1.0):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * std

    d, layers, vocab = args.hidden, args.layers, args.vocab
    tensors = {}
    if args.family == "llama":
        heads, kv, f = args.heads, args.kv_heads, args.intermediate
        hd = d // heads
        config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": d,
                  "intermediate_size": f, "num_attention_heads": heads, "num_key_value_heads": kv,
                  "num_hidden_layers": layers, "rms_norm_eps": 1e-5, "rope_theta": args.rope_theta,
                  "vocab_size": vocab, "max_position_embeddings": args.context,
                  "tie_word_embeddings": args.tied, "hidden_act": "silu", "torch_dtype": "float32",
                  "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.02, "use_cache": True,
                  "transformers_version": "4.40.0"}
        if args.rope_scaling:
            config["rope_scaling"] = json.loads(args.rope_scaling)
        tensors["model.embed_tokens.weight"] = normal(vocab, d)
        for l in range(layers):
            p = f"model.layers.{l}."
            tensors[p + "input_layernorm.weight"] = 1 + normal(d, std=0.1)
            for name, (o, i) in {"q_proj": (heads * hd, d), "k_proj": (kv * hd, d), "v_proj": (kv * hd, d),
                                 "o_proj": (d, heads * hd)}.items():
                tensors[p + f"self_attn.{name}.weight"] = normal(o, i, std=1 / math.sqrt(i))
            tensors[p + "post_attention_layernorm.weight"] = 1 + normal(d, std=0.1)
            for name, (o, i) in {"gate_proj": (f, d), "up_proj": (f, d), "down_proj": (d, f)}.items():
                tensors[p + f"mlp.{name}.weight"] = normal(o, i, std=1 / math.sqrt(i))
            tensors[p + "self_attn.rotary_emb.inv_freq"] = torch.zeros(hd // 2, dtype=torch.float64)
        tensors["model.norm.weight"] = 1 + normal(d, std=0.1)
        if not args.tied:
            tensors["lm_head.weight"] = normal(vocab, d, std=1 / math.sqrt(d))
    else:
        heads, f = args.heads, 4 * d
        config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": d, "n_head": heads,
                  "n_layer": layers, "n_positions": args.context, "n_ctx": args.context, "n_inner": None,
                  "vocab_size": vocab, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new",
                  "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "scale_attn_weights": True,
                  "summary_type": "cls_index", "bos_token_id": 0, "eos_token_id": 0}
        tensors["wte.weight"] = normal(vocab, d, std=0.2)
        tensors["wpe.weight"] = normal(args.context, d, std=0.1)
        for l in range(layers):
            p = f"h.{l}."
            for n in ("ln_1", "ln_2"):
                tensors[p + n + ".weight"] = 1 + normal(d, std=0.1)
                tensors[p + n + ".bias"] = normal(d, std=0.1)
            for name, (i, o) in {"attn.c_attn": (d, 3 * d), "attn.c_proj": (d, d), "mlp.c_fc": (d, f),
                                 "mlp.c_proj": (f, d)}.items():
                tensors[p + name + ".weight"] = normal(i, o, std=1 / math.sqrt(i))
                tensors[p + name + ".bias"] = normal(o, std=0.1)
            tensors[p + "attn.bias"] = torch.ones(1, 1, args.context, args.context).tril()
        tensors["ln_f.weight"] = 1 + normal(d, std=0.1)
        tensors["ln_f.bias"] = normal(d, std=0.1)
    import os
    os.makedirs(args.dir, exist_ok=True)
    json.dump(config, open(args.dir + "/config.json", "w"), indent=2)
    write_safetensors(args.dir + "/model.safetensors", {k: v.float() for k, v in tensors.items()})


def expect(args):
    torch.set_grad_enabled(False)
    model, layers = load(args.dir, torch.float64)
    ids = [int(x) for x in args.prompt_ids.split(",")]
    cache = [None] * layers
    logits, cache = model.forward(torch.tensor([ids]), cache)
    tokens, rows, margins = [], [], []
    for _ in range(args.steps):
        last = logits[0, -1]
        top = torch.topk(last, 2).values
        tok = int(torch.argmax(last))
        tokens.append(tok)
        rows.append(last)
        margins.append(float(top[0] - top[1]))
        logits, cache = model.forward(torch.tensor([[tok]]), cache)
    write_safetensors(args.out, {"tokens": torch.tensor(tokens, dtype=torch.int64), "logits": torch.stack(rows),
                                 "margins": torch.tensor(margins, dtype=torch.float64)})


def bench(args):
    # Held as every PyTorch peer is (bench/torch_peer.py): torch.set_num_threads does not reach the OpenBLAS
    # that runs Debian torch's matrix products, which would otherwise use every core at "one thread".
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
    from torch_peer import degraded_baseline, hold_torch_to
    torch.set_grad_enabled(False)
    hold_torch_to(args.threads)
    degraded, note = degraded_baseline()
    model, layers = load(args.dir, torch.float32)
    prompt = torch.arange(args.prompt_len).remainder(model.c["vocab_size"]).unsqueeze(0)
    best = {}
    for _ in range(args.repeat):
        cache = [None] * layers
        start = time.perf_counter()
        logits, cache = model.forward(prompt, cache)
        prefill = time.perf_counter() - start
        tok = int(torch.argmax(logits[0, -1]))
        start = time.perf_counter()
        for _ in range(args.steps):
            logits, cache = model.forward(torch.tensor([[tok]]), cache)
            tok = int(torch.argmax(logits[0, -1]))
        decode = time.perf_counter() - start
        best["prefill_seconds"] = min(best.get("prefill_seconds", 1e30), prefill)
        best["decode_tokens_per_second"] = max(best.get("decode_tokens_per_second", 0), args.steps / decode)
    best.update({"torch": torch.__version__, "threads": args.threads, "prompt_len": args.prompt_len,
                 "steps": args.steps, "baseline_degraded": degraded, "degraded_note": note})
    print(json.dumps(best))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("--family", choices=["llama", "gpt2"], required=True)
    m.add_argument("--hidden", type=int, default=64)
    m.add_argument("--intermediate", type=int, default=172)
    m.add_argument("--heads", type=int, default=4)
    m.add_argument("--kv-heads", type=int, default=2)
    m.add_argument("--layers", type=int, default=2)
    m.add_argument("--vocab", type=int, default=256)
    m.add_argument("--context", type=int, default=128)
    m.add_argument("--rope-theta", type=float, default=500000.0)
    m.add_argument("--tied", action="store_true")
    m.add_argument("--rope-scaling", help="Llama's rope_scaling, as JSON")
    m.add_argument("--seed", type=int, default=0)
    e = sub.add_parser("expect")
    e.add_argument("dir")
    e.add_argument("--prompt-ids", required=True)
    e.add_argument("--steps", type=int, default=16)
    e.add_argument("-o", "--out", required=True)
    b = sub.add_parser("bench")
    b.add_argument("dir")
    b.add_argument("--prompt-len", type=int, default=8)
    b.add_argument("--steps", type=int, default=32)
    b.add_argument("--threads", type=int, default=1)
    b.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    {"make": make, "expect": expect, "bench": bench}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
