#!/bin/bash
# valgrind memcheck on the dist-train commands: no error, no leak (TAP).
# Leaks are definite or indirect ones: libraries opened at run time
# (hwloc) keep what they keep until exit, which is not a leak of ours.
top_srcdir=${DT_TOP_SRCDIR:-$(dirname "$0")/..}
top_builddir=${DT_TOP_BUILDDIR:-$top_srcdir}
dt=$top_builddir/helper/dist-train
xml=$top_srcdir/tests/topologies/32em64t-2n8c2t-pci-normalio.xml

. "$top_srcdir/tests/require.sh"
require_tool valgrind

# A task of a one-task step, as Slurm would describe it: the bootstrap
# runs for real (rank 0 alone), without PMIx.
step_env=(SLURM_STEP_NODELIST=localhost SLURM_STEP_TASKS_PER_NODE=1
	  SLURM_STEP_NUM_NODES=1 SLURM_STEP_NUM_TASKS=1 SLURM_NODEID=0
	  SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_JOB_ID=42 SLURM_STEP_ID=0
	  PMIX_NAMESPACE=)

# dist-train stacks against Slurm's commands as a running job answers:
# squeue lists the job's steps; srun prints what each node's collector
# (helper/stacks_collect.c) would, labelled.
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
# The job is this user's: run as root, the command becomes the job's
# user, which needs no change then.
cat > "$fake/squeue" <<'EOF'
#!/bin/sh
u=$(id -u)
printf '7.batch %s n1\n7.extern %s n[1-2]\n7.0 %s n[1-2]\n' "$u" "$u" "$u"
EOF
cat > "$fake/srun" <<'EOF'
#!/bin/sh
cat <<'OUT'
0: H n1
1: H n2
0: P 10 0 3 1 python3
1: P 20 1 3 1 python3
0: P 11 -1 -1 1 torchrun
1: P 21 2 3 0 sleep
1: S 20 Current thread 0x1 (most recent call first):
0: S 10 Thread 0x2 (most recent call first):
0: S 10   File "/x.py", line 3 in loader
1: S 20   File "/x.py", line 9 in stuck
0: S 10
0: S 10 Current thread 0x1 (most recent call first):
0: S 10   File "/x.py", line 5 in all_reduce
0: S 11 Current thread 0x3 (most recent call first):
0: S 11   File "/agent.py", line 5 in run
0: C 10 #3 nccl:all_reduce scheduled, process group 0 (default_pg)
1: C 20 #2 nccl:all_reduce completed, process group 0 (default_pg)
0: F /nonexistent/dist-train-7.0.nccl-rank-0
OUT
EOF
chmod 0755 "$fake/squeue" "$fake/srun"

# WHERE|EXIT|ARGS: WHERE is "step" (a task of the step above), "slurm"
# (Slurm's commands as above) or "none".
cases=(
	"none|0|hostnames x[1-2]y[3-4]z[5-6],n[01-20]"
	"none|1|hostnames n[1-"
	"none|0|plan --topology $xml"
	"none|0|plan --topology $xml --tasks 6 --share-gpus --json"
	"none|1|plan --topology $xml --tasks 4"
	"none|0|plan --bind numa"
	"none|1|exec -- true"
	"step|0|env --settings=check,nccl,bind=off"
	"step|0|exec --settings=verbose -- true"
	"slurm|0|stacks -o $fake/out 7"
	"slurm|1|stacks 7.9"
	"none|1|stacks 12x"
	"step|0|stacks --collect 42.0 $(id -u)"
	"none|2|bogus"
	"none|0|version"
)
echo "1..${#cases[@]}"
n=0 failed=0
for c in "${cases[@]}"; do
	n=$((n + 1))
	where=${c%%|*} c=${c#*|}
	want=${c%%|*} args=${c#*|}
	env=()
	[ "$where" = step ] && env=("${step_env[@]}")
	[ "$where" = slurm ] && env=(PATH="$fake:$PATH")
	log=$(mktemp)
	# shellcheck disable=SC2086
	env -u PMIX_NAMESPACE "${env[@]}" valgrind -q --leak-check=full \
		--errors-for-leak-kinds=definite,indirect --error-exitcode=99 \
		--suppressions="$top_srcdir/tests/valgrind.supp" \
		"$dt" $args > /dev/null 2> "$log"
	rc=$?
	if [ $rc = "$want" ] && ! grep -q '^==[0-9]*== [^ ]' "$log"; then
		echo "ok $n - dist-train $args: exit $rc, valgrind clean"
	else
		echo "not ok $n - dist-train $args: exit $rc (expected $want)"
		sed 's/^/# /' "$log" | head -30
		failed=$((failed + 1))
	fi
	rm -f "$log"
done
exit $((failed > 0))
