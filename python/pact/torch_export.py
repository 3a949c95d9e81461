#!/usr/bin/python3
"""Capture a PyTorch module into Pact's captured-graph schema (pact.torch-export.v1).

    /usr/bin/python3 tools/torch_export.py MODULE:FACTORY --input-shape 1,3,32,32 [--input-dtype f32] -o DIR

imports MODULE, calls FACTORY() for an nn.Module, puts it in eval mode, captures it and writes

    DIR/graph.json                  the captured graph (schema below)
    DIR/weights.safetensors         parameters, buffers and captured constants, by qualified name
    DIR/example_input.safetensors   the example input(s), by user-input name
    DIR/expected_output.safetensors PyTorch's own output(s) on that input, by output name

Capture: torch.export when the installed torch has it; otherwise torch.fx symbolic_trace, replayed
node by node with real values (shape propagation), each tensor-producing node lowered to ATen through
make_fx; where symbolic tracing meets control flow, one aten-level make_fx trace of the whole module.
graph.json says which was used ("capture.method"). Either way every emitted node is an ATen operator
overload ("aten.convolution.default") with its arguments named by the operator's schema, so the C++
adapter reads a single vocabulary.

Schema (modelled on torch.export's serialized ExportedProgram):
    {"schema": "pact.torch-export.v1",
     "capture": {"method", "torch_version", "module"},
     "graph": {"nodes": [{"name", "target", "inputs": [{"name", "arg"}], "outputs": [{"as_tensor": {"name"}} | {"as_none": null}],
                          "metadata": {"nn_module_stack": [{"path", "type"}], "source_node"}}],
               "tensor_values": {name: {"dtype", "sizes", "strides"}}},
     "signature": {"input_specs": [{"kind": "user_input"|"parameter"|"buffer"|"constant", "name", "persistent"?}],
                   "output_specs": [{"kind": "user_output", "name", "arg": {"as_tensor": {"name"}}}]}}
Arguments are {"as_tensor": {"name"}}, {"as_tensors": [...]}, {"as_optional_tensors": [...]}, {"as_none": null},
{"as_int"}, {"as_ints"}, {"as_float"}, {"as_floats"}, {"as_bool"}, {"as_bools"}, {"as_string"},
{"as_scalar_type"}, {"as_device"}, {"as_memory_format"}, {"as_layout"}; non-finite floats are the
strings "inf", "-inf" and "nan".
"""

import argparse
import contextlib
import importlib
import json
import math
import operator
import os
import re
import struct
import sys

SCHEMA = "pact.torch-export.v1"
sys.dont_write_bytecode = True  # importing the user's MODULE must not litter the source tree

DTYPES = {}  # torch dtype -> (Pact dtype name, safetensors dtype)


class ExportError(Exception):
    """A capture that cannot be expressed in the schema; the message names the node and target."""


def _import_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("torch_export: this interpreter has no torch; Debian's python3-torch lives in /usr/bin/python3")
    import torch
    DTYPES.update({
        torch.float32: ("f32", "F32"), torch.float64: ("f64", "F64"), torch.float16: ("f16", "F16"),
        torch.bfloat16: ("bf16", "BF16"), torch.int64: ("i64", "I64"), torch.int32: ("i32", "I32"),
        torch.int8: ("i8", "I8"), torch.uint8: ("u8", "U8"), torch.bool: ("bool", "BOOL"),
    })
    return torch


torch = _import_torch()
import torch.fx as fx  # noqa: E402
from torch.utils._pytree import tree_flatten, tree_unflatten  # noqa: E402

try:
    from torch.func import functional_call  # torch >= 2.0
except ImportError:
    from torch.nn.utils.stateless import functional_call  # torch 1.13

try:
    from torch.fx.experimental.proxy_tensor import make_fx
except ImportError:  # pragma: no cover - every torch with fx has it since 1.12
    make_fx = None

try:
    from torch.func import functionalize  # torch >= 2.0
except ImportError:
    try:
        from functorch import functionalize  # torch 1.13
    except ImportError:  # pragma: no cover
        functionalize = None

PACT_DTYPE_TO_TORCH = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
                       "i64": torch.int64, "i32": torch.int32}


# ----------------------------------------------------------------------------------------------------------
# safetensors (header length, JSON header, data), written by hand: Debian 12 has no python3-safetensors.

def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors:
        t = t.detach().contiguous().cpu()
        if t.dtype not in DTYPES:
            raise ExportError(f"tensor {name!r}: dtype {t.dtype} has no safetensors encoding here")
        data = t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype][1], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------------------------------------
# Module stacks: which nn.Module call each emitted node came from.

class ModuleStack:
    """The current nn.Module call stack, maintained by hooks or by the fx tracer."""

    def __init__(self):
        self.frames = []

    def snapshot(self):
        return [dict(f) for f in self.frames]

    @contextlib.contextmanager
    def hooks(self, root, prefix):
        """Pushes a frame for every submodule call of `root` (qualified names under `prefix`)."""
        handles = []
        for name, mod in root.named_modules():
            if name == "":
                continue
            path = f"{prefix}.{name}" if prefix else name
            frame = {"path": path, "type": f"{type(mod).__module__}.{type(mod).__qualname__}"}

            def pre(_m, _args, frame=frame):
                self.frames.append(frame)

            def post(_m, _args, _out, frame=frame):
                if self.frames and self.frames[-1] is frame:
                    self.frames.pop()

            handles.append(mod.register_forward_pre_hook(pre))
            handles.append(mod.register_forward_hook(post))
        depth = len(self.frames)
        try:
            yield
        finally:
            for h in handles:
                h.remove()
            del self.frames[depth:]


