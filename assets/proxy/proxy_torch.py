#!/usr/bin/env python3
"""PyTorch proxy for a Primus/Megatron training trial (primus-tune profile `proxy-torch`).

Usage: python3 proxy_torch.py --resolved <trial>/resolved.json --iters N [--device cuda|cpu]

It trains the part of the model ONE rank of the configured job holds: ceil(num_layers / PP)
layers, heads and FFN split by TP, num_experts / EP local experts (each token goes to top-k of
them, so a rank runs as many expert tokens as in the real job), vocabulary split by TP; `--scale
S` further divides widths, vocabulary and sequence length by S (1 = the config's size). A GPT:
embedding, blocks of RMSNorm + causal attention (scaled_dot_product_attention, grouped-query when
configured) and RMSNorm + MLP (SwiGLU or GeLU) or MoE (softmax router, top-k, tokens gathered per
expert and scattered back, optional shared expert), final norm, untied LM head. With `bf16` the
weights, gradients and AdamW states are bf16 (8 bytes per parameter, about a Megatron rank with
the distributed optimizer), else fp32. Recompute uses torch.utils.checkpoint(use_reentrant=False):
`full` per recompute_method / recompute_num_layers, `selective` around core attention only.
Mock data: uniform random tokens whose target is a fixed function of the token 80% of the time.

Every printed number is measured, in upstream Megatron-LM's log format: elapsed time is the
synchronized wall time of the iteration; TFLOP/s is the matmul FLOPs this rank executed (counted
from the shapes it ran: backward = 2x forward, recompute included, causal attention at half) over
that time; loss is the iteration's mean cross entropy; grad norm the total norm before clipping;
learning rate the value AdamW used (Megatron's warmup + decay schedule); the memory line gives
torch.cuda's allocator statistics (on CPU, the resident set). Out-of-memory is not caught: it
ends the process with torch's traceback and a non-zero status, as in real training.
"""

import argparse
import datetime
import json
import math
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


def get(cfg, key, default):
    value = cfg.get(key)
    return default if value is None else value


