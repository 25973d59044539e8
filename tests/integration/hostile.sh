#!/bin/bash
# dist_train(8), SECURITY: the start barrier on a shared cluster. Another
# user, who can reach rank 0's port like anyone, attacks it while two of
# the step's nodes are held back: forged hellos for the missing ranks (in
# both protocols), a duplicate of a rank that arrived, garbage, lines too
# long, and a pile of idle connections larger than the world. The step
# must still start every rank with the right RANK and exit 0. Also: the
# secret never reaches the program, a world larger than the soft open-files
# limit, and no helper left after scancel in the middle of the bootstrap.
. "$(dirname "$0")/lib.sh"

cluster_start
plan 25

OTHER=${DT_TEST_OTHER_USER:-dtother}
id "$OTHER" >/dev/null 2>&1 || useradd --no-create-home --shell /bin/sh "$OTHER" ||
	{ echo "Bail out! cannot create the user $OTHER"; exit 1; }
# Where the attacker keeps its notes: its own folder.
ATTACK=$DT_CLUSTER_DIR/attacker
rm -rf "$ATTACK" && install -d -o "$OTHER" -m 0755 "$ATTACK"

make_show_script
# The helper, held back on the nodes named in DT_TEST_SLOW.
admin_file slow-helper <<EOF
#!/bin/sh
case " \${DT_TEST_SLOW:-} " in *" \$(hostname) "*) sleep "\${DT_TEST_DELAY:-0}" ;; esac
exec $DT_CLUSTER_DIR/bin/dist-train "\$@"
EOF
# The helper, with the hard open-files limit DT_TEST_NOFILE, as on a node
# whose slurmd has a low LimitNOFILE.
admin_file limited-helper <<EOF
#!/bin/sh
ulimit -Sn "\$DT_TEST_NOFILE" && ulimit -Hn "\$DT_TEST_NOFILE" || exit 99
exec $DT_CLUSTER_DIR/bin/dist-train "\$@"
EOF

# The attacker: finds the new listening port in the site's range (as any
# user can, from /proc/net/tcp), then attacks it until told to stop.
job_file port_watch.py <<'EOF'
"""Rank 0's new listening port in the site's range, found as any user can
(/proc/net/tcp): the attacker's and the squatter's first step."""
import os, sys, time

def listening():
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(name).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A":
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports

def new_port(before_file, stop_file, pause):
    """With "snapshot" last on the command line: note the ports listening
    now, and exit. Else: the first port listening since, or None once
    STOP_FILE exists."""
    if sys.argv[-1] == "snapshot":
        open(before_file, "w").write(" ".join(map(str, listening())))
        sys.exit(0)
    before = set(map(int, open(before_file).read().split()))
    while not os.path.exists(stop_file):
        new = [p for p in listening() - before if 20000 <= p <= 28999]
        if new:
            return new[0]
        time.sleep(pause)
    return None
EOF
job_file attacker.py <<'EOF'
import os, random, socket, sys, time
from port_watch import new_port

host, before_file, stop_file = sys.argv[1], sys.argv[2], sys.argv[3]
port = new_port(before_file, stop_file, 0.02)
if port is None:
    print("ATTACK found no port", flush=True)
    sys.exit(1)
print(f"ATTACK port {port}", flush=True)
stats = dict(idle=0, forged=0, old=0, duplicate=0, garbage=0)
held = []

def attack(kind, payload):
    try:
        s = socket.create_connection((host, port), timeout=2)
    except OSError:
        return
    try:
        s.settimeout(0.5)
        try:
            s.recv(256)                 # rank 0's challenge, ignored
        except OSError:
            pass
        if payload is not None:
            s.sendall(payload)
        stats[kind] += 1
    except OSError:
        pass
    held.append(s)                      # and hold on to it

def forged(rank, host="n4"):
    return (f"DTB2 {rank} 8 {host} 1 {os.urandom(16).hex()} "
            f"{os.urandom(32).hex()}\n").encode()

for _ in range(300):                    # idle: more than the world
    attack("idle", None)
while not os.path.exists(stop_file):
    for rank in range(1, 8):
        attack("forged", forged(rank))
        attack("old", f"DTB1 {rank} 8 n4 1\n".encode())
    attack("duplicate", forged(1, "n1"))
    attack("garbage", os.urandom(random.randint(1, 3000)))
    attack("garbage", b"x" * 20000)
    while len(held) > 700:              # stay within our own fd limit
        held.pop(random.randrange(len(held))).close()
    time.sleep(0.05)
