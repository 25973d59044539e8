#!/bin/bash
# tests/run.sh --stack=all: every Slurm generation the project supports,
# each with its own Slurm, PMIx, hwloc and PyTorch (README "Supported
# versions"): this machine's stack, and each other in a Debian root
# (tests/stack-root.sh), in its own namespaces with its own cluster.
#
# Most of a stack's run is waiting on daemons, timeouts and Python
# imports, not CPU, so two stacks run at a time: this machine's starts at
# once while the roots are made or refreshed, and the next stack in line
# starts whenever one ends. Each stack's output is kept in
# stack-logs/STACK.log; the end gives its failures, the time of each stack
# and each part, and one line, N passed, N failed, N skipped, over all.
#
#   DT_STACKS      the stacks to run [bookworm trixie sid]
#   DT_STACK_JOBS  how many run at a time [2]
#   DT_FUZZ_STACK  the one that fuzzes with new inputs; the others replay
#                  the corpus only [trixie]
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
jobs=${DT_STACK_JOBS:-2}
# The stack that fuzzes with new inputs: trixie by default, which runs
# beside the first and is off the longest path (the first, then the third).
fuzz_stack=${DT_FUZZ_STACK:-}
if [ -z "$fuzz_stack" ]; then
	for s in $stacks; do [ "$s" = trixie ] && fuzz_stack=trixie; done
	[ -n "$fuzz_stack" ] || fuzz_stack=${stacks%% *}
fi
t_start=$(date +%s)
say() { echo "=== tests/stacks.sh: $* (at $(( $(date +%s) - t_start )) s)"; }

# This machine's stack first, then the others in the order given.
queue=
for s in $stacks; do [ "$s" = "$host" ] && queue="$s"; done
for s in $stacks; do [ "$s" != "$host" ] && queue="$queue $s"; done

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
	# Fuzzing is the same on every stack (pure code): new inputs on one,
	# the corpus and the regressions replayed on the others.
	fuzz=${DT_FUZZ_SECONDS:-}
	[ "$s" = "$fuzz_stack" ] || fuzz=0
	if [ "$s" = "$host" ]; then
		DT_FUZZ_SECONDS=$fuzz tests/run.sh > "$logs/$s.log" 2>&1
	else
		DT_FUZZ_SECONDS=$fuzz tests/stack-root.sh enter "$s" tests/run.sh > "$logs/$s.log" 2>&1
	fi
	r=$?
	echo $(( $(date +%s) - t0 )) > "$logs/$s.time"
	echo "$r" > "$logs/$s.rc"
	say "$s ended (exit $r): $(tail -n 1 "$logs/$s.log")"
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

pass=0 fail=0 skip=0 rc=0
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
		grep -E '^(FAIL|ERROR):|^tests/run.sh: FAIL' "$logs/$s.log" | sed "s/^/$s| /"
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
	echo "$s: tests $(cat "$logs/$s.time" 2>/dev/null || echo -) s, $prep"
	[ -r "$logs/$s.log" ] &&
		grep -E '^=== tests/run.sh: .* took [0-9]+ s$' "$logs/$s.log" |
		sed 's/^=== tests\/run.sh: /    /'
done
echo "all stacks: $(( $(date +%s) - t_start )) s, $jobs at a time"
echo
echo "$pass passed, $fail failed, $skip skipped"
exit $rc
