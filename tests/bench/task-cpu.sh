#!/bin/bash
# What --dist-train costs each task before its program starts, as CPU time
# and page faults, on the local 4-node cluster.
#
#   tests/bench/task-cpu.sh [REPETITIONS]     (root; after building; [20])
#
# Each task is tests/bench/task_cpu.c itself, with no shell: it prints the
# CPU time and page faults its process has had since slurmstepd forked it
# (Slurm's part, the plugins' task callbacks, the exec). Plain srun, the
# plugin and the plugin with binding off run interleaved, REPETITIONS steps
# each of srun -N4 -n64 --overcommit; every figure is the mean over all
# their tasks.
#
# A launch's wall time (tests/bench/launch.sh) moves by several percent
# with whatever else the machine does; this moves less (plain srun's
# figure by 0.01 ms between runs, the plugin's part by 0.05), and says
# what the tasks themselves spend. It is not the launch: a change that
# cuts it need not shorten the launch (doc/performance.md, "Each task's
# CPU before its program").
set -u
reps=${1:-20}
. "$(dirname "$0")/lib.sh"
export DT_CLUSTER_PIN=1
make -s -C "$TOP_BUILDDIR/tests" bench/task_cpu >/dev/null ||
	{ echo "task-cpu: cannot build tests/bench/task_cpu" >&2; exit 1; }
cluster_start
install -m 0755 "$TOP_BUILDDIR/tests/bench/task_cpu" "$JOBS/task_cpu"

layout="-N4 -n64 --overcommit"
variants=("plain srun|" "--dist-train|--dist-train"
	  "--dist-train=bind=off|--dist-train=bind=off")
samples=$JOBS/.task-cpu
: >"$samples"
# One step of variant V: its 64 tasks' lines, labelled V.
run() { # V
	local label=${1%%|*} opt=${1#*|}
	wait_jobs_completed
	job_now srun $layout $opt ./task_cpu ||
		{ echo "failed: srun $layout $opt" >&2; tail -5 "$ERR" >&2; return 1; }
	[ "$(grep -cE '^[0-9]+ [0-9]+$' "$OUT")" = 64 ] ||
		{ echo "not 64 tasks' figures: srun $layout $opt" >&2; return 1; }
	sed "s/^/$label|/" "$OUT" >>"$samples"
}
run "${variants[0]}" >/dev/null || exit 1	# warm-up
: >"$samples"
# Interleaved, each round in another order, so that whatever else the
# machine does falls on every variant alike.
for ((i = 0; i < reps; i++)); do
	for ((j = 0; j < ${#variants[@]}; j++)); do
		run "${variants[$(( (i + j) % ${#variants[@]} ))]}" || exit 1
	done
done

echo "Each task's CPU time and page faults from its fork to its program,"
echo "srun $layout, mean of $reps interleaved steps x 64 tasks ($(nproc) cores, $(date -u +%Y-%m-%d)):"
awk -F'|' -v order="--dist-train|--dist-train=bind=off" '
{ split($2, v, " "); n[$1]++; faults[$1] += v[1]; ns[$1] += v[2] }
END {
	base = "plain srun"
	if (!n[base] || !n["--dist-train"]) exit 1
	b_ms = ns[base] / n[base] / 1e6; b_f = faults[base] / n[base]
	printf "  %-24s %6.3f ms  %5.0f faults\n", base, b_ms, b_f
	count = split(order, names, "|")
	for (i = 1; i <= count; i++) {
		k = names[i]
		ms = ns[k] / n[k] / 1e6; f = faults[k] / n[k]
		printf "  %-24s %6.3f ms  %5.0f faults  (%+.3f ms, %+.0f faults)\n", k, ms, f, ms - b_ms, f - b_f
		if (k == "--dist-train") { d_ms = ms; d_f = f }
	}
	printf "task cpu: --dist-train adds %.3f ms of CPU and %.0f page faults to each task (x%.2f plain srun'\''s %.3f ms)\n", d_ms - b_ms, d_f - b_f, d_ms / b_ms, b_ms
}' "$samples" || { echo "task-cpu: no figures" >&2; exit 1; }