def _module_type(mod):
    return f"{type(mod).__module__}.{type(mod).__qualname__}"


# ----------------------------------------------------------------------------------------------------------
# The emitter: one flat list of ATen nodes with named, schema-normalised arguments.

def _sanitize(name):
    name = re.sub(r"[^A-Za-z0-9_.]", "_", str(name))
    return name or "v"


def _encode_float(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)


def _same_arguments(op, schema):
    """True when overload `op` takes the arguments of `schema`: the same names and types, in order."""
    return [(a.name, str(a.type)) for a in op._schema.arguments] == [(a.name, str(a.type)) for a in schema.arguments]


class Emitter:
    def __init__(self):
        self.nodes = []
        self.tensor_values = {}
        self.used = set()
        self.name_of = {}       # id(real tensor) -> current name (in-place ops move it)
        self.keep = []          # keeps every named tensor alive so ids stay unique
        self.constants = []     # (name, tensor) captured constants
        self.input_specs = []
        self.sources = {}       # name -> tensor of every user input, parameter, buffer and constant
        self.constant_names = set()
        self.undefined = set()  # constants made by aten.empty (Note [Undefined constants])

    def fresh(self, base):
        base = _sanitize(base)
        name, i = base, 1
        while name in self.used:
            name = f"{base}_{i}"
            i += 1
        self.used.add(name)
        return name

    def meta(self, name, t):
        self.tensor_values[name] = {"dtype": DTYPES.get(t.dtype, (str(t.dtype),))[0], "sizes": list(t.shape),
                                    "strides": list(t.stride())}

    def bind(self, t, name):
        self.name_of[id(t)] = name
        self.keep.append(t)
        if name not in self.tensor_values:
            self.meta(name, t)

    def source(self, t, kind, name, persistent=True):
        """Declares a graph input (user input, parameter, buffer) under its own name."""
        if id(t) in self.name_of:  # tied: the first name owns it
            return self.name_of[id(t)]
        self.used.add(name)
        self.bind(t, name)
        self.sources[name] = t
        spec = {"kind": kind, "name": name}
        if kind == "buffer":
            spec["persistent"] = persistent
        self.input_specs.append(spec)
        return name

    def name(self, t):
        """The name of a real tensor; an unnamed one is a captured constant."""
        key = id(t)
        if key in self.name_of:
            return self.name_of[key]
        name = self.fresh(f"_const{len(self.constants)}")
        self.constants.append((name, t.detach().clone()))
        self.sources[name] = self.constants[-1][1]
        self.constant_names.add(name)
        self.input_specs.append({"kind": "constant", "name": name})
        self.bind(t, name)
        return name

    # -- splicing an aten-level fx graph --------------------------------------------------------------

    def splice(self, gm, placeholders, stack_of, source):
        """Emits every ATen node of `gm` (a make_fx or torch.export graph). `placeholders` is one
        (name, value) per placeholder, in order; values are run through the graph (shape propagation)
        and must be safe to mutate. Returns the output structure with names in place of tensors."""
        env, names = {}, {}
        it = iter(placeholders)
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                name, value = next(it)
                env[node], names[node] = value, name
            elif node.op == "get_attr":
                value = gm
                for part in node.target.split("."):
                    value = getattr(value, part)
                env[node] = value
                names[node] = self.name(value) if isinstance(value, torch.Tensor) else None
            elif node.op == "call_function":
                self._emit(node, env, names, stack_of(node), source)
            elif node.op == "output":
                return fx.node.map_arg(node.args[0], lambda n: names[n])
            else:
                raise ExportError(f"node {node.name}: unexpected {node.op} in an aten-level graph")
        raise ExportError("aten graph without an output node")

    def _emit(self, node, env, names, stack, source):
        target = node.target
        args = fx.node.map_arg(node.args, lambda n: env[n])
        kwargs = fx.node.map_arg(node.kwargs, lambda n: env[n])
        if target is operator.getitem:
            env[node] = args[0][args[1]]
            names[node] = names[node.args[0]][node.args[1]]
            return
        if not isinstance(target, torch._ops.OpOverload):
            raise ExportError(f"node {node.name} (from {source}): target {getattr(target, '__name__', target)} "
                              "is not an ATen operator")
        schema = target._schema
        packet = target.overloadpacket.__name__
        in_place = bool(schema.arguments) and schema.arguments[0].alias_info is not None \
            and schema.arguments[0].alias_info.is_write
        # Note [Undefined constants]: aten.empty's values are undefined. A constant made by it may only be
        # overwritten whole (fill_, zero_, copy_: how make_fx records repeat_interleave's repeat counts);
        # anything else that reads it is refused, naming the node.
        # Functionalization (Note [In-place writes]) records these writes as fill, zero and copy.
        overwrites = packet in ("fill_", "zero_", "copy_", "fill", "zero", "copy")
        refs = []
        fx.node.map_arg((node.args, node.kwargs), lambda n: refs.append(n))
        for r in refs:
            if names.get(r) in self.undefined and not (overwrites and r is node.args[0]):
                raise ExportError(f"node {node.name} (from {source}): {target} reads the values of a tensor made "
                                  "by aten.empty, which are undefined")
        value = target(*args, **kwargs)
        env[node] = value
        if self._foldable(node, names, packet, value):
            # Every tensor input is a captured constant (or there is none, e.g. arange, full): the value is
            # a constant too. Parameters and user inputs are never folded.
            if isinstance(value, torch.Tensor):
                if "empty" in packet:
                    value.zero_()  # deterministic bytes; no reader sees them (Note [Undefined constants])
                if in_place:
                    # The mutated tensor is a new value: a constant of its own, read by every later use of
                    # the tensor (the in-place op's result and its first argument alike).
                    names[node] = self.name(value.detach().clone())
                    self.bind(value, names[node])
                    names[node.args[0]] = names[node]
                else:
                    names[node] = self.name(value)
                if "empty" in packet:
                    self.undefined.add(names[node])
            else:
                names[node] = [self.name(v) for v in value]
            return
        if packet == "copy_" and len(node.args) > 1 and isinstance(node.args[1], fx.Node) \
                and isinstance(names.get(node.args[1]), str) and isinstance(env[node.args[1]], torch.Tensor) \
                and env[node.args[1]].shape == value.shape and env[node.args[1]].dtype == value.dtype:
            # copy_(dst, src) of the same shape and dtype (how functionalization writes an argument's new
            # value back): dst is src from here on; nothing to emit.
            names[node] = names[node.args[0]] = names[node.args[1]]
            return
        overload = target._overloadname
        mutated = None
        if schema.arguments and schema.arguments[0].alias_info is not None and schema.arguments[0].alias_info.is_write \
                and packet.endswith("_") and not packet.startswith("_"):
            # In-place (add_, relu_, hardtanh_): emitted as the functional op; the mutated value is renamed.
            functional = getattr(torch.ops.aten, packet[:-1], None)
            if functional is not None and not hasattr(functional, overload):
                # The functional form may name its overload otherwise (transpose_.default is transpose.int,
                # which nn.GRU's batch_first applies in place): the overload with the same arguments.
                overload = next((o for o in functional.overloads()
                                 if _same_arguments(getattr(functional, o), schema)), overload)
            if functional is None or not hasattr(functional, overload):
                raise ExportError(f"node {node.name} (from {source}): in-place {target} has no functional form")
            packet, mutated = packet[:-1], node.args[0]
        inputs = []
        positional = list(node.args)
        for i, arg in enumerate(schema.arguments):
            if not arg.kwarg_only and i < len(positional):
                raw = positional[i]
            elif arg.name in node.kwargs:
                raw = node.kwargs[arg.name]
            elif arg.has_default_value():
                raw = arg.default_value
            else:
                raise ExportError(f"node {node.name} (from {source}): {target} missing argument {arg.name}")
            inputs.append({"name": arg.name, "arg": self._encode(raw, names, node)})
        list_return = len(schema.returns) == 1 and isinstance(value, (tuple, list))  # Tensor[] (split, unbind)
        values = list(value) if isinstance(value, (tuple, list)) else [value]
        if not list_return and len(schema.returns) != len(values):
            raise ExportError(f"node {node.name}: {target} returned {len(values)} values, schema says "
                              f"{len(schema.returns)}")
        outputs, out_names = [], []
        for i, v in enumerate(values):
            if isinstance(v, torch.Tensor):
                name = self.fresh(packet if len(values) == 1 and not list_return else f"{packet}_{i}")
                self.meta(name, v)
                outputs.append({"as_tensor": {"name": name}})
                out_names.append(name)
            else:
                outputs.append({"as_none": None})
                out_names.append(None)
        if list_return:
            outputs = [{"as_tensors": [o["as_tensor"] for o in outputs]}]
        names[node] = out_names[0] if len(values) == 1 and not isinstance(value, (tuple, list)) else out_names
        if mutated is not None:
            names[mutated] = out_names[0]
        self.nodes.append({"name": out_names[0] or self.fresh(packet), "target": f"aten.{packet}.{overload}",
                           "inputs": inputs, "outputs": outputs,
                           "metadata": {"nn_module_stack": stack, "source_node": source}})

    NONDETERMINISTIC = ("rand", "normal", "bernoulli", "dropout", "uniform", "multinomial", "poisson")

    # Factories that read only their tensor argument's dtype and device (its values never): a constant
    # whatever that argument is, since every shape in a capture is static.
    METADATA_ONLY = ("new_zeros", "new_ones", "new_full", "new_empty", "new_empty_strided")

    def _foldable(self, node, names, packet, value):
        if any(word in packet for word in self.NONDETERMINISTIC):
            return False
        values = list(value) if isinstance(value, (tuple, list)) else [value]
        if not values or not all(isinstance(v, torch.Tensor) for v in values):
            return False
        if packet in self.METADATA_ONLY:
            return True
        refs = []
        fx.node.map_arg((node.args, node.kwargs), lambda n: refs.append(n))
        for r in refs:
            name = names.get(r)
            if not isinstance(name, str) or name not in self.constant_names:
                return False
        return True

    def eliminate_dead(self, outputs):
        """Drops nodes none of whose outputs reach a graph output (e.g. the reserve tensor batch norm
        allocates); ATen nodes of an inference capture have no other effects."""
        live = set(outputs)
        kept = []
        for node in reversed(self.nodes):
            produced = set()
            for o in node["outputs"]:
                produced.update(t["name"] for t in o.get("as_tensors", [o.get("as_tensor")]) if t)
            if produced & live:
                kept.append(node)
                for inp in node["inputs"]:
                    arg = inp["arg"]
                    refs = arg.get("as_tensors") or [a.get("as_tensor") for a in arg.get("as_optional_tensors", [])]
                    refs = refs + [arg.get("as_tensor")]
                    live.update(r["name"] for r in refs if r)
        self.nodes = kept[::-1]
        self.input_specs = [s for s in self.input_specs if s["kind"] != "constant" or s["name"] in live]
        keep = live | {s["name"] for s in self.input_specs}
        for node in self.nodes:
            for o in node["outputs"]:
                keep.update(t["name"] for t in o.get("as_tensors", [o.get("as_tensor")]) if t)
        self.tensor_values = {k: v for k, v in self.tensor_values.items() if k in keep}

    def _encode(self, raw, names, node):
        if isinstance(raw, fx.Node):
            name = names.get(raw)
            if isinstance(name, str):
                return {"as_tensor": {"name": name}}
            raise ExportError(f"node {node.name}: argument {raw.name} is not a tensor")
        if raw is None:
            return {"as_none": None}
        if isinstance(raw, bool):
            return {"as_bool": raw}
        if isinstance(raw, int):
            return {"as_int": raw}
        if isinstance(raw, float):
            return {"as_float": _encode_float(raw)}
        if isinstance(raw, str):
            return {"as_string": raw}
        if isinstance(raw, torch.dtype):
            return {"as_scalar_type": str(raw).replace("torch.", "")}
        if isinstance(raw, torch.device):
            return {"as_device": str(raw)}
        if isinstance(raw, torch.memory_format):
            return {"as_memory_format": str(raw).replace("torch.", "")}
        if isinstance(raw, torch.layout):
            return {"as_layout": str(raw).replace("torch.", "")}
        if isinstance(raw, (list, tuple)):
            items = list(raw)
            if any(isinstance(x, fx.Node) for x in items):
                enc = [self._encode(x, names, node) for x in items]
                if any("as_none" in e for e in enc):
                    return {"as_optional_tensors": enc}
                return {"as_tensors": [e["as_tensor"] for e in enc]}
            if all(isinstance(x, bool) for x in items) and items:
                return {"as_bools": items}
            if all(isinstance(x, int) and not isinstance(x, bool) for x in items):
                return {"as_ints": items}
            if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in items):
                return {"as_floats": [_encode_float(float(x)) for x in items]}
        raise ExportError(f"node {node.name}: argument {raw!r} ({type(raw).__name__}) has no schema encoding")


