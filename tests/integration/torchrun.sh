#!/bin/bash
# --dist-train=torchrun: torchrun under srun with nothing on its command
# line, its workers bound, and elastic training that survives a lost node.
. "$(dirname "$0")/lib.sh"

cluster_start
# As installed (tests/run.sh's package test), the first two steps: the
# package's worker library and Python hook in torchrun mode. The rest
# tests the plugin's logic, which the build tree's run already covers.
installed=${DT_TEST_INSTALLED:-0}
if [ "$installed" = 1 ]; then plan 5; else plan 19; fi

job_file tr.py <<'EOF'
import os
import socket

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank())])
dist.all_reduce(t)
status = open("/proc/self/status").read()
allowed = status.split("Cpus_allowed_list:")[1].split()[0]
# One write per line (see contrib/examples/train_ddp.py).
print(f"TR rank={dist.get_rank()} world={dist.get_world_size()} "
      f"local={os.environ['LOCAL_RANK']} sum={int(t.item())} "
      f"host={socket.gethostname()} allowed={allowed} "
      f"cpus={os.environ.get('DIST_TRAIN_CPUS')}\n", end="", flush=True)
dist.destroy_process_group()
EOF
job_file train_elastic.py < "$TOP_SRCDIR/contrib/examples/train_elastic.py"
job_file train_ddp.py < "$TOP_SRCDIR/contrib/examples/train_ddp.py"

# Fixed size: 4 agents, 2 workers each (no GPU here: --cpus-per-task).
job srun -N4 --ntasks-per-node=1 -c2 --dist-train=torchrun,verbose torchrun tr.py
check "srun --dist-train=torchrun torchrun tr.py: 4 nodes x 2 workers" \
	test "$(grep -c 'TR rank=[0-7] world=8 local=[01] sum=28 host=n[1-4] ' "$OUT")" = 8 || show_output
check "... ranks 0-7 from torchrun, two per node" \
	eval '[ "$(grep -o "TR rank=[0-7]" "$OUT" | sort -u | wc -l)" = 8 ] && [ "$(grep -o "host=n[1-4]" "$OUT" | sort | uniq -c | awk "\$1 == 2" | wc -l)" = 4 ]' || show_output
check "... each worker bound to its own core by the plan" \
	test "$(grep -c 'TR .* local=0 .* allowed=0 cpus=0$' "$OUT")" = 4 -a "$(grep -c 'TR .* local=1 .* allowed=1 cpus=1$' "$OUT")" = 4 || show_output
check "... the agents were configured through PET_* alone" \
	test "$(grep -c '^dist-train: rank [0-3] on n[1-4]: PET_NNODES=4 PET_NPROC_PER_NODE=2 PET_RDZV_BACKEND=c10d PET_RDZV_ENDPOINT=n1:[0-9]* PET_RDZV_ID=[0-9]*\.0 PET_MAX_RESTARTS=3 ' "$ERR")" = 4 || show_output

job srun -N2 --ntasks-per-node=1 --dist-train=torchrun,nproc=3 torchrun tr.py
check "nproc=3: three workers per node" \
	test "$(grep -c 'TR rank=[0-5] world=6 ' "$OUT")" = 6 || show_output
if [ "$installed" = 1 ]; then
	finish
	exit
fi

