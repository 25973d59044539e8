# The step's store behind the node tree (store=tree): a gloo
# all_reduce, a second process group, a barrier, then the whole start
# again after destroy_process_group (a new store's keys are its own); then
# a world of the task's own.
import socket
import sys

import torch
import torch.distributed as dist

# With torch's own store (store=torch) it starts once: a second start on
# the step's port hung on torch 1.13 here, as it did before the tree.
attempts = int(sys.argv[1]) if len(sys.argv) > 1 else 2
for attempt in range(1, attempts + 1):
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    evens = dist.new_group(list(range(0, world, 2)))
    sub = torch.tensor([1.0])
    if rank % 2 == 0:
        dist.all_reduce(sub, group=evens)
    dist.barrier()
    hook = sys.modules.get("sitecustomize")
    stores = len(getattr(hook, "_node_store_objects", []))
    print(f"TREE attempt={attempt} rank={rank} world={world} "
          f"sum={int(t.item())} evens={int(sub.item())} stores={stores} "
          f"host={socket.gethostname()}", flush=True)
    dist.destroy_process_group()

# A world of this task's own (its own port, one rank): torch's store, not
# the step's tree.
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                        rank=0, world_size=1)
t = torch.tensor([1.0])
dist.all_reduce(t)
stores = len(getattr(sys.modules.get("sitecustomize"), "_node_store_objects",
                     []))
print(f"SOLO rank={rank} sum={int(t.item())} stores={stores}", flush=True)
dist.destroy_process_group()
