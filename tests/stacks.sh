#!/bin/bash
# tests/run.sh --stack=all: every Slurm generation the project supports,
# each with its own Slurm, PMIx, hwloc and PyTorch (README "Supported
# versions"): this machine's stack, and each other in a Debian root
# (tests/stack-root.sh), in its own namespaces with its own cluster.
#
# Most of a stack's run is waiting on daemons, timeouts and Python
# imports, not CPU, so every stack runs at once, each in its own
# namespaces with its own cluster: this machine's starts at once, the
# others as soon as their roots are made or refreshed (3 at a time took
# 2,386 s on 2 cores, roots made from nothing; 2 at a time, 3,834 s).
# What is the same on every stack (the sanitizer build, make distcheck,
# valgrind, fuzzing, the checks of the documents) runs on one only:
# DT_ONCE_STACK, the first (this machine's) by default; the others run with
# DT_ONCE=0 (tests/run.sh). Each stack's output is kept in
# stack-logs/STACK.log; the end gives each stack's slowest tests, the
# time of each stack and part and when each started and ended, one line,
# N passed, N failed, N skipped, over all, and then what failed, with the
# end of its output.
#
#   DT_STACKS      the stacks to run [bookworm trixie sid]
#   DT_STACK_JOBS  how many run at a time [3]
#   DT_ONCE_STACK  the one that runs what is the same on every stack
#                  [this machine's]
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
logs=$top/stack-logs
rm -rf "$logs"
mkdir -p "$logs/claimed"

. /etc/os-release
case ${VERSION_ID:-} in
12) host=bookworm ;;
13) host=trixie ;;
"") host=sid ;;
*) host=${VERSION_CODENAME:-unknown} ;;
esac
stacks=${DT_STACKS:-bookworm trixie sid}
jobs=${DT_STACK_JOBS:-3}
t_start=$(date +%s)
say() { echo "=== tests/stacks.sh: $* (at $(( $(date +%s) - t_start )) s)"; }

# This machine's stack first, then the others in the order given. The
# first runs what is the same on every stack: it starts while the roots
# are made, when the CPU has time for fuzzing (2,386 s in all on a new
# machine; with the last in line doing it, 2,495 s: its fuzzing slowed
# every stack's integration tests).
queue=
for s in $stacks; do [ "$s" = "$host" ] && queue="$s"; done
for s in $stacks; do [ "$s" != "$host" ] && queue="$queue $s"; done
queue=${queue# }
once_stack=${DT_ONCE_STACK:-${queue%% *}}

# The roots, all at once, in the background: network and dpkg.
for s in $queue; do
	[ "$s" = "$host" ] && continue
	(
		t0=$(date +%s)
		tests/stack-root.sh prepare "$s" > "$logs/$s.prepare.log" 2>&1
		echo $? > "$logs/$s.prepare.rc"
		echo $(( $(date +%s) - t0 )) > "$logs/$s.prepare.time"
	) &
done

run_stack() {
	local s=$1 t0 r
	if [ "$s" != "$host" ]; then
		while [ ! -e "$logs/$s.prepare.rc" ]; do sleep 2; done
		if [ "$(cat "$logs/$s.prepare.rc")" != 0 ]; then
			# A suite whose archive is broken today: the package is
			# named, the other stacks still run, and this run fails.
			say "$s: its root could not be made: $(tail -n 1 "$logs/$s.prepare.log")"
			echo "$s: root not made: $(tail -n 1 "$logs/$s.prepare.log")" > "$logs/$s.result"
			return
		fi
	fi
	say "$s started"
	t0=$(date +%s)
	echo $((t0 - t_start)) > "$logs/$s.start"
	once=0
	[ "$s" = "$once_stack" ] && once=1
	if [ "$s" = "$host" ]; then
		DT_ONCE=$once tests/run.sh > "$logs/$s.log" 2>&1
	else
		DT_ONCE=$once tests/stack-root.sh enter "$s" tests/run.sh > "$logs/$s.log" 2>&1
	fi
	r=$?
	echo $(( $(date +%s) - t0 )) > "$logs/$s.time"
	echo $(( $(date +%s) - t_start )) > "$logs/$s.end"
	echo "$r" > "$logs/$s.rc"
	say "$s ended (exit $r): $(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$logs/$s.log" | tail -n 1)"
}

# A lane takes the next stack nobody has claimed (mkdir is atomic).
lane() {
	local s
	for s in $queue; do
		mkdir "$logs/claimed/$s" 2>/dev/null || continue
		run_stack "$s"
	done
}

lanes=()
for ((i = 0; i < jobs; i++)); do
	lane &
	lanes+=($!)
done
wait "${lanes[@]}"
wait

pass=0 fail=0 skip=0 rc=0 failed=
echo
say "results"
for s in $queue; do
	line=
	[ -r "$logs/$s.log" ] &&
		line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$logs/$s.log" | tail -n 1)
	if [ -z "$line" ]; then
		echo "$s: no result ($(cat "$logs/$s.result" 2>/dev/null || echo "see stack-logs/$s.log"))"
		[ -r "$logs/$s.log" ] && tail -n 30 "$logs/$s.log" | sed "s/^/$s| /"
		fail=$((fail + 1)) rc=1
		continue
	fi
	read -r p _ f _ k _ <<<"$line"
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + k))
	if [ "$f" != 0 ] || [ "$(cat "$logs/$s.rc")" != 0 ]; then
		rc=1
		echo "$s: $line, exit $(cat "$logs/$s.rc"); its failures:"
		# make check's VERBOSE output names each failure twice.
		grep -E '^(FAIL|ERROR):|^tests/run.sh: FAIL' "$logs/$s.log" |
			awk '!seen[$0]++' | sed "s/^/$s| /"
		failed+=" $s"
	else
		echo "$s: $line"
	fi
	grep -E '^tests/run.sh: [0-9]+ PMIx tests skipped' "$logs/$s.log" | sed "s/^/$s| /"
done

echo
say "time of each part, in seconds"
for s in $queue; do
	prep="(this machine)"
	[ "$s" != "$host" ] && prep="root $(cat "$logs/$s.prepare.time" 2>/dev/null || echo -) s"
	echo "$s: tests $(cat "$logs/$s.time" 2>/dev/null || echo -) s" \
		"(from $(cat "$logs/$s.start" 2>/dev/null || echo -) s to $(cat "$logs/$s.end" 2>/dev/null || echo -) s)," \
		"$prep$([ "$s" = "$once_stack" ] && echo ", with what runs once")"
	[ -r "$logs/$s.log" ] &&
		grep -E '^=== tests/run.sh: .* took [0-9]+ s$' "$logs/$s.log" |
		sed 's/^=== tests\/run.sh: /    /'
	[ -r "$logs/$s.log" ] &&
		sed -n '/^=== tests\/run.sh: the slowest tests/,/^$/p' "$logs/$s.log" |
		sed '1d; /^$/d; s/^/  /' | head -n 8
done
# The critical path: the stack that ended last, and what ran before it
# in its lane.
last=$(for s in $queue; do echo "$(cat "$logs/$s.end" 2>/dev/null || echo 0) $s"; done | sort -n | tail -n 1)
echo "all stacks: $(( $(date +%s) - t_start )) s, $jobs at a time; the last to end: ${last#* } at ${last%% *} s"
echo
echo "$pass passed, $fail failed, $skip skipped"
for s in $failed; do
	echo
	echo "=== $s: what failed"
	sed -n '/^=== tests\/run.sh: what failed/,$p' "$logs/$s.log" | sed '1d' | head -n 150
done
exit $rc