# Elastic 2:4: lose a node mid-training, finish with the others.
lose_node() { # NODE...: kill its agent and workers, as a node crash would
	local n pids
	for n in "$@"; do
		pids+=" $(tr ' ' '\n' < "$JOBS/snap.pt.pids.$n")"
	done
	[ -n "${pids// /}" ] || diag "lose_node $*: no pids to kill"
	kill -9 $pids 2>/dev/null
}
wait_for() { # PATTERN FILE SECONDS
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		grep -q "$1" "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
rm -f "$JOBS"/snap.pt*
: > "$OUT"
timeout -k 10 240 "$DT_CLUSTER" run env PET_RDZV_CONF=join_timeout=60,last_call_timeout=3 \
	srun --no-kill -N4 --ntasks-per-node=1 -c2 \
	--dist-train=torchrun,elastic=2:4,restarts=3 \
	torchrun train_elastic.py --snapshot "$JOBS/snap.pt" --epochs 30 \
	--epoch-seconds 0.5 > "$OUT" 2> "$ERR" &
runner=$!
if wait_for 'epoch 3/30' "$OUT" 120; then
	lose_node n4
fi
# When training finished (rank 0's last line), and when the step ended.
done_at=
while kill -0 $runner 2>/dev/null; do
	[ -z "$done_at" ] && grep -q 'done: [0-9]* epochs' "$OUT" 2>/dev/null && done_at=$(date +%s.%N)
	sleep 0.1
done
wait $runner
after_done=$(awk -v a="${done_at:-0}" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
check "elastic 2:4: training finishes after losing node n4" \
	grep -q 'done: 30 epochs, final world 6' "$OUT" || show_output
check "... and the step ends within seconds of it (${after_done} s)" \
	eval '[ -n "$done_at" ] && awk -v t="$after_done" "BEGIN { exit !(t < 30) }"' || show_output
# TORCHELASTIC_RESTART_COUNT counts an agent's own restarts: with torch
# 1.13 every agent counts the one that follows a lost node; from 2.x on
# only those whose workers failed do, the others re-form without counting.
check "... its workers saw the restart and resumed from the snapshot" \
	eval '[ "$(grep -c "start rank=[0-5] world=6 host=n[1-3] restart=[01] requeue=0 epoch=[1-9]" "$OUT")" = 6 ] &&
	      grep -q "start rank=[0-5] world=6 host=n[1-3] restart=1 requeue=0 epoch=[1-9]" "$OUT"' || show_output

# Below the minimum: the step ends, and says why. srun stops it as soon as
# fewer than MIN nodes are left (fail-fast); with fail-fast=no, the agents
# left fail at their rendezvous's join timeout, and slurmstepd says what
# ends elastic training.
below_minimum() { # SETTINGS
	rm -f "$JOBS"/snap.pt*
	# Emptied here, not only by the redirection in the background job:
	# wait_for could otherwise read the last run's "epoch 3/60".
	: > "$OUT"
	: > "$ERR"
	start=$(date +%s)
	timeout -k 10 240 "$DT_CLUSTER" run env PET_RDZV_CONF=join_timeout=15,last_call_timeout=3 \
		srun --no-kill -N4 --ntasks-per-node=1 -c2 \
		--dist-train=torchrun,elastic=3:4,restarts=3$1 \
		torchrun train_elastic.py --snapshot "$JOBS/snap.pt" --epochs 60 \
		--epoch-seconds 0.5 > "$OUT" 2> "$ERR" &
	runner=$!
	if wait_for 'epoch 3/60' "$OUT" 120; then
		lose_node n3 n4
	fi
	wait $runner
	rc=$? took=$(( $(date +%s) - start ))
}
below_minimum ""
check "elastic 3:4 with 2 nodes left: srun stops the step (${took} s)" \
	test $rc != 0 -a "$took" -lt 180 || show_output
# (torch's agents may log their own errors about the lost nodes first.)
check "... and says so: 2 of 4 nodes failed, fewer than elastic's minimum" \
	eval 'grep -qE "dist-train: the torchrun agent of node [23] failed first, on n[34] \(local rank 0\): signal 9 \(SIGKILL\), .*; 2 of 4 nodes failed, fewer than elastic.s minimum of 3 are left: stopping the 2 other agents still running" "$ERR"' || show_output
below_minimum ",fail-fast=no"
check "fail-fast=no, elastic 3:4 with 2 nodes left: the step fails, in bounded time (${took} s)" \
	test $rc != 0 -a "$took" -lt 180 || show_output
# srun shows slurmstepd's errors as "slurmstepd-NODE: error: ..." up to
# Slurm 24.11, and as "[TIMESTAMP] error: ..." from 26.05 on.
check "... with a line saying what ends elastic training" \
	grep -qE '^(slurmstepd-n[12]: |\[[0-9T:.-]+\] )error: dist-train: on n[12]: the torchrun agent failed \(exit 1\): elastic training stops when fewer than 3 nodes \(elastic=3:4\) are left to rendezvous' "$ERR" || show_output

job srun -N4 --ntasks-per-node=1 --dist-train=elastic=4:2 torchrun tr.py
check "elastic=4:2 is refused before launch" \
	grep -q "dist-train: --dist-train=elastic=4:2: elastic=4:2: the minimum 4 is above the maximum 2" "$ERR" || show_output
job srun -N4 --ntasks-per-node=1 --dist-train=elastic=2:8 torchrun tr.py
check "elastic=2:8 on 4 nodes is refused before launch" \
	grep -q "dist-train: --dist-train=elastic=2:8 asks for up to 8 nodes but the step has 4: use --nodes=8, or elastic=2:4" "$ERR" || show_output
job srun -N2 --ntasks-per-node=2 --dist-train=torchrun torchrun tr.py
check "torchrun mode with 2 tasks per node is refused before launch" \
	grep -q "dist-train: --dist-train=torchrun runs one torchrun agent per node, which starts the processes: use --ntasks-per-node=1" "$ERR" || show_output

# The examples in contrib/, as a user would submit them.
job_file torchrun.sbatch < "$TOP_SRCDIR/contrib/sbatch/torchrun.sbatch"
rm -f "$JOBS"/torchrun-*.out
job sbatch --wait torchrun.sbatch
check "contrib/sbatch/torchrun.sbatch trains with 8 ranks" \
	grep -q '^\[default0\]:done: learned y = .* with 8 ranks$' "$JOBS"/torchrun-*.out || diag "$(cat "$JOBS"/torchrun-*.out 2>&1 | tail -20)"
job_file elastic.sbatch < "$TOP_SRCDIR/contrib/sbatch/elastic.sbatch"
rm -f "$JOBS"/elastic-*.out "$JOBS"/snapshot-*
job sbatch --wait elastic.sbatch
check "contrib/sbatch/elastic.sbatch trains 10 epochs on 4 nodes" \
	grep -q '^\[default0\]:done: 10 epochs, final world 8$' "$JOBS"/elastic-*.out || diag "$(cat "$JOBS"/elastic-*.out 2>&1 | tail -20)"

# torchrun mode: the agents meet at rank 0's barrier before any of them
# reads the store it hosts, so that none talks to a program that took the
# port first (torchrun unpickles what it reads there). The holder counts
# the bytes anyone sent it: a store client's, never the barrier's (whose
# client waits for rank 0's proof first). fail-fast=no keeps the other
# agents running once rank 0's task fails, so that one that did not wait
# for the barrier would have all the time it needs to reach the port.
job_file tr_hello.py <<'EOF2'
import torch.distributed as dist
dist.init_process_group("gloo")
# torch 1.13's rank 0 may return from init_process_group, and end its
# store, before another rank has read the last key (Broken pipe there).
dist.barrier()
print(f"TR rank={dist.get_rank()} world={dist.get_world_size()}", flush=True)
dist.destroy_process_group()
EOF2
job_file torchrun-held.sh <<'EOF2'
#!/bin/bash
#SBATCH -N2 --ntasks-per-node=1 -o torchrun-held.out
port=$(( 20000 + 4 * ((SLURM_JOB_ID * 64 + 0) % 2250) ))
rm -f held.stop
python3 -c "import os, socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('', $port)); s.listen(64); s.settimeout(0.2)
open('held.ready', 'w').close()
conns = got = 0
end = time.monotonic() + 60
while time.monotonic() < end and not os.path.exists('held.stop'):
    try:
        c, _ = s.accept()
    except OSError:
        continue
    conns += 1
    c.settimeout(2)
    try:
        got += len(c.recv(4096))
    except OSError:
        pass
    c.close()
print(f'HOLDER connections={conns} bytes={got}', flush=True)" &
holder=$!
while [ ! -e held.ready ]; do sleep 0.1; done
srun --mpi=${MPI:-none} --dist-train=torchrun,timeout=15,fail-fast=no torchrun tr_hello.py
echo "STEP exit=$?"
touch held.stop
wait $holder
EOF2
rm -f "$JOBS/torchrun-held.out" "$JOBS/held.ready"
job sbatch --wait torchrun-held.sh
cp "$JOBS/torchrun-held.out" "$OUT" 2>/dev/null
check "torchrun mode, no PMIx, the store's port taken: one message naming it, and no agent sent the taker a byte" \
	eval 'grep -q "is in use by another program: rerun with --mpi=pmix" "$OUT" && grep -q "^HOLDER connections=[0-9]* bytes=0$" "$OUT"' || show_output
rm -f "$JOBS/torchrun-held.out" "$JOBS/held.ready"
if slurm_has_pmix; then
	job env MPI=pmix sbatch --wait torchrun-held.sh
	cp "$JOBS/torchrun-held.out" "$OUT" 2>/dev/null
fi
pmix_check "torchrun mode, PMIx, the store's port taken: the agents meet on rank 0's new port and train; no agent sent the taker a byte" \
	eval '[ "$(grep -c "TR rank=[0-7] world=2" "$OUT")" = 2 ] && grep -q "^STEP exit=0$" "$OUT" && grep -q "^HOLDER connections=[0-9]* bytes=0$" "$OUT"' || show_output

finish
