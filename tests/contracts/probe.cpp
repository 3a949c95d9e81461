// The build-time contract check's probe: one annotation, chosen by -DPROBE_CONTRACT / -DPROBE_EQUATION,
// compiled with -fsyntax-only against a generated binding table (or none: the unchecked consumer).
#include "pact/kernels/annotate.hpp"

PACT_CONTRACT(PROBE_CONTRACT, PROBE_EQUATION);

int main() { return 0; }
