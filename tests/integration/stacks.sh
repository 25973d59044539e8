#!/bin/bash
# dist-train stacks: every rank's Python stack in a running step, the
# ranks grouped by where they are, the odd ones out first
# (helper/cmd_stacks.c, helper/stacks_collect.c, the Python hook's SIGURG
# handler in helper/python/sitecustomize.py). Run as the job's owner from
# outside the allocation, as from a login node.
. "$(dirname "$0")/lib.sh"

cluster_start
plan 17

# The command as the nodes have it (dt-cluster installs it on their PATH):
# it starts itself on them by its own path.
STACKS=$DT_CLUSTER_DIR/bin/dist-train
make_hold_script
# Most steps here start 8 ranks that import torch: on a busy 2-core
# machine that took over bg_step's default 30 s (trixie's flake loop,
# 2026-11-28: no step id, checks 1-5 failed). bg_step goes on as soon as
# the step runs; these are only the limits.
BG_START=90 BG_TIMEOUT=240

# hang.py: one gloo all_reduce, then rank $STUCK (5) is stuck in a
# function of its own while the others wait for it in the next all_reduce.
job_file hang.py <<'PY'
#!/usr/bin/env python3
import os, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
dist.all_reduce(torch.ones(1))
if dist.get_rank() == 0:
    with open(".bg_step", "w") as f:
        f.write("%s.%s\n" % (os.environ["SLURM_JOB_ID"], os.environ["SLURM_STEP_ID"]))
def stuck_in_data_loader():
    time.sleep(300)
if dist.get_rank() == int(os.environ.get("STUCK", "5")):
    stuck_in_data_loader()
dist.all_reduce(torch.ones(1))
PY

# stacks ARGS...: dist-train stacks as the cluster's user, from $JOBS.
stacks() {
	timeout -k 5 90 "$DT_CLUSTER" run "$STACKS" stacks "$@" > "$JOBS/.stacks" 2>&1
}
show_stacks() { diag "$(head -c 3000 "$JOBS/.stacks")"; }

rm -rf "$JOBS"/dist-train-*.stacks*
bg_step -N4 -n8 --dist-train python3 ./hang.py
sleep 2
job_id=${step_now%.*}
stacks "$job_id"
rc=$?
check "dist-train stacks JOB (its one step, $step_now) ends 0" \
	test "$rc" = 0 || show_stacks
check "... its first group is rank 5 alone, in its own frame" \
	eval 'sed -n 2p "$JOBS/.stacks" | grep -qE "^  rank 5 \(n[0-9]+, pid [0-9]+\): .*/hang\.py:[0-9]+ in stuck_in_data_loader$"' || show_stacks
check "... then the other 7, waiting in all_reduce" \
	eval 'sed -n 3p "$JOBS/.stacks" | grep -qE "^  7 ranks \(0-4,6-7\): .*distributed_c10d\.py:[0-9]+ in all_reduce$"' || show_stacks
dir=$JOBS/dist-train-$step_now.stacks
check "... every rank's threads are in $dir" \
	eval 'test "$(ls "$dir"/rank-*.txt | wc -l)" = 8 &&
	      grep -q "in stuck_in_data_loader" "$dir/rank-5.txt" &&
	      grep -q "^Current thread\|^Thread" "$dir/rank-0.txt" &&
	      test -s "$dir/summary.txt"' || show_stacks
# The same again, by its step id: the ranks were not disturbed.
stacks "$step_now"
check "... asked again by JOB.STEP: the same, in a new folder; no rank was stopped" \
	eval 'sed -n 2p "$JOBS/.stacks" | grep -q "^  rank 5 .*stuck_in_data_loader" &&
	      test -d "$dir.2" &&
	      test "$(SLURM_CONF=$DT_CLUSTER_DIR/etc/slurm.conf squeue -h -s -j "$job_id" -o %i | grep -c "^$step_now$")" = 1' || show_stacks
SLURM_CONF=$DT_CLUSTER_DIR/etc/slurm.conf scancel "$job_id"
wait $runner

