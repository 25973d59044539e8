#!/usr/bin/env python3
"""What the guard on rank 0's store costs (common/store_guard.h).

Rank 0's program, preloaded with the worker library, checks each
connection its store accepts: one question to the kernel (sock_diag) for
whose socket it is, and a lookup among the addresses the barrier proved.
A store operation is not touched. This starts torch's TCPStore in a
process of its own, plain and guarded, and measures, as the job's user:
a client's connection (torch's client made and dropped, as every rank
does once) and store operations (set then get of one small key, one after
the other, as a rendezvous does them) over one connection.

    python3 tests/bench/store-guard.py WORKER_LIB [CONNECTIONS] [OPERATIONS]

WORKER_LIB: the built dist_train_worker.so (build/helper/.libs/...).
Last line: store-guard: connect X ms plain, Y ms guarded (x Z); set+get
A ms plain, B ms guarded (x C) (torch V)
"""
import os
import socket
import subprocess
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

SERVER = r"""
import sys
from datetime import timedelta
import torch.distributed as dist
port = int(sys.argv[1])
try:
    store = dist.TCPStore("127.0.0.1", port, None, True, timedelta(seconds=60),
                          wait_for_workers=False)
except Exception as e:  # a torch that asks for libuv it lacks
    if "libuv" not in str(e):
        raise
    store = dist.TCPStore("127.0.0.1", port, None, True, timedelta(seconds=60),
                          wait_for_workers=False, use_libuv=False)
print("up", flush=True)
sys.stdin.read()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client(port, timeout):
    """torch's store client (without libuv where torch lacks it)."""
    try:
        return dist.TCPStore("127.0.0.1", port, None, False, timeout)
    except Exception as e:
        if "libuv" not in str(e):
            raise
        return dist.TCPStore("127.0.0.1", port, None, False, timeout,
                             use_libuv=False)


def measure(lib, connections, operations):
    """(connect ms, set+get ms) against a store, guarded when LIB."""
    port = free_port()
    env = dict(os.environ)
    if lib:
        env["LD_PRELOAD"] = lib
        env["DIST_TRAIN_STORE_FD"] = f"-1:{port}"
        env["DIST_TRAIN_STORE_PEERS"] = ""
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env=env, text=True)
    try:
        if server.stdout.readline().strip() != "up":
            sys.exit("store-guard: the store did not start")
        with open(f"/proc/{server.pid}/maps") as maps:
            if bool(lib) != (lib in maps.read() if lib else False):
                sys.exit("store-guard: the guard is not in the store's "
                         "process: give the built dist_train_worker.so")
        timeout = timedelta(seconds=30)
        start = time.perf_counter()
        for _ in range(connections):
            store = client(port, timeout)
            store.add("connected", 1)
            del store
        connect = (time.perf_counter() - start) * 1000 / connections
        store = client(port, timeout)
        start = time.perf_counter()
        for i in range(operations):
            store.set("key", str(i))
            store.get("key")
        ops = (time.perf_counter() - start) * 1000 / operations
        return connect, ops
    finally:
        server.stdin.close()
        server.wait(timeout=30)


def main():
    if len(sys.argv) < 2 or not os.path.exists(sys.argv[1]):
        sys.exit("usage: store-guard.py WORKER_LIB [CONNECTIONS] "
                 "[OPERATIONS]: give the built dist_train_worker.so")
    lib = os.path.abspath(sys.argv[1])
    connections = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    operations = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    # Alternated, twice each, the best of each kept: the machine's noise
    # is larger than what is measured.
    plain, guarded = [], []
    for _ in range(2):
        plain.append(measure(None, connections, operations))
        guarded.append(measure(lib, connections, operations))
    pc, po = min(c for c, _ in plain), min(o for _, o in plain)
    gc, go = min(c for c, _ in guarded), min(o for _, o in guarded)
    print(f"store-guard: {connections} connections, {operations} set+get, "
          f"best of 2 each")
    print(f"store-guard: connect {pc:.3f} ms plain, {gc:.3f} ms guarded "
          f"(x{gc / pc:.2f}); set+get {po:.3f} ms plain, {go:.3f} ms "
          f"guarded (x{go / po:.2f}) (torch {torch.__version__})")


if __name__ == "__main__":
    main()