# ----------------------------------------------------------------------------------------------------------
# Capture strategies.

def _clone(x):
    return x.detach().clone() if isinstance(x, torch.Tensor) else x


def _same_values(a, b):
    """Equal shapes and elements, NaN equal to NaN."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):
        return True
    return a.is_floating_point() and torch.equal(torch.nan_to_num(a, nan=0.5), torch.nan_to_num(b, nan=0.5))


def _writes(n):
    """True when fx node `n` is an ATen op that writes its first argument (add_, fill_, copy_, index_put_)."""
    if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
        return False
    args = n.target._schema.arguments
    return bool(args) and args[0].alias_info is not None and args[0].alias_info.is_write


def _is_view(n):
    """True when fx node `n` returns a view of an argument (slice, select, view, transpose, ...)."""
    return isinstance(n, fx.Node) and n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) \
        and not _writes(n) and any(r.alias_info is not None for r in n.target._schema.returns)


def _drop_identity_slices(gm):
    """Replaces every slice of a whole dim (x[:, i] = v traces as index_put_ on slice(x, 0, 0, 2^63 - 1)) by
    its input: the same tensor, so a write to it is a write to the input itself."""
    changed = False
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target is torch.ops.aten.slice.Tensor:
            args = list(n.args) + [None] * (5 - len(n.args))
            start = n.kwargs.get("start", args[2])
            end = n.kwargs.get("end", args[3])
            step = n.kwargs.get("step", args[4])
            if start in (None, 0) and (end is None or (isinstance(end, int) and end >= 2 ** 62)) and step in (None, 1):
                n.replace_all_uses_with(n.args[0])
                gm.graph.erase_node(n)
                changed = True
    if changed:
        gm.recompile()
    return gm


def _renaming_is_exact(gm):
    """Note [In-place writes]: True when no in-place op of `gm` writes through a view, or writes a tensor a
    view of which, taken before the write, is read after it; then renaming the written tensor is the whole
    effect (a view taken after the write reads the new name)."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for n in gm.graph.nodes:
        if not _writes(n):
            continue
        target = n.args[0]
        if _is_view(target):
            return False
        pending = [target]
        while pending:  # every view of the written tensor, and views of those
            base = pending.pop()
            for v in base.users:
                if _is_view(v) and v.args and v.args[0] is base and order[v] < order[n]:
                    if any(order[u] > order[n] for u in v.users):
                        return False
                    pending.append(v)
    return True


