#!/usr/bin/env bash
# The checklist's memory step on a real GPU (device tool): before any trial, then after one
# trial of the config as it is with upstream Megatron-LM (megatron-local), whose telemetry (NVML)
# records the GPU's memory. From the repository root, bin/primus-tune and bin/megatron carried:
#   OUT=$OUT bash docs/validation/h200-checklist-memory.sh
set -u
OUT=${OUT:-/tmp/pt-ckmem}
mkdir -p "$OUT"
export PATH=/usr/local/nvidia/bin:$PATH
G=$(mktemp -d)
cp bin/primus-tune "$G/primus-tune"
B=$G/primus-tune
export MEGATRON_PATH=$PWD/bin/megatron
W=$G/work
mkdir -p "$W"
cp -r presets/examples "$W/ex"
export XDG_CONFIG_HOME=$W/config XDG_DATA_HOME=$W/data XDG_STATE_HOME=$W/state PRIMUS_TUNE_WORKSPACE=$W/ws
EXP=$W/ex/experiments/llama3_8B-BF16-pretrain.yaml
# The dense GPT shape of the grids, written into the experiment (the checklist reads the file).
"$B" set "$EXP" seq_length=2048 max_position_embeddings=2048 global_batch_size=32 \
  transformer_impl=local use_flash_attn=false num_layers=12 hidden_size=1536 ffn_hidden_size=6144 \
  num_attention_heads=12 num_query_groups=12 micro_batch_size=8 --write --no-backup > "$OUT/console.txt" 2>&1
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "\$ primus-tune checklist \$EXP   # before any trial"
  "$B" checklist "$EXP" --gpus 1 | sed -n '/^4\. Memory/,/^$/p'
  echo "\$ primus-tune run \$EXP --profile megatron-local --gpus 1 --max-iters 30"
  "$B" run "$EXP" --profile megatron-local --gpus 1 --max-iters 30 2>&1 | tail -6
  echo "\$ primus-tune checklist \$EXP   # after it"
  "$B" checklist "$EXP" --gpus 1 | sed -n '/^4\. Memory/,/^$/p'
  echo "\$ primus-tune checklist \$EXP --set recompute_granularity=full ... (another config: not measured)"
  "$B" checklist "$EXP" --gpus 1 --set recompute_granularity=full --set recompute_method=uniform --set recompute_num_layers=1 | sed -n '/^4\. Memory/,/^$/p'
  "$B" trials --config "$EXP" --json | python3 -c "import json,sys; t=json.load(sys.stdin)[-1]; print('telemetry:', [(g['gpu'], g.get('vram_total_bytes'), g.get('vram_peak_bytes')) for g in t['summary']['telemetry']])"
} >> "$OUT/console.txt" 2>&1
cat "$OUT/console.txt"