print("ATTACK " + " ".join(f"{k}={v}" for k, v in stats.items()), flush=True)
EOF

# attacked_step NAME SRUN-ARGS...: the step, with n3 and n4 10 s late and
# the other user attacking rank 0 from the start.
attacked_step() {
	local name=$1 attack_log=$ATTACK/attack.log attacker rc
	shift
	rm -f "$ATTACK/stop" "$attack_log"
	runuser -u "$OTHER" -- python3 "$JOBS/attacker.py" 127.0.1.1 "$ATTACK/listening" "$ATTACK/stop" snapshot
	runuser -u "$OTHER" -- python3 "$JOBS/attacker.py" 127.0.1.1 "$ATTACK/listening" "$ATTACK/stop" > "$attack_log" 2>&1 &
	attacker=$!
	job env DT_TEST_SLOW="n3 n4" DT_TEST_DELAY=10 DT_TEST_NOFILE="${NOFILE:-1024}" \
		srun -N4 -n8 "$@" ./show.sh
	rc=$?
	touch "$ATTACK/stop"
	wait $attacker
	check "$name: the attacked step exits 0" test $rc = 0 || { show_output; diag "$(cat "$attack_log")"; }
	check "$name: ... every rank started with the right RANK" \
		test -z "$(layout_errors "$SOURCE")" -a "$(count_lines '^TASK ')" = 8 || { diag "$(layout_errors "$SOURCE")"; show_output; }
	check "$name: ... while forged, duplicate and old hellos, garbage and 300 idle connections came" \
		awk '/^ATTACK idle=/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); n[kv[1]] = kv[2] }
			ok = n["idle"] >= 300 && n["forged"] > 0 && n["old"] > 0 && n["duplicate"] > 0 && n["garbage"] > 0 }
			END { exit !ok }' "$attack_log" || diag "$(cat "$attack_log")"
}

test_plugin late_node
if slurm_has_pmix; then
	SOURCE=pmix attacked_step "PMIx" --mpi=pmix --dist-train
else
	for i in 1 2 3; do pmix_check "PMIx: attacked step, part $i" false; done
fi
SOURCE=slurm attacked_step "no PMIx, check" --mpi=none --dist-train=check
# With few descriptors to spare, rank 0 takes strangers in smaller
# batches than its bound on them: the step's leaders still get through.
test_plugin late_node helper="$ADMIN/limited-helper"
NOFILE=200 SOURCE=slurm attacked_step "hard open-files limit 200" --mpi=none --dist-train=check
set_plugin_args

# Too few to hold the step and a floor of strangers: refused at once.
set_plugin_args helper="$ADMIN/limited-helper"
start=$(date +%s)
job env DT_TEST_NOFILE=64 srun -N4 -n8 --mpi=none --dist-train=check,timeout=60 ./show.sh
rc=$? took=$(( $(date +%s) - start ))
check "a hard open-files limit of 64 on rank 0's node fails the step in ${took} s, no program run" \
	test $rc != 0 -a "$took" -lt 45 -a "$(count_lines '^TASK ')" = 0 || show_output
check "... and says why, and what to raise" \
	grep -q "dist-train: error: on n1: rank 0 needs a connection from each of the step's nodes and its own node's ranks ([0-9]*), room for 64 connections not yet proven and 64 other files, but this node lets a process open only 64 files (ulimit -Hn): ask your administrator to raise the hard limit (slurmd's LimitNOFILE) to at least [0-9]*$" "$ERR" || show_output
set_plugin_args

# The secret is the step's business, never the program's.
job srun -N2 -n2 --mpi=none --dist-train sh -c 'echo "SECRET=${SLURM_DIST_TRAIN_STEP_SECRET:-${DIST_TRAIN_STEP_SECRET:-none}}"'
check "the program does not see the step's secret (no helper)" \
	test "$(count_lines '^SECRET=none$')" = 2 || show_output
job srun -N2 -n2 --mpi=none --dist-train=check sh -c 'echo "SECRET=${SLURM_DIST_TRAIN_STEP_SECRET:-${DIST_TRAIN_STEP_SECRET:-none}}"'
check "... nor with the helper" \
	test "$(count_lines '^SECRET=none$')" = 2 || show_output
