#!/usr/bin/env python3
"""What torch's env:// start and first process group do to the store,
recorded from real torch clients: WORLD ranks (default 4) run
init_process_group("gloo") with nothing but the environment, each
connection to rank 0's store passes a recording relay, and each
connection's requests are printed, decoded with this torch's wire
protocol. tests/bench/store_scale.c replays what this prints (see
doc/performance.md, "The store behind the node tree").

    python3 tests/bench/store-record.py [WORLD]

Rank 0's store is started on the recording relay's port through
master_listen_fd (torch 2.1 and later: the store itself is unchanged);
torch 1.13 and 2.0 take no socket, so there rank 0's store is a plain
server and rank 0 connects as a client does (its wait for the others,
a poll of "init/", is then missing from the recording).
"""
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import torch
import torch.distributed as dist

WORLD = int(sys.argv[1]) if len(sys.argv) > 1 else 4
TAKES_FD = "master_listen_fd" in (dist.TCPStore.__init__.__doc__ or "")
# Each request's layout, by opcode: 2.x's, then 1.13's (no VALIDATE,
# every opcode one lower, WATCH_KEY where 2.x has GETNUMKEYS's next).
KEY, VEC, U32, U64, KEYS, NONE = "key", "vec", "u32", "u64", "keys", ""
V2 = {0: ("VALIDATE", [U32]), 1: ("SET", [KEY, VEC]),
      2: ("COMPARE_SET", [KEY, VEC, VEC]), 3: ("GET", [KEY]),
      4: ("ADD", [KEY, U64]), 5: ("CHECK", [KEYS]), 6: ("WAIT", [KEYS]),
      7: ("GETNUMKEYS", []), 8: ("DELETE_KEY", [KEY]),
      9: ("APPEND", [KEY, VEC]), 10: ("MULTI_GET", [KEYS]),
      12: ("CANCEL_WAIT", []), 13: ("PING", [U32])}
V1 = {0: ("SET", [KEY, VEC]), 1: ("COMPARE_SET", [KEY, VEC, VEC]),
      2: ("GET", [KEY]), 3: ("ADD", [KEY, U64]), 4: ("CHECK", [KEYS]),
      5: ("WAIT", [KEYS]), 6: ("GETNUMKEYS", []), 7: ("WATCH_KEY", [KEY]),
      8: ("DELETE_KEY", [KEY]), 9: ("APPEND", [KEY, VEC]),
      10: ("MULTI_GET", [KEYS]), 12: ("CANCEL_WAIT", [])}
TABLE = V1 if torch.__version__.startswith("1.") else V2

CHILD = r'''
import os, socket, sys
import torch.distributed as dist
if os.environ["RANK"] == "0":
    rv = sys.modules["torch.distributed.rendezvous"]
    made, keep = rv.TCPStore, []
    def store(*args, **kwargs):
        for name, value in zip(("host_name", "port", "world_size",
                                "is_master", "timeout"), args):
            kwargs[name] = value
        if os.environ["REC_FD"] == "1":
            s = socket.socket()
            s.bind(("127.0.0.2", kwargs["port"]))
            s.listen(128)
            keep.append(s)
            kwargs.update(is_master=True, use_libuv=False)
            return made(master_listen_fd=s.fileno(), **kwargs)
        keep.append(made(**dict(kwargs, port=int(os.environ["REC_PORT"]),
                                is_master=True, wait_for_workers=False)))
        return made(**dict(kwargs, is_master=False))
    rv.TCPStore = store
dist.init_process_group("gloo")
import time; time.sleep(1)
dist.destroy_process_group()
'''


def decode(data):
    ops, at = [], 0

    def take(n):
        nonlocal at
        chunk = data[at:at + n]
        if len(chunk) < n:
            raise IndexError
        at += n
        return chunk
    try:
        while at < len(data):
            name, layout = TABLE[take(1)[0]]
            words = []
            for part in layout:
                if part == U32:
                    take(4)
                elif part == U64:
                    words.append(str(struct.unpack("<q", take(8))[0]))
                elif part in (KEY, VEC):
                    chunk = take(struct.unpack("<Q", take(8))[0])
                    words.append(chunk.decode(errors="replace") if part == KEY
                                 else "<%d bytes>" % len(chunk))
                else:
                    for _ in range(struct.unpack("<Q", take(8))[0]):
                        words.append(take(struct.unpack("<Q", take(8))[0])
                                     .decode(errors="replace"))
            ops.append(" ".join([name] + words))
    except (IndexError, KeyError):
        ops.append("<%d bytes not decoded>" % (len(data) - at))
    return ops


def main():
    relay = socket.socket()
    relay.bind(("127.0.0.1", 0))
    relay.listen(128)
    port = relay.getsockname()[1]
    plain = socket.socket()
    plain.bind(("127.0.0.1", 0))
    plain_port = plain.getsockname()[1]
    plain.close()
    target = ("127.0.0.2", port) if TAKES_FD else ("127.0.0.1", plain_port)
    streams, lock = [], threading.Lock()

    def pump(a, b, sink):
        while True:
            data = a.recv(65536)
            if not data:
                b.close()
                return
            if sink is not None:
                with lock:
                    sink.append(data)
            b.sendall(data)

    def accept():
        while True:
            a, _ = relay.accept()
            while True:
                try:
                    b = socket.create_connection(target)
                    break
                except OSError:
                    time.sleep(0.01)
            sink = []
            streams.append(sink)
            threading.Thread(target=pump, args=(a, b, sink), daemon=True).start()
            threading.Thread(target=pump, args=(b, a, None), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    ranks = [subprocess.Popen(
        [sys.executable, "-c", CHILD],
        env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(WORLD),
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                 REC_FD="1" if TAKES_FD else "0", REC_PORT=str(plain_port),
                 USE_LIBUV="0", TORCH_CPP_LOG_LEVEL="ERROR"),
        stderr=subprocess.DEVNULL) for r in range(WORLD)]
    codes = [p.wait() for p in ranks]
    time.sleep(0.2)
    with lock:
        sent = [b"".join(sink) for sink in streams]
    print("store-record: torch %s, %d ranks (exit codes %s), %d connections"
          " (%d that sent nothing: probes of the port)"
          % (torch.__version__, WORLD, codes, len(sent),
             sum(1 for data in sent if not data)))
    for i, data in enumerate(d for d in sent if d):
        print("connection %d: %s" % (i, "; ".join(decode(data))))


main()
