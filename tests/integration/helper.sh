#!/bin/bash
# The dist-train command on its own, for sites without the plugin, and
# what the plugin says when its helper is missing or cannot run.
. "$(dirname "$0")/lib.sh"

cluster_start
pmix_or_end
plan 15

make_show_script
job_file allreduce.py < "$(dirname "$0")/allreduce.py"

job srun -N4 -n8 --mpi=pmix dist-train exec --settings=bind=off -- ./show.sh
bad=$(layout_errors pmix unbound)
check "srun --mpi=pmix dist-train exec: PMIx ranks without the plugin" \
	test -z "$bad" -a "$(count_lines '^TASK ')" = 8 || { diag "$bad"; show_output; }

# This dist-train is not installed: where its Python hook is.
job env DIST_TRAIN_PYTHON_HOOK="$DT_CLUSTER_DIR/lib/python" \
	srun -N4 -n8 --mpi=pmix dist-train exec -- /usr/bin/python3 allreduce.py
check "... and PyTorch joins the group with them" \
	test "$(count_lines '^ALLREDUCE rank=[0-7] world=8 sum=28 ')" = 8 || show_output

# Without PMIx or the plugin, only the user can give the ranks a secret.
secret=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
job env DIST_TRAIN_STEP_SECRET="$secret" srun -N4 -n8 dist-train exec --settings=verbose,bind=off -- ./show.sh
bad=$(layout_errors slurm unbound)
check "srun dist-train exec without PMIx: Slurm's ranks" \
	test -z "$bad" -a "$(grep -c '^dist-train: rank [0-7] on n[1-4]: RANK=' "$ERR")" = 8 || { diag "$bad"; show_output; }
job env DIST_TRAIN_STEP_SECRET="$secret" srun -N2 -n2 dist-train exec -- sh -c 'echo "SECRET=${DIST_TRAIN_STEP_SECRET:-none}"'
check "... and the program does not see the secret" \
	test "$(count_lines '^SECRET=none$')" = 2 || show_output
job srun -N2 -n4 dist-train exec -- sh -c 'echo RAN'
check "without PMIx and without a secret: refused, in one message naming the fixes" \
	eval '[ "$(count_lines RAN)" = 0 ] && [ "$(grep -c "^dist-train: error: on n[0-9]*: step [0-9.]* has no secret for its ranks to prove to rank 0 that they belong to it: run it under srun --dist-train or srun --mpi=pmix, or export DIST_TRAIN_STEP_SECRET=" "$ERR")" = 1 ]' || show_output

job srun -N2 -n3 --mpi=pmix sh -c 'eval "$(dist-train env)" && echo "ENV $RANK $WORLD_SIZE $MASTER_ADDR:$MASTER_PORT"'
check "eval \"\$(dist-train env)\" sets the variables in a shell" \
	test "$(count_lines '^ENV [0-2] 3 n1:[0-9]+$')" = 3 || show_output

job dist-train exec -- true
check "dist-train exec outside a job says so" \
	grep -qx 'dist-train: error: on [^:]*: this is not a task of a Slurm step nor of a PMIx job: run it with srun' "$ERR" || show_output

# Without PMIx, rank 0 cannot move: a taken port is reported clearly. The
# job's first node, where the port is taken, is whichever was free.
job_file held-check.sh <<'EOF2'
#!/bin/bash
#SBATCH -N2 -n2 -o held-check.out
port=$(( 20000 + 4 * ((SLURM_JOB_ID * 64 + 0) % 2250) ))
# SO_REUSEADDR: an earlier test's connections on the port may linger in
# TIME_WAIT; a listener holds the port all the same.
python3 -c "import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('', $port)); s.listen()
open('held.ready', 'w').close(); time.sleep(60)" &
holder=$!
while [ ! -e held.ready ]; do sleep 0.1; done
srun --dist-train=check,timeout=10 true
kill $holder
EOF2
rm -f "$JOBS/held-check.out" "$JOBS/held.ready"
job sbatch --wait held-check.sh
cp "$JOBS/held-check.out" "$OUT" 2>/dev/null
check "check without PMIx on a taken port: one clear message, naming the fix" \
	grep -q '^dist-train: error: on \(n[0-9]*\): port [0-9]* on \1 is in use by another program: rerun with --mpi=pmix, so that rank 0 moves to a free port, or ask your administrator to set MpiParams=ports= in slurm.conf, so that each step has ports of its own$' "$OUT" || show_output
# Without the helper too (no check, no PMIx): rank 0's task takes the
# store's port before the program, and says at once that it is taken.
sed 's/srun --dist-train=check,timeout=10 true/srun --dist-train true/; s/held-check.out/held-plain.out/' \
	"$JOBS/held-check.sh" | job_file held-plain.sh
rm -f "$JOBS/held-plain.out" "$JOBS/held.ready"
job sbatch --wait held-plain.sh
cp "$JOBS/held-plain.out" "$OUT" 2>/dev/null
check "no helper, no PMIx, a taken port: one clear message from rank 0's task, naming the fix" \
	eval '[ "$(grep -c "is in use" "$OUT")" = 1 ] && grep -q "^dist-train: error: on \(n[0-9]*\): port [0-9]* on \1, where rank 0.s store is to listen, is in use by another program: rerun with --mpi=pmix, so that rank 0 moves to a free port, or ask your administrator to set MpiParams=ports= in slurm.conf, so that each step has ports of its own$" "$OUT"' || show_output

set_plugin_args helper=/nonexistent/dist-train
job srun -N2 -n2 --mpi=pmix --dist-train=check true
rc=$?
check "a missing helper fails the step with a message for the administrator" \
	eval '[ $rc != 0 ] && grep -q "^dist-train: error: on n[0-9]*: cannot run the helper /nonexistent/dist-train (No such file or directory): ask your administrator to install dist-train there, or to name it with helper= in plugstack.conf$" "$ERR"' || show_output
job srun -N2 -n2 --mpi=none --dist-train ./show.sh
check "... while steps that need no helper still work" \
	test "$(count_lines '^TASK .* SOURCE=slurm$')" = 2 || show_output
job srun -N2 -n4 --mpi=pmix --dist-train ./show.sh
check "... a PMIx step among them (its nodes lead themselves in the plugin)" \
	test "$(count_lines '^TASK .* SOURCE=pmix$')" = 4 || show_output

echo '#!/bin/sh' | admin_file not-executable 0644
set_plugin_args helper="$ADMIN/not-executable"
job srun -N1 -n1 --mpi=pmix --dist-train true
check "a helper that cannot be executed: the same, with the reason" \
	grep -q "^dist-train: error: on n[0-9]*: cannot run the helper $ADMIN/not-executable (Permission denied):" "$ERR" || show_output

# A helper that floods its result and then hangs is stopped at once.
admin_file flooding-helper <<'EOF2'
#!/bin/sh
head -c 2000000 /dev/zero >&3
exec sleep 600
EOF2
set_plugin_args helper="$ADMIN/flooding-helper"
start=$(date +%s)
job srun -N1 -n1 --mpi=pmix --dist-train true
rc=$? took=$(( $(date +%s) - start ))
check "a helper that floods its result is stopped at once (${took} s)" \
	eval '[ $rc != 0 ] && [ $took -lt 60 ] && grep -q "^dist-train: error: on n[0-9]*: the helper $ADMIN/flooding-helper sent no readable result" "$ERR"' || show_output

set_plugin_args helper=dist-train
job srun -N1 --dist-train true
check "a relative helper= in plugstack.conf is refused" \
	grep -q "bad value 'dist-train' for 'helper': expected an absolute path" "$ERR" || show_output
set_plugin_args

finish
