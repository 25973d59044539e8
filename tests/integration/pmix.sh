#!/bin/bash
# srun --mpi=pmix --dist-train: ranks from PMIx, a start barrier, a free
# rendezvous port, and timeouts that name who is missing.
. "$(dirname "$0")/lib.sh"

cluster_start
pmix_or_end
plan 24

make_show_script
job_file allreduce.py < "$(dirname "$0")/allreduce.py"
install -m 0755 "$TOP_BUILDDIR/tests/integration/pmix_peer" "$JOBS/pmix_peer"
job_file stamp.sh <<'EOF'
#!/bin/sh
echo "START rank=$RANK at=$(date +%s.%N)"
EOF

job srun -N4 -n8 --mpi=pmix --dist-train ./show.sh
check "srun --mpi=pmix -N4 -n8 --dist-train runs" test $? = 0 || show_output
bad=$(layout_errors pmix)
check "every task's values come from PMIx and match the 5,1,1,1 layout" \
	test -z "$bad" -a "$(count_lines '^TASK ')" = 8 || { diag "$bad"; show_output; }

job srun -N4 -n8 --mpi=pmix --dist-train=verbose true
check "no task is a PMIx client and no helper runs: each takes PMIX_RANK, checked against Slurm's rank; each node's local rank 0 leads it to rank 0, and its other ranks take rank 0's answer from it" \
	eval '[ "$(grep -c "the helper took" "$ERR")" = 0 ] && [ "$(grep -c "no helper: every rank arrived at rank 0 in .*(helper 0.0)" "$ERR")" = 1 ] && [ "$(grep -c "no helper: this node.s ranks led to rank 0 in .*(helper 0.0)" "$ERR")" = 3 ] && [ "$(grep -c "no helper: rank 0.s answer through local rank 0 in .*(helper 0.0)" "$ERR")" = 4 ]' || show_output
job srun -N4 -n8 --mpi=pmix --dist-train=check,verbose true
check "with the check, one PMIx client per node, its local rank 0; the node's other ranks get PMIx's view from it" \
	eval '[ "$(grep -c "the helper took: place [0-9]* ms (PMIx)," "$ERR")" = 4 ] && [ "$(grep -c "the helper took: place [0-9]* ms (PMIx by the node.s leader)," "$ERR")" = 4 ]' || show_output

job srun -N4 -n8 --mpi=pmix --dist-train /usr/bin/python3 allreduce.py
check "PyTorch gloo all_reduce with PMIx ranks" \
	test "$(count_lines '^ALLREDUCE rank=[0-7] world=8 sum=28 ')" = 8 || show_output

# Rank 0's node is at 127.0.1.1 (Debian's address for a host's own name):
# gloo gets the interface the nodes reached it through.
job srun -N4 -n8 --mpi=pmix --dist-train sh -c 'echo "IF $GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME"'
check "GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME: the interface towards rank 0 (lo here)" \
	test "$(count_lines '^IF lo =lo$')" = 8 || show_output

job srun -N4 -n8 --mpi=pmix --dist-train ./pmix_peer
check "a PMIx program started after the bootstrap sees its own rank, local rank and node" \
	test "$(awk '/^PEER / { split($2, r, "[=/]"); split($3, l, "[=/]"); split($4, n, "[=/]");
		if (r[2] == r[3] && l[2] == l[3] && n[2] == n[3] && $5 == "host0=n1") ok++ }
		END { print ok + 0 }' "$OUT")" = 8 || show_output
check "... because every task's program uses PMIx's hash store (PMIX_MCA_gds=hash)" \
	eval 'job srun -N2 -n4 --mpi=pmix --dist-train printenv PMIX_MCA_gds && test "$(count_lines "^hash$")" = 4'

# A program already listens on the step's first port on rank 0's node
# (the nodes of this cluster share one network, so: anywhere): one that
# greets whoever comes as rank 0 would, without the step's secret, or
# one that never answers.
job_file held-port.sh <<'EOF'
#!/bin/bash
#SBATCH -N4 -n8
# Step 0's first port, by the rule in dist_train(8).
port=$(( 20000 + 4 * ((SLURM_JOB_ID * 64 + 0) % 2250) ))
python3 -c "import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('', $port)); s.listen(); open('held.ready', 'w').close()
held = []
while sys.argv[1] == 'greets':
    c, _ = s.accept(); c.sendall(b'DTB2 ' + b'ab' * 16 + b' $port ' + b'cd' * 32 + b'\\n'); held.append(c)
