#!/bin/bash
# The Python hook (helper/python/sitecustomize.py) with the system's torch,
# no cluster needed (TAP): a store client made before its server still
# connects and reads what the server wrote, without torch's connect
# back-off (the time it took is printed, not judged: tests/bench/launch.sh
# measures what it gains), and looks its server's name up once while it
# waits; a server that never comes still fails in torch's own words;
# Python without torch.distributed is left alone; rank 0's held socket is
# handed to its store; torchrun's rendezvous state is unpickled with only
# its own classes allowed.
top_srcdir=${DT_TOP_SRCDIR:-$(dirname "$0")/..}
hook=$top_srcdir/helper/python
python=/usr/bin/python3

. "$top_srcdir/tests/require.sh"
require_tool "$python"
if ! "$python" -c 'import torch.distributed' 2>/dev/null; then
	if [ "${DT_REQUIRE_INTEGRATION:-0}" = 1 ]; then
		echo "1..1"
		echo "not ok 1 - python3-torch is not installed (tests/run.sh installs it)"
		exit 1
	fi
	echo "1..0 # SKIP python3-torch is not installed"
	exit 0
fi

echo "1..12"
# USE_LIBUV is not set: the hook must make the store without libuv itself
# where torch lacks it. Each script takes a port the kernel says is free
# (other stacks' tests may run beside this one).
out=$(PYTHONPATH=$hook timeout 120 "$python" - 2>&1 <<'PY'
import datetime, os, socket, sys, time
from torch.distributed import TCPStore
probe = socket.socket()
probe.bind(("127.0.0.1", 0))
port = probe.getsockname()[1]
probe.close()
lookups = 0
real_getaddrinfo = socket.getaddrinfo
def counting_getaddrinfo(*args, **kwargs):
    global lookups
    lookups += 1
    return real_getaddrinfo(*args, **kwargs)
socket.getaddrinfo = counting_getaddrinfo
pid = os.fork()
if pid == 0:
    time.sleep(0.3)
    server = TCPStore("127.0.0.1", port, 2, True, datetime.timedelta(seconds=30))
    server.set("from", "rank 0")
    time.sleep(2)
    os._exit(0)
start = time.monotonic()
client = TCPStore("localhost", port, 2, False, datetime.timedelta(seconds=30))
took = time.monotonic() - start
print("read", client.get("from").decode(), "after %.3f s" % took)
print("lookups", lookups)
os.waitpid(pid, 0)
PY
)
if grep -q '^read rank 0 after' <<<"$out"; then
	echo "ok 1 - a client made 0.3 s before its server connects and reads it"
	echo "# $(grep '^read' <<<"$out") (torch's own client: 1.0 s on 1.13, 0.5 to 0.8 s on 2.6)"
else
	echo "not ok 1 - a client made before its server"
	sed 's/^/# /' <<<"$out"
fi
if grep -q '^lookups 1$' <<<"$out"; then
	echo "ok 2 - the client looked its server's name up once while it waited"
else
	echo "not ok 2 - the client's lookups of its server's name: $(grep '^lookups' <<<"$out")"
fi

out=$(PYTHONPATH=$hook timeout 120 "$python" - 2>&1 <<'PY'
import datetime, socket
from torch.distributed import TCPStore
probe = socket.socket()
probe.bind(("127.0.0.1", 0))
port = probe.getsockname()[1]
probe.close()
try:
    TCPStore("127.0.0.1", port, 2, False, datetime.timedelta(seconds=2))
except Exception as e:
    print("raised", type(e).__module__, type(e).__name__, e)
else:
    print("connected to nothing")
PY
)
if grep -q -E '^raised (builtins|torch).*127\.0\.0\.1' <<<"$out"; then
	echo "ok 3 - a server that never comes: torch's own error, at its timeout"
else
	echo "not ok 3 - a server that never comes"
fi
grep "^raised\|^connected" <<<"$out" | sed "s/^/# /"

out=$(PYTHONPATH=$hook "$python" -c 'import sys; print(sorted(m for m in sys.modules if m.startswith("torch")))' 2>&1)
if [ "$out" = "[]" ]; then
	echo "ok 4 - Python that does not use torch does not load it"
else
	echo "not ok 4 - the hook loaded torch in a program that does not use it"
	sed 's/^/# /' <<<"$out"
fi

