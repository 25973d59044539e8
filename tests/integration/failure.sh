#!/bin/bash
# After the start: one failed task ends the whole step within seconds, and
# srun names it first, once (plugin/watch.c, plugin/report.c). The other
# ranks are held where no failure reaches them (a sleep stands for long
# computation, or a GPU kernel spinning on a dead peer: gloo would notice
# a dead peer's closed socket at its next collective by itself).
. "$(dirname "$0")/lib.sh"

cluster_start
plan 34

# fail.py HOW: one gloo all_reduce across the step, then rank 5 ends HOW
# (exit3, kill) after 2 s while the others sleep for 120 s.
job_file fail.py <<'EOF'
#!/usr/bin/env python3
import os, signal, sys, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
print("RANK", dist.get_rank(), "sum", int(t.item()), flush=True)
if dist.get_rank() == 5:
    time.sleep(2)
    if sys.argv[1] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(3)
time.sleep(int(os.environ.get("HOLD", "120")))
EOF

# end.py: where the morning after starts (plugin/exit_stacks.c,
# helper/cmd_why.c). One gloo all_reduce, then rank 0 is behind, in a
# Python loop of its own, with a SIGTERM handler that writes a checkpoint;
# ranks 1 and 2 wait for it in the next all_reduce; rank 3 sleeps with
# SIGTERM blocked in every thread (stuck where no handler runs), so that
# only SIGKILL ends it.
job_file end.py <<'EOF'
#!/usr/bin/env python3
import datetime, os, signal, sys, time
if os.environ["RANK"] == "3":
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
import torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
dist.all_reduce(torch.ones(1))
step = "%s.%s" % (os.environ["SLURM_JOB_ID"], os.environ["SLURM_STEP_ID"])
def checkpoint(signum, frame):
    with open("ckpt-" + step, "w") as f:
        f.write("saved\n")
    sys.exit(0)
def behind():
    while True:
        time.sleep(0.1)
if dist.get_rank() == 0:
    signal.signal(signal.SIGTERM, checkpoint)
    with open(".bg_step", "w") as f:
        f.write(step + "\n")
    behind()
if dist.get_rank() == 3:
    time.sleep(600)
dist.all_reduce(torch.ones(1))
EOF

# why STEP [--json]: dist-train why as the cluster's user, from $JOBS.
why() {
	timeout -k 5 60 "$DT_CLUSTER" run "$DT_CLUSTER_DIR/bin/dist-train" why "$@" > "$JOBS/.why" 2>&1
}
show_why() { diag "$(head -c 3000 "$JOBS/.why")"; show_output; }
# why_says STEP: what end.py's step left, read back after the job: rank 0
# first, in its own frame, then 1-2 in the collective, 3 unanswered.
why_says() {
	why "$1" &&
	grep -qE "^  rank 0: .*/end\.py:[0-9]+ in behind$" "$JOBS/.why" &&
	grep -qE "^  ranks 1-2: .*/torch/distributed/.*:[0-9]+ in [a-z_]+ \(waiting in a collective\)$" "$JOBS/.why" &&
	grep -q "^  rank 3: no stacks, ended by signal 9 (SIGKILL) before it could write them" "$JOBS/.why" &&
	grep -q "^Behind: rank 0, " "$JOBS/.why" &&
	[ "$(grep -n "^  rank 0:" "$JOBS/.why" | cut -d: -f1)" -lt "$(grep -n "^  ranks 1-2:" "$JOBS/.why" | cut -d: -f1)" ]
}
# saved STEP: the record lists the four ranks' stacks files.
saved_listed() {
	record "$1" | python3 -c "
import json, sys
r = json.load(sys.stdin)
want = ['dist-train-$1.stacks-rank-%d' % i for i in range(4)]
assert r['saved'] == want, r.get('saved')
"
}

