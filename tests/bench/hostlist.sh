#!/bin/bash
# Host list expansion: dist-train hostnames against scontrol show hostnames.
#
#   tests/bench/hostlist.sh [REPETITIONS]    (after building; needs scontrol)
#
# Lists of 1,000 to 1,000,000 hosts (16 racks of up to 65,536, as Slurm
# allows per range); median wall time of REPETITIONS runs, output to
# /dev/null, and the ratio.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
dt=${DT_TOP_BUILDDIR:-$top/build}/helper/dist-train
[ -x "$dt" ] || dt=$top/helper/dist-train
reps=${1:-5}
conf=$(mktemp -d)
trap 'rm -rf "$conf"' EXIT
printf 'ClusterName=b\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n' > "$conf/slurm.conf"
export SLURM_CONF=$conf/slurm.conf

list_of() { # N hosts in 16 racks
	python3 -c "
n = $1; per = -(-n // 16)
print(','.join(f'r{r:02d}-[{0:06d}-{min(per, n - r * per) - 1:06d}]'
               for r in range(16) if n - r * per > 0))"
}

# Median seconds of REPS runs of a command.
time_it() {
	local i t0 t1
	for ((i = 0; i < reps; i++)); do
		t0=$(date +%s.%N)
		"$@" > /dev/null
		t1=$(date +%s.%N)
		awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }'
	done | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

echo "Host list expansion, median of $reps runs ($(nproc) cores, $(date -u +%Y-%m-%d)):"
printf '  %10s  %12s  %12s  %s\n' hosts dist-train scontrol ratio
for n in 1000 10000 100000 1000000; do
	list=$(list_of $n)
	[ "$("$dt" hostnames "$list" | wc -l)" = $n ] || { echo "wrong count for $n" >&2; exit 1; }
	a=$(time_it "$dt" hostnames "$list")
	b=$(time_it scontrol show hostnames "$list")
	printf '  %10s  %11ss  %11ss  x%s\n' $n "$a" "$b" \
		"$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')"
done
echo "(ratio: dist-train's time over scontrol's; below 1 is faster)"
