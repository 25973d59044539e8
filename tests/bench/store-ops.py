#!/usr/bin/env python3
"""What one store operation costs through the node tree, against torch's.

A rank's store call goes, with store=tree, through its node's relay (a
thread of the worker library, over an abstract Unix socket) to rank 0's
server; with store=torch, straight to torch's TCPStore in rank 0. This
starts rank 0 (the server and node "a"'s relay) in a process of its own
and measures, in a rank of node "b" (with its own relay), a set then a get
of one small key, one after the other, as a rendezvous does them; then a
get of a key the node already holds (a barrier's or the NCCL id's, read
by every rank of a node). The same against torch's store, with the same
two processes.

    python3 tests/bench/store-ops.py WORKER_LIB [OPERATIONS]

WORKER_LIB is the built dist_train_worker.so (build/helper/.libs/). Last
line: store-ops: set+get X ms through the node tree, Y ms direct to
torch's store (x Z); a get of a key the node holds W ms (torch V)
"""
import os
import socket
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
HOOK = os.path.join(TOP, "helper", "python", "sitecustomize.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree_store(hook_dir, rank, port, world=2):
    """The store init_process_group would get with store=tree."""
    import importlib.util
    # Under a name of its own: Python imported its own sitecustomize.
    spec = importlib.util.spec_from_file_location(
        "dist_train_hook", os.path.join(hook_dir, "sitecustomize.py"))
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    create = hook._tree_store(lambda *a, **k: None)
    return create("127.0.0.1", port, rank, world, timedelta(seconds=60))


def torch_store(port, is_server):
    """torch's TCPStore, the legacy server (Debian's torch 2.x has no
    libuv, and 2.4 and later ask for it by default); its server answers
    before the other rank has joined."""
    import torch.distributed as dist
    args = ("127.0.0.1", port, 2, is_server, timedelta(seconds=60))
    try:
        return dist.TCPStore(*args, wait_for_workers=False, use_libuv=False)
    except TypeError:
        return dist.TCPStore(*args, wait_for_workers=False)


def serve(mode, hook_dir, port):
    """Rank 0: the store's server (and node a's relay), until stdin ends."""
    if mode == "tree":
        store = tree_store(hook_dir, 0, port)
    else:
        store = torch_store(port, True)
    store.set("ready", "1")
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.read()


def measure(mode, hook_dir, ops):
    port = free_port()
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               WORLD_SIZE="2", LOCAL_RANK="0",
               SLURM_JOB_ID="bench%d" % os.getpid(), SLURM_STEP_ID="0")
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", mode, hook_dir, str(port)],
        env=dict(env, RANK="0", SLURMD_NODENAME="a"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if server.stdout.readline().strip() != "ready":
            sys.exit("store-ops: rank 0's %s store did not start" % mode)
        os.environ.update(env, RANK="1", SLURMD_NODENAME="b")
        if mode == "tree":
            store = tree_store(hook_dir, 1, port)
        else:
            store = torch_store(port, False)
        store.get("ready")
        start = time.perf_counter()
        for i in range(ops):
            store.set("k%d" % i, b"x" * 32)
            store.get("k%d" % i)
        set_get = (time.perf_counter() - start) / ops * 1e3
        start = time.perf_counter()
        for _ in range(ops):
            store.get("ready")
        held = (time.perf_counter() - start) / ops * 1e3
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    return set_get, held


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--serve":
        serve(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    lib = os.path.abspath(sys.argv[1])
    ops = int(sys.argv[2]) if len(sys.argv) == 3 else 2000
    if not os.path.exists(lib):
        sys.exit("store-ops: %s: no such library: build first (make)" % lib)
    import torch
    with tempfile.TemporaryDirectory() as tmp:
        # The layout the hook expects: python/ beside the library.
        os.symlink(lib, os.path.join(tmp, "dist_train_worker.so"))
        os.mkdir(os.path.join(tmp, "python"))
        os.symlink(HOOK, os.path.join(tmp, "python", "sitecustomize.py"))
        hook_dir = os.path.join(tmp, "python")
        torch_sg, torch_held = measure("torch", hook_dir, ops)
        tree_sg, tree_held = measure("tree", hook_dir, ops)
    print("store-ops: %d operations each, torch %s" % (ops, torch.__version__))
    print("store-ops: set+get %.3f ms through the node tree, %.3f ms direct "
          "to torch's store (x %.2f); a get of a key the node holds %.3f ms "
          "(torch %.3f ms)" % (tree_sg, torch_sg, tree_sg / torch_sg,
                               tree_held, torch_held))


if __name__ == "__main__":
    main()