time.sleep(120)" "$1" &
holder=$!
while [ ! -e held.ready ]; do sleep 0.1; done
echo "HELD $port"
srun --mpi=pmix --dist-train sh -c 'echo PORT $MASTER_PORT $DIST_TRAIN_PORT_SOURCE; exec /usr/bin/python3 allreduce.py'
kill $holder
EOF
for holder in greets silent; do
	case $holder in
	greets) what="greets every comer as rank 0 would" ;;
	silent) what="never answers" ;;
	esac
	rm -f "$JOBS/held-port.out" "$JOBS/held.ready"
	job sbatch --wait -o held-port.out held-port.sh $holder
	cp "$JOBS/held-port.out" "$OUT" 2>/dev/null
	held=$(sed -n 's/^HELD //p' "$OUT")
	check "with the default port taken on rank 0's node by a program that $what, the step still succeeds" \
		test "$(count_lines '^ALLREDUCE rank=[0-7] world=8 sum=28 ')" = 8 || show_output
	check "... on another port, which rank 0 found free, and which every rank learns" \
		eval '[ -n "$held" ] && [ "$(grep "^PORT " "$OUT" | sort -u | wc -l)" = 1 ] && ! grep -q "^PORT $held " "$OUT" && grep -q "^PORT [0-9]* probed$" "$OUT"' || show_output
done

# One node starts its tasks 5 s late: nobody's program starts before it.
test_plugin late_node
t0=$(date +%s.%N)
job env DT_TEST_SLOW=n3 DT_TEST_DELAY=5 srun -N4 -n8 --mpi=pmix --dist-train ./stamp.sh
check "a node 5 s late: the step succeeds" test "$(count_lines '^START ')" = 8 || show_output
first=$(sed -n 's/^START rank=[0-9]* at=//p' "$OUT" | sort -n | head -1)
check "... and no rank's program started before the late node arrived" \
	awk -v t0="$t0" -v first="$first" 'BEGIN { exit !(first != "" && first - t0 >= 5) }' ||
	diag "first start $first, $(awk -v t0="$t0" -v f="$first" 'BEGIN { print f - t0 }') s after srun"

# One node never arrives in time: the step fails within its timeout,
# naming it. (The node comes 15 s late, after the step gave up: a task
# held back longer would keep srun waiting for it, as any task would.)
start=$(date +%s)
job env DT_TEST_SLOW=n3 DT_TEST_DELAY=15 srun -N4 -n8 --mpi=pmix --dist-train=timeout=8 ./stamp.sh
rc=$? took=$(( $(date +%s) - start ))
check "a node that never arrives fails the step" test $rc != 0
check "... in bounded time (${took} s for timeout=8)" test "$took" -lt 60
check "... with one message naming the missing rank and node" \
	test "$(grep -c '^dist-train: error: on n[0-9]*: 1 of 8 ranks did not arrive within 8 s (rank 6 (n3)): ' "$ERR")" = 1 || show_output
check "... and no program started" test "$(count_lines '^START ')" = 0 || show_output

# Rank 0's node never arrives: the others say so, one message per node.
job env DT_TEST_SLOW=n1 DT_TEST_DELAY=15 srun -N4 -n8 --mpi=pmix --dist-train=timeout=8 ./stamp.sh
check "rank 0 never arriving is reported by the other nodes" \
	test "$(grep -c '^dist-train: error: on n[0-9]*: rank 0 (on n1) did not arrive within 8 s[ :]' "$ERR")" = 3 || show_output
set_plugin_args

job srun -N4 -n8 --mpi=none --dist-train ./show.sh
bad=$(layout_errors slurm)
check "--mpi=none: ranks from Slurm, as before" test -z "$bad" || { diag "$bad"; show_output; }
job srun -N4 -n8 --mpi=pmix --dist-train=pmix=no ./show.sh
bad=$(layout_errors slurm)
check "--dist-train=pmix=no: ranks from Slurm, no bootstrap" test -z "$bad" || { diag "$bad"; show_output; }

printf 'n2\nn1\nn1\n' | job_file hosts
job env SLURM_HOSTFILE="$JOBS/hosts" srun -n3 -m arbitrary --mpi=pmix --dist-train ./show.sh
check "an arbitrary layout works with PMIx: rank 0 is on n2" \
	test "$(count_lines '^TASK procid=0 .* host=n2 RANK=0 .*MASTER_ADDR=n2 ')" = 1 -a "$(count_lines 'MASTER_ADDR=n2 ')" = 3 || show_output

job srun -N2 -n4 --mpi=pmix --dist-train=nccl sh -c 'echo "NCCL $NCCL_COMM_ID $MASTER_PORT"'
check "--dist-train=nccl: NCCL_COMM_ID is rank 0's address and a port other than MASTER_PORT" \
	eval '[ "$(count_lines "^NCCL 127\.0\.1\.1:[0-9]* [0-9]*$")" = 4 ] && [ "$(sort -u "$OUT" | wc -l)" = 1 ] && awk "{ split(\$2, a, \":\"); exit a[2] == \$3 }" "$OUT"' || show_output

job srun -N2 -n4 --mpi=pmix --dist-train=check true
check "--dist-train=check verifies every rank reached rank 0, and says what it skipped" \
	grep -q '^dist-train: check: all 4 ranks reached rank 0 at n1:[0-9]* (127\.0\.1\.1); NCCL all-reduce skipped: not every rank has NCCL and a GPU (rank 0: no ' "$ERR" || show_output

finish
