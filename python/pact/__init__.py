"""Pact from Python: hand Pact a PyTorch module and numpy arrays, read the plan audit, train, capture.

    import numpy as np, torch, pact
    model = pact.from_torch(torch.nn.Linear(4, 2), torch.randn(3, 4))   # export, import, plan
    model.audit["node_name"]            # per node: capsule, provider, isa, evidence, verdict
    (y,) = model.run(np.ones((3, 4), np.float32))                       # numpy in, numpy out

Values cross the boundary without copies where the layout allows: a numpy array (buffer protocol) or a
torch tensor (DLPack) becomes a pact.Tensor over the same memory, which holds the Python object for as long
as Pact reads it; outputs come back as read-only numpy arrays over Pact's own buffers. Every error Pact
raises is pact.Error, whose `code` is Pact's error code ("invalid_argument", "dtype_mismatch", ...).
docs/guides/python.md has the whole API.
"""

import json
import os
import tempfile
import time

from . import _pact

Error = _pact.Error
Tensor = _pact.Tensor

__all__ = ["Error", "Tensor", "Model", "from_torch", "load", "tensor", "from_dlpack", "plan", "train", "capture",
           "cli", "ledger"]


def _fail(code, operation, detail):
    _pact.raise_error(code, operation, detail)


def from_dlpack(obj, what="tensor"):
    """A pact.Tensor over a DLPack producer's memory (a torch tensor, or a 'dltensor' capsule): zero copy."""
    return _pact.from_dlpack(obj, what)


def tensor(obj, what="tensor"):
    """A pact.Tensor over `obj`'s memory, zero copy: a pact.Tensor as it is, a buffer-protocol object (a
    numpy array: any strides, negative included), or a DLPack producer (a CPU torch tensor)."""
    if isinstance(obj, Tensor):
        return obj
    try:
        memoryview(obj)
    except TypeError:
        if hasattr(obj, "__dlpack__"):
            return _pact.from_dlpack(obj, what)
        _fail("invalid_argument", "pact.tensor",
              f"{what}: a {type(obj).__name__} is neither a buffer (numpy) nor a DLPack tensor (torch)")
    return _pact.from_buffer(obj, what)


def _as_numpy(t):
    import numpy as np
    if t.dtype == "bf16":  # numpy has no bfloat16: hand it over through DLPack as a torch tensor instead
        _fail("unsupported", "pact.Model.run", "a bf16 output has no numpy dtype; use Model.run(..., as_torch=True)")
    array = np.asarray(t)
    array.flags.writeable = False  # Pact's values are shared and read-only
    return array


class Model:
    """A PyTorch capture imported and planned once under a profile (pact.from_torch or pact.load)."""

    def __init__(self, native):
        self._native = native
        self._input_names = [name for name, _, _ in native.inputs]

    @property
    def accepted(self):
        """True when the profile admitted every kernel; otherwise .audit says which obligation failed."""
        return self._native.accepted

    @property
    def profile(self):
        return self._native.profile

    @property
    def inputs(self):
        """[(name, dtype, shape)] of the user inputs, in the order run() takes them."""
        return [(n, d, tuple(s)) for n, d, s in self._native.inputs]

    @property
    def outputs(self):
        return list(self._native.outputs)

    @property
    def audit_document(self):
        """The whole plan audit (pact.plan-audit.v1), as `pact plan --json` prints it."""
        return json.loads(self._native.audit_json())

    @property
    def audit(self):
        """Per planned node: op, capsule, provider, isa, the evidence of each obligation and the verdict
        ("accepted", or "rejected" with the failing obligations and why)."""
        doc = self.audit_document
        nodes = {}
        for k in doc["kernels"]:
            nodes[k["node"]] = {"op": k["op"], "purpose": k["purpose"], "capsule": k.get("capsule"),
                                "provider": k.get("provider"), "isa": k.get("isa"), "inputs": k["inputs"],
                                "evidence": [], "verdict": "accepted", "failing": []}
        for o in doc["obligations"]:
            entry = nodes.setdefault(o["node"], {"op": None, "capsule": o["capsule"], "provider": None, "isa": None,
                                                 "inputs": [], "evidence": [], "verdict": "accepted", "failing": []})
            entry["evidence"].append({"obligation": o["obligation"], "kind": o["evidence"]["kind"],
                                      "id": o["evidence"]["id"], "accepted": o["accepted"]})
            if not o["accepted"]:
                entry["verdict"] = "rejected"
                entry["failing"].append({"obligation": o["obligation"], "reason": o["reason"]})
        for name, entry in nodes.items():
            if entry["capsule"] is None and entry["verdict"] == "accepted":
                entry["verdict"] = "rejected"  # no capsule of the profile serves the node
        return nodes

    def run(self, *arrays, as_torch=False, **named):
        """Runs on numpy arrays, torch tensors or pact.Tensors (positionally in .inputs order, or by input
        name); returns the outputs as read-only numpy arrays (torch tensors with as_torch=True), zero copy.
        Every input must be contiguous, of the captured dtype and shape."""
        if len(arrays) > len(self._input_names):
            _fail("invalid_argument", "pact.Model.run",
                  f"{len(arrays)} inputs given, the model takes {len(self._input_names)}: {self._input_names}")
        given = list(zip(self._input_names, arrays)) + list(named.items())
        inputs = []
        for name, value in given:
            t = tensor(value, f"input '{name}'")
            if not t.is_contiguous:
                _fail("invalid_argument", "pact.Model.run",
                      f"input '{name}' is not contiguous (strides {t.strides} for shape {t.shape}); pass "
                      "np.ascontiguousarray(x) or x.contiguous()")
            inputs.append((name, t))
        outputs = self._native.run(inputs)
        if as_torch:
            import torch.utils.dlpack
            return tuple(torch.utils.dlpack.from_dlpack(t) for t in outputs)
        return tuple(_as_numpy(t) for t in outputs)

    def capture_structure(self):
        """The structure-only capture of the imported graph (pact.capture.v1 as a dict): modules, shapes as
        hypotheses, parameter counts, FLOPs and memory estimates, with no values."""
        return json.loads(self._native.capture_structure())

    def __repr__(self):
        verdict = "accepted" if self.accepted else "rejected"
        return f"pact.Model({len(self.inputs)} inputs, {len(self.outputs)} outputs, {self.profile}: {verdict})"