def _trace_aten(fn, example_args):
    """make_fx of fn with grad enabled (so PyTorch's fused inference fast paths stay off).

    Note [In-place writes]: the emitter records an in-place op as its functional form and renames the
    tensor it wrote. That is exact only while no other tensor shares the written memory: a write through a
    view (mask[0:2, 3:5] = 1, as Swin's attention mask is built) changes the view's base too, which the
    renaming cannot see. So a trace with such a write (_renaming_is_exact) is traced again under
    functionalization, which rewrites every write as a functional op plus the *_scatter ops that rebuild
    each base, and ends with copy_(input, new value) for every input the function wrote. Other traces keep
    their in-place ops (relu_, index_put_ on a fresh tensor), renamed as before: PyTorch 1.13's
    functionalization fails on some of them (index_put_).
    """
    with torch.enable_grad():
        gm = _drop_identity_slices(make_fx(fn)(*example_args))
        if _renaming_is_exact(gm):
            return gm
        if functionalize is None:
            raise ExportError("the module writes tensors in place and this torch has no functionalize")
        # The first trace ran the writes on the arguments; their shapes, and so the graph, are unchanged.
        return make_fx(functionalize(fn))(*example_args)


def capture_make_fx(model, inputs, em, stack):
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    pnames, bnames = list(params), list(buffers)

    def fn(*flat):
        state = dict(zip(pnames + bnames, flat[:len(pnames) + len(bnames)]))
        return functional_call(model, state, tuple(flat[len(pnames) + len(bnames):]))

    with stack.hooks(model, ""):
        gm = _trace_aten(fn, [params[n] for n in pnames] + [buffers[n] for n in bnames] + list(inputs))
    placeholders = [(em.name_of[id(params[n])], params[n].detach().clone()) for n in pnames]
    placeholders += [(em.name_of[id(buffers[n])], buffers[n].detach().clone()) for n in bnames]
    placeholders += [(em.name_of[id(x)], x.clone()) for x in inputs]
    return em.splice(gm, placeholders, lambda n: n.meta.get("pact_stack", []), "make_fx")


