#!/usr/bin/python3
"""PyTorch's first training step of a fixture model, in float64: the truth tests/interop/torch_finetune_test.cpp
holds `pact train --model DIR`'s gradients to.

    /usr/bin/python3 tests/interop/torch_first_step.py MODULE:FACTORY DIR LOSS REPEAT OUT

builds the module, loads DIR/weights.safetensors, switches it to training mode with every dropout at 0 (the
capture was recorded in evaluation mode, where dropout is the identity), feeds DIR/example_input.safetensors
repeated REPEAT times along the batch axis, and computes LOSS (cross_entropy against class ids i % classes,
or mse against sin(0, 1, 2, ...) in the output's shape). Writes OUT (safetensors): the input `x`, the
`target`, the `loss` and `grad.NAME` for every parameter.
"""

import importlib
import os
import sys

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, ROOT)
from torch_export import torch, write_safetensors  # noqa: E402
from op_oracle import read_safetensors  # noqa: E402


def main(target, capture, loss_kind, repeat, out):
    module, factory = target.split(":")
    model = getattr(importlib.import_module(module), factory)()
    state = read_safetensors(os.path.join(capture, "weights.safetensors"))
    model.load_state_dict({k: v for k, v in state.items()}, strict=False)
    model = model.double().train()
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        if isinstance(m, torch.nn.MultiheadAttention):
            m.dropout = 0.0
    (x,) = read_safetensors(os.path.join(capture, "example_input.safetensors")).values()
    x = torch.cat([x] * repeat).double()
    y = model(x)
    if loss_kind == "cross_entropy":
        target = torch.arange(y.shape[0]) % y.shape[1]
        loss = torch.nn.functional.cross_entropy(y, target)
    else:
        target = torch.sin(torch.arange(y.numel(), dtype=torch.float64)).reshape(y.shape)
        loss = torch.nn.functional.mse_loss(y, target)
    loss.backward()
    tensors = [("x", x.float()), ("target", target if loss_kind == "cross_entropy" else target.float()),
               ("loss", loss.detach())]
    for name, p in model.named_parameters():
        if p.grad is not None:
            tensors.append(("grad." + name, p.grad))
    write_safetensors(out, tensors)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]))
