#!/usr/bin/python3
"""A DeepSpeed user's own torch.distributed program, as the dsrun e2e tests run it.

Reads its identity the way DeepSpeed scripts do (argparse `--local_rank`, then the environment),
joins a gloo group through env:// (MASTER_ADDR/PORT, RANK, WORLD_SIZE), does an allreduce and one
DDP training step of a small model, checks the DDP result against the same step computed in this
process without communication, and writes what it saw to OUT/rank<RANK>.txt, one `key<TAB>value`
line each (values as JSON). Exit status 0 only when every check passed; a failed check prints why
and exits 1.

    python3 torch_ddp.py --out DIR [--local_rank N]
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F


def batch_for(rank):
    gen = torch.Generator().manual_seed(1000 + rank)
    return torch.randn(8, 4, generator=gen), torch.randn(8, 2, generator=gen)


def make_model():
    torch.manual_seed(0)  # the same initial weights on every rank
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def reference_step(world):
    """The DDP step without communication: mean of every rank's gradient, one SGD step."""
    model = make_model()
    grads = [torch.zeros_like(p) for p in model.parameters()]
    for r in range(world):
        model.zero_grad()
        x, y = batch_for(r)
        F.mse_loss(model(x), y).backward()
        for g, p in zip(grads, model.parameters()):
            g += p.grad / world
    with torch.no_grad():
        for g, p in zip(grads, model.parameters()):
            p -= 0.1 * g
    return [p.detach().flatten().tolist() for p in model.parameters()]


def fail(msg):
    print(f"torch_ddp: rank {os.environ.get('RANK')}: {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    argv = list(sys.argv[1:])
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", -1)))
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.local_rank != int(os.environ["LOCAL_RANK"]):
        fail(f"--local_rank={args.local_rank} but LOCAL_RANK={os.environ['LOCAL_RANK']}")

    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank != int(os.environ["RANK"]) or world != int(os.environ["WORLD_SIZE"]):
        fail(f"group rank {rank}/{world} differs from RANK/WORLD_SIZE")

    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    if value.item() != world * (world + 1) / 2:
        fail(f"allreduce gave {value.item()}, expected {world * (world + 1) / 2}")

    model = torch.nn.parallel.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = batch_for(rank)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    params = [p.detach().flatten().tolist() for p in model.parameters()]
    ref = reference_step(world)
    worst = max(abs(a - b) for pp, rr in zip(params, ref) for a, b in zip(pp, rr))
    if worst > 1e-6:
        fail(f"DDP step differs from the reference step by {worst}")

    names = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE",
             "MASTER_ADDR", "MASTER_PORT", "USERPROG_MARK", "SSH_CONNECTION"]
    out = {"argv": argv, "allreduce": value.item(), "loss": loss.item(), "params": params}
    out.update({k: os.environ.get(k) for k in names})
    os.makedirs(args.out, exist_ok=True)
    tmp = os.path.join(args.out, f".rank{rank}.tmp")
    with open(tmp, "w") as f:
        f.writelines(f"{k}\t{json.dumps(v)}\n" for k, v in out.items())
    os.replace(tmp, os.path.join(args.out, f"rank{rank}.txt"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
