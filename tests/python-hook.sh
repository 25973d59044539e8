#!/bin/bash
# The Python hook (helper/python/sitecustomize.py) with the system's torch,
# no cluster needed (TAP): a store client made before its server still
# connects and reads what the server wrote, without torch's connect
# back-off (the time it took is printed, not judged: tests/bench/launch.sh
# measures what it gains), and looks its server's name up once while it
# waits; a server that never comes still fails in torch's own words;
# Python without torch.distributed is left alone.
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

echo "1..4"
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