# run_step SECONDS_VAR ARGS...: srun ARGS as the cluster's user; the
# seconds it took in the named variable (awk: not every stack has bc).
run_step() {
	local var=$1 start
	shift
	start=$(date +%s.%N)
	job "$@"
	local rc=$?
	printf -v "$var" '%s' "$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
	return $rc
}

# bg_step ARGS...: srun ARGS in the background as the cluster's user
# (runner: its pid), back once its step runs (step_now: JOB.STEP, as its
# rank 0 wrote it: squeue may still list an earlier step).
make_hold_script

under() { awk -v t="$1" -v n="$2" 'BEGIN { exit !(t < n) }'; }
at_least() { awk -v t="$1" -v n="$2" 'BEGIN { exit !(t >= n) }'; }

# The first line of stderr that reports an error, and the cause lines.
first_error() { grep -m1 -E 'error' "$ERR"; }
# srun's first line of dist-train's (Slurm's own may come before it).
first_cause() { grep -m1 'srun: error: dist-train: ' "$ERR"; }
causes() { grep -c 'dist-train: rank [0-9]* failed first' "$ERR"; }
record() { cat "$JOBS/dist-train-$1.json" 2>/dev/null; }
last_step() { grep -o 'dist-train-[0-9]*\.[0-9]*\.json' "$ERR" | tail -1 | sed 's/dist-train-//; s/\.json//'; }

# after_failure: seconds from the failure srun named ("N s after the
# start") to the step's end ($took); the start itself (8 ranks importing
# torch) took a minute on a busy 2-core machine.
after_failure() {
	local at
	at=$(grep -o -m1 '[0-9.]* s after the start' "$ERR" | cut -d' ' -f1)
	awk -v t="$took" -v a="${at:-0}" 'BEGIN { printf "%.1f", t - a }'
}

rm -f "$JOBS"/dist-train-*.json "$JOBS"/dist-train-*.stacks-rank-*
run_step took srun -N4 -n8 --dist-train python3 ./fail.py exit3
diag "rank 5 exited 3: the step ended after ${took} s, $(after_failure) s after the failure (rank 5 exits about 2 s after the all_reduce, the others would sleep 120 s)"
check "rank 5 exits 3: the step ends long before the others' 120 s ($(after_failure) s after the failure)" \
	under "$(after_failure)" 30 || show_output
check "... the first error line names rank 5, its node, exit code 3, and 7 ranks stopped" \
	eval 'first_error | grep -q "dist-train: rank 5 failed first, on n[0-9]* (local rank [0-9]*): exit code 3, [0-9.]* s after the start; stopping the 7 other ranks still running"' || show_output
check "... once" test "$(causes)" = 1 || show_output
step=$(last_step)
check "... and dist-train-$step.json records it: rank 5 first, 7 stopped, every exit" \
	eval 'record "$step" | python3 -c "