def load(directory, profile="cpu-checked", fuse=True):
    """A torch_export.py capture directory, imported and planned under `profile`."""
    return Model(_pact.load_capture(os.fspath(directory), profile, fuse))


def from_torch(module, *example_inputs, profile="cpu-checked", method="auto", fuse=True):
    """Exports `module` in this process on `example_inputs` (tensors or arrays), imports and plans it.
    The module is put in eval mode; run() takes inputs of the example inputs' dtypes and shapes."""
    from . import torch_export
    with tempfile.TemporaryDirectory(prefix="pact-from-torch-") as directory:
        try:
            torch_export.export_module(module, list(example_inputs), directory, method=method)
        except torch_export.ExportError as e:
            _fail("unsupported", "pact.from_torch", str(e))
        return load(directory, profile, fuse)


def plan(graph_or_path, profile="cpu-checked", vjp=False):
    """Plans a pact.ir.v1 model (a path, a dict or JSON text) or a torch_export.py directory under
    `profile`; returns the audit document (its "verdict" is "accepted" or "rejected")."""
    if isinstance(graph_or_path, dict):
        source = json.dumps(graph_or_path)
    else:
        source = os.fspath(graph_or_path)
    _, audit = _pact.plan(source, profile, vjp)
    return json.loads(audit)


def cli(*args):
    """Runs a `pact` command line in this process (cli("plan", "model.json", "--json")); returns its exit
    code. A malformed command line raises pact.Error (invalid_argument)."""
    return _pact.cli([os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args])


def _options(kwargs):
    argv = []
    for key, value in kwargs.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        else:
            argv += [flag, str(value)]
    return argv


def train(model="mlp", data=None, **options):
    """`pact train` in this process, with the CLI's options as keyword arguments (epochs=3, profile=...,
    batch_size=64, lr=..., optimizer=..., seed=..., out=..., run_dir=..., save=..., stop_after=...: each
    --option-name of `pact train --help`); returns the run's report.json as a dict (its "run_dir" says
    where it is: run_dir, or a new directory under out, "runs" by default)."""
    run_dir, made = options.pop("run_dir", None), False
    if run_dir is None:
        out = options.pop("out", "runs")
        os.makedirs(out, exist_ok=True)
        run_dir, made = tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-", time.gmtime()), dir=out), True
    elif "out" in options:
        _fail("invalid_argument", "pact.train", "run_dir names the run's directory itself: drop out")
    run_dir = os.fspath(run_dir)
    argv = ["train", "--model", str(model), "--run-dir", run_dir] + (["--data", os.fspath(data)] if data else [])
    try:
        code = cli(*argv, *_options(options))
    except Error:
        if made and not os.listdir(run_dir):
            os.rmdir(run_dir)  # the directory made for a run that never started
        raise
    if code != 0:
        _fail("internal", "pact.train", f"pact train exited with status {code}")
    with open(os.path.join(run_dir, "report.json")) as f:
        report = json.load(f)
    report["run_dir"] = run_dir
    return report


def capture(model="llama", config=None, structure_only=True, **options):
    """`pact capture` in this process: `model` is llama, mlp, cnn, a pact.ir.v1 file or a torch_export.py
    directory; config a llama configuration (7b, 13b, 70b, tiny or a Hugging Face config.json); options as
    the CLI's (batch=, seq=, optimizer=, seed=). Returns the capture (pact.capture.v1) as a dict."""
    with tempfile.TemporaryDirectory(prefix="pact-capture-") as directory:
        path = os.path.join(directory, "capture.json")
        argv = ["capture", os.fspath(model), "-o", path] + (["--config", os.fspath(config)] if config else [])
        if structure_only:
            argv.append("--structure-only")
        with open(os.devnull, "w") as quiet, _redirect_stdout(quiet):
            code = cli(*argv, *_options(options))
        if code != 0:
            _fail("internal", "pact.capture", f"pact capture exited with status {code}")
        with open(path) as f:
            return json.load(f)


class _redirect_stdout:
    """Points file descriptor 1 (what the C++ side prints to) at `target` for a with block."""

    def __init__(self, target):
        self._target = target

    def __enter__(self):
        import sys
        sys.stdout.flush()
        self._saved = os.dup(1)
        os.dup2(self._target.fileno(), 1)

    def __exit__(self, *exc):
        import ctypes
        ctypes.CDLL(None).fflush(None)  # what C's stdio buffered goes where it was meant to
        os.dup2(self._saved, 1)
        os.close(self._saved)


class ledger:
    """Records the allocation and copy ledgers of the Pact work in a with block:

        with pact.ledger() as events:
            y = model.run(x)
        events.copies        # [] when nothing was copied
        events.allocations   # [{"reason", "bytes", "provider"}]
    """

    def __enter__(self):
        self._recorder = _pact.Recorder()
        self._recorder.start()
        return self

    def __exit__(self, *exc):
        self._recorder.stop()

    @property
    def allocations(self):
        return self._recorder.allocations

    @property
    def copies(self):
        return self._recorder.copies
