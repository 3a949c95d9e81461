#!/usr/bin/env bash
# Checks every commit that changed the obligations ledger against its parent (`pact ledger check
# --base-commit PARENT`, at that commit's tree), so the promotion and revision rules run on real history:
# an active row edited, removed or demoted, or a registry edit without a revision, fails here.
#   scripts/ledger-history.sh [SINCE]   commits after SINCE (default: every commit after the one that
#                                       introduced the v2 manifest); needs build/release/bin/pact
set -euo pipefail
cd "$(dirname "$0")/.."
manifest=ledger/obligations.toml
pact="$PWD/build/release/bin/pact"
if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
  echo "ledger-history: a shallow clone has no history to check; fetch with --unshallow" >&2
  exit 2
fi
since=${1:-$(git log --diff-filter=A --format=%H -- "$manifest" | tail -1)}
worktree=$(mktemp -d)
trap 'git worktree remove --force "$worktree" >/dev/null 2>&1 || true; rm -rf "$worktree"' EXIT
checked=0
for commit in $(git rev-list --reverse "$since..HEAD" -- "$manifest"); do
  git worktree remove --force "$worktree" >/dev/null 2>&1 || rm -rf "$worktree"
  git worktree add --quiet --detach "$worktree" "$commit"
  if ! out=$("$pact" ledger check --root "$worktree" --manifest "$manifest" --base-commit "$commit^" 2>&1); then
    echo "ledger-history: $(git log -1 --format='%h %s' "$commit" | cut -c1-100)" >&2
    echo "$out" | grep -E '^E_' >&2 || echo "$out" >&2
    exit 1
  fi
  checked=$((checked + 1))
done
echo "ledger-history: $checked ledger-changing commits since $(git rev-parse --short "$since") each pass against their parent"