job srun -N2 -n2 --mpi=none sh -c 'echo "SECRET=${SLURM_DIST_TRAIN_STEP_SECRET:-${DIST_TRAIN_STEP_SECRET:-none}}"'
check "... and a step without --dist-train gets none" \
	test "$(count_lines '^SECRET=none$')" = 2 || show_output
# A node whose plugstack.conf is not srun's does not activate: here srun
# reads one with default=on (through a slurm.conf naming it), the nodes
# theirs, without. srun passes the step's secret (its verbose line shows it
# active); the program there still never sees it.
sed 's/$/ default=on verbose=yes/' "$DT_CLUSTER_DIR/etc/plugstack.conf" > "$JOBS/plugstack-on.conf"
sed "s|^PlugStackConfig=.*|PlugStackConfig=$JOBS/plugstack-on.conf|" "$DT_CLUSTER_DIR/etc/slurm.conf" > "$JOBS/slurm-on.conf"
chmod 0644 "$JOBS/plugstack-on.conf" "$JOBS/slurm-on.conf"
job env SLURM_CONF="$JOBS/slurm-on.conf" srun -N2 -n2 --mpi=none sh -c 'echo "SECRET=${SLURM_DIST_TRAIN_STEP_SECRET:-${DIST_TRAIN_STEP_SECRET:-none}} STEP=${DIST_TRAIN_STEP:-none}"'
check "... nor on a node whose plugstack.conf is not srun's (it does not activate)" \
	eval '[ "$(count_lines "^SECRET=none STEP=none$")" = 2 ] && grep -q "^srun: dist-train: took .* in srun" "$ERR"' || show_output

# Rank 0 holds a connection per rank: more ranks than the soft limit.
job bash -c 'ulimit -Sn 40 && srun -N4 -n48 --overcommit --mpi=none --dist-train=check sh -c "[ \$RANK = 0 ] && ulimit -Sn; true"'
check "a world of 48 ranks with a soft limit of 40 open files starts" \
	test $? = 0 -a "$(count_lines '^40$')" = 1 || show_output

# scancel in the middle of the bootstrap leaves no helper behind.
set_plugin_args helper="$ADMIN/slow-helper"
job sbatch -N4 -n8 --wrap "DT_TEST_SLOW=n4 DT_TEST_DELAY=120 srun --mpi=none --dist-train=check,timeout=100 true"
jobid=$(sed -n 's/^Submitted batch job //p' "$OUT")
for _ in $(seq 1 60); do
	[ "$(pgrep -fc 'dist-train bootstrap')" -ge 3 ] && break
	sleep 0.5
done
waiting=$(pgrep -fc 'dist-train bootstrap')
"$DT_CLUSTER" run scancel "$jobid"
for _ in $(seq 1 20); do
	[ "$(pgrep -fc 'dist-train bootstrap')" = 0 ] && break
	sleep 0.5
done
left=$(pgrep -fc 'dist-train bootstrap')
check "scancel during the bootstrap ($waiting helpers waiting) leaves no helper" \
	test "$waiting" -ge 3 -a "$left" = 0 || diag "$(pgrep -fa 'dist-train bootstrap')"
pkill -f 'sleep 120' 2>/dev/null
set_plugin_args

# Rank 0's store port, from the barrier to the store (common/store_port.h):
# the other user watches for rank 0's new listening port and tries to bind
# it in a tight loop until the ranks have used the store (rank 0 waits for
# its first 300 tries, then writes .squat-done, its store still up). torch 2.1 and later take rank
# 0's socket: the squatter never binds it, nor accepts a connection. 1.13
# and 2.0 cannot: the port is free for the instant between the socket's
# close and the store's bind, which the squatter may win; the step then
# fails in torch's words naming the port.
job_file squat_job.py <<'EOF2'
import os, pathlib, sys, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
# The store stays up until the squatter has tried its port a while, however
# slowly it started (a loaded machine).
if dist.get_rank() == 0:
    deadline = time.monotonic() + 30
    while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
t = torch.tensor([1.0])
dist.all_reduce(t)
if dist.get_rank() == 0:
    pathlib.Path(".squat-done").touch()
dist.barrier()
print(f"SQUATTED rank={dist.get_rank()} sum={int(t.item())}", flush=True)
dist.destroy_process_group()
EOF2
job_file squatter.py <<'EOF2'
import os, socket, sys, time