# The flight recorder, asked through each rank's dump pipe. The test
# cluster has no NCCL, so fr_mock.py does what torch's monitor thread does
# (tests/gpu-check.sh has the real one): it makes the pipe in a folder
# named as the hook names its own, and when a byte arrives, writes a dump
# where the hook's TORCH_FR_DUMP_TEMP_FILE says. Rank 5 never entered
# collective 42, which the others wait in.
job_file fr_mock.py <<'PY'
#!/usr/bin/env python3
import os, pickle, tempfile, threading, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
pipe = os.path.join(tempfile.mkdtemp(prefix="dist-train-nccl-"), "pipe-%d.pipe" % rank)
os.mkfifo(pipe)
fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
newest = (41, "completed") if rank == 5 else (42, "started")
def entry(seq, state):
    return {"collective_seq_id": seq, "p2p_seq_id": 0, "profiling_name": "nccl:all_reduce",
            "state": state, "process_group": ("0", "default_pg"), "input_sizes": [[4]]}
def monitor():
    while True:
        time.sleep(0.1)
        if os.read(fd, 16):
            entries = [entry(s, "completed") for s in range(1, newest[0])] + [entry(*newest)]
            with open(os.environ["TORCH_FR_DUMP_TEMP_FILE"] + str(rank), "wb") as f:
                pickle.dump({"version": "2.10", "entries": entries}, f, protocol=2)
threading.Thread(target=monitor, daemon=True).start()
dist.barrier()
if rank == 0:
    with open(".bg_step", "w") as f:
        f.write("%s.%s\n" % (os.environ["SLURM_JOB_ID"], os.environ["SLURM_STEP_ID"]))
time.sleep(300)
PY
rm -f "$JOBS"/dist-train-*.nccl-rank-*
bg_step -N4 -n8 --dist-train python3 ./fr_mock.py
sleep 1
stacks "$step_now"
check "flight recorder dumps asked for: rank 5 first, at the collective before the others'" \
	eval 'grep -A1 "^NCCL flight recorder, each rank.s newest collective" "$JOBS/.stacks" |
	      grep -qE "^  rank 5 \(n[0-9]+, pid [0-9]+\): #41 nccl:all_reduce completed, process group 0 \(default_pg\)$"' || show_stacks
check "... then the 7 others, in collective 42" \
	eval 'grep -A2 "^NCCL flight recorder" "$JOBS/.stacks" |
	      grep -qE "^  7 ranks \(0-4,6-7\): #42 nccl:all_reduce started, process group 0 \(default_pg\)$"' || show_stacks
SLURM_CONF=$DT_CLUSTER_DIR/etc/slurm.conf scancel "${step_now%.*}"
wait $runner

# A dump path the program sets itself (TORCH_FR_DUMP_TEMP_FILE in its
# environment, not the hook's) is where the dumps are looked for.
rm -f "$JOBS"/own-fr-*
bg_step -N4 -n8 --export=ALL,TORCH_FR_DUMP_TEMP_FILE=$JOBS/own-fr- --dist-train python3 ./fr_mock.py
sleep 1
stacks "$step_now"
check "a flight recorder path the program set itself is found: rank 5 first" \
	eval 'grep -A1 "^NCCL flight recorder, each rank.s newest collective" "$JOBS/.stacks" |
	      grep -qE "^  rank 5 \(n[0-9]+, pid [0-9]+\): #41 nccl:all_reduce completed" &&
	      test -s "$JOBS/own-fr-5"' || show_stacks
SLURM_CONF=$DT_CLUSTER_DIR/etc/slurm.conf scancel "${step_now%.*}"
wait $runner

