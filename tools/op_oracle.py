#!/usr/bin/python3
"""The op oracle: PyTorch's float64 forward and VJP values for a fixed set of inputs per Pact op.

    /usr/bin/python3 tools/op_oracle.py [--out contracts/oracle]

writes OUT/ops.json (the cases: op, attributes, mode, which tensors to compare) and OUT/ops.safetensors
(every case's inputs, cotangent, expected output, gradients and updated state). The C++ test
tests/kernels/oracle_test.cpp runs every provider's kernels on those inputs and compares; it never
computes an expected value with Pact's own code, so a deterministic but wrong kernel fails it.

Each op is written here with PyTorch's own functions (torch.nn.functional, torch.optim), in float64, with
Pact's attribute names and defaults (docs/ops.md). Inputs are drawn in float64 and rounded to float32, so
that a float32 kernel and the float64 truth see the same numbers. The cases cover broadcasting, size-1 and
empty dimensions, odd sizes that leave vector tails, and each attribute class. Regenerate after changing a
case; the fixture is committed, so the test needs no PyTorch.
"""

import argparse
import json
import math
import os
import struct
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_export import torch, write_safetensors  # noqa: E402  (one safetensors writer)

F = torch.nn.functional
SCHEMA = "pact.op-oracle.v1"


# ---- inputs --------------------------------------------------------------------------------------------

class In:
    """One input: kind normal (N), positive in [0.5, 2) (P), wide normal * 4 (W), small in [-1.2, 1.2) (S),
    whole numbers in [-2, 2] (Z), index below a bound (I), distinct indices below a bound (U), boolean mask
    with no fully masked row (M), a KV cache's mask: random live prefixes with holes (K), an int8 weight (Q), a
    bf16 weight (B: normal values rounded to bfloat16, stored as bf16)."""

    def __init__(self, kind, shape, bound=0, grad=True, values=None):
        self.kind, self.shape, self.bound, self.grad, self.values = kind, list(shape), bound, grad, values

    def make(self, gen):
        shape = self.shape
        if self.kind == "V":
            return torch.tensor(self.values, dtype=torch.float64).reshape(shape)
        if self.kind == "I":
            return torch.randint(0, self.bound, shape, generator=gen, dtype=torch.int64)
        if self.kind == "Q":
            return torch.randint(-127, 128, shape, generator=gen, dtype=torch.int64).to(torch.int8)
        if self.kind == "B":
            return torch.randn(shape, generator=gen, dtype=torch.float64).to(torch.bfloat16)
        if self.kind == "U":
            return torch.randperm(self.bound, generator=gen)[:shape[0]].reshape(shape)
        if self.kind == "Z":
            return torch.randint(-2, 3, shape, generator=gen).to(torch.float64)
        if self.kind == "S":
            return (torch.rand(shape, generator=gen, dtype=torch.float64) * 2.4 - 1.2).to(torch.float32).to(torch.float64)
        if self.kind == "M":
            m = torch.rand(shape, generator=gen, dtype=torch.float64) < 0.75
            if m.numel():
                m[..., 0] = True
            return m
        if self.kind == "K":
            # A KV cache's mask: each row live up to a random prefix (the filled part of the cache), with
            # a few holes inside it; the native kernel computes prefixes only.
            m = torch.rand(shape, generator=gen, dtype=torch.float64) < 0.85
            rows, cols = shape[-2], shape[-1]
            ends = torch.randint(1, cols + 1, (rows,), generator=gen)
            for i in range(rows):
                m[..., i, ends[i]:] = False
                m[..., i, 0] = True
            return m
        if self.kind == "P":
            x = 0.5 + 1.5 * torch.rand(shape, generator=gen, dtype=torch.float64)
        else:
            x = torch.randn(shape, generator=gen, dtype=torch.float64) * (4.0 if self.kind == "W" else 1.0)
        return x.to(torch.float32).to(torch.float64)  # exactly representable in float32

    @property
    def differentiable(self):
        return self.kind in ("N", "P", "W", "S", "Z", "V") and self.grad


def N(*s):
    return In("N", s)


def P(*s):
    return In("P", s)


def W(*s):
    return In("W", s)


def I(bound, *s):  # noqa: E743
    return In("I", s, bound)


def M(*s):
    return In("M", s)


def S(*s):
    return In("S", s)


def K(*s):
    return In("K", s)


def Z(*s):
    return In("Z", s)


def V(values, *s):
    """Given values (float32 numbers), e.g. exactly at an op's kinks."""
    return In("V", s, values=values)


def U(bound, *s):
    return In("U", s, bound)


def Q(*s):  # an int8 weight: values in [-127, 127]
    return In("Q", s)


def B(*s):  # a bf16 weight: stored as bf16, read by the op as such (an operand of role c)
    return In("B", s)


def Const(inp):
    """An input PyTorch differentiates but Pact's op does not (running statistics, an additive mask)."""
    inp.grad = False
    return inp


# ---- the ops, in PyTorch, with Pact's attributes ---------------------------------------------------------

def _pair(a, key, default):
    v = a.get(key, default)
    v = [v] if isinstance(v, int) else list(v)
    return tuple(v * 2) if len(v) == 1 else tuple(v)


def _reduce(x, a, fn):
    dims = a.get("dims")
    keep = a.get("keepdim", False)
    if dims is None:
        return fn(x, dim=tuple(range(x.dim())), keepdim=keep) if x.dim() else x.clone()
    return fn(x, dim=tuple(dims), keepdim=keep)


def _attention(q, k, v, mask, a):
    scale = a.get("scale", 1.0 / math.sqrt(q.shape[-1]))
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    L, S = q.shape[-2], k.shape[-2]
    if a.get("is_causal", False):
        keep = torch.ones(L, S, dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.matmul(torch.softmax(s, dim=-1), v)


_ACTIVATIONS = {
    "relu": F.relu, "relu6": F.relu6, "silu": F.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
    "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid, "gelu": F.gelu,
}


def _conv_activation(x, a):
    """conv2d, plus the residual (a fourth input) where there is one, then the activation ("none": none)."""
    y = _conv(x[0], x[1], _opt(x, 2), a)
    if len(x) > 3:
        y = y + x[3]
    return y if a["activation"] == "none" else _ACTIVATIONS[a["activation"]](y)


def _conv_nhwc(x, a):
    """conv2d_activation on channels-last tensors: input [N, H, W, C], weight [KH, KW, C / groups, O]."""
    nchw = [x[0].permute(0, 3, 1, 2), x[1].permute(3, 2, 0, 1)] + list(x[2:3])
    if len(x) > 3:
        nchw.append(x[3].permute(0, 3, 1, 2))
    return _conv_activation(nchw, a).permute(0, 2, 3, 1).contiguous()


def _conv(x, w, b, a):
    return F.conv2d(x, w, b, stride=_pair(a, "stride", 1), padding=_pair(a, "padding", 0),
                    dilation=_pair(a, "dilation", 1), groups=a.get("groups", 1))


def _rotate_half(x):  # Hugging Face's rotate_half: concat(-x2, x1) over the last dimension's halves
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def _rms_norm(x, w, a):
    dims = tuple(range(-len(a["normalized_shape"]), 0))
    y = x * torch.rsqrt(x.pow(2).mean(dim=dims, keepdim=True) + a.get("eps", 1e-6))
    return y * w if w is not None else y


def _batch_norm(x, w, b, rm, rv, a, training):
    return F.batch_norm(x, rm.clone(), rv.clone(), w, b, training=training, momentum=a.get("momentum", 0.1),
                        eps=a.get("eps", 1e-5))


def _slice(x, a):
    dim, step = a.get("dim", 0), a.get("step", 1)
    n = x.shape[dim]
    start, end = a.get("start", 0), a.get("end", n)
    start, end = (start + n if start < 0 else start), (end + n if end < 0 else end)
    start, end = max(0, min(start, n)), max(0, min(end, n))
    idx = [slice(None)] * x.dim()
    idx[dim] = slice(start, end, step)
    return x[tuple(idx)]


_TORCH_DTYPES = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64, "i32": torch.int32,
                 "bool": torch.bool, "u8": torch.uint8}


