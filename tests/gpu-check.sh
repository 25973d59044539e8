#!/bin/bash
# What only a node with NVIDIA GPUs can show: real GPU discovery and
# binding, and NCCL bootstrapped from the environment alone.
#
# Checks 1-8 run without Slurm: each task gets a one-node step's Slurm
# variables by hand, one task per GPU (at most 8), as srun -N1
# --ntasks-per-node=GPUS would give them, and runs under `dist-train exec`,
# the helper's own path. The checks after them run the plugin itself under
# real srun, where this machine can start Slurm's daemons (root, slurmd,
# slurmctld, munged; a machine without Slurm gets it from
# tests/gpu-kit.sh): a one-node cluster (contrib/cluster/dt-cluster) whose
# gpu GRES is this machine's /dev/nvidiaN, so that Slurm itself hands each
# step its GPUs; otherwise they are reported skipped, saying why.
#
#   tests/gpu-check.sh [DIST_TRAIN]     (default: build/helper/dist-train,
#                                        else dist-train on PATH; the
#                                        plugin from the same build)
#
# Needs the CUDA driver and NCCL (libnccl.so.2 on the loader's path);
# builds contrib/examples/nccl_allreduce.c where gcc and the CUDA toolkit
# are, and runs a PyTorch NCCL all_reduce where python3 has torch with
# CUDA. Not part of `make check` (CI has no GPU); prints TAP, and what it
# saw, for a closing note.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
dt=${1:-$top/build/helper/dist-train}
[ -x "$dt" ] || dt=$(command -v dist-train) || { echo "1..0 # SKIP no dist-train"; exit 0; }
command -v nvidia-smi >/dev/null && ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') || ngpu=0
((ngpu > 0)) || { echo "1..0 # SKIP no NVIDIA GPU (nvidia-smi -L lists none)"; exit 0; }
((ngpu > 8)) && ngpu=8
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
host=$(hostname)
export DIST_TRAIN_STEP_SECRET
DIST_TRAIN_STEP_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')

n=0 failed=0
check() { # DESCRIPTION COMMAND...
	local what=$1
	shift
	n=$((n + 1))
	if "$@"; then echo "ok $n - $what"; else echo "not ok $n - $what"; failed=$((failed + 1)); fi
}
diag() { sed 's/^/# /'; }

# step TASKS SETTINGS CMD...: every task of a one-node step, at once;
# task R's output in $work/out.R, its exit status in $work/rc.R.
step_id=0
step() {
	local tasks=$1 settings=$2 r
	shift 2
	step_id=$((step_id + 1))
	for ((r = 0; r < tasks; r++)); do
		env SLURM_JOB_ID=$$ SLURM_JOBID=$$ SLURM_STEP_ID=$step_id \
			SLURM_STEPID=$step_id SLURM_PROCID=$r SLURM_LOCALID=$r \
			SLURM_NODEID=0 SLURM_NTASKS=$tasks SLURM_NNODES=1 \
			SLURM_STEP_NUM_TASKS=$tasks SLURM_STEP_NUM_NODES=1 \
			SLURM_STEP_NODELIST="$host" SLURM_NODELIST="$host" \
			SLURM_STEP_TASKS_PER_NODE=$tasks SLURM_TASKS_PER_NODE=$tasks \
			timeout 180 "$dt" exec -s "$settings" -- "$@" \
			> "$work/out.$r" 2>&1 &
		echo $! > "$work/pid.$r"
	done
	for ((r = 0; r < tasks; r++)); do
		wait "$(cat "$work/pid.$r")"
		echo $? > "$work/rc.$r"
	done
}
all_ok() { # TASKS: every task exited 0
	local r
	for ((r = 0; r < $1; r++)); do [ "$(cat "$work/rc.$r")" = 0 ] || return 1; done
}
outputs() { cat "$work"/out.*; }

nvidia-smi -L | diag

