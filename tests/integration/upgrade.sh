#!/bin/bash
# What a Slurm upgrade does to a host with the plugin enabled: its file
# gone (dpkg removes the package, whose dependency names the old release)
# or built for another release. Enabled as the docs say ("optional"),
# plain jobs run on and --dist-train is refused by srun before launch;
# "required" would fail every srun, which is why the docs do not use it.
# With DT_TEST_INSTALLED=1 (tests/run.sh, after installing the .deb) it
# also enables, removes and disables the real package with the commands
# README.md gives.
. "$(dirname "$0")/lib.sh"

cluster_start
installed=${DT_TEST_INSTALLED:-0}
if [ "$installed" = 1 ]; then plan 14; else plan 7; fi

plugstack=$DT_CLUSTER_DIR/etc/plugstack.conf
job_file show.sh <<'EOF'
#!/bin/sh
echo "$1 RANK=${RANK:-unset} MASTER_ADDR=${MASTER_ADDR:-unset}"
EOF
ran_nowhere() { ! ls "$JOBS"/ran.* >/dev/null 2>&1; }

# plain_runs WHAT: a step without --dist-train runs on 2 nodes.
plain_runs() {
	job srun -N2 -n2 ./show.sh plain
	check "$1: a step without --dist-train runs" \
		test "$(count_lines '^plain RANK=unset')" = 2 || show_output
}

# refused WHAT: srun refuses --dist-train before launch, as an unknown
# option, and no task runs.
refused() {
	rm -f "$JOBS"/ran.*
	job srun -N2 -n2 --dist-train sh -c 'touch ran.$SLURM_PROCID'
	local rc=$?
	check "$1: srun refuses --dist-train before launch; no task runs" \
		eval '[ $rc != 0 ] && ran_nowhere &&
		      grep -q -e "unrecognized option .--dist-train" -e "unrecognized option '"'"'--dist-train'"'"'" "$ERR"' ||
		show_output
}

echo "optional $DT_CLUSTER_DIR/lib/nonexistent/dist_train.so" > "$plugstack"
plain_runs "optional, the plugin's file gone"
refused "... and"

so=$TOP_BUILDDIR/tests/integration/.libs/other_release.so
[ -e "$so" ] || make -s -C "$TOP_BUILDDIR/tests" integration/other_release.la >/dev/null
install -m 0755 "$so" "$DT_CLUSTER_DIR/lib/other_release.so"
echo "optional $DT_CLUSTER_DIR/lib/other_release.so" > "$plugstack"
plain_runs "optional, a plugin built for another Slurm release"
refused "... and"
check "... and the node says why in its log" \
	grep -q "Incompatible.*other_release.so" "$DT_CLUSTER_DIR"/log/slurmd-n1.log

echo "required $DT_CLUSTER_DIR/lib/nonexistent/dist_train.so" > "$plugstack"
job srun -N2 -n2 ./show.sh plain
rc=$?
check "required, the plugin's file gone: even a step without --dist-train fails" \
	eval '[ $rc != 0 ] && [ "$(count_lines "^plain")" = 0 ]' || show_output
job srun -N1 -n1 --dist-train=bogus true
check "... with srun's own message about its plugin stack" \
	grep -q -i "plug-in initialization failed" "$ERR" || show_output

if [ "$installed" = 1 ]; then
	# The package's own snippet, through Debian's include line.
	snippet=/etc/slurm/plugstack.conf.d/dist_train.conf
	echo "include /etc/slurm/plugstack.conf.d/*.conf" > "$plugstack"
	check "the package installs its plugstack.conf line commented out" \
		grep -q '^#optional .*/dist_train.so$' "$snippet" || diag "$(cat "$snippet")"
	plain_runs "installed, not enabled"
	# Enable: README's command.
	sed -i 's/^# *optional/optional/' "$snippet"
	job srun -N2 -n4 --dist-train ./show.sh on
	check "enabled with README's sed: --dist-train gives every task its rank" \
		test "$(count_lines '^on RANK=[0-3] MASTER_ADDR=n1$')" = 4 || show_output
	# What dpkg does when Slurm moves to another release: the package
	# goes, its conffile (the enabled line) stays.
	apt-get remove -y -q dist-train >/dev/null 2>&1
	check "the package removed (as on a Slurm upgrade), its enabled line kept" \
		grep -q '^optional ' "$snippet"
	plain_runs "... and"
	refused "... and"
	# Disable: README's command (on the file purge would remove).
	sed -i 's/^optional/#optional/' "$snippet"
	check "disabled with README's sed: the line is commented out again" \
		grep -q '^#optional .*/dist_train.so$' "$snippet"
fi

finish
