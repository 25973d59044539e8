#!/bin/bash
# Nodes as Debian installs them: each in a network of its own, reached at
# 10.77.0.N, and each naming itself 127.0.1.1 in its own /etc/hosts. gloo
# takes the address of its host name unless GLOO_SOCKET_IFNAME says
# otherwise, so on rank 0's node it offers 127.0.1.1, which no other node
# reaches: the plugin must give every task the interface its node reaches
# the others through.
. "$(dirname "$0")/lib.sh"

# Network namespaces, veth pairs and a bridge: root, and a kernel that
# has them.
if ! { ip netns add dt-probe && ip netns del dt-probe &&
       ip link add dt-probe0 type veth peer name dt-probe1 &&
       ip link del dt-probe0; } >/dev/null 2>&1; then
	skip_all "no network namespaces with veth pairs here (root and iproute2 needed)"
fi
export DT_CLUSTER_NETNS=1
cluster_start
plan 16

job_file allreduce.py < "$(dirname "$0")/allreduce.py"
# What users write by hand, with a timeout short enough to see it fail.
job_file by-hand.py <<'EOF'
import datetime, os, subprocess
import torch, torch.distributed as dist
os.environ["MASTER_ADDR"] = subprocess.run(
    ["scontrol", "show", "hostnames", os.environ["SLURM_STEP_NODELIST"]],
    capture_output=True, text=True, check=True).stdout.split()[0]
os.environ.setdefault("MASTER_PORT", "29555")
os.environ["RANK"] = os.environ["SLURM_PROCID"]
os.environ["WORLD_SIZE"] = os.environ["SLURM_NTASKS"]
os.environ["USE_LIBUV"] = "0"  # torch 2.6 of Debian 13 has no libuv
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=15))
t = torch.ones(1)
dist.all_reduce(t)
print(f"BYHAND sum={int(t.item())}", flush=True)
EOF

job srun -N2 -n2 sh -c 'echo "HOSTS $(hostname) $(getent hosts "$(hostname)" | cut -d" " -f1)"'
check "each node names itself 127.0.1.1, as Debian's /etc/hosts does" \
	test "$(count_lines '^HOSTS n[12] 127\.0\.1\.1$')" = 2 || show_output

job srun -N2 -n2 /usr/bin/python3 by-hand.py
rc=$?
check "by hand (MASTER_ADDR from scontrol show hostnames), gloo cannot connect the nodes" \
	eval '[ $rc != 0 ] && [ "$(count_lines "^BYHAND ")" = 0 ] && grep -q -i "gloo" "$ERR"' || show_output

job srun -N4 -n8 --dist-train /usr/bin/python3 allreduce.py
check "srun --dist-train: a gloo all_reduce across the 4 nodes" \
	test "$(count_lines '^ALLREDUCE rank=[0-7] world=8 sum=28 ')" = 8 || show_output
# A step started inside another step's rank 0 inherits that step's list
# of proven addresses; without a barrier of its own (no PMIx, no check),
# its store is guarded by owner alone, not by a list of other nodes.
job srun -N2 -n2 --mpi=none --export=ALL,DIST_TRAIN_STORE_PEERS=10.77.0.254 \
	--dist-train /usr/bin/python3 allreduce.py
check "... also where the tasks inherit another step's DIST_TRAIN_STORE_PEERS: rank 1 on another node reaches the store" \
	test "$(count_lines '^ALLREDUCE rank=[01] world=2 sum=1 ')" = 2 || show_output
job srun -N4 -n8 --dist-train sh -c 'echo "IF $(hostname) $GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME"'
check "... every task gets the interface towards the other nodes (eth0), also on rank 0's node" \
	test "$(count_lines '^IF n[1-4] eth0 =eth0$')" = 8 || show_output

job srun -N4 -n8 --dist-train=check /usr/bin/python3 allreduce.py
check "srun --dist-train=check (the helper): the same all_reduce" \
	test "$(count_lines '^ALLREDUCE rank=[0-7] world=8 sum=28 ')" = 8 || show_output

job srun -N4 -n8 --mpi=pmix --dist-train /usr/bin/python3 allreduce.py
pmix_check "srun --mpi=pmix --dist-train: the same all_reduce" \
	test "$(count_lines '^ALLREDUCE rank=[0-7] world=8 sum=28 ')" = 8 || show_output
job srun -N4 -n8 --mpi=pmix --dist-train sh -c 'echo "IF $(hostname) $GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME"'
pmix_check "... with the interface the ranks reached rank 0 through (eth0)" \
	test "$(count_lines '^IF n[1-4] eth0 =eth0$')" = 8 || show_output

# torchrun's workers inherit the agent's environment: the same interface.
job srun -N2 --ntasks-per-node=1 --dist-train=torchrun,nproc=2 torchrun allreduce.py
check "srun --dist-train=torchrun: the workers' gloo all_reduce across nodes" \
	test "$(count_lines 'ALLREDUCE rank=[0-3] world=4 sum=6 ')" = 4 || show_output

# Rank 0's store admits only the step's own (common/store_guard.h): with
# a start barrier (check: the helper's; PMIx: the lean one), a connection
# from an address no node proved itself from (this machine, standing for a
# login node, even as the job's user) is closed before the store reads it,
# as is another user's on rank 0's node; the job's user there is served,
# and the ranks' own use of the store goes on after the refusals.
OWNER=${DT_CLUSTER_USER:-dttest}
OTHER=${DT_TEST_OTHER_USER:-dtother}
id "$OTHER" >/dev/null 2>&1 || useradd --no-create-home --shell /bin/sh "$OTHER" ||
	{ echo "Bail out! cannot create the user $OTHER"; exit 1; }