from port_watch import new_port

before_file, stop_file, done_file = sys.argv[1], sys.argv[2], sys.argv[3]
tried_file = before_file + ".tried"
port = new_port(before_file, stop_file, 0.002)
print(f"SQUAT port {port}", flush=True)
tries = binds = accepted = 0
while port is not None and not os.path.exists(stop_file) \
        and not os.path.exists(done_file):
    for family, address, share in ((socket.AF_INET6, "::", 0),
                                   (socket.AF_INET, "0.0.0.0", 0),
                                   (socket.AF_INET6, "::", 1)):
        s = socket.socket(family)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, share)
        tries += 1
        if tries == 300:
            open(tried_file, "w").close()
        try:
            s.bind((address, port))
            s.listen(1024)
        except OSError:
            s.close()
            continue
        binds += 1
        s.settimeout(0.2)
        end = time.monotonic() + 2
        while time.monotonic() < end:
            try:
                conn, _ = s.accept()
                accepted += 1
                conn.close()
            except OSError:
                pass
        s.close()
print(f"SQUAT tries={tries} binds={binds} accepted={accepted}", flush=True)
EOF2
torch_takes_socket=$(python3 -c 'import re, torch; m = re.match(r"(\d+)\.(\d+)", torch.__version__); print(int((int(m[1]), int(m[2])) >= (2, 1)))' 2>/dev/null)
squatted_step() { # NAME SRUN-ARGS...
	local name=$1 log=$ATTACK/squat.log squatter rc
	shift
	rm -f "$ATTACK/stop" "$log" "$JOBS/.squat-done" "$ATTACK/listening.tried"
	runuser -u "$OTHER" -- python3 "$JOBS/squatter.py" "$ATTACK/listening" "$ATTACK/stop" "$JOBS/.squat-done" snapshot
	runuser -u "$OTHER" -- python3 "$JOBS/squatter.py" "$ATTACK/listening" "$ATTACK/stop" "$JOBS/.squat-done" > "$log" 2>&1 &
	squatter=$!
	job srun "$@"
	rc=$?
	touch "$ATTACK/stop"
	wait $squatter
	diag "$name: $(tr '\n' ' ' < "$log")(exit $rc)"
	if [ "$torch_takes_socket" = 1 ]; then
		check "$name: the step runs with rank 0's store while another user tries to take its port" \
			eval '[ $rc = 0 ] && [ -e "$JOBS/.squat-done" ] && grep -q "^SQUAT port [0-9]" "$log" && grep -q "^SQUAT tries=[1-9][0-9]* binds=0 accepted=0$" "$log"' ||
			{ show_output; diag "$(cat "$log")"; }
	else
		check "$name: the step runs, or fails naming its port, while another user tries to take it (torch before 2.1)" \
			eval '[ $rc = 0 ] || grep -q "$(sed -n "s/^SQUAT port //p" "$log")" "$ERR"' ||
			{ show_output; diag "$(cat "$log")"; }
	fi
}
squatted_step "store, no PMIx" -N2 -n4 --mpi=none --dist-train python3 squat_job.py "$ATTACK/listening.tried"
if slurm_has_pmix; then
	squatted_step "store, PMIx" -N2 -n4 --mpi=pmix --dist-train python3 squat_job.py "$ATTACK/listening.tried"
else
	pmix_check "store, PMIx: the step runs with rank 0's store" false
fi
squatted_step "torchrun mode's rendezvous store" -N2 --ntasks-per-node=1 --dist-train=torchrun torchrun squat_job.py "$ATTACK/listening.tried"

# Rank 0's store admits only the step's own (common/store_guard.h): on
# rank 0's node, another user's connection is closed before the store
# reads it; the job's user's is served (which tells the two apart), and the
# ranks' own use of the store goes on after a refusal (the other user
# comes last). Here every node shares this machine's network: see
# network.sh for the others.
guarded_step 127.0.1.1 "owner ${DT_CLUSTER_USER:-dttest}
other $OTHER" -N2 -n4 --mpi=none --dist-train python3
rc=$?
diag "store guard: $(tr '\n' ' ' < "$GUARD/intrude.log")(exit $rc)"
check "another user on rank 0's node cannot use its store, the job's user can, and the step runs" \
	eval '[ $rc = 0 ] && [ "$(count_lines "^GUARDED rank=[0-3] sum=4 store=served$")" = 4 ] && grep -q "^INTRUDE other tries=3 admitted=0 " "$GUARD/intrude.log" && grep -q "^INTRUDE owner tries=3 admitted=3 " "$GUARD/intrude.log"' ||
	{ show_output; diag "$(cat "$GUARD/intrude.log")"; }