class _StackTracer(fx.Tracer):
    def __init__(self, stack):
        super().__init__()
        self.stack = stack

    def call_module(self, m, forward, args, kwargs):
        path = self.path_of_module(m)
        self.stack.frames.append({"path": path, "type": _module_type(m)})
        try:
            return super().call_module(m, forward, args, kwargs)
        finally:
            self.stack.frames.pop()

    def create_node(self, *a, **k):
        node = super().create_node(*a, **k)
        node.meta["pact_stack"] = self.stack.snapshot()
        return node


def capture_fx(model, inputs, em, stack):
    """torch.fx symbolic_trace, replayed with real values; each tensor node lowered to ATen by make_fx."""
    tracer = _StackTracer(stack)
    graph = tracer.trace(model)
    gm = fx.GraphModule(model, graph)
    env = {}
    it = iter(inputs)
    result = None
    for node in gm.graph.nodes:
        frames = node.meta.get("pact_stack", [])
        if node.op == "placeholder":
            env[node] = next(it)
            continue
        if node.op == "get_attr":
            value = gm
            for part in node.target.split("."):
                value = getattr(value, part)
            env[node] = value
            continue
        if node.op == "output":
            result = fx.node.map_arg(node.args[0], lambda n: env[n])
            break
        args = fx.node.map_arg(node.args, lambda n: env[n])
        kwargs = fx.node.map_arg(node.kwargs, lambda n: env[n])
        if node.op == "call_module":
            mod = gm.get_submodule(node.target)
            call = mod
        elif node.op == "call_method":
            def call(self_, *a, _m=node.target, **k):
                return getattr(self_, _m)(*a, **k)
        else:
            call = node.target
        leaves, spec = tree_flatten((args, kwargs))
        tensor_pos = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
        # Run first on clones (the make_fx lowering), then for real (in-place ops mutate their inputs).
        probe_leaves = [_clone(v) for v in leaves]
        with torch.no_grad():
            probe_args, probe_kwargs = tree_unflatten(probe_leaves, spec)
            probe = call(*probe_args, **probe_kwargs)
        produces_tensor = any(isinstance(v, torch.Tensor) for v in tree_flatten(probe)[0])
        # A call that returns nothing may still write a tensor argument (x[i] = v): lowered too, so that the
        # write is recorded (Note [In-place writes]).
        writes = call is operator.setitem or any(not _same_values(probe_leaves[i], leaves[i]) for i in tensor_pos)
        written = []
        if produces_tensor or (tensor_pos and writes):
            lowered, written = _lower_node(node, call, leaves, spec, tensor_pos, em, stack, frames)
            for pos, _name in written:
                _refuse_aliased_write(gm, node, leaves[pos], env)
        with torch.no_grad():
            value = call(*args, **kwargs)
        env[node] = value
        for pos, name in written:
            em.bind(leaves[pos], name)  # later reads of the written tensor read its new value
        if produces_tensor:
            out_leaves, _ = tree_flatten(value)
            name_leaves, _ = tree_flatten(lowered)
            if len(out_leaves) != len(name_leaves):
                raise ExportError(f"node {node.name}: lowered outputs do not match the module's outputs")
            for v, n in zip(out_leaves, name_leaves):
                if isinstance(v, torch.Tensor):
                    em.bind(v, n)
    return result