# Rank 0's socket holding the store's port (DIST_TRAIN_STORE_FD): the
# store of torch 2.1 and later listens on that very socket, so the port is
# never free; torch 1.13 and 2.0 have the socket closed just before their
# store binds the port. A child started through subprocess gets it too, and
# makes the store there; the others in the store's world reach it.
out=$(PYTHONPATH=$hook timeout 120 "$python" - 2>&1 <<'PY'
import os, socket, subprocess, sys
# As rank 0's task holds it: bound, SO_REUSEPORT, not listening.
def holding(port):
    held = socket.socket(socket.AF_INET6)
    held.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    held.bind(("::", port))
    return held
held = holding(0)
port = held.getsockname()[1]
fd = held.detach()
os.set_inheritable(fd, True)
inode = os.fstat(fd).st_ino
env = dict(os.environ, DIST_TRAIN_STORE_FD="%d:%d" % (fd, port))
child = r"""
import datetime, os, sys
import torch
from torch.distributed import TCPStore
port, inode, via = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if via == "subprocess":
    import subprocess
    sys.exit(subprocess.call([sys.executable, "-c", sys.argv[4], *sys.argv[1:3], "child"]))
server = TCPStore("localhost", port, 2, True, datetime.timedelta(seconds=30), wait_for_workers=False)
client = TCPStore("localhost", port, 2, False, datetime.timedelta(seconds=30))
client.set("k", "v")
listening = set()
for name in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
    for line in open(name).read().splitlines()[1:]:
        f = line.split()
        if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
            listening.add(int(f[9]))
same = listening == {inode}
print("torch", torch.__version__, via, "store", server.get("k").decode(),
      "held socket" if same else "new socket", flush=True)
"""
# As after exec: the program alone holds the socket.
for via in ("exec", "subprocess"):
    if via == "subprocess":
        held = holding(0)
        port = held.getsockname()[1]
        fd = held.detach()
        os.set_inheritable(fd, True)
        inode = os.fstat(fd).st_ino
        env["DIST_TRAIN_STORE_FD"] = "%d:%d" % (fd, port)
    run = subprocess.Popen([sys.executable, "-c", child, str(port), str(inode), via, child],
                           env=env, pass_fds=(fd,), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    os.close(fd)
    out, err = run.communicate()
    print(out.strip() or err.strip().splitlines()[-1:])
PY
)
new_torch=$("$python" -c 'import torch; print(int(tuple(map(int, torch.__version__.split("+")[0].split(".")[:2])) >= (2, 1)))')
if [ "$new_torch" = 1 ]; then
	want="store v held socket" how="the socket rank 0 held"
else
	want="store v new socket" how="the port, bound just after the socket closed (torch before 2.1)"
fi
n=5
for via in exec subprocess; do
	# The child of the subprocess case says "child".
	if grep -q "^torch .* ${via/subprocess/child} $want$" <<<"$out"; then
		echo "ok $n - DIST_TRAIN_STORE_FD, $via: the store works on $how"
	else
		echo "not ok $n - DIST_TRAIN_STORE_FD, $via: the store on $how"
	fi
	n=$((n + 1))
done
grep "^torch\|^\[" <<<"$out" | sed "s/^/# /"

# A DIST_TRAIN_STORE_FD that names no socket bound to that port is
# ignored: the descriptor is not touched, the store binds as it would.
out=$(DIST_TRAIN_STORE_FD=0:1 PYTHONPATH=$hook timeout 60 "$python" - 2>&1 <<'PY'
import datetime, os, socket
from torch.distributed import TCPStore
probe = socket.socket()
probe.bind(("127.0.0.1", 0))
port = probe.getsockname()[1]
probe.close()
os.environ["DIST_TRAIN_STORE_FD"] = "0:%d" % port
server = TCPStore("127.0.0.1", port, 1, True, datetime.timedelta(seconds=10))
server.set("k", "v")
os.fstat(0)
print("ignored", server.get("k").decode())
PY
)
if [ "$out" = "ignored v" ]; then
	echo "ok 7 - a DIST_TRAIN_STORE_FD naming no socket bound to the port is ignored"
else
	echo "not ok 7 - a DIST_TRAIN_STORE_FD naming no socket bound to the port"
	sed 's/^/# /' <<<"$out"
fi

# JAX's coordinator binds MASTER_PORT itself: importing jax lets the held
# socket go (a stand-in jax module: Debian has none).
fake=$(mktemp -d)
echo 'pass' > "$fake/jax.py"
out=$(PYTHONPATH=$hook:$fake timeout 60 "$python" - 2>&1 <<'PY'
import os, socket, subprocess, sys
held = socket.socket()
held.bind(("127.0.0.1", 0))
held.listen(8)
port = held.getsockname()[1]
fd = held.detach()
os.set_inheritable(fd, True)
code = """
import os, socket
import jax
s = socket.socket()
s.bind(("127.0.0.1", %d))
print("bound after import jax")
""" % port
env = dict(os.environ, DIST_TRAIN_STORE_FD="%d:%d" % (fd, port))
run = subprocess.Popen([sys.executable, "-c", code], env=env, pass_fds=(fd,),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
os.close(fd)
print(run.communicate()[0].strip())
PY
)
rm -rf "$fake"
if [ "$out" = "bound after import jax" ]; then
	echo "ok 8 - importing jax lets rank 0's socket go, for JAX's coordinator"
else
	echo "not ok 8 - importing jax lets rank 0's socket go"
	sed 's/^/# /' <<<"$out"
fi

# torchrun's agents unpickle the rendezvous state they read from their
# store: through the hook a real state still reads back, and one written
# by another program to run code is refused before it runs.
marker=$(mktemp -d)
out=$(PYTHONPATH=$hook MARKER="$marker/ran" timeout 60 "$python" - 2>&1 <<'PY'
import datetime, os, pickle
import torch.distributed.elastic.rendezvous.dynamic_rendezvous as rdzv
state = rdzv._RendezvousState()
node = rdzv._NodeDesc("n1", 42, 0)
state.round = 3
state.participants[node] = 0
state.wait_list.add(node)
state.deadline = datetime.datetime.now()
state.last_heartbeats[node] = datetime.datetime.now(datetime.timezone.utc)
print("state", vars(rdzv.pickle.loads(pickle.dumps(state))) == vars(state))
class Forged:
    def __reduce__(self):
        return (os.system, ("touch " + os.environ["MARKER"],))
try:
    rdzv.pickle.loads(pickle.dumps(Forged()))
    print("forged loaded")
except pickle.PickleError as e:
    print("forged refused:", e)
PY
)
if grep -q '^state True$' <<<"$out" && grep -q '^forged refused: dist-train: .*posix.system' <<<"$out" &&
	[ ! -e "$marker/ran" ]; then
	echo "ok 9 - torchrun's rendezvous state: read back whole; a forged one refused, its code never run"
else
	echo "not ok 9 - torchrun's rendezvous state through the hook"
	sed 's/^/# /' <<<"$out"
fi
rm -rf "$marker"

# NCCL's dump pipe (read by dist-train stacks): only a process that starts
# an NCCL process group gets its folder (0700, in the node's temporary
# one), not one that starts gloo; the folder and the pipe torch made in it
# are gone once the process ends. From torch 2.11 on, the flight
# recorder's older names are unset (that torch warns of them).
record=$(mktemp -d)
out=$(cd "$record" && PYTHONPATH=$hook SLURM_DIST_TRAIN_RECORD_DIR=$record DIST_TRAIN_STEP=7.0 \
	timeout 60 "$python" - 2>&1 <<'PY'
import os, stat, torch, torch.distributed as dist
release = tuple(int(x) for x in torch.__version__.split(".")[:2])
print("older names kept:", "TORCH_NCCL_TRACE_BUFFER_SIZE" in os.environ,
      "TORCH_FR_BUFFER_SIZE" in os.environ, release < (2, 11))
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
print("gloo:", os.environ.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE"))
dist.destroy_process_group()
try:
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
except Exception:
    pass  # a torch without NCCL: the folder is made before it says so
pipe = os.environ.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "")
folder = os.path.dirname(pipe)
print("nccl:", os.path.basename(folder)[:16], os.path.basename(pipe),
      oct(stat.S_IMODE(os.stat(folder).st_mode)),
      os.environ.get("TORCH_FR_DEBUG_INFO_PIPE_FILE") == pipe)
os.mkfifo(pipe + "0.pipe")
print("folder:", folder)
PY
)
folder=$(sed -n 's/^folder: //p' <<<"$out")
if grep -q '^gloo: None$' <<<"$out" && grep -q '^nccl: dist-train-nccl- pipe- 0o700 True$' <<<"$out" &&
	grep -qE '^older names kept: (True True True|False True False)$' <<<"$out" &&
	[ -n "$folder" ] && [ ! -e "$folder" ]; then
	echo "ok 10 - NCCL's dump pipe: a private folder for an NCCL process group only, gone at exit; the flight recorder's names for this torch"
else
	echo "not ok 10 - NCCL's dump pipe's folder"
	sed 's/^/# /' <<<"$out"
fi
rm -rf "$record"

# Stacks on the way down (plugin/exit_stacks.c): with the node's memory
# file the plugin hands every task ("FD:REGION"), the hook opens it again
# for its process at the task's region (SLURM_LOCALID regions in) and
# closes the node's descriptor; SIGTERM writes every thread's stack there
# and then does what it did before: the default kills the process by
# SIGTERM; a handler the program sets afterwards still runs (a
# checkpoint); a program the process runs gets neither the file nor its
# name. A descriptor that is not the plugin's file is left alone.
out=$(timeout 60 "$python" - "$hook" 2>&1 <<'PY'
import os, signal, subprocess, sys, time

REGION = 1 << 16

def load_hook():
    import importlib.util  # the hook, as Python runs it at a start
    spec = importlib.util.spec_from_file_location(
        "hook", os.path.join(sys.argv[1], "sitecustomize.py"))
    spec.loader.exec_module(importlib.util.module_from_spec(spec))

def own_file():
    """The child's own descriptor of the file, after the hook."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + name).startswith(
                    "/memfd:dist-train-exit-stacks"):
                return int(name)
        except OSError:
            pass
    return None

def run(mode):
    # Far from the descriptors ls itself opens.
    made = os.memfd_create("dist-train-exit-stacks", 0)
    fd = os.dup2(made, 100 + len(mode))
    os.close(made)
    pid = os.fork()
    if pid == 0:
        os.environ["DIST_TRAIN_EXIT_STACKS_FD"] = "%d:%d" % (fd, REGION)
        os.environ["SLURM_LOCALID"] = "2"
        os.environ["RANK"] = "3"
        load_hook()
        own = own_file()
        if mode == "handler":
            def checkpoint(signum, frame):
                os.write(own, b"CHECKPOINT\n")
                os._exit(7)
            signal.signal(signal.SIGTERM, checkpoint)
        seen = subprocess.run(["sh", "-c", "echo ${DIST_TRAIN_EXIT_STACKS_FD:-unset}; "
                               "ls -l /proc/self/fd | grep -c exit-stacks"],
                              capture_output=True, text=True).stdout.split()
        os.write(own, ("INHERITED %s node's %s\n" % (
            seen != ["unset", "0"], os.path.exists("/proc/self/fd/%d" % fd))).encode())
        def waiting_for_sigterm(): time.sleep(30)
        waiting_for_sigterm()
        os._exit(0)
    time.sleep(1.5)
    os.kill(pid, signal.SIGTERM)
    _, status = os.waitpid(pid, 0)
    text = os.pread(fd, REGION, 2 * REGION).decode()
    print(mode, os.WTERMSIG(status) if os.WIFSIGNALED(status) else "exit %d" % os.WEXITSTATUS(status),
          "in waiting_for_sigterm" in text, text.count("CHECKPOINT"),
          text.count("INHERITED False node's False"),
          text.startswith("dist-train: the stacks of rank 3 "),
          os.pread(fd, 2 * REGION, 0).strip(b"\0") == b"")
    os.close(fd)

def foreign():
    # A wrapper reused the number for a file of its own.
    null = os.open("/dev/null", os.O_RDWR)
    fd = os.dup2(null, 120)
    os.close(null)
    pid = os.fork()
    if pid == 0:
        os.environ["DIST_TRAIN_EXIT_STACKS_FD"] = "%d:%d" % (fd, REGION)
        load_hook()
        os._exit(0 if os.path.exists("/proc/self/fd/%d" % fd) else 1)
    _, status = os.waitpid(pid, 0)
    print("foreign left open", os.WEXITSTATUS(status) == 0)

run("plain")
run("handler")
foreign()
PY
)
if grep -qx "plain 15 True 0 1 True True" <<<"$out" &&
	grep -qx "handler exit 7 True 1 1 True True" <<<"$out" &&
	grep -qx "foreign left open True" <<<"$out"; then
	echo "ok 11 - SIGTERM: every thread's stack into the task's region of the node's file, then the default (killed by SIGTERM), or the program's own handler set later; a program it runs gets neither file nor name; another file under the number is left alone"
else
	echo "not ok 11 - SIGTERM: stacks into the task's region of the node's file"
	sed 's/^/# /' <<<"$out"
fi

# store=tree: only the step's own store goes through the node tree (its
# MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE), never a world of a
# task's own, a torchrun worker's, or one outside a task.
out=$(timeout 120 "$python" - "$hook" 2>&1 <<'PY'
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location(
    "hook", os.path.join(sys.argv[1], "sitecustomize.py"))
hook = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hook)
os.environ.update(MASTER_ADDR="n1", MASTER_PORT="20001", RANK="5",
                  WORLD_SIZE="8", LOCAL_RANK="1")
os.environ.pop("TORCHELASTIC_USE_AGENT_STORE", None)
steps = hook._the_steps_store
seen = [steps("n1", 20001, 5, 8), steps("n1", 20002, 5, 8),
        steps("n1", 20001, 0, 1), steps("n2", 20001, 5, 8)]
os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "True"
seen.append(steps("n1", 20001, 5, 8))
del os.environ["TORCHELASTIC_USE_AGENT_STORE"], os.environ["LOCAL_RANK"]
seen.append(steps("n1", 20001, 5, 8))
print("STEPS", *seen)
PY
)
if grep -qx "STEPS True False False False False False" <<<"$out"; then
	echo "ok 12 - store=tree: the step's own store only (not another port, size or host, not torchrun's workers, not outside a task)"
else
	echo "not ok 12 - store=tree: the step's own store only"
	sed 's/^/# /' <<<"$out"
fi