def _arange(a):
    integral = all(isinstance(a.get(k, 0), int) for k in ("start", "end", "step"))
    dtype = _TORCH_DTYPES[a.get("dtype", "i64" if integral else "f32")]
    return torch.arange(a.get("start", 0), a["end"], a.get("step", 1), dtype=dtype)


def _topk(x, a, i):
    return torch.topk(x, a["k"], dim=a.get("dim", -1), largest=a.get("largest", True))[i]


def _interpolate(x, a):
    if a.get("mode", "nearest") == "nearest":
        return torch.ops.aten.upsample_nearest2d(x, a["size"], a.get("scale_h"), a.get("scale_w"))
    return torch.ops.aten.upsample_bilinear2d(x, a["size"], a.get("align_corners", False), a.get("scale_h"),
                                              a.get("scale_w"))


def _argmax(x, a):
    return torch.argmax(x, dim=a.get("dim"), keepdim=a.get("keepdim", False))


def _opt(x, i):
    return x[i] if len(x) > i else None


FORWARD = {
    "add": lambda x, a, t: x[0] + x[1],
    "sub": lambda x, a, t: x[0] - x[1],
    "mul": lambda x, a, t: x[0] * x[1],
    "div": lambda x, a, t: x[0] / x[1],
    "neg": lambda x, a, t: -x[0],
    "matmul": lambda x, a, t: torch.matmul(x[0], x[1]),
    "linear": lambda x, a, t: F.linear(x[0], x[1], _opt(x, 2)),
    # weight-only int8: the dequantized weight (int8 times its row's scale) in an ordinary linear
    "linear_int8": lambda x, a, t: F.linear(x[0], x[1].to(torch.float64) * x[2][:, None], _opt(x, 3)),
    # weight-only bf16: the weight widened exactly, in an ordinary linear
    "linear_bf16": lambda x, a, t: F.linear(x[0], x[1].to(torch.float64), _opt(x, 2)),
    "relu": lambda x, a, t: F.relu(x[0]),
    "gelu": lambda x, a, t: F.gelu(x[0], approximate=a.get("approximate", "none")),
    "silu": lambda x, a, t: F.silu(x[0]),
    "tanh": lambda x, a, t: torch.tanh(x[0]),
    "sigmoid": lambda x, a, t: torch.sigmoid(x[0]),
    "hardswish": lambda x, a, t: F.hardswish(x[0]),
    # F.hardsigmoid's backward multiplies by the float32 1/6 even in float64 (ATen's Activation.cpp,
    # one_sixth(1.0f / 6.0f)): 3e-8 relative off the truth. Its definition, differentiated, is exact.
    "hardsigmoid": lambda x, a, t: F.relu6(x[0] + 3.0) / 6.0,
    "clamp": lambda x, a, t: torch.clamp(x[0], a.get("min"), a.get("max")),
    "exp": lambda x, a, t: torch.exp(x[0]),
    "log": lambda x, a, t: torch.log(x[0]),
    "sqrt": lambda x, a, t: torch.sqrt(x[0]),
    "sin": lambda x, a, t: torch.sin(x[0]),
    "cos": lambda x, a, t: torch.cos(x[0]),
    "tan": lambda x, a, t: torch.tan(x[0]),
    "pow": lambda x, a, t: torch.pow(x[0], x[1]),
    "where": lambda x, a, t: torch.where(x[0], x[1], x[2]),
    "eq": lambda x, a, t: torch.eq(x[0], x[1]),
    "ne": lambda x, a, t: torch.ne(x[0], x[1]),
    "lt": lambda x, a, t: torch.lt(x[0], x[1]),
    "le": lambda x, a, t: torch.le(x[0], x[1]),
    "gt": lambda x, a, t: torch.gt(x[0], x[1]),
    "ge": lambda x, a, t: torch.ge(x[0], x[1]),
    "triu": lambda x, a, t: torch.triu(x[0], a.get("diagonal", 0)),
    "tril": lambda x, a, t: torch.tril(x[0], a.get("diagonal", 0)),
    "cumsum": lambda x, a, t: torch.cumsum(x[0], a["dim"]),
    "argmax": lambda x, a, t: _argmax(x[0], a),
    "topk": lambda x, a, t: _topk(x[0], a, 0),
    "topk_indices": lambda x, a, t: _topk(x[0], a, 1),
    "cast": lambda x, a, t: x[0].to(_TORCH_DTYPES[a["dtype"]]),
    "full_like": lambda x, a, t: torch.full_like(x[0], a["value"], dtype=_TORCH_DTYPES.get(a.get("dtype"))),
    "arange": lambda x, a, t: _arange(a),
    "gather": lambda x, a, t: torch.gather(x[0], a["dim"], x[1]),
    "index_select": lambda x, a, t: torch.index_select(x[0], a["dim"], x[1]),
    "index_copy": lambda x, a, t: torch.index_copy(x[0], a["dim"], x[1], x[2]),
    "interpolate": lambda x, a, t: _interpolate(x[0], a),
    "softmax": lambda x, a, t: torch.softmax(x[0], dim=a.get("dim", -1)),
    "log_softmax": lambda x, a, t: torch.log_softmax(x[0], dim=a.get("dim", -1)),
    "cross_entropy": lambda x, a, t: F.cross_entropy(x[0], x[1], reduction=a.get("reduction", "mean"),
                                                     ignore_index=a.get("ignore_index", -100)),
    "mse_loss": lambda x, a, t: F.mse_loss(x[0], x[1], reduction=a.get("reduction", "mean")),
    "layer_norm": lambda x, a, t: F.layer_norm(x[0], a["normalized_shape"], _opt(x, 1), _opt(x, 2),
                                               eps=a.get("eps", 1e-5)),
    "rms_norm": lambda x, a, t: _rms_norm(x[0], _opt(x, 1), a),
    "rotary_embedding": lambda x, a, t: x[0] * x[1] + _rotate_half(x[0]) * x[2],
    "batch_norm": lambda x, a, t: _batch_norm(*x, a, t),
    "dropout": lambda x, a, t: F.dropout(x[0], a.get("p", 0.5), training=False),  # eval only: see the test
    "embedding": lambda x, a, t: F.embedding(x[1], x[0], padding_idx=a.get("padding_idx")),
    "scaled_dot_product_attention": lambda x, a, t: _attention(x[0], x[1], x[2], _opt(x, 3), a),
    "conv2d": lambda x, a, t: _conv(x[0], x[1], _opt(x, 2), a),
    "conv2d_activation": lambda x, a, t: _conv_activation(x, a),
    "conv2d_nhwc": lambda x, a, t: _conv_nhwc(x, a),
    "max_pool2d": lambda x, a, t: F.max_pool2d(x[0], _pair(a, "kernel_size", 1), _pair(a, "stride", a["kernel_size"]),
                                               _pair(a, "padding", 0), _pair(a, "dilation", 1),
                                               ceil_mode=a.get("ceil_mode", False)),
    "avg_pool2d": lambda x, a, t: F.avg_pool2d(x[0], _pair(a, "kernel_size", 1), _pair(a, "stride", a["kernel_size"]),
                                               _pair(a, "padding", 0), ceil_mode=a.get("ceil_mode", False),
                                               count_include_pad=a.get("count_include_pad", True)),
    "adaptive_avg_pool2d": lambda x, a, t: F.adaptive_avg_pool2d(x[0], _pair(a, "output_size", 1)),
    "reshape": lambda x, a, t: x[0].reshape(a["shape"]),
    "permute": lambda x, a, t: x[0].permute(a["dims"]),
    "transpose": lambda x, a, t: x[0].transpose(a["dim0"], a["dim1"]),
    "flatten": lambda x, a, t: torch.flatten(x[0], a.get("start_dim", 0), a.get("end_dim", -1)),
    "concat": lambda x, a, t: torch.cat(list(x), dim=a.get("dim", 0)),
    "slice": lambda x, a, t: _slice(x[0], a),
    "sum": lambda x, a, t: _reduce(x[0], a, torch.sum),
    "mean": lambda x, a, t: _reduce(x[0], a, torch.mean),
    "max": lambda x, a, t: _reduce(x[0], a, torch.amax),
}


