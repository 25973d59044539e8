#!/bin/bash
# --dist-train given to sbatch or salloc reaches the srun steps inside;
# two steps running at once in one allocation both rendezvous.
. "$(dirname "$0")/lib.sh"

# Heterogeneous jobs (salloc A : B) start only under the backfill scheduler.
export DT_CLUSTER_SCHEDULER=sched/backfill
# Its GPUs are declared as an AMD site does (see the last check).
export DT_CLUSTER_GPU_FLAGS=amd_gpu_env
cluster_start
plan 17

job_file allreduce.py < "$(dirname "$0")/allreduce.py"
job_file show.sh <<'EOF2'
#!/bin/sh
echo "$1 RANK=${RANK:-unset} WORLD_SIZE=${WORLD_SIZE:-unset} MASTER_ADDR=${MASTER_ADDR:-unset} MASTER_PORT=${MASTER_PORT:-unset}"
EOF2

job_file batch.sh <<'EOF2'
#!/bin/bash
#SBATCH -N4 -n8
#SBATCH --dist-train
#SBATCH -o batch.out
./show.sh batch-script
srun ./show.sh step-plain
srun -N2 -n2 --dist-train=verbose ./show.sh step-verbose
srun -N2 -n2 --dist-train=off ./show.sh step-off
EOF2
rm -f "$JOBS/batch.out"
job sbatch --wait batch.sh
check "#SBATCH --dist-train: the job succeeds" test $? = 0 || { show_output; diag "$(cat "$JOBS/batch.out" 2>&1)"; }
cp "$JOBS/batch.out" "$OUT" 2>/dev/null
check "the batch script itself is left alone" \
	grep -q '^batch-script RANK=unset WORLD_SIZE=unset MASTER_ADDR=unset' "$OUT" || show_output
check "a plain srun step inside gets every rank" \
	test "$(grep -c '^step-plain RANK=[0-7] WORLD_SIZE=8 MASTER_ADDR=n1 MASTER_PORT=[0-9]' "$OUT")" = 8 || show_output
check "srun --dist-train=verbose inside adds its settings" \
	test "$(grep -c '^dist-train: rank [01] on n[12]: RANK=' "$OUT")" = 2 || show_output
check "srun --dist-train=off inside opts a step out" \
	test "$(grep -c '^step-off RANK=unset' "$OUT")" = 2 || show_output

job salloc -N2 --dist-train srun -n2 ./show.sh salloc
check "salloc --dist-train, then srun: the step gets the environment" \
	test "$(count_lines '^salloc RANK=[01] WORLD_SIZE=2 MASTER_ADDR=n1 MASTER_PORT=[0-9]')" = 2 || show_output
job salloc -N2 srun -n2 ./show.sh salloc
check "salloc without it: srun steps get nothing" \
	test "$(count_lines '^salloc RANK=unset WORLD_SIZE=unset')" = 2 || show_output

# Two PyTorch steps at once in one allocation: distinct ports, both work.
job_file concurrent.sh <<'EOF2'
#!/bin/bash
#SBATCH -N4 --ntasks-per-node=2
#SBATCH -o concurrent.out
srun -N4 -n4 --overlap --dist-train /usr/bin/python3 allreduce.py > step-a.out 2>&1 &
srun -N4 -n4 --overlap --dist-train /usr/bin/python3 allreduce.py > step-b.out 2>&1 &
wait
EOF2
rm -f "$JOBS"/step-[ab].out
job sbatch --wait concurrent.sh
check "two concurrent steps: the job succeeds" test $? = 0 || diag "$(cat "$JOBS"/concurrent.out "$JOBS"/step-[ab].out 2>&1)"
check "both steps completed their all_reduce" \
	test "$(cat "$JOBS"/step-[ab].out | grep -c '^ALLREDUCE rank=[0-3] world=4 sum=6 ')" = 8 || diag "$(cat "$JOBS"/step-[ab].out 2>&1)"
port_a=$(grep -o 'master=n1:[0-9]*' "$JOBS/step-a.out" | sort -u)
port_b=$(grep -o 'master=n1:[0-9]*' "$JOBS/step-b.out" | sort -u)
check "... each on its own port ($port_a, $port_b)" \
	test -n "$port_a" -a -n "$port_b" -a "$port_a" != "$port_b"

