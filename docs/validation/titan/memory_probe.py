"""What an eager TorchTitan step keeps on the GPU (issue 17, the TorchTitan memory model).

Run on the lent H200 beside TorchTitan v0.2.2 (PYTHONPATH=<torchtitan tree>:<its deps>):
    python3 memory_probe.py FLAVOR SEQ LOCAL_BATCH
It builds TorchTitan's own Qwen3Model (fp32 parameters on one GPU, as torchtitan.train does
without FSDP) and runs 3 training steps the way torchtitan.train runs them on one GPU: the
forward under torch.autocast(bf16), the loss as torchtitan/components/loss.py computes it
(cross-entropy on pred.float(), pred deleted before backward), backward, gradient clipping,
fused AdamW, gradients set to None. It prints, per step, the allocator's counters (allocated
after the forward, the step's max allocated and max reserved), so the gap between what tensors
need and what the caching allocator holds is measured; then, for one transformer block, every
tensor autograd keeps for backward (saved_tensors_hooks), grouped by the module that saved it,
in bytes per token.
"""
import sys
import collections

import torch
import torch.nn.functional as F

from torchtitan.models.qwen3 import qwen3_args
from torchtitan.models.qwen3.model.model import Qwen3Model

flavor, seq, lb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
GIB = 2**30
args = qwen3_args[flavor]
args.max_seq_len = max(args.max_seq_len, seq)
torch.manual_seed(0)
with torch.device("cuda"):
    model = Qwen3Model(args)
with torch.no_grad():
    model.init_weights(buffer_device=torch.device("cuda"))
model.train()
params = sum(p.numel() for p in model.parameters())
opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
vocab = args.vocab_size
print(f"flavor {flavor} seq {seq} local batch {lb}: {params / 1e9:.3f} B parameters, "
      f"{torch.cuda.memory_allocated() / GIB:.2f} GiB allocated after the model")


def batch():
    x = torch.randint(0, vocab, (lb, seq + 1), device="cuda")
    return x[:, :-1].contiguous(), x[:, 1:].contiguous()


for step in range(1, 4):
    tokens, labels = batch()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        pred = model(tokens)
    after_fwd = torch.cuda.memory_allocated()
    loss = F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
    after_loss = torch.cuda.memory_allocated()
    del pred
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(f"step {step}: allocated before {base / GIB:.2f} GiB, after the forward "
          f"{after_fwd / GIB:.2f} (+{(after_fwd - base) / GIB:.2f}), after the loss "
          f"{after_loss / GIB:.2f}; max allocated {torch.cuda.max_memory_allocated() / GIB:.2f} GiB, "
          f"max reserved {torch.cuda.max_memory_reserved() / GIB:.2f} GiB")

# What one block keeps for backward, by the module that saved it.
names = {m: n for n, m in model.named_modules()}
stack = []


def pre(m, _):
    stack.append(names[m])


def post(m, _i, _o):
    stack.pop()


for m in model.modules():
    m.register_forward_pre_hook(pre)
    m.register_forward_hook(post)
param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
seen = {}


def pack(t):
    s = t.untyped_storage()
    ptr = s.data_ptr()
    if ptr not in param_ptrs and ptr not in seen:
        seen[ptr] = (stack[-1] if stack else "-", str(t.dtype).replace("torch.", ""),
                     tuple(t.shape), s.nbytes())
    return t


tokens, _ = batch()
with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        pred = model(tokens)
tok = lb * seq
per_module = collections.defaultdict(int)
print("saved by layers.1 (bytes per token; weight-shaped tensors are autocast's bf16 weight copies):")
for ptr, (mod, dtype, shape, nbytes) in seen.items():
    if mod.startswith("layers.1.") or mod == "layers.1":
        per_module[mod] += nbytes
        print(f"  {mod:40s} {dtype:9s} {str(shape):28s} {nbytes / tok:10.1f}")
print(f"  total {sum(per_module.values()) / tok:.1f} bytes per token")
other = collections.defaultdict(int)
for ptr, (mod, dtype, shape, nbytes) in seen.items():
    if not mod.startswith("layers."):
        other[(mod, dtype, shape)] += nbytes
for (mod, dtype, shape), nbytes in other.items():
    print(f"  outside the blocks: {mod:20s} {dtype:9s} {str(shape):28s} {nbytes / GIB:.3f} GiB")
