#!/usr/bin/env python3
"""Fault-tolerant training under torchrun, started by srun with nothing on
torchrun's command line:

    srun --no-kill -N4 --ntasks-per-node=1 \\
         --dist-train=torchrun,elastic=2:4,restarts=3 \\
         torchrun train_elastic.py --snapshot /shared/snapshot.pt

Each epoch rank 0 saves a snapshot (model, optimizer, next epoch) to a
shared path; every start, first or after a restart, resumes from it. A
lost node makes the other workers fail in their next collective, their
agents restart them, and the rendezvous continues with the nodes that are
left, while at least MIN remain. The same loop resumes after a Slurm
requeue (SLURM_RESTART_COUNT).
"""
import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def say(line):
    """One write per line: with PYTHONUNBUFFERED, print() writes the text
    and its newline apart, and torchrun --tee, copying every worker's log
    as it grows, could put another worker's line in between."""
    print(line + "\n", end="", flush=True)


def load_snapshot(path, model, opt):
    """Resume: the epoch to start from (0 without a snapshot)."""
    if not os.path.exists(path):
        return 0
    snap = torch.load(path, map_location="cpu")
    model.load_state_dict(snap["model"])
    opt.load_state_dict(snap["optimizer"])
    return snap["epoch"]


def save_snapshot(path, model, opt, epoch):
    """Write then rename, so a crash never leaves half a snapshot."""
    tmp = f"{path}.tmp.{os.getpid()}"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                "epoch": epoch}, tmp)
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--snapshot", required=True,
                        help="snapshot path, on storage all nodes share")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--epoch-seconds", type=float, default=0.0,
                        help="extra time per epoch, to watch it run")
    args = parser.parse_args()

    use_cuda = torch.cuda.is_available()
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank) if use_cuda else "cpu"
    if use_cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    start = load_snapshot(args.snapshot, model, opt)
    model = DDP(model, device_ids=[local_rank] if use_cuda else None)
    # torchrun counts its restarts; Slurm counts requeues of the job.
    say(f"start rank={rank} world={world} host={socket.gethostname()} "
        f"restart={os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')} "
        f"requeue={os.environ.get('SLURM_RESTART_COUNT', '0')} "
        f"epoch={start}")
    # Agent and worker pids by node, for whoever wants to kill one.
    with open(f"{args.snapshot}.pids.{socket.gethostname()}", "a") as f:
        f.write(f"{os.getppid()} {os.getpid()}\n")

    gen = torch.Generator().manual_seed(rank)
    for epoch in range(start, args.epochs):
        x = torch.randn(256, 8, generator=gen).to(device)
        y = x.sum(dim=1, keepdim=True)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        time.sleep(args.epoch_seconds)
        if rank == 0:
            save_snapshot(args.snapshot, model.module, opt, epoch + 1)
            say(f"epoch {epoch + 1}/{args.epochs} world={world} "
                f"loss={total.item() / world:.4f}")

    dist.barrier()
    if rank == 0:
        say(f"done: {args.epochs} epochs, final world {world}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
