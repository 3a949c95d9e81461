#!/usr/bin/env bash
# probe.sh COMMAND [ARGS...]: passes when COMMAND exits 0, writes exactly one JSON object to stdout and
# nothing to stderr (the ledger tools' --contract-schema availability handshake).
set -u
err=$(mktemp)
trap 'rm -f "$err"' EXIT
out=$("$@" 2>"$err")
rc=$?
if [ "$rc" -ne 0 ]; then echo "exit $rc from: $*"; exit 1; fi
if [ -s "$err" ]; then echo "stderr is not empty:"; cat "$err"; exit 1; fi
printf '%s' "$out" | python3 -c '
import json, sys
text = sys.stdin.read()
value, end = json.JSONDecoder().raw_decode(text)
if not isinstance(value, dict) or text[end:].strip():
    sys.exit("stdout is not exactly one JSON object")
' || exit 1
exit 0
