#!/usr/bin/env python3
"""PyTorch peer of bench_inference_bench: the same GPT-2 (random weights, GPT-2 124M shapes by
default, tied head) written with plain torch ops and a preallocated KV cache per layer, timed the
same way: sequences prefilled with --prompt tokens, then --steps batched decode steps (best of
--reps), and a --prefill token prompt. Threads: torch.set_num_threads(--threads). Weights fp32 or
bf16 (torch's CPU bf16 matmuls). No downloads. Prints one line per figure, prefixed "torch"."""
import argparse
import math
import time

import torch
import torch.nn.functional as F


class Gpt2:
    def __init__(self, L, C, NH, V, T, dtype):
        g = torch.Generator().manual_seed(1)

        def w(*shape, std=0.02):
            return (torch.randn(*shape, generator=g) * std).to(dtype)

        self.L, self.C, self.NH, self.T, self.dtype = L, C, NH, T, dtype
        self.wte, self.wpe = w(V, C), w(T, C)
        s = 0.02 / math.sqrt(2 * L)
        self.blocks = []
        for _ in range(L):
            self.blocks.append(dict(
                ln1w=torch.ones(C, dtype=dtype), ln1b=torch.zeros(C, dtype=dtype),
                qkvw=w(3 * C, C), qkvb=torch.zeros(3 * C, dtype=dtype),
                projw=w(C, C, std=s), projb=torch.zeros(C, dtype=dtype),
                ln2w=torch.ones(C, dtype=dtype), ln2b=torch.zeros(C, dtype=dtype),
                fcw=w(4 * C, C), fcb=torch.zeros(4 * C, dtype=dtype),
                fcprojw=w(C, 4 * C, std=s), fcprojb=torch.zeros(C, dtype=dtype)))
        self.lnfw, self.lnfb = torch.ones(C, dtype=dtype), torch.zeros(C, dtype=dtype)

    def new_cache(self, B):
        hs = self.C // self.NH
        shape = (B, self.NH, self.T, hs)
        return [(torch.zeros(shape, dtype=self.dtype), torch.zeros(shape, dtype=self.dtype))
                for _ in range(self.L)]

    def forward(self, idx, pos, cache, last_only=True):
        """idx [B, t] tokens at positions pos..pos+t-1 of every sequence; returns logits."""
        B, t = idx.shape
        C, NH = self.C, self.NH
        hs = C // NH
        x = self.wte[idx] + self.wpe[pos:pos + t]
        mask = None
        if t > 1:
            mask = torch.ones(t, pos + t, dtype=torch.bool).tril(diagonal=pos)
        for blk, (kc, vc) in zip(self.blocks, cache):
            h = F.layer_norm(x, (C,), blk["ln1w"], blk["ln1b"])
            q, k, v = F.linear(h, blk["qkvw"], blk["qkvb"]).split(C, dim=2)
            q = q.view(B, t, NH, hs).transpose(1, 2)
            kc[:, :, pos:pos + t] = k.view(B, t, NH, hs).transpose(1, 2)
            vc[:, :, pos:pos + t] = v.view(B, t, NH, hs).transpose(1, 2)
            K, Vv = kc[:, :, :pos + t], vc[:, :, :pos + t]
            att = (q @ K.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            if mask is not None:
                att = att.masked_fill(~mask, float("-inf"))
            y = (att.softmax(dim=-1) @ Vv).transpose(1, 2).reshape(B, t, C)
            x = x + F.linear(y, blk["projw"], blk["projb"])
            h = F.layer_norm(x, (C,), blk["ln2w"], blk["ln2b"])
            h = F.gelu(F.linear(h, blk["fcw"], blk["fcb"]), approximate="tanh")
            x = x + F.linear(h, blk["fcprojw"], blk["fcprojb"])
        if last_only:
            x = x[:, -1:]
        x = F.layer_norm(x, (C,), self.lnfw, self.lnfb)
        return F.linear(x, self.wte)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--dtype", nargs="+", default=["fp32", "bf16"])
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--n_layer", type=int, default=12)
    ap.add_argument("--n_embd", type=int, default=768)
    ap.add_argument("--n_head", type=int, default=12)
    ap.add_argument("--vocab_size", type=int, default=50257)
    ap.add_argument("--seq_len", type=int, default=1024)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    g = torch.Generator().manual_seed(3)
    with torch.inference_mode():
        for name in a.dtype:
            dt = torch.bfloat16 if name == "bf16" else torch.float32
            m = Gpt2(a.n_layer, a.n_embd, a.n_head, a.vocab_size, a.seq_len, dt)
            for B in a.batch:
                best = float("inf")
                for _ in range(a.reps):
                    cache = m.new_cache(B)
                    m.forward(torch.randint(0, a.vocab_size, (B, a.prompt), generator=g), 0,
                              cache)
                    pos = a.prompt
                    tok = torch.randint(0, a.vocab_size, (B, 1), generator=g)
                    m.forward(tok, pos, cache)  # warm-up step
                    pos += 1
                    t0 = time.perf_counter()
                    for _ in range(a.steps):
                        tok = torch.randint(0, a.vocab_size, (B, 1), generator=g)
                        m.forward(tok, pos, cache)
                        pos += 1
                    best = min(best, (time.perf_counter() - t0) / a.steps)
                print(f"torch decode {name} batch {B:2d}: {B / best:8.1f} tokens/s  "
                      f"{best * 1e3:7.2f} ms/step")
            if a.prefill > 0:
                best = float("inf")
                for _ in range(a.reps):
                    cache = m.new_cache(1)
                    toks = torch.randint(0, a.vocab_size, (1, a.prefill), generator=g)
                    t0 = time.perf_counter()
                    m.forward(toks, 0, cache)
                    best = min(best, time.perf_counter() - t0)
                print(f"torch prefill {name} {a.prefill} tokens: {a.prefill / best:8.1f} tokens/s")


if __name__ == "__main__":
    main()
