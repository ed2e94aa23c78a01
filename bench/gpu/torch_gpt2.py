#!/usr/bin/env python3
"""GPT-2 training throughput in plain PyTorch: the reference dsrt's GPU path is measured against.

A nanoGPT-style GPT-2 written here (token + position embedding, pre-LayerNorm blocks with causal
F.scaled_dot_product_attention, tanh-GELU MLP, final LayerNorm, head tied to the token
embedding), trained on synthetic random tokens with bf16 autocast and fused AdamW, gradient
clipping 1.0 (as dsrt's default plan). Defaults are GPT-2 124M at B=16, T=1024. For each mode
(eager, then compile = torch.compile(model)) it runs --warmup untimed steps, then --steps steps
timed with CUDA events, and prints one line per mode:

  torch eager: tokens/s=..., step_ms=..., mfu=...
  torch compile: tokens/s=..., step_ms=..., mfu=...     (or "torch compile: SKIPPED (...)")

MFU = tokens/s x flops_per_token / --peak_tflops (989 = H100/H200 SXM dense bf16), with
flops_per_token = 6N + 12 L C T and N the parameters less the position table (nanoGPT's
estimate_mfu). --json FILE writes the results. Exit 2 without a CUDA device; --device cpu exists
only to test this script on a machine without one (tiny shapes; no MFU meaning).

Usage: torch_gpt2.py [--batch 16] [--seq_len 1024] [--n_layer 12] [--n_head 12] [--n_embd 768]
                     [--vocab 50257] [--steps 20] [--warmup 5] [--modes eager,compile]
                     [--json FILE] [--peak_tflops 989] [--device cuda|cpu]
Not a trainer (no data, no eval, no checkpoint) and not a correctness reference.
"""
import argparse
import json
import math
import sys
import time


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq_len", type=int, default=1024)
    ap.add_argument("--n_layer", type=int, default=12)
    ap.add_argument("--n_head", type=int, default=12)
    ap.add_argument("--n_embd", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per mode")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps per mode (compile: the first compiles)")
    ap.add_argument("--modes", default="eager,compile", help="comma-separated: eager, compile")
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--peak_tflops", type=float, default=989.0,
                    help="dense bf16 peak for MFU (H100/H200 SXM: 989)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: only to test this script without a GPU")
    a = ap.parse_args(argv)
    if a.n_embd % a.n_head:
        ap.error(f"--n_head {a.n_head} must divide --n_embd {a.n_embd}")
    if a.steps < 1 or a.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")
    a.modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    for m in a.modes:
        if m not in ("eager", "compile"):
            ap.error(f"--modes: unknown mode '{m}' (eager, compile)")
    return a


def build_model(torch, a):
    nn, F = torch.nn, torch.nn.functional
    has_sdpa = hasattr(F, "scaled_dot_product_attention")

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            C = a.n_embd
            self.ln_1 = nn.LayerNorm(C)
            self.c_attn = nn.Linear(C, 3 * C)
            self.attn_proj = nn.Linear(C, C)
            self.ln_2 = nn.LayerNorm(C)
            self.c_fc = nn.Linear(C, 4 * C)
            self.mlp_proj = nn.Linear(4 * C, C)

        def attn(self, x):
            B, T, C = x.shape
            H = a.n_head
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            if has_sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # torch < 2.0 (only the CPU self-test runs there)
                att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
                mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
                att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
                y = att @ v
            return self.attn_proj(y.transpose(1, 2).contiguous().view(B, T, C))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(a.vocab, a.n_embd)
            self.wpe = nn.Embedding(a.seq_len, a.n_embd)
            self.blocks = nn.ModuleList(Block() for _ in range(a.n_layer))
            self.ln_f = nn.LayerNorm(a.n_embd)
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    std = 0.02
                    if name.endswith("proj.weight"):  # GPT-2's scaled residual projections
                        std = 0.02 / math.sqrt(2 * a.n_layer)
                    nn.init.normal_(p, mean=0.0, std=std)
                elif name.endswith("bias") and "ln" not in name:
                    nn.init.zeros_(p)

        def forward(self, idx, targets):
            T = idx.shape[1]
            pos = torch.arange(T, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for b in self.blocks:
                x = b(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)  # tied head
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))

    return GPT()


def flops_per_token(model, a):
    n = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
    return 6 * n + 12 * a.n_layer * a.n_embd * a.seq_len, n