guarded() { # NAME SRUN-ARGS...
	local name=$1 rc log=$GUARD/intrude.log
	shift
	guarded_step 10.77.0.1 "owner $OWNER n1
login $OWNER
other $OTHER n1" "$@"
	rc=$?
	diag "$name: $(tr '\n' ' ' < "$log")(exit $rc)"
	check "$name: only the step's nodes reach rank 0's store, not this machine nor another user on rank 0's node" \
		eval '[ $rc = 0 ] && [ "$(count_lines "GUARDED rank=")" -ge 2 ] && [ "$(count_lines "GUARDED rank=.* store=stuck")" = 0 ] && grep -q "^INTRUDE login tries=3 admitted=0 " "$log" && grep -q "^INTRUDE other tries=3 admitted=0 " "$log" && grep -q "^INTRUDE owner tries=3 admitted=3 " "$log"' ||
		{ show_output; diag "$(cat "$log")"; }
}
guarded "srun --dist-train=check" -N4 -n8 --dist-train=check python3
check "... rank 0's program says once whom its store refused first" \
	test "$(grep -c "rank 0's store (port [0-9]*) refused a connection from 10.77.0.254 (no node of the step proved itself from that address)" "$ERR")" = 1 ||
	show_output
if slurm_has_pmix; then
	guarded "srun --mpi=pmix --dist-train" -N4 -n8 --mpi=pmix --dist-train python3
else
	pmix_check "srun --mpi=pmix --dist-train: only the step's nodes reach rank 0's store" false
fi
guarded "torchrun mode's rendezvous store" -N2 --ntasks-per-node=1 --dist-train=torchrun torchrun

# A rank on another node whose source port is one that a server of
# another user listens on at rank 0's node: the kernel's lookup of the
# rank's socket falls back to that listener, which is not the rank's.
# With a barrier (n2 proved itself) and without (another node's address).
# Below the plugin's default port range (20000-28999): a port inside it is
# the step's own MASTER_PORT for some job id, whose rank 0 then found it
# taken, rightly, and the check failed for that job alone.
LISTEN_PORT=19876
nsenter --net=/run/netns/dt-n1 runuser -u "$OTHER" -- python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("", int(sys.argv[1])))
s.listen()
time.sleep(600)' $LISTEN_PORT &
listener=$!
at_exit "kill $listener 2>/dev/null"
for mode in default check; do
	GUARD_RAW=1 guarded_step - "owner-n2 $OWNER port=$LISTEN_PORT 10.77.0.1 n2" \
		-N2 -n2 -w n1,n2 --mpi=none \
		"--dist-train$([ $mode = check ] && echo =check)" python3
	rc=$?
	diag "source port of a listener, $mode: $(cat "$GUARD/intrude.log" "$GUARD/intrude.err" "$OUT") (exit $rc)"
	check "--dist-train$([ $mode = check ] && echo =check): a connection from n2 whose source port another user listens on at rank 0's node is read" \
		eval '[ $rc = 0 ] && grep -qx "RAW read=owner-n2" "$OUT"' || show_output
done

# srun out of reach of one node's slurmstepd: n2 drops (never refuses)
# what it sends to srun's watch port, so its report of how rank 1 ended
# (plugin/report.c) waits for an answer that never comes. The report is
# bounded: n2's slurmstepd gives up after a second and says so in its
# log, and the step ends as rank 0 does, a few seconds later; srun hears
# of rank 1's exit as Slurm tells it.
what="srun's watch port dropped from n2: rank 1's report gives up in a second and the step ends with rank 0"
if ! command -v nft >/dev/null; then
	skip_check "$what" "no nft (nftables; contrib/install-deps.sh installs it)"
else
	job_file drop_fail.sh <<'EOF'
#!/bin/sh
[ "$SLURM_PROCID" = 0 ] && echo "$SLURM_JOB_ID.$SLURM_STEP_ID" > .bg_step
while [ ! -e .dropped ]; do sleep 0.1; done
[ "$SLURM_PROCID" = 1 ] && exit 3
exec sleep 5
EOF
	rm -f "$JOBS/.dropped"
	bg_step -N2 -n2 -w n1,n2 --dist-train ./drop_fail.sh
	port=$(srun_watch_port)
	at_exit "nsenter --net=/run/netns/dt-n2 nft delete table inet dt_drop 2>/dev/null"
	nsenter --net=/run/netns/dt-n2 nft -f - <<-EOF
	table inet dt_drop {
		chain out {
			type filter hook output priority 0;
			tcp dport ${port:-0} drop
		}
	}
	EOF
	dropped=$?
	start=$(date +%s)
	touch "$JOBS/.dropped"
	wait $runner
	rc=$?
	took=$(( $(date +%s) - start ))
	nsenter --net=/run/netns/dt-n2 nft delete table inet dt_drop
	diag "watch port ${port:-(not found)} dropped from n2 (nft: $dropped): srun exit $rc after $took s"
	check "$what ($took s)" \
		eval '[ -n "$port" ] && [ $dropped = 0 ] && [ $rc != 0 ] && [ $took -lt 20 ] &&
		      grep -q "task 1: Exited with exit code 3" "$ERR" &&
		      grep -q "step $step_now: srun at .*:$port did not hear how task 1 ended (" \
		          "$DT_CLUSTER_DIR/log/slurmd-n2.log"' || show_output
	rm -f "$JOBS/.dropped"
fi

finish
