#!/bin/bash
# The rules of dist_train(8), section SECURITY, that can be tested: what
# runs as whom, and what a user can and cannot make the plugin do.
. "$(dirname "$0")/lib.sh"

cluster_start
plan 27

uid=$(id -u "${DT_CLUSTER_USER:-dttest}") gid=$(id -g "${DT_CLUSTER_USER:-dttest}")
admin_file id-helper <<EOF
#!/bin/sh
grep -E '^(Uid|Gid|Groups):' /proc/self/status > "$JOBS/helper-ids.\$(hostname).\$\$"
exec $DT_CLUSTER_DIR/bin/dist-train "\$@"
EOF

# The one program the plugin runs, the helper, runs as the user: real,
# effective, saved and filesystem ids alike, no root group. By default a
# PMIx step runs none (its nodes' local rank 0s lead them in the plugin,
# as the user too); with check, one in every task.
rm -f "$JOBS"/helper-ids.*
set_plugin_args helper="$ADMIN/id-helper"
job srun -N2 -n4 --mpi=pmix --dist-train true
pmix_check "a PMIx step runs no helper by default" \
	test $? = 0 -a "$(ls "$JOBS"/helper-ids.* 2>/dev/null | wc -l)" = 0 || show_output
job srun -N2 -n4 --mpi=pmix --dist-train=check true
pmix_check "... with check, one in every task" \
	test "$(ls "$JOBS"/helper-ids.* 2>/dev/null | wc -l)" = 4 || show_output
pmix_check "... as the user: every uid is $uid" \
	test "$(cat "$JOBS"/helper-ids.* | grep -c -P "^Uid:\t$uid\t$uid\t$uid\t$uid$")" = 4
pmix_check "... every gid is $gid" \
	test "$(cat "$JOBS"/helper-ids.* | grep -c -P "^Gid:\t$gid\t$gid\t$gid\t$gid$")" = 4
pmix_check "... and no supplementary group is root's" \
	test "$(cat "$JOBS"/helper-ids.* | grep '^Groups:' | grep -c -w 0)" = 0

# Steps that do not ask for it run nothing of the plugin's.
rm -f "$JOBS"/helper-ids.*
job srun -N2 -n4 --mpi=pmix true
check "without --dist-train the helper does not run" \
	test "$(ls "$JOBS"/helper-ids.* 2>/dev/null | wc -l)" = 0
set_plugin_args

# Settings that name programs, libraries, files or ports are the
# administrator's (plugstack.conf), never a job's.
for s in helper=/tmp/x topology=/tmp/x.xml worker-lib=/tmp/x.so \
	 port-range=1024-2047 default=on; do
	rm -f "$JOBS/ran"
	job srun -N1 --dist-train="$s" touch ran
	check "--dist-train=$s is refused before launch, as the administrator's" \
		eval '[ ! -e "$JOBS/ran" ] && grep -q "setting '"'"'${s%%=*}'"'"' is the administrator'"'"'s (a plugstack.conf argument), not yours to give: remove it" "$ERR"' || show_output
done

