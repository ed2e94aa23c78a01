#!/usr/bin/env python3
"""An independent GPT-2 forward over a Hugging Face-named export, with numpy only.

Reads <folder>/config.json and <folder>/model.safetensors (parsed here by hand: 8-byte
little-endian header length, JSON header, raw little-endian data), runs GPT-2 (transformers'
GPT2LMHeadModel arithmetic: Conv1D weights [in, out], gelu_new, LayerNorm eps from the config,
causal attention scaled by 1/sqrt(head size), logits from the tied wte) in float64, and prints
the mean next-token cross-entropy over the first `sequences` samples of an llm.c token shard
(sample i = tokens [i*T, i*T + T + 1), as dsrun's evaluation cuts them).

With --transformers, loads the folder with transformers.GPT2LMHeadModel.from_pretrained instead
and prints the same loss computed by torch.

usage: hf_gpt2_forward.py FOLDER SHARD SEQ_LEN SEQUENCES [--transformers]
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        arr = np.frombuffer(data[base + begin:base + end], dtype=DTYPES[entry["dtype"]])
        tensors[name] = arr.reshape(entry["shape"]).astype(np.float64)
    return header.get("__metadata__", {}), tensors


def read_shard(path):
    with open(path, "rb") as f:
        head = np.frombuffer(f.read(1024), dtype="<i4")
        if head[0] != 20240520:
            raise SystemExit(f"{path}: not an llm.c token shard (magic {head[0]})")
        tokens = np.frombuffer(f.read(), dtype="<u2")
    return tokens[:head[2]].astype(np.int64)


def samples(tokens, seq_len, count):
    need = count * seq_len + 1
    if len(tokens) < need:
        raise SystemExit(f"shard holds {len(tokens)} tokens, {need} needed")
    return np.stack([tokens[i * seq_len:i * seq_len + seq_len + 1] for i in range(count)])


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def numpy_loss(folder, batch):
    cfg = json.load(open(f"{folder}/config.json"))
    meta, w = read_safetensors(f"{folder}/model.safetensors")
    assert meta.get("format") == "pt", meta
    assert cfg["architectures"] == ["GPT2LMHeadModel"] and cfg["activation_function"] == "gelu_new"
    eps, nh, c = cfg["layer_norm_epsilon"], cfg["n_head"], cfg["n_embd"]
    inputs, targets = batch[:, :-1], batch[:, 1:]
    bsz, t = inputs.shape
    hs = c // nh
    x = w["transformer.wte.weight"][inputs] + w["transformer.wpe.weight"][:t]
    mask = np.triu(np.ones((t, t), dtype=bool), 1)
    for layer in range(cfg["n_layer"]):
        p = lambda name: w[f"transformer.h.{layer}.{name}"]
        h = layer_norm(x, p("ln_1.weight"), p("ln_1.bias"), eps)
        qkv = h @ p("attn.c_attn.weight") + p("attn.c_attn.bias")
        q, k, v = (qkv[..., i * c:(i + 1) * c].reshape(bsz, t, nh, hs).transpose(0, 2, 1, 3)
                   for i in range(3))
        att = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hs)
        att = np.where(mask, -np.inf, att)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(bsz, t, c)
        x = x + y @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        h = layer_norm(x, p("ln_2.weight"), p("ln_2.bias"), eps)
        h = gelu_new(h @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias"))
        x = x + h @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
    x = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    logits = x @ w["transformer.wte.weight"].T
    logits -= logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -np.take_along_axis(logp, targets[..., None], -1).mean()


def transformers_loss(folder, batch):
    import torch
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(folder).double().eval()
    ids = torch.tensor(batch)
    with torch.no_grad():
        logits = model(input_ids=ids[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             ids[:, 1:].reshape(-1)).item()


def main(argv):
    if len(argv) < 5:
        raise SystemExit(__doc__)
    folder, shard, seq_len, count = argv[1], argv[2], int(argv[3]), int(argv[4])
    batch = samples(read_shard(shard), seq_len, count)
    if "--transformers" in argv[5:]:
        print(f"loss {transformers_loss(folder, batch):.12g}")
    else:
        print(f"loss {numpy_loss(folder, batch):.12g}")


if __name__ == "__main__":
    main(sys.argv)
