#!/usr/bin/python3
"""Pact from Python in one page (docs/guides/python.md walks through it). Run from the checkout:

    PYTHONPATH=build/release/python /usr/bin/python3 examples/python/quickstart.py

It exits non-zero when one of its own checks fails, so it is also a test (example.python_quickstart).
"""

import numpy as np
import torch

import pact

# 1. A PyTorch module, exported in this process, imported and planned once under a profile.
torch.manual_seed(0)
module = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                             torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10))
module.eval()
x = torch.randn(2, 3, 16, 16)
model = pact.from_torch(module, x, profile="cpu-checked")
print(model)

# 2. The plan audit: which capsule runs each node, from which provider, on what evidence.
for node, entry in model.audit.items():
    kinds = sorted({e["kind"] for e in entry["evidence"]})
    print(f"  {node:<24} {entry['op']:<20} {entry['capsule']:<28} {entry['isa'] or '':<12} {entry['verdict']}  {kinds}")

# 3. Run on numpy arrays (or torch tensors): outputs come back as read-only numpy arrays, nothing copied.
(logits,) = model.run(x.numpy())
with torch.no_grad():
    want = module(x).numpy()
error = float(np.abs(logits - want).max()) / max(1.0, float(np.abs(want).max()))
print(f"max |pact - torch| / max(1, max|torch|) = {error:.2e}")
assert error <= 1e-4, error

# 4. Values cross without copies: the copy ledger of a 4 MiB array in and out is empty.
big = np.ones(1 << 20, dtype=np.float32)
with pact.ledger() as events:
    back = np.asarray(pact.tensor(big))
assert events.copies == [] and back.ctypes.data == big.ctypes.data

# 5. Errors are pact.Error with Pact's code, and name what was wrong.
try:
    model.run(x.numpy().astype(np.float64))
except pact.Error as e:
    print(f"refused ({e.code}): {e}")
    assert e.code == "invalid_argument" and "input" in str(e)
else:
    raise AssertionError("a float64 input was accepted")
print("ok")
