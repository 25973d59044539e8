#!/usr/bin/env python3
"""Each framework's own Slurm detection, applied to the environments of the
tasks of one real srun step: does it derive the rank, local rank, world size
and coordinator that --dist-train gave the task?

None of these frameworks is packaged in Debian, so each one's rules are
written down below as a small function, with the file they come from (read
at the versions named). A function returns what the framework would derive
from one task's environment, raises Refused where the framework itself
stops with an error, or NotApplicable where it would not be in play.

Usage: frameworks.py LAYOUT DIR
  DIR: one file per task of the step, its os.environ as JSON.
Prints "MEASURED LAYOUT FRAMEWORK VERDICT [detail]" for each framework and
exits 1 if any verdict differs from EXPECTED (the table in doc/user-guide.md and
dist_train(8)), 2 on unusable input.
"""

import json
import os
import re
import sys


class Refused(Exception):
    """The framework stops with its own error message."""


class NotApplicable(Exception):
    """The framework would not use Slurm's or the plugin's variables here."""


def first_range_host(nodelist):
    """Lightning's resolve_root_node_address (slurm.py): the first host,
    with a bracketed range reduced to its first index."""
    nodes = re.sub(r"\[(.*?)[,-].*\]", r"\1", nodelist)
    nodes = re.sub(r"\[(.*?)\]", r"\1", nodes)
    return nodes.split(" ")[0].split(",")[0]


def jax_first_host(nodelist):
    """JAX's SlurmCluster.get_coordinator_address: prefix plus the first
    number of the first bracket, zero padding kept."""
    ind = next((i for i, ch in enumerate(nodelist) if ch in ",["),
               len(nodelist))
    if ind == len(nodelist) or nodelist[ind] == ",":
        return nodelist[:ind]
    suffix = nodelist[ind + 1:]
    end = next((i for i, ch in enumerate(suffix) if ch in ",-]"), None)
    return nodelist[:ind] + suffix[:end]


def tf_expand_hostlist(hostlist):
    """TensorFlow's expand_hostlist: int() drops zero padding."""
    hosts = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", hostlist):
        m = re.match(r"([^\[]+)(?:\[([^\]]*)\])?$", part)
        prefix, ranges = m.group(1), m.group(2)
        if ranges is None:
            hosts.append(prefix)
            continue
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            for n in range(int(lo), int(hi or lo) + 1):
                hosts.append("%s%d" % (prefix, n))
    return hosts


def tf_expand_tasks_per_node(spec):
    """TensorFlow's expand_tasks_per_node: '2(x3),1' -> [2, 2, 2, 1]."""
    counts = []
    for part in spec.split(","):
        m = re.match(r"(\d+)(?:\(x(\d+)\))?$", part)
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts


def need(env, *names):
    missing = [n for n in names if n not in env]
    if missing:
        raise NotApplicable("%s not set" % ", ".join(missing))


def lightning(env, step):
    """Lightning >= 2.1, SLURMEnvironment
    (src/lightning/fabric/plugins/environments/slurm.py, 2.6.5)."""
    del step
    if "TORCHELASTIC_RUN_ID" in env:
        raise NotApplicable("TorchElasticEnvironment is chosen first")
    if "SLURM_NTASKS" not in env or \
            env.get("SLURM_JOB_NAME") in ("bash", "interactive"):
        raise NotApplicable("not detected")
    # _validate_srun_variables
    if int(env["SLURM_NTASKS"]) > 1 and "SLURM_NTASKS_PER_NODE" not in env:
        raise Refused("RuntimeError: --ntasks without --ntasks-per-node")
    addr = env.get("MASTER_ADDR") or \
        first_range_host(env.get("SLURM_NODELIST", "127.0.0.1"))
    if "MASTER_PORT" in env:
        port = int(env["MASTER_PORT"])
    else:
        port = 15000 + int(env["SLURM_JOB_ID"][-4:])
    return dict(rank=int(env["SLURM_PROCID"]),
                local_rank=int(env["SLURM_LOCALID"]),
                world=int(env["SLURM_NTASKS"]), coordinator=(addr, port))


