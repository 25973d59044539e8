# dist-train: put on the PYTHONPATH of a --dist-train task by the plugin.
#
# It changes how a torch TCPStore is made and how torchrun reads its
# rendezvous state, nothing else, and nothing where torch.distributed is
# never imported:
#
# - A client waits for its server (rank 0's store) before it connects.
#   torch's own client, refused because the server is not listening yet,
#   sleeps before it tries again: 1 s in torch 1.13, about 0.5 s and more
#   with jitter in 2.x. Ranks whose Python starts sooner than rank 0's pay
#   it at every launch. Here a client tries to connect every few ms (less
#   often in large steps: see _TRIES_PER_SECOND), for up to a minute (at
#   most the store's timeout), and then lets torch connect as it would
#   have: a server that never comes fails as it did, at most that minute
#   later.
# - PyTorch 2.4 and later ask for the libuv TCPStore by default, and fail
#   when they were built without libuv ("use_libuv was requested but
#   PyTorch was build without libuv support"), as Debian 13's torch 2.6 and
#   unstable's 2.14 are. USE_LIBUV=0 reaches init_process_group's env://
#   store only; torchrun's agent and workers make theirs without reading
#   it. So a TCPStore that fails for want of libuv is made again without.
# - With DIST_TRAIN_STORE=tree (store=tree, the default; the plugin and
#   dist-train exec set it), init_process_group's store for the step's
#   own MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE is the step's store
#   behind the node tree (common/store_tree.h): each rank's calls go to
#   its node's relay, which the node's local rank 0 runs in a thread of
#   the worker library's, and rank 0's relay also serves the store on the
#   held port. torchrun's workers, which make a store of their own (the
#   plugin asks torch 2.4 and later not to share the agent's), go through
#   it too; a worker that uses its agent's store, and a store of any other
#   address, port or size, get torch's own.
# - torchrun's agents read the rendezvous state from their store with
#   pickle: here only the classes of a rendezvous state may be unpickled,
#   so that a state another program wrote there cannot run code.
# - NCCL's flight recorder: unless the user set them, a buffer of each
#   rank's last collectives, dumped when one times out, to
#   dist-train-JOB.STEP.nccl-rank-N in the step's record folder (srun's
#   working directory, or record=DIR; none with record=off), so that a
#   hung collective leaves behind what each rank was doing. Both names of
#   each variable are set: torch 2.x's TORCH_NCCL_* and the TORCH_FR_* of
#   later releases (torch 1.13 has no flight recorder and ignores them);
#   once torch.distributed is imported, from torch 2.11 on, the older
#   names go again (2.11 warns in every rank that they are deprecated).
#   A process that starts an NCCL process group also gets a named pipe
#   from its torch (TORCH_NCCL_DEBUG_INFO_PIPE_FILE, torch 2.3 and later)
#   in a private folder of the node's temporary one, removed at exit: a
#   byte written into it, by `dist-train stacks`, makes torch dump the
#   rank's collectives there and then, without waiting for a timeout.
# - Stacks on demand: `dist-train stacks JOB.STEP` sends SIGURG to each
#   rank's process, and Python's faulthandler writes every thread's stack
#   into a memory file of the process's own ("dist-train-stacks", read by
#   the command through /proc), even while the main thread is stuck in C
#   code (a collective, a lock). SIGURG, ignored by default, is taken by
#   none of PyTorch, Lightning, submitit or NCCL; a handler the program
#   sets for it replaces this one.
# - Stacks on the way down: when SIGTERM ends the step (its time limit,
#   scancel, preemption, fail-fast), every thread's stack goes into a
#   file slurmstepd holds for the task and keeps in the record folder as
#   dist-train-JOB.STEP.stacks-rank-N (plugin/exit_stacks.c); SIGTERM
#   then does what the program made it do.
# - Rank 0's store takes the socket that holds its port from the start
#   barrier on, named in DIST_TRAIN_STORE_FD ("FD:PORT", bound, not yet
#   listening: common/store_hold.h): the port is never free for another
#   user to take between the barrier and the store. torch 2.1 and later
#   take it (master_listen_fd; before 2.8 only without libuv), and a
#   child this process starts (subprocess, multiprocessing, fork) gets it
#   too, as it may be the one that makes the store. torch 1.13 and 2.0 cannot take it: the socket is closed
#   just before their store binds the port, or when this process starts
#   a child (which could bind the port itself), whichever comes first.
#   JAX's coordinator binds the port itself (JAX_COORDINATOR_ADDRESS is
#   MASTER_ADDR:MASTER_PORT): importing jax lets the socket go.
#
# It then runs the sitecustomize it hides, if any.
import sys

