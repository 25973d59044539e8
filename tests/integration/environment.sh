#!/bin/bash
# srun --dist-train on the real 4-node cluster: the variables each task
# gets, plain srun untouched, and mistakes refused before launch.
. "$(dirname "$0")/lib.sh"

cluster_start
plan 24

make_show_script

# -N4 -n8 on idle nodes is laid out 5,1,1,1.
job env TORCHELASTIC_USE_AGENT_STORE=True srun -N4 -n8 --dist-train ./show.sh
check "srun -N4 -n8 --dist-train runs" test $? = 0 || show_output
check "8 tasks reported" test "$(count_lines '^TASK ')" = 8
bad=$(layout_errors slurm)
check "every task's values match its place in the 5,1,1,1 layout" test -z "$bad" || diag "$bad"

job srun -N4 -n4 sh -c 'env | grep -E "^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|GROUP_WORLD_SIZE|ROLE_[A-Z_]*|MASTER_ADDR|MASTER_PORT|DIST_TRAIN_[A-Z_]*)=" || true'
check "plain srun runs" test $? = 0
check "plain srun sees none of the variables" test ! -s "$OUT" || show_output

job srun -N1 -n1 --dist-train=bind=off ./show.sh
check "one task, unbound: WORLD_SIZE=1, no OMP_NUM_THREADS (torchrun's rule)" \
	grep -q 'RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 LOCAL_WORLD_SIZE=1 GROUP_RANK=0 GROUP_WORLD_SIZE=1 .*OMP_NUM_THREADS=unset' "$OUT" || show_output
job srun -N1 -n1 -c2 --dist-train ./show.sh
check "one task, bound to its 2 cores: OMP_NUM_THREADS=2" \
	grep -q 'RANK=0 .*OMP_NUM_THREADS=2 ' "$OUT" || show_output

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
	grep -qx "srun: error: dist-train: --dist-train=verbose,bogus: unknown setting 'bogus'; valid: on, off, verbose\[=yes|no\], [^;]*" "$ERR" || show_output
check "... before anything was launched" test ! -e "$JOBS/ran"

job sbatch --dist-train=off=1 --wrap true
check "sbatch refuses a bad setting before submitting" \
	eval '[ -s "$ERR" ] && ! grep -q "Submitted batch job" "$OUT" && grep -q "setting '"'off'"' takes no value" "$ERR"' || show_output

job env MASTER_PORT=http srun -N1 --dist-train touch ran
check "a MASTER_PORT that is no port fails srun before launch" \
	eval '! [ -e "$JOBS/ran" ] && grep -q "MASTER_PORT='"'http'"' in your environment is not a port number" "$ERR"' || show_output

# -m arbitrary without PMIx: rank 0 is where SLURM_HOSTFILE's first line
# says, not on the step's first node; srun reads the file, the nodes check.
job_file allreduce.py < "$(dirname "$0")/allreduce.py"
printf '# rank 0 on n3\nn3\nn1,n1\nn2\n' | job_file hosts
job env SLURM_HOSTFILE="$JOBS/hosts" srun -n4 -m arbitrary --mpi=none --dist-train ./show.sh
check "-m arbitrary without PMIx: RANK from Slurm, MASTER_ADDR = rank 0's host (n3)" \
	eval '[ "$(count_lines "^TASK procid=([0-3]) .* RANK=\1 .*MASTER_ADDR=n3 ")" = 4 ] &&
	      count_lines "^TASK procid=0 .*host=n3 " | grep -qx 1' || show_output
job env SLURM_HOSTFILE="$JOBS/hosts" srun -n4 -m arbitrary --mpi=none --dist-train sh -c 'echo "ENV $(env | grep -c -E "^(SLURM_)?DIST_TRAIN_(RANK0_HOST|STEP_SECRET)=")"'
check "... and the program sees neither what srun passed nor the secret" \
	test "$(count_lines '^ENV 0$')" = 4 || show_output
job env SLURM_HOSTFILE="$JOBS/hosts" srun -n4 -m arbitrary --mpi=none --dist-train /usr/bin/python3 allreduce.py
check "... a gloo all_reduce across nodes (rank 0 on n3)" \
	test "$(count_lines '^ALLREDUCE rank=[0-3] world=4 sum=6 host=n[1-3] master=n3:')" = 4 || show_output
