#!/bin/bash
# Launch cost of --dist-train on the local 4-node cluster, as figures.
#
#   tests/bench/launch.sh [REPETITIONS [PYTHON_REPETITIONS]]
#                                     (root; after building; [10 [3]])
#
# REPETITIONS 0 leaves part 1 out (parts 2 and 3 alone); PYTHON_REPETITIONS
# 0 leaves parts 2 and 3 out.
#
# Three parts, each printing the median of its runs (the variants of a
# part interleaved) and the ratio against what a user would run instead,
# in the same run:
#
#  1. srun to the start of the last task's program (each task prints a
#     timestamp first thing), against plain srun with the same layout:
#     the default, binding off, PMIx, PMIx with the check (the NCCL
#     all-reduce where every rank has a GPU, else the rendezvous alone),
#     and 8, 32 and 64 tasks on the 4 nodes (--overcommit). At 64 tasks,
#     with binding off too: that row shows the plugin's own cost. And,
#     with no dist-train at all, each task a PMIx client that fences with
#     all the others (tests/bench/pmix_fence.c): the floor of a start
#     barrier that waits in PMIx's fence rather than at rank 0.
#  2. torchrun mode against plain torchrun (one agent per node, c10d
#     rendezvous on the first node written on its command line), to the
#     start of the last worker.
#  3. srun to the end of the first DDP all_reduce (gloo, 8 ranks), against
#     the same job with the environment written by hand: MASTER_ADDR
#     worked out once before srun, as a batch script does, RANK and the
#     rest from Slurm's variables in a shell wrapper. With binding off
#     too: that row shows the environment alone. With PMIx, against the
#     same hand-written job under srun --mpi=pmix, as in part 1.
#
# The nodes share this machine's CPUs, so each node's slurmd is pinned to
# CPUs of its own, dealt out in turn (DT_CLUSTER_PIN in dt-cluster; on 2
# CPUs, n1 and n3 run on CPU 0, n2 and n4 on CPU 1). Unpinned, every node's
# CPU 0 is the machine's CPU 0: the plugin binds a node's tasks to the
# step's cores of that node, as Slurm's task/affinity would, and so puts
# most tasks of all four nodes on one CPU, while plain srun's tasks, bound
# by nothing, spread over all of them. Pinned, plain srun's tasks and the
# plugin's are on the same CPUs, as they are on real nodes.
#
# Then where the time goes, per context, from one run of each with
# --dist-train=verbose (plugin/task.c, helper/bootstrap.c print what each
# part took): srun's callbacks; slurmstepd's once per node (topology
# included); each task's (the helper included); the start barrier's wait
# where the tasks run it themselves (a lean PMIx step), or the helper's
# own parts.
# Medians over the nodes or tasks of that run, worst in brackets.
set -u
reps=${1:-10}
python_reps=${2:-3}
. "$(dirname "$0")/lib.sh"

export DT_CLUSTER_PIN=1
cluster_start
job_file stamp.sh <<'EOF2'
#!/bin/sh
date +%s.%N
EOF2
job_file stamp.py <<'EOF2'
import time
print(f"{time.time():.4f}", flush=True)
EOF2
# USE_LIBUV=0, as a user must write it where torch was built without
# libuv (Debian 13's 2.6; older ones ignore it) for the workers' store.
# torchrun's own c10d store does not read it, so plain torchrun cannot
# run there at all, and its row says so.
job_file torchrun.sh <<'EOF2'
#!/bin/sh
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1)
export USE_LIBUV=0
exec torchrun --nnodes="$SLURM_NNODES" --nproc_per_node=2 \
	--rdzv_backend=c10d --rdzv_endpoint="$head:29400" \
	--rdzv_id="$SLURM_JOB_ID" stamp.py
EOF2
job_file ddp.py <<'EOF2'
import time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
model(torch.ones(2, 4)).sum().backward()	# the first gradient all_reduce
print(f"{time.time():.4f}", flush=True)
dist.destroy_process_group()
EOF2
# Where PMIx is: the fence's floor, a program the job user can run.
fence=
if make -s -C "$TOP_BUILDDIR/tests" bench/pmix_fence >/dev/null 2>&1; then
	install -m 0755 "$TOP_BUILDDIR/tests/bench/pmix_fence" "$JOBS/pmix_fence"
	fence=./pmix_fence
fi
job_file by-hand.sh <<'EOF2'
#!/bin/sh
export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS
export USE_LIBUV=0
exec python3 ddp.py
EOF2