# How long a client waits for its server before torch's own connect.
_WAIT_FOR_SERVER_S = 60.0
# All clients of a step together try about this many connections a second
# once each has backed off (each client's pause between tries grows to
# between 20 ms and 1 s, torch's own pace): rank 0's kernel answers each.
_TRIES_PER_SECOND = 20000.0


def _arg(args, kwargs, index, name, default):
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def _clients():
    """How many processes of the step may be waiting like this one."""
    import os

    most = 0
    for name in ("WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"):
        try:
            most = max(most, int(os.environ.get(name, "0")))
        except ValueError:
            pass
    return most


def _wait_for_server(host, port, timeout):
    """Until something listens on HOST:PORT, for up to _WAIT_FOR_SERVER_S
    or TIMEOUT (a timedelta; None: torch's default), whichever is shorter."""
    import socket
    import time

    try:
        limit = _WAIT_FOR_SERVER_S
        if timeout is not None:
            limit = min(limit, timeout.total_seconds())
        host, port = str(host), int(port)
    except (AttributeError, TypeError, ValueError):
        return
    deadline = time.monotonic() + limit
    most = min(1.0, max(0.02, _clients() / _TRIES_PER_SECOND))
    pause = 0.002
    # Once: thousands of ranks asking the name service every few ms would
    # flood it. A name that does not resolve is torch's to report.
    try:
        addresses = [(ai[0], ai[4]) for ai in socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM)]
    except OSError:
        return
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        for family, address in addresses:
            probe = None
            try:
                probe = socket.socket(family, socket.SOCK_STREAM)
                probe.settimeout(min(left, 5.0))
                probe.connect(address)
                return
            except OSError:  # refused, unreachable, no such family here
                pass
            finally:
                # Closed at once: the server reads end of file, as from a
                # client that went away, and forgets it.
                if probe is not None:
                    probe.close()
        time.sleep(min(pause, max(left, 0)))
        pause = min(pause * 2, most)


def _held_store_socket():
    """(FD, PORT) of the socket DIST_TRAIN_STORE_FD names, bound to PORT
    and not yet listening (common/store_hold.h), when this process has
    it; else None."""
    import os
    import socket
    import stat

    try:
        fd, port = (int(part) for part in
                    os.environ.get("DIST_TRAIN_STORE_FD", "").split(":"))
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            return None
        sock = socket.socket(fileno=fd)
        try:
            ok = (sock.type == socket.SOCK_STREAM
                  and sock.getsockname()[1] == port)
        finally:
            sock.detach()
        return (fd, port) if ok else None
    except (OSError, ValueError):
        return None


def _listen(fd):
    """The held socket listens, as the store's. Once it listens, no
    other socket can bind the port: the ones it accepts may now leave the
    port reusable behind them (SO_REUSEADDR), and no other socket of this
    user may share it (SO_REUSEPORT off)."""
    import os
    import socket

    sock = socket.socket(fileno=fd)
    try:
        sock.listen(socket.SOMAXCONN)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 0)
    finally:
        sock.detach()
    # torch's store polls, then accepts: a blocking socket.
    os.set_blocking(fd, True)


_held = None


def _take_held(port):
    """The held socket, when it is PORT's and not taken yet."""
    global _held
    try:
        if _held is None or _held[1] != int(port):
            return None
    except (TypeError, ValueError):
        return None
    fd, _held = _held[0], None
    return fd


_torch_release = None


def _torch_version():
    """(MAJOR, MINOR) of this Python's torch, without importing it where
    it is not yet; (0, 0) when unknown."""
    global _torch_release
    import re

    if _torch_release is not None:
        return _torch_release
    version = getattr(sys.modules.get("torch"), "__version__", None)
    if version is None:
        try:
            from importlib.metadata import version as installed
            version = installed("torch")
        except Exception:  # no metadata, no torch
            version = ""
    found = re.match(r"(\d+)\.(\d+)", str(version))
    _torch_release = ((int(found.group(1)), int(found.group(2))) if found
                      else (0, 0))
    return _torch_release


