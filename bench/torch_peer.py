"""How the PyTorch peer is held to what Pact runs with: its thread count, OpenBLAS included, and on a
forced ISA level its own kernels' level.

Debian's torch 1.13 is built with BLAS=generic: torch.set_num_threads does not reach OpenBLAS, which runs
torch's linear, mm and bmm on every core (2 threads on a 2-core machine) unless told otherwise. A
"1 thread" PyTorch figure taken without hold_torch_to measures two cores on every matrix product. The peer
measurements in ../shared/bench (torch_bench.py) do the same.

On an AVX-512 machine, PACT_ISA=avx2 with OPENBLAS_CORETYPE=Haswell (or Zen) measures Pact's AVX2 level
against a PyTorch held to AVX2 as well (ATEN_CPU_CAPABILITY, DNNL_MAX_CPU_ISA): a like-for-like proxy
whose verdicts are "proxy", never "pass"; any other forced OpenBLAS kernel makes them "invalid".

Left to choose, an OpenBLAS may choose a kernel below the CPU's level (0.3.21 runs its SSE3 Prescott kernel
on an Emerald Rapids it does not know): PyTorch's matrix products then do not use the machine, and every
verdict against it is "invalid" (baseline_degraded, as in pact/core/bench_report.hpp) until a matched kernel
is forced.
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


def kernel_level(corename):
    """The vector level of an OpenBLAS kernel (openblas_kernel_level in pact/core/bench_report.cpp)."""
    c = corename.lower()
    if c in ("skylakex", "cooperlake", "sapphirerapids"):
        return "avx512"
    return "avx2" if c in ("haswell", "zen") else "portable"


def cpu_level():
    """This CPU's best level as OpenBLAS's SGEMM counts it: avx512, avx2 (with FMA) or portable."""
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    if "avx512f" in flags:
        return "avx512"
    return "avx2" if {"avx2", "fma"} <= flags else "portable"


def degraded_baseline():
    """(degraded, note): unforced, whether the OpenBLAS torch loaded chose a kernel below the CPU's level.
    Call after hold_torch_to (torch and its OpenBLAS loaded)."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return False, ""
    order = ("portable", "avx2", "avx512")
    for path in sorted({line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line and ".so" in line}):
        library = ctypes.CDLL(path)
        if hasattr(library, "openblas_get_corename"):
            library.openblas_get_corename.restype = ctypes.c_char_p
            core = library.openblas_get_corename().decode()
            kernel, cpu = kernel_level(core), cpu_level()
            if order.index(kernel) < order.index(cpu):
                forced = "SkylakeX" if cpu == "avx512" else "Haswell"
                return True, (f"PyTorch's OpenBLAS chose its {core} kernel ({kernel}) on a CPU that runs {cpu}: "
                              f"verdicts invalid; OPENBLAS_CORETYPE={forced} PACT_ISA={cpu} gives a matched proxy")
            return False, ""
    return False, ""


def verdict(met, forced, proxy, degraded=False):
    """pass | fail, or proxy on a matched forced level, invalid on an unmatched one or a degraded baseline."""
    if (forced and not proxy) or degraded:
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
