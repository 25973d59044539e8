#!/bin/bash
# srun --container (Slurm's OCI support, runc as oci.conf's runtime) with
# --dist-train: from 23.02 on, the program in the container gets the same
# variables and binding as outside, and a gloo job runs in containers
# across nodes; a release whose containers cannot get a task's
# environment refuses the step before launch (the program would run
# without RANK, silently). dt-cluster writes oci.conf and the bundle
# where runc is installed.
. "$(dirname "$0")/lib.sh"

cluster_start

version=$("$DT_CLUSTER" run srun --version | awk '{ print $2 }')
major=${version%%.*}
rest=${version#*.}
minor=${rest%%.*}
bundle=$DT_CLUSTER_DIR/oci/bundle

if [ $((10#$major * 100 + 10#$minor)) -lt 2302 ]; then
	plan 4
	rm -f "$JOBS/ran"
	job srun -N2 -n2 --container="$bundle" --dist-train touch ran
	rc=$?
	check "Slurm $version: srun --container --dist-train fails" test $rc != 0
	check "... with one message naming the release and the fix" \
		eval '[ "$(grep -c "dist-train" "$ERR")" = 1 ] &&
		      grep -q "dist-train: --dist-train cannot reach a program in Slurm $major\.$minor.s OCI container (--container=$bundle): .* Run the container runtime as the task.s command instead" "$ERR"' ||
		show_output
	check "... before anything ran" test ! -e "$JOBS/ran"
	# Not asking is never refused by the plugin.
	job srun -N1 --container="$bundle" --dist-train=off true
	check "... and --dist-train=off with --container is not the plugin's to refuse" \
		eval '! grep -q "dist-train" "$ERR"' || show_output
	finish
	exit
fi

plan 8
if [ ! -r "$DT_CLUSTER_DIR/etc/oci.conf" ]; then
	echo "Bail out! no oci.conf: runc is not installed (contrib/install-deps.sh installs it)"
	exit 1
fi

# What a task knows of itself. In the container the task is PID 1 of its
# own PID namespace: that tells it from a task Slurm ran on the host.
job_file identity.sh <<'EOF2'
#!/bin/sh
echo "ID pid=$$ RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE" \
     "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_RANK=$GROUP_RANK" \
     "MASTER_ADDR=$MASTER_ADDR procid=$SLURM_PROCID host=$(hostname)" \
     "cpus=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status)" \
     "mems=$(awk '/^Mems_allowed_list/ { print $2 }' /proc/self/status)" \
     "port=${MASTER_PORT:+set}"
EOF2
# Everything but the PID, one line per rank.
identities() { grep '^ID ' "$OUT" | sed 's/ pid=[0-9]*//' | sort; }

job srun -N2 -n4 --dist-train "$JOBS/identity.sh"
outside=$(identities)
check "Slurm $version: four tasks without a container" \
	test "$(count_lines '^ID pid=[0-9]+ RANK=[0-3] ')" = 4 || show_output

job srun -N2 -n4 --container="$bundle" --dist-train "$JOBS/identity.sh"
rc=$?
check "... the same four with --container=BUNDLE: the step runs" \
	test $rc = 0 || show_output
check "... each task in a container of its own (PID 1 of its namespace)" \
	test "$(count_lines '^ID pid=1 RANK=[0-3] ')" = 4 || show_output
inside=$(identities)
check "... with the same RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and binding as outside, and a MASTER_PORT" \
	test -n "$inside" -a "$inside" = "$outside" ||
	diag "outside:
$outside
inside:
$inside"

# A gloo job across two nodes, every rank in a container.
job_file allreduce.py < "$(dirname "$0")/allreduce.py"
job srun -N2 -n4 --container="$bundle" --dist-train /usr/bin/python3 "$JOBS/allreduce.py"
check "... a gloo all_reduce across two nodes runs in containers" \
	test "$(count_lines '^ALLREDUCE rank=[0-3] world=4 sum=6 ')" = 4 || show_output

# Without --dist-train the plugin stays out of the container's way.
job srun -N1 -n1 --container="$bundle" "$JOBS/identity.sh"
check "without --dist-train the task runs in the container untouched" \
	eval '[ "$(count_lines "^ID pid=1 RANK= ")" = 1 ] && ! grep -q "dist-train" "$ERR"' || show_output

# What Slurm 22.05 cannot do is refused there; not here.
job srun -N1 -n1 --container="$bundle" --dist-train=off true
check "... nor with --dist-train=off" \
	eval '! grep -q "dist-train" "$ERR"' || show_output
job srun -N1 -n1 --container="$bundle" --dist-train true
check "... and --container with --dist-train is not refused" \
	eval '! grep -q "cannot reach a program" "$ERR"' || show_output

finish
