#!/bin/bash
# Site defaults as plugstack.conf arguments, a broken plugstack.conf,
# Slurm's per-step reserved ports, and a plugin marked optional.
. "$(dirname "$0")/lib.sh"

cluster_start
# SlurmdParameters=contain_spank came with Slurm 23.02.
contain_spank=$(slurmd -V | awk '{ split($2, v, "."); print (v[1] * 100 + v[2] >= 2302) }')
plan $((21 + contain_spank))

job_file show.sh <<'EOF2'
#!/bin/sh
echo "$1 RANK=${RANK:-unset} MASTER_PORT=${MASTER_PORT:-unset} SOURCE=${DIST_TRAIN_PORT_SOURCE:-unset}"
EOF2

set_plugin_args default=on port-range=25000-25099
job srun -N2 -n2 ./show.sh on
check "default=on: a plain srun gets the environment" \
	test "$(count_lines '^on RANK=[01] MASTER_PORT=250[0-9][0-9] SOURCE=derived$')" = 2 || show_output
job srun -N2 -n2 --dist-train=off ./show.sh off
check "default=on: --dist-train=off opts out" \
	test "$(count_lines '^off RANK=unset')" = 2 || show_output
job sbatch --wait -N1 -o batch.out --wrap './show.sh batch'
cp "$JOBS/batch.out" "$OUT" 2>/dev/null
check "default=on: batch steps are still left alone" \
	grep -q '^batch RANK=unset' "$OUT" || show_output

set_plugin_args verbose=yes
job srun -N1 -n2 --dist-train true
check "verbose=yes: verbose without asking" \
	test "$(grep -c '^dist-train: rank [01] on n1: ' "$ERR")" = 2 || show_output
job srun -N1 -n2 --dist-train=verbose=no true
check "... and --dist-train=verbose=no silences it" \
	test "$(grep -c '^dist-train: rank' "$ERR")" = 0 || show_output

set_plugin_args bogus=1
job srun -N2 -n2 ./show.sh plain
check "an unknown plugstack.conf argument does not break plain jobs" \
	test "$(count_lines '^plain RANK=unset')" = 2 || show_output
check "... nor print anything to their users" test ! -s "$ERR" || show_output
rm -f "$JOBS/ran"
job srun -N2 -n2 --dist-train touch ran
check "... and --dist-train then fails before launch, telling who can fix it" \
	eval '[ ! -e "$JOBS/ran" ] && grep -q "dist-train: --dist-train is unavailable: plugstack.conf is wrong (unknown plugstack.conf argument '"'bogus=1'"'; valid: verbose\[=yes|no\], [^;]*); ask your administrator to fix it" "$ERR"' || show_output
check "... and the node logs say the plugin is disabled" \
	grep -q 'dist-train: disabled on n1: unknown plugstack.conf argument' "$DT_CLUSTER_DIR"/log/slurmd-n1.log

set_plugin_args port-range=2000
job srun -N1 --dist-train true
check "a malformed port-range is refused the same way" \
	grep -q "bad value '2000' for 'port-range'" "$ERR" || show_output

# Slurm's reserved ports (MpiParams=ports=...) come first.
cluster_stop
DT_CLUSTER_RESV_PORTS=12000-12999 cluster_start
job srun -N4 -n8 --dist-train ./show.sh resv
check "MpiParams=ports: MASTER_PORT is one of the step's reserved ports" \
	test "$(count_lines '^resv RANK=[0-7] MASTER_PORT=12[0-9][0-9][0-9] SOURCE=reserved$')" = 8 || show_output
check "... the same on every rank" \
	test "$(grep -o 'MASTER_PORT=[0-9]*' "$OUT" | sort -u | wc -l)" = 1
job srun -N2 -n2 --dist-train sh -c 'test "$MASTER_PORT" = "${SLURM_STEP_RESV_PORTS%%[-,]*}" && echo same'
check "... namely the first of SLURM_STEP_RESV_PORTS" \
	test "$(count_lines '^same$')" = 2 || show_output


