#!/bin/bash
# srun --dist-train on the real 4-node cluster: the variables each task
# gets, plain srun untouched, and mistakes refused before launch.
. "$(dirname "$0")/lib.sh"

cluster_start
plan 14

# Each task prints Slurm's own view next to the plugin's.
job_file show.sh <<'EOF'
#!/bin/sh
echo "TASK procid=$SLURM_PROCID localid=$SLURM_LOCALID nodeid=$SLURM_NODEID" \
     "host=$(hostname) RANK=$RANK LOCAL_RANK=$LOCAL_RANK" \
     "WORLD_SIZE=$WORLD_SIZE LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE" \
     "GROUP_RANK=$GROUP_RANK GROUP_WORLD_SIZE=$GROUP_WORLD_SIZE" \
     "ROLE_RANK=$ROLE_RANK ROLE_WORLD_SIZE=$ROLE_WORLD_SIZE ROLE_NAME=$ROLE_NAME" \
     "MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT" \
     "OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}" \
     "DIST_TRAIN_NODE_RANK=$DIST_TRAIN_NODE_RANK" \
     "DIST_TRAIN_NUM_NODES=$DIST_TRAIN_NUM_NODES" \
     "DIST_TRAIN_NODES=$DIST_TRAIN_NODES" \
     "AGENT_STORE=${TORCHELASTIC_USE_AGENT_STORE:-unset}" \
     "RUN_ID=${TORCHELASTIC_RUN_ID:-unset}"
EOF

# -N4 -n8 on idle nodes is laid out 5,1,1,1.
job env TORCHELASTIC_USE_AGENT_STORE=True srun -N4 -n8 --dist-train ./show.sh
check "srun -N4 -n8 --dist-train runs" test $? = 0 || show_output
check "8 tasks reported" test "$(count_lines '^TASK ')" = 8
bad=$(awk '
/^TASK / {
	for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	r = v["procid"]; node = (r < 5) ? 0 : r - 4
	want["RANK"] = r; want["LOCAL_RANK"] = v["localid"]
	want["GROUP_RANK"] = v["nodeid"]; want["DIST_TRAIN_NODE_RANK"] = node
	want["WORLD_SIZE"] = 8; want["LOCAL_WORLD_SIZE"] = (node == 0) ? 5 : 1
	want["GROUP_WORLD_SIZE"] = 4; want["DIST_TRAIN_NUM_NODES"] = 4
	want["ROLE_RANK"] = r; want["ROLE_WORLD_SIZE"] = 8
	want["ROLE_NAME"] = "default"; want["MASTER_ADDR"] = "n1"
	want["host"] = "n" (node + 1); want["nodeid"] = node
	want["OMP_NUM_THREADS"] = (node == 0) ? 1 : "unset"
	want["DIST_TRAIN_NODES"] = "n1,n2,n3,n4"
	want["AGENT_STORE"] = "unset"; want["RUN_ID"] = "unset"
	for (k in want)
		if (v[k] != want[k])
			printf "rank %s: %s=%s, expected %s\n", r, k, v[k], want[k]
	port[v["MASTER_PORT"]] = 1
	if (v["MASTER_PORT"] < 20000 || v["MASTER_PORT"] > 28999)
		printf "rank %s: MASTER_PORT=%s outside 20000-28999\n", r, v["MASTER_PORT"]
}
END { n = 0; for (p in port) n++; if (n != 1) print "ranks disagree on MASTER_PORT" }
' "$OUT")
check "every task's values match its place in the 5,1,1,1 layout" test -z "$bad" || diag "$bad"

job srun -N4 -n4 sh -c 'env | grep -E "^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|GROUP_WORLD_SIZE|ROLE_[A-Z_]*|MASTER_ADDR|MASTER_PORT|DIST_TRAIN_[A-Z_]*)=" || true'
check "plain srun runs" test $? = 0
check "plain srun sees none of the variables" test ! -s "$OUT" || show_output

job srun -N1 -n1 --dist-train ./show.sh
check "one task: WORLD_SIZE=1, no OMP_NUM_THREADS" \
	grep -q 'RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 LOCAL_WORLD_SIZE=1 GROUP_RANK=0 GROUP_WORLD_SIZE=1 .*OMP_NUM_THREADS=unset' "$OUT" || show_output

job srun -N2 -n3 --dist-train=verbose true
check "verbose: one line per task on stderr" \
	test "$(grep -c '^dist-train: rank [0-2] on n[12]: RANK=[0-2] LOCAL_RANK=' "$ERR")" = 3 || show_output

job env MASTER_ADDR=n3 MASTER_PORT=23456 srun -N2 -n2 --dist-train ./show.sh
check "the user's MASTER_ADDR and MASTER_PORT win" \
	test "$(count_lines 'MASTER_ADDR=n3 MASTER_PORT=23456')" = 2 || show_output

rm -f "$JOBS/ran"
job srun -N2 --dist-train=verbose,bogus touch ran
rc=$?
check "a bad setting fails srun" test $rc != 0
check "... with one line naming the setting and the valid ones" \
	grep -qx "srun: error: dist-train: --dist-train=verbose,bogus: unknown setting 'bogus'; valid: on, off, verbose\[=yes|no\]" "$ERR" || show_output
check "... before anything was launched" test ! -e "$JOBS/ran"

job sbatch --dist-train=off=1 --wrap true
check "sbatch refuses a bad setting before submitting" \
	eval '[ -s "$ERR" ] && ! grep -q "Submitted batch job" "$OUT" && grep -q "setting '"'off'"' takes no value" "$ERR"' || show_output

job env MASTER_PORT=http srun -N1 --dist-train touch ran
check "a MASTER_PORT that is no port fails srun before launch" \
	eval '! [ -e "$JOBS/ran" ] && grep -q "MASTER_PORT='"'http'"' in your environment is not a port number" "$ERR"' || show_output

printf 'n2\nn1\nn1\n' | job_file hosts
job env SLURM_HOSTFILE="$JOBS/hosts" srun -n3 -m arbitrary --dist-train true
check "an arbitrary layout without PMIx fails, naming the fix" \
	grep -q 'dist-train: step [0-9.]*: with --distribution=arbitrary only PMIx knows which host runs rank 0: add --mpi=pmix' "$ERR" || show_output

finish
