#!/bin/bash
# A rolling Slurm upgrade's cluster (tests/rolling-upgrade.sh runs it, in
# a rolling-OLD-NEW root): slurmctld and the upgraded nodes run the
# newer Slurm (this root's own), login hosts and the nodes not upgraded yet
# the older one (DT_ROLLING_OLD, its prefix), each host loading the
# dist-train built for its own release (DT_ROLLING_OLD_BUILD: the tree
# built against the older Slurm), as the admin guide says to install it.
# Slurm allows a client older than the daemons it talks to and slurmds
# older than slurmctld, not the other way round; each mix it allows is
# checked, and the one it does not is shown as what a site would see.
. "$(dirname "$0")/lib.sh"

OLD=${DT_ROLLING_OLD:?DT_ROLLING_OLD: the prefix of the older Slurm, such as /opt/slurm-24.05}
OLD_BUILD=${DT_ROLLING_OLD_BUILD:?DT_ROLLING_OLD_BUILD: dist-train built against the older Slurm}
[ -x "$OLD/bin/srun" ] && [ -x "$OLD/sbin/slurmd" ] ||
	skip_all "no Slurm in $OLD (tests/rolling-upgrade.sh builds one)"

cluster_start
plan 12

etc=$DT_CLUSTER_DIR/etc
old_release=$("$OLD/sbin/slurmd" -V | awk '{ print $2 }')
new_release=$(slurmd -V | awk '{ print $2 }')
diag "slurmctld and the upgraded nodes: Slurm $new_release; srun and the nodes not upgraded: $old_release"

# The older hosts' files: the cluster's slurm.conf, naming a plugstack.conf
# whose line is the same but loads the build for the older Slurm (their
# plugins are their own release's: the default PluginDir of its prefix).
install -m 0644 "$OLD_BUILD/plugin/.libs/dist_train.so" "$DT_CLUSTER_DIR/lib/dist_train-old.so"
sed "s|$DT_CLUSTER_DIR/lib/dist_train.so|$DT_CLUSTER_DIR/lib/dist_train-old.so|" \
	"$etc/plugstack.conf" > "$etc/plugstack-old.conf"
{
	grep -v -E '^(PluginDir|PlugStackConfig)=' "$etc/slurm.conf"
	echo "PlugStackConfig=$etc/plugstack-old.conf"
} > "$etc/slurm-old.conf"
chmod 0644 "$etc/plugstack-old.conf" "$etc/slurm-old.conf"

old_srun() { job env SLURM_CONF="$etc/slurm-old.conf" "$OLD/bin/srun" "$@"; }
new_srun() { job srun "$@"; }

make_show_script
job_file allreduce.py < "$(dirname "$0")/allreduce.py"
# Rank 5 fails; the others would wait.
job_file fail5.sh <<'EOF'
#!/bin/sh
[ "$RANK" = 5 ] && exit 3
exec sleep 60
EOF

# mixes NAME: the checks each mix gets, from an older srun.
mixes() {
	local name=$1 t0

	old_srun -N4 -n8 --dist-train ./show.sh
	bad=$(layout_errors slurm)
	check "$name: srun $old_release -N4 -n8 --dist-train: every task's variables" \
		eval '[ "$(count_lines "^TASK ")" = 8 ] && [ -z "$bad" ]' || { diag "$bad"; show_output; }

	old_srun -N4 -n4 --dist-train python3 ./allreduce.py
	check "$name: PyTorch's gloo all_reduce from the environment alone" \
		test "$(count_lines '^ALLREDUCE rank=[0-3] world=4 sum=6 ')" = 4 || show_output

	old_srun -N4 -n8 --mpi=pmix --dist-train=verbose ./show.sh
	check "$name: --mpi=pmix: ranks from PMIx" \
		eval '[ "$(count_lines "^TASK .*SOURCE=pmix$")" = 8 ] && [ -z "$(layout_errors pmix)" ]' || show_output

	t0=$SECONDS
	old_srun -N4 -n8 --dist-train ./fail5.sh
	check "$name: fail-fast: rank 5's exit ends the step at once, and srun names it ($((SECONDS - t0)) s)" \
		eval '[ $((SECONDS - t0)) -lt 40 ] &&
		      grep -q "dist-train: rank 5 failed first, on n[0-9]* (local rank 0): exit code 3" "$ERR"' || show_output
}

# 1. slurmctld and every node upgraded; login hosts not yet.
mixes "older srun, upgraded nodes"
old_srun -N2 --dist-train=bogus true
check "older srun: a bad setting is refused before launch, by its own build" \
	grep -q "dist-train: --dist-train=bogus: unknown setting 'bogus'" "$ERR" || show_output

# 2. Half the nodes upgraded: n3 and n4 run the older slurmd (and so its
# slurmstepd and the build of dist-train for it).
for n in n3 n4; do
	"$DT_CLUSTER" kill-node "$n"
done
sleep 1
for n in n3 n4; do
	DT_CLUSTER_SLURMD=$OLD/sbin/slurmd DT_CLUSTER_SLURMD_CONF=$etc/slurm-old.conf \
		"$DT_CLUSTER" start-node "$n" >/dev/null 2>&1
done
versions=$(SLURM_CONF=$etc/slurm.conf scontrol show node n1,n3 2>/dev/null | grep -o 'Version=[0-9.]*' | tr '\n' ' ')
check "n1 runs slurmd $new_release, n3 slurmd $old_release" \
	test "$versions" = "Version=$new_release Version=$old_release " || diag "$versions"
mixes "older srun, nodes of both releases"

# 3. What Slurm does not allow: a newer srun to older slurmds.
new_srun -N4 -n4 --dist-train ./show.sh
rc=$?
if [ $rc = 0 ] && [ "$(count_lines '^TASK ')" = 4 ]; then
	diag "srun $new_release on nodes of $old_release ran (Slurm does not promise it)"
	check "newer srun, older nodes: the step runs with every variable" \
		test "$(count_lines '^TASK .*RANK=[0-3] .*WORLD_SIZE=4 ')" = 4 || show_output
else
	diag "srun $new_release on nodes of $old_release: $(head -c 600 "$ERR")"
	check "newer srun, older nodes (Slurm's rules forbid it): it ends, with Slurm's own error" \
		test $rc != 0 || show_output
fi
check "no node drained by any of it" no_drained_node
