#!/bin/bash
# srun --container-image (NVIDIA's pyxis, which runs enroot) with
# --dist-train, on the test cluster: pyxis and enroot built from their
# release sources, an image made from a Debian root with python3 and
# torch. tests/pyxis.sh builds them and runs this script; by itself it
# needs DT_PYXIS_KIT (spank_pyxis.so and enroot/ built for this Slurm)
# and DT_PYXIS_IMAGE (the image's squashfs file).
#
# With dist_train listed before pyxis in plugstack.conf, as documented,
# each task gets the same variables and binding in the container as
# outside, a gloo job runs in containers across nodes, and the helper
# (--dist-train=check) runs; what the image sets wins unless named in
# --container-env; with pyxis first, the step ends before the program
# with one message per node naming the order and the fix.
. "$(dirname "$0")/lib.sh"

kit=${DT_PYXIS_KIT:-}
image=${DT_PYXIS_IMAGE:-}
if [ -z "$kit" ] || [ ! -r "$kit/spank_pyxis.so" ] || [ ! -r "$image" ]; then
	echo "1..0 # SKIP no pyxis kit or image: run tests/pyxis.sh, which builds them"
	exit 0
fi

# The plugin's folder (its worker library and Python hook) in every
# container, as an administrator mounts LIBDIR/dist-train: a line in
# enroot's mounts.d.
mounts=$kit/enroot/etc/enroot/mounts.d
lib_mount() {
	echo "$DT_CLUSTER_DIR/lib $DT_CLUSTER_DIR/lib none x-create=dir,bind,ro,nosuid,nodev,private 0 -1" \
		> "$mounts/50-dist-train.fstab"
}
lib_mount
export DT_CLUSTER_PYXIS=$kit
unset DT_CLUSTER_PYXIS_FIRST
cluster_start

plan 14
version=$("$DT_CLUSTER" run srun --version | awk '{ print $2 }')

# What a task knows of itself; image=yes only in the test image.
job_file identity.sh <<'EOF2'
#!/bin/sh
image=no
[ -e /etc/dist-train-test-image ] && image=yes
echo "ID image=$image RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE" \
     "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_RANK=$GROUP_RANK" \
     "MASTER_ADDR=$MASTER_ADDR procid=$SLURM_PROCID host=$(cat /proc/sys/kernel/hostname)" \
     "cpus=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status)" \
     "mems=$(awk '/^Mems_allowed_list/ { print $2 }' /proc/self/status)" \
     "port=${MASTER_PORT:+set}"
EOF2
# Everything but the image, one line per rank.
identities() { grep '^ID ' "$OUT" | sed 's/ image=[a-z]*//' | sort; }
# The job folder is mounted at its own path, as users mount theirs.
in_image=(--container-image="$image" --container-mounts="$JOBS:$JOBS")

job srun -N2 -n4 --dist-train "$JOBS/identity.sh"
outside=$(identities)
check "Slurm $version: four tasks without a container" \
	test "$(count_lines '^ID image=no RANK=[0-3] ')" = 4 || show_output

job srun -N2 -n4 "${in_image[@]}" --dist-train "$JOBS/identity.sh"
rc=$?
check "... the same four with --container-image (pyxis, enroot): the step runs" \
	test $rc = 0 || show_output
check "... each task in the image" \
	test "$(count_lines '^ID image=yes RANK=[0-3] ')" = 4 || show_output
inside=$(identities)
check "... with the same RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and binding as outside, and a MASTER_PORT" \
	test -n "$inside" -a "$inside" = "$outside" ||
	diag "outside:
$outside
inside:
$inside"

# A gloo job across two nodes, every rank in a container; rank 0's
# store takes the port the plugin held, through the Python hook.
job_file allreduce.py < "$(dirname "$0")/allreduce.py"
job srun -N2 -n4 "${in_image[@]}" --dist-train python3 "$JOBS/allreduce.py"
check "... a gloo all_reduce across two nodes runs in containers" \
	test "$(count_lines '^ALLREDUCE rank=[0-3] world=4 sum=6 ')" = 4 || show_output

