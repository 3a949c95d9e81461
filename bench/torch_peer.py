"""How the PyTorch peer is held to what Pact runs with: its thread count, OpenBLAS included, and on a
forced ISA level its own kernels' level.

Debian's torch 1.13 is built with BLAS=generic: torch.set_num_threads does not reach OpenBLAS, which runs
torch's linear, mm and bmm on every core (2 threads on a 2-core machine) unless told otherwise. A
"1 thread" PyTorch figure taken without hold_torch_to measures two cores on every matrix product. The peer
measurements in ../shared/bench (torch_bench.py) do the same.

On an AVX-512 machine, PACT_ISA=avx2 with OPENBLAS_CORETYPE=Haswell (or Zen) measures Pact's AVX2 level
against a PyTorch held to AVX2 as well (ATEN_CPU_CAPABILITY, DNNL_MAX_CPU_ISA): a like-for-like proxy
whose verdicts are "proxy", never "pass"; any other forced OpenBLAS kernel makes them "invalid".
"""

import ctypes
import os


def forced_level():
    """(forced, proxy) for this run, from OPENBLAS_CORETYPE and PACT_ISA; on a matched AVX2 proxy, holds
    PyTorch's ATen and oneDNN kernels to AVX2. Call before torch is imported."""
    forced = os.environ.get("OPENBLAS_CORETYPE")
    isa = os.environ.get("PACT_ISA", "")
    proxy = bool(forced) and ((isa == "avx2" and forced in ("Haswell", "Zen")) or
                              (isa == "avx512" and forced in ("SkylakeX", "Cooperlake", "SapphireRapids")))
    if proxy and isa == "avx2":
        os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
        os.environ.setdefault("DNNL_MAX_CPU_ISA", "AVX2")
        os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
    return bool(forced), proxy


def verdict(met, forced, proxy):
    """pass | fail, or proxy on a matched forced level, invalid on an unmatched one."""
    if forced and not proxy:
        return "invalid"
    if not met:
        return "fail"
    return "proxy" if forced else "pass"


def hold_torch_to(threads):
    """torch.set_num_threads(threads) and openblas_set_num_threads(threads) on the OpenBLAS torch loaded.
    Exits if torch's OpenBLAS cannot be found or does not take the count."""
    import torch
    torch.set_num_threads(threads)
    libraries = sorted({line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line and ".so" in line})
    held = []
    for path in libraries:
        library = ctypes.CDLL(path)
        if hasattr(library, "openblas_set_num_threads"):
            library.openblas_set_num_threads(threads)
            if library.openblas_get_num_threads() != threads:
                raise SystemExit(f"{path} did not take {threads} thread(s)")
            held.append(path)
    if not held:
        raise SystemExit("no OpenBLAS is loaded with torch: cannot hold its matrix products to "
                         f"{threads} thread(s)")
    return held