job env SLURM_HOSTFILE="$JOBS/hosts" SLURM_DIST_TRAIN_RANK0_HOST=n1 srun -n4 -m arbitrary --mpi=none --dist-train ./show.sh
check "... a SLURM_DIST_TRAIN_RANK0_HOST of the user's own is not believed" \
	test "$(count_lines 'MASTER_ADDR=n3 ')" = 4 || show_output
# srun --export=NONE or =VARS passes only SLURM_* of srun's environment.
job env SLURM_HOSTFILE="$JOBS/hosts" srun --export=PATH -n4 -m arbitrary --mpi=none --dist-train ./show.sh
check "... and with srun --export=PATH" \
	test "$(count_lines '^TASK procid=([0-3]) .* RANK=\1 .*MASTER_ADDR=n3 ')" = 4 || show_output
job env SLURM_HOSTFILE="$JOBS/hosts" srun -n4 -m arbitrary --mpi=none --dist-train=check /usr/bin/python3 allreduce.py
check "... and through the helper (check mode): the rendezvous and a gloo all_reduce, rank 0 on n3" \
	test "$(count_lines '^ALLREDUCE rank=[0-3] world=4 sum=6 host=n[1-3] master=n3:')" = 4 || show_output
job srun --export=PATH -N2 -n2 --mpi=none --dist-train=check ./show.sh
check "--export=PATH: the step's secret still reaches the helper (check mode, no PMIx)" \
	test "$(count_lines '^TASK procid=([01]) .* RANK=\1 ')" = 2 || show_output

# check on AMD nodes: RCCL's all-reduce over HIP, with stand-ins for both
# (mock_hip.c, mock_rccl.c; mock_rocm is both in one library, as
# PyTorch's ROCm wheels bring them). What is tested is which libraries
# the helper finds, how it drives them and which GPU each rank takes.
for mock in mock_hip mock_rccl mock_rocm; do
	[ -e "$TOP_BUILDDIR/tests/integration/.libs/$mock.so" ] ||
		make -s -C "$TOP_BUILDDIR/tests" "integration/$mock.la" >/dev/null
done
libs=$TOP_BUILDDIR/tests/integration/.libs
wheel=$JOBS/venv/lib/python3/site-packages/torch/lib
mkdir -p "$JOBS/rocm/lib" "$JOBS/venv/bin" "$wheel"
install -m 0755 "$libs/mock_hip.so" "$JOBS/rocm/lib/libamdhip64.so.6"
install -m 0755 "$libs/mock_rccl.so" "$JOBS/rocm/lib/librccl.so.1"
install -m 0755 "$libs/mock_rocm.so" "$wheel/librccl.so"
ln -sf /usr/bin/python3 "$JOBS/venv/bin/python3"
job env LD_LIBRARY_PATH="$JOBS/rocm/lib" DT_MOCK_GPUS=2 srun -N2 --ntasks-per-node=2 --mpi=none --dist-train=check true
check "check on AMD nodes: RCCL's all-reduce over HIP, from the system, each rank on its own GPU" \
	eval 'grep -q "^dist-train: check: all 4 ranks reached rank 0 at n[0-9]*:[0-9]* (.*); RCCL all-reduce across them: ok (librccl 2\.22\.3 from $JOBS/rocm/lib/librccl\.so\.1)$" "$ERR" &&
		[ "$(grep -c "^mock-hip: rank [0-3] uses GPU [01] of 2$" "$ERR")" = 4 ] &&
		[ "$(grep "^mock-hip: rank" "$ERR" | sort -u | wc -l)" = 4 ]' || show_output
job srun -N2 -n2 --mpi=none --dist-train=check "$JOBS/venv/bin/python3" -c pass
check "... and the RCCL and HIP that PyTorch's ROCm wheel brings into the program's environment" \
	grep -q "; RCCL all-reduce across them: ok (librccl 2\.22\.3 from $wheel/librccl\.so)$" "$ERR" || show_output
job env LD_LIBRARY_PATH="$JOBS/rocm/lib" DT_MOCK_GPUS=1 srun -N1 -n2 --mpi=none --dist-train=check true
check "... two ranks on one AMD GPU: skipped, saying why in RCCL's name" \
	grep -q "; RCCL all-reduce skipped: not every rank has RCCL and a GPU (rank 0: 2 ranks on this node share 1 GPU, and RCCL refuses two ranks of one communicator on one GPU: run at most 1 task per node to have RCCL checked, librccl 2\.22\.3 from $JOBS/rocm/lib/librccl\.so\.1)$" "$ERR" || show_output

finish
