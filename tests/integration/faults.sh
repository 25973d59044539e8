#!/bin/bash
# Faults on the real cluster: each ends in a clear message and a step that
# ends, never a hang, never a drained node. (A wrong plugstack.conf and a
# missing helper are in site-config.sh and helper.sh.)
. "$(dirname "$0")/lib.sh"

cluster_start
plan 17

make_show_script

# A node dies while its tasks are in the bootstrap. The others fail at the
# timeout, and with --kill-on-bad-exit srun ends the step at once, but for
# the dead node's task, which it waits for until Slurm declares the node
# down (SlurmdTimeout: 30 s on this cluster).
test_plugin late_node
start=$(date +%s)
timeout -k 10 200 "$DT_CLUSTER" run env DT_TEST_SLOW=n3 DT_TEST_DELAY=600 \
	srun -N4 -n8 --kill-on-bad-exit=1 --mpi=pmix --dist-train=timeout=20 \
	./show.sh > "$OUT" 2> "$ERR" &
runner=$!
sleep 4
"$DT_CLUSTER" kill-node n3
wait $runner
rc=$? took=$(( $(date +%s) - start ))
set_plugin_args
pmix_check "a node killed during the bootstrap ends the step (in ${took} s, timeout=20)" \
	test $rc != 0 -a $rc != 124 -a "$took" -lt 150 || show_output
pmix_check "... and no program started" test "$(count_lines '^TASK ')" = 0 || show_output
pmix_check "... and one message names the node" \
	test "$(grep -c '^dist-train: error: on n[0-9]*: 1 of 8 ranks did not arrive within 20 s (rank 6 (n3)): ' "$ERR")" = 1 || show_output
"$DT_CLUSTER" start-node n3 >/dev/null 2>&1
check "... the node comes back, and no node is drained" no_drained_node

# A node is lost after the start (its slurmd, slurmstepd and tasks gone at
# once, as when it loses power), while the others' tasks run on: Slurm
# marks it down after SlurmdTimeout and ends the job. srun names the node,
# and the ranks that were on it, which never report an end.
make_hold_script
BG_TIMEOUT=200 bg_step -N4 --ntasks-per-node=2 --dist-train ./hold.sh 150
"$DT_CLUSTER" kill-node n3
wait $runner
"$DT_CLUSTER" start-node n3 >/dev/null 2>&1
check "a node lost after the start: srun names it and its ranks 4-5, blames no task" \
	grep -q "^srun: error: dist-train: the step was stopped by a node failure, not by a task: n3 stopped answering, and ranks 4-5 on it never reported an end; 6 other tasks ended" "$ERR" || show_output
check "... and dist-train-$step_now.json records it" \
	eval 'grep -q "\"lost_nodes\": \"n3\"" "$JOBS/dist-train-$step_now.json" &&
	      grep -q "\"ended\": \"node_fail\"" "$JOBS/dist-train-$step_now.json" &&
	      record_valid "$JOBS/dist-train-$step_now.json"' || show_output

# Garbage where the plugin reads the layout: srun replaces it.
job env SLURM_STEP_NODELIST='n[1-' SLURM_STEP_TASKS_PER_NODE='4(x' \
	srun -N4 -n8 --dist-train ./show.sh
bad=$(layout_errors slurm)
check "garbage SLURM_STEP_* exported to srun does not reach the plugin" \
	test -z "$bad" || { diag "$bad"; show_output; }
# ... but a task's own environment does reach dist-train exec.
start=$(date +%s)
job srun -N2 -n2 sh -c 'SLURM_STEP_TASKS_PER_NODE="4(x" exec dist-train exec -- true'
rc=$?
check "garbage in a task's SLURM_STEP_TASKS_PER_NODE: one clear message per task" \
	test $rc != 0 -a "$(grep -c "^dist-train: error: on n[0-9]*: SLURM_STEP_TASKS_PER_NODE='4(x' is malformed: unset it if you set it, and run the command as a task of srun$" "$ERR")" = 2 || show_output
job srun -N2 -n2 sh -c 'SLURM_STEP_NODELIST="n[1-" exec dist-train exec -- true'
check "garbage in a task's SLURM_STEP_NODELIST: one clear message per task" \
	test "$(grep -c "^dist-train: error: on n[0-9]*: SLURM_STEP_NODELIST='n\[1-' is malformed ('\[' without a matching '\]' in 'n\[1-': close the bracket): unset it if you set it yourself, else ask your administrator to check that srun and this node's slurmd run the same Slurm release$" "$ERR")" = 2 || show_output
check "... both at once, within seconds ($(( $(date +%s) - start )) s)" \
	test $(( $(date +%s) - start )) -lt 30

# 64 tasks on 4 nodes bootstrapping at once.
start=$(date +%s)
job srun -N4 -n64 --overcommit --mpi=pmix --dist-train=check ./show.sh
took=$(( $(date +%s) - start ))
pmix_check "64 tasks on 4 nodes (--overcommit) bootstrap at once (${took} s)" \
	test "$(count_lines '^TASK ')" = 64 || show_output
pmix_check "... 64 distinct ranks, one rendezvous" \
	eval '[ "$(grep -o " RANK=[0-9]*" "$OUT" | sort -u | wc -l)" = 64 ] && [ "$(grep -o "MASTER_PORT=[0-9]*" "$OUT" | sort -u | wc -l)" = 1 ]' || show_output
pmix_check "... all of which reached rank 0" \
	grep -q '^dist-train: check: all 64 ranks reached rank 0 at n1:' "$ERR" || show_output

# Two jobs, three steps each, all at once on the same nodes.
job_file three-steps.sh <<'EOF'
#!/bin/bash
for s in 1 2 3; do
	srun --overlap -N4 -n4 --mpi=pmix --dist-train=check ./show.sh > "$1.$s.out" 2> "$1.$s.err" &
done
wait
EOF
rm -f "$JOBS"/job[ab].*
job_file two-jobs.sh <<'EOF'
#!/bin/bash
sbatch --wait -N4 -n4 -o joba.log ./three-steps.sh joba &
sbatch --wait -N4 -n4 -o jobb.log ./three-steps.sh jobb &
wait
EOF
job ./two-jobs.sh
pmix_check "two jobs x three concurrent steps: all 24 tasks ran" \
	test "$(cat "$JOBS"/job[ab].[123].out 2>/dev/null | grep -c '^TASK ')" = 24 || diag "$(tail -n 3 "$JOBS"/job[ab].* 2>&1)"
ports=$(for f in "$JOBS"/job[ab].[123].out; do grep -o 'MASTER_PORT=[0-9]*' "$f" | sort -u; done)
pmix_check "... each step on one port of its own (6 ports)" \
	eval '[ "$(echo "$ports" | wc -l)" = 6 ] && [ "$(echo "$ports" | sort -u | wc -l)" = 6 ]' || diag "$ports"
pmix_check "... every step's ranks met only each other" \
	test "$(cat "$JOBS"/job[ab].[123].err | grep -c '^dist-train: check: all 4 ranks reached rank 0')" = 6 || diag "$(cat "$JOBS"/job[ab].[123].err)"
check "... and no node is drained" no_drained_node

finish
