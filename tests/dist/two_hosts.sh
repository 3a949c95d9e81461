#!/usr/bin/env bash
# dist.two_hosts: data-parallel training across two network namespaces, as across two hosts. Each rank runs
# in its own namespace (its own UTS name too), which holds one end of a veth pair and nothing else but
# loopback; mpirun starts the second rank's daemon through an rsh agent that enters that namespace, and
# MPI talks TCP over the veth pair. The 2-rank run follows one process at twice the batch (step losses
# within 1e-5), and the veth pair carried the gradients (its byte counters). Needs root with
# CAP_SYS_ADMIN and CAP_NET_ADMIN (ip netns); without them it says so and skips (exit 77).
# Usage: two_hosts.sh MPIRUN PACT SCRATCH
set -euo pipefail
mpirun=$1 pact=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
fail() { echo "dist.two_hosts: $*" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1

tag=$$
a=pact-a-$tag b=pact-b-$tag va=pva$tag vb=pvb$tag
net=10.231.$((tag % 250)).
if ! command -v ip > /dev/null || ! ip netns add "$a" 2> "$scratch/netns.err"; then
  echo "dist.two_hosts: skipped: cannot create a network namespace here ($(cat "$scratch/netns.err" 2> /dev/null))"
  exit 77
fi
cleanup() { ip netns del "$a" 2> /dev/null || true; ip netns del "$b" 2> /dev/null || true; }
trap cleanup EXIT
ip netns add "$b"
ip link add "$va" type veth peer name "$vb"
ip link set "$va" netns "$a"
ip link set "$vb" netns "$b"
ip -n "$a" addr add "${net}1/24" dev "$va"
ip -n "$b" addr add "${net}2/24" dev "$vb"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "$va" up
ip -n "$b" link set "$vb" up

# The rsh agent: mpirun calls it as `agent [options] HOST COMMAND...` to start a daemon on HOST; HOST is
# the second namespace's address, and the daemon runs inside that namespace under its own host name.
agent=$scratch/netns-agent.sh
cat > "$agent" <<AGENT
#!/usr/bin/env bash
while [ "\${1:-}" != "${net}2" ]; do [ \$# -gt 0 ] || { echo "netns agent: no host ${net}2 in its arguments" >&2; exit 2; }; shift; done
shift
echo "\$*" >> "$scratch/agent.log"
exec ip netns exec "$b" unshare --uts sh -c 'hostname pact-host-b && exec sh -c "\$0"' "\$*"
AGENT
chmod +x "$agent"
printf '%s slots=1\n%s slots=1\n' "${net}1" "${net}2" > "$scratch/hosts"

bytes() { ip -n "$b" -s -j link show "$vb" | /usr/bin/python3 -c 'import json,sys; s=json.load(sys.stdin)[0]["stats64"]; print(s["rx"]["bytes"] + s["tx"]["bytes"])'; }
before=$(bytes)
# mpirun and rank 0 in the first namespace (host pact-host-a), rank 1 through the agent in the second.
ip netns exec "$a" unshare --uts sh -c 'hostname pact-host-a && exec "$@"' sh \
  "$mpirun" --hostfile "$scratch/hosts" -np 2 --map-by node --bind-to none --wdir "$PWD" \
  --mca plm_rsh_agent "$agent" --mca btl tcp,self --mca btl_tcp_if_include "${net}0/24" \
  --mca oob_tcp_if_include "${net}0/24" -x OMP_NUM_THREADS \
  "$pact" train --data-parallel --epochs 1 --batch-size 16 --seed 8 --comm-timeout 60 --run-dir "$scratch/dp" \
  > "$scratch/dp.out" 2>&1 || { cat "$scratch/dp.out" >&2; fail "the two-namespace job failed"; }
carried=$(($(bytes) - before))
# Each namespace is a host of one rank, so each (unbound) rank takes all of its host's cores by default.
cores=$(env -u OMP_NUM_THREADS nproc)  # this process's affinity, which the ranks inherit (nproc alone reads OMP_NUM_THREADS)
grep -q "$cores thread(s) per rank" "$scratch/dp.out" || fail "a rank alone on its host did not take its $cores cores"
grep -q orted "$scratch/agent.log" || fail "mpirun did not start the second rank's daemon through the agent"
"$pact" train --epochs 1 --batch-size 32 --seed 8 --threads 1 --run-dir "$scratch/one" > /dev/null
/usr/bin/python3 - "$scratch" "$carried" <<'PY'
import json, sys
d, carried = sys.argv[1], int(sys.argv[2])
dp, one = (json.load(open(f"{d}/{n}/report.json")) for n in ("dp", "one"))
a, b = dp["step_loss"], one["step_loss"]
assert len(a) == len(b) > 10, (len(a), len(b))
worst = max(abs(x - y) for x, y in zip(a, b))
assert worst < 1e-5, f"step losses across the namespaces differ from one process by {worst}"
# Every update sends the MLP's gradients (f32) at least once each way.
gradient_bytes = 4 * 9610  # the digits MLP: 9 610 parameters
assert carried > len(a) * gradient_bytes, f"the veth pair carried {carried} bytes for {len(a)} updates"
print(f"dist.two_hosts: {len(a)} updates across two namespaces, step losses within {worst:.2g} of one process; "
      f"the veth pair carried {carried} bytes")
PY