# dist-train stacks run by root, the step's user its attacker: a record
# folder whose name forges a record naming a root-only file (the folders
# of that name are the user's, the file at the forged path is root's), and
# a process of another user that claims the step. Root copies nothing of
# root's, and collects only the step's user's processes.
OTHER=${DT_TEST_OTHER_USER:-dtother}
id "$OTHER" >/dev/null 2>&1 || useradd --no-create-home --shell /bin/sh "$OTHER"
secret_dir=$DT_CLUSTER_DIR/root-only
rm -rf "$secret_dir" && install -d -m 0755 "$secret_dir"
job_file forge.sh <<EOF
#!/bin/sh
# The rank's own environment, as /proc shows it to the collector.
dir="\$(printf '%s/forged\nF %s' "\$PWD" "$secret_dir")"
mkdir -p "\$dir" && : > "\$dir/dist-train-\$SLURM_JOB_ID.\$SLURM_STEP_ID.nccl-rank-0"
export SLURM_DIST_TRAIN_RECORD_DIR="\$dir"
exec python3 ./hang.py
EOF
rm -rf "$JOBS"/forged*
bg_step -N2 -n4 --export=ALL,STUCK=3 --dist-train ./forge.sh
sleep 2
printf 'root only\n' > "$secret_dir/dist-train-$step_now.nccl-rank-0"
chmod 0600 "$secret_dir/dist-train-$step_now.nccl-rank-0"
SLURMD_NODENAME=n1 DIST_TRAIN_STEP=$step_now RANK=7 WORLD_SIZE=4 \
	runuser -u "$OTHER" -- python3 -c 'import time; time.sleep(60)' &
impostor=$!
rm -rf "$JOBS/root-stacks"
(cd "$JOBS" && SLURM_CONF=$DT_CLUSTER_DIR/etc/slurm.conf timeout -k 5 90 \
	"$STACKS" stacks -o "$JOBS/root-stacks" "$step_now") > "$JOBS/.stacks" 2>&1
rc=$?
kill $impostor 2>/dev/null
check "stacks run by root: the step's ranks, rank 3 first" \
	eval '[ $rc = 0 ] && sed -n 2p "$JOBS/.stacks" | grep -qE "^  rank 3 \(n[0-9]+, pid [0-9]+\): .*in stuck_in_data_loader$"' || show_stacks
check "... no process of another user that claims the step is collected" \
	eval '! grep -q "rank 7" "$JOBS/.stacks" && ! ls "$JOBS/root-stacks" | grep -q "rank-7"' || show_stacks
check "... and no root-only file is copied through a forged record" \
	eval '! grep -rqs "root only" "$JOBS/root-stacks"' ||
	{ show_stacks; diag "$(ls -l "$JOBS/root-stacks")"; }
SLURM_CONF=$DT_CLUSTER_DIR/etc/slurm.conf scancel "${step_now%.*}"
wait $runner
rm -rf "$secret_dir" "$JOBS"/forged*

# torchrun mode: the workers are the ranks; the agents have none.
bg_step -N2 --ntasks-per-node=1 --export=ALL,STUCK=3 \
	--dist-train=torchrun,nproc=2 torchrun ./hang.py
sleep 2
stacks "$step_now"
check "torchrun mode: rank 3 first, then the 3 others (0-2)" \
	eval 'sed -n 2p "$JOBS/.stacks" | grep -qE "^  rank 3 \(n[0-9]+, pid [0-9]+\): .*in stuck_in_data_loader$" &&
	      sed -n 3p "$JOBS/.stacks" | grep -qE "^  3 ranks \(0-2\): .* in all_reduce$"' || show_stacks
check "... the agents' own stacks are kept beside the ranks'" \
	eval 'test "$(ls "$JOBS/dist-train-$step_now.stacks"/other-n*-*.txt | wc -l)" = 2' || show_stacks
SLURM_CONF=$DT_CLUSTER_DIR/etc/slurm.conf scancel "${step_now%.*}"
wait $runner

# A program that is not Python is named as such, not waited on.
bg_step -N2 -n2 --dist-train ./hold.sh 60
stacks "$step_now"
rc=$?
check "a step of programs that are not Python: each is named so" \
	eval '[ $rc = 0 ] && grep -qE "^  2 ranks \(0-1\): not Python with the dist-train hook \(sleep\)" "$JOBS/.stacks"' || show_stacks
SLURM_CONF=$DT_CLUSTER_DIR/etc/slurm.conf scancel "${step_now%.*}"
wait $runner

stacks 12x
check "a malformed id: one message naming it and the form to give" \
	eval '! stacks 12x && grep -q "dist-train: error: .12x. is not a job or step id: give JOBID or JOBID.STEP" "$JOBS/.stacks"' || show_stacks
stacks 99999
check "a job that does not run: one message naming it" \
	eval '! stacks 99999 && grep -q "dist-train: error: .*job 99999" "$JOBS/.stacks"' || show_stacks

check "no node is drained" no_drained_node
finish