# "optional" in plugstack.conf: Slurm then ignores the plugin's failures.
# A step that asked for the environment still never runs without it, and
# one that did not ask is left alone, whatever fails.
export DT_CLUSTER_PLUGIN_MODE=optional
ran_nowhere() { ! ls "$JOBS"/ran.* >/dev/null 2>&1; }
set_plugin_args bogus=1
rm -f "$JOBS"/ran.*
job srun -N2 -n2 --dist-train sh -c 'touch ran.$SLURM_PROCID'
rc=$?
check "optional, plugstack.conf wrong: srun refuses --dist-train before launch, with one message" \
	eval '[ $rc != 0 ] && ran_nowhere && [ "$(grep -c "dist-train" "$ERR")" = 1 ] &&
	      grep -q "^srun: error: dist-train: --dist-train is unavailable: plugstack.conf is wrong" "$ERR"' || show_output
job srun -N2 -n2 ./show.sh plain
check "... while plain steps run" \
	test "$(count_lines '^plain RANK=unset')" = 2 || show_output

set_plugin_args helper=/nonexistent/dist-train
job srun -N2 -n2 --dist-train=check sh -c 'touch ran.$SLURM_PROCID'
rc=$?
check "optional, a helper that cannot run: no task runs the program, srun exits non-zero" \
	eval '[ $rc != 0 ] && ran_nowhere &&
	      [ "$(grep -c "^dist-train: error: on n[0-9]*: cannot run the helper /nonexistent/dist-train (No such file or directory):" "$ERR")" = 2 ]' || show_output
job srun -N2 -n2 ./show.sh plain
check "... while plain steps run" \
	test "$(count_lines '^plain RANK=unset')" = 2 || show_output

# What srun refuses after the step exists, the nodes refuse again.
set_plugin_args
job srun -N2 --ntasks-per-node=2 --dist-train=torchrun sh -c 'touch ran.$SLURM_PROCID'
rc=$?
check "optional, torchrun mode with 2 tasks per node: no task runs, srun exits non-zero" \
	eval '[ $rc != 0 ] && ran_nowhere &&
	      grep -q "dist-train: --dist-train=torchrun runs one torchrun agent per node" "$ERR"' || show_output

# Without PMIx, the same environment as under "required".
job srun -N4 -n8 --dist-train ./show.sh opt
check "optional, nothing wrong: every task gets the environment" \
	test "$(count_lines '^opt RANK=[0-7] MASTER_PORT=12[0-9][0-9][0-9] SOURCE=reserved$')" = 8 || show_output
job_file allreduce.py < "$(dirname "$0")/allreduce.py"
printf 'n2\nn1\nn1\n' | job_file hosts.optional
job env SLURM_HOSTFILE="$JOBS/hosts.optional" srun -n3 -m arbitrary --mpi=none --dist-train /usr/bin/python3 allreduce.py
check "optional, -m arbitrary without PMIx: a gloo all_reduce with rank 0 on n2" \
	test "$(count_lines '^ALLREDUCE rank=[0-2] world=3 sum=3 host=n[12] master=n2:')" = 3 || show_output
job srun -N2 -n2 --dist-train=bogus=1 sh -c 'touch ran.$SLURM_PROCID'
rc=$?
check "optional, a wrong --dist-train value: refused before launch" \
	eval '[ $rc != 0 ] && ran_nowhere &&
	      grep -q "dist-train: --dist-train=bogus=1: unknown setting" "$ERR"' || show_output
unset DT_CLUSTER_PLUGIN_MODE
set_plugin_args

# SlurmdParameters=contain_spank (Slurm 23.02 and later): Slurm runs
# task_exit in a clone that shares slurmstepd's memory, not its
# descriptors, so no node's reporter (plugin/exit_reporter.c) serves it;
# each task's record has a child of its own, and srun still names the
# failure first.
if [ "$contain_spank" = 1 ]; then
	cluster_stop
	DT_CLUSTER_SLURMD_PARAMS=contain_spank cluster_start
	start=$(date +%s)
	job srun -N2 -n4 --dist-train sh -c '[ "$RANK" = 3 ] && exit 5; exec sleep 60'
	took=$(( $(date +%s) - start ))
	check "contain_spank: a failed task still stops the step ($took s), and srun names it first" \
		eval '[ $took -lt 30 ] && grep -m1 error "$ERR" | grep -q "dist-train: rank 3 failed first, .*exit code 5"' || show_output
fi

finish