def make_optimizer(torch, model, a):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]
    kw = dict(lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    if a.device == "cuda":
        try:
            return torch.optim.AdamW(groups, fused=True, **kw), "fused"
        except (TypeError, RuntimeError):
            pass
    return torch.optim.AdamW(groups, **kw), "default"


def run_mode(torch, a, mode):
    dev = torch.device(a.device)
    torch.manual_seed(1234)
    model = build_model(torch, a).to(dev)
    fpt, n_params = flops_per_token(model, a)
    opt, opt_kind = make_optimizer(torch, model, a)
    step_model = model
    if mode == "compile":
        if not hasattr(torch, "compile"):
            return {"mode": mode, "skipped": f"torch {torch.__version__} has no torch.compile"}
        step_model = torch.compile(model)
    # A few fixed batches of random tokens, cycled (the data pipeline is not what is measured).
    g = torch.Generator(device="cpu").manual_seed(0)
    batches = [torch.randint(0, a.vocab, (a.batch, a.seq_len + 1), generator=g).to(dev)
               for _ in range(4)]
    amp = torch.autocast(device_type=a.device, dtype=torch.bfloat16)

    def step(i):
        xy = batches[i % len(batches)]
        with amp:
            loss = step_model(xy[:, :-1], xy[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    t0 = time.perf_counter()
    loss = None
    for i in range(a.warmup):
        loss = step(i)
    sync()
    warm_s = time.perf_counter() - t0
    if a.device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(a.steps):
            loss = step(a.warmup + i)
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end)
    else:
        t1 = time.perf_counter()
        for i in range(a.steps):
            loss = step(a.warmup + i)
        ms = (time.perf_counter() - t1) * 1e3
    step_ms = ms / a.steps
    tok_s = a.batch * a.seq_len / (step_ms / 1e3)
    res = {"mode": mode, "tokens_per_sec": tok_s, "step_ms": step_ms,
           "mfu": tok_s * fpt / (a.peak_tflops * 1e12), "flops_per_token": fpt,
           "params_no_wpe": n_params, "warmup_s": warm_s, "final_loss": float(loss.item()),
           "optimizer": f"AdamW ({opt_kind})"}
    if a.device == "cuda":
        res["max_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
    del step_model, model, opt, batches
    if a.device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    return res


def main(argv):
    a = parse_args(argv)
    try:
        import torch
    except ImportError as e:
        print(f"torch_gpt2.py: cannot import torch ({e}); run it with the PyTorch venv's python3",
              file=sys.stderr)
        return 2
    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"torch_gpt2.py: no CUDA device (torch {torch.__version__}, built for CUDA "
              f"{torch.version.cuda}); this benchmark needs a GPU (--device cpu only tests the "
              f"script)", file=sys.stderr)
        return 2
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        gpu = torch.cuda.get_device_name(0)
    else:
        gpu = "cpu"
    print(f"torch_gpt2.py: torch {torch.__version__} on {gpu}: GPT-2 L={a.n_layer} H={a.n_head} "
          f"C={a.n_embd} V={a.vocab} T={a.seq_len} B={a.batch}, bf16 autocast, "
          f"{a.warmup} warm-up + {a.steps} timed steps", flush=True)
    results = []
    for mode in a.modes:
        try:
            r = run_mode(torch, a, mode)
        except Exception as e:  # report the mode as failed and go on to the next one
            r = {"mode": mode, "error": f"{type(e).__name__}: {e}"}
        results.append(r)
        if "skipped" in r:
            print(f"torch {mode}: SKIPPED ({r['skipped']})", flush=True)
        elif "error" in r:
            print(f"torch {mode}: FAILED ({r['error']})", flush=True)
        else:
            print(f"torch {mode}: tokens/s={r['tokens_per_sec']:.0f}, step_ms={r['step_ms']:.2f}, "
                  f"mfu={r['mfu']:.4f} (warm-up {r['warmup_s']:.1f} s, final loss "
                  f"{r['final_loss']:.4f}, {r['optimizer']}"
                  + (f", peak mem {r['max_mem_gib']:.1f} GiB" if "max_mem_gib" in r else "")
                  + ")", flush=True)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"device": gpu, "torch": torch.__version__, "config": {
                k: getattr(a, k) for k in ("batch", "seq_len", "n_layer", "n_head", "n_embd",
                                           "vocab", "steps", "warmup", "peak_tflops")},
                "results": results}, f, indent=2)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