def _let_go():
    """Close the held socket: this process will not make the store."""
    global _held
    import os

    if _held is not None:
        os.close(_held[0])
        _held = None


def _before_child():
    """A child is about to start: the held socket, which it inherits,
    where torch takes one; else let go here, as the child may bind the
    port itself and must find it free."""
    if _held is None:
        return None
    if _torch_version() >= (2, 1):
        return _held[0]
    _let_go()
    return None


def _compat_store(original):
    takes_fd = "master_listen_fd" in (original.__init__.__doc__ or "")

    class TCPStore(original):
        __doc__ = original.__doc__

        def __init__(self, *args, **kwargs):
            if not _arg(args, kwargs, 3, "is_master", False):
                _wait_for_server(_arg(args, kwargs, 0, "host_name", None),
                                 _arg(args, kwargs, 1, "port", None),
                                 _arg(args, kwargs, 4, "timeout", None))
            else:
                fd = _take_held(_arg(args, kwargs, 1, "port", None))
                if fd is not None and takes_fd:
                    _listen(fd)
                    kwargs["master_listen_fd"] = fd
                    # Before 2.8 the libuv store takes no socket.
                    if _torch_version() < (2, 8):
                        kwargs["use_libuv"] = False
                elif fd is not None:
                    import os
                    os.close(fd)  # torch 1.13, 2.0: it binds the port itself
            try:
                super().__init__(*args, **kwargs)
            except Exception as e:  # RuntimeError, DistStoreError
                if "libuv" not in str(e) or kwargs.get("use_libuv") is False:
                    raise
                kwargs["use_libuv"] = False
                super().__init__(*args, **kwargs)

    TCPStore.__name__ = TCPStore.__qualname__ = original.__name__
    TCPStore.__module__ = original.__module__
    return TCPStore


# The step's store behind the node tree (common/store_tree.h): with
# DIST_TRAIN_STORE=tree, init_process_group's store of the step is one that
# reaches rank 0's through this node's relay, which the node's local rank
# 0 runs (in a thread of the worker library's, not Python's). The frames
# are common/store_tree.h's.
_STORE_OPS = {"set": 1, "get": 2, "add": 3, "compare_set": 4, "wait": 5,
              "check": 6, "delete_key": 7, "num_keys": 8, "append": 9}
_STORE_OK, _STORE_VALUE, _STORE_INT, _STORE_TIMEOUT, _STORE_ERROR = range(
    0x40, 0x45)
# How many env:// stores this process made: each one's keys are its own,
# as each of torch's is a new server (init_process_group, destroyed, then
# again).
_node_stores = 0
_relay_started = False


def _relay_name():
    """The node's relay's abstract socket: the node's name in it too, as
    several slurmd of one host (multiple_slurmd) share its namespace."""
    import os
    import socket

    return "dist-train-store-%d-%s.%s-%s" % (
        os.getuid(), os.environ.get("SLURM_JOB_ID", "0"),
        os.environ.get("SLURM_STEP_ID", "0"),
        os.environ.get("SLURMD_NODENAME") or socket.gethostname())


def _start_relay(host, port, rank, timeout):
    """This node's relay, and at rank 0 the step's store, on the held
    socket where there is one, else on PORT bound here."""
    global _relay_started
    import ctypes
    import os
    import socket

    here = os.path.dirname(os.path.abspath(__file__))
    lib = ctypes.CDLL(os.path.join(os.path.dirname(here),
                                   "dist_train_worker.so"))
    fd = -1
    if rank == 0:
        fd = _take_held(port)
        if fd is not None:
            # As for torch's store: the connections it accepts must leave
            # the port reusable behind them (TIME_WAIT), or the next step
            # given this port finds it taken.
            _listen(fd)
        else:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("", int(port)))
            fd = sock.detach()
    err = ctypes.create_string_buffer(256)
    if lib.dist_train_store_start(
            fd, _relay_name().encode(), str(host).encode(),
            str(port).encode(), ctypes.c_uint(int(timeout * 1000)), err,
            ctypes.c_size_t(len(err))) < 0:
        raise RuntimeError(
            "dist-train: this node's store relay did not start: %s; "
            "rerun with --dist-train=store=torch to use torch's own store"
            % err.value.decode(errors="replace"))
    _relay_started = True