import json, sys
r = json.load(sys.stdin)
assert r[\"first_failure\"][\"rank\"] == 5 and r[\"first_failure\"][\"exit_code\"] == 3, r
assert r[\"stopped\"] == 7 and r[\"exits_heard\"] == 8, r
" && record_valid "$JOBS/dist-train-$step.json"' || show_output
cause=$(first_error | sed 's/.*dist-train: //')
check "... dist-train why $step agrees with srun's line, and shows the 7 others where fail-fast's SIGTERM found them" \
	eval 'why "$step" && grep -qxF "dist-train: step $step: $cause" "$JOBS/.why" &&
	      grep -qE "^  ranks 0-4,6-7: .*/fail\.py:[0-9]+ in <module>$" "$JOBS/.why"' || show_why

run_step took srun -N4 -n8 --dist-train python3 ./fail.py kill
check "rank 5 killed by SIGKILL: the step ends ($(after_failure) s after the failure), naming the signal" \
	eval 'under "$(after_failure)" 30 &&
	      first_error | grep -q "dist-train: rank 5 failed first, on n[0-9]* (local rank [0-9]*): signal 9 (SIGKILL), "' || show_output
step=$(last_step)
check "... dist-train why $step names rank 5 as killed before it could write its stacks" \
	eval 'why "$step" && grep -q "^  rank 5: no stacks, ended by signal 9 (SIGKILL) before it could write them" "$JOBS/.why"' || show_why

# A collective that timed out: rank 0 is behind (a Python loop), ranks
# 1-3 give up waiting in their all_reduce after 5 s. The first to fail
# only waited: srun's first line says so, and names rank 0, where it was,
# from the stacks saved as the step ended. The start has a minute, as a
# real job's would: a start bounded by 5 s failed under CI's load, where
# rank 0 took 20 s to import torch (the timeout bounds the wait for rank
# 0's store, with torch's store as with the tree); the 5 s is the group's.
job_file timeout.py <<'EOF'
#!/usr/bin/env python3
import datetime, time
import torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
dist.all_reduce(torch.ones(1))
group = dist.new_group(timeout=datetime.timedelta(seconds=5))
def behind():
    while True:
        time.sleep(0.1)
if dist.get_rank() == 0:
    behind()
dist.all_reduce(torch.ones(1), group=group)
EOF
rm -f "$JOBS"/dist-train-*.stacks-rank-*
run_step took srun -N2 -n4 --dist-train python3 ./timeout.py
diag "$(first_cause)"
check "a gloo all_reduce that timed out: srun's first line names the first rank to give up, and says it only waited" \
	eval 'first_cause | grep -q "dist-train: rank [1-3] failed first, on n[0-9]* (local rank [0-9]*): exit code 1, [0-9.]* s after the start when its all_reduce timed out, waiting for "' || show_output
step=$(last_step)
check "... and names rank 0 as behind, where it was, in that line" \
	eval 'first_cause | grep -qE "timed out, waiting for rank 0, which was behind: at .*/timeout\.py:[0-9]+ in behind, not in the collective; stopping the [0-9]+ other ranks? still running" &&
	      [ "$(grep -c "was behind" "$ERR")" = 1 ]' || show_output
check "... dist-train why $step names rank 0 first, and the others in the collective" \
	eval 'why "$step" && grep -q "^Behind: rank 0, " "$JOBS/.why" &&
	      grep -qE "^  ranks? [1-3](-[23]|,[23])*: .*/torch/distributed/.*:[0-9]+ in [a-z_]+ \(waiting in a collective\)$" "$JOBS/.why"' || show_why

# The out-of-memory killer: the plugin reads the task's memory cgroup,
# which only Slurm's task/cgroup makes; this cluster runs task/none and
# proctrack/linuxproc, so an OOM kill would show as signal 9 here, and is
# not tested (a skip would fail tests/run.sh, which allows none).
diag "not tested here: an OOM kill named as such (the test cluster confines no memory: task/none, no cgroup; it shows as signal 9 (SIGKILL))"

# Opted out: the others run on, as without the plugin; the cause is still
# named once, at the end, and record=off writes no record.
rm -f "$JOBS"/dist-train-*.json
run_step took srun -N4 -n8 --dist-train=fail-fast=no,record=off env HOLD=8 \
	python3 ./fail.py exit3
check "fail-fast=no: the others run to their end (${took} s, they sleep 8 s)" \
	eval 'at_least "$took" 8 && ! grep -q "stopping the" "$ERR"' || show_output
check "... the cause is still named once, at the end" \
	eval 'grep -q "dist-train: rank 5 failed first, .*exit code 3, .*1 task failed in all" "$ERR" && test "$(causes)" = 1' || show_output
check "... and record=off writes no record" \
	eval '! ls "$JOBS"/dist-train-*.json 2>/dev/null | grep -q .' || show_output

# The site turns it off for everyone; a user turns it back on. (exec: a
# shell that SIGTERM ends before its sleep is found would leave the sleep
# to this cluster's proctrack/linuxproc, which finds a task's processes
# through their parents, and srun would wait for it.)
set_plugin_args fail-fast=no
run_step took srun -N2 -n2 --dist-train sh -c '[ "$RANK" = 1 ] && exit 4; exec sleep 6'
check "site fail-fast=no: the other task runs on (${took} s)" \
	eval 'at_least "$took" 6' || show_output
run_step took srun -N2 -n2 --dist-train=fail-fast sh -c '[ "$RANK" = 1 ] && exit 4; exec sleep 60'
check "... --dist-train=fail-fast turns it back on (${took} s)" \
	eval 'under "$took" 30 && grep -q "rank 1 failed first" "$ERR"' || show_output
set_plugin_args

# The node's reporter (plugin/exit_reporter.c): one process a node, made
# as its first task ends, tells srun how each task ended, as the job's
# user. It holds none of slurmstepd's descriptors: here rank 1 reads its
# stdin, which srun closes 4 s in, well after rank 0 ended; a copy of
# rank 1's stdin pipe held by the reporter would keep it reading for ever.
job_file reporter.sh <<'EOF2'
#!/bin/sh
if [ "$SLURM_PROCID" = 0 ]; then
	echo "$SLURM_JOB_ID.$SLURM_STEP_ID" > .bg_step
	exit 0
fi
exec cat
EOF2
rm -f "$JOBS/.bg_step"
wait_jobs_completed
{ sleep 4; echo "the end of stdin"; } |
	timeout -k 10 60 "$DT_CLUSTER" run srun -N1 -n2 --dist-train ./reporter.sh > "$OUT" 2> "$ERR" &
runner=$!
reporter= reporter_fds=
for _ in $(seq 30); do
	step_now=$(cat "$JOBS/.bg_step" 2>/dev/null)
	for pid in $(pgrep -x dist-train-exit); do
		# procps 4 pads ppid= with blanks, which no pid list takes.
		ppid=$(ps -o ppid= -p "$pid" | tr -d ' ')
		ps -o args= -p "${ppid:-0}" | grep -qF "[$step_now]" && reporter=$pid
	done
	[ -n "$step_now" ] && [ -n "$reporter" ] && break
	sleep 0.1
done
[ -n "$reporter" ] && reporter_fds=$(find /proc/$reporter/fd -mindepth 1 -printf '%f %l\n' 2>/dev/null | sort)
reporter_user=$(ps -o user= -p "${reporter:-0}" | tr -d ' ')
diag "the reporter of step $step_now: ${reporter:-none}, as $reporter_user, descriptors: $reporter_fds"
check "a node's tasks' ends go to srun through one reporter, as the job's user, which holds /dev/null and its socket alone" \
	eval '[ -n "$reporter" ] && [ "$reporter_user" = "${DT_CLUSTER_USER:-dttest}" ] &&
	      [ "$(echo "$reporter_fds" | grep -c "^[0-2] /dev/null$")" = 3 ] &&
	      echo "$reporter_fds" | grep -q "^3 socket:" && [ "$(echo "$reporter_fds" | wc -l)" = 4 ]' || show_output
wait $runner
check "... so the node's other task read its stdin to the end, and the step ended" \
	eval 'grep -q "^the end of stdin$" "$OUT"' || show_output
check "... and the reporter went with the step" eval '[ -n "$reporter" ] && ! kill -0 "$reporter" 2>/dev/null'

# Slurm ends the job (here scancel; a time limit or preemption alike):
# its tasks' ends are no task's failure.
BG_START=90 bg_step -N2 -n4 --dist-train python3 ./end.py
sleep 1
SLURM_CONF=$DT_CLUSTER_DIR/etc/slurm.conf scancel "${step_now%.*}"
wait $runner
check "scancel of the job: srun says Slurm stopped it, blames no task, records \"cancelled\"" \
	eval 'grep -q "dist-train: the step was stopped by scancel, not by a task" "$ERR" &&
	      ! grep -q "failed first" "$ERR" &&
	      grep -q "\"ended\": \"cancelled\"" "$JOBS/dist-train-$step_now.json" &&
	      record_valid "$JOBS/dist-train-$step_now.json"' || show_output
check "... after the job, dist-train why $step_now: rank 0 behind in its own frame, 1-2 in the collective, 3 killed unanswered; the record lists the stacks, and srun names rank 0 as behind and points to why" \
	eval 'why_says "$step_now" && saved_listed "$step_now" &&
	      grep -q "dist-train: rank 0 was behind: rank 0 was at .*/end\.py:[0-9]* in behind, not in the collective the others waited in; see each rank.s stacks with .dist-train why $step_now.$" "$ERR" &&
	      grep -q "what happened to each task is in .*; .dist-train why $step_now. shows where each rank stood" "$ERR"' || show_why

# Its time limit: Slurm ends the job (slurmctld looks every 30 s or so).
BG_START=90 BG_TIMEOUT=240 bg_step -N2 -n4 -t 1 --dist-train python3 ./end.py
wait $runner
check "the job's time limit: srun says so, blames no task, records \"timeout\"" \
	eval 'grep -q "dist-train: the step was stopped by its time limit, not by a task" "$ERR" &&
	      ! grep -q "failed first" "$ERR" &&
	      grep -q "\"ended\": \"timeout\"" "$JOBS/dist-train-$step_now.json" &&
	      record_valid "$JOBS/dist-train-$step_now.json"' || show_output
why "$step_now"
diag "dist-train why $step_now: $(cat "$JOBS/.why")"
check "... after the job, dist-train why $step_now: rank 0 behind in its own frame, 1-2 in the collective, 3 killed unanswered" \
	eval 'why_says "$step_now" && saved_listed "$step_now"' || show_why
# (How it ended varies: Slurm may send SIGTERM again while Python, its
# handler done, is finishing, when Python's own handlers are gone.)
check "... rank 0's own SIGTERM handler still wrote its checkpoint, and its stacks were saved before it" \
	eval 'grep -qx saved "$JOBS/ckpt-$step_now" &&
	      grep -q "in behind$" "$JOBS/dist-train-$step_now.stacks-rank-0" &&
	      grep -q "^dist-train: rank 0 on n[0-9]* ended by " "$JOBS/dist-train-$step_now.stacks-rank-0"' || show_why
why "$step_now" --json
check "... and why --json says the same" \
	eval 'python3 -c "
import json, sys
w = json.load(open(sys.argv[1]))
assert w[\"ended\"] == \"timeout\" and w[\"behind\"] == \"0\" and w[\"unanswered\"] == \"3\", w
assert [g[\"ranks\"] for g in w[\"groups\"]] == [\"0\", \"1-2\"], w
assert w[\"groups\"][1][\"in_collective\"] and not w[\"groups\"][0][\"in_collective\"], w
" "$JOBS/.why"' || show_why

# Preemption: a job of the test cluster's urgent partition (PriorityTier
# 10, PreemptMode=CANCEL) needs the nodes of a running step's job, and
# slurmctld ends that job for it.
bg_step -N2 -n4 --exclusive -w n1,n2 --dist-train ./hold.sh 120
sleep 1
timeout 30 "$DT_CLUSTER" run sbatch -p urgent -N2 --exclusive -w n1,n2 -o /dev/null --wrap true > /dev/null
wait $runner
check "preemption: srun says so, blames no task, records \"preempted\"" \
	eval 'grep -q "dist-train: the step was stopped by preemption, not by a task" "$ERR" &&
	      ! grep -q "failed first" "$ERR" &&
	      grep -q "\"ended\": \"preempted\"" "$JOBS/dist-train-$step_now.json" &&
	      record_valid "$JOBS/dist-train-$step_now.json"' || show_output

# A requeued job keeps its id: its steps get new ports (and, as every
# srun, a new secret), and the same ranks for the same layout. Its first
# run holds until it is requeued; Slurm starts it again once a launch
# credential's life has passed (AuthInfo's cred_expire: 30 s here).
job_file requeue.sbatch <<'EOF'
#!/bin/sh
#SBATCH -N2 -n4 --requeue --open-mode=append
run=${SLURM_RESTART_COUNT:-0}
srun -N2 -n4 --dist-train sh -c 'echo "RUN $1 MAP $RANK $GROUP_RANK $LOCAL_RANK PORT $MASTER_PORT"; [ "$1" = 0 ] && exec sleep 300; true' sh "$run"
EOF
rm -f "$JOBS/requeue.out"
requeued=$(timeout 30 "$DT_CLUSTER" run sbatch --parsable -o requeue.out requeue.sbatch)
runs() { grep -c "^RUN $1 " "$JOBS/requeue.out" 2>/dev/null; }
for _ in $(seq 300); do [ "$(runs 0)" = 4 ] && break; sleep 0.2; done
SLURM_CONF=$DT_CLUSTER_DIR/etc/slurm.conf scontrol requeue "$requeued"
for _ in $(seq 300); do [ "$(runs 1)" = 4 ] && break; sleep 1; done
SLURM_CONF=$DT_CLUSTER_DIR/etc/slurm.conf scancel "$requeued"
map() { grep "^RUN $1 " "$JOBS/requeue.out" | awk '{ print $4, $5, $6 }' | sort; }
port() { grep "^RUN $1 " "$JOBS/requeue.out" | awk '{ print $8 }' | sort -u; }
diag "first run: port $(port 0); requeued: port $(port 1)"
check "sbatch --requeue, requeued: the first run's step says a requeue stopped it" \
	eval 'grep -q "dist-train: the step was stopped by a requeue" "$JOBS/requeue.out" &&
	      ! grep -q "failed first" "$JOBS/requeue.out"' || diag "$(cat "$JOBS/requeue.out")"
check "... the requeued run (SLURM_RESTART_COUNT=1) has the same ranks, node ranks and local ranks" \
	eval '[ "$(runs 1)" = 4 ] && [ "$(map 0)" = "$(map 1)" ]' || diag "$(cat "$JOBS/requeue.out")"
check "... and another port than the first run's" \
	eval '[ "$(port 0 | wc -l)" = 1 ] && [ "$(port 1 | wc -l)" = 1 ] && [ "$(port 0)" != "$(port 1)" ]' || diag "$(cat "$JOBS/requeue.out")"

# A record folder the user names.
mkdir -p "$JOBS/records" && chown "$(stat -c %u "$JOBS")" "$JOBS/records"
job srun -N2 -n2 --dist-train=record=records sh -c '[ "$RANK" = 0 ] && exit 5; true'
check "record=DIR: the record is written there" \
	eval 'ls "$JOBS"/records/dist-train-*.json >/dev/null 2>&1' || show_output

# Hostile neighbours: anyone may connect to srun's ports (here found with
# ss); records not signed with the step's secret change nothing.
job_file forge.py <<'EOF'
#!/usr/bin/env python3
import socket, sys
step = sys.argv[1]
forged = ["DTX1 %s 1 0 1 n2 768 0 10 10 %s\n" % (step, "0" * 64),
          "garbage\n", "x" * 5000]
for port, line in [(int(p), l) for p in sys.argv[2:] for l in forged]:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(line.encode())
        s.close()
    except OSError:
        pass
print("FORGED")
EOF
bg_step -N2 -n2 --dist-train ./hold.sh 6
# Every socket srun listens on (Slurm's own are ephemeral too).
srun_pid=$(pgrep -u "$(id -u dttest)" -x srun | head -1)
port=$(ss -H -ltnp 2>/dev/null |
	awk -v p="pid=$srun_pid," 'index($0, p) { n = split($4, a, ":"); print a[n] }')
forged=$(python3 "$JOBS/forge.py" "$step_now" $port 2>&1)
wait $runner
rc=$?
check "forged records sent to srun's port ($forged): the step runs to its end, nothing stopped" \
	eval '[ $rc = 0 ] && [ "$forged" = FORGED ] && ! grep -q "failed first" "$ERR"' || show_output

# A flood of silent connections to srun's watch port, by another user,
# held open while a rank fails: srun hears every connection at once (each
# waits in a slot of its own), so the failed rank's record still stops the
# step within seconds, and names it.
OTHER=${DT_TEST_OTHER_USER:-dtother}
id "$OTHER" >/dev/null 2>&1 || useradd --no-create-home --shell /bin/sh "$OTHER"
job_file flood.py <<'EOF'
#!/usr/bin/env python3
import socket, sys, time
port, count, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held = []
for _ in range(count):
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
    except OSError:
        time.sleep(0.01)
print("FLOOD", len(held), flush=True)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    # Each silent one is closed by srun after its wait: open it again.
    for i, s in enumerate(held):
        try:
            s.setblocking(False)
            if s.recv(1) == b"":
                raise OSError
        except BlockingIOError:
            continue
        except OSError:
            try:
                held[i] = socket.create_connection(("127.0.0.1", port), timeout=2)
            except OSError:
                pass
    try:
        open(stop).close()
        break
    except OSError:
        time.sleep(0.05)
EOF
job_file late_fail.sh <<'EOF'
#!/bin/sh
# Rank 0 says the step runs, rank 1 fails once the flood is on.
[ "$SLURM_PROCID" = 0 ] && touch .late_started
if [ "$SLURM_PROCID" = 1 ]; then
	while [ ! -e .flooding ]; do sleep 0.1; done
	sleep 1
	exit 3
fi
exec sleep 90
EOF
rm -f "$JOBS/.late_started" "$JOBS/.flooding" "$JOBS/.flood_stop"
start=$(date +%s)
job_bg_out=$JOBS/.flood_out
wait_jobs_completed
timeout -k 10 150 "$DT_CLUSTER" run srun -N2 -n2 --dist-train ./late_fail.sh > "$OUT" 2> "$ERR" &
runner=$!
for _ in $(seq 300); do [ -e "$JOBS/.late_started" ] && break; sleep 0.1; done
port=$(srun_watch_port)
runuser -u "$OTHER" -- python3 "$JOBS/flood.py" "${port:-0}" 300 "$JOBS/.flood_stop" > "$job_bg_out" 2>&1 &
flooder=$!
for _ in $(seq 300); do grep -q FLOOD "$job_bg_out" 2>/dev/null && break; sleep 0.1; done
touch "$JOBS/.flooding"
wait $runner
took=$(( $(date +%s) - start ))
touch "$JOBS/.flood_stop"
wait $flooder
diag "flood of srun's port ${port:-(not found)}: $(cat "$job_bg_out") connections held; the step took $took s"
check "a flood of silent connections to srun's watch port: rank 1's failure still stops the step ($took s) and is named" \
	eval 'grep -q "^FLOOD [1-9]" "$job_bg_out" && [ $took -lt 60 ] && grep -q "rank 1 failed first" "$ERR"' || show_output
rm -f "$JOBS/.late_started" "$JOBS/.flooding" "$JOBS/.flood_stop"

# NCCL's flight recorder, set up by the Python hook for a collective that
# times out: dumps go to the step's record folder; the user's settings win.
show_fr='import os; print("FR", *[os.environ.get(n, "-") for n in ("TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_FR_DUMP_TEMP_FILE")])'
job srun -N1 -n1 --dist-train python3 -c "$show_fr"
check "the flight recorder's variables point at the record folder" \
	grep -qE "^FR 2000 2000 1 $JOBS/dist-train-[0-9]+\.[0-9]+\.nccl-rank-$" "$OUT" || show_output
job env TORCH_FR_BUFFER_SIZE=5 TORCH_NCCL_DUMP_ON_TIMEOUT=0 srun -N1 -n1 \
	--dist-train=record=off python3 -c "$show_fr"
check "... the user's own win, and record=off sets no dump file" \
	grep -qx "FR - 5 0 -" "$OUT" || show_output

check "no node is drained" no_drained_node
finish