def _lower_node(node, call, leaves, spec, tensor_pos, em, stack, frames):
    params, prefix, mod = {}, "", None
    if isinstance(call, torch.nn.Module):
        mod, prefix = call, node.target
        params = dict(mod.named_parameters())
        params.update(dict(mod.named_buffers()))
    pnames = list(params)

    def fn(*flat):
        state = dict(zip(pnames, flat[:len(pnames)]))
        vals = list(leaves)
        for pos, v in zip(tensor_pos, flat[len(pnames):]):
            vals[pos] = v
        a, k = tree_unflatten(vals, spec)
        if mod is not None:
            out = functional_call(mod, state, tuple(a), k)
        else:
            out = call(*a, **k)
        # The tensor arguments are returned too: under functionalization an argument the call wrote comes
        # back as its new value (Note [In-place writes]).
        return out, tuple(flat[len(pnames):])

    example = [params[n] for n in pnames] + [leaves[i].detach().clone() for i in tensor_pos]
    if mod is not None:
        with stack.hooks(mod, prefix):
            gm = _trace_aten(fn, example)
    else:
        gm = _trace_aten(fn, example)
    placeholders = [(em.name(params[n]), params[n].detach().clone()) for n in pnames]
    placeholders += [(em.name(leaves[i]), leaves[i].detach().clone()) for i in tensor_pos]

    def stack_of(n):
        return frames + [f for f in n.meta.get("pact_stack", []) if not frames or f["path"] != frames[-1]["path"]]

    out, args_after = em.splice(gm, placeholders, stack_of, node.name)
    written = [(pos, after) for pos, (before, _), after in zip(tensor_pos, placeholders[len(pnames):], args_after)
               if after != before]
    return out, written


class AliasedWrite(Exception):
    """Not an ExportError: the whole-module make_fx trace, functionalized, follows such writes."""


def _storage_ptr(t):
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return storage.data_ptr()


def _refuse_aliased_write(gm, node, t, env):
    """Note [In-place writes]: a write to `t` reaches every tensor that shares its memory, but the capture
    renames `t` alone. Refused when a value computed before `node` shares t's memory and is read after it."""
    if t.numel() == 0:
        return
    ptr, order = _storage_ptr(t), {n: i for i, n in enumerate(gm.graph.nodes)}
    for prior, value in env.items():
        later_reads = [u for u in prior.users if order[u] > order[node]]
        if not later_reads:
            continue
        for v in tree_flatten(value)[0]:
            if isinstance(v, torch.Tensor) and v is not t and v.numel() > 0 and _storage_ptr(v) == ptr:
                raise AliasedWrite(
                    f"node {node.name} writes a tensor in place that shares memory with '{prior.name}', which "
                    f"'{later_reads[0].name}' reads afterwards; node-by-node capture cannot follow a write "
                    "through an alias")


@contextlib.contextmanager
def _stamping_module_stack(stack):
    """While active, every fx node any tracer creates records the current module stack (meta "pact_stack")."""
    original = fx.Graph.create_node

    def create_node(self, *a, **k):
        node = original(self, *a, **k)
        node.meta.setdefault("pact_stack", stack.snapshot())
        return node

    fx.Graph.create_node = create_node
    try:
        yield
    finally:
        fx.Graph.create_node = original


def capture_torch_export(model, inputs, em):
    ep = torch.export.export(model, tuple(inputs))
    sig = ep.graph_signature
    state = dict(ep.state_dict)
    state.update(getattr(ep, "constants", {}) or {})
    placeholders, user = [], iter(inputs)
    for spec in sig.input_specs:
        if spec.target is not None and spec.target in state:
            t = state[spec.target]
            placeholders.append((em.name(t), t.detach().clone()))
        else:
            x = next(user)
            placeholders.append((em.name_of[id(x)], x.clone()))

    def stack_of(n):
        frames = []
        for _key, (path, typ) in (n.meta.get("nn_module_stack") or {}).items():
            if path:
                frames.append({"path": path, "type": typ if isinstance(typ, str) else _module_type(typ)})
        return frames

    out = em.splice(ep.graph_module, placeholders, stack_of, "torch.export")
    return out[:len(sig.output_specs)] if isinstance(out, (list, tuple)) else out


# ----------------------------------------------------------------------------------------------------------

def _parse_shape(text):
    try:
        shape = [int(x) for x in text.split(",") if x.strip() != ""]
    except ValueError:
        raise SystemExit(f"torch_export: --input-shape {text!r} is not a comma-separated list of integers")
    if not shape or any(d < 0 for d in shape):
        raise SystemExit(f"torch_export: --input-shape {text!r} needs non-negative extents")
    return shape