def _update_accumulate_grad(x, a):
    return [x[0] + x[1]]


def _update_batch_norm_stats(x, a):
    rm, rv, data = x[0].clone(), x[1].clone(), x[2]
    F.batch_norm(data, rm, rv, training=True, momentum=a.get("momentum", 0.1))  # updates rm, rv in place
    return [rm, rv]


def _update_sgd(x, a):
    p = x[0].clone().requires_grad_(True)
    p.grad = x[1].clone()
    opt = torch.optim.SGD([p], lr=a["lr"], momentum=a.get("momentum", 0.0), weight_decay=a.get("weight_decay", 0.0))
    if len(x) > 2:
        opt.state[p]["momentum_buffer"] = x[2].clone()
    opt.step()
    out = [p.detach()]
    if len(x) > 2:
        out.append(opt.state[p]["momentum_buffer"])
    return out


def _update_adam(x, a):
    p = x[0].clone().requires_grad_(True)
    p.grad = x[1].clone()
    cls = torch.optim.AdamW if a.get("decoupled", False) else torch.optim.Adam
    opt = cls([p], lr=a["lr"], betas=(a.get("beta1", 0.9), a.get("beta2", 0.999)), eps=a.get("eps", 1e-8),
              weight_decay=a.get("weight_decay", 0.0))
    opt.state[p] = {"step": torch.tensor(float(a["step"] - 1), dtype=torch.float64),
                    "exp_avg": x[2].clone(), "exp_avg_sq": x[3].clone()}
    opt.step()
    return [p.detach(), opt.state[p]["exp_avg"], opt.state[p]["exp_avg_sq"]]


UPDATE = {  # op -> (function, the state operands it writes, in operand order)
    "accumulate_grad": (_update_accumulate_grad, [0]),
    "batch_norm_stats": (_update_batch_norm_stats, [0, 1]),
    "sgd": (_update_sgd, None),  # [0] or [0, 2] (with a momentum buffer)
    "adam": (_update_adam, [0, 2, 3]),
}


# ---- the cases -------------------------------------------------------------------------------------------

def case(op, inputs, attrs=None, training=False, label="", half=False, kinks=False):
    c = {"op": op, "inputs": inputs, "attrs": attrs or {}, "training": training, "label": label}
    if half:
        c["half"] = True
    if kinks:
        c["kinks"] = True
    return c


def half(op, inputs, attrs=None, label=""):
    """A case of the half provider (bf16 and f16 compute): its float inputs and cotangent are bfloat16
    values, each exactly an f16 value too, so a 16-bit kernel and the float64 truth see the same numbers."""
    return case(op, inputs, attrs, label=label, half=True)


def sixteen_bit(x):
    """x rounded to bfloat16, with magnitudes below f16's smallest normal (2^-14) set to zero: exactly
    representable in bf16 and in f16."""
    if not x.is_floating_point():
        return x
    r = x.to(torch.bfloat16).to(torch.float64)
    return torch.where(r.abs() < 2.0 ** -14, torch.zeros_like(r), r)


