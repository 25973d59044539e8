#!/usr/bin/env python3
"""A small DistributedDataParallel training that needs nothing but what
`srun --dist-train` puts in its environment.

    srun -N4 -n8 --dist-train python3 train_ddp.py

init_process_group() reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT;
LOCAL_RANK picks the GPU. It uses NCCL on GPUs and gloo on CPUs.
"""
import argparse
import os
import socket

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def say(line):
    """One write per line: with PYTHONUNBUFFERED, print() writes the text
    and its newline apart, and torchrun --tee, copying every worker's log
    as it grows, could put another worker's line in between."""
    print(line + "\n", end="", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--samples", type=int, default=2048)
    args = parser.parse_args()

    use_cuda = torch.cuda.is_available()
    local_rank = int(os.environ["LOCAL_RANK"])
    if use_cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")

    # No arguments: the environment says who we are and where rank 0 is.
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    say(f"rank {rank}/{world} local_rank {local_rank} on "
        f"{socket.gethostname()}: master "
        f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}")
    # Say which device this runs on: a job that asked for no GPUs (no
    # --gpus-per-node or --gres=gpu:N) trains on CPU, and says so.
    if rank == 0:
        if use_cuda:
            say(f"training on GPUs ({torch.cuda.get_device_name(device)}), "
                f"backend nccl")
        elif "CUDA_VISIBLE_DEVICES" in os.environ:
            say("training on CPUs, backend gloo: Slurm gave the step GPUs "
                f"{os.environ['CUDA_VISIBLE_DEVICES']}, but torch sees none "
                "(a CPU-only torch, or no NVIDIA driver on this node)")
        else:
            say("training on CPUs, backend gloo: the step has no GPUs; "
                "ask for them with --gpus-per-node=N (or --gres=gpu:N)")

    # The same synthetic data on every rank: y = 3x - 2, plus noise.
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(args.samples, 1, generator=gen)
    y = 3 * x - 2 + 0.01 * torch.randn(args.samples, 1, generator=gen)
    sampler = DistributedSampler(TensorDataset(x, y), shuffle=True, seed=0)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size,
                        sampler=sampler)

    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(1, 1).to(device),
                device_ids=[local_rank] if use_cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.MSELoss()

    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        total = torch.zeros(2, device=device)
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            total += torch.stack([loss.detach() * len(xb),
                                  torch.tensor(float(len(xb)),
                                               device=device)])
        dist.all_reduce(total)
        if rank == 0:
            say(f"epoch {epoch}: loss {(total[0] / total[1]).item():.4f}")

    if rank == 0:
        w, b = model.module.weight.item(), model.module.bias.item()
        say(f"done: learned y = {w:.2f}x {b:+.2f} (true: y = 3x - 2) "
            f"with {world} ranks")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
