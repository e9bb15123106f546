#!/usr/bin/env bash
# Issue 45 on the lent single-GPU machine (device tool; no multi-GPU kind was lent): the
# parallel-layout space end to end on a real GPU. On one GPU a layout is TP1 PP1 CP1 and the
# micro batch, so this checks what one GPU can: the space made for the trials' world, the
# layout prior (with its per-micro-batch overhead) ordering the launches against what the GPU
# measures, and the record. The shape is held out from the grids the overhead constant was
# fitted on: an 8-layer GPT, hidden 2048, FFN 8192, 16 heads, sequence 2048, global batch 32,
# current micro batch 4, bf16, `--transformer-impl local` (as those grids: no Transformer
# Engine), upstream Megatron-LM (bin/megatron, never committed) through `megatron-local`.
# One device call, from the repository root, bin/ carried (the release binary and Megatron-LM):
#   OUT=$OUT bash docs/validation/h200-layouts.sh              # layouts, then the sweep
#   PART=grid OUT=$OUT bash docs/validation/h200-layouts.sh    # every micro batch, one run each
# PART=grid runs micro batch 1, 2, 4 and 8 with `primus-tune run` (18 iterations each, the same
# machine), the measurements the prior's micro-batch effect is checked against.
set -u
G=${G:-/tmp/lay}
LIMIT=${LIMIT:-420}
export PATH=/usr/local/nvidia/bin:$PATH
rm -rf "$G"; mkdir -p "$G/work"
cp bin/primus-tune "$G/primus-tune"
cp -r bin/megatron "$G/megatron"
cp -r presets/examples "$G/work/ex"
B=$G/primus-tune
export MEGATRON_PATH=$G/megatron
W=$G/work
export XDG_CONFIG_HOME=$W/config XDG_DATA_HOME=$W/data XDG_STATE_HOME=$W/state
export PRIMUS_TUNE_WORKSPACE=$W/ws
EXP=$W/ex/experiments/llama3_8B-BF16-pretrain.yaml
SHAPE=(--set seq_length=2048 --set max_position_embeddings=2048 --set global_batch_size=32
       --set transformer_impl=local --set use_flash_attn=false
       --set num_layers=8 --set hidden_size=2048 --set ffn_hidden_size=8192
       --set num_attention_heads=16 --set num_query_groups=16 --set micro_batch_size=4)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt"
"$B" --version >> "$OUT/gpu.txt" 2>&1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) NAME=H200 ;; *H100*) NAME=H100 ;; *) NAME="$GPU" ;; esac
{ echo "\$ primus-tune layouts EXP ${SHAPE[*]} --gpus 1 --gpu $NAME"
  "$B" layouts "$EXP" "${SHAPE[@]}" --gpus 1 --gpu "$NAME"; } > "$OUT/layouts.txt" 2>&1
"$B" layouts "$EXP" "${SHAPE[@]}" --gpus 1 --gpu "$NAME" --json > "$OUT/layouts.json" 2>&1
if [ "${PART:-sweep}" = grid ]; then
  for m in 1 2 4 8; do
    { echo "\$ primus-tune run EXP ${SHAPE[*]} --set micro_batch_size=$m --profile megatron-local --gpus 1 --max-iters 18"
      "$B" run "$EXP" "${SHAPE[@]}" --set micro_batch_size=$m --profile megatron-local --gpus 1 \
        --max-iters 18; echo "exit $?"; } > "$OUT/run-mbs$m.txt" 2>&1
    tail -4 "$OUT/run-mbs$m.txt"
  done
  "$B" trials --all > "$OUT/trials.txt" 2>&1
  python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d); d.close()" \
    "$W/ws/trials.db" "$OUT/trials.db"
  cat "$OUT/layouts.txt" "$OUT/trials.txt"
  exit 0
fi
args=(sweep "$EXP" "${SHAPE[@]}" --space parallel-layout --profile megatron-local --gpus 1
      --name layouts-1gpu --first-iters 8 --max-iters 24)
echo "\$ primus-tune ${args[*]}" > "$OUT/sweep.txt"
t0=$(date +%s)
timeout -k 15 -s TERM "$LIMIT" "$B" "${args[@]}" >> "$OUT/sweep.txt" 2>&1
echo "exit $? after $(( $(date +%s) - t0 )) s" >> "$OUT/sweep.txt"
"$B" studies show layouts-1gpu --log --config "$EXP" > "$OUT/log.txt" 2>&1
"$B" studies show layouts-1gpu --config "$EXP" --json > "$OUT/study.json" 2>&1
python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d); d.close()" \
  "$W/ws/trials.db" "$OUT/trials.db" 2>> "$OUT/sweep.txt"
cat "$OUT/layouts.txt" "$OUT/sweep.txt"
