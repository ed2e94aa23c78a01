"""PyTorch peer for bench/cpu_train.sh: GPT-2 (llm.c / nanoGPT layout: tied wte, GELU-tanh MLP,
pre-LayerNorm, causal attention by explicit softmax as torch 1.13 has no fused SDPA) trained
with AdamW on random tokens, on the CPU, with R ranks (gloo DDP) x N threads each. fp32, or
bf16 through torch.autocast (weights and optimizer stay fp32). Prints one JSON line:
tokens/s over steps 2..S (the first step allocates), global batch and the loss. Usage:
  /usr/bin/python3 bench/torch_gpt2_train.py --ranks R --threads N --batch B --seq T
      [--steps S] [--dtype fp32|bf16] [--layers L --embd C --heads H --vocab V]
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, h, t):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.fcproj = nn.Linear(4 * c, c)
        self.mask = torch.tril(torch.ones(t, t, dtype=torch.bool))  # not a buffer: DDP/gloo skip it

    def attn(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.h, c // self.h).transpose(1, 2)
        k = k.view(b, t, self.h, c // self.h).transpose(1, 2)
        v = v.view(b, t, self.h, c // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).contiguous().view(b, t, c))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, H, T, V):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H, T) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        for m in self.modules():  # GPT-2's init: N(0, 0.02), zero biases
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, idx, tgt):
        t = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.t()  # tied head
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt.view(-1))


def worker(rank, a):
    torch.set_num_threads(a.threads)
    if a.ranks > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(a.port))
        torch.distributed.init_process_group("gloo", rank=rank, world_size=a.ranks)
    torch.manual_seed(1234)
    model = GPT(a.layers, a.embd, a.heads, a.seq, a.vocab)
    nparams = sum(p.numel() for p in model.parameters())
    if a.ranks > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    micro = a.batch // a.ranks
    g = torch.Generator().manual_seed(rank)
    times, loss = [], None
    for _ in range(a.steps):
        idx = torch.randint(0, a.vocab, (micro, a.seq), generator=g)
        tgt = torch.randint(0, a.vocab, (micro, a.seq), generator=g)
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            loss = model(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    if rank == 0:
        timed = times[1:] if len(times) > 1 else times
        step = sum(timed) / len(timed)
        print(json.dumps({"peer": f"torch {torch.__version__}", "ranks": a.ranks,
                          "threads": a.threads, "dtype": a.dtype, "params": nparams,
                          "tokens_per_sec": a.batch * a.seq / step, "step_ms": step * 1e3,
                          "steps_timed": len(timed), "loss": float(loss)}), flush=True)
    if a.ranks > 1:
        torch.distributed.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=4, help="global batch (sequences per step)")
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--embd", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--port", type=int, default=29700)
    a = p.parse_args()
    if a.batch % a.ranks:
        sys.exit(f"--batch {a.batch} is not a multiple of --ranks {a.ranks}")
    if a.ranks == 1:
        worker(0, a)
    else:
        torch.multiprocessing.spawn(worker, args=(a,), nprocs=a.ranks)


if __name__ == "__main__":
    main()