# One run: seconds from srun's start to the latest timestamp printed, which
# must come from every one of COUNT processes.
measure() { # COUNT COMMAND...
	local count=$1 t0 last
	shift
	# The last job's teardown and the wait for it (squeue) are no part
	# of this one's start.
	wait_jobs_completed
	t0=$(date +%s.%N)
	job_now "$@" || { echo "failed: $*" >&2; tail -5 "$ERR" >&2; return 1; }
	# torchrun prefixes its workers' lines ("[default0]:"), and two
	# workers' lines can run together: count timestamps, not lines.
	[ "$(grep -oE '[0-9]{10}\.[0-9]{4,}' "$OUT" | wc -l)" = "$count" ] ||
		{ echo "not $count timestamps: $*" >&2; return 1; }
	last=$(grep -oE '[0-9]{10}\.[0-9]{4,}' "$OUT" | sort -n | tail -1)
	awk -v a="$t0" -v b="$last" 'BEGIN { printf "%.4f\n", b - a }'
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (!NR) { print "-"; exit } m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f", m }'; }

declare -A result

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "x%.2f", a / b }'; }
row() { # LABEL [BASELINE]
	if [ "${result[$1]}" = - ]; then
		printf '  %-46s did not run here (its error is above)\n' "$1"
		return
	fi
	[ "${2:+${result[$2]}}" = - ] && set -- "$1"
	printf '  %-46s %7ss  %s\n' "$1" "${result[$1]}" \
		"${2:+$(ratio "${result[$1]}" "${result[$2]}") vs $2}"
}

# Interleaved rather than one variant after another, so that whatever
# else the machine does falls on both sides of each ratio alike.
layout8="-N4 -n8"
variants=(
	"plain srun|$layout8|"
	"--dist-train=bind=off|$layout8|--dist-train=bind=off"
	"--dist-train|$layout8|--dist-train"
	"plain srun --mpi=pmix|$layout8 --mpi=pmix|"
	"--mpi=pmix --dist-train|$layout8 --mpi=pmix|--dist-train"
	"--mpi=pmix --dist-train=check|$layout8 --mpi=pmix|--dist-train=check"
	"PMIx's fence in every task, no dist-train|$layout8 --mpi=pmix||fence"
	"plain srun, 32 tasks|-N4 -n32 --overcommit|"
	"--dist-train, 32 tasks|-N4 -n32 --overcommit|--dist-train"
	"plain srun, 64 tasks|-N4 -n64 --overcommit|"
	"--dist-train, 64 tasks|-N4 -n64 --overcommit|--dist-train"
	"--dist-train=bind=off, 64 tasks|-N4 -n64 --overcommit|--dist-train=bind=off"
	"plain srun --mpi=pmix, 64 tasks|-N4 -n64 --overcommit --mpi=pmix|"
	"--mpi=pmix --dist-train, 64 tasks|-N4 -n64 --overcommit --mpi=pmix|--dist-train"
	"--mpi=pmix --dist-train=bind=off, 64 tasks|-N4 -n64 --overcommit --mpi=pmix|--dist-train=bind=off"
	"PMIx's fence in every task, 64 tasks|-N4 -n64 --overcommit --mpi=pmix||fence"
)
tasks_of() { sed 's/.*-n\([0-9]*\).*/\1/' <<<"$1"; }
# A variant's program: stamp.sh, or the fence's floor where it was built
# (elsewhere the variant is left out, and its row says so).
declare -A times_of
runnable=()
((reps > 0)) || variants=()
for v in "${variants[@]}"; do
	IFS='|' read -r label layout opt prog <<<"$v"
	if [ "$prog" = fence ] && [ -z "$fence" ]; then
		echo "no PMIx development files: \"$label\" left out" >&2
		result[$label]="-"
	else
		runnable+=("$v")
	fi
done
variants=("${runnable[@]}")
program() { [ "$1" = fence ] && echo "$fence" || echo ./stamp.sh; }
for v in "${variants[@]}"; do	# warm-up
	IFS='|' read -r label layout opt prog <<<"$v"
	measure "$(tasks_of "$layout")" srun $layout $opt \
		"$(program "$prog")" >/dev/null || exit 1
done
for ((i = 0; i < reps; i++)); do
	for v in "${variants[@]}"; do
		IFS='|' read -r label layout opt prog <<<"$v"
		t=$(measure "$(tasks_of "$layout")" srun $layout $opt \
			"$(program "$prog")") || exit 1
		times_of[$label]+="$t "
	done
done
for v in "${variants[@]}"; do
	IFS='|' read -r label layout opt prog <<<"$v"
	result[$label]=$(printf '%s\n' ${times_of[$label]} | median)
done

# The Python variants, interleaved too: LABEL|COMMAND (8 timestamps each).
python_variants=(
	"plain torchrun|srun -N4 --ntasks-per-node=1 -c2 ./torchrun.sh"
	"--dist-train=torchrun|srun -N4 --ntasks-per-node=1 -c2 --dist-train=torchrun torchrun stamp.py"
	"DDP, environment by hand|env MASTER_ADDR=n1 MASTER_PORT=29500 srun -N4 -n8 ./by-hand.sh"
	"DDP, by hand, --mpi=pmix|env MASTER_ADDR=n1 MASTER_PORT=29500 srun -N4 -n8 --mpi=pmix ./by-hand.sh"
	"DDP, --dist-train=bind=off|srun -N4 -n8 --dist-train=bind=off python3 ddp.py"
	"DDP, --dist-train|srun -N4 -n8 --dist-train python3 ddp.py"
	"DDP, --mpi=pmix --dist-train|srun -N4 -n8 --mpi=pmix --dist-train python3 ddp.py"
)
# A baseline that cannot run on this stack at all (its warm-up fails) is
# left out, and its row says so; a --dist-train variant must run.
runnable=()
((python_reps > 0)) || python_variants=()
for v in "${python_variants[@]}"; do	# warm-up
	if measure 8 ${v#*|} >/dev/null; then
		runnable+=("$v")
	else
		case ${v%%|*} in *--dist-train*) exit 1 ;; esac
		result[${v%%|*}]="-"
	fi