# 1. Discovery: the plan names every GPU, each with its NUMA node's cores.
"$dt" plan --json > "$work/plan.json" 2> "$work/plan.err"
"$dt" plan 2>&1 | diag
check "dist-train plan finds the $ngpu GPU(s) nvidia-smi lists" \
	test "$(grep -o '"pci_bus_id": "[^"]*"' "$work/plan.json" | sort -u | wc -l)" -ge "$ngpu"

# 2. The bootstrap's own NCCL all-reduce, one task per GPU.
show='echo "rank $RANK gpu ${DIST_TRAIN_GPU-none} cpus ${DIST_TRAIN_CPUS-none}"; grep -E "^(Cpus|Mems)_allowed_list" /proc/self/status'
step "$ngpu" check,nccl sh -c "$show"
outputs | diag
check "check: NCCL all-reduce across $ngpu rank(s), from NCCL_COMM_ID, naming its libnccl" \
	eval 'all_ok $ngpu && outputs | grep -q "NCCL all-reduce across them: ok (libnccl [0-9][0-9.]* from /"'

# 3. Binding: each task runs on the cores the plan gives its local rank.
bound() {
	local r want got
	for ((r = 0; r < ngpu; r++)); do
		want=$(sed -n "s/.*\"local_rank\": $r,.*\"cpus\": \"\\([^\"]*\\)\".*/\\1/p" "$work/plan.json")
		got=$(sed -n 's/^Cpus_allowed_list:\t//p' "$work/out.$r")
		[ -n "$want" ] && [ "$want" = "$got" ] || { echo "rank $r: plan $want, bound $got" | diag; return 1; }
	done
}
check "every task is bound to its GPU's cores, as the plan says" bound

# 4. A plain NCCL program, no MPI: its communicator from the environment.
cuda=$(ls -d /usr/local/cuda 2>/dev/null || ls -d /usr/local/cuda-* 2>/dev/null | head -n 1)
if command -v gcc >/dev/null && [ -n "$cuda" ] &&
   gcc -O2 -o "$work/nccl_allreduce" "$top/contrib/examples/nccl_allreduce.c" \
	-I"$cuda/include" -L"$cuda/lib64" -lcudart -l:libnccl.so.2 2> "$work/cc.err"; then
	step "$ngpu" nccl "$work/nccl_allreduce"
	outputs | grep -v "^dist-train" | diag
	check "contrib/examples/nccl_allreduce.c: every rank's all-reduce ok" \
		eval 'all_ok $ngpu && [ "$(outputs | grep -c "all-reduce of .* ok")" = $ngpu ]'
else
	[ -r "$work/cc.err" ] && diag < "$work/cc.err"
	echo "ok $((n += 1)) # SKIP no gcc and CUDA toolkit with NCCL to build the example"
fi

# 5. PyTorch, nothing but what the environment gives.
py=
for p in python3 /usr/bin/python3; do
	timeout 120 "$p" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && { py=$(command -v "$p"); break; }
done
if [ -n "$py" ]; then
	step "$ngpu" nccl "$py" -c '
import os, torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
t = torch.ones(4, device="cuda")
dist.all_reduce(t)
print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "rank", dist.get_rank(), "sum", t[0].item())
dist.destroy_process_group()'
	outputs | grep -E "^torch|Error" | diag
	check "torch init_process_group(\"nccl\") and all_reduce across $ngpu rank(s)" \
		eval 'all_ok $ngpu && [ "$(outputs | grep -c "sum $ngpu.0$")" = $ngpu ]'
else
	echo "ok $((n += 1)) # SKIP no python3 with torch and CUDA"
fi

# 6. More tasks than GPUs: one message naming the fix.
step $((ngpu + 1)) timeout=30 true
check "$((ngpu + 1)) tasks on $ngpu GPU(s): refused, naming share-gpus" \
	eval '! all_ok $((ngpu + 1)) && outputs | grep -q "but $ngpu GPU.*share-gpus"'

# 7-8. share-gpus: the step runs; NCCL, which refuses two ranks of one GPU
# in one communicator, is skipped by check, saying why.
step $((ngpu + 1)) share-gpus,check,timeout=60 true
outputs | grep check: | diag
check "share-gpus, $((ngpu + 1)) tasks: the step runs" all_ok $((ngpu + 1))
check "... and check says why it skipped NCCL" \
	eval 'outputs | grep -q "NCCL all-reduce skipped: .*share .* GPU.*NCCL refuses"'

