# Shared by the integration tests: TAP output, and a real Slurm cluster of
# four nodes on this machine (contrib/cluster/dt-cluster) that loads the
# freshly built plugin. Source it, call cluster_start, write tests.
#
# A test script runs only as root with Slurm's daemons installed; without
# them it reports itself skipped, unless DT_REQUIRE_INTEGRATION=1 (set by
# tests/run.sh and CI), which turns a skip into a failure.

set -u

TOP_SRCDIR=${DT_TOP_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# make check sets DT_TOP_BUILDDIR; run by hand, a script finds the build
# in place or in build/ (where tests/run.sh builds).
TOP_BUILDDIR=${DT_TOP_BUILDDIR:-$TOP_SRCDIR}
if [ -z "${DT_TOP_BUILDDIR:-}" ] && [ ! -e "$TOP_SRCDIR/config.status" ] &&
	[ -e "$TOP_SRCDIR/build/config.status" ]; then
	TOP_BUILDDIR=$TOP_SRCDIR/build
fi
DT_CLUSTER=$TOP_SRCDIR/contrib/cluster/dt-cluster
export DT_CLUSTER_DIR=${DT_CLUSTER_DIR:-/var/lib/dist-train-test}
# Not the port of a cluster started by hand or by the quickstart.
export DT_CLUSTER_PORT=${DT_CLUSTER_PORT:-17100}
JOBS=$DT_CLUSTER_DIR/jobs
JOB_TIMEOUT=${DT_JOB_TIMEOUT:-180}

_tap_n=0
_tap_failed=0

plan() { echo "1..$1"; }

ok() {
	_tap_n=$((_tap_n + 1))
	echo "ok $_tap_n - $*"
}

not_ok() {
	_tap_n=$((_tap_n + 1))
	_tap_failed=$((_tap_failed + 1))
	echo "not ok $_tap_n - $*"
}

diag() { sed 's/^/# /' <<<"$*"; }

# check DESCRIPTION COMMAND...: a passing command is "ok". Returns the
# command's success, so that "check ... || show_output" explains failures.
check() {
	local what=$1
	shift
	if "$@"; then
		ok "$what"
	else
		not_ok "$what"
		return 1
	fi
}

skip_all() {
	if [ "${DT_REQUIRE_INTEGRATION:-0}" = 1 ]; then
		echo "1..1"
		echo "not ok 1 - cannot run: $*"
		exit 1
	fi
	echo "1..0 # SKIP $*"
	exit 0
}

require_cluster_tools() {
	[ "${DT_UNIT_ONLY:-0}" = 1 ] && { echo "1..0 # SKIP DT_UNIT_ONLY=1"; exit 0; }
	[ "$(id -u)" = 0 ] || skip_all "needs root to start Slurm's daemons"
	local t
	for t in slurmctld slurmd munged srun sbatch salloc unshare runuser; do
		command -v "$t" >/dev/null || skip_all "$t is not installed (tests/run.sh installs it)"
	done
	if [ "${DT_TEST_INSTALLED:-0}" = 1 ]; then
		command -v dist-train >/dev/null ||
			skip_all "DT_TEST_INSTALLED=1, but dist-train is not installed"
	else
		[ -r "$TOP_BUILDDIR/plugin/.libs/dist_train.so" ] ||
			skip_all "the plugin is not built"
	fi
}

cluster_stop() {
	"$DT_CLUSTER" stop >/dev/null 2>&1 || true
}

# at_exit COMMAND: run COMMAND (eval'd) when the test ends, however it
# ends, before the cluster stops: what a test made on the machine goes.
_at_exit=()
at_exit() {
	_at_exit+=("$1")
}

# The next test's cluster starts its job ids after this one's last.
note_next_job_id() {
	local last
	last=$(timeout 20 "$DT_CLUSTER" run scontrol -o show jobs 2>/dev/null |
		sed -n 's/^JobId=\([0-9]*\) .*/\1/p' | sort -n | tail -n 1)
	[ -n "$last" ] || return 0
	echo $(( last < 900000 ? last + 1 : 1 )) > "$DT_CLUSTER_DIR.next-job-id"
}

_on_exit() {
	local rc=$? cmd
	if [ "$_tap_failed" -gt 0 ] && [ -d "$DT_CLUSTER_DIR/log" ]; then
		diag "slurmd and slurmctld logs are in $DT_CLUSTER_DIR/log"
	fi
	for cmd in "${_at_exit[@]}"; do
		eval "$cmd"
	done
	note_next_job_id
	cluster_stop
	exit $rc
}

# What an earlier test left holding a port in the steps' range (the
# default port-range=), or the other user's processes it left, would fail
# a step with "in use by another program": the other user's go, and
# whatever still holds the range is named in the log.
sweep_leftovers() {
	local other=${DT_TEST_OTHER_USER:-dtother} pids held
	if id "$other" >/dev/null 2>&1 && pids=$(pgrep -d, -u "$other"); then
		diag "left by an earlier test, ended now: $(ps -o pid=,args= -p "$pids" | tr -s ' \n' ' ')"
		pkill -KILL -u "$other" || true
	fi
	held=$(ss -Htanp '( sport >= :20000 and sport <= :28999 )' 2>/dev/null) &&
		[ -n "$held" ] && diag "sockets in the steps' port range before the cluster starts: $held"
	return 0
}

# cluster_start [PLUGSTACK ARGS...]: environment settings of dt-cluster
# (DT_CLUSTER_RESV_PORTS, ...) pass through.
cluster_start() {
	require_cluster_tools
	# One test cluster at a time: another run waits rather than stopping it.
	exec 9> "$DT_CLUSTER_DIR.lock"
	flock -w 3600 9 || skip_all "another test run holds $DT_CLUSTER_DIR.lock"
	trap _on_exit EXIT
	trap 'exit 130' INT TERM
	# DT_TEST_INSTALLED=1: test the installed package (dt-cluster finds
	# it) rather than the build tree.
	if [ "${DT_TEST_INSTALLED:-0}" = 1 ]; then
		unset DT_CLUSTER_PLUGIN DT_CLUSTER_HELPER DT_CLUSTER_WORKER_LIB \
			DT_CLUSTER_PYTHON_HOOK
	else
		export DT_CLUSTER_PLUGIN=$TOP_BUILDDIR/plugin/.libs/dist_train.so
		export DT_CLUSTER_HELPER=$TOP_BUILDDIR/helper/dist-train
		export DT_CLUSTER_WORKER_LIB=$TOP_BUILDDIR/helper/.libs/dist_train_worker.so
		export DT_CLUSTER_PYTHON_HOOK=$TOP_SRCDIR/helper/python
	fi
	export DT_CLUSTER_PLUGIN_ARGS="$*"
	local out
	sweep_leftovers
	# Job ids go on from the last test's, rather than from 1 again, so
	# that no step gets a port an earlier test's step had a minute ago.
	export DT_CLUSTER_FIRST_JOB_ID=$(cat "$DT_CLUSTER_DIR.next-job-id" 2>/dev/null || echo 1)
	[[ $DT_CLUSTER_FIRST_JOB_ID =~ ^[1-9][0-9]{0,5}$ ]] || DT_CLUSTER_FIRST_JOB_ID=1
	if ! out=$("$DT_CLUSTER" start 2>&1); then
		echo "1..1"
		echo "not ok 1 - the test cluster did not start"
		diag "$out"
		exit 1
	fi
}

# Whether this Slurm has its mpi/pmix plugin: Debian builds Slurm 26.05
# without it, as some sites build theirs. Asked once, after cluster_start.
_slurm_pmix=
slurm_has_pmix() {
	if [ -z "$_slurm_pmix" ]; then
		if "$DT_CLUSTER" run srun --mpi=list 2>&1 | grep -qw pmix; then
			_slurm_pmix=yes
		else
			_slurm_pmix=no
		fi
	fi
	[ "$_slurm_pmix" = yes ]
}

NO_PMIX_REASON="this Slurm has no mpi/pmix plugin (Debian builds 26.05 without it): srun --mpi=pmix cannot run here"

# pmix_check DESCRIPTION COMMAND...: check, where Slurm has PMIx; else a
# TAP skip that says why (tests/run.sh accepts that reason only).
pmix_check() {
	if slurm_has_pmix; then
		check "$@"
	else
		skip_check "$1" "$NO_PMIX_REASON"
	fi
}

# skip_check DESCRIPTION REASON: a check this machine cannot make.
skip_check() {
	_tap_n=$((_tap_n + 1))
	echo "ok $_tap_n - $1 # SKIP $2"
}

# For scripts about PMIx alone: on a Slurm without it, check what a user
# gets there (srun's own refusal, and --dist-train from Slurm's ranks),
# say why the rest cannot run, and end.
pmix_or_end() {
	slurm_has_pmix && return 0
	plan 3
	job srun -N2 -n2 --mpi=pmix --dist-train true
	check "srun --mpi=pmix is refused by srun itself on this Slurm" \
		grep -q 'mpi/pmix' "$ERR" || show_output
	job srun -N2 -n4 --dist-train sh -c 'echo "RANK=$RANK WORLD_SIZE=$WORLD_SIZE"'
	check "--dist-train without PMIx gives ranks from Slurm" \
		test "$(grep -c '^RANK=[0-3] WORLD_SIZE=4$' "$OUT")" = 4 || show_output
	_tap_n=$((_tap_n + 1))
	echo "ok $_tap_n - the PMIx tests of $(basename "$0") # SKIP $NO_PMIX_REASON"
	exit 0
}

# Replace the plugin's plugstack.conf arguments; every new srun and
# slurmstepd reads the file again.
set_plugin_args() {
	"$DT_CLUSTER" plugstack "$@"
}

# test_plugin NAME [ARGS...]: set_plugin_args ARGS, with one of the
# tests' own SPANK plugins before dist_train.so: late_node
# (tests/integration/late_node.c: the nodes named in a job's DT_TEST_SLOW
# start their tasks DT_TEST_DELAY seconds late) or huge_env
# (tests/integration/huge_env.c: slurmstepd is given a 20 MB variable
# named by DT_TEST_HUGE). set_plugin_args takes it out again.
test_plugin() {
	local name=$1 so=$TOP_BUILDDIR/tests/integration/.libs/$1.so
	shift
	[ -e "$so" ] || make -s -C "$TOP_BUILDDIR/tests" "integration/$name.la" >/dev/null
	install -m 0755 "$so" "$DT_CLUSTER_DIR/lib/$name.so"
	"$DT_CLUSTER" plugstack "$@"
	sed -i "1i required $DT_CLUSTER_DIR/lib/$name.so" \
		"$DT_CLUSTER_DIR/etc/plugstack.conf"
}

# Whether every node of the cluster is still in service.
no_drained_node() {
	! SLURM_CONF=$DT_CLUSTER_DIR/etc/slurm.conf sinfo -h -N -o '%N %T' |
		grep -i -E 'drain|fail'
}

# sbatch --wait and srun return once their job has ended, while Slurm may
# still be completing it on its nodes (IS_JOB_FINISHED holds for a
# COMPLETING job): a job started then gets other nodes than the first
# ones, and a check that expects rank 0 on n1 sees n2. Each job of a test
# starts once none is completing (at most 60 s, then it starts anyway).
wait_jobs_completed() {
	local until=$((SECONDS + 60))
	while [ "$SECONDS" -lt "$until" ]; do
		[ -z "$(SLURM_CONF=$DT_CLUSTER_DIR/etc/slurm.conf timeout 10 \
			squeue -h -t COMPLETING -o %i 2>/dev/null)" ] && return 0
		sleep 0.2
	done
}

# job CMD...: run CMD as the cluster's unprivileged user in $JOBS, with a
# time limit; stdout and stderr go to $OUT and $ERR.
OUT=$JOBS/.out
ERR=$JOBS/.err
job() {
	wait_jobs_completed
	job_now "$@"
}

# job_now CMD...: job without the wait, for a benchmark that times srun
# alone (it waits first, then takes its start time).
job_now() {
	timeout -k 10 "$JOB_TIMEOUT" "$DT_CLUSTER" run "$@" >"$OUT" 2>"$ERR"
}

# A file the job user can read, in $JOBS.
job_file() {
	local name=$1
	cat > "$JOBS/$name"
	chmod 0755 "$JOBS/$name"
}

# A file of the administrator's, root's in a folder only root writes,
# as plugstack.conf's paths must be (common/admin_path.h): in $ADMIN.
ADMIN=$DT_CLUSTER_DIR/admin
admin_file() { # NAME [MODE]
	mkdir -p -m 0755 "$ADMIN"
	cat > "$ADMIN/$1"
	chmod "${2:-0755}" "$ADMIN/$1"
}

# hold.sh SECONDS: rank 0 says which step this is (for bg_step); every
# task then sleeps.
make_hold_script() {
	job_file hold.sh <<'EOF'
#!/bin/sh
[ "$SLURM_PROCID" = 0 ] && echo "$SLURM_JOB_ID.$SLURM_STEP_ID" > .bg_step
exec sleep "$1"
EOF
}

# bg_step ARGS...: srun ARGS in the background as the cluster's user
# (runner: its pid), back once its step runs (step_now: JOB.STEP, as a
# task wrote it into $JOBS/.bg_step, as hold.sh does: squeue may still
# list an earlier step). BG_TIMEOUT: srun's time limit [120 s]; BG_START:
# how long the step may take to start [30 s] (ranks that import torch: a
# minute, on a busy 2-core machine).
bg_step() {
	rm -f "$JOBS/.bg_step"
	wait_jobs_completed
	timeout -k 10 "${BG_TIMEOUT:-120}" "$DT_CLUSTER" run srun "$@" > "$OUT" 2> "$ERR" &
	runner=$!
	step_now=
	for _ in $(seq $(( ${BG_START:-30} * 10 ))); do
		[ -s "$JOBS/.bg_step" ] && step_now=$(cat "$JOBS/.bg_step") && break
		sleep 0.1
	done
}

# guarded_step HOST INTRUDERS SRUN-ARGS...: srun SRUN-ARGS (a launcher
# and its arguments, to which "store_guard.py job $GUARD" is added) in the
# background; once rank 0's store is up, each line "NAME USER [NODE]" of
# INTRUDERS connects to it at HOST as USER (from NODE's network, with
# DT_CLUSTER_NETNS=1) with a client of torch's store (store_guard.py intrude);
# then the step goes on. Their lines: $GUARD/intrude.log (their errors:
# intrude.err). GUARD_RAW=1: the program is store_guard.py raw-job (no
# torch), and each line is "NAME USER WAY HOST [NODE]" (store_guard.py
# raw, from NODE's network); GUARD_FULL=1 too: its store accepts with one
# descriptor left (raw-job full).
GUARD=$JOBS/guard
guarded_step() {
	local host=$1 intruders=$2 name user node runner mode=job raw way address
	shift 2
	[ "${GUARD_RAW:-0}" = 1 ] && mode=raw-job
	rm -rf "$GUARD"
	install -d -o "${DT_CLUSTER_USER:-dttest}" -m 0755 "$GUARD"
	job_file store_guard.py < "$TOP_SRCDIR/tests/integration/store_guard.py"
	wait_jobs_completed
	timeout -k 10 300 "$DT_CLUSTER" run srun "$@" store_guard.py $mode \
		"$GUARD" ${GUARD_FULL:+full} > "$OUT" 2> "$ERR" &
	runner=$!
	for _ in $(seq 1800); do
		[ -e "$GUARD/store-up" ] || ! kill -0 $runner 2>/dev/null && break
		sleep 0.1
	done
	raw=()
	while read -r name user node; do
		[ -n "$name" ] && [ -e "$GUARD/store-up" ] || continue
		if [ $mode = raw-job ]; then
			# Each waits, connected, until the store accepts.
			read -r way address node <<< "$node"
			${node:+nsenter --net=/run/netns/dt-$node} runuser -u "$user" -- \
				python3 "$JOBS/store_guard.py" raw "$GUARD" "$name" \
				"$way" "$address" >> "$GUARD/intrude.log" \
				2>> "$GUARD/intrude.err" &
			raw+=($!)
		else
			${node:+nsenter --net=/run/netns/dt-$node} runuser -u "$user" -- \
				python3 "$JOBS/store_guard.py" intrude "$GUARD" "$name" \
				"$host" >> "$GUARD/intrude.log" 2>> "$GUARD/intrude.err"
		fi
	done <<< "$intruders"
	for _ in $(seq 300); do
		[ "$(grep -c ' sent$' "$GUARD/intrude.log" 2>/dev/null)" -ge ${#raw[@]} ] && break
		sleep 0.1
	done
	touch "$GUARD/intruded"
	[ ${#raw[@]} = 0 ] || wait "${raw[@]}"
	wait $runner
}

# record_valid FILE...: each step record (dist-train-JOB.STEP.json) holds
# to its schema, doc/record.schema.json; what does not is said on stderr.
record_valid() {
	python3 - "$TOP_SRCDIR/doc/record.schema.json" "$@" <<'PYEOF'
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
for path in sys.argv[2:]:
    try:
        jsonschema.validate(json.load(open(path)), schema)
    except (OSError, ValueError, jsonschema.ValidationError) as e:
        sys.exit("%s: %s" % (path, str(e).splitlines()[0]))
PYEOF
}

# srun_watch_port: the port srun's watch (plugin/watch.c) listens on for
# the cluster's user, found with ss: its one socket for IPv6 and IPv4
# alike (Slurm's own listen for IPv4 only). Empty when none is up.
srun_watch_port() {
	ss -H -ltnpe 2>/dev/null |
		awk -v u="uid:$(id -u "${DT_CLUSTER_USER:-dttest}") " \
			'index($0, "\"srun\"") && index($0, u) && /v6only:0/ {
			n = split($4, a, ":"); print a[n]; exit }'
}

show_output() {
	local port
	diag "stdout:"
	diag "$(head -c 4000 "$OUT")"
	diag "stderr:"
	diag "$(head -c 4000 "$ERR")"
	# A port said to be taken that no test took: who holds it.
	for port in $(sed -n 's/.*port \([0-9]*\) on [^ ]* .*in use by another program.*/\1/p' "$OUT" "$ERR" 2>/dev/null | sort -u); do
		diag "port $port now: $(ss -Htanp "( sport = :$port )" 2>&1)"
	done
}

# Lines of stdout that match a pattern, counted.
count_lines() { grep -c -E "$1" "$OUT" || true; }

# show.sh: each task prints Slurm's own view next to the plugin's.
make_show_script() {
	job_file show.sh <<'EOF'
#!/bin/sh
echo "TASK procid=$SLURM_PROCID localid=$SLURM_LOCALID nodeid=$SLURM_NODEID" \
     "host=$(hostname) RANK=$RANK LOCAL_RANK=$LOCAL_RANK" \
     "WORLD_SIZE=$WORLD_SIZE LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE" \
     "GROUP_RANK=$GROUP_RANK GROUP_WORLD_SIZE=$GROUP_WORLD_SIZE" \
     "ROLE_RANK=$ROLE_RANK ROLE_WORLD_SIZE=$ROLE_WORLD_SIZE ROLE_NAME=$ROLE_NAME" \
     "MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT" \
     "OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}" \
     "DIST_TRAIN_NODE_RANK=$DIST_TRAIN_NODE_RANK" \
     "DIST_TRAIN_NUM_NODES=$DIST_TRAIN_NUM_NODES" \
     "DIST_TRAIN_NODES=$DIST_TRAIN_NODES" \
     "AGENT_STORE=${TORCHELASTIC_USE_AGENT_STORE:-unset}" \
     "RUN_ID=${TORCHELASTIC_RUN_ID:-unset}" \
     "SOURCE=$DIST_TRAIN_RANK_SOURCE"
EOF
}

# layout_errors SOURCE [unbound]: what in $OUT (show.sh from srun -N4 -n8,
# laid out 5,1,1,1 on idle nodes) differs from what each task should get;
# empty when all is right. Bound tasks have one core each here, so one
# thread each; unbound ones follow torchrun's rule.
layout_errors() {
	awk -v source="$1" -v unbound="${2:-}" '
/^TASK / {
	for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	r = v["procid"]; node = (r < 5) ? 0 : r - 4
	want["RANK"] = r; want["LOCAL_RANK"] = v["localid"]
	want["GROUP_RANK"] = v["nodeid"]; want["DIST_TRAIN_NODE_RANK"] = node
	want["WORLD_SIZE"] = 8; want["LOCAL_WORLD_SIZE"] = (node == 0) ? 5 : 1
	want["GROUP_WORLD_SIZE"] = 4; want["DIST_TRAIN_NUM_NODES"] = 4
	want["ROLE_RANK"] = r; want["ROLE_WORLD_SIZE"] = 8
	want["ROLE_NAME"] = "default"; want["MASTER_ADDR"] = "n1"
	want["host"] = "n" (node + 1); want["nodeid"] = node
	want["OMP_NUM_THREADS"] = (unbound && node > 0) ? "unset" : 1
	want["DIST_TRAIN_NODES"] = "n1,n2,n3,n4"
	want["AGENT_STORE"] = "unset"; want["RUN_ID"] = "unset"
	want["SOURCE"] = source
	for (k in want)
		if (v[k] != want[k])
			printf "rank %s: %s=%s, expected %s\n", r, k, v[k], want[k]
	port[v["MASTER_PORT"]] = 1
	if (v["MASTER_PORT"] < 20000 || v["MASTER_PORT"] > 28999)
		printf "rank %s: MASTER_PORT=%s outside 20000-28999\n", r, v["MASTER_PORT"]
}
END { n = 0; for (p in port) n++; if (n != 1) print "ranks disagree on MASTER_PORT" }
' "$OUT"
}

finish() {
	[ "$_tap_failed" = 0 ]
}