check "... and rank 0's program says once whom its store refused" \
	test "$(grep -c "rank 0's store (port [0-9]*) refused a connection from [0-9a-f.:]* (a socket of user $(id -u "$OTHER") on this node)" "$ERR")" = 1 ||
	show_output

# The ways around the kernel's plain lookup (sock_diag), each by another
# user on rank 0's node, against a store that is slow to accept: a socket
# bound to an interface (SO_BINDTODEVICE, any user since Linux 5.7), a
# connection to this node's own IPv6 link-local address, and one that
# sends and then resets before it is accepted. None of what they sent may
# be read; the job's user's own connection is. With a start barrier
# (check) and without (the default here: no PMIx).
linklocal=
if [ "$(cat /proc/sys/net/ipv6/conf/all/disable_ipv6 2>/dev/null)" = 0 ]; then
	at_exit "ip link del dtll0 2>/dev/null"
	ip link add dtll0 type veth peer name dtll1 2>/dev/null
	ip link set dtll0 up && ip link set dtll1 up
	for _ in $(seq 50); do
		linklocal=$(ip -6 -o addr show dev dtll0 scope link 2>/dev/null |
			grep -v tentative | awk '{ sub("/.*", "", $4); print $4 }')
		[ -n "$linklocal" ] && break
		sleep 0.1
	done
fi
raw_intruders="owner ${DT_CLUSTER_USER:-dttest} plain 127.0.0.1
other-plain $OTHER plain 127.0.0.1
other-bound $OTHER bound 127.0.0.1
other-linger $OTHER linger 127.0.0.1${linklocal:+
other-linklocal $OTHER plain $linklocal%dtll0}"
for mode in default check; do
	GUARD_RAW=1 guarded_step - "$raw_intruders" -N2 -n2 --mpi=none \
		"--dist-train$([ $mode = check ] && echo =check)" python3
	rc=$?
	diag "raw intruders, $mode: $(tr '\n' ' ' < "$GUARD/intrude.log")$(head -c 300 "$GUARD/intrude.err") $(cat "$OUT") (exit $rc)"
	check "--dist-train$([ $mode = check ] && echo =check): rank 0's store reads no other user's connection, bound to an interface, reset after sending${linklocal:+, or through a link-local address}; the job's user's is read" \
		eval '[ $rc = 0 ] && [ "$(grep -c "^RAW .* sent$" "$GUARD/intrude.log")" = "$(grep -c . <<< "$raw_intruders")" ] && grep -qx "RAW read=owner" "$OUT"' ||
		{ show_output; diag "$(cat "$GUARD/intrude.log" "$GUARD/intrude.err")"; }
done
[ -n "$linklocal" ] || diag "IPv6 is off here: no link-local address to try"

# Where the kernel cannot be asked (here: the store ran out of
# descriptors, so the guard cannot open its netlink socket; elsewhere: no
# tcp_diag), a connection from rank 0's node is refused, the job's
# user's too (the step's own ranks retry), and the program says so once.
GUARD_RAW=1 GUARD_FULL=1 guarded_step - "owner ${DT_CLUSTER_USER:-dttest} plain 127.0.0.1
other-plain $OTHER plain 127.0.0.1" -N2 -n2 --mpi=none --dist-train python3
rc=$?
diag "raw intruders, no descriptor left: $(tr '\n' ' ' < "$GUARD/intrude.log")$(head -c 300 "$GUARD/intrude.err") $(cat "$OUT") (exit $rc)"
check "a store that cannot ask the kernel reads no connection from its node, and says once why and what to do" \
	eval '[ $rc = 0 ] && [ "$(grep -c "^RAW .* sent$" "$GUARD/intrude.log")" = 2 ] && grep -qx "RAW read=" "$OUT" && [ "$(grep -c "because the kernel cannot say whose socket it is .*modprobe tcp_diag" "$ERR")" = 1 ]' ||
	{ show_output; diag "$(cat "$GUARD/intrude.log" "$GUARD/intrude.err")"; }

finish