# 9-. The plugin in slurmstepd, Slurm's GRES giving each step its GPUs.
build=$(dirname "$(dirname "$dt")")
plugin=$build/plugin/.libs/dist_train.so
why=
[ "$(id -u)" = 0 ] || why="not root, so no Slurm daemons"
for t in slurmctld slurmd munged srun sinfo; do
	[ -n "$why" ] || command -v "$t" >/dev/null ||
		why="$t is not installed (on a throwaway machine without Slurm: tests/gpu-kit.sh)"
done
[ -n "$why" ] || [ -r "$plugin" ] || why="no $plugin beside $dt"
if [ -n "$why" ]; then
	echo "ok $((n += 1)) # SKIP the plugin under real srun: $why"
	echo "1..$n"
	exit $((failed > 0))
fi
cluster=$top/contrib/cluster/dt-cluster
export DT_CLUSTER_DIR=/var/lib/dist-train-gpu DT_CLUSTER_PORT=17400 \
	DT_CLUSTER_NODES=1 DT_CLUSTER_GPUS=real DT_CLUSTER_CPUS=$(nproc) \
	DT_CLUSTER_PLUGIN=$plugin DT_CLUSTER_HELPER=$dt \
	DT_CLUSTER_WORKER_LIB=$build/helper/.libs/dist_train_worker.so \
	DT_CLUSTER_PYTHON_HOOK=$top/helper/python
trap '"$cluster" stop >/dev/null 2>&1; rm -rf "$work"' EXIT
"$cluster" start > "$work/cluster.out" 2>&1
started=$?
diag < "$work/cluster.out"
check "a one-node Slurm cluster whose gpu GRES is this machine's $ngpu GPU(s)" \
	eval '[ $started = 0 ] && "$cluster" run sinfo -h -o "%G" | grep -q "gpu:$ngpu"'
