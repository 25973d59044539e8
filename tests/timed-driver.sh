#!/bin/sh
# Automake's test driver, timed: runs the driver and its arguments that
# follow, and writes the test's wall time in seconds beside its log
# (TEST.log: TEST.time), for the table of the slowest tests that
# tests/run.sh prints at its end.
log=
prev=
for arg in "$@"; do
	[ "$prev" = --log-file ] && log=$arg
	prev=$arg
done
t0=$(date +%s.%N)
"$@"
rc=$?
[ -n "$log" ] &&
	awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' \
		> "${log%.log}.time"
exit $rc