def _node_store_class(base):
    import os
    import socket
    import struct
    import threading
    import time

    class NodeStore(base):
        """torch.distributed.Store over this node's relay."""

        def __init__(self, prefix, timeout, patience):
            super().__init__()
            self._prefix = prefix.encode()
            self._timeout = timeout
            self._lock = threading.Lock()
            self._id = 0
            self._sock = self._connect(patience)

        def _connect(self, timeout):
            deadline = time.monotonic() + timeout
            pause = 0.002
            while True:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.connect("\0" + _relay_name())
                    pid, uid, gid = struct.unpack(
                        "3i", sock.getsockopt(socket.SOL_SOCKET,
                                              socket.SO_PEERCRED, 12))
                    if uid != os.getuid():
                        raise RuntimeError(
                            "dist-train: this node's store relay is a "
                            "process of another user (uid %d, pid %d): "
                            "rerun with --dist-train=store=torch"
                            % (uid, pid))
                    return sock
                except OSError:
                    sock.close()
                    if time.monotonic() >= deadline:
                        raise RuntimeError(
                            "dist-train: this node's store relay did not "
                            "start within %d s: it runs in the node's "
                            "local rank 0, when that calls "
                            "init_process_group (see its messages); if "
                            "that rank never does, rerun with "
                            "--dist-train=store=torch" % timeout)
                    time.sleep(pause)
                    pause = min(pause * 2, 0.1)

        def _key(self, key):
            return self._prefix + (key.encode() if isinstance(key, str)
                                   else bytes(key))

        @staticmethod
        def _bytes(value):
            return value.encode() if isinstance(value, str) else bytes(value)

        @staticmethod
        def _str(b):
            return struct.pack("<I", len(b)) + b

        def _ms(self):
            return max(1, int(self._timeout * 1000))

        def _call(self, op, body, what, wait_s=0):
            # Every call ends: a relay or server that stops answering
            # (a write held for a node that hangs) fails it a minute past
            # the store's timeout, not never.
            self._sock.settimeout(max(self._timeout, wait_s) + 60)
            with self._lock:
                self._id = self._id % 0xFFFFFFFF + 1
                frame = struct.pack("<IIB", len(body) + 5, self._id,
                                    _STORE_OPS[op]) + body
                self._sock.sendall(frame)
                while True:
                    head = self._recv(9)
                    length, ident, kind = struct.unpack("<IIB", head)
                    payload = self._recv(length - 5)
                    if ident == self._id:
                        break
            if kind == _STORE_TIMEOUT:
                raise RuntimeError(
                    "dist-train: timed out after %d s waiting for %s in "
                    "the step's store" % (self._timeout, what))
            if kind == _STORE_ERROR:
                raise RuntimeError("dist-train: the step's store refused "
                                   "%s: %s" % (op, payload[4:].decode(
                                       errors="replace")))
            if kind == _STORE_VALUE:
                return payload[4:]
            if kind == _STORE_INT:
                return struct.unpack("<q", payload)[0]
            return None

        def _recv(self, n):
            data = b""
            while len(data) < n:
                try:
                    chunk = self._sock.recv(n - len(data))
                except socket.timeout:
                    raise RuntimeError(
                        "dist-train: the step's store did not answer within "
                        "its timeout and a minute: rerun with "
                        "--dist-train=store=torch to use torch's own store")
                if not chunk:
                    raise RuntimeError(
                        "dist-train: this node's store relay went away "
                        "(its process, the node's local rank 0, ended?)")
                data += chunk
            return data

        def set(self, key, value):
            self._call("set", self._str(self._key(key)) +
                       self._str(self._bytes(value)), "set")

        def get(self, key):
            return self._call("get", struct.pack("<I", self._ms()) +
                              self._str(self._key(key)), "key %r" % key)

        def add(self, key, amount):
            return self._call("add", struct.pack("<q", int(amount)) +
                              self._str(self._key(key)), "add")

        def compare_set(self, key, expected, desired):
            return self._call("compare_set", self._str(self._key(key)) +
                              self._str(self._bytes(expected)) +
                              self._str(self._bytes(desired)), "compare_set")

        def _keys(self, keys):
            return struct.pack("<I", len(keys)) + b"".join(
                self._str(self._key(k)) for k in keys)

        def wait(self, keys, timeout=None):
            ms = self._ms()
            if timeout is not None:
                ms = max(1, int(timeout.total_seconds() * 1000))
            self._call("wait", struct.pack("<I", ms) + self._keys(keys),
                       "keys %r" % (list(keys),), ms / 1000)

        def check(self, keys):
            return bool(self._call("check", self._keys(keys), "check"))

        def delete_key(self, key):
            return bool(self._call("delete_key", self._str(self._key(key)),
                                   "delete_key"))

        def num_keys(self):
            # Of every store this step made: torch's counts its own only.
            return self._call("num_keys", b"", "num_keys")

        def append(self, key, value):
            self._call("append", self._str(self._key(key)) +
                       self._str(self._bytes(value)), "append")

        def multi_get(self, keys):
            return [self.get(k) for k in keys]

        def multi_set(self, keys, values):
            for k, v in zip(keys, values):
                self.set(k, v)

        def set_timeout(self, timeout):
            self._timeout = timeout.total_seconds()
            super().set_timeout(timeout)

    return NodeStore


