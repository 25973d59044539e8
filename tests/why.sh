#!/bin/bash
# dist-train why on a record folder made here, no cluster needed (TAP):
# the ranks grouped by where they stood, the odd ones first, the ones
# killed unanswered, the ones behind; --json; a record it cannot read says
# so; run by root, it reads as the record's owner, and a file of another
# user beside the record is not read. The cluster's own records are read
# back in tests/integration/failure.sh.
top_srcdir=${DT_TOP_SRCDIR:-$(dirname "$0")/..}
top_builddir=${DT_TOP_BUILDDIR:-$top_srcdir}
why=$top_builddir/helper/dist-train

echo "1..5"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
chmod 0755 "$dir"
cat > "$dir/dist-train-77.0.json" <<'EOF'
{"version": 1, "step": "77.0", "ended": "timeout", "tasks": 5, "nodes": 2,
 "torchrun": false, "fail_fast": true, "cause": null, "first_failure": null,
 "failed": 0, "stopped": 5, "exits_heard": 5, "exits": []}
EOF
stack() {	# stack RANK FRAME HOW
	printf 'dist-train: the stacks of rank %s (pid 1) when SIGTERM came\nCurrent thread 0x1 (most recent call first):\n  File "%s", line 12 in %s\n  File "/home/u/train.py", line 30 in <module>\ndist-train: rank %s on n1 ended by %s\n' \
		"$1" "${2% *}" "${2#* }" "$1" "$3" > "$dir/dist-train-77.0.stacks-rank-$1"
}
stack 0 "/home/u/train.py next_batch" "signal 15 (SIGTERM)"
stack 1 "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py all_reduce" "signal 15 (SIGTERM)"
stack 2 "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py all_reduce" "signal 15 (SIGTERM)"
printf 'dist-train: the stacks of rank 3 (pid 1) when SIGTERM came\ndist-train: rank 3 on n2 ended by signal 9 (SIGKILL)\n' > "$dir/dist-train-77.0.stacks-rank-3"

out=$(cd "$dir" && "$why" why 2>&1)
if grep -qx "dist-train: step 77.0 was ended by its time limit; no rank failed first" <<<"$out" &&
	[ "$(sed -n 3p <<<"$out")" = "  rank 0: /home/u/train.py:12 in next_batch" ] &&
	grep -qx "  ranks 1-2: .*distributed_c10d.py:12 in all_reduce (waiting in a collective)" <<<"$out" &&
	grep -qx "  rank 3: no stacks, ended by signal 9 (SIGKILL) before it could write them" <<<"$out" &&
	grep -q "^  rank 4: nothing saved" <<<"$out" &&
	grep -q "^Behind: rank 0, " <<<"$out"; then
	echo "ok 1 - the newest record here: rank 0 first and behind, 1-2 in the collective, 3 unanswered, 4 without stacks"
else
	echo "not ok 1 - why on the newest record"
	sed 's/^/# /' <<<"$out"
fi

out=$("$why" why --json "$dir/dist-train-77.0.json" 2>&1)
if python3 -c '
import json, sys
w = json.loads(sys.argv[1])
assert [g["ranks"] for g in w["groups"]] == ["0", "1-2"], w
assert w["behind"] == "0" and w["unanswered"] == "3" and w["nothing_saved"] == "4", w
assert w["stacks_files"] == 4 and w["ended"] == "timeout", w
' "$out"; then
	echo "ok 2 - --json, by the record's path, says the same"
else
	echo "not ok 2 - --json"
	sed 's/^/# /' <<<"$out"
fi

printf '{"version": 1, "step": "78.0", "tasks": ' > "$dir/dist-train-78.0.json"
out=$(cd "$dir" && "$why" why 78.0 2>&1)
rc=$?
if [ $rc != 0 ] && grep -q "dist-train-78.0.json is not a dist-train record (at byte 40: a value expected): see doc/record.md" <<<"$out"; then
	echo "ok 3 - a record cut short: where, and what to read"
else
	echo "not ok 3 - a record cut short (rc $rc)"
	sed 's/^/# /' <<<"$out"
fi
rm -f "$dir/dist-train-78.0.json"

if [ "$(id -u)" != 0 ] || ! id nobody >/dev/null 2>&1 || ! id daemon >/dev/null 2>&1; then
	echo "ok 4 # SKIP not root, or no users nobody and daemon"
	echo "ok 5 # SKIP not root, or no users nobody and daemon"
	exit 0
fi
# Run by root: it becomes the record's owner, and reads only that user's
# files: here rank 1's belongs to another user, and is left out.
chown nobody "$dir"/dist-train-77.0.*
chown daemon "$dir/dist-train-77.0.stacks-rank-1"
out=$(cd "$dir" && "$why" why 77 2>&1)
if [ "$(sed -n 3p <<<"$out")" = "  rank 0: /home/u/train.py:12 in next_batch" ] &&
	grep -qx "  rank 2: .*distributed_c10d.py:12 in all_reduce (waiting in a collective)" <<<"$out" &&
	grep -q "^  ranks 1,4: nothing saved" <<<"$out" && grep -q "(3 stacks, " <<<"$out"; then
	echo "ok 4 - as root: the record's owner's files only (rank 1's, another user's, is not read)"
else
	echo "not ok 4 - as root, another user's file"
	sed 's/^/# /' <<<"$out"
fi
# The record made another user's: only that user's file (rank 1's) is.
chown daemon "$dir/dist-train-77.0.json"
out=$(cd "$dir" && "$why" why 77.0 2>&1)
if grep -qx "  rank 1: .*distributed_c10d.py:12 in all_reduce (waiting in a collective)" <<<"$out" &&
	grep -q "^  ranks 0,2-4: nothing saved" <<<"$out" && grep -q "(1 stacks, " <<<"$out"; then
	echo "ok 5 - as root, the record of another user: only that user's file is read"
else
	echo "not ok 5 - as root, another user's record"
	sed 's/^/# /' <<<"$out"
fi
