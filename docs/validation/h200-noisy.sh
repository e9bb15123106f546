#!/usr/bin/env bash
# Issue 17 on the lent H200 (device tool): the tie-break in a real sweep with noisy steps.
# A "noisy neighbour" shares the GPU: a PyTorch process that, at random, runs bf16 matmuls for
# 20-150 ms and then sleeps 0.2-1 s, as another job on a shared node would. Under it the same
# sweep as h200-history.sh PART=c (upstream Megatron-LM through `megatron-local`, the GPT of
# 12 layers x 1536, micro batch 8/16/32 x recompute none/selective/full) runs in a fresh
# workspace. The neighbour is stopped when the sweep ends, whatever happens. From the repository
# root, bin/ carried (the release binary and the Megatron-LM tree):
#   OUT=$OUT bash docs/validation/h200-noisy.sh
set -u
export PATH=/usr/local/nvidia/bin:$PATH
mkdir -p "$OUT"
cat > /tmp/neighbour.py <<'PY'
import random, time, torch
random.seed(17)
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
while True:
    time.sleep(random.uniform(0.2, 1.0))
    end = time.time() + random.uniform(0.02, 0.15)
    while time.time() < end:
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
PY
python3 /tmp/neighbour.py > "$OUT/neighbour.log" 2>&1 &
NB=$!
trap 'kill $NB 2>/dev/null; wait $NB 2>/dev/null' EXIT
sleep 5
kill -0 $NB || { echo "the neighbour did not start"; cat "$OUT/neighbour.log"; exit 1; }
G=/tmp/noisy PART=c LIMIT=${LIMIT:-540} bash docs/validation/h200-history.sh