_node_store_type = None
_node_store_objects = []


def _the_steps_store(hostname, port, rank, world_size):
    """Whether a store asked of init_process_group is the step's own, the
    one the node's relay leads to: the address, port, rank and size that
    the step's environment (or torchrun's, for its workers) gives. A
    program that starts a world of its own in each task (its own port, or
    WORLD_SIZE 1) gets torch's store, as do torchrun's workers that use
    their agent's."""
    import os

    env = os.environ
    if (env.get("TORCHELASTIC_USE_AGENT_STORE") == str(True) or
            env.get("LOCAL_RANK") is None):
        return False
    try:
        return (str(hostname) == env.get("MASTER_ADDR") and
                int(port) == int(env.get("MASTER_PORT", "")) and
                int(rank) == int(env.get("RANK", "")) and
                int(world_size) == int(env.get("WORLD_SIZE", "")))
    except (TypeError, ValueError):
        return False


def _tree_store(create):
    """init_process_group's env:// store, through this node's relay."""

    def create_c10d_store(hostname, port, rank, world_size, timeout, *args,
                          **kwargs):
        global _node_stores, _node_store_type
        import os

        if not _the_steps_store(hostname, port, rank, world_size):
            return create(hostname, port, rank, world_size, timeout, *args,
                          **kwargs)
        seconds = timeout.total_seconds()
        # As long for rank 0's store (the relay) and this node's relay (a
        # rank) to come as a rank here waits for torch's store: this
        # hook's wait for its server, then torch's own connect.
        patience = seconds + min(seconds, _WAIT_FOR_SERVER_S)
        if os.environ.get("LOCAL_RANK") == "0" and not _relay_started:
            _start_relay(hostname, port, rank, patience)
        if _node_store_type is None:
            import torch.distributed as dist
            _node_store_type = _node_store_class(dist.Store)
        _node_stores += 1
        store = _node_store_type("%d/" % _node_stores, seconds, patience)
        # Kept: torch holds only the C++ half, and a Python subclass's
        # methods go with its Python object ("Tried to call pure virtual
        # function").
        _node_store_objects.append(store)
        return store

    create_c10d_store._dist_train = True
    return create_c10d_store


def _os_environ_get(name):
    import os
    return os.environ.get(name)


_stores = {}


def _pass_held(module):
    """subprocess and multiprocessing's children get the held socket."""
    if module.__name__ == "subprocess":
        popen_init = module.Popen.__init__

        def __init__(self, *args, **kwargs):
            fd = _before_child()
            if fd is not None and kwargs.get("close_fds", True):
                kwargs["pass_fds"] = tuple(kwargs.get("pass_fds", ())) + (fd,)
            popen_init(self, *args, **kwargs)

        module.Popen.__init__ = __init__
    elif module.__name__ == "multiprocessing.util":
        spawnv_passfds = module.spawnv_passfds

        def spawnv(path, args, passfds):
            fd = _before_child()
            if fd is not None:
                passfds = tuple(passfds) + (fd,)
            return spawnv_passfds(path, args, passfds)

        module.spawnv_passfds = spawnv