CASES = [
    # elementwise binary: broadcasting both ways, lower rank, scalars, size 1, empty
    case("add", [N(3, 4), N(4)], label="broadcast"),
    case("add", [N(2, 1, 3), N(4, 1)], label="two-sided broadcast"),
    case("add", [N(3, 1), N(3, 40)], label="per row first, long rows"),
    case("add", [N(0, 3), N(1, 3)], label="empty"),
    case("sub", [N(3, 1), N(3, 5)]),
    case("sub", [N(4), N(2, 3, 4)], label="leading operand repeated"),
    case("sub", [N(2, 3, 1, 1), N(2, 3, 4, 5)], label="per channel first"),
    case("mul", [N(2, 3), N()], label="scalar"),
    case("mul", [N(2, 3, 4), N(1, 3, 4)], label="trailing block"),
    case("mul", [N(3, 1, 1), N(1, 3, 4, 5)], label="per-channel scale of lower rank"),
    case("mul", [N(1, 1), N(1)], label="unit"),
    case("mul", [N(2, 3, 4, 37), N(2, 3, 1, 1)], label="per channel, odd rows"),
    case("div", [N(4, 3), P(4, 1)]),
    case("div", [N(5, 3), P(3)], label="row divisor"),
    case("div", [N(2, 3, 4, 5), P(2, 3, 1, 1)], label="per channel"),
    case("neg", [N(5)]),
    case("neg", [N(3, 37)], label="long rows"),
    # contractions: vectors, batches, broadcast batches, odd and empty sizes
    case("matmul", [N(3, 4), N(4, 5)]),
    case("matmul", [N(2, 1, 3, 4), N(3, 4, 2)], label="batched broadcast"),
    case("matmul", [N(4), N(4, 3)], label="vector-matrix"),
    case("matmul", [N(2, 3, 4), N(4)], label="matrix-vector"),
    case("matmul", [N(17, 33), N(33, 19)], label="odd sizes past a vector width"),
    case("matmul", [N(0, 3), N(3, 4)], label="empty rows"),
    case("matmul", [N(2, 0), N(0, 4)], label="empty inner"),
    case("matmul", [N(1, 1), N(1, 1)], label="1x1"),
    case("linear", [N(2, 3, 4), N(5, 4), N(5)]),
    case("linear", [N(3, 4), N(2, 4)], label="no bias"),
    case("linear", [N(1, 37), N(21, 37), N(21)], label="one row"),
    case("linear", [N(2, 40), N(9, 40)], label="two rows, no bias"),
    case("linear", [N(0, 4), N(3, 4), N(3)], label="no rows"),
    # activations and maps, on rows that leave vector tails
    case("relu", [N(4, 37)]),
    case("relu", [N(0)], label="empty"),
    case("gelu", [N(4, 37)]),
    case("gelu", [N(4, 37)], {"approximate": "tanh"}, label="tanh"),
    case("silu", [N(3, 37)]),
    case("tanh", [N(3, 37)]),
    case("sigmoid", [N(3, 37)]),
    case("hardswish", [W(4, 37)], label="past the kinks at +-3"),
    case("hardsigmoid", [W(4, 37)], label="past the kinks at +-3"),
    case("clamp", [N(4, 5)], {"min": -0.5, "max": 0.5}),
    case("clamp", [N(4, 37)], {"min": 0.0, "max": 6.0}, label="relu6"),
    case("clamp", [N(3, 37)], {"min": 0.0}, label="lower bound only"),
    case("clamp", [N(3, 7)], {"max": 0.25}, label="upper bound only"),
    case("exp", [N(3, 37)]),
    case("log", [P(4, 37)]),
    case("sqrt", [P(4, 37)]),
    case("sin", [W(4, 37)]),
    case("cos", [W(4, 37)]),
    case("tan", [S(4, 37)]),
    case("pow", [P(4, 37), N(4, 37)]),
    case("pow", [P(3, 5), N()], label="scalar exponent"),
    case("pow", [N(2, 6), Z(6)], label="negative bases, whole exponents"),
    # selection and comparison
    case("where", [M(3, 4), N(3, 4), N(4)]),
    case("where", [M(4, 1), N(1, 5), N()], label="three-way broadcast"),
    case("eq", [Z(3, 7), Z(7)]),
    case("ne", [Z(3, 7), Z(3, 1)]),
    case("lt", [Z(4, 5), Z(5)]),
    case("le", [Z(4, 5), Z(4, 5)]),
    case("gt", [N(3, 37), N()], label="scalar"),
    case("ge", [Z(2, 3, 4), Z(3, 1)]),
    case("triu", [N(5, 6)], {"diagonal": 1}),
    case("triu", [N(2, 4, 3)], label="batched, tall"),
    case("tril", [N(2, 3, 4, 4)], {"diagonal": -1}),
    case("tril", [N(3, 7)], {"diagonal": 2}, label="wide"),
    case("cumsum", [N(3, 37)], {"dim": 1}),
    case("cumsum", [N(2, 3, 4)], {"dim": 0}, label="dim 0"),
    case("argmax", [N(3, 37)], {"dim": 1}),
    case("argmax", [N(2, 3, 4)], label="flattened"),
    case("argmax", [Z(4, 5, 3)], {"dim": 1, "keepdim": True}, label="ties, keepdim"),
    case("topk", [N(3, 37)], {"k": 5}),
    case("topk", [N(4, 6, 3)], {"k": 2, "dim": 1, "largest": False}, label="smallest, middle dim"),
    case("topk_indices", [N(3, 37)], {"k": 5}),
    case("topk_indices", [N(4, 6, 3)], {"k": 2, "dim": 1, "largest": False}, label="smallest, middle dim"),
    # conversions and fills
    case("cast", [N(3, 5)], {"dtype": "f64"}),
    case("cast", [I(10, 3, 4)], {"dtype": "f32"}, label="from indices"),
    case("cast", [W(3, 5)], {"dtype": "i64"}, label="truncation"),
    case("full_like", [N(3, 4)], {"value": 2.5}),
    case("full_like", [N(2, 3)], {"value": -1.0, "dtype": "i64"}, label="another dtype"),
    case("arange", [], {"end": 7}),
    case("arange", [], {"start": 0.5, "end": 3.0, "step": 0.25}, label="floats"),
    case("arange", [], {"start": 10, "end": 1, "step": -3}, label="counting down"),
    # indexing
    case("gather", [N(3, 5), I(5, 3, 4)], {"dim": 1}),
    case("gather", [N(4, 3), I(4, 2, 3)], {"dim": 0}, label="dim 0, repeated indices"),
    case("index_select", [N(5, 4), I(5, 7)], {"dim": 0}),
    case("index_select", [N(2, 6, 3), I(6, 4)], {"dim": 1}, label="middle dim"),
    case("index_copy", [N(5, 4), U(5, 3), N(3, 4)], {"dim": 0}),
    case("index_copy", [N(2, 6, 3), U(6, 4), N(2, 4, 3)], {"dim": 1}, label="middle dim"),
    # resampling
    case("interpolate", [N(1, 2, 4, 5)], {"size": [8, 10]}),
    case("interpolate", [N(2, 1, 5, 4)], {"size": [7, 3]}, label="nearest, uneven"),
    case("interpolate", [N(1, 2, 4, 5)], {"size": [6, 7], "scale_h": 1.5, "scale_w": 1.5}, label="nearest, scales"),
    case("interpolate", [N(1, 2, 4, 5)], {"size": [7, 9], "mode": "bilinear"}, label="bilinear"),
    case("interpolate", [N(1, 2, 4, 5)], {"size": [7, 9], "mode": "bilinear", "align_corners": True},
         label="bilinear, align_corners"),
    case("interpolate", [N(1, 1, 6, 8)], {"size": [3, 5], "mode": "bilinear"}, label="bilinear, down"),
    # normalisations and losses
    case("softmax", [N(3, 37)]),
    case("softmax", [N(3, 4, 5)], {"dim": 1}, label="middle dim"),
    case("softmax", [N(4, 1)], label="one column"),
    case("log_softmax", [N(3, 37)]),
    case("log_softmax", [N(2, 5, 3)], {"dim": 0}, label="dim 0"),
    case("log_softmax", [N(0, 5)], label="no rows"),
    case("cross_entropy", [N(5, 7), I(7, 5)]),
    case("cross_entropy", [N(5, 7), I(7, 5)], {"reduction": "sum"}, label="sum"),
    case("cross_entropy", [N(5, 7), I(7, 5)], {"reduction": "none"}, label="none"),
    case("cross_entropy", [N(6, 4), I(4, 6)], {"ignore_index": 2}, label="ignore_index"),
    case("mse_loss", [N(3, 4), N(3, 4)]),
    case("mse_loss", [N(3, 37), N(3, 37)], {"reduction": "sum"}, label="sum"),
    case("mse_loss", [N(2, 5), N(2, 5)], {"reduction": "none"}, label="none"),
    case("layer_norm", [N(3, 8), N(8), N(8)], {"normalized_shape": [8]}),
    case("layer_norm", [N(2, 3, 4)], {"normalized_shape": [3, 4]}, label="no affine"),
    case("layer_norm", [N(4, 37), N(37), N(37)], {"normalized_shape": [37], "eps": 1e-3}, label="odd width, eps"),
    case("layer_norm", [N(1, 6), N(6), N(6)], {"normalized_shape": [6]}, label="one row"),
    case("rms_norm", [N(3, 8), N(8)], {"normalized_shape": [8]}),
    case("rms_norm", [N(5, 19)], {"normalized_shape": [19]}, label="no weight"),
    case("rms_norm", [N(2, 3, 37), N(37)], {"normalized_shape": [37], "eps": 1e-2}, label="eps"),
    case("batch_norm", [N(4, 3, 2, 2), N(3), N(3), Const(N(3)), Const(P(3))], training=True, label="training"),
    case("batch_norm", [N(4, 3, 2, 2), N(3), N(3), Const(N(3)), Const(P(3))], label="eval"),
    case("batch_norm", [N(2, 5, 7, 9), N(5), N(5), Const(N(5)), Const(P(5))], {"eps": 1e-3}, label="eval, long planes"),
    case("batch_norm", [N(6, 5), N(5), N(5), Const(N(5)), Const(P(5))], training=True, label="training, rank 2"),
    case("dropout", [N(6, 5)], {"p": 0.3}, label="eval"),
    case("embedding", [N(10, 4), I(10, 2, 3)]),
    case("embedding", [N(6, 5), I(6, 4, 3)], {"padding_idx": 2}, label="padding index"),
    # attention: heads, causal (top-left), more queries than keys, bool and additive masks, scale
    case("scaled_dot_product_attention", [N(2, 4, 3), N(2, 5, 3), N(2, 5, 2)]),
    case("scaled_dot_product_attention", [N(1, 2, 4, 3), N(1, 2, 4, 3), N(1, 2, 4, 3)], {"is_causal": True},
         label="causal"),
    case("scaled_dot_product_attention", [N(1, 2, 37, 8), N(1, 2, 40, 8), N(1, 2, 40, 5)], {"is_causal": True},
         label="causal, long rows"),
    case("scaled_dot_product_attention", [N(1, 70, 8), N(1, 45, 8), N(1, 45, 5)], {"is_causal": True},
         label="causal, more queries than keys"),
    case("scaled_dot_product_attention", [N(2, 33, 4), N(2, 64, 4), N(2, 64, 3)], {"scale": 0.3},
         label="long rows, scale"),
    case("scaled_dot_product_attention", [N(2, 3, 4), N(2, 5, 4), N(2, 5, 4), M(3, 5)], label="bool mask"),
    case("scaled_dot_product_attention", [N(2, 3, 4), N(2, 5, 4), N(2, 5, 4), Const(N(2, 3, 5))],
         label="additive mask"),
    case("scaled_dot_product_attention", [N(1, 2, 40, 8), N(1, 2, 70, 8), N(1, 2, 70, 5), K(40, 70)],
         label="KV-cache mask: live prefixes with holes"),
    # convolutions: padding, stride, dilation, groups, depthwise with a multiplier, pointwise, empty
    case("conv2d", [N(2, 3, 6, 5), N(4, 3, 3, 3), N(4)], {"padding": [1]}),
    case("conv2d", [N(1, 4, 7, 7), N(4, 1, 3, 3)], {"groups": 4, "stride": [2], "padding": [1]}, label="depthwise"),
    case("conv2d", [N(1, 2, 7, 6), N(4, 1, 2, 3), N(4)], {"groups": 2, "dilation": [2, 1], "stride": [1, 2]},
         label="grouped dilated"),
    case("conv2d", [N(2, 3, 9, 8), N(6, 1, 3, 3), N(6)], {"groups": 3, "padding": [2], "dilation": [2]},
         label="depthwise multiplier dilated"),
    case("conv2d", [N(1, 8, 20, 37), N(8, 1, 3, 3), N(8)], {"groups": 8, "stride": [2], "padding": [1]},
         label="depthwise wide strided"),
    case("conv2d", [N(1, 4, 11, 10), N(4, 1, 5, 5)], {"groups": 4, "stride": [3], "padding": [2]},
         label="depthwise 5x5 stride 3"),
    case("conv2d", [N(2, 8, 5, 7), N(6, 8, 1, 1), N(6)], label="pointwise"),
    case("conv2d", [N(1, 4, 3, 5), N(6, 2, 1, 1)], {"groups": 2}, label="grouped pointwise"),
    case("conv2d", [N(1, 3, 8, 9), N(5, 3, 3, 2), N(5)], {"padding": [1, 2], "stride": [2, 1]},
         label="asymmetric padding and stride"),
    case("conv2d", [N(0, 2, 5, 5), N(3, 2, 3, 3)], label="empty batch"),
    case("conv2d", [N(1, 1, 1, 1), N(1, 1, 1, 1), N(1)], label="1x1"),
    case("conv2d_activation", [N(2, 3, 6, 5), N(4, 3, 3, 3), N(4)], {"padding": [1], "activation": "relu"}),
    case("conv2d_activation", [N(1, 8, 20, 37), N(8, 1, 3, 3), N(8)],
         {"groups": 8, "stride": [2], "padding": [1], "activation": "relu6"}, label="depthwise relu6"),
    case("conv2d_activation", [N(2, 8, 5, 7), N(6, 8, 1, 1)], {"activation": "silu"}, label="pointwise silu"),
    case("conv2d_activation", [N(1, 256, 14, 14), N(12, 256, 3, 3), N(12)], {"padding": [1], "activation": "relu"},
         label="a 14 x 14 plane under a 2304-long patch"),
    case("conv2d_activation", [N(1, 8, 5, 7), N(10, 8, 1, 1), N(10)], {"activation": "relu6"},
         label="pointwise relu6 (the GEMM's epilogue)"),
    case("conv2d_activation", [N(1, 6, 9, 23), N(6, 1, 3, 3), N(6)], {"groups": 6, "padding": [1], "activation": "relu"},
         label="depthwise relu, rows of 23"),
    case("conv2d_activation", [N(1, 4, 7, 9), N(4, 1, 5, 5)], {"groups": 4, "padding": [2], "activation": "silu"},
         label="depthwise silu"),
    case("conv2d_activation", [N(1, 3, 9, 11), N(5, 3, 3, 3), N(5)], {"padding": [1], "activation": "hardswish"},
         label="hardswish"),
    # with a residual added before the activation, on each of the native kernel's paths
    case("conv2d_activation", [N(1, 32, 6, 6), N(32, 32, 3, 3), N(32), N(1, 32, 6, 6)],
         {"padding": [1], "activation": "relu"}, label="residual relu, 3 x 3 read in place (threads split filters)"),
    case("conv2d_activation", [N(1, 8, 30, 30), N(16, 8, 3, 3), N(16), N(1, 16, 30, 30)],
         {"padding": [1], "activation": "relu6"}, label="residual relu6, 3 x 3 read in place (threads split rows)"),
    case("conv2d_activation", [N(2, 8, 5, 7), N(6, 8, 1, 1), N(6), N(2, 6, 5, 7)], {"activation": "none"},
         label="residual alone, pointwise"),
    case("conv2d_activation", [N(1, 3, 9, 11), N(5, 3, 3, 3), N(5), N(1, 5, 9, 11)],
         {"padding": [1], "activation": "hardswish"}, label="residual hardswish, im2col"),
    case("conv2d_activation", [N(1, 8, 20, 37), N(8, 1, 3, 3), N(8), N(1, 8, 10, 19)],
         {"groups": 8, "stride": [2], "padding": [1], "activation": "silu"}, label="residual silu, depthwise"),
    # channels-last (the plan-time layout choice): input [N, H, W, C], weight [KH, KW, C / groups, O]
    case("conv2d_nhwc", [N(2, 6, 5, 3), N(3, 3, 3, 4), N(4)], {"padding": [1], "activation": "relu"},
         label="3 x 3 im2col"),
    case("conv2d_nhwc", [N(1, 20, 37, 40), N(3, 3, 1, 40), N(40)],
         {"groups": 40, "stride": [2], "padding": [1], "activation": "relu6"}, label="depthwise relu6 at stride 2"),
    case("conv2d_nhwc", [N(1, 9, 7, 70), N(5, 5, 1, 70)], {"groups": 70, "padding": [2], "activation": "silu"},
         label="depthwise silu, 70 channels (a vector block and a tail)"),
    case("conv2d_nhwc", [N(2, 5, 7, 8), N(1, 1, 8, 6)], {"activation": "none"}, label="pointwise, no bias"),
    case("conv2d_nhwc", [N(1, 7, 7, 96), N(1, 1, 96, 40), N(40), N(1, 7, 7, 40)], {"activation": "relu"},
         label="pointwise residual relu"),
    case("conv2d_nhwc", [N(1, 9, 11, 8), N(3, 3, 8, 12), N(12), N(1, 9, 11, 12)], {"padding": [1], "activation": "none"},
         label="3 x 3 residual alone"),
    case("conv2d_nhwc", [N(2, 9, 14, 16), N(3, 3, 8, 6), N(6)],
         {"groups": 2, "stride": [2], "padding": [1], "activation": "hardswish"}, label="grouped hardswish at stride 2"),
    case("conv2d_nhwc", [N(1, 8, 8, 24), N(3, 3, 1, 24), N(24), N(1, 8, 8, 24)],
         {"groups": 24, "padding": [2], "dilation": [2], "activation": "silu"}, label="depthwise dilated, residual silu"),
    # pooling
    case("max_pool2d", [N(2, 2, 5, 5)], {"kernel_size": [2], "ceil_mode": True}),
    case("max_pool2d", [N(1, 2, 7, 7)], {"kernel_size": [3], "stride": [2], "padding": [1]}, label="padded"),
    case("max_pool2d", [N(1, 3, 20, 37)], {"kernel_size": [3], "stride": [2], "padding": [1]}, label="wide rows"),
    case("max_pool2d", [N(2, 2, 9, 10)], {"kernel_size": [2, 3], "stride": [1], "dilation": [2], "ceil_mode": True},
         label="dilated"),
    case("avg_pool2d", [N(2, 2, 5, 5)], {"kernel_size": [3], "stride": [2], "padding": [1], "ceil_mode": True}),
    case("avg_pool2d", [N(1, 1, 6, 6)], {"kernel_size": [2], "padding": [1], "count_include_pad": False},
         label="exclude pad"),
    case("adaptive_avg_pool2d", [N(2, 3, 5, 7)], {"output_size": [2, 3]}),
    case("adaptive_avg_pool2d", [N(1, 4, 7, 7)], {"output_size": [1]}, label="global"),
    # views and layout
    case("reshape", [N(2, 3, 4)], {"shape": [4, -1]}),
    case("permute", [N(2, 3, 4)], {"dims": [2, 0, 1]}),
    case("transpose", [N(2, 3, 4)], {"dim0": 0, "dim1": 2}),
    case("flatten", [N(2, 3, 4)], {"start_dim": 1}),
    case("concat", [N(2, 3), N(2, 2), N(2, 1)], {"dim": 1}),
    case("concat", [N(0, 2), N(3, 2)], {"dim": 0}, label="empty part"),
    case("slice", [N(7, 3)], {"dim": 0, "start": 1, "end": -1, "step": 2}),
    case("slice", [N(3, 9)], {"dim": 1, "start": 2}, label="to the end"),
    # reductions
    case("sum", [N(3, 4, 5)], {"dims": [1]}),
    case("sum", [N(3, 4)], label="all"),
    case("sum", [N(3, 41)], {"dims": [-1], "keepdim": True}, label="long rows, keepdim"),
    case("sum", [N(3, 0)], {"dims": [1]}, label="empty dim"),
    case("mean", [N(3, 4, 5)], {"dims": [0, 2], "keepdim": True}),
    case("mean", [N(2, 3, 7, 9)], {"dims": [2, 3], "keepdim": True}, label="global pool"),
    case("mean", [N(2, 5, 3)], {"dims": [1]}, label="inner dimension"),
    case("max", [N(3, 4, 5)], {"dims": [2]}),
    case("max", [N(3, 4, 5)], {"dims": [0, 1], "keepdim": True}, label="two dims, keepdim"),
    # update ops: torch.optim's own steps, batch norm's running statistics
    case("accumulate_grad", [N(3, 5), N(3, 5)]),
    case("accumulate_grad", [N(0, 4), N(0, 4)], label="empty"),
    case("batch_norm_stats", [N(3), P(3), N(4, 3, 2, 2)], {"momentum": 0.1}),
    case("batch_norm_stats", [N(5), P(5), N(6, 5)], {"momentum": 0.3}, label="rank 2"),
    case("sgd", [N(4, 3), N(4, 3)], {"lr": 0.1, "weight_decay": 0.01}, label="plain"),
    case("sgd", [N(37), N(37), N(37)], {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.0}, label="momentum"),
    case("adam", [N(4, 5), N(4, 5), N(4, 5), P(4, 5)], {"lr": 0.01, "step": 3}, label="adam"),
    case("adam", [N(67), N(67), N(67), P(67)], {"lr": 0.01, "weight_decay": 0.1, "decoupled": True, "step": 1},
         label="adamw, a vector tail"),
    # the half provider (bf16 and f16): every op it serves, with 16-bit inputs (appended last, so the
    # cases above keep their seeds)
    half("add", [N(3, 37), N(37)], label="broadcast"),
    half("sub", [N(4, 37), N(4, 37)]),
    half("mul", [N(2, 3, 37), N(3, 1)], label="per row"),
    half("div", [N(3, 37), P(3, 1)]),
    half("neg", [N(3, 37)]),
    half("matmul", [N(5, 40), N(40, 19)]),
    half("matmul", [N(2, 4, 40), N(2, 40, 6)], label="batched"),
    half("linear", [N(1, 37), N(21, 37), N(21)], label="one row: the in-place GEMV"),
    half("linear", [N(3, 70), N(9, 70)], label="three rows, no bias: the in-place GEMV"),
    half("linear", [N(2, 3, 37), N(21, 37), N(21)], label="six rows: widened"),
    half("relu", [N(3, 37)]),
    half("gelu", [N(3, 37)]),
    half("gelu", [N(3, 37)], {"approximate": "tanh"}, label="tanh"),
    half("silu", [N(3, 37)]),
    half("tanh", [N(3, 37)]),
    half("sigmoid", [N(3, 37)]),
    half("exp", [N(3, 37)]),
    half("sqrt", [P(3, 37)]),
    half("sin", [W(3, 37)]),
    half("cos", [W(3, 37)]),
    half("where", [M(3, 37), N(3, 37), N(37)]),
    half("index_copy", [N(5, 4), U(5, 3), N(3, 4)], {"dim": 0}),
    half("softmax", [N(3, 37)]),
    half("softmax", [N(3, 4, 5)], {"dim": 1}, label="middle dim"),
    half("log_softmax", [N(3, 37)]),
    half("layer_norm", [N(4, 37), N(37), N(37)], {"normalized_shape": [37]}),
    half("rms_norm", [N(2, 3, 37), N(37)], {"normalized_shape": [37], "eps": 1e-5}),
    half("scaled_dot_product_attention", [N(1, 2, 37, 8), N(1, 2, 40, 8), N(1, 2, 40, 5)], {"is_causal": True},
         label="causal"),
    half("concat", [N(2, 3), N(2, 5)], {"dim": 1}),
    half("sum", [N(3, 41)], {"dims": [-1], "keepdim": True}),
    half("mean", [N(2, 5, 3)], {"dims": [1]}),
    half("embedding", [N(10, 4), I(10, 2, 3)]),
    half("embedding", [N(6, 5), I(6, 4, 3)], {"padding_idx": 2}, label="padding index"),
    half("reshape", [N(2, 3, 4)], {"shape": [4, -1]}),
    half("flatten", [N(2, 3, 4)], {"start_dim": 1}),
    half("transpose", [N(2, 3, 4)], {"dim0": 0, "dim1": 2}),
    half("permute", [N(2, 3, 4)], {"dims": [2, 0, 1]}),
    half("slice", [N(7, 3)], {"dim": 0, "start": 1, "end": -1, "step": 2}),
    # weight-only int8 linear (after the half cases: the cases above keep their seeds)
    case("linear_int8", [N(2, 3, 37), Q(21, 37), P(21), N(21)], label="six rows: dequantized GEMM"),
    case("linear_int8", [N(1, 70), Q(9, 70), P(9)], label="one row, no bias: the in-place GEMV"),
    case("linear_int8", [N(4, 33), Q(40, 33), P(40), N(40)], label="four rows, odd depth"),
    half("linear_int8", [N(1, 37), Q(21, 37), P(21), N(21)], label="bf16 activations"),
    case("linear_int8", [N(1, 200), Q(19, 200), P(19), N(19)], label="one row, deep: three 64-lane blocks and a tail"),
    case("linear", [N(1, 100), N(13, 100), N(13)], label="one row, deep: three 32-lane blocks and a tail"),
    case("rotary_embedding", [N(1, 3, 4, 8), N(1, 1, 4, 8), N(1, 1, 4, 8)],
         label="a table row per position, shared by the heads"),
    case("rotary_embedding", [N(2, 5, 6), N(5, 1), N(5, 1)], label="cos and sin per row: the generic kernel"),
    half("rotary_embedding", [N(1, 2, 3, 16), N(1, 1, 3, 16), N(1, 1, 3, 16)]),
    # Exactly at the kinks, where a comparison flipped from < to <= changes the value or the gradient.
    case("hardswish", [V([-3.0, 3.0, -3.5, 2.5, 0.0, 3.5], 2, 3)], label="at the kinks", kinks=True),
    case("hardsigmoid", [V([-3.0, 3.0, -3.5, 2.5, 0.0, 3.5], 2, 3)], label="at the kinks", kinks=True),
    case("clamp", [V([-0.5, 0.5, 0.0, 1.0, -1.0, 0.25], 2, 3)], {"min": -0.5, "max": 0.5}, label="at the bounds", kinks=True),
    case("arange", [], {"start": 3, "end": 40, "step": 4, "dtype": "i32"}, label="int32"),
    case("arange", [], {"start": 2**60, "end": 2**60 + 512}, label="past 2^53: exact in int64"),
    case("arange", [], {"start": -2**63, "end": -2**63 + 4096, "step": 3}, label="from int64's minimum"),
    case("arange", [], {"end": 2.5}, label="float, default start and step"),
    case("gt", [Z(4, 5), Z(5)], label="ties"),
    # weight-only bf16 linear (appended: the cases above keep their seeds)
    case("linear_bf16", [N(2, 3, 37), B(21, 37), N(21)], label="six rows: the widened weight's GEMM"),
    case("linear_bf16", [N(1, 70), B(9, 70)], label="one row, no bias: the in-place GEMV"),
    case("linear_bf16", [N(4, 33), B(40, 33), N(40)], label="four rows, odd depth"),
    case("linear_bf16", [N(1, 200), B(19, 200), N(19)], label="one row, deep: 32-lane blocks and a tail"),
    case("linear_bf16", [N(3), B(5, 3)], label="a vector x, shallower than one block"),
    # Geometry the generic kernels' source mutants showed uncovered (appended: the cases above keep their
    # seeds): bilinear align_corners to one and two values, pooling windows, strides and padding that differ by
    # direction, 1 x 1 planes, a max window's ties (PyTorch's VJP routes to the first maximum; kinks: no
    # finite difference), batch_norm over one image of one channel.
    case("interpolate", [N(1, 2, 4, 5)], {"size": [1, 2], "mode": "bilinear", "align_corners": True},
         label="bilinear, align_corners, to 1 x 2"),
    case("max_pool2d", [N(1, 2, 7, 9)], {"kernel_size": [2, 3], "stride": [1, 2], "padding": [1, 0]},
         label="unequal window, stride and padding"),
    case("avg_pool2d", [N(1, 2, 7, 9)], {"kernel_size": [2, 3], "stride": [1, 2], "padding": [1, 0]},
         label="unequal window, stride and padding"),
    case("max_pool2d", [N(2, 3, 1, 1)], {"kernel_size": [1]}, label="1 x 1 planes"),
    case("avg_pool2d", [N(2, 3, 1, 1)], {"kernel_size": [1]}, label="1 x 1 planes"),
    case("max_pool2d", [Z(2, 2, 6, 7)], {"kernel_size": [3], "stride": [2]}, label="ties", kinks=True),
    case("batch_norm", [N(1, 1, 3, 4), N(1), N(1), Const(N(1)), Const(P(1))], label="eval, one image, one channel"),
    case("batch_norm", [N(1, 1, 3, 4), N(1), N(1), Const(N(1)), Const(P(1))], training=True,
         label="training, one image, one channel"),
    case("avg_pool2d", [N(1, 2, 6, 6)], {"kernel_size": [3], "stride": [2], "padding": [1], "ceil_mode": True},
         label="ceil_mode: the last windows clipped to the padded input"),
]


