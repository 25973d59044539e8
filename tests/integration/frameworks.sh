#!/bin/bash
# What each framework would derive under srun --dist-train: the real
# environments of real tasks, in several layouts, run through each
# framework's own Slurm detection (written down in frameworks.py), against
# the table in doc/user-guide.md. A framework that derives another rank or
# coordinator than the plugin hangs the job; this test says where.
. "$(dirname "$0")/lib.sh"

cluster_start
plan 8

RULES=$(dirname "$0")/frameworks.py
MEASURED=$DT_CLUSTER_DIR/frameworks.measured
: > "$MEASURED"
# One file per task: long lines of several tasks would interleave on srun's
# stdout.
job_file dump_env.py <<'EOF'
import json, os, sys
with open(os.path.join(sys.argv[1], os.environ["SLURM_PROCID"]), "w") as f:
    json.dump(dict(os.environ), f)
EOF
printf 'n3\nn1\nn1\nn2\n' | job_file hosts

# measure LAYOUT SRUN-ARGS...: the step's environments through the rules.
measure() {
	local layout=$1 verdicts
	shift
	rm -rf "${JOBS:?}/env.$layout"
	mkdir -m 0777 "$JOBS/env.$layout"
	job "$@" --dist-train /usr/bin/python3 dump_env.py "env.$layout" ||
		{ show_output; return 1; }
	verdicts=$(python3 "$RULES" "$layout" "$JOBS/env.$layout")
	local rc=$?
	echo "$verdicts" >> "$MEASURED"
	[ $rc = 0 ] || { diag "$verdicts"; return 1; }
}

check "block (-N2 --ntasks-per-node=2): each framework as the table says" \
	measure block srun -N2 -n4 --ntasks-per-node=2 --mpi=none
check "uneven (-N4 -n8, laid out 5,1,1,1)" \
	measure uneven srun -N4 -n8 --mpi=none
check "cyclic (-N3 --ntasks-per-node=2 -m cyclic)" \
	measure cyclic srun -N3 -n6 --ntasks-per-node=2 -m cyclic --mpi=none
check "plane (-N2 --ntasks-per-node=3 -m plane=2)" \
	measure plane srun -N2 -n6 --ntasks-per-node=3 -m plane=2 --mpi=none
check "arbitrary (SLURM_HOSTFILE n3,n1,n1,n2: rank 0 on n3)" \
	measure arbitrary env SLURM_HOSTFILE="$JOBS/hosts" srun -n4 -m arbitrary --mpi=none
pmix_check "cyclic under --mpi=pmix: MPI's rank (PMIx) is RANK" \
	measure pmix-cyclic srun -N2 -n4 --ntasks-per-node=2 -m cyclic --mpi=pmix
pmix_check "arbitrary under --mpi=pmix" \
	measure pmix-arbitrary env SLURM_HOSTFILE="$JOBS/hosts" srun -n4 -m arbitrary --mpi=pmix

# The real thing for MPI: Open MPI's rank (from PMIx) is the plugin's RANK.
job srun -N2 -n4 --ntasks-per-node=2 -m cyclic --mpi=pmix --dist-train \
	/usr/bin/python3 -c 'import os; from mpi4py import MPI
c = MPI.COMM_WORLD
print("MPI rank=%d size=%d RANK=%s WORLD_SIZE=%s" % (c.Get_rank(), c.Get_size(), os.environ["RANK"], os.environ["WORLD_SIZE"]))'
pmix_check "mpi4py with Open MPI (cyclic, --mpi=pmix): MPI's rank and size are RANK and WORLD_SIZE" \
	test "$(count_lines '^MPI rank=([0-3]) size=4 RANK=\1 WORLD_SIZE=4$')" = 4 || show_output

# The table as measured, for the log (and the closing note of a change).
diag "$(sed "s/^MEASURED //" "$MEASURED")"

finish