def shape_from(cfg, scale):
    """The rank's model and run, from the resolved config (see the module docstring)."""
    tp = max(1, int(get(cfg, "tensor_model_parallel_size", 1)))
    pp = max(1, int(get(cfg, "pipeline_model_parallel_size", 1)))
    cp = max(1, int(get(cfg, "context_parallel_size", 1)))
    ep = max(1, int(get(cfg, "expert_model_parallel_size", 1)))
    world = max(1, int(get(cfg, "_world_size", 1)))
    hidden = int(get(cfg, "hidden_size", 1024))
    heads = int(get(cfg, "num_attention_heads", 16))
    head_dim = int(get(cfg, "kv_channels", hidden // heads))
    gqa = cfg.get("group_query_attention") is not False
    groups = int(get(cfg, "num_query_groups", heads)) if gqa else heads
    ffn = int(get(cfg, "ffn_hidden_size", 4 * hidden))
    experts = int(get(cfg, "num_experts", 0))
    s = {
        "hidden": max(8, hidden // scale),
        "heads": max(1, heads // tp // scale),
        "head_dim": head_dim,
        "ffn": max(8, ffn // tp // scale),
        "swiglu": bool(get(cfg, "swiglu", False)),
        "layers": max(1, math.ceil(int(get(cfg, "num_layers", 24)) / pp)),
        "seq": max(8, int(get(cfg, "seq_length", 2048)) // cp // scale),
        "vocab": max(32, int(get(cfg, "padded_vocab_size", get(cfg, "vocab_size", 32000))) // tp // scale),
        "micro_batch": max(1, int(get(cfg, "micro_batch_size", 1))),
        "dp": max(1, world // (tp * pp * cp)),
        "bf16": bool(get(cfg, "bf16", False)),
        "recompute": str(get(cfg, "recompute_granularity", "none")).lower(),
        "recompute_method": str(get(cfg, "recompute_method", "uniform")).lower(),
        "recompute_layers": int(get(cfg, "recompute_num_layers", 1)),
        "experts": max(1, experts // ep) if experts else 0,
        "moe_ffn": max(8, int(get(cfg, "moe_ffn_hidden_size", ffn)) // scale),
        "shared_ffn": int(get(cfg, "moe_shared_expert_intermediate_size", 0)) // tp // scale,
        "lr": float(get(cfg, "lr", 1e-4)),
        "min_lr": float(get(cfg, "min_lr", 0.0)),
        "train_iters": int(get(cfg, "train_iters", 10)),
        "betas": (float(get(cfg, "adam_beta1", 0.9)), float(get(cfg, "adam_beta2", 0.999))),
        "eps": float(get(cfg, "adam_eps", 1e-8)),
        "weight_decay": float(get(cfg, "weight_decay", 0.01)),
        "clip_grad": float(get(cfg, "clip_grad", 1.0)),
        "seed": int(get(cfg, "seed", 1234)),
    }
    s["kv_heads"] = max(1, min(s["heads"], s["heads"] * groups // heads))
    while s["heads"] % s["kv_heads"]:
        s["kv_heads"] -= 1
    s["topk"] = min(int(get(cfg, "moe_router_topk", 2)), s["experts"]) if s["experts"] else 0
    s["moe_fraction"] = moe_fraction(cfg.get("moe_layer_freq"), int(get(cfg, "num_layers", 24)))
    gbs = int(get(cfg, "global_batch_size", s["micro_batch"] * s["dp"]))
    s["config_micro_batches"] = max(1, gbs // (s["micro_batch"] * s["dp"]))
    decay_iters = int(get(cfg, "lr_decay_iters", s["train_iters"]))
    warmup = cfg.get("lr_warmup_iters")
    if warmup is None:
        warmup = float(get(cfg, "lr_warmup_fraction", 0.0)) * decay_iters
    s["warmup"], s["decay_iters"] = int(warmup), decay_iters
    s["decay_style"] = str(get(cfg, "lr_decay_style", "constant")).lower()
    return s


def moe_fraction(freq, layers):
    """Fraction of MoE layers from `moe_layer_freq`: an int k, a list, or "([0]*1+[1]*26)"."""
    if freq is None:
        return 1.0
    if isinstance(freq, str):
        try:
            freq = int(freq)
        except ValueError:
            pattern = []
            for term in freq.strip().strip("()").split("+"):
                items, _, count = term.partition("*")
                pattern += [int(x) for x in items.strip().strip("[]").split(",")] * int(count or 1)
            freq = pattern
    if isinstance(freq, int):
        freq = [1 if i % max(1, freq) == 0 else 0 for i in range(layers)]
    return sum(1 for x in freq if x) / max(1, len(freq))


def learning_rate(s, it):
    """Megatron's schedule at step `it` (1-based): linear warmup, then decay to min_lr."""
    if s["warmup"] > 0 and it <= s["warmup"]:
        return s["lr"] * it / s["warmup"]
    style = s["decay_style"]
    if style not in ("linear", "cosine", "inverse-square-root"):
        return s["lr"]
    if style == "inverse-square-root":
        return max(s["min_lr"], s["lr"] * math.sqrt(max(1, s["warmup"])) / math.sqrt(max(1, it)))
    if it > s["decay_iters"] or s["decay_iters"] <= s["warmup"]:
        return s["min_lr"]
    ratio = (it - s["warmup"]) / (s["decay_iters"] - s["warmup"])
    coeff = 1.0 - ratio if style == "linear" else 0.5 * (math.cos(math.pi * ratio) + 1.0)
    return s["min_lr"] + coeff * (s["lr"] - s["min_lr"])


class Mlp(nn.Module):
    def __init__(self, hidden, ffn, swiglu):
        super().__init__()
        self.swiglu = swiglu
        self.fc1 = nn.Linear(hidden, 2 * ffn if swiglu else ffn, bias=False)
        self.fc2 = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        h = self.fc1(x)
        if self.swiglu:
            gate, up = h.chunk(2, dim=-1)
            return self.fc2(F.silu(gate) * up)
        return self.fc2(F.gelu(h, approximate="tanh"))


class Moe(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.topk = s["topk"]
        self.router = nn.Linear(s["hidden"], s["experts"], bias=False)
        self.experts = nn.ModuleList(Mlp(s["hidden"], s["moe_ffn"], s["swiglu"]) for _ in range(s["experts"]))
        self.shared = Mlp(s["hidden"], s["shared_ffn"], s["swiglu"]) if s["shared_ffn"] > 0 else None

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        probs = torch.softmax(self.router(flat).float(), dim=-1)
        weights, chosen = probs.topk(self.topk, dim=-1)
        # Permute the (token, expert) pairs by expert, run each expert on its rows, scatter back.
        order = chosen.reshape(-1).argsort(stable=True)
        counts = torch.bincount(chosen.reshape(-1), minlength=len(self.experts)).tolist()
        token = order // self.topk
        y = torch.cat([expert(r) for expert, r in zip(self.experts, flat[token].split(counts))])
        y = y * weights.reshape(-1)[order, None]
        out = torch.zeros_like(flat).index_add_(0, token, y.to(flat.dtype))
        if self.shared is not None:
            out = out + self.shared(flat)
        return out.view_as(x)


class Block(nn.Module):
    def __init__(self, s, moe):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = s["heads"], s["kv_heads"], s["head_dim"]
        width, kv_width = self.heads * self.head_dim, self.kv_heads * self.head_dim
        self.split = [width, kv_width, kv_width]
        self.norm1, self.norm2 = nn.RMSNorm(s["hidden"]), nn.RMSNorm(s["hidden"])
        self.qkv = nn.Linear(s["hidden"], width + 2 * kv_width, bias=False)
        self.proj = nn.Linear(width, s["hidden"], bias=False)
        self.mlp = Moe(s) if moe else Mlp(s["hidden"], s["ffn"], s["swiglu"])
        self.selective = s["recompute"] == "selective"

    def core_attention(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(self.split, dim=-1)
        q = q.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.selective and torch.is_grad_enabled():
            o = checkpoint(self.core_attention, q, k, v, use_reentrant=False)
        else:
            o = self.core_attention(q, k, v)
        x = x + self.proj(o.transpose(1, 2).reshape(b, t, -1))
        return x + self.mlp(self.norm2(x))


class Gpt(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.s = s
        moe_layers = max(1, round(s["moe_fraction"] * s["layers"])) if s["experts"] else 0
        self.embed = nn.Embedding(s["vocab"], s["hidden"])
        self.blocks = nn.ModuleList(Block(s, i >= s["layers"] - moe_layers) for i in range(s["layers"]))
        self.norm = nn.RMSNorm(s["hidden"])
        self.head = nn.Linear(s["hidden"], s["vocab"], bias=False)

    def recomputed(self):
        """Which layers are recomputed, as (start, end) segments checkpointed as one."""
        s, n = self.s, len(self.blocks)
        if s["recompute"] != "full":
            return []
        k = max(1, s["recompute_layers"])
        if s["recompute_method"] == "block":
            return [(i, i + 1) for i in range(min(k, n))]
        return [(i, min(i + k, n)) for i in range(0, n, k)]

    def forward(self, tokens):
        x, segments, i = self.embed(tokens), dict(self.recomputed()), 0
        while i < len(self.blocks):
            end, run = segments.get(i, i + 1), self.run_blocks
            x = checkpoint(run, x, i, end, use_reentrant=False) if i in segments else run(x, i, end)
            i = end
        return self.head(self.norm(x))

    def run_blocks(self, x, start, end):
        for block in self.blocks[start:end]:
            x = block(x)
        return x


def flops_per_micro_batch(model):
    """Matmul FLOPs of one micro batch's forward + backward as this model executes them."""
    s, tokens = model.s, model.s["micro_batch"] * model.s["seq"]
    h, width, kv_width = s["hidden"], s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"]
    mlp = lambda ffn: 2 * h * ffn * (3 if s["swiglu"] else 2)  # noqa: E731
    per_layer = []  # (forward FLOPs, of which core attention)
    for block in model.blocks:
        core = 2 * tokens * s["seq"] * width  # QK^T and P.V, causal: half of 4 * s * s * width
        f = 2 * tokens * h * (width + 2 * kv_width) + 2 * tokens * width * h + core
        if isinstance(block.mlp, Moe):
            shared = mlp(s["shared_ffn"]) if s["shared_ffn"] > 0 else 0
            f += tokens * (2 * h * s["experts"] + s["topk"] * mlp(s["moe_ffn"]) + shared)
        else:
            f += tokens * mlp(s["ffn"])
        per_layer.append((f, core))
    total = 3 * (sum(f for f, _ in per_layer) + 2 * tokens * h * s["vocab"])
    for start, end in model.recomputed():
        total += sum(f for f, _ in per_layer[start:end])
    if s["recompute"] == "selective":
        total += sum(core for _, core in per_layer)
    return total


def memory_mb(device):
    """(allocated, max allocated, reserved, max reserved) in MB; on CPU the resident set."""
    if device.type == "cuda":
        c = torch.cuda
        stats = (c.memory_allocated(), c.max_memory_allocated(), c.memory_reserved(), c.max_memory_reserved())
        return tuple(x / 2**20 for x in stats)
    status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    rss, hwm = (float(status[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))
    return rss, hwm, rss, hwm


LOG_FORMAT = (  # upstream Megatron-LM's training_log fields, in its order and formats
    " iteration {:8d}/{:8d} | consumed samples: {:12d} | elapsed time per iteration (ms): {:.1f} |"
    " throughput per GPU (TFLOP/s/GPU): {:.1f} | learning rate: {:.6E} | global batch size: {:5d} |"
    " lm loss: {:.6E} | loss scale: {:.1f} | grad norm: {:.3f} | number of skipped iterations: {:3d} |"
    " number of nan iterations: {:3d} |"
)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resolved", required=True, help="the trial's resolved.json")
    parser.add_argument("--iters", type=int, required=True)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--scale", type=int, default=1, help="divide widths, vocabulary and sequence by this")
    parser.add_argument("--max-microbatches", type=int, default=8)
    parser.add_argument("--log-interval", type=int, default=1)
    args = parser.parse_args()

    with open(args.resolved) as f:
        s = shape_from(json.load(f), max(1, args.scale))
    device = torch.device(args.device)
    torch.manual_seed(s["seed"])
    with device:  # build the weights where they live: initialising billions on the host is slow
        model = Gpt(s).to(dtype=torch.bfloat16 if s["bf16"] else torch.float32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=s["lr"], betas=s["betas"], eps=s["eps"],
                                  weight_decay=s["weight_decay"], fused=device.type == "cuda")
    micro_batches = min(s["config_micro_batches"], max(1, args.max_microbatches))
    global_batch = micro_batches * s["micro_batch"] * s["dp"]
    flops = micro_batches * flops_per_micro_batch(model)
    moe_layers = sum(isinstance(b.mlp, Moe) for b in model.blocks)
    print(f"primus-tune proxy-torch: {device}, {'bf16' if s['bf16'] else 'fp32'}, scale 1/{args.scale}, "
          f"{s['layers']} layers ({moe_layers} MoE: {s['experts']} local experts top-{s['topk']}), "
          f"hidden {s['hidden']}, heads {s['heads']}x{s['head_dim']} (kv {s['kv_heads']}), ffn {s['ffn']}, "
          f"seq {s['seq']}, vocab {s['vocab']}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M "
          f"parameters, micro batch {s['micro_batch']} x {micro_batches} per iteration (config "
          f"{s['config_micro_batches']} per DP rank, DP {s['dp']}; at most --max-microbatches "
          f"{args.max_microbatches}), recompute {s['recompute']}, {flops / 1e12:.3f} TFLOP per iteration",
          flush=True)

    gen = torch.Generator(device=device).manual_seed(s["seed"])
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    shape = (s["micro_batch"], s["seq"])
    for it in range(1, args.iters + 1):
        sync()
        start = time.perf_counter()
        lr = learning_rate(s, it)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), device=device)
        for _ in range(micro_batches):
            tokens = torch.randint(0, s["vocab"], shape, device=device, generator=gen)
            noise = torch.randint(0, s["vocab"], shape, device=device, generator=gen)
            keep = torch.rand(shape, device=device, generator=gen) < 0.8
            targets = torch.where(keep, (5 * tokens + 3) % s["vocab"], noise)
            loss = F.cross_entropy(model(tokens).float().view(-1, s["vocab"]), targets.view(-1))
            (loss / micro_batches).backward()
            loss_sum += loss.detach()
        clip = s["clip_grad"] if s["clip_grad"] > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip).item()
        skipped = not math.isfinite(grad_norm)
        if not skipped:
            optimizer.step()
        loss = loss_sum.item() / micro_batches
        sync()
        elapsed = time.perf_counter() - start
        if it % args.log_interval == 0 or it == args.iters:
            stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")
            fields = (it, args.iters, it * global_batch, elapsed * 1000.0, flops / elapsed / 1e12, lr,
                      global_batch, loss, 1.0, grad_norm, int(skipped), int(not math.isfinite(loss)))
            print(f" [{stamp}]" + LOG_FORMAT.format(*fields), flush=True)
        if it == 10 or (it == args.iters and it != 10):
            mb = memory_mb(device)
            print(f"[Rank 0] (after {it} iterations) memory (MB) | allocated: {mb[0]:.2f} | "
                  f"max allocated: {mb[1]:.2f} | reserved: {mb[2]:.2f} | max reserved: {mb[3]:.2f}", flush=True)


if __name__ == "__main__":
    main()