# ---- generation ------------------------------------------------------------------------------------------

def run_case(index, c, tensors):
    name = f"c{index:03d}"
    gen = torch.Generator().manual_seed(1000 + index)
    xs = [inp.make(gen) for inp in c["inputs"]]
    if c.get("half"):
        xs = [sixteen_bit(x) for x in xs]
    entry = {"id": name, "op": c["op"], "label": c["label"], "attrs": c["attrs"], "training": c["training"],
             "inputs": len(xs), "grads": [], "states": []}
    if c.get("half"):
        entry["half"] = True
    if c.get("kinks"):
        entry["kinks"] = True  # inputs on the op's kinks: no finite difference applies (pact/verify/oracle.cpp)
    for k, x in enumerate(xs):  # float inputs are float32 values: stored as such (a bf16 weight as bf16)
        wide = x.is_floating_point() and x.dtype != torch.bfloat16
        tensors.append((f"{name}.in{k}", x.to(torch.float32) if wide else x))
    if c["op"] in UPDATE:
        fn, states = UPDATE[c["op"]]
        if states is None:
            states = [0, 2] if len(xs) > 2 else [0]
        for k, v in zip(states, fn(xs, c["attrs"])):
            tensors.append((f"{name}.state{k}", v.detach()))
            entry["states"].append(k)
        return entry
    leaves = [x.clone().requires_grad_(inp.differentiable) for x, inp in zip(xs, c["inputs"])]
    y = FORWARD[c["op"]](leaves, c["attrs"], c["training"])
    tensors.append((f"{name}.out", y.detach()))
    wanted = [k for k, inp in enumerate(c["inputs"]) if inp.differentiable]
    if c["op"] in ("conv2d_activation", "conv2d_nhwc", "linear_int8", "linear_bf16") or not wanted or not y.requires_grad:
        return entry  # an inference-only op, or one no gradient flows through (argmax, comparisons): no VJP
    cot = torch.randn(y.shape, generator=gen, dtype=torch.float64).to(torch.float32).to(torch.float64)
    if c.get("half"):
        cot = sixteen_bit(cot)
    tensors.append((f"{name}.cot", cot.to(torch.float32)))
    grads = torch.autograd.grad(y, [leaves[k] for k in wanted], cot, allow_unused=True)
    for k, g in zip(wanted, grads):
        tensors.append((f"{name}.grad{k}", torch.zeros_like(xs[k]) if g is None else g))
        entry["grads"].append(k)
    return entry