def jax_slurm(env, step, honour_coordinator_env=True):
    """JAX >= 0.8.1: SlurmCluster (jax/_src/clusters/slurm_cluster.py),
    with JAX_COORDINATOR_ADDRESS read first (jax/_src/distributed.py)."""
    del step
    need(env, "SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS",
         "SLURM_PROCID", "SLURM_LOCALID")
    coord = env.get("JAX_COORDINATOR_ADDRESS") \
        if honour_coordinator_env else None
    if coord:
        host, _, port = coord.rpartition(":")
        host = host.strip("[]")
    else:
        host = jax_first_host(env["SLURM_STEP_NODELIST"])
        port = env.get("JAX_COORDINATOR_PORT") or \
            int(env["SLURM_JOB_ID"]) % 4096 + 61440
    return dict(rank=int(env["SLURM_PROCID"]),
                local_rank=int(env["SLURM_LOCALID"]),
                world=int(env["SLURM_NTASKS"]),
                coordinator=(host, int(port)))


def jax_without_plugin_value(env, step):
    """The same, had the plugin not set JAX_COORDINATOR_ADDRESS."""
    return jax_slurm(env, step, honour_coordinator_env=False)


def tensorflow(env, step):
    """TensorFlow's SlurmClusterResolver
    (tensorflow/python/distribute/cluster_resolver/
    slurm_cluster_resolver.py): block packing over hosts sorted as
    strings; each task's address is HOST:8888+slot. The collective leader
    is task 0. It has no single port, so only hosts are compared."""
    del step
    need(env, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST",
         "SLURM_STEP_TASKS_PER_NODE")
    hosts = tf_expand_hostlist(env["SLURM_STEP_NODELIST"])
    counts = tf_expand_tasks_per_node(env["SLURM_STEP_TASKS_PER_NODE"])
    slots = []
    for host, n in sorted(zip(hosts, counts)):
        slots += [(host, slot) for slot in range(n)]
    rank = int(env["SLURM_PROCID"])
    if len(slots) != int(env["SLURM_STEP_NUM_TASKS"]):
        raise Refused("RuntimeError: tasks per node do not add up")
    return dict(rank=rank, local_rank=slots[rank][1],
                world=int(env["SLURM_STEP_NUM_TASKS"]),
                coordinator=(slots[0][0], None), own_host=slots[rank][0])


def accelerate(env, step):
    """Accelerate: no Slurm code; LOCAL_RANK selects the distributed path
    (src/accelerate/state.py), then torch's env:// reads the rest."""
    del step
    if int(env.get("LOCAL_RANK", -1)) == -1:
        raise NotApplicable("LOCAL_RANK not set: single process")
    return torch_env(env)


def torch_env(env):
    need(env, "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    return dict(rank=int(env["RANK"]),
                local_rank=int(env.get("LOCAL_RANK", 0)),
                world=int(env["WORLD_SIZE"]),
                coordinator=(env["MASTER_ADDR"], int(env["MASTER_PORT"])))


def deepspeed(env, step):
    """DeepSpeed's init_distributed (deepspeed/comm/comm.py): env:// when
    all five variables are set, else mpi_discovery, which overwrites all
    five (port 29500) and needs mpi4py."""
    five = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK")
    if all(v in env for v in five):
        return torch_env(env)
    mpi = mpi_world(env, step)
    return dict(mpi, coordinator=(mpi["coordinator"][0], 29500))


def mpi_world(env, step):
    """Open MPI under srun --mpi=pmix takes its rank from PMIx (PMIX_RANK,
    set by Slurm's mpi/pmix); its local rank is the rank among the node's
    processes in world order (MPI_COMM_TYPE_SHARED split, key 0). This is
    what mpi4py and Horovod's MPI controller
    (horovod/common/mpi/mpi_context.cc) see. No coordinator: PMIx wires."""
    need(env, "PMIX_RANK")
    rank = int(env["PMIX_RANK"])
    host = env["SLURMD_NODENAME"]
    peers = sorted(int(e["PMIX_RANK"]) for e in step
                   if e.get("SLURMD_NODENAME") == host and "PMIX_RANK" in e)
    rank0 = [e["SLURMD_NODENAME"] for e in step
             if e.get("PMIX_RANK") == "0"]
    return dict(rank=rank, local_rank=peers.index(rank), world=len(step),
                coordinator=(rank0[0] if rank0 else None, None))


def horovod_mpi(env, step):
    """Horovod's MPI controller (no Slurm code; horovod/common)."""
    return mpi_world(env, step)


