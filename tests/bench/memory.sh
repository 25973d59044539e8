#!/bin/bash
# Peak memory: of the dist-train command, and of slurmstepd with the
# plugin at work against without it.
#
#   tests/bench/memory.sh     (root; after building)
set -u
. "$(dirname "$0")/lib.sh"
dt=$TOP_BUILDDIR/helper/dist-train
xml=$TOP_SRCDIR/tests/topologies/96em64t-4n4d3ca2co-pci.xml

# Peak resident memory (KiB) of a command, from the kernel's accounting
# (GNU time: a small parent, whose pages the child does not inherit).
peak_kib() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
million=$(python3 -c "print(','.join(f'r{r:02d}-[00000-{62499:05d}]' for r in range(16)))")

echo "Peak resident memory ($(date -u +%Y-%m-%d)); in brackets, the difference"
echo "from the same step without dist-train:"
printf '  %-56s %6s KiB\n' "dist-train hostnames (1,000,000 hosts)" \
	"$(( $(peak_kib "$dt" hostnames "$million") ))"
printf '  %-56s %6s KiB\n' "dist-train plan --topology (96 cores, 4 NUMA nodes)" \
	"$(( $(peak_kib "$dt" plan --topology "$xml" --tasks 8) ))"
printf '  %-56s %6s KiB\n' "dist-train plan (this node, hwloc discovery)" \
	"$(( $(peak_kib "$dt" plan) ))"
printf '  %-56s %6s KiB\n' "dist-train exec (bootstrap and binding, one task)" \
	"$(( $(peak_kib env SLURM_STEP_NODELIST=localhost SLURM_STEP_TASKS_PER_NODE=1 \
		SLURM_STEP_NUM_NODES=1 SLURM_STEP_NUM_TASKS=1 SLURM_NODEID=0 \
		SLURM_PROCID=0 SLURM_LOCALID=0 "$dt" exec -- true) ))"

cluster_start
# VmHWM of the step's slurmstepd on n1 while its tasks run.
stepd_hwm() {
	local ns pid best=0 hwm
	( timeout 60 "$DT_CLUSTER" run "$@" > /dev/null 2>&1 ) &
	sleep 3
	ns=$(cat "$DT_CLUSTER_DIR/run/n1.mntns")
	for pid in $(ls /proc | grep -E '^[0-9]+$'); do
		[ "$(readlink /proc/$pid/ns/mnt 2>/dev/null)" = "$ns" ] || continue
		grep -q '^slurmstepd: \[[0-9]*\.0\]' /proc/$pid/cmdline 2>/dev/null || continue
		hwm=$(awk '/^VmHWM/ { print $2 }' /proc/$pid/status)
		[ "${hwm:-0}" -gt "$best" ] && best=$hwm
	done
	wait
	echo "$best"
}
plain=$(stepd_hwm srun -N1 -n8 sleep 5)
with=$(stepd_hwm srun -N1 -n8 --dist-train sleep 5)
pmix_plain=$(stepd_hwm srun -N1 -n8 --mpi=pmix sleep 5)
# Every task a PMIx client, without the plugin: what any MPI program costs
# Slurm's PMIx server in slurmstepd.
pmix_client=$(stepd_hwm srun -N1 -n8 --mpi=pmix dist-train exec -- sleep 5)
pmix_with=$(stepd_hwm srun -N1 -n8 --mpi=pmix --dist-train sleep 5)
row() { printf '  %-56s %6s KiB%s\n' "$@"; }
row "slurmstepd, srun -N1 -n8" "$plain" ""
row "slurmstepd, srun -N1 -n8 --dist-train (binding)" "$with" " ($((with - plain)))"
row "slurmstepd, srun -N1 -n8 --mpi=pmix" "$pmix_plain" ""
row "slurmstepd, srun -N1 -n8 --mpi=pmix dist-train exec" "$pmix_client" \
	" ($((pmix_client - pmix_plain)))"
row "slurmstepd, srun -N1 -n8 --mpi=pmix --dist-train" "$pmix_with" \
	" ($((pmix_with - pmix_plain)))"
