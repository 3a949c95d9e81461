#!/usr/bin/env bash
# expect.sh RC REGEX COMMAND [ARGS...]: runs COMMAND, passes when it exits with RC and its combined
# stdout+stderr matches the extended regular expression REGEX ("-": any output, including none). Used by
# the CLI tests (tests/cli) and the contract probes (tests/contracts).
set -u
want_rc=$1 regex=$2
shift 2
out=$("$@" 2>&1)
rc=$?
if [ "$rc" -ne "$want_rc" ]; then
  printf 'expected exit %s, got %s from: %s\n%s\n' "$want_rc" "$rc" "$*" "$out"
  exit 1
fi
if [ "$regex" != "-" ] && ! printf '%s' "$out" | grep -Eq -- "$regex"; then
  printf 'output of %s does not match /%s/:\n%s\n' "$*" "$regex" "$out"
  exit 1
fi
exit 0
