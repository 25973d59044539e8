#!/bin/bash
# Time until every rank has finished init_process_group (PyTorch, gloo),
# srun -N4 with 8 ranks on the local cluster, for the ways users do it:
#
#   --dist-train          srun --dist-train python3 init.py
#   bind=off              the same without binding: on this one machine
#                         the 4 nodes share its cores, so tasks bound on
#                         different nodes can share one core while another
#                         idles; on real nodes binding is what you want
#   --dist-train + PMIx   the same with --mpi=pmix (bootstrap, barrier)
#   torchrun (seeds)      one torchrun agent per node, c10d rendezvous on
#                         the first node, written on torchrun's command line
#   hand-written glue     MASTER_ADDR from scontrol, MASTER_PORT from the
#                         job id, RANK from SLURM_PROCID, in a shell wrapper
#
#   tests/bench/rendezvous.sh [REPETITIONS]     (root; after building)
set -u
reps=${1:-3}
. "$(dirname "$0")/lib.sh"

cluster_start
job_file init.py <<'EOF2'
import time
import torch.distributed as dist
dist.init_process_group("gloo")
print(f"READY {time.time():.4f}", flush=True)
dist.destroy_process_group()
EOF2
job_file glue.sh <<'EOF2'
#!/bin/sh
MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1)
MASTER_PORT=$((15000 + SLURM_JOB_ID % 10000))
export MASTER_ADDR MASTER_PORT RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID \
       WORLD_SIZE=$SLURM_NTASKS
# As a user must write it where torch lacks libuv (Debian 13's 2.6).
export USE_LIBUV=0
exec python3 init.py
EOF2
job_file torchrun.sh <<'EOF2'
#!/bin/sh
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1)
export USE_LIBUV=0	# reaches the workers' store, not torchrun's own
exec torchrun --nnodes=4 --nproc_per_node=2 --rdzv_backend=c10d \
	--rdzv_endpoint="$head:29400" --rdzv_id="$SLURM_JOB_ID" init.py
EOF2

# Seconds from srun's start to the last rank's READY.
measure() {
	local t0 last
	# The last job's teardown and the wait for it (squeue) are no part
	# of this one's start.
	wait_jobs_completed
	t0=$(date +%s.%N)
	job_now "$@" || { echo "failed: $*" >&2; tail -5 "$ERR" >&2; return 1; }
	[ "$(grep -c 'READY' "$OUT")" = 8 ] || { echo "not 8 ranks: $*" >&2; return 1; }
	last=$(sed -n 's/.*READY //p' "$OUT" | sort -n | tail -1)
	awk -v a="$t0" -v b="$last" 'BEGIN { printf "%.3f\n", b - a }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
run() { # NAME COMMAND...: a baseline may fail here (torchrun's c10d
	# store needs libuv, which Debian 13's torch lacks); its row says so.
	local name=$1 i t times=()
	shift
	for ((i = 0; i < reps; i++)); do
		if ! t=$(measure "$@"); then
			[ "$name" = torchrun ] || exit 1
			result[$name]=-
			return
		fi
		times+=("$t")
	done
	result[$name]=$(printf '%s\n' "${times[@]}" | median)
}

declare -A result
run dist-train srun -N4 -n8 --dist-train python3 init.py
run bind=off srun -N4 -n8 --dist-train=bind=off python3 init.py
run dist-train-pmix srun -N4 -n8 --mpi=pmix --dist-train python3 init.py
run torchrun srun -N4 --ntasks-per-node=1 -c2 ./torchrun.sh
run glue srun -N4 -n8 ./glue.sh

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "x%.2f", a / b }'; }
echo "Until every rank has finished init_process_group (gloo), 8 ranks on 4"
echo "nodes, median of $reps runs ($(nproc) cores, $(date -u +%Y-%m-%d)):"
for name in glue dist-train bind=off dist-train-pmix torchrun; do
	if [ "${result[$name]}" = - ]; then
		printf '  %-20s did not run here (its error is above)\n' "$name"
		continue
	fi
	printf '  %-20s %7ss  %s vs glue\n' "$name" "${result[$name]}" \
		"$(ratio "${result[$name]}" "${result[glue]}")"
done