FRAMEWORKS = [
    ("lightning", lightning),
    ("jax", jax_slurm),
    ("jax-own-detection", jax_without_plugin_value),
    ("tensorflow-slurm-resolver", tensorflow),
    ("accelerate", accelerate),
    ("deepspeed", deepspeed),
    ("mpi4py-horovod-mpi", horovod_mpi),
]

A, R, D, N = "agrees", "refuses", "disagrees", "n/a"
# What the table in doc/user-guide.md says, per layout of tests/integration/frameworks.sh.
EXPECTED = {
    "block": dict(lightning=A, tensorflow_slurm_resolver=A),
    "uneven": dict(lightning=R, tensorflow_slurm_resolver=A),
    "cyclic": dict(lightning=A, tensorflow_slurm_resolver=D),
    "plane": dict(lightning=A, tensorflow_slurm_resolver=D),
    "arbitrary": dict(lightning=R, tensorflow_slurm_resolver=D),
    "pmix-cyclic": dict(lightning=A, tensorflow_slurm_resolver=D,
                        mpi4py_horovod_mpi=A),
    "pmix-arbitrary": dict(lightning=R, tensorflow_slurm_resolver=D,
                           mpi4py_horovod_mpi=A),
}
DEFAULTS = dict(jax=A, jax_own_detection=D, accelerate=A, deepspeed=A,
                mpi4py_horovod_mpi=N)


def expected(layout, name):
    key = name.replace("-", "_")
    return EXPECTED[layout].get(key, DEFAULTS.get(key))


def dist_train_errors(step):
    """--dist-train itself against what Slurm did."""
    errors = []
    rank0 = [e["SLURMD_NODENAME"] for e in step if e["SLURM_PROCID"] == "0"]
    ports = {e.get("MASTER_PORT") for e in step}
    if len(ports) != 1:
        errors.append("tasks disagree on MASTER_PORT: %s" % sorted(ports))
    for e in step:
        want = dict(RANK=e["SLURM_PROCID"], LOCAL_RANK=e["SLURM_LOCALID"],
                    WORLD_SIZE=str(len(step)), MASTER_ADDR=rank0[0])
        for k, v in want.items():
            if e.get(k) != v:
                errors.append("task %s: %s=%s, Slurm says %s" %
                              (e["SLURM_PROCID"], k, e.get(k), v))
    return errors


def verdict(fn, step):
    for env in step:
        try:
            got = fn(env, step)
        except Refused as e:
            return R, str(e)
        except NotApplicable as e:
            return N, str(e)
        want = dict(rank=int(env["RANK"]),
                    local_rank=int(env["LOCAL_RANK"]),
                    world=int(env["WORLD_SIZE"]))
        for k, v in want.items():
            if got[k] != v:
                return D, "task %s: %s %s, dist-train %s" % (
                    env["SLURM_PROCID"], k, got[k], v)
        host, port = got["coordinator"]
        if host is not None and host != env["MASTER_ADDR"]:
            return D, "task %s: coordinator host %s, dist-train %s" % (
                env["SLURM_PROCID"], host, env["MASTER_ADDR"])
        if port is not None and port != int(env["MASTER_PORT"]):
            return D, "task %s: coordinator port %s, dist-train %s" % (
                env["SLURM_PROCID"], port, env["MASTER_PORT"])
        own = got.get("own_host")
        if own is not None and own != env["SLURMD_NODENAME"]:
            return D, "task %s runs on %s, its peers dial %s" % (
                env["SLURM_PROCID"], env["SLURMD_NODENAME"], own)
    return A, ""


def main():
    layout, folder = sys.argv[1:3]
    step = []
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            step.append(json.load(f))
    if not step or layout not in EXPECTED:
        print("no tasks, or unknown layout %s" % layout)
        return 2
    step.sort(key=lambda e: int(e["SLURM_PROCID"]))
    status = 0
    errors = dist_train_errors(step)
    print("MEASURED %s dist-train %s %s" % (
        layout, D if errors else A, "; ".join(errors[:3])))
    if errors:
        status = 1
    for name, fn in FRAMEWORKS:
        got, detail = verdict(fn, step)
        want = expected(layout, name)
        print("MEASURED %s %s %s%s%s" % (layout, name, got,
                                        " (" + detail + ")" if detail else "",
                                        "" if got == want else
                                        " -- the table says " + want))
        if got != want:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