def read_safetensors(path):
    import numpy as np
    kinds = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32, "I8": np.int8, "BOOL": np.bool_,
             "BF16": np.int16}
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        a = np.frombuffer(data[8 + n + lo:8 + n + hi], dtype=kinds[e["dtype"]]).reshape(e["shape"])
        out[name] = torch.from_numpy(a.copy())
        if e["dtype"] == "BF16":
            out[name] = out[name].view(torch.bfloat16)
    return out


def check(out_dir, cases, tensors):
    """Compares a fresh generation with the committed fixture: the same cases, the same tensors, values
    equal to float64 rounding (another CPU's BLAS may round PyTorch's float64 differently)."""
    with open(os.path.join(out_dir, "ops.json")) as f:
        committed = json.load(f)
    problems = []
    if committed["cases"] != cases:
        problems.append("ops.json's cases differ from tools/op_oracle.py's CASES")
    stored = read_safetensors(os.path.join(out_dir, "ops.safetensors"))
    if sorted(stored) != sorted(name for name, _ in tensors):
        problems.append("ops.safetensors holds other tensors than the generator writes")
    for name, t in tensors:
        s = stored.get(name)
        if s is not None and (s.shape != t.shape or s.dtype != t.dtype or
                              not torch.allclose(s.to(t.dtype), t, rtol=1e-12, atol=1e-12, equal_nan=True)):
            problems.append(f"{name}: the committed values differ from PyTorch's")
    for p in problems[:20]:
        print("op_oracle: " + p, file=sys.stderr)
    if problems:
        print(f"op_oracle: {len(problems)} problems: regenerate with /usr/bin/python3 tools/op_oracle.py",
              file=sys.stderr)
        return 1
    print(f"op_oracle: the fixture in {out_dir} is what the generator writes ({len(cases)} cases)")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--out", default=os.path.join(root, "contracts", "oracle"))
    ap.add_argument("--check", action="store_true", help="compare with the fixture in --out instead of writing it")
    args = ap.parse_args(argv)
    torch.set_default_dtype(torch.float64)
    tensors, cases = [], []
    for i, c in enumerate(CASES):
        cases.append(run_case(i, c, tensors))
    if args.check:
        return check(args.out, cases, tensors)
    os.makedirs(args.out, exist_ok=True)
    doc = {"schema": SCHEMA, "generator": "tools/op_oracle.py", "torch": torch.__version__, "cases": cases}
    with open(os.path.join(args.out, "ops.json"), "w") as f:  # one case a line: reviewable diffs
        head = json.dumps({k: v for k, v in doc.items() if k != "cases"})[:-1]
        f.write(head + ', "cases": [\n' + ",\n".join(json.dumps(c) for c in cases) + "\n]}\n")
    write_safetensors(os.path.join(args.out, "ops.safetensors"), tensors)
    size = os.path.getsize(os.path.join(args.out, "ops.safetensors"))
    print(f"op_oracle: {len(cases)} cases, {len(tensors)} tensors, {size} bytes in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