# The helper runs on the node, before the container: its check too.
job srun -N2 -n4 "${in_image[@]}" --dist-train=check "$JOBS/identity.sh"
check "... --dist-train=check: every rank reached rank 0 and the program ran in the image" \
	eval 'grep -q "check: all 4 ranks reached rank 0" "$ERR" &&
	      [ "$(count_lines "^ID image=yes RANK=[0-3] ")" = 4 ]' || show_output

# What the image sets (OMP_NUM_THREADS=7 in its /etc/environment) wins
# over the task's (the plugin's 1): pyxis copies the container's
# environment over it, unless the user names it in --container-env.
job_file omp.sh <<'EOF2'
#!/bin/sh
echo "OMP rank=$RANK threads=$OMP_NUM_THREADS"
EOF2
job srun -N1 -n2 --dist-train "$JOBS/omp.sh"
omp_outside=$(grep '^OMP ' "$OUT" | sort)
job srun -N1 -n2 "${in_image[@]}" --dist-train "$JOBS/omp.sh"
check "what the image sets wins: OMP_NUM_THREADS is the image's 7 in the container, not the plugin's" \
	eval '[ "$(count_lines "^OMP rank=[01] threads=7$")" = 2 ] &&
	      ! grep -q "threads=7" <<<"$omp_outside"' ||
	diag "outside: $omp_outside; inside: $(cat "$OUT")"
job srun -N1 -n2 "${in_image[@]}" --container-env=OMP_NUM_THREADS --dist-train "$JOBS/omp.sh"
check "... and --container-env=OMP_NUM_THREADS keeps the plugin's" \
	test -n "$omp_outside" -a "$(grep '^OMP ' "$OUT" | sort)" = "$omp_outside" ||
	diag "outside: $omp_outside; inside: $(cat "$OUT")"

# Without --dist-train the plugin stays out of the container's way.
job srun -N1 -n1 "${in_image[@]}" "$JOBS/identity.sh"
check "without --dist-train the task runs in the image untouched" \
	eval '[ "$(count_lines "^ID image=yes RANK= ")" = 1 ] && ! grep -q "dist-train" "$ERR"' ||
	show_output

# Without the plugin's folder in the container, the hook is not there:
# the failures the documentation names, and their fix (the program
# started through a shell, with USE_LIBUV=0 for a torch built without
# libuv, as Debian's 2.x are).
rm -f "$mounts/50-dist-train.fstab"
job srun -N2 -n4 "${in_image[@]}" --dist-train python3 "$JOBS/allreduce.py"
check "without the plugin's folder mounted, rank 0's store finds its port held (torch 1.13), or a torch without libuv cannot make its store (the documented failures)" \
	grep -q -E "Address already in use|PyTorch was build without libuv support" "$ERR" ||
	show_output
job srun -N2 -n4 "${in_image[@]}" --dist-train \
	sh -c "USE_LIBUV=0 exec python3 $JOBS/allreduce.py"
check "... and started through a shell, the job runs" \
	test "$(count_lines '^ALLREDUCE rank=[0-3] world=4 sum=6 ')" = 4 || show_output
lib_mount

# pyxis listed first: its task setup moves each task into the container
# before the plugin's, where the node's paths are not. fail-fast=no: the
# first node's failure does not stop the second while enroot still
# unpacks the image there, so that both nodes say it.
DT_CLUSTER_PYXIS_FIRST=1 "$DT_CLUSTER" plugstack
rm -f "$JOBS/ran"
job srun -N2 -n4 "${in_image[@]}" --dist-train=fail-fast=no sh -c "touch $JOBS/ran"
rc=$?
check "pyxis before dist_train in plugstack.conf: the step fails" \
	test $rc != 0 || show_output
check "... with one message per node naming the order and the fix" \
	eval '[ "$(grep -c "^dist-train: error: on n[12]: the task is already in a container: a plugin listed before dist_train in plugstack.conf (pyxis, for --container-image) entered it, .* Ask your administrator to list dist_train before pyxis in plugstack.conf" "$ERR")" = 2 ]' ||
	show_output
check "... before the program ran" test ! -e "$JOBS/ran"
"$DT_CLUSTER" plugstack

finish