done
for ((i = 0; i < python_reps; i++)); do
	for v in "${runnable[@]}"; do
		t=$(measure 8 ${v#*|}) || exit 1
		times_of[${v%%|*}]+="$t "
	done
done
for v in "${runnable[@]}"; do
	result[${v%%|*}]=$(printf '%s\n' ${times_of[${v%%|*}]} | median)
done

when="$(nproc) cores, $(date -u +%Y-%m-%d)"
if ((reps > 0)); then
	echo "Launch to the last task's program start, on the local cluster,"
	echo "median of $reps interleaved runs ($when):"
	row "plain srun"
	row "--dist-train=bind=off" "plain srun"
	row "--dist-train" "plain srun"
	row "plain srun --mpi=pmix"
	row "--mpi=pmix --dist-train" "plain srun --mpi=pmix"
	row "--mpi=pmix --dist-train=check" "plain srun --mpi=pmix"
	row "PMIx's fence in every task, no dist-train" "plain srun --mpi=pmix"
	for n in 32 64; do
		row "plain srun, $n tasks"
		row "--dist-train, $n tasks" "plain srun, $n tasks"
	done
	row "--dist-train=bind=off, 64 tasks" "plain srun, 64 tasks"
	row "plain srun --mpi=pmix, 64 tasks"
	row "--mpi=pmix --dist-train, 64 tasks" "plain srun --mpi=pmix, 64 tasks"
	row "--mpi=pmix --dist-train=bind=off, 64 tasks" "plain srun --mpi=pmix, 64 tasks"
	row "PMIx's fence in every task, 64 tasks" "plain srun --mpi=pmix, 64 tasks"
fi
if ((python_reps > 0)); then
	echo "torchrun, 4 agents of 2 workers, to the last worker's start (median of $python_reps):"
	row "plain torchrun"
	row "--dist-train=torchrun" "plain torchrun"
	echo "To the end of the first DDP all_reduce (gloo), 8 ranks (median of $python_reps):"
	row "DDP, environment by hand"
	row "DDP, --dist-train=bind=off" "DDP, environment by hand"
	row "DDP, --dist-train" "DDP, environment by hand"
	row "DDP, by hand, --mpi=pmix"
	row "DDP, --mpi=pmix --dist-train" "DDP, by hand, --mpi=pmix"
fi

# Where the time goes: one verbose run each.
field() { # PATTERN (sed, one group): its values in $ERR, "median [max]"
	local values
	values=$(sed -n "s/$1/\\1/p" "$ERR")
	[ -n "$values" ] || { echo "-"; return; }
	printf '%s [%s]' "$(printf '%s\n' $values | median)" \
		"$(printf '%s\n' $values | sort -n | tail -1)"
}
# Each task's line repeats its node's figures: one per node, field N.
per_node() {
	sed -n 's/.* on \(n[0-9]*\): .*| took: node \([0-9.]*\) ms (topology \([0-9.]*\)).*/\1 \2 \3/p' "$ERR" |
		sort -u -k1,1 | awk -v f="$1" '{ print $f }' | median
}
echo "Where it goes, ms, one run each with verbose (median [worst] over the nodes or tasks):"
for layout in "-N4 -n8" "-N4 -n64 --overcommit" "-N4 -n8 --mpi=pmix" \
	      "-N4 -n64 --overcommit --mpi=pmix"; do
	job srun $layout --dist-train=verbose true ||
		{ echo "failed: $layout" >&2; exit 1; }
	echo "  srun $layout --dist-train:"
	echo "    srun: $(sed -n 's/.*took \([0-9.]*\) ms in srun.*/\1/p' "$ERR" | head -1)"
	echo "    slurmstepd, per node: $(per_node 2) (topology $(per_node 3))"
	echo "    task: $(field '.*| took: node .*, task \([0-9.]*\) ms.*')"
	if grep -q '| no helper: ' "$ERR"; then
		echo "    the barrier in the plugin, as each task waited: $(field '.*| no helper: [^|;]* in \([0-9.]*\) ms.*')"
	fi
	if grep -q 'the helper took' "$ERR"; then
		echo "    helper, as the task saw it: $(field '.*| took: .* (helper \([0-9.]*\))$')"
		echo "      where it is (PMIx_Init, the layout): $(field '.*the helper took: place \([0-9]*\) ms.*')"
		echo "      the rendezvous: $(field '.*the helper took: .*, rendezvous \([0-9]*\) ms.*')"
	fi
done