# The administrator's paths are changed by root alone, or the plugin stays
# off: srun refuses --dist-train before launch, in one message naming the
# path, and steps without it run (common/admin_path.h).
install -m 0755 "$DT_CLUSTER_DIR/bin/dist-train" "$JOBS/user-helper"
mkdir -p -m 0775 "$ADMIN/group"
for s in "helper=$JOBS/user-helper|$JOBS belongs to uid $uid, not root" \
	 "worker-lib=/tmp/dist_train_worker.so|/tmp can be written by others than root (mode 1777)" \
	 "topology-cache=$ADMIN/group/machine|$ADMIN/group can be written by others than root (mode 0775)"; do
	set_plugin_args "${s%%|*}"
	rm -f "$JOBS/ran"
	job srun -N1 --dist-train touch ran
	check "plugstack.conf's ${s%%|*} is refused before launch, in one message" \
		eval '[ ! -e "$JOBS/ran" ] &&
		      [ "$(grep -c "dist-train: --dist-train is unavailable: plugstack.conf is wrong (${s%%|*}: ${s#*|}: put it where only root can write: every folder above it root.s, mode 755, such as /usr/local/bin or /etc/dist-train); ask your administrator to fix it$" "$ERR")" = 1 ] &&
		      [ "$(grep -c dist-train "$ERR")" = 1 ]' || show_output
done
job srun -N2 true
check "... and steps without --dist-train run" test $? = 0 || show_output
set_plugin_args

# A dist-train first on the user's PATH is not the helper the plugin runs.
mkdir -p "$JOBS/evil"
cat > "$JOBS/evil/dist-train" <<'EOF'
#!/bin/sh
touch "$(dirname "$0")/used"
exit 1
EOF
chmod 0755 "$JOBS/evil" "$JOBS/evil/dist-train"
rm -f "$JOBS/evil/used"
# (srun's own folder after it: /usr/local/bin where Slurm was built from
# source.)
job env PATH="$JOBS/evil:$(dirname "$(command -v srun)"):/usr/bin:/bin" \
	srun -N2 -n2 --mpi=pmix --dist-train=check true
pmix_check "the helper's path comes from plugstack.conf, not the user's PATH" \
	test $? = 0 -a ! -e "$JOBS/evil/used" || show_output

# The worker library goes first in LD_PRELOAD; the user's stays after it.
job env LD_PRELOAD=/lib/x86_64-linux-gnu/libm.so.6 \
	srun -N1 --ntasks-per-node=1 --dist-train=torchrun printenv LD_PRELOAD
check "torchrun mode keeps the user's LD_PRELOAD after the worker library" \
	grep -qx "$DT_CLUSTER_DIR/lib/dist_train_worker.so:/lib/x86_64-linux-gnu/libm.so.6" "$OUT" || show_output

# An absurd option value is handled, not a crash of srun or slurmstepd.
long=$(printf 'verbose=no,%.0s' $(seq 1 2000))on
job srun -N2 -n2 --dist-train="$long" sh -c 'echo "RANK=$RANK"'
check "a 22 kB --dist-train value works" \
	test "$(count_lines '^RANK=[01]$')" = 2 || show_output

# What slurmstepd reads is bounded before it is parsed. Slurm's own srun
# carries no variable above 256 KiB, a launch message written by hand any
# size: the tests' huge_env plugin hands slurmstepd 20 MB in its place,
# and logs how far slurmstepd's peak memory grew while dist_train.so read
# it (tests/integration/huge_env.c).
test_plugin huge_env
log=$DT_CLUSTER_DIR/log/slurmd-n1.log
for var in SLURM_STEP_NODELIST SLURM_STEP_TASKS_PER_NODE \
	   SLURM_STEP_RESV_PORTS SLURM_DISTRIBUTION; do
	rm -f "$JOBS/ran"
	seen=$(wc -l < "$log")
	job env DT_TEST_HUGE=$var srun -N1 -n1 -w n1 --dist-train touch ran
	grew=$(tail -n +$((seen + 1)) "$log" |
		sed -n 's/.*huge_env: slurmstepd.s peak memory grew by \(-\?[0-9]*\) kB.*/\1/p' |
		head -n 1)
	check "a 20 MB $var in slurmstepd: one message, the program not run" \
		eval '[ ! -e "$JOBS/ran" ] && [ "$(grep -c "$var is longer than" "$ERR")" = 1 ]' ||
		show_output
	check "... slurmstepd's peak grew by ${grew:-?} kB, under 10 MB" \
		test -n "$grew" -a "${grew:-10240}" -lt 10240 ||
		diag "$(tail -n +$((seen + 1)) "$log" | grep -E 'huge_env|dist_train' | tail -n 5)"
done
set_plugin_args
check "... and no node is drained" no_drained_node

finish
