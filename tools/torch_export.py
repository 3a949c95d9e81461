#!/usr/bin/python3
"""Capture a PyTorch module into Pact's captured-graph schema (pact.torch-export.v1).

    /usr/bin/python3 tools/torch_export.py MODULE:FACTORY --input-shape 1,3,32,32 [--input-dtype f32] -o DIR

A thin wrapper: the exporter is a module of the `pact` Python package (python/pact/torch_export.py, whose
docstring gives the schema), which pact.from_torch runs in-process. It is loaded here by path, without the
package's native half, so the script works from a source tree with no build.
"""

import importlib.util
import os
import sys

sys.dont_write_bytecode = True
_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python", "pact", "torch_export.py")
_spec = importlib.util.spec_from_file_location("pact_torch_export", _path)
_module = importlib.util.module_from_spec(_spec)
sys.modules["pact_torch_export"] = _module
_spec.loader.exec_module(_module)

# What other scripts take from here (tools/op_oracle.py, tests/interop/torch_first_step.py).
torch = _module.torch
write_safetensors = _module.write_safetensors
export = _module.export
export_module = _module.export_module
ExportError = _module.ExportError
main = _module.main

if __name__ == "__main__":
    main()
