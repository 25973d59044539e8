#!/usr/bin/env python3
"""What admitting only proven connections to torch's store would cost.

torch's TCPStore takes no credential, so the only way to make each
connection prove the step's secret is a relay on both sides: in rank 0's
process, in front of the store, and in each rank's process, between
torch's client and the network (a Python thread, as the Python hook would
run). This measures store operations (set then get of one small key,
one after the other, as a rendezvous does them) made directly and through
two such relays, each in a process of its own; and whether a rank's relay
could be a thread of the rank's own process, as the Python hook would run
it.

    python3 tests/bench/store-relay.py [OPERATIONS]

Last line: store-relay: set+get X ms direct, Y ms through two relays
(x Z); a relay thread in a rank's process: works|hangs (torch V)
"""
import os
import selectors
import socket
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def relay(listen_sock, target, stop):
    """Accept on LISTEN_SOCK, connect each to TARGET, copy both ways."""
    sel = selectors.DefaultSelector()
    sel.register(listen_sock, selectors.EVENT_READ, None)
    peers = {}
    while not stop.is_set():
        for key, _ in sel.select(timeout=0.1):
            if key.data is None:
                a, _ = listen_sock.accept()
                b = socket.create_connection(target)
                for s in (a, b):
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                peers[a], peers[b] = b, a
                sel.register(a, selectors.EVENT_READ, 1)
                sel.register(b, selectors.EVENT_READ, 1)
                continue
            if key.fileobj.fileno() < 0:  # closed with its peer just now
                continue
            try:
                data = key.fileobj.recv(65536)
            except OSError:
                data = b""
            if not data:
                for s in (key.fileobj, peers[key.fileobj]):
                    sel.unregister(s)
                    s.close()
                continue
            peers[key.fileobj].sendall(data)


def start_relay(target):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    stop = threading.Event()
    t = threading.Thread(target=relay, args=(s, target, stop), daemon=True)
    t.start()
    return s.getsockname()[1], stop


def relay_process(target):
    """A relay in a process of its own; its port. It ends with ours."""
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        front, _ = start_relay(target)
        os.write(w, str(front).encode())
        os.close(w)
        # Until the parent is gone.
        while os.getppid() != 1:
            time.sleep(0.5)
        os._exit(0)
    os.close(w)
    port = int(os.read(r, 16))
    os.close(r)
    return port


def relay_in_process(target, kw):
    """Whether a rank's own relay can be a thread of its process: a child
    that tries, given 10 s. torch's client may hold the interpreter's
    lock while it waits for the server, and the relay then never runs."""
    pid = os.fork()
    if pid == 0:
        local, _ = start_relay(target)
        dist.TCPStore("127.0.0.1", local, 1, False, timedelta(seconds=8),
                      **kw).set("x", b"y")
        os._exit(0)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "works" if status == 0 else "fails"
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "hangs"


def ops(store, n):
    start = time.perf_counter()
    for i in range(n):
        store.set(f"k{i % 16}", b"v" * 64)
        store.get(f"k{i % 16}")
    return (time.perf_counter() - start) * 1000 / n


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    os.environ.setdefault("USE_LIBUV", "0")
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    kw = {}
    try:
        dist.TCPStore("127.0.0.1", 1, 1, False, timedelta(seconds=1),
                      wait_for_workers=False, use_libuv=False)
    except TypeError:
        pass
    except Exception:
        kw["use_libuv"] = False
    server = dist.TCPStore("127.0.0.1", port, 1, True,
                           timedelta(seconds=30), wait_for_workers=False,
                           **kw)
    front = relay_process(("127.0.0.1", port))
    local = relay_process(("127.0.0.1", front))
    in_process = relay_in_process(("127.0.0.1", front), kw)

    direct_store = dist.TCPStore("127.0.0.1", port, 1, False,
                                 timedelta(seconds=30), **kw)
    relayed_store = dist.TCPStore("127.0.0.1", local, 1, False,
                                  timedelta(seconds=30), **kw)
    ops(direct_store, 100)
    ops(relayed_store, 100)
    direct = ops(direct_store, n)
    relayed = ops(relayed_store, n)
    del server
    print(f"store-relay: set+get {direct:.3f} ms direct, {relayed:.3f} ms "
          f"through two relays (x{relayed / direct:.1f}); a relay thread in "
          f"a rank's process: {in_process} (torch {torch.__version__})")

if __name__ == "__main__":
    main()
