#!/bin/bash
# srun --container (Slurm's OCI support) with --dist-train: a release whose
# containers cannot get a task's environment refuses the step before launch
# (the program would run without RANK, silently); later ones pass it on.
. "$(dirname "$0")/lib.sh"

cluster_start
plan 4

version=$("$DT_CLUSTER" run srun --version | awk '{ print $2 }')
major=${version%%.*}
rest=${version#*.}
minor=${rest%%.*}
bundle=$JOBS/bundle
mkdir -p "$bundle"

rm -f "$JOBS/ran"
job srun -N2 -n2 --container="$bundle" --dist-train touch ran
rc=$?
if [ $((10#$major * 100 + 10#$minor)) -lt 2302 ]; then
	check "Slurm $version: srun --container --dist-train fails" test $rc != 0
	check "... with one message naming the release and the fix" \
		eval '[ "$(grep -c "dist-train" "$ERR")" = 1 ] &&
		      grep -q "dist-train: --dist-train cannot reach a program in Slurm $major\.$minor.s OCI container (--container=$bundle): .* Run the container runtime as the task.s command instead" "$ERR"' ||
		show_output
	check "... before anything ran" test ! -e "$JOBS/ran"
	# Not asking is never refused by the plugin (Slurm may still refuse
	# the bundle: this cluster has no oci.conf).
	job srun -N1 --container="$bundle" --dist-train=off true
	check "... and --dist-train=off with --container is not the plugin's to refuse" \
		eval '! grep -q "dist-train" "$ERR"' || show_output
else
	# Here slurmstepd writes each task's container configuration after
	# the plugins' task_init. This cluster has no oci.conf, so Slurm runs
	# the task without a container.
	check "Slurm $version: --container is not refused by the plugin" \
		eval '! grep -q "cannot reach a program" "$ERR"' || show_output
	check "... the step runs" test $rc = 0 || show_output
	check "... and so did its tasks" test -e "$JOBS/ran"
	job srun -N2 -n2 --container="$bundle" --dist-train sh -c 'echo "RANK=$RANK"'
	check "... with their environment" \
		test "$(count_lines '^RANK=[01]$')" = 2 || show_output
fi

finish