if [ $started != 0 ]; then
	tail -n 20 "$DT_CLUSTER_DIR"/log/*.log 2>/dev/null | diag
	echo "1..$n"
	exit 1
fi
# srun ARGS...: as the cluster's user, output in $work/srun.out.
srun_job() {
	timeout -k 10 180 "$cluster" run srun "$@" > "$work/srun.out" 2>&1
}
shown='echo "rank $RANK local $LOCAL_RANK CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}'
shown=$shown' SLURM_STEP_GPUS=${SLURM_STEP_GPUS-unset} gpu=${DIST_TRAIN_GPU-none} source=$DIST_TRAIN_RANK_SOURCE"'
shown=$shown'; grep -E "^(Cpus|Mems)_allowed_list" /proc/self/status'

srun_job --gres=gpu:1 --dist-train=check,nccl,verbose sh -c "$shown"
rc=$?
diag < "$work/srun.out"
check "srun --gres=gpu:1 --dist-train=check,nccl: Slurm's GPU, bound, NCCL all-reduce ok" \
	eval '[ $rc = 0 ] && grep -q "NCCL all-reduce across them: ok (libnccl" "$work/srun.out" &&
		grep -q "CUDA_VISIBLE_DEVICES=[0-9]" "$work/srun.out"'

if [ -n "$py" ]; then
	srun_job -n "$ngpu" --gres=gpu:"$ngpu" --dist-train "$py" -c '
import os, torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
t = torch.ones(4, device="cuda")
dist.all_reduce(t)
print("torch", torch.__version__, "rank", dist.get_rank(), "of", dist.get_world_size(),
      "device", torch.cuda.current_device(), torch.cuda.get_device_name(), "sum", t[0].item())
dist.destroy_process_group()'
	rc=$?
	diag < "$work/srun.out"
	check "srun -n $ngpu --gres=gpu:$ngpu --dist-train: torch NCCL all_reduce on every rank, no warning of the hook's settings" \
		eval '[ $rc = 0 ] && [ "$(grep -c "sum $ngpu.0$" "$work/srun.out")" = $ngpu ] &&
			! grep -q "is deprecated" "$work/srun.out"'
else
	echo "ok $((n += 1)) # SKIP no python3 with torch and CUDA"
fi

if "$cluster" run srun --mpi=list 2>&1 | grep -q pmix; then
	srun_job --mpi=pmix -n "$ngpu" --gres=gpu:"$ngpu" --dist-train=check,nccl sh -c "$shown"
	rc=$?
	diag < "$work/srun.out"
	check "srun --mpi=pmix: ranks from PMIx, NCCL all-reduce ok" \
		eval '[ $rc = 0 ] && grep -q "source=pmix" "$work/srun.out" &&
			grep -q "NCCL all-reduce across them: ok" "$work/srun.out"'
else
	echo "ok $((n += 1)) # SKIP this Slurm has no mpi/pmix plugin"
fi

srun_job -n $((ngpu + 1)) --gres=gpu:"$ngpu" --dist-train true
rc=$?
diag < "$work/srun.out"
check "$((ngpu + 1)) tasks on $ngpu GPU(s) under srun: refused, naming share-gpus" \
	eval '[ $rc != 0 ] && grep -q "share-gpus" "$work/srun.out"'

# 14. NCCL's flight recorder, as the plugin's Python hook sets it up: an
# all-reduce held behind a spinning kernel times out (8 s), and the rank's
# dump lands in the step's record folder, the hung collective "scheduled".
if [ -n "$py" ]; then
	rm -f "$DT_CLUSTER_DIR"/jobs/dist-train-*.nccl-rank-*
	srun_job --gres=gpu:1 --dist-train "$py" -c '
import datetime, os, torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=8))
t = torch.ones(4, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
torch.cuda._sleep(int(2e11))
dist.all_reduce(t)
t.cpu()'
	grep "dist-train" "$work/srun.out" | diag
	dump=$(ls "$DT_CLUSTER_DIR"/jobs/dist-train-*.nccl-rank-0 2>/dev/null | head -n 1)
	"$py" -c '
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
for e in d["entries"]:
    print("entry", e["collective_seq_id"], e["profiling_name"], e["state"])' "$dump" > "$work/fr.out" 2>&1
	diag < "$work/fr.out"
	check "a collective that times out leaves the flight recorder's dump in the record folder" \
		eval 'grep -q "^entry 2 nccl:all_reduce scheduled" "$work/fr.out" &&
			grep -q "rank 0 failed first" "$work/srun.out"'
else
	echo "ok $((n += 1)) # SKIP no python3 with torch and CUDA"
fi

# 15. dist-train stacks on a hung NCCL step: each rank's torch is asked
# through the dump pipe the hook set up, long before any timeout, and the
# summary names the rank's newest collective, the one it hangs in.
if [ -n "$py" ]; then
	jobs=$DT_CLUSTER_DIR/jobs
	rm -f "$jobs/.fr_step"
	cat > "$jobs/fr_hang.py" <<'PY'
import datetime, os, torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=300))
t = torch.ones(4, device="cuda")
dist.all_reduce(t)
dist.all_reduce(t)
torch.cuda.synchronize()
torch.cuda._sleep(int(2e11))
dist.all_reduce(t)
with open(".fr_step", "w") as f:
    f.write("%s.%s\n" % (os.environ["SLURM_JOB_ID"], os.environ["SLURM_STEP_ID"]))
t.cpu()
PY
	chmod 0644 "$jobs/fr_hang.py"
	timeout -k 10 200 "$cluster" run srun --gres=gpu:1 --dist-train "$py" fr_hang.py \
		> "$work/hang.out" 2>&1 &
	hang=$!
	for _ in $(seq 900); do [ -s "$jobs/.fr_step" ] && break; sleep 0.1; done
	fr_step=$(cat "$jobs/.fr_step" 2>/dev/null)
	start=$SECONDS
	timeout -k 5 90 "$cluster" run "$DT_CLUSTER_DIR/bin/dist-train" stacks "${fr_step:-none}" \
		> "$work/stacks.out" 2>&1
	echo "dist-train stacks $fr_step took $((SECONDS - start)) s" | diag
	diag < "$work/stacks.out"
	check "dist-train stacks on a hung NCCL step: rank 0's newest collective, #3 all_reduce, from its dump pipe" \
		eval 'grep -A1 "^NCCL flight recorder" "$work/stacks.out" |
			grep -qE "^  rank 0 \(.*\): #3 nccl:all_reduce (scheduled|started), process group 0"'
	[ -n "$fr_step" ] && "$cluster" run scancel "${fr_step%.*}"
	wait "$hang"
	grep -v "^\[rank0\]\|^frame #\|^Exception raised\|^$" "$work/hang.out" | tail -n 5 | cut -c1-200 | diag
else
	echo "ok $((n += 1)) # SKIP no python3 with torch and CUDA"
fi

echo "1..$n"
exit $((failed > 0))
