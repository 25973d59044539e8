#!/bin/bash
# Rank 0's start barrier at scale, on this machine: simulated nodes join
# rank 0's real rendezvous code (tests/bench/rendezvous_scale.c links
# common/rank0.c and common/rendezvous.c), each node's leader speaking for
# PER_NODE ranks with one connection, as the product's do; rank 0's own
# node's members come over its Unix socket. In the same run, a bare accept
# loop (read one line from each of the same connections, answer "OK" once
# all are in) handles the same connections: the floor of any TCP barrier.
#
#   tests/bench/rendezvous-scale.sh [REPETITIONS] [PER_NODE]   (after building)
#
# Prints, for N = 1,024, 16,384 and 131,072 ranks (8 per node: 128, 2,048
# and 16,384 nodes), the median time from the first connection until the
# last rank was released, its ratio to the bare loop's, and rank 0's peak
# resident memory. Runs as root where it can (131,072 ranks with 8 per node
# need 16,384 open files in each process).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${DT_TOP_BUILDDIR:-$top/build}
reps=${1:-3}
per_node=${2:-8}

make -s -C "$build/tests" bench/rendezvous_scale >/dev/null
bin=$build/tests/bench/rendezvous_scale

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

for n in 1024 16384 131072; do
	dt_times=() bare_times=() rss=()
	# Interleaved, so that the machine's moods fall on both alike.
	for ((i = 0; i < reps; i++)); do
		read -r t _ < <("$bin" bare "$n" "$per_node")
		bare_times+=("$t")
		read -r t kb < <("$bin" dt "$n" "$per_node")
		dt_times+=("$t") rss+=("$kb")
	done
	dt=$(printf '%s\n' "${dt_times[@]}" | median)
	bare=$(printf '%s\n' "${bare_times[@]}" | median)
	peak=$(printf '%s\n' "${rss[@]}" | sort -n | tail -1)
	awk -v n="$n" -v dt="$dt" -v bare="$bare" -v kb="$peak" 'BEGIN {
		ratio = bare > 0 ? dt / bare : 0
		printf "rendezvous-scale: N=%d released in %.3f s (%.2f x bare accept loop), rank 0 peak RSS %.1f MiB\n", n, dt, ratio, kb / 1024 }'
done
