# Rank 0's store admits only the step's own (common/store_guard.h).
#
#   python3 store_guard.py job FOLDER
#     Every rank joins gloo. Rank 0 writes FOLDER/store-up ("HOST PORT KIND"
#     of its store: torchrun's agents' where there is one; KIND tree or
#     torch, whose frames it speaks); every rank waits
#     for FOLDER/intruded (at most 180 s), so that the store is up while
#     others try it. Then every rank uses the store again (store=served, or
#     stuck after 60 s), and all_reduces.
#   python3 store_guard.py intrude FOLDER NAME HOST
#     A client of the store (torch's, or the tree's), as any user could
#     write one: connect to HOST at the store's port, then add to a key,
#     3 times. Prints
#     "INTRUDE NAME tries=3 admitted=N (the last error)".
#   python3 store_guard.py raw-job FOLDER [full]
#     No torch: rank 0 takes the socket that holds its store's port
#     (DIST_TRAIN_STORE_FD, as torch would), listens, writes FOLDER/store-up,
#     and accepts nothing until FOLDER/intruded (at most 120 s), so that
#     every connection waits in the backlog, as they would for a busy
#     store. Then it accepts all and prints "RAW read=A,B,..." (what each
#     admitted connection sent; "-": nothing). full: it accepts with one
#     descriptor left, as a store that ran out of them, so that the
#     guard cannot ask the kernel whose a connection is.
#   python3 store_guard.py raw FOLDER NAME WAY HOST
#     One connection to HOST at the store's port that sends NAME, made
#     WAY: plain; bound (SO_BINDTODEVICE "lo", which any user may set);
#     linger (closed with a reset right after sending); port=P (from
#     source port P). HOST%IFNAME: a link-local address. Prints "RAW NAME
#     WAY sent" once sent, then (but linger) keeps the connection until
#     the store closes it.
import os
import pathlib
import sys
import time

mode, folder = sys.argv[1], pathlib.Path(sys.argv[2])
if mode == "raw-job":
    import socket

    if os.environ.get("SLURM_PROCID") == "0":
        fd, port = (int(x) for x in os.environ["DIST_TRAIN_STORE_FD"].split(":"))
        server = socket.socket(fileno=fd)
        server.listen(64)
        (folder / "store-up.new").write_text(f"{os.environ['MASTER_ADDR']} {port}\n")
        (folder / "store-up.new").rename(folder / "store-up")
        deadline = time.monotonic() + 120
        while not (folder / "intruded").exists() and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        server.settimeout(1.0)
        fillers = []
        if sys.argv[3:] == ["full"]:
            try:
                while True:
                    fillers.append(os.open("/dev/null", os.O_RDONLY))
            except OSError:
                os.close(fillers.pop())
        read = []
        while True:
            try:
                conn, _ = server.accept()
            except socket.timeout:
                break
            conn.settimeout(1.0)
            data = b""
            try:
                while chunk := conn.recv(100):
                    data += chunk
            except OSError:
                pass
            read.append(data.decode(errors="replace") or "-")
            conn.close()
        for fd in fillers:
            os.close(fd)
        print(f"RAW read={','.join(sorted(read))}", flush=True)
elif mode == "raw":
    import socket
    import struct

    name, way, host = sys.argv[3], sys.argv[4], sys.argv[5]
    port = int((folder / "store-up").read_text().split()[1])
    if "%" in host:
        address, ifname = host.split("%")
        conn = socket.socket(socket.AF_INET6)
        conn.connect((address, port, 0, socket.if_nametoindex(ifname)))
    else:
        conn = socket.socket()
        if way == "bound":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"lo")
        elif way.startswith("port="):
            conn.bind(("", int(way[5:])))
        conn.connect((host, port))
    conn.sendall(name.encode())
    if way == "linger":
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                        struct.pack("ii", 1, 0))
        conn.close()
    print(f"RAW {name} {way} sent", flush=True)
    if way != "linger":
        # Open until the store closes it (refused, or read), as a client
        # waiting for its answer: a socket closed first is refused
        # unread, whoever's it was.
        conn.settimeout(150)
        try:
            conn.recv(1)
        except OSError:
            pass
        conn.close()
elif mode == "job":
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    if dist.get_rank() == 0:
        endpoint = os.environ.get("PET_RDZV_ENDPOINT") or \
            f'{os.environ["MASTER_ADDR"]}:{os.environ["MASTER_PORT"]}'
        host, port = endpoint.rsplit(":", 1)
        # Whose store it is: the tree's (store=tree) speaks its own frames;
        # torchrun's agents' is torch's, whatever its workers use.
        hook = sys.modules.get("sitecustomize")
        kind = "tree" if getattr(hook, "_node_store_objects", None) and \
            not os.environ.get("PET_RDZV_ENDPOINT") else "torch"
        (folder / "store-up.new").write_text(f"{host} {port} {kind}\n")
        (folder / "store-up.new").rename(folder / "store-up")
    # Every rank waits for the intruders (each starts a Python, slow on a
    # busy machine), so that its 60 s below start after them.
    deadline = time.monotonic() + 180
    while not (folder / "intruded").exists() and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    # The store still serves its ranks after turning the others away
    # (the last connection it saw may have been one it refused).
    store = dist.distributed_c10d._get_default_store()
    store.add("after-intruders", 1)
    deadline = time.monotonic() + 60
    while store.add("after-intruders", 0) < dist.get_world_size() and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    served = store.add("after-intruders", 0) == dist.get_world_size()
    t = torch.tensor([1.0])
    dist.all_reduce(t)
    dist.barrier()
    print(f"GUARDED rank={dist.get_rank()} sum={int(t.item())} "
          f"store={'served' if served else 'stuck'}", flush=True)
    dist.destroy_process_group()
else:
    import importlib.util
    import re
    import socket
    import struct

    # torch's store protocol (an ADD, and before it the validation that
    # torch 2 sends on each connection), spoken without importing torch,
    # which takes seconds on a busy machine; its version read from its
    # files. 1.13 numbers ADD 3, later releases 4.
    name, host = sys.argv[3], sys.argv[4]
    up = (folder / "store-up").read_text().split()
    port = int(up[1])
    key = b"/dist-train-intruder"
    if up[2:] == ["tree"]:
        # The tree's frames (common/store_tree.h): ADD i64 key; its
        # answer, INT, is a 9-byte header and an i64.
        body = struct.pack("<qI", 1, len(key)) + key
        request = struct.pack("<IIB", len(body) + 5, 1, 3) + body
        answer_len = 17
    else:
        torch_dir = pathlib.Path(
            importlib.util.find_spec("torch").origin).parent
        major = int(re.search(r"__version__ = '(\d+)",
                              (torch_dir / "version.py").read_text())[1])
        request = struct.pack("=BI", 0, 0x3C85F7CE) if major >= 2 else b""
        request += struct.pack("=BQ", 4 if major >= 2 else 3, len(key)) + key
        request += struct.pack("=q", 1)
        answer_len = 8
    admitted, last = 0, ""
    for _ in range(3):
        try:
            with socket.create_connection((host, port), timeout=5) as conn:
                conn.sendall(request)
                answer = b""
                while len(answer) < answer_len:
                    chunk = conn.recv(answer_len - len(answer))
                    if not chunk:
                        raise ConnectionError("the store closed the "
                                              "connection")
                    answer += chunk
                admitted += 1
        except OSError as e:
            last = str(e) or type(e).__name__
    print(f"INTRUDE {name} tries=3 admitted={admitted} ({last})", flush=True)
