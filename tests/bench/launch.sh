#!/bin/bash
# Launch overhead of --dist-train on the local 4-node cluster, as figures.
#
#   tests/bench/launch.sh [REPETITIONS]      (root; after building)
#
# For each variant it measures, REPETITIONS times, the time from starting
# srun to the moment the last of the step's 8 tasks starts its program
# (each task prints a timestamp first thing), and prints the median and the
# ratio against what it extends: the environment alone against plain srun,
# binding against the environment alone, the PMIx bootstrap against plain
# srun --mpi=pmix. It starts and stops its own cluster.
set -u
reps=${1:-10}
. "$(dirname "$0")/lib.sh"

cluster_start
job_file stamp.sh <<'EOF2'
#!/bin/sh
date +%s.%N
EOF2

# One run: seconds from srun's start to the last task's program start.
measure() {
	local t0 last
	t0=$(date +%s.%N)
	job "$@" ./stamp.sh || { echo "failed: $*" >&2; cat "$ERR" >&2; return 1; }
	last=$(sort -n "$OUT" | tail -1)
	awk -v a="$t0" -v b="$last" 'BEGIN { printf "%.4f\n", b - a }'
}

median() { sort -n | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f", m }'; }

declare -A result
variants=(
	"srun --mpi=none"
	"srun --mpi=none --dist-train=bind=off"
	"srun --mpi=none --dist-train"
	"srun --mpi=pmix"
	"srun --mpi=pmix --dist-train"
	"srun --mpi=pmix --dist-train=check"
)
for v in "${variants[@]}"; do
	measure $v -N4 -n8 >/dev/null	# warm-up
	times=()
	for ((i = 0; i < reps; i++)); do
		times+=("$(measure $v -N4 -n8)") || exit 1
	done
	result[$v]=$(printf '%s\n' "${times[@]}" | median)
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "x%.2f", a / b }'; }
row() { # VARIANT [BASELINE]
	printf '  %-40s %7ss  %s\n' "$1" "${result[$1]}" \
		"${2:+$(ratio "${result[$1]}" "${result[$2]}") vs ${2#srun }}"
}
echo "Launch to the last task's program start, srun -N4 -n8 on the local cluster,"
echo "median of $reps runs ($(nproc) cores, $(date -u +%Y-%m-%d)):"
row "srun --mpi=none"
row "srun --mpi=none --dist-train=bind=off" "srun --mpi=none"
row "srun --mpi=none --dist-train" "srun --mpi=none --dist-train=bind=off"
row "srun --mpi=pmix"
row "srun --mpi=pmix --dist-train" "srun --mpi=pmix"
row "srun --mpi=pmix --dist-train=check" "srun --mpi=pmix"
