#!/bin/bash
# How long a step runs on after one of its tasks fails, with --dist-train
# (fail-fast, plugin/watch.c) and with plain srun, on the local 4-node
# cluster.
#
#   tests/bench/failure.sh [REPETITIONS]      (root; after building; [1])
#
# The job: srun -N4 -n8, rank 5 exits 3 after 2 s, the other seven sleep
# 120 s (standing for long computation, or a GPU kernel spinning on a dead
# peer: nothing that notices rank 5 is gone). Rank 5 writes the time of its
# exit first; the figure is from then to srun's end. Plain srun is the same
# job, its rank from SLURM_PROCID, in the same run: it ends when the others
# do, about 118 s after the exit. The last line is
#   failure: first exit to step end X s with --dist-train, Y s without (Z x)
. "$(dirname "$0")/lib.sh"

reps=${1:-1}
cluster_start
job_file fail-bench.sh <<'EOF'
#!/bin/sh
# Rank 5 fails after 2 s; the others are busy for 120 s.
rank=${RANK:-$SLURM_PROCID}
if [ "$rank" = 5 ]; then
	sleep 2
	date +%s.%N > "$1"
	exit 3
fi
sleep 120
EOF

# exit_to_end ARGS...: seconds from rank 5's exit to srun's end.
exit_to_end() {
	local stamp=$JOBS/.exit
	rm -f "$stamp"
	job "$@" ./fail-bench.sh "$stamp"
	local end
	end=$(date +%s.%N)
	[ -s "$stamp" ] || { echo "rank 5 never ran: $(head -c 400 "$ERR")" >&2; exit 1; }
	awk -v a="$(cat "$stamp")" -v b="$end" 'BEGIN { printf "%.2f", b - a }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f", m }'; }

with=() without=()
for ((i = 0; i < reps; i++)); do
	with+=("$(exit_to_end srun -N4 -n8 --dist-train)")
	grep -q 'rank 5 failed first' "$ERR" ||
		{ echo "--dist-train did not name rank 5: $(head -c 400 "$ERR")" >&2; exit 1; }
	without+=("$(exit_to_end srun -N4 -n8)")
	echo "run $((i + 1)): ${with[i]} s with --dist-train, ${without[i]} s with plain srun"
done
x=$(printf '%s\n' "${with[@]}" | median)
y=$(printf '%s\n' "${without[@]}" | median)
echo "failure: first exit to step end $x s with --dist-train, $y s without ($(awk -v a="$x" -v b="$y" 'BEGIN { printf "%.1f", b / a }') x)"
