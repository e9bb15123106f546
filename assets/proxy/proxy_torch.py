#!/usr/bin/env python3
"""PyTorch proxy workload for primus-tune (GPU machines without Primus).

Builds a small GPT (or MoE GPT) from a trial's resolved Megatron parameters, trains it on random
tokens (mock data) and prints one line per iteration in upstream Megatron-LM's format, plus
Megatron's `report_memory` line after iteration 10 and at the end. Every number printed is
measured by this process: the iteration's wall time (with device synchronisation), the model
FLOPs it executed divided by that time, the loss and gradient norm it computed, the learning
rate it used and the allocator's memory figures. An out-of-memory error is not caught: it ends
the process with torch's own traceback, as real training would.

Usage: proxy_torch.py --resolved resolved.json --iters 30 [--device cuda|cpu] [--scale 1.0]
"""

import argparse
import datetime
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def get(cfg, key, default):
    value = cfg.get(key)
    return default if value is None else value


class Attention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, s, h))


class Mlp(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.up = nn.Linear(hidden, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        a, g = self.up(x).chunk(2, dim=-1)
        return self.down(F.silu(g) * a)


class Moe(nn.Module):
    """Top-k routed experts: each token goes to its k best experts only."""

    def __init__(self, hidden, ffn, experts, topk):
        super().__init__()
        self.topk = topk
        self.router = nn.Linear(hidden, experts, bias=False)
        self.experts = nn.ModuleList(Mlp(hidden, ffn) for _ in range(experts))

    def forward(self, x):
        b, s, h = x.shape
        tokens = x.reshape(-1, h)
        probs = torch.softmax(self.router(tokens).float(), dim=-1)
        weight, chosen = probs.topk(self.topk, dim=-1)
        weight = (weight / weight.sum(dim=-1, keepdim=True)).to(x.dtype)
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            out.index_add_(0, rows, expert(tokens[rows]) * weight[rows, slot, None])
        return out.view(b, s, h)


class Block(nn.Module):
    def __init__(self, hidden, heads, ffn, experts, topk, moe_ffn):
        super().__init__()
        self.norm1 = nn.RMSNorm(hidden)
        self.attn = Attention(hidden, heads)
        self.norm2 = nn.RMSNorm(hidden)
        self.mlp = Moe(hidden, moe_ffn, experts, topk) if experts > 1 else Mlp(hidden, ffn)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Gpt(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.shape = shape
        self.embed = nn.Embedding(shape["vocab"], shape["hidden"])
        self.blocks = nn.ModuleList(
            Block(shape["hidden"], shape["heads"], shape["ffn"], shape["experts"], shape["topk"], shape["moe_ffn"])
            for _ in range(shape["layers"])
        )
        self.norm = nn.RMSNorm(shape["hidden"])
        self.head = nn.Linear(shape["hidden"], shape["vocab"], bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for i, block in enumerate(self.blocks):
            if i < self.shape["recompute_layers"]:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.head(self.norm(x))


def shape_from(cfg, scale):
    heads = int(get(cfg, "num_attention_heads", 16))
    hidden = int(get(cfg, "hidden_size", 1024) * scale) // heads * heads
    layers = int(get(cfg, "num_layers", 4))
    experts = int(get(cfg, "num_experts", 0) or 0)
    granularity = cfg.get("recompute_granularity")
    recompute_layers = 0
    if granularity == "full":
        recompute_layers = int(get(cfg, "recompute_num_layers", layers)) if cfg.get("recompute_method") else layers
    ffn = int(get(cfg, "ffn_hidden_size", 4 * get(cfg, "hidden_size", 1024)) * scale)
    moe_ffn = int(get(cfg, "moe_ffn_hidden_size", ffn) * scale) if experts > 1 else ffn
    return {
        "hidden": hidden,
        "heads": heads,
        "layers": layers,
        "ffn": ffn,
        "experts": experts,
        "topk": min(int(get(cfg, "moe_router_topk", 2)), max(experts, 1)),
        "moe_ffn": moe_ffn,
        "vocab": int(get(cfg, "padded_vocab_size", get(cfg, "vocab_size", 32000))),
        "seq": int(get(cfg, "seq_length", 2048)),
        "recompute_layers": min(recompute_layers, layers),
    }


def active_params(shape):
    """Parameters one token touches (experts: only its top-k), embedding table excluded."""
    h, f = shape["hidden"], shape["ffn"]
    attn = 4 * h * h
    if shape["experts"] > 1:
        mlp = shape["topk"] * 3 * h * shape["moe_ffn"] + h * shape["experts"]
    else:
        mlp = 3 * h * f
    return shape["layers"] * (attn + mlp + 2 * h) + h * shape["vocab"] + h


def model_flops(shape, tokens):
    """Training FLOPs (forward + backward) of `tokens` tokens: 6·N per token plus attention."""
    attention = 12 * shape["layers"] * shape["hidden"] * shape["seq"]
    return tokens * (6 * active_params(shape) + attention)


def memory_line(device, iteration):
    mb = 1024 * 1024
    if device.type == "cuda":
        figures = (
            torch.cuda.memory_allocated() / mb,
            torch.cuda.max_memory_allocated() / mb,
            torch.cuda.memory_reserved() / mb,
            torch.cuda.max_memory_reserved() / mb,
        )
    else:
        import resource

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        figures = (rss, rss, rss, rss)
    return (
        f"[Rank 0] (after {iteration} iterations) memory (MB) | allocated: {figures[0]:.2f} | "
        f"max allocated: {figures[1]:.2f} | reserved: {figures[2]:.2f} | max reserved: {figures[3]:.2f}"
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--resolved", required=True, help="resolved.json of the trial")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--scale", type=float, default=1.0, help="width multiplier for hidden and FFN sizes")
    p.add_argument("--max-microbatches", type=int, default=8)
    p.add_argument("--seed", type=int, default=1234)
    args = p.parse_args()

    with open(args.resolved) as f:
        cfg = json.load(f)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    shape = shape_from(cfg, args.scale)
    mbs = int(get(cfg, "micro_batch_size", 1))
    gbs = int(get(cfg, "global_batch_size", mbs))
    world = int(get(cfg, "_world_size", 1))
    model_parallel = int(get(cfg, "tensor_model_parallel_size", 1)) * int(get(cfg, "pipeline_model_parallel_size", 1))
    dp = max(world // max(model_parallel, 1), 1)
    wanted = max(gbs // (mbs * dp), 1)
    micro = min(wanted, args.max_microbatches)
    dtype = torch.bfloat16 if get(cfg, "bf16", True) else torch.float32

    model = Gpt(shape).to(device=device, dtype=dtype)
    lr = float(get(cfg, "lr", 1e-4))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=float(get(cfg, "weight_decay", 0.0)))
    warmup = int(get(cfg, "lr_warmup_iters", 0))
    clip = float(get(cfg, "clip_grad", 1.0))
    print(
        f"proxy-torch: {shape['layers']} layers, hidden {shape['hidden']}, ffn {shape['ffn']}, "
        f"experts {shape['experts']} (top-{shape['topk']}), seq {shape['seq']}, micro batch {mbs}, "
        f"{micro} micro batches per iteration (config asks {wanted}), recompute {shape['recompute_layers']} layers, "
        f"{dtype}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters on {device}",
        flush=True,
    )

    consumed = 0
    nan_iters = 0
    for it in range(1, args.iters + 1):
        step_lr = lr * min(1.0, it / warmup) if warmup > 0 else lr
        for group in opt.param_groups:
            group["lr"] = step_lr
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        total_loss = 0.0
        for _ in range(micro):
            tokens = torch.randint(0, shape["vocab"], (mbs, shape["seq"] + 1), device=device)
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, shape["vocab"]), tokens[:, 1:].reshape(-1)) / micro
            loss.backward()
            total_loss += loss.item()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip))
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - t0
        batch = mbs * micro
        consumed += batch
        if math.isnan(total_loss):
            nan_iters += 1
        tflops = model_flops(shape, batch * shape["seq"]) / elapsed / 1e12
        stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")
        line = (
            f" [{stamp}] iteration {it:8d}/{args.iters:8d} | consumed samples: {consumed:12d} |"
            f" elapsed time per iteration (ms): {elapsed * 1000.0:.1f} |"
            f" throughput per GPU (TFLOP/s/GPU): {tflops:.1f} |"
            f" learning rate: {step_lr:.6E} | global batch size: {batch:5d} |"
            f" lm loss: {total_loss:.6E} | loss scale: 1.0 | grad norm: {grad_norm:.3f} |"
            f" number of skipped iterations:   0 | number of nan iterations: {nan_iters:3d} |"
        )
        print(line, flush=True)
        if it == 10 or it == args.iters:
            print(memory_line(device, it), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