# Two jobs sharing the nodes at once.
job_file twojobs.sh <<'EOF2'
#!/bin/bash
sbatch --wait -N4 -n4 -o job-a.out --wrap 'srun --dist-train /usr/bin/python3 allreduce.py' &
sbatch --wait -N4 -n4 -o job-b.out --wrap 'srun --dist-train /usr/bin/python3 allreduce.py' &
wait
EOF2
rm -f "$JOBS"/job-[ab].out
job ./twojobs.sh
check "two jobs sharing the nodes both complete" \
	test "$(cat "$JOBS"/job-[ab].out 2>/dev/null | grep -c '^ALLREDUCE rank=[0-3] world=4 sum=6 ')" = 8 || diag "$(cat "$JOBS"/job-[ab].out 2>&1)"

# A heterogeneous step: each component is launched as a step of its own,
# with its own ranks and nodes. srun refuses it before launch, once,
# wherever --dist-train appears; one component alone is not refused.
make_show_script
job salloc -N3 --ntasks-per-node=2 srun -N1 -n1 --dist-train ./show.sh : -N2 -n2 ./show.sh
rc=$?
check "a heterogeneous step (srun A : B) is refused: no program runs" \
	eval '[ $rc != 0 ] && [ "$(count_lines "^TASK ")" = 0 ]' || show_output
het_msg='dist-train: a heterogeneous step (srun A : B, or --het-group naming several components) cannot be one --dist-train world: run it as one srun, or its parts as separate sruns'
check "... by srun, with one message naming the fix" \
	test "$(grep -c "$het_msg" "$ERR")" = 1 -a "$(grep -c 'dist-train' "$ERR")" = 1 || show_output
job salloc -N3 --ntasks-per-node=2 srun -N1 -n1 ./show.sh : -N2 -n2 --dist-train ./show.sh
rc=$?
check "... also when --dist-train is in a later component" \
	eval '[ $rc != 0 ] && [ "$(count_lines "^TASK ")" = 0 ] && grep -q "$het_msg" "$ERR"' || show_output
job salloc -N1 -n1 : -N2 -n2 srun --het-group=0,1 --dist-train ./show.sh
rc=$?
check "... and with --het-group naming two components" \
	eval '[ $rc != 0 ] && [ "$(count_lines "^TASK ")" = 0 ] && grep -q "$het_msg" "$ERR"' || show_output
job salloc -N1 -n1 : -N2 -n2 srun --het-group=1 --dist-train ./show.sh
check "one component of a heterogeneous job is a world of its own" \
	eval '[ "$(count_lines "^TASK procid=[01] .* RANK=[01] .* WORLD_SIZE=2 ")" = 2 ]' || show_output

# Slurm's own GPU lists on an AMD node: the cluster's 4 gpu GRES, with
# Flags=amd_gpu_env as gres.conf(5) tells AMD sites, and a site file
# describing an MI250X node (its first 4 GCDs are Slurm's GPUs 0-3):
# Slurm sets SLURM_STEP_GPUS and ROCR_VISIBLE_DEVICES, and each task gets
# Slurm's GCD alone in ROCR_VISIBLE_DEVICES.
admin_file mi250x.xml 0644 < "$TOP_SRCDIR/tests/topologies/mi250x-lumi-frontier.xml"
set_plugin_args topology="$ADMIN/mi250x.xml"
job_file gcd.sh <<'EOF2'
#!/bin/sh
echo "GCD lr=$LOCAL_RANK step=$SLURM_STEP_GPUS gpu=$DIST_TRAIN_GPU rocr=${ROCR_VISIBLE_DEVICES:-unset} cuda=${CUDA_VISIBLE_DEVICES:-unset}"
EOF2
job srun -N1 -n2 --gpus-per-node=2 --dist-train=visible-gpus=own ./gcd.sh
bus_of() { case $1 in 0) echo c1 ;; 1) echo c6 ;; 2) echo c9 ;; 3) echo ce ;; esac; }
first=$(sed -n 's/^GCD lr=0 step=\([0-9]\).*/\1/p' "$OUT")
second=$(sed -n 's/^GCD lr=1 step=[0-9],\([0-9]\).*/\1/p' "$OUT")
check "srun --gpus-per-node=2 on an AMD node (Flags=amd_gpu_env): each task Slurm's GCD alone in ROCR_VISIBLE_DEVICES" \
	eval '[ -n "$first" ] && [ -n "$second" ] &&
	      grep -q "^GCD lr=0 .* gpu=0000:$(bus_of $first):00.0 rocr=[0-9] cuda=unset$" "$OUT" &&
	      grep -q "^GCD lr=1 .* gpu=0000:$(bus_of $second):00.0 rocr=[0-9] cuda=unset$" "$OUT"' || show_output
set_plugin_args

finish