# torchrun's agents unpickle the rendezvous state they read from the store
# (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py, 1.13 to
# 2.14): a state forged by whoever can reach that store could run any code
# as the job's user. Only the classes a rendezvous state is made of are
# let through; any other fails the rendezvous as a corrupt state would.
_RENDEZVOUS_STATE_CLASSES = frozenset((
    ("torch.distributed.elastic.rendezvous.dynamic_rendezvous",
     "_RendezvousState"),
    ("torch.distributed.elastic.rendezvous.dynamic_rendezvous", "_NodeDesc"),
    ("datetime", "datetime"),
    ("datetime", "timedelta"),
    ("datetime", "timezone"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
))


def _state_pickle(pickle):
    """PICKLE, the module, with a loads that refuses every class but a
    rendezvous state's."""
    import io
    import types

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) not in _RENDEZVOUS_STATE_CLASSES:
                raise pickle.UnpicklingError(
                    f"dist-train: the rendezvous state read from the "
                    f"store names {module}.{name}, which no rendezvous "
                    f"state holds: refused, as another program may have "
                    f"written it; see dist_train(8), SECURITY")
            return super().find_class(module, name)

    def loads(data, **kwargs):
        return Unpickler(io.BytesIO(data), **kwargs).load()

    safe = types.ModuleType(pickle.__name__)
    safe.__dict__.update(pickle.__dict__)
    safe.loads = loads
    return safe


def _wants_nccl(backend):
    """Whether init_process_group's BACKEND (None: torch's default) may
    start NCCL."""
    if backend is not None:
        return "nccl" in str(backend).lower()
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def _nccl_dump_pipe(init_process_group):
    import functools

    @functools.wraps(init_process_group)
    def init(*args, **kwargs):
        if _recording and _wants_nccl(_arg(args, kwargs, 0, "backend", None)):
            _dump_pipe()
        return init_process_group(*args, **kwargs)

    init._dist_train = True
    return init


def _patch(module):
    if module.__name__ == "torch.distributed":
        _older_names_go()
    if (module.__name__ == "torch.distributed.distributed_c10d" and
            callable(getattr(module, "init_process_group", None)) and
            not getattr(module.init_process_group, "_dist_train", False)):
        module.init_process_group = _nccl_dump_pipe(module.init_process_group)
    if (module.__name__ == "torch.distributed.rendezvous" and
            _os_environ_get("DIST_TRAIN_STORE") == "tree" and
            callable(getattr(module, "_create_c10d_store", None)) and
            not getattr(module._create_c10d_store, "_dist_train", False)):
        module._create_c10d_store = _tree_store(module._create_c10d_store)
    if module.__name__ in ("subprocess", "multiprocessing.util"):
        _pass_held(module)
        return
    if (module.__name__ ==
            "torch.distributed.elastic.rendezvous.dynamic_rendezvous"):
        import pickle

        if getattr(module, "pickle", None) is pickle:
            module.pickle = _state_pickle(pickle)
        return
    store = getattr(module, "TCPStore", None)
    if not isinstance(store, type) or store in _stores.values():
        return
    if getattr(store, "__module__", "") != "torch._C._distributed_c10d":
        return
    if store not in _stores:
        _stores[store] = _compat_store(store)
    module.TCPStore = _stores[store]


class _TorchDistributedFinder:
    """Patch each torch.distributed module once it has run, and where
    this process holds rank 0's socket, subprocess and multiprocessing."""

    def find_spec(self, name, path=None, target=None):
        if name == "jax":
            _let_go()
            return None
        if name != "torch.distributed" and not name.startswith("torch.distributed."):
            if _held is None or name not in ("subprocess",
                                             "multiprocessing.util"):
                return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        loader.exec_module = exec_module
        return spec


# Each group: the names of one setting across torch releases, its value.
_FLIGHT_RECORDER = (
    (("TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE"), "2000"),
    (("TORCH_NCCL_DUMP_ON_TIMEOUT",), "1"),
    (("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_FR_DUMP_TEMP_FILE"), None),
)