def randomize(model, seed):
    """Replaces every floating parameter and buffer with seeded random values of a trained model's scale
    (so outputs are O(1) rather than the near-zero logits of some default initialisations)."""
    gen = torch.Generator().manual_seed(seed + 2)
    with torch.no_grad():
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if not t.is_floating_point():
                continue
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "running_var":
                t.copy_(torch.rand(t.shape, generator=gen) + 0.5)
            elif leaf == "running_mean":
                t.copy_(torch.randn(t.shape, generator=gen) * 0.1)
            elif t.dim() >= 2:
                fan_in = max(1, t.numel() // t.shape[0])
                t.copy_(torch.randn(t.shape, generator=gen) / math.sqrt(fan_in))
            elif leaf == "weight":
                t.copy_(1 + 0.1 * torch.randn(t.shape, generator=gen))
            else:
                t.copy_(0.1 * torch.randn(t.shape, generator=gen))


class _MetaFactories(torch.overrides.TorchFunctionMode if hasattr(torch.overrides, "TorchFunctionMode") else object):
    """Creates every tensor a factory function makes on the meta device (shapes and dtypes, no storage):
    PyTorch 1.13 has no torch.device('meta') context manager, so a module built inside this mode (its
    nn.Linear and nn.Embedding weights, the buffers it registers, the positions its forward computes) never
    allocates its values."""

    FACTORIES = ("empty", "zeros", "ones", "full", "rand", "randn", "randint", "arange", "tensor", "eye",
                 "linspace", "empty_strided", "zeros_like", "ones_like", "full_like", "empty_like", "rand_like",
                 "randn_like", "as_tensor")

    def __init__(self):
        super().__init__()
        self.functions = {getattr(torch, n) for n in self.FACTORIES if hasattr(torch, n)}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in self.functions:
            kwargs["device"] = "meta"
        return func(*args, **kwargs)


def _peak_rss_bytes():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def export(target, shapes, dtypes, out_dir, method="auto", seed=0, random_weights=False, structure_only=False):
    """tools/torch_export.py's capture: FACTORY() from MODULE, random example inputs of `shapes`."""
    if ":" not in target:
        raise SystemExit(f"torch_export: {target!r} is not MODULE:FACTORY")
    module_name, factory_name = target.rsplit(":", 1)
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # the user's module: report, do not trace back through the exporter
        raise SystemExit(f"torch_export: cannot import {module_name!r}: {type(e).__name__}: {e}")
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise SystemExit(f"torch_export: {module_name!r} has no callable {factory_name!r}")
    torch.manual_seed(seed)
    if structure_only:
        if not hasattr(torch.overrides, "TorchFunctionMode"):
            raise SystemExit(f"torch_export: --structure-only needs torch.overrides.TorchFunctionMode (torch >= 1.13)")
        if random_weights:
            raise SystemExit("torch_export: --structure-only captures no values; --random-weights does not apply")
        if method not in ("auto", "make_fx"):
            raise SystemExit("torch_export: --structure-only traces with make_fx")
        method = "make_fx"  # the other tracers run the module on real values
        with _MetaFactories():
            model = factory()
    else:
        model = factory()
    if not isinstance(model, torch.nn.Module):
        raise SystemExit(f"torch_export: {target} returned {type(model).__name__}, not an nn.Module")
    model.eval()
    if random_weights:
        randomize(model, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    inputs = []
    for shape, dt in zip(shapes, dtypes):
        tdt = PACT_DTYPE_TO_TORCH[dt]
        if structure_only:
            inputs.append(torch.empty(shape, dtype=tdt, device="meta"))
        elif tdt.is_floating_point:
            inputs.append(torch.randn(shape, generator=gen).to(tdt))
        else:
            inputs.append(torch.randint(0, 8, shape, generator=gen).to(tdt))
    try:
        return export_module(model, inputs, out_dir, method, structure_only, label=target)
    except ExportError as e:
        raise SystemExit(f"torch_export: {e}")


def export_module(model, inputs, out_dir, method="auto", structure_only=False, label=None):
    """Captures `model` (an nn.Module, put in eval mode) on example `inputs` (tensors) into `out_dir`: the
    in-process exporter that pact.from_torch and export() share. Failures are ExportError."""
    label = label or type(model).__name__
    if not isinstance(model, torch.nn.Module):
        raise ExportError(f"{label} is a {type(model).__name__}, not an nn.Module")
    if method not in ("auto", "export", "fx", "make_fx"):
        raise ExportError(f"method {method!r} is not one of auto, export, fx, make_fx")
    model.eval()
    inputs = [x if isinstance(x, torch.Tensor) else torch.as_tensor(x) for x in inputs]
    target = label
    before = {} if structure_only else {n: b.detach().clone() for n, b in model.named_buffers()}
    try:
        with torch.no_grad(), (_MetaFactories() if structure_only else contextlib.nullcontext()):
            expected = model(*[x.clone() for x in inputs])
    except Exception as e:
        raise ExportError(f"{target} fails on inputs of shape {[list(x.shape) for x in inputs]}: {type(e).__name__}: {e}")
    # A forward that writes a buffer in place (a KV cache: cache[:, p] = x) is state the capture cannot hold:
    # the tracers drop the write or bake the written value in, so the graph would be silently wrong.
    for n, b in model.named_buffers():
        old = before.get(n)
        if old is not None and old.shape == b.shape and not _same_values(old, b):
            raise ExportError(f"{target} writes its buffer {n!r} in place during forward; a capture "
                             "cannot hold that state. Return the new value instead (cache = cache.index_copy(dim, "
                             "positions, x), or torch.slice_scatter) and pass it back in as an input")
    expected_leaves, _ = tree_flatten(expected)
    if not expected_leaves or not all(isinstance(t, torch.Tensor) for t in expected_leaves):
        raise ExportError(f"{target} must return a tensor or a tuple/list/dict of tensors")

    try:
        import inspect
        arg_names = [p for p in inspect.signature(model.forward).parameters][:len(inputs)]
    except (TypeError, ValueError):
        arg_names = []
    if len(arg_names) != len(inputs):
        arg_names = [f"input_{i}" for i in range(len(inputs))]

    def run(kind):
        em, stack = Emitter(), ModuleStack()
        for n, x in zip(arg_names, inputs):
            em.source(x, "user_input", _sanitize(n))
        for n, p in model.named_parameters():
            em.source(p, "parameter", n)
        persistent = set(model.state_dict().keys())
        for n, b in model.named_buffers():
            em.source(b, "buffer", n, n in persistent)
        if kind == "torch.export":
            out = capture_torch_export(model, inputs, em)
        elif kind == "fx.symbolic_trace":
            with _stamping_module_stack(stack):
                value = capture_fx(model, inputs, em, stack)
            leaves, _ = tree_flatten(value)
            out = [em.name_of.get(id(t)) or em.name(t) for t in leaves]
        else:
            with _stamping_module_stack(stack), (_MetaFactories() if structure_only else contextlib.nullcontext()):
                out = capture_make_fx(model, inputs, em, stack)
        return em, tree_flatten(out)[0]

    attempts = []
    order = {"auto": ["torch.export", "fx.symbolic_trace", "make_fx"], "export": ["torch.export"],
             "fx": ["fx.symbolic_trace"], "make_fx": ["make_fx"]}[method]
    em = out_names = used = None
    for kind in order:
        if kind == "torch.export" and not hasattr(torch, "export"):
            attempts.append(f"torch.export: not in torch {torch.__version__}")
            continue
        try:
            em, out_names = run(kind)
            used = kind
            break
        except ExportError:
            raise
        except Exception as e:  # tracing met control flow or an untraceable construct: say so, fall back
            attempts.append(f"{kind}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    if em is None:
        raise ExportError("every capture method failed:\n  " + "\n  ".join(attempts))
    if len(out_names) != len(expected_leaves):
        raise ExportError(f"captured {len(out_names)} outputs, the model returned {len(expected_leaves)}")

    em.eliminate_dead(out_names)
    os.makedirs(out_dir, exist_ok=True)
    output_specs = [{"kind": "user_output", "name": f"output_{i}", "arg": {"as_tensor": {"name": n}}}
                    for i, n in enumerate(out_names)]
    doc = {
        "schema": SCHEMA,
        "capture": {"method": used, "fallbacks": attempts, "torch_version": torch.__version__, "module": target},
        "graph": {"nodes": em.nodes, "tensor_values": em.tensor_values},
        "signature": {"input_specs": em.input_specs, "output_specs": output_specs},
    }
    if structure_only:
        # Shapes and dtypes only: no weights, example input or expected output exist to write.
        doc["capture"]["structure_only"] = True
        doc["capture"]["peak_rss_bytes"] = _peak_rss_bytes()
    weights = [(s["name"], em.sources[s["name"]]) for s in em.input_specs if s["kind"] != "user_input"]
    with open(os.path.join(out_dir, "graph.json.tmp"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(os.path.join(out_dir, "graph.json.tmp"), os.path.join(out_dir, "graph.json"))
    if structure_only:
        for stale in ("weights.safetensors", "example_input.safetensors", "expected_output.safetensors"):
            if os.path.exists(os.path.join(out_dir, stale)):  # a real capture's files would lie about this one
                os.remove(os.path.join(out_dir, stale))
        return doc
    write_safetensors(os.path.join(out_dir, "weights.safetensors"), weights)
    write_safetensors(os.path.join(out_dir, "example_input.safetensors"),
                      [(s["name"], x) for s, x in zip([s for s in em.input_specs if s["kind"] == "user_input"], inputs)])
    write_safetensors(os.path.join(out_dir, "expected_output.safetensors"),
                      [(s["name"], t) for s, t in zip(output_specs, expected_leaves)])
    return doc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("target", help="MODULE:FACTORY; FACTORY() returns an nn.Module")
    ap.add_argument("--input-shape", action="append", required=True,
                    help="comma-separated extents of one input (repeat for several inputs)")
    ap.add_argument("--input-dtype", action="append", choices=sorted(PACT_DTYPE_TO_TORCH),
                    help="dtype of each input (default f32)")
    ap.add_argument("--method", default="auto", choices=["auto", "export", "fx", "make_fx"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--random-weights", action="store_true",
                    help="replace parameters and buffers with seeded random values of a trained model's scale")
    ap.add_argument("--structure-only", action="store_true",
                    help="build the module on the meta device and record shapes and parameter geometry only: no "
                         "weights are allocated or written (pact capture DIR --structure-only plans it)")
    ap.add_argument("-o", "--out", required=True, help="output directory")
    a = ap.parse_args(argv)
    shapes = [_parse_shape(s) for s in a.input_shape]
    dtypes = a.input_dtype or ["f32"] * len(shapes)
    if len(dtypes) != len(shapes):
        raise SystemExit("torch_export: give one --input-dtype per --input-shape")
    try:
        doc = export(a.target, shapes, dtypes, a.out, a.method, a.seed, a.random_weights, a.structure_only)
    except ExportError as e:
        raise SystemExit(f"torch_export: {e}")
    cap = doc["capture"]
    print(f"captured {a.target} with {cap['method']}"
          + (f" (after: {'; '.join(cap['fallbacks'])})" if cap["fallbacks"] else "")
          + f": {len(doc['graph']['nodes'])} aten nodes -> {a.out}"
          + (f" (structure only, peak RSS {cap['peak_rss_bytes'] / 2**20:.0f} MiB)" if a.structure_only else ""))


if __name__ == "__main__":
    main()
