# Joins the process group with nothing but the environment, sums the ranks.
import os
import socket

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank)])
dist.all_reduce(t)
print(f"ALLREDUCE rank={rank} world={world} sum={int(t.item())} "
      f"host={socket.gethostname()} master={os.environ['MASTER_ADDR']}:"
      f"{os.environ['MASTER_PORT']}", flush=True)
dist.destroy_process_group()
