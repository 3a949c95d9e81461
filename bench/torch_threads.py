"""Hold PyTorch to a thread count, OpenBLAS included.

Debian's torch 1.13 is built with BLAS=generic: torch.set_num_threads does not reach OpenBLAS, which runs
torch's linear, mm and bmm on every core (2 threads on a 2-core machine) unless told otherwise. A
"1 thread" PyTorch figure taken without this measures two cores on every matrix product. The peer
measurements in ../shared/bench (torch_bench.py) do the same.
"""

import ctypes


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
