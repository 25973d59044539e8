#!/bin/bash
# tests/run.sh --stack=all: every Slurm generation the project supports,
# each with its own Slurm, PMIx, hwloc and PyTorch (README "Supported
# versions"): this machine's stack, then each other in a Debian root
# (tests/stack-root.sh). The roots are made or refreshed in the
# background while the first stack runs. Each stack's log is kept in
# stack-logs/; the end gives the time of each part and one line,
# N passed, N failed, N skipped, over all of them.
#
#   DT_STACKS   the stacks to run [bookworm trixie sid]
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
logs=$top/stack-logs
mkdir -p "$logs"

. /etc/os-release
case ${VERSION_ID:-} in
12) host=bookworm ;;
13) host=trixie ;;
"") host=sid ;;
*) host=${VERSION_CODENAME:-unknown} ;;
esac
stacks=${DT_STACKS:-bookworm trixie sid}

t_start=$(date +%s)
declare -A took result
pass=0 fail=0 skip=0 rc=0

# Make the other stacks' roots while this machine's stack runs (mostly
# network and dpkg; the tests mostly wait on daemons).
prepare_pids=()
for s in $stacks; do
	[ "$s" = "$host" ] && continue
	(
		t0=$(date +%s)
		tests/stack-root.sh prepare "$s" > "$logs/$s.prepare.log" 2>&1
		r=$?
		echo "$(( $(date +%s) - t0 ))" > "$logs/$s.prepare.time"
		exit $r
	) &
	prepare_pids+=("$s:$!")
done

# count LOG: add a stack's closing line to the totals.
count() {
	local line p f k
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$1" | tail -n 1)
	if [ -z "$line" ]; then
		fail=$((fail + 1))
		return 1
	fi
	read -r p _ f _ k _ <<<"$line"
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + k))
	[ "$f" = 0 ]
}

run_stack() {
	local s=$1 t0 r
	t0=$(date +%s)
	echo "=== tests/stacks.sh: $s"
	if [ "$s" = "$host" ]; then
		tests/run.sh 2>&1 | tee "$logs/$s.log"
		r=${PIPESTATUS[0]}
	else
		tests/stack-root.sh enter "$s" tests/run.sh 2>&1 | tee "$logs/$s.log"
		r=${PIPESTATUS[0]}
	fi
	took[$s]=$(( $(date +%s) - t0 ))
	if count "$logs/$s.log" && [ "$r" = 0 ]; then
		result[$s]=passed
	else
		result[$s]="FAILED (exit $r; log: stack-logs/$s.log)"
		rc=1
	fi
}

for s in $stacks; do
	[ "$s" = "$host" ] && run_stack "$s"
done
for entry in "${prepare_pids[@]}"; do
	s=${entry%%:*}
	if ! wait "${entry#*:}"; then
		# A suite whose archive is broken today: say which package, go
		# on with the others; the run fails.
		echo "tests/stacks.sh: $s: cannot make its root: $(tail -n 1 "$logs/$s.prepare.log")" >&2
		result[$s]="FAILED: root not made ($(tail -n 1 "$logs/$s.prepare.log"))"
		took[$s]=0
		fail=$((fail + 1)) rc=1
		continue
	fi
	run_stack "$s"
done

echo
echo "=== tests/stacks.sh: time of each part (seconds)"
for s in $stacks; do
	prep=-
	[ -r "$logs/$s.prepare.time" ] && prep=$(cat "$logs/$s.prepare.time")
	[ "$s" = "$host" ] && prep="(this machine)"
	printf '%-9s root %-15s tests %5s   %s\n' "$s" "$prep" "${took[$s]:-0}" "${result[$s]:-not run}"
	[ -r "$logs/$s.log" ] && grep -E '^=== tests/run.sh: .* took [0-9]+ s' "$logs/$s.log" | sed 's/^=== tests\/run.sh: /          /'
done
echo "total: $(( $(date +%s) - t_start )) s"
echo
echo "$pass passed, $fail failed, $skip skipped"
exit $rc