# The first torch whose flight recorder reads the TORCH_FR_* names and
# warns of the TORCH_NCCL_* ones (seen in 2.11.0).
_FR_NAMES_SINCE = (2, 11)

# The dump pipe's names; helper/stacks_collect.c knows the folder's prefix.
_DUMP_PIPE = ("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "TORCH_FR_DEBUG_INFO_PIPE_FILE")
_DUMP_PIPE_FOLDER = "dist-train-nccl-"
# Whether this process set up the flight recorder (not the user, not a
# parent process), and so makes the dump pipe's folder.
_recording = False


def _flight_recorder():
    global _recording
    import os

    folder = os.environ.get("SLURM_DIST_TRAIN_RECORD_DIR")
    step = os.environ.get("DIST_TRAIN_STEP")
    if not folder or not step:
        return
    dump = os.path.join(folder, "dist-train-%s.nccl-rank-" % step)
    for names, value in _FLIGHT_RECORDER:
        if any(name in os.environ for name in names):
            continue
        for name in names:
            os.environ[name] = dump if value is None else value
        _recording = True


def _older_names_go():
    """Where torch reads the TORCH_FR_* names, unset the older ones this
    process set beside them."""
    import os

    if not _recording or _torch_version() < _FR_NAMES_SINCE:
        return
    for names, _ in _FLIGHT_RECORDER:
        if (len(names) == 2 and names[0] in os.environ and
                os.environ[names[0]] == os.environ.get(names[1])):
            del os.environ[names[0]]


def _dump_pipe():
    """The folder of torch's dump pipe, made just before the first NCCL
    process group (torch reads the setting as it makes one), so that
    other programs make none."""
    global _recording
    import os

    if not _recording or any(name in os.environ for name in _DUMP_PIPE):
        return
    _recording = False
    try:
        import atexit
        import tempfile

        folder = tempfile.mkdtemp(prefix=_DUMP_PIPE_FOLDER)
    except OSError:
        return
    atexit.register(_remove_folder, folder, os.getpid())
    for name in _DUMP_PIPE:
        os.environ[name] = os.path.join(folder, "pipe-")


def _remove_folder(folder, owner):
    import os

    if os.getpid() != owner:
        return
    try:
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)
    except OSError:
        pass


# Kept open for faulthandler, which writes into it from a signal handler.
_stacks_file = None


def _stacks_on_signal():
    global _stacks_file
    import os

    if not os.environ.get("DIST_TRAIN_STEP"):
        return
    try:
        import faulthandler
        import signal

        fd = os.memfd_create("dist-train-stacks", os.MFD_CLOEXEC)
        _stacks_file = os.fdopen(fd, "w")
        faulthandler.register(signal.SIGURG, file=_stacks_file,
                              all_threads=True, chain=True)
    except (AttributeError, OSError, RuntimeError, ValueError):
        # No memfd (not Linux, Python < 3.8): this process shows as
        # having no stack, nothing else changes.
        _stacks_file = None


def _own_stacks_fd(text):
    """This process's descriptor of the stacks' file, from the plugin's
    "FD:REGION": the node's file, which every task of the node holds as FD,
    opened again for this process alone (its own offset) at the task's
    region, SLURM_LOCALID regions in; the node's descriptor is closed. A
    plain "FD" is this process's own already. None where FD is not the
    plugin's file (a wrapper script may have reused the number)."""
    import os

    fd, _, region = text.partition(":")
    fd = int(fd)
    if not region:
        return fd
    link = "/proc/self/fd/%d" % fd
    if not os.readlink(link).startswith("/memfd:dist-train-exit-stacks"):
        return None
    own = os.open(link, os.O_RDWR | os.O_CLOEXEC)
    os.close(fd)
    os.lseek(own, int(os.environ.get("SLURM_LOCALID", "0")) * int(region),
             os.SEEK_SET)
    return own


def _stacks_on_sigterm():
    """Every thread's stack into the file slurmstepd holds for this task
    (DIST_TRAIN_EXIT_STACKS_FD, plugin/exit_stacks.c) when SIGTERM comes,
    then SIGTERM does what it did before: faulthandler chains to the
    handler under it. A handler the program sets later goes under it too,
    so that a program that checkpoints on SIGTERM still does. A forked
    child (a DataLoader worker) gets the signal too: it writes nothing."""
    import os

    text = os.environ.pop("DIST_TRAIN_EXIT_STACKS_FD", None)
    if text is None:
        return
    try:
        import faulthandler
        import signal
        import stat

        fd = _own_stacks_fd(text)
        if fd is None or not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        # This process's own: a program it runs gets neither the file
        # nor its name.
        os.set_inheritable(fd, False)
        os.write(fd, ("dist-train: the stacks of rank %s (pid %d) when "
                      "SIGTERM came, written by Python's faulthandler\n" % (
                          os.environ.get("RANK", "?"), os.getpid())
                      ).encode())

        def arm():
            faulthandler.register(signal.SIGTERM, file=fd, all_threads=True,
                                  chain=True)

        arm()
    except (AttributeError, OSError, RuntimeError, ValueError):
        return
    set_handler = signal.signal

    def signal_on_top(signalnum, handler):
        if signalnum != signal.SIGTERM:
            return set_handler(signalnum, handler)
        # faulthandler puts back what was under it, the program's
        # handler goes there, and faulthandler on top again.
        faulthandler.unregister(signal.SIGTERM)
        try:
            return set_handler(signalnum, handler)
        finally:
            arm()

    signal_on_top.__doc__ = set_handler.__doc__
    signal.signal = signal_on_top
    os.register_at_fork(
        after_in_child=lambda: faulthandler.unregister(signal.SIGTERM))
    _stacks_on_exception(fd)


def _timed_out_in(value, frames):
    """The torch.distributed call (all_reduce, barrier, ...) whose timeout
    VALUE is, or None: a gloo collective's ("Timed out waiting 5000ms for
    recv operation"), a store's ("Timeout waiting for key"), raised from
    within torch.distributed. The name is the outermost frame of
    distributed_c10d.py, the call the program made."""
    text = str(value).lower()
    if "timed out" not in text and "timeout" not in text:
        return None
    name = None
    for frame in frames:
        path = frame.filename
        if "/torch/distributed/" not in path:
            continue
        if path.endswith("/distributed_c10d.py"):
            return frame.name
        name = name or frame.name
    return name


def _stacks_on_exception(fd):
    """An uncaught exception's frames into the file of this task's end,
    as faulthandler writes a thread's (innermost first), after a line that
    says what it was and, for a collective's timeout, "its NAME timed
    out": srun reads that line to say the rank waited for others rather
    than caused the failure (common/stack_report.h), and dist-train why
    reads the frames. The hook that was there runs after it."""
    import os
    import threading
    import traceback

    under = sys.excepthook

    def record(kind, value, tb):
        try:
            frames = traceback.extract_tb(tb)
            name = _timed_out_in(value, frames)
            first = (str(value).splitlines() or [""])[0][:200]
            lines = ["dist-train: rank %s (pid %d) ended by an uncaught %s: "
                     "%s" % (os.environ.get("RANK", "?"), os.getpid(),
                             kind.__name__, first)]
            if name and name.isidentifier():
                lines.append("dist-train: its %s timed out" % name)
            lines.append("Current thread 0x%016x (most recent call first):"
                         % threading.get_ident())
            for frame in reversed(frames):
                lines.append('  File "%s", line %s in %s'
                             % (frame.filename, frame.lineno, frame.name))
            os.write(fd, ("\n".join(lines) + "\n").encode(
                "utf-8", "replace"))
        except Exception:
            pass
        under(kind, value, tb)

    sys.excepthook = record


def _run_hidden_sitecustomize():
    import importlib.machinery
    import importlib.util
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_held = _held_store_socket()
if _held is not None:
    import os as _os
    _os.register_at_fork(before=_before_child)
    for _name in ("subprocess", "multiprocessing.util"):
        if _name in sys.modules:
            _pass_held(sys.modules[_name])
if not any(isinstance(f, _TorchDistributedFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _TorchDistributedFinder())
_flight_recorder()
_stacks_on_signal()
_stacks_on_sigterm()
_run_hidden_sitecustomize()
